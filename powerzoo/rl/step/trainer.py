"""Step-by-step training and evaluation of a Stable-Baselines3 model, with the loop in the
caller's hands.

``model.learn(total_timesteps)`` runs its own loop. :class:`StepTrainer` cuts that loop into single
environment steps so that the caller decides what happens between two of them::

    trainer = StepTrainer(env=env, agent=model, cfg={"timesteps": 5000, "headless": True})
    for timestep in range(5000):
        obs, reward, terminated, truncated, info = trainer.train(timestep=timestep)
    for timestep in range(5000):
        obs, reward, terminated, truncated, info = trainer.eval(timestep=timestep)

Semantics
---------
* ``train()`` takes exactly **one** step of every sub-env with the agent's exploration policy and
  does what SB3's own ``collect_rollouts`` does for that step
  (:mod:`powerzoo.rl.step.sb3_collection`): on-policy agents (PPO, A2C) fill the rollout buffer
  (time-outs bootstrapped with ``gamma * V(terminal_observation)``) and update once it holds
  ``n_steps`` steps; off-policy agents (SAC, TD3, DDPG, DQN) act uniformly until
  ``learning_starts``, add action noise, store the transition with SB3's own ``_store_transition``
  and update each time ``train_freq`` is reached. ``agent.num_timesteps`` grows by ``n_envs`` per
  call; ``agent._current_progress_remaining`` (learning-rate and clip-range schedules) runs from 1
  to 0 over ``timesteps`` calls.
* ``eval()`` takes one step with ``agent.predict(obs, deterministic=True)`` (stochastic with
  ``stochastic_evaluation``): no buffer is written, no gradient step runs and ``num_timesteps``
  does not move. A ``VecNormalize`` in the chain is frozen (``training=False``) while evaluating.
* Both return ``(obs, reward, terminated, truncated, info)`` as a :class:`StepResult`. Episodes
  reset automatically, the SB3 ``VecEnv`` way: when an episode ends, ``obs`` is already the first
  observation of the next one and the last observation of the finished one is in
  ``info["terminal_observation"]``. ``terminated`` / ``truncated`` are split from SB3's ``done``
  with ``info["TimeLimit.truncated"]``. Given a plain Gymnasium env the values are unbatched
  (``float`` reward, ``bool`` flags, one ``info`` dict); given a ``VecEnv`` they are arrays of
  length ``n_envs`` and ``info`` is the list of per-env dicts. ``obs`` and ``reward`` are what the
  agent sees (normalised ones under ``VecNormalize``; see its ``get_original_reward()``).
* Training and evaluation keep their own episode state. With the default ``eval_env=None`` they
  share the training env: the first ``eval()`` after ``train()`` abandons the training episode in
  progress and resets the env, and the first ``train()`` after ``eval()`` resets it again, so an
  evaluation episode never continues a training one nor the other way round. The abandoned
  training episode is closed in the buffers as a truncation (on-policy: its last stored reward
  gets ``gamma * V(s)`` of the observation it stopped at and the next step starts an episode;
  off-policy: the last transition is flagged as a time-out, its stored next observation is kept).
  Pass ``eval_env`` to evaluate on a separate env: then neither mode disturbs the other.
* ``environment_info`` names what is logged to ``agent.logger`` (under ``rollout/`` in training,
  ``eval/`` in evaluation; averaged between two dumps):

  - ``"episode"`` (default): when an episode ends, its return (``episode_return``, the env's own
    reward, before any ``VecNormalize``), length (``episode_length``) and, if the env reports
    ``info["constraint_costs"]``, its summed costs per constraint (``episode_cost_<name>``) and in
    total (``episode_cost_sum``);
  - any other key (for example ``"cost_sum"``): the value of ``info[key]`` at every step where it
    is present (numbers, arrays element-wise, dicts per entry);
  - ``""``: nothing.

  Finished episodes are also kept in :attr:`StepTrainer.train_episodes` /
  :attr:`StepTrainer.eval_episodes` (the last 100 of each; :mod:`powerzoo.rl.step.episode_stats`).
  Evaluation logs are dumped when an evaluation episode ends; training logs when SB3 would dump
  them.
* One tqdm bar per mode, of ``timesteps`` calls, advanced by each call (``disable_progressbar``;
  ``None`` shows it only on a terminal; :mod:`powerzoo.rl.step.progress`). ``env.render()`` runs
  every ``render_interval`` steps unless ``headless`` (skipped with one warning if the env cannot
  render).
* ``close()`` closes the bars and the env(s) once; with ``close_environment_at_exit`` it also runs
  at normal interpreter exit.

The config is :class:`~powerzoo.rl.step.config.StepTrainerConfig` (re-exported here). SB3
and torch are imported when a trainer is built, not when this module is imported.
"""

