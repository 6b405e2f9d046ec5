"""SB3's data collection cut into single steps: what ``collect_rollouts`` does for one env step.

:class:`SB3Collection` steps an SB3 model's training ``VecEnv`` once per :meth:`~SB3Collection.step`
and does for that step what ``OnPolicyAlgorithm.collect_rollouts`` / ``OffPolicyAlgorithm.
collect_rollouts`` followed by ``train()`` do inside ``model.learn``:

- on-policy (PPO, A2C): the transition (value, log-probability) goes to the rollout buffer, a
  time-out adds ``gamma * V(terminal_observation)`` to its stored reward; a full buffer computes
  returns and advantages, dumps the logs, runs ``agent.train()`` and is emptied;
- off-policy (SAC, TD3, DDPG, DQN): uniform warm-up actions until ``learning_starts``, action noise,
  the transition stored by SB3's own ``_store_transition``, ``agent.train(gradient_steps,
  batch_size)`` each time ``train_freq`` is reached, logs dumped every 4 episodes.

It also closes the episodes in progress as truncations (:meth:`~SB3Collection.interrupt`), restarts
them (:meth:`~SB3Collection.reset`) and sets the planned horizon of SB3's schedules
(:meth:`~SB3Collection.plan`). Nothing else in PowerZoo touches SB3's private members.

Private SB3 members relied on (hence ``stable-baselines3>=2.3,<3`` in ``pyproject.toml``):

- ``BaseAlgorithm``: ``_setup_learn``, ``_last_obs``, ``_last_original_obs``,
  ``_update_info_buffer``, ``_update_current_progress_remaining`` (sets
  ``_current_progress_remaining``), ``_total_timesteps``, ``_num_timesteps_at_start``,
  ``_dump_logs`` (only where SB3 has no public ``dump_logs``);
- ``OnPolicyAlgorithm``: ``_last_episode_starts``;
- ``OffPolicyAlgorithm``: ``_sample_action``, ``_store_transition``, ``_on_step``, ``_episode_num``.

Public members used: the models' ``policy`` (``set_training_mode``, ``predict_values``,
``obs_to_tensor``, ``unscale_action``, ``squash_output``, ``reset_noise``), ``actor.reset_noise``,
``rollout_buffer`` / ``replay_buffer`` (``add``, ``reset``, ``compute_returns_and_advantage``,
``pos``, ``full``, ``buffer_size``, ``rewards``, ``dones``, ``timeouts``,
``optimize_memory_usage``, ``handle_timeout_termination``, ``truncate_last_trajectory``), the
hyper-parameters (``gamma``, ``use_sde``, ``sde_sample_freq``, ``learning_starts``, ``train_freq``,
``gradient_steps``, ``batch_size``, ``action_noise``) and ``stable_baselines3.common.utils``'s
``obs_as_tensor`` and ``should_collect_more_steps``.

SB3 and torch are imported when a collection is built, not when this module is imported.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from powerzoo.rl.sb3.logger import console_logger

__all__ = ["SB3Collection", "is_on_policy"]

OFF_POLICY_LOG_INTERVAL = 4
"""Episodes between two log dumps: SB3's default ``log_interval`` of off-policy ``learn``."""

StepHook = Callable[[np.ndarray, np.ndarray, list[dict[str, Any]]], None]
"""Called with ``(rewards, dones, infos)`` right after each env step, before anything is stored."""


def is_on_policy(agent: Any) -> bool:
    """``True`` for an SB3 on-policy model (PPO, A2C), ``False`` for an off-policy one; else
    ``TypeError``."""
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

    if not isinstance(agent, BaseAlgorithm):
        raise TypeError(f"agent must be a Stable-Baselines3 model, got {type(agent).__name__}")
    if isinstance(agent, OnPolicyAlgorithm):
        return True
    if isinstance(agent, OffPolicyAlgorithm):
        return False
    raise TypeError(
        f"{type(agent).__name__} is neither an on-policy nor an off-policy SB3 algorithm"
    )


