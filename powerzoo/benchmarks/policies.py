"""Baseline policies behind one interface: ``act(obs, info) -> action`` and ``reset()``.

Rule-based and oracle policies compute physical actions from the task; when the env they act
in is normalised (``make_env(..., normalize=True)``) they read its scalers and convert, so the
same policy object works on raw and normalised envs.
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from powerzoo.envs.wrappers import NormalizeWrapper

__all__ = ["Policy", "RandomPolicy", "RuleBasedPolicy", "OraclePolicy"]


class Policy(Protocol):
    """What :func:`powerzoo.benchmarks.evaluation.rollout` needs from a policy."""

    def reset(self) -> None: ...

    def act(self, obs: Any, info: dict[str, Any]) -> Any: ...


class RandomPolicy:
    """Uniform samples from ``action_space`` (seeded by ``seed`` for reproducibility)."""

    name = "random"

    def __init__(self, action_space: gym.Space, seed: int | None = None) -> None:
        self.action_space = action_space
        if seed is not None:
            self.action_space.seed(seed)

    def reset(self) -> None:
        return None

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        return self.action_space.sample()


def _find_normalizer(env: gym.Env) -> NormalizeWrapper | None:
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
        self._normalizer = _find_normalizer(env)
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