from __future__ import annotations

import atexit
import functools
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from powerzoo.benchmarks.sb3_policy import predict_action, predicts_directly
from powerzoo.rl.step.config import StepTrainerConfig, coerce_step_trainer_config, is_count
from powerzoo.rl.step.envs import attach_train_env, cost_names, wrap_eval_env
from powerzoo.rl.step.episode_stats import EpisodeStats
from powerzoo.rl.step.progress import ModeBars
from powerzoo.rl.step.sb3_collection import SB3Collection, is_on_policy

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv, VecNormalize

__all__ = ["StepTrainer", "StepTrainerConfig", "StepResult"]

_MODES = ("train", "eval")
_LOG_PREFIX = {"train": "rollout", "eval": "eval"}


class StepResult(NamedTuple):
    """What :meth:`StepTrainer.train` and :meth:`StepTrainer.eval` return (unpacks as a 5-tuple).

    Unbatched (``float`` / ``bool`` / one dict) for a plain Gymnasium env, arrays of length
    ``n_envs`` and a list of dicts for a ``VecEnv``.
    """

    obs: Any
    reward: Any
    terminated: Any
    truncated: Any
    info: Any


class StepTrainer:
    """Train and evaluate a Stable-Baselines3 model one environment step per call.

    Args:
        env: the training env: a Gymnasium env (the values returned are unbatched) or an SB3
            ``VecEnv`` (batched). If ``agent`` was built on this very env (``agent.get_env()``
            wraps it), the agent's own ``VecEnv`` (with its ``Monitor``) is reused; otherwise
            ``agent.set_env(env)`` attaches it (same spaces and number of envs required).
        agent: an SB3 on-policy (PPO, A2C) or off-policy (SAC, TD3, DDPG, DQN) model.
        cfg: a :class:`StepTrainerConfig`, a dict of its fields, or ``None`` for the defaults.
        eval_env: optional separate env for :meth:`eval` (Gymnasium env or ``VecEnv``, same spaces);
            ``None`` evaluates on ``env`` (see the module docstring for how episodes are kept
            apart).

    Building the trainer runs ``agent._setup_learn`` (logger, episode buffers, first reset unless
    the agent already holds an observation of this env) without resetting ``agent.num_timesteps``;
    an on-policy agent's rollout buffer is emptied.

    Attributes:
        agent: the SB3 model.
        cfg: the validated config.
        venv: the ``VecEnv`` that training steps.
        eval_venv: the ``VecEnv`` that evaluation steps (``venv`` unless ``eval_env`` was given).
        n_envs: number of sub-envs of ``venv``.
        train_episodes / eval_episodes: summaries (``return``, ``length``, ``costs``,
            ``env_index``) of the last 100 finished episodes of each mode.
    """

    def __init__(
        self,
        env: Any,
        agent: BaseAlgorithm,
        cfg: StepTrainerConfig | Mapping[str, Any] | None = None,
        *,
        eval_env: Any = None,
    ) -> None:
        from stable_baselines3.common.vec_env import VecEnv, unwrap_vec_normalize

        self.cfg = coerce_step_trainer_config(cfg)
        is_on_policy(agent)  # a TypeError before the agent's env is touched
        self.agent = agent
        self._closed = True  # until fully built, close() has nothing to do

        self._batched = {"train": isinstance(env, VecEnv), "eval": isinstance(env, VecEnv)}
        self.venv: VecEnv = attach_train_env(agent, env)
        self.n_envs = int(self.venv.num_envs)
        self._shared_eval = eval_env is None
        if eval_env is None:
            self.eval_venv: VecEnv = self.venv
        else:
            self._batched["eval"] = isinstance(eval_env, VecEnv)
            self.eval_venv = wrap_eval_env(agent, eval_env)
        self._vecnorm: dict[str, VecNormalize | None] = {
            "train": unwrap_vec_normalize(self.venv),
            "eval": unwrap_vec_normalize(self.eval_venv),
        }
        self._vecnorm_training_flag: bool | None = None

        self._stats = {
            mode: EpisodeStats(
                venv.num_envs,
                _LOG_PREFIX[mode],
                self.cfg.environment_info,
                functools.partial(cost_names, venv),
            )
            for mode, venv in (("train", self.venv), ("eval", self.eval_venv))
        }
        # the hook holds the statistics, not the trainer (no reference cycle through the collection)
        on_step = functools.partial(
            _record_step, agent, self._stats["train"], self._vecnorm["train"]
        )
        self._collection = SB3Collection(agent, self.venv, self.cfg.timesteps, on_step=on_step)
        self._closed = False

        self._mode = "train"  # whose episode the shared env holds
        self._eval_obs: Any = None
        self._eval_state: Any = None
        self._eval_episode_starts = np.ones(self.eval_venv.num_envs, dtype=bool)
        self.train_episodes: deque[dict[str, Any]] = self._stats["train"].episodes
        self.eval_episodes: deque[dict[str, Any]] = self._stats["eval"].episodes
        self._next_timestep = {mode: 0 for mode in _MODES}
        self._calls = {mode: 0 for mode in _MODES}
        self._planned = {mode: self.cfg.timesteps for mode in _MODES}
        disable = self.cfg.disable_progressbar
        self._bars = ModeBars(progress=None if disable is None else not disable)
        self._render_enabled = not self.cfg.headless

        self._atexit_hook: Callable[[], None] | None = None
        if self.cfg.close_environment_at_exit:
            self._atexit_hook = functools.partial(_close_weakly, weakref.ref(self))
            atexit.register(self._atexit_hook)

    # -------------------------------------------------------------------------------- public API

    @property
    def on_policy(self) -> bool:
        """Whether the agent is an on-policy algorithm (rollout buffer) rather than off-policy."""
        return self._collection.on_policy

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    @property
    def train_calls(self) -> int:
        """Number of :meth:`train` calls so far."""
        return self._calls["train"]

    @property
    def eval_calls(self) -> int:
        """Number of :meth:`eval` calls so far."""
        return self._calls["eval"]

    def train(self, timestep: int | None = None, timesteps: int | None = None) -> StepResult:
        """One exploration step of every sub-env, stored in the agent's buffer; update when due.

        Args:
            timestep: index of this step in the caller's loop (render interval); ``None`` uses
                an internal counter (previous index + 1).
            timesteps: planned number of training calls, overriding ``cfg.timesteps`` from now on
                (progress bar size and SB3 schedules).

        Returns:
            ``(obs, reward, terminated, truncated, info)`` of the step (module docstring).
        """
        self._check_open()
        step = self._begin("train", timestep, timesteps)
        self._enter("train")
        new_obs, rewards, dones, infos = self._collection.step()
        return self._finish("train", step, new_obs, rewards, dones, infos)

    def eval(self, timestep: int | None = None, timesteps: int | None = None) -> StepResult:
        """One step with the agent's deterministic action (sampled with ``stochastic_evaluation``).

        Nothing is learnt or stored and ``agent.num_timesteps`` does not change.

        Args:
            timestep: index of this step in the caller's loop; ``None`` uses an internal counter.
            timesteps: planned number of evaluation calls (progress bar size).

        Returns:
            ``(obs, reward, terminated, truncated, info)`` of the step (module docstring).
        """
        self._check_open()
        step = self._begin("eval", timestep, timesteps)
        self._enter("eval")
        deterministic = not self.cfg.stochastic_evaluation
        if predicts_directly(self.agent):  # no recurrent state: predict's action, leaner
            actions = predict_action(self.agent, self._eval_obs, deterministic=deterministic)
        else:
            actions, self._eval_state = self.agent.predict(
                self._eval_obs,
                state=self._eval_state,
                episode_start=self._eval_episode_starts,
                deterministic=deterministic,
            )
        new_obs, rewards, dones, infos = self.eval_venv.step(actions)
        self._eval_obs = new_obs
        self._eval_episode_starts = np.asarray(dones, dtype=bool)
        return self._finish("eval", step, new_obs, rewards, dones, infos)

    def reset(self) -> None:
        """Start new episodes: the training episode in progress is closed as a truncation in the
        agent's buffers and the env reset; the evaluation episode is restarted too.

        Counters, progress bars and ``agent.num_timesteps`` are kept.
        """
        self._check_open()
        if self._mode == "train" or not self._shared_eval:
            self._interrupt_training()
        self._restore_vecnorm_training()
        self._mode = "train"
        self._reset_train()
        if self._shared_eval:
            self._eval_obs = None
        else:
            self._reset_eval()

    def render(self) -> Any:
        """Render the env of the current mode now (what ``VecEnv.render()`` returns).

        Returns:
            The env's ``render()`` result.
        """
        venv = self.venv if self._mode == "train" else self.eval_venv
        return venv.render()

    def close(self) -> None:
        """Close the progress bars and the env(s). Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self._atexit_hook is not None:
            atexit.unregister(self._atexit_hook)
            self._atexit_hook = None
        self._bars.close()
        try:
            self.venv.close()
        finally:
            if not self._shared_eval:
                self.eval_venv.close()

    def __enter__(self) -> StepTrainer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------------------------ modes

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this StepTrainer is closed")

    def _enter(self, mode: str) -> None:
        """Give the (shared) env to ``mode``, resetting it when it held the other mode's episode."""
        if mode == "eval":
            if not self._shared_eval:
                self._sync_normalization()
                if self._eval_obs is None:
                    self._reset_eval()
                self._mode = "eval"
                return
            if self._mode != "eval":
                self._interrupt_training()
                vecnorm = self._vecnorm["train"]
                if vecnorm is not None:
                    self._vecnorm_training_flag = bool(vecnorm.training)
                    vecnorm.training = False
                self._mode = "eval"
                self._reset_eval()
            return
        if self._mode != "train":
            self._mode = "train"
            if self._shared_eval:
                self._restore_vecnorm_training()
                self._eval_obs = None
                self._reset_train()

    def _restore_vecnorm_training(self) -> None:
        vecnorm = self._vecnorm["train"]
        if vecnorm is not None and self._vecnorm_training_flag is not None:
            vecnorm.training = self._vecnorm_training_flag
        self._vecnorm_training_flag = None

    def _sync_normalization(self) -> None:
        train_norm, eval_norm = self._vecnorm["train"], self._vecnorm["eval"]
        if eval_norm is not None:
            if train_norm is not None:
                from stable_baselines3.common.vec_env import sync_envs_normalization

                sync_envs_normalization(self.venv, self.eval_venv)
            eval_norm.training = False

    def _reset_train(self) -> None:
        self._collection.reset()
        self._stats["train"].reset()

    def _reset_eval(self) -> None:
        self._eval_obs = self.eval_venv.reset()
        self._eval_state = None
        self._eval_episode_starts = np.ones(self.eval_venv.num_envs, dtype=bool)
        self._stats["eval"].reset()

    def _interrupt_training(self) -> None:
        """Close the training episodes in progress as truncated ones in the agent's buffers."""
        self._stats["train"].reset()
        self._collection.interrupt()

    # ------------------------------------------------------------------------------- bookkeeping

    def _begin(self, mode: str, timestep: int | None, timesteps: int | None) -> int:
        if timesteps is not None:
            if not is_count(timesteps) or timesteps < 1:
                raise ValueError(f"timesteps must be a positive int, got {timesteps!r}")
            if int(timesteps) != self._planned[mode]:
                self._planned[mode] = int(timesteps)
                if mode == "train":
                    self._collection.plan(int(timesteps))
                self._bars.resize(mode, int(timesteps))
        if timestep is None:
            step = self._next_timestep[mode]
        elif is_count(timestep) and timestep >= 0:
            step = int(timestep)
        else:
            raise ValueError(f"timestep must be a non-negative int or None, got {timestep!r}")
        self._next_timestep[mode] = step + 1
        self._calls[mode] += 1
        return step

    def _finish(
        self,
        mode: str,
        step: int,
        new_obs: Any,
        rewards: np.ndarray,
        dones: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> StepResult:
        if mode == "eval":
            finished = _record_step(
                self.agent, self._stats["eval"], self._vecnorm["eval"], rewards, dones, infos
            )
            if finished and self.cfg.environment_info:
                self.agent.logger.dump(step=self.agent.num_timesteps)
        venv = self.venv if mode == "train" else self.eval_venv
        if self._render_enabled and step % self.cfg.render_interval == 0:
            self._render(venv)
        self._bars.advance(mode, self._planned[mode])

        dones = np.asarray(dones, dtype=bool)
        timeouts = np.array(
            [bool(info.get("TimeLimit.truncated", False)) for info in infos], dtype=bool
        )
        terminated, truncated = dones & ~timeouts, dones & timeouts
        if self._batched[mode]:
            return StepResult(_copy_obs(new_obs), np.array(rewards), terminated, truncated, infos)
        return StepResult(
            _index_obs(new_obs, 0),
            float(rewards[0]),
            bool(terminated[0]),
            bool(truncated[0]),
            infos[0],
        )

    def _render(self, venv: VecEnv) -> None:
        if getattr(venv, "render_mode", None) is None:
            self._render_enabled = False
            warnings.warn(
                "StepTrainer: the env has no render_mode, so nothing is rendered "
                "(build it with a render_mode, or set headless=True to silence this)",
                stacklevel=3,
            )
            return
        try:
            venv.render()
        except NotImplementedError:
            self._render_enabled = False
            warnings.warn(
                "StepTrainer: the env cannot render; rendering is switched off", stacklevel=3
            )


# ------------------------------------------------------------------------------------------ helpers


def _index_obs(obs: Any, i: int) -> Any:
    if isinstance(obs, Mapping):
        return {k: np.array(v[i]) for k, v in obs.items()}
    return np.array(obs[i])


def _copy_obs(obs: Any) -> Any:
    if isinstance(obs, Mapping):
        return {k: np.array(v) for k, v in obs.items()}
    return np.array(obs)


def _record_step(
    agent: BaseAlgorithm,
    stats: EpisodeStats,
    vecnorm: VecNormalize | None,
    rewards: np.ndarray,
    dones: np.ndarray,
    infos: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Episode statistics and ``environment_info`` logging of one step, in the env's own reward
    scale."""
    raw_rewards = vecnorm.get_original_reward() if vecnorm is not None else rewards
    return stats.record(agent.logger, raw_rewards, dones, infos)


def _close_weakly(ref: weakref.ReferenceType[StepTrainer]) -> None:
    trainer = ref()
    if trainer is not None:
        trainer.close()
