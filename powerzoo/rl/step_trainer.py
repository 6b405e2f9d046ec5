"""Step-by-step training and evaluation of a Stable-Baselines3 model, with the loop in the caller's hands.

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
  does what SB3's own ``collect_rollouts`` does for that step:

  - on-policy agents (PPO, A2C): the transition (with value and log-probability) goes to the
    rollout buffer, a step that ends in a time-out gets ``gamma * V(terminal_observation)`` added to
    its stored reward; once the buffer holds ``n_steps`` steps, returns and advantages are computed
    with the value of the latest observation, the logs are dumped, ``agent.train()`` runs and the
    buffer is emptied for the next rollout;
  - off-policy agents (SAC, TD3, DDPG, DQN): warm-up actions are uniform until ``learning_starts``,
    action noise is added, the transition goes to the replay buffer through SB3's own
    ``_store_transition`` (scaled action, unnormalised observation, ``terminal_observation`` as the
    next observation, time-outs kept apart from terminations) and ``agent.train(gradient_steps,
    batch_size)`` runs each time ``train_freq`` is reached (``gradient_steps=-1``: as many as steps
    collected). Logs are dumped every 4 episodes, as ``learn`` does by default.

  ``agent.num_timesteps`` grows by ``n_envs`` per call; ``agent._current_progress_remaining``
  (learning-rate and clip-range schedules) runs from 1 to 0 over ``timesteps`` calls.
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
  :attr:`StepTrainer.eval_episodes` (the last 100 of each). Evaluation logs are dumped when an
  evaluation episode ends; training logs when SB3 would dump them.
* One tqdm bar per mode, of ``timesteps`` calls, advanced by each call (``disable_progressbar``;
  ``None`` disables it when stderr is not a terminal). ``env.render()`` runs every
  ``render_interval`` steps unless ``headless`` (skipped with one warning if the env cannot
  render).
* ``close()`` closes the bars and the env(s) once; with ``close_environment_at_exit`` it also runs
  at normal interpreter exit.

SB3 and torch are imported when a trainer is built, not when this module is imported.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import numbers
import sys
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv, VecNormalize

__all__ = ["StepTrainer", "StepTrainerConfig", "StepResult"]

_MODES = ("train", "eval")
_LOG_PREFIX = {"train": "rollout", "eval": "eval"}
_OFF_POLICY_LOG_INTERVAL = 4  # episodes between two log dumps, SB3's default for off-policy ``learn``
_EPISODE_HISTORY = 100


# --------------------------------------------------------------------------------------------- config


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass
class StepTrainerConfig:
    """Settings of a :class:`StepTrainer`; built from keyword arguments or :meth:`from_dict`.

    Attributes:
        timesteps: planned number of calls per mode: size of the progress bars and, for training,
            the horizon of SB3's progress-remaining (learning-rate / clip-range schedules).
        headless: never call ``env.render()``.
        render_interval: render every this many steps (when not ``headless``).
        disable_progressbar: hide the tqdm bars; ``None`` hides them when stderr is not a TTY.
        close_environment_at_exit: close the env(s) at normal interpreter exit (``atexit``).
        environment_info: what is logged to the agent's logger: ``"episode"`` (episode return,
            length and summed constraint costs when an episode ends), another ``info`` key (its
            value at every step where present) or ``""`` (nothing). See the module docstring.
        stochastic_evaluation: sample actions in :meth:`StepTrainer.eval` instead of taking the
            deterministic one.
    """

    timesteps: int = 100_000
    headless: bool = False
    render_interval: int = 1
    disable_progressbar: bool | None = False
    close_environment_at_exit: bool = True
    environment_info: str = "episode"
    stochastic_evaluation: bool = False

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Names of the config fields."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepTrainerConfig:
        """Build a config from a mapping; unknown keys or wrong types raise ``ValueError``."""
        if not isinstance(data, Mapping):
            raise ValueError(f"StepTrainerConfig.from_dict needs a mapping, got {type(data).__name__}")
        names = cls.field_names()
        unknown = sorted(str(k) for k in data if k not in names)
        if unknown:
            raise ValueError(
                f"unknown StepTrainerConfig field(s) {', '.join(unknown)}; valid fields: {', '.join(names)}"
            )
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain dict (round-trips through :meth:`from_dict`)."""
        return dataclasses.asdict(self)

    def validate(self) -> None:
        """Check every field's type and range; raise ``ValueError`` naming the first bad field."""

        def bad(name: str, expected: str) -> ValueError:
            value = getattr(self, name)
            return ValueError(f"StepTrainerConfig.{name} must be {expected}, got {value!r}")

        if not _is_int(self.timesteps) or self.timesteps < 1:
            raise bad("timesteps", "a positive int")
        if not _is_int(self.render_interval) or self.render_interval < 1:
            raise bad("render_interval", "a positive int")
        for name in ("headless", "close_environment_at_exit", "stochastic_evaluation"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise bad(name, "a bool")
        if self.disable_progressbar is not None and not isinstance(self.disable_progressbar, (bool, np.bool_)):
            raise bad("disable_progressbar", "a bool or None")
        if not isinstance(self.environment_info, str):
            raise bad("environment_info", 'a str ("episode", an info key, or "" for nothing)')
        self.timesteps = int(self.timesteps)
        self.render_interval = int(self.render_interval)


def _coerce_config(cfg: StepTrainerConfig | Mapping[str, Any] | None) -> StepTrainerConfig:
    if cfg is None:
        return StepTrainerConfig()
    if isinstance(cfg, StepTrainerConfig):
        cfg.validate()
        return cfg
    if isinstance(cfg, Mapping):
        return StepTrainerConfig.from_dict(cfg)
    raise ValueError(f"cfg must be a StepTrainerConfig, a dict or None, got {type(cfg).__name__}")


# --------------------------------------------------------------------------------------------- helpers


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


class _EpisodeTracker:
    """Running return, length and constraint costs of the episode in progress in each sub-env."""

    def __init__(self, n_envs: int) -> None:
        self.n_envs = n_envs
        self.reset()

    def reset(self) -> None:
        self.returns = np.zeros(self.n_envs, dtype=np.float64)
        self.lengths = np.zeros(self.n_envs, dtype=np.int64)
        self.costs: list[np.ndarray | None] = [None] * self.n_envs

    def update(self, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Add one step; return the summaries of the episodes that ended at it."""
        self.returns += np.asarray(rewards, dtype=np.float64).reshape(self.n_envs)
        self.lengths += 1
        finished = []
        for i, info in enumerate(infos):
            step_costs = info.get("constraint_costs")
            if step_costs is not None:
                step_costs = np.atleast_1d(np.asarray(step_costs, dtype=np.float64))
                previous = self.costs[i]
                self.costs[i] = step_costs.copy() if previous is None else previous + step_costs
            if dones[i]:
                finished.append(
                    {"return": float(self.returns[i]), "length": int(self.lengths[i]), "costs": self.costs[i], "env_index": i}
                )
                self.returns[i], self.lengths[i], self.costs[i] = 0.0, 0, None
        return finished


def _numeric_items(name: str, value: Any) -> list[tuple[str, float]]:
    """``(log key, number)`` pairs for an info value: numbers, arrays element-wise, dicts per entry."""
    if isinstance(value, Mapping):
        items: list[tuple[str, float]] = []
        for key, sub in value.items():
            items.extend(_numeric_items(f"{name}/{key}", sub))
        return items
    if isinstance(value, (bool, np.bool_, numbers.Number)):
        return [(name, float(value))]
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        flat = value.ravel()
        if flat.size == 1:
            return [(name, float(flat[0]))]
        return [(f"{name}_{j}", float(v)) for j, v in enumerate(flat)]
    return []


def _index_obs(obs: Any, i: int) -> Any:
    if isinstance(obs, Mapping):
        return {k: np.array(v[i]) for k, v in obs.items()}
    return np.array(obs[i])


def _copy_obs(obs: Any) -> Any:
    if isinstance(obs, Mapping):
        return {k: np.array(v) for k, v in obs.items()}
    return np.array(obs)


def _base_vec_env(venv: Any) -> Any:
    from stable_baselines3.common.vec_env import VecEnvWrapper

    while isinstance(venv, VecEnvWrapper):
        venv = venv.venv
    return venv


def _holds_env(venv: Any, env: Any) -> bool:
    """Whether ``venv`` is a one-env ``DummyVecEnv`` (possibly wrapped) around ``env`` (possibly wrapped)."""
    import gymnasium as gym

    envs = getattr(_base_vec_env(venv), "envs", None)
    if not envs or len(envs) != 1:
        return False
    candidate = envs[0]
    for _ in range(64):
        if candidate is env:
            return True
        if not isinstance(candidate, gym.Wrapper):
            return False
        candidate = candidate.env
    return False


def _close_weakly(ref: weakref.ReferenceType[StepTrainer]) -> None:
    trainer = ref()
    if trainer is not None:
        trainer.close()


# --------------------------------------------------------------------------------------------- trainer


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
            ``None`` evaluates on ``env`` (see the module docstring for how episodes are kept apart).

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
        from stable_baselines3.common.base_class import BaseAlgorithm
        from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
        from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
        from stable_baselines3.common.type_aliases import TrainFrequencyUnit
        from stable_baselines3.common.vec_env import VecEnv, unwrap_vec_normalize

        self.cfg = _coerce_config(cfg)
        if not isinstance(agent, BaseAlgorithm):
            raise TypeError(f"agent must be a Stable-Baselines3 model, got {type(agent).__name__}")
        if isinstance(agent, OnPolicyAlgorithm):
            self._on_policy = True
        elif isinstance(agent, OffPolicyAlgorithm):
            self._on_policy = False
        else:
            raise TypeError(f"{type(agent).__name__} is neither an on-policy nor an off-policy SB3 algorithm")
        self.agent = agent
        self._closed = True  # until fully built, close() has nothing to do

        self._batched = {"train": isinstance(env, VecEnv), "eval": isinstance(env, VecEnv)}
        self.venv: VecEnv = self._attach_train_env(env, VecEnv)
        self.n_envs = int(self.venv.num_envs)
        self._shared_eval = eval_env is None
        if eval_env is None:
            self.eval_venv: VecEnv = self.venv
        else:
            self._batched["eval"] = isinstance(eval_env, VecEnv)
            self.eval_venv = self._wrap_eval_env(eval_env, VecEnv)
        self._vecnorm: dict[str, VecNormalize | None] = {
            "train": unwrap_vec_normalize(self.venv),
            "eval": unwrap_vec_normalize(self.eval_venv),
        }
        self._vecnorm_training_flag: bool | None = None

        if not self._on_policy:
            train_freq = agent.train_freq
            if self.n_envs > 1 and getattr(train_freq, "unit", None) == TrainFrequencyUnit.EPISODE:
                raise ValueError("an episodic train_freq needs a single env; use a step train_freq with a VecEnv")

        self._train_episode_starts = self._setup_agent()
        self._closed = False

        self._mode = "train"  # whose episode the shared env holds
        self._eval_obs: Any = None
        self._eval_state: Any = None
        self._eval_episode_starts = np.ones(self.eval_venv.num_envs, dtype=bool)
        self._trackers = {"train": _EpisodeTracker(self.n_envs), "eval": _EpisodeTracker(self.eval_venv.num_envs)}
        self.train_episodes: deque[dict[str, Any]] = deque(maxlen=_EPISODE_HISTORY)
        self.eval_episodes: deque[dict[str, Any]] = deque(maxlen=_EPISODE_HISTORY)
        self._next_timestep = {mode: 0 for mode in _MODES}
        self._calls = {mode: 0 for mode in _MODES}
        self._planned = {mode: self.cfg.timesteps for mode in _MODES}
        self._bars: dict[str, Any] = {}
        self._render_enabled = not self.cfg.headless
        self._cost_names: dict[str, tuple[str, ...]] = {}
        # update schedule state
        self._iteration = 0
        self._collected_steps = 0
        self._collected_episodes = 0

        self._atexit_hook: Callable[[], None] | None = None
        if self.cfg.close_environment_at_exit:
            self._atexit_hook = functools.partial(_close_weakly, weakref.ref(self))
            atexit.register(self._atexit_hook)

    # ------------------------------------------------------------------------------------ set-up

    def _attach_train_env(self, env: Any, vec_env_cls: type) -> VecEnv:
        agent = self.agent
        current = agent.get_env()
        if isinstance(env, vec_env_cls):
            if env is not current:
                if env.num_envs != agent.n_envs:
                    raise ValueError(
                        f"env has {env.num_envs} sub-envs but the agent was built for {agent.n_envs}; "
                        "build the agent on an env with the same number of sub-envs"
                    )
                agent.set_env(env, force_reset=True)
            return env
        if current is not None and _holds_env(current, env):
            return current
        if agent.n_envs != 1:
            raise ValueError(f"a single Gymnasium env was given but the agent was built for {agent.n_envs} envs")
        agent.set_env(env, force_reset=True)  # Monitor + DummyVecEnv
        attached = agent.get_env()
        assert attached is not None
        return attached

    def _wrap_eval_env(self, eval_env: Any, vec_env_cls: type) -> VecEnv:
        from stable_baselines3.common.utils import check_for_correct_spaces
        from stable_baselines3.common.vec_env import DummyVecEnv

        venv = eval_env if isinstance(eval_env, vec_env_cls) else DummyVecEnv([lambda e=eval_env: e])
        check_for_correct_spaces(venv, self.agent.observation_space, self.agent.action_space)
        return venv

    def _setup_agent(self) -> np.ndarray:
        """``_setup_learn`` without resetting the counters; returns the episode starts of ``venv``."""
        agent = self.agent
        continuing = agent._last_obs is not None  # the agent already holds an observation of venv
        agent._setup_learn(
            self.cfg.timesteps * self.n_envs,
            callback=None,
            reset_num_timesteps=False,
            tb_log_name=type(agent).__name__,
            progress_bar=False,
        )
        starts = np.ones(self.n_envs, dtype=bool)
        if continuing:  # e.g. after model.learn(): carry on with the episodes in progress
            previous = getattr(agent, "_last_episode_starts", None) if self._on_policy else None
            starts = np.zeros(self.n_envs, dtype=bool) if previous is None else np.asarray(previous, dtype=bool)
        if self._on_policy:
            agent.rollout_buffer.reset()
            agent._last_episode_starts = starts.copy()
        agent.policy.set_training_mode(False)
        return starts

    # ------------------------------------------------------------------------------------ public API

    @property
    def on_policy(self) -> bool:
        """Whether the agent is an on-policy algorithm (rollout buffer) rather than off-policy."""
        return self._on_policy

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
        if self._on_policy:
            new_obs, rewards, dones, infos = self._on_policy_step()
        else:
            new_obs, rewards, dones, infos = self._off_policy_step()
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
        agent = self.agent
        actions, self._eval_state = agent.predict(
            self._eval_obs,
            state=self._eval_state,
            episode_start=self._eval_episode_starts,
            deterministic=not self.cfg.stochastic_evaluation,
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
        """Render the env of the current mode now (what ``VecEnv.render()`` returns)."""
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
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
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
        agent = self.agent
        agent._last_obs = self.venv.reset()
        self._train_episode_starts = np.ones(self.n_envs, dtype=bool)
        if self._on_policy:
            agent._last_episode_starts = np.ones(self.n_envs, dtype=bool)
        vecnorm = self._vecnorm["train"]
        if vecnorm is not None:
            agent._last_original_obs = vecnorm.get_original_obs()
        self._trackers["train"].reset()

    def _reset_eval(self) -> None:
        self._eval_obs = self.eval_venv.reset()
        self._eval_state = None
        self._eval_episode_starts = np.ones(self.eval_venv.num_envs, dtype=bool)
        self._trackers["eval"].reset()

    def _interrupt_training(self) -> None:
        """Close the training episodes in progress as truncated ones in the agent's buffers."""
        in_progress = ~np.asarray(self._train_episode_starts, dtype=bool)
        self._trackers["train"].reset()
        if not in_progress.any():
            return
        agent = self.agent
        if self._on_policy:
            import torch as th
            from stable_baselines3.common.utils import obs_as_tensor

            buffer = agent.rollout_buffer
            if 0 < buffer.pos and not buffer.full:
                with th.no_grad():
                    values = agent.policy.predict_values(obs_as_tensor(agent._last_obs, agent.device))
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
        self._train_episode_starts = np.ones(self.n_envs, dtype=bool)

    # ------------------------------------------------------------------------------------ algorithms

    def _on_policy_step(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        import torch as th
        from gymnasium import spaces
        from stable_baselines3.common.utils import obs_as_tensor

        agent = self.agent
        policy = agent.policy
        buffer = agent.rollout_buffer
        policy.set_training_mode(False)
        if agent.use_sde and (buffer.pos == 0 or (agent.sde_sample_freq > 0 and buffer.pos % agent.sde_sample_freq == 0)):
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
        self._track("train", rewards, dones, infos)
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
        buffer.add(agent._last_obs, actions, stored_rewards, agent._last_episode_starts, values, log_probs)
        agent._last_obs = new_obs
        agent._last_episode_starts = np.asarray(dones, dtype=bool)
        self._train_episode_starts = np.asarray(dones, dtype=bool)

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

        actions, buffer_actions = agent._sample_action(agent.learning_starts, agent.action_noise, self.n_envs)
        new_obs, rewards, dones, infos = self.venv.step(actions)
        agent.num_timesteps += self.n_envs
        self._collected_steps += 1
        agent._update_info_buffer(infos, dones)
        self._track("train", rewards, dones, infos)
        agent._store_transition(agent.replay_buffer, buffer_actions, new_obs, rewards, dones, infos)
        self._update_progress()
        agent._on_step()
        self._train_episode_starts = np.asarray(dones, dtype=bool)

        for i, done in enumerate(dones):
            if done:
                self._collected_episodes += 1
                agent._episode_num += 1
                if agent.action_noise is not None:
                    agent.action_noise.reset(**({"indices": [i]} if self.n_envs > 1 else {}))
                if agent._episode_num % _OFF_POLICY_LOG_INTERVAL == 0:
                    self._dump_logs()

        if not should_collect_more_steps(agent.train_freq, self._collected_steps, self._collected_episodes):
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
        elif self._on_policy:
            dump(iteration)
        else:
            dump()

    # ------------------------------------------------------------------------------------ bookkeeping

    def _begin(self, mode: str, timestep: int | None, timesteps: int | None) -> int:
        if timesteps is not None:
            if not _is_int(timesteps) or timesteps < 1:
                raise ValueError(f"timesteps must be a positive int, got {timesteps!r}")
            if int(timesteps) != self._planned[mode]:
                self._planned[mode] = int(timesteps)
                if mode == "train":
                    self.agent._total_timesteps = self.agent._num_timesteps_at_start + int(timesteps) * self.n_envs
                if mode in self._bars:
                    self._bars[mode].total = int(timesteps)
                    self._bars[mode].refresh()
        if timestep is None:
            step = self._next_timestep[mode]
        elif _is_int(timestep) and timestep >= 0:
            step = int(timestep)
        else:
            raise ValueError(f"timestep must be a non-negative int or None, got {timestep!r}")
        self._next_timestep[mode] = step + 1
        self._calls[mode] += 1
        return step

    def _finish(
        self, mode: str, step: int, new_obs: Any, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]
    ) -> StepResult:
        if mode == "eval":
            finished = self._track("eval", rewards, dones, infos)
            if finished and self.cfg.environment_info:
                self.agent.logger.dump(step=self.agent.num_timesteps)
        venv = self.venv if mode == "train" else self.eval_venv
        if self._render_enabled and step % self.cfg.render_interval == 0:
            self._render(venv)
        self._progress_bar(mode).update(1)

        dones = np.asarray(dones, dtype=bool)
        timeouts = np.array([bool(info.get("TimeLimit.truncated", False)) for info in infos], dtype=bool)
        terminated, truncated = dones & ~timeouts, dones & timeouts
        if self._batched[mode]:
            return StepResult(_copy_obs(new_obs), np.array(rewards), terminated, truncated, infos)
        return StepResult(_index_obs(new_obs, 0), float(rewards[0]), bool(terminated[0]), bool(truncated[0]), infos[0])

    def _track(self, mode: str, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Episode statistics and ``environment_info`` logging for one step of ``mode``."""
        vecnorm = self._vecnorm[mode]
        raw_rewards = vecnorm.get_original_reward() if vecnorm is not None else rewards
        finished = self._trackers[mode].update(raw_rewards, dones, infos)
        (self.train_episodes if mode == "train" else self.eval_episodes).extend(finished)
        key = self.cfg.environment_info
        if not key:
            return finished
        logger = self.agent.logger
        prefix = _LOG_PREFIX[mode]
        if key == "episode":
            for episode in finished:
                logger.record_mean(f"{prefix}/episode_return", episode["return"])
                logger.record_mean(f"{prefix}/episode_length", episode["length"])
                costs = episode["costs"]
                if costs is not None:
                    for name, cost in zip(self._constraint_names(mode, costs.size), costs, strict=True):
                        logger.record_mean(f"{prefix}/episode_cost_{name}", float(cost))
                    logger.record_mean(f"{prefix}/episode_cost_sum", float(costs.sum()))
            return finished
        for info in infos:
            if key in info:
                for name, value in _numeric_items(key, info[key]):
                    logger.record_mean(f"{prefix}/{name}", value)
        return finished

    def _constraint_names(self, mode: str, n_costs: int) -> tuple[str, ...]:
        names = self._cost_names.get(mode)
        if names is None or len(names) != n_costs:
            names = tuple(str(i) for i in range(n_costs))
            envs = getattr(_base_vec_env(self.venv if mode == "train" else self.eval_venv), "envs", None)
            for candidate in (envs[0], getattr(envs[0], "unwrapped", None)) if envs else ():
                names_fn = getattr(candidate, "constraint_names", None)
                found = tuple(names_fn()) if callable(names_fn) else ()
                if len(found) == n_costs:
                    names = tuple(str(n) for n in found)
                    break
            self._cost_names[mode] = names
        return names

    def _progress_bar(self, mode: str) -> Any:
        bar = self._bars.get(mode)
        if bar is None:
            from tqdm import tqdm

            disable = self.cfg.disable_progressbar
            if disable is None:
                isatty = getattr(sys.stderr, "isatty", None)
                disable = not (callable(isatty) and isatty())
            bar = tqdm(total=self._planned[mode], desc=mode, disable=bool(disable), file=sys.stderr, dynamic_ncols=True)
            self._bars[mode] = bar
        return bar

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
            warnings.warn("StepTrainer: the env cannot render; rendering is switched off", stacklevel=3)
