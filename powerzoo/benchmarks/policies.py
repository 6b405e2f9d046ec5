"""Baseline policies behind one interface: ``act(obs, info) -> action`` and ``reset()``.

Rule-based and oracle policies compute physical actions from the task; when the env they act
in is normalised (``make_env(..., normalize=True)``) they read its scalers and convert, so the
same policy object works on raw and normalised envs.

Policies may also define ``seed(seed)``: :func:`seed_policy` calls it when it exists, so that
evaluation and dataset collection can reproduce an episode from its seed alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from powerzoo.envs.wrappers import NormalizeWrapper

__all__ = ["Policy", "RandomPolicy", "RuleBasedPolicy", "OraclePolicy", "SB3Policy", "seed_policy", "find_normalizer"]


class Policy(Protocol):
    """What :func:`powerzoo.benchmarks.evaluation.rollout` needs from a policy."""

    def reset(self) -> None: ...

    def act(self, obs: Any, info: dict[str, Any]) -> Any: ...


def seed_policy(policy: Any, seed: int | None) -> None:
    """Seed ``policy``'s own randomness with ``seed`` if it has a ``seed`` method (else do nothing)."""
    seed_fn = getattr(policy, "seed", None)
    if seed is not None and callable(seed_fn):
        seed_fn(int(seed))


def _is_uniform_box(space: gym.Space) -> bool:
    """True for a float Box bounded on every side, where ``sample()`` is one uniform draw."""
    return (
        isinstance(space, gym.spaces.Box)
        and space.dtype.kind == "f"
        and bool(np.all(space.bounded_below & space.bounded_above))
    )


class RandomPolicy:
    """Uniform samples from ``action_space`` (Box, Dict of Boxes, ...); ``seed`` seeds the space.

    For a bounded float Box the samples are drawn ahead in blocks with one generator call; the
    values are exactly those that successive ``action_space.sample()`` calls would return, as long
    as nothing else draws from the space's generator in between (re-seeding the space is noticed
    and starts a new block).
    """

    name = "random"
    block_bytes = 64 * 1024  # size of one block of pre-drawn samples

    def __init__(self, action_space: gym.Space, seed: int | None = None) -> None:
        self.action_space = action_space
        self._uniform_box = _is_uniform_box(action_space)
        self._block: np.ndarray | None = None
        self._block_rng: np.random.Generator | None = None
        self._next = 0
        if seed is not None:
            self.seed(seed)

    def seed(self, seed: int) -> None:
        """Re-seed the action space's generator (drops any pre-drawn samples)."""
        self.action_space.seed(seed)
        self._block = None

    def reset(self) -> None:
        return None

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        if not self._uniform_box:
            return self.action_space.sample()
        rng = self.action_space.np_random
        if self._block is None or self._next == len(self._block) or rng is not self._block_rng:
            space = self.action_space
            n_samples = max(1, self.block_bytes // max(1, space.low.nbytes))
            draws = rng.uniform(space.low, space.high, size=(n_samples, *space.shape))
            self._block, self._block_rng, self._next = draws.astype(space.dtype), rng, 0
        action = self._block[self._next]
        self._next += 1
        return action


class SB3Policy:
    """A trained Stable-Baselines3 model (or a dict ``{agent: model}``) behind the policy interface.

    ``act`` returns ``model.predict(obs, deterministic=...)``'s action; for a multi-agent dict env
    pass one model per agent and ``act`` returns ``{agent: action}``. Recurrent models keep their
    hidden state within an episode (cleared by ``reset``). The observations must be those the
    model was trained on (build the env with the same ``normalize=`` / wrappers).
    """

    def __init__(self, model: Any, deterministic: bool = True) -> None:
        models = model.values() if isinstance(model, Mapping) else [model]
        if not all(callable(getattr(m, "predict", None)) for m in models):
            raise TypeError(f"SB3Policy needs a model with .predict(obs, ...) (or a dict of them), got {model!r}")
        self.model = model
        self.deterministic = bool(deterministic)
        first = next(iter(model.values())) if isinstance(model, Mapping) else model
        self.name = f"sb3_{type(first).__name__.lower()}"
        self._states: dict[Any, Any] = {}

    def seed(self, seed: int) -> None:
        """Seed the models' sampling (only matters with ``deterministic=False``)."""
        if self.deterministic:
            return
        models = self.model.values() if isinstance(self.model, Mapping) else [self.model]
        for m in models:
            if callable(getattr(m, "set_random_seed", None)):
                m.set_random_seed(seed)

    def reset(self) -> None:
        self._states = {}

    def _predict(self, key: Any, model: Any, obs: Any) -> Any:
        state = self._states.get(key)
        episode_start = np.asarray([state is None])
        action, self._states[key] = model.predict(
            obs, state=state, episode_start=episode_start, deterministic=self.deterministic
        )
        return action

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        if isinstance(self.model, Mapping):
            missing = set(obs) - set(self.model)
            if missing:
                raise ValueError(f"SB3Policy has no model for agent(s) {sorted(missing)}; models: {sorted(self.model)}")
            return {agent: self._predict(agent, self.model[agent], o) for agent, o in obs.items()}
        return self._predict(None, self.model, obs)


def find_normalizer(env: gym.Env) -> NormalizeWrapper | None:
    """The :class:`NormalizeWrapper` in ``env``'s wrapper chain, or ``None``."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, NormalizeWrapper):
            return env
        env = env.env
    return None


class _TaskPolicy:
    """Shared plumbing: find the task and the (optional) normaliser of a single-agent env."""

    def __init__(self, env: gym.Env) -> None:
        if not isinstance(env, gym.Env) or not hasattr(env.unwrapped, "task"):
            raise TypeError(f"{type(self).__name__} needs a PowerZoo env from make_env(...), got {env!r}")
        self.env = env
        self.task = env.unwrapped.task
        self._normalizer = find_normalizer(env)
        self._obs_dim = self.task.spec.observation.dim

    def _physical_obs(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float64)
        if self._normalizer is not None:
            scaler = self._normalizer.obs_scaler
            obs = scaler.mid + scaler.half * obs
        return obs[..., : self._obs_dim]

    def _env_action(self, physical: np.ndarray) -> np.ndarray:
        if self._normalizer is not None:
            physical = self._normalizer.action_scaler.to_unit(physical)
        return np.asarray(physical, dtype=np.float32)

    def reset(self) -> None:
        return None


class RuleBasedPolicy(_TaskPolicy):
    """The task's rule-based controller (see each task's docstring)."""

    name = "rule_based"

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        physical = self.task.rule_based_action(self._physical_obs(obs)[None, :])[0]
        return self._env_action(physical)


class OraclePolicy(_TaskPolicy):
    """Perfect-foresight optimum of the episode, planned at its first step (``task.oracle_plan``)."""

    name = "oracle"

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._plan: np.ndarray | None = None

    def reset(self) -> None:
        self._plan = None

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        step = int(info.get("step", 0))
        if self._plan is None or step == 0:
            self._plan = self.task.oracle_plan(self.env.unwrapped.runner.state)[0]
        return self._env_action(self._plan[step])