class SB3Collection:
    """One SB3 collection step per :meth:`step` for ``agent`` on its training env ``venv``.

    Building it runs ``agent._setup_learn`` (logger, episode buffers, first reset unless the agent
    already holds an observation of ``venv``) without resetting ``agent.num_timesteps``; an
    on-policy agent's rollout buffer is emptied.

    Args:
        agent: an SB3 on-policy or off-policy model whose env is ``venv``.
        venv: the ``VecEnv`` that training steps.
        calls: planned number of :meth:`step` calls (horizon of the SB3 schedules).
        on_step: see :data:`StepHook`.

    Attributes:
        on_policy: whether ``agent`` is on-policy (rollout buffer) rather than off-policy.
        episode_starts: per sub-env, whether its next step starts an episode.
    """

    def __init__(self, agent: Any, venv: Any, calls: int, on_step: StepHook) -> None:
        from stable_baselines3.common.type_aliases import TrainFrequencyUnit
        from stable_baselines3.common.vec_env import unwrap_vec_normalize

        self.on_policy = is_on_policy(agent)
        self.agent = agent
        self.venv = venv
        self.n_envs = int(venv.num_envs)
        self._on_step = on_step
        self._vecnorm = unwrap_vec_normalize(venv)
        if not self.on_policy:
            train_freq = agent.train_freq
            if self.n_envs > 1 and getattr(train_freq, "unit", None) == TrainFrequencyUnit.EPISODE:
                raise ValueError(
                    "an episodic train_freq needs a single env; use a step train_freq with a VecEnv"
                )
        # update schedule
        self._iteration = 0
        self._collected_steps = 0
        self._collected_episodes = 0
        self.episode_starts = self._setup_learn(calls)

    def _setup_learn(self, calls: int) -> np.ndarray:
        """``_setup_learn`` without resetting the counters; returns the episode starts of
        ``venv``."""
        agent = self.agent
        continuing = agent._last_obs is not None  # the agent already holds an observation of venv
        console_logger(agent)
        agent._setup_learn(
            calls * self.n_envs,
            callback=None,
            reset_num_timesteps=False,
            tb_log_name=type(agent).__name__,
            progress_bar=False,
        )
        starts = np.ones(self.n_envs, dtype=bool)
        if continuing:  # e.g. after model.learn(): carry on with the episodes in progress
            previous = getattr(agent, "_last_episode_starts", None) if self.on_policy else None
            starts = (
                np.zeros(self.n_envs, dtype=bool)
                if previous is None
                else np.asarray(previous, dtype=bool)
            )
        if self.on_policy:
            agent.rollout_buffer.reset()
            agent._last_episode_starts = starts.copy()
        agent.policy.set_training_mode(False)
        return starts

    def plan(self, calls: int) -> None:
        """Plan ``calls`` steps from the start of this collection (horizon of SB3's schedules)."""
        self.agent._total_timesteps = self.agent._num_timesteps_at_start + calls * self.n_envs

    def step(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """One exploration step of every sub-env, stored; an update when due.

        Returns:
            ``(new_obs, rewards, dones, infos)`` as ``venv.step`` gave them.
        """
        result = self._on_policy_step() if self.on_policy else self._off_policy_step()
        self.episode_starts = np.asarray(result[2], dtype=bool)
        return result

    def reset(self) -> None:
        """Reset ``venv``: every sub-env starts a new episode."""
        agent = self.agent
        agent._last_obs = self.venv.reset()
        self.episode_starts = np.ones(self.n_envs, dtype=bool)
        if self.on_policy:
            agent._last_episode_starts = np.ones(self.n_envs, dtype=bool)
        if self._vecnorm is not None:
            agent._last_original_obs = self._vecnorm.get_original_obs()

    def interrupt(self) -> None:
        """Close the episodes in progress as truncated ones in the agent's buffer.

        On-policy: the last stored reward gets ``gamma * V(s)`` of the observation the episode
        stopped at; off-policy: the last transition is flagged as a time-out (its stored next
        observation is kept). The next step starts new episodes.
        """
        in_progress = ~np.asarray(self.episode_starts, dtype=bool)
        if not in_progress.any():
            return
        agent = self.agent
        if self.on_policy:
            import torch as th
            from stable_baselines3.common.utils import obs_as_tensor

            buffer = agent.rollout_buffer
            if 0 < buffer.pos and not buffer.full:
                with th.no_grad():
                    values = agent.policy.predict_values(
                        obs_as_tensor(agent._last_obs, agent.device)
                    )
                values = values.cpu().numpy().reshape(self.n_envs)
                buffer.rewards[buffer.pos - 1] += agent.gamma * values * in_progress
        else:
            buffer = agent.replay_buffer
            truncate = getattr(buffer, "truncate_last_trajectory", None)
            if callable(truncate):  # HerReplayBuffer keeps its own episode bookkeeping
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    truncate()
            elif buffer is not None and (buffer.pos > 0 or buffer.full):
                last = (buffer.pos - 1) % buffer.buffer_size
                if getattr(buffer, "optimize_memory_usage", False):
                    # the next observation is read from the following slot: cut the episode there
                    buffer.dones[last] = np.where(in_progress, 1.0, buffer.dones[last])
                elif getattr(buffer, "handle_timeout_termination", False):
                    # a time-out keeps the bootstrap from the stored next observation
                    buffer.dones[last] = np.where(in_progress, 1.0, buffer.dones[last])
                    buffer.timeouts[last] = np.where(in_progress, 1.0, buffer.timeouts[last])
            if agent.action_noise is not None:
                agent.action_noise.reset()
        self.episode_starts = np.ones(self.n_envs, dtype=bool)

    # -------------------------------------------------------------------------------- algorithms

    def _on_policy_step(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        import torch as th
        from gymnasium import spaces
        from stable_baselines3.common.utils import obs_as_tensor

        agent = self.agent
        policy = agent.policy
        buffer = agent.rollout_buffer
        policy.set_training_mode(False)
        if agent.use_sde and (
            buffer.pos == 0
            or (agent.sde_sample_freq > 0 and buffer.pos % agent.sde_sample_freq == 0)
        ):
            policy.reset_noise(self.n_envs)

        with th.no_grad():
            actions, values, log_probs = policy(obs_as_tensor(agent._last_obs, agent.device))
        actions = actions.cpu().numpy()
        env_actions = actions
        if isinstance(agent.action_space, spaces.Box):
            if policy.squash_output:
                env_actions = policy.unscale_action(actions)
            else:
                env_actions = np.clip(actions, agent.action_space.low, agent.action_space.high)

        new_obs, rewards, dones, infos = self.venv.step(env_actions)
        agent.num_timesteps += self.n_envs
        agent._update_info_buffer(infos, dones)
        self._on_step(rewards, dones, infos)
        self._update_progress()

        if isinstance(agent.action_space, spaces.Discrete):
            actions = actions.reshape(-1, 1)
        stored_rewards = np.array(rewards, dtype=np.float32)
        for i, done in enumerate(dones):
            terminal = infos[i].get("terminal_observation")
            if done and terminal is not None and infos[i].get("TimeLimit.truncated", False):
                with th.no_grad():
                    terminal_value = policy.predict_values(policy.obs_to_tensor(terminal)[0])[0]
                stored_rewards[i] += agent.gamma * float(terminal_value.item())
        buffer.add(
            agent._last_obs, actions, stored_rewards, agent._last_episode_starts, values, log_probs
        )
        agent._last_obs = new_obs
        agent._last_episode_starts = np.asarray(dones, dtype=bool)

        if buffer.full:
            with th.no_grad():
                last_values = policy.predict_values(obs_as_tensor(new_obs, agent.device))
            buffer.compute_returns_and_advantage(last_values=last_values, dones=dones)
            self._iteration += 1
            self._dump_logs(self._iteration)
            agent.train()
            buffer.reset()
            policy.set_training_mode(False)
        return new_obs, rewards, dones, infos

    def _off_policy_step(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        from stable_baselines3.common.utils import should_collect_more_steps

        agent = self.agent
        agent.policy.set_training_mode(False)
        if agent.use_sde and (
            self._collected_steps == 0
            or (agent.sde_sample_freq > 0 and self._collected_steps % agent.sde_sample_freq == 0)
        ):
            agent.actor.reset_noise(self.n_envs)

        actions, buffer_actions = agent._sample_action(
            agent.learning_starts, agent.action_noise, self.n_envs
        )
        new_obs, rewards, dones, infos = self.venv.step(actions)
        agent.num_timesteps += self.n_envs
        self._collected_steps += 1
        agent._update_info_buffer(infos, dones)
        self._on_step(rewards, dones, infos)
        agent._store_transition(agent.replay_buffer, buffer_actions, new_obs, rewards, dones, infos)
        self._update_progress()
        agent._on_step()

        for i, done in enumerate(dones):
            if done:
                self._collected_episodes += 1
                agent._episode_num += 1
                if agent.action_noise is not None:
                    agent.action_noise.reset(**({"indices": [i]} if self.n_envs > 1 else {}))
                if agent._episode_num % OFF_POLICY_LOG_INTERVAL == 0:
                    self._dump_logs()

        if not should_collect_more_steps(
            agent.train_freq, self._collected_steps, self._collected_episodes
        ):
            steps = self._collected_steps * self.n_envs
            self._collected_steps = self._collected_episodes = 0
            if agent.num_timesteps > 0 and agent.num_timesteps > agent.learning_starts:
                gradient_steps = agent.gradient_steps if agent.gradient_steps >= 0 else steps
                if gradient_steps > 0:
                    agent.train(batch_size=agent.batch_size, gradient_steps=gradient_steps)
                    agent.policy.set_training_mode(False)
        return new_obs, rewards, dones, infos

    def _update_progress(self) -> None:
        agent = self.agent
        total = agent._total_timesteps
        agent._update_current_progress_remaining(min(agent.num_timesteps, total), total)

    def _dump_logs(self, iteration: int = 0) -> None:
        agent = self.agent
        dump = getattr(agent, "dump_logs", None) or getattr(agent, "_dump_logs", None)
        if dump is None:
            agent.logger.dump(step=agent.num_timesteps)
        elif self.on_policy:
            dump(iteration)
        else:
            dump()
