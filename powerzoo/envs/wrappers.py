"""Wrappers for single-agent PowerZoo envs: forecast window, normalisation, reward override,
safe RL.

:func:`powerzoo.rl.make_env` applies them in this order (inner to outer)::

    PowerZooEnv -> ForecastWrapper -> NormalizeWrapper -> RewardOverrideWrapper -> SafeRLWrapper

Their rules live in :mod:`powerzoo.envs.pipeline`, which the native vector env and the
multi-agent adapters use too, so each rule exists once.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from powerzoo.envs.pipeline import (
    ActionPipeline,
    ObservationPipeline,
    RewardSpec,
    apply_reward,
    check_forecast_horizon,
    compile_reward,
)
from powerzoo.tasks.spec import TaskSpec

__all__ = [
    "ForecastWrapper",
    "NormalizeWrapper",
    "RewardOverrideWrapper",
    "SafeRLWrapper",
    "SafeRLVectorWrapper",
    "compile_reward",
    "check_forecast_horizon",
    "RewardSpec",
]


def episode_cost_budget(spec: TaskSpec, cost_threshold: float | None) -> float:
    """Per-episode budget of the summed selected costs (default: sum of the task's thresholds)."""
    budget = float(sum(spec.cost_thresholds.values()) if cost_threshold is None else cost_threshold)
    if not budget >= 0.0:
        raise ValueError(f"cost_threshold must be non-negative, got {cost_threshold}")
    return budget


class ForecastWrapper(gym.ObservationWrapper):
    """Appends perfect forecasts of the task's exogenous series for the next ``horizon`` steps."""

    def __init__(self, env: gym.Env, horizon: int) -> None:
        super().__init__(env)
        base = env.unwrapped
        self.horizon = check_forecast_horizon(base.task_spec, horizon)
        self.observation_space = ObservationPipeline(base.task, forecast_horizon=self.horizon).space

    def observation(self, observation: np.ndarray) -> np.ndarray:
        ahead = self.env.unwrapped.forecast(self.horizon).astype(np.float32)
        return np.concatenate([observation, ahead])


class NormalizeWrapper(gym.Wrapper):
    """Observations scaled to about [-1, 1]; actions taken in [-1, 1] and mapped to physical units.

    The maps are the fixed affine ones of :class:`~powerzoo.envs.pipeline.ObservationPipeline` and
    :class:`~powerzoo.envs.pipeline.ActionPipeline` built from the task spec (no running
    statistics), so they are identical in every process.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        base = env.unwrapped
        horizon = env.horizon if isinstance(env, ForecastWrapper) else None
        observations = ObservationPipeline(base.task, forecast_horizon=horizon, normalize=True)
        actions = ActionPipeline(base.task_spec, normalize=True)
        self.obs_scaler, self.action_scaler = observations.scaler, actions.scaler
        self._actions = actions
        self.observation_space = observations.space
        self.action_space = gym.spaces.Box(actions.low, actions.high, dtype=np.float32)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self.obs_scaler.to_unit(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(self._actions.to_physical(action))
        return self.obs_scaler.to_unit(obs), reward, terminated, truncated, info


class RewardOverrideWrapper(gym.Wrapper):
    """Replaces the reward by :func:`compile_reward`'s function of the step info.

    The task's own reward stays available as ``info["task_reward"]``.
    """

    def __init__(self, env: gym.Env, reward: RewardSpec) -> None:
        super().__init__(env)
        fn = compile_reward(env.unwrapped.task_spec, reward)
        if fn is None:
            raise ValueError(
                "RewardOverrideWrapper needs a reward preset, weights dict or callable"
            )
        self.reward_fn = fn

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        info["task_reward"] = 0.0  # same info keys at reset and step
        return obs, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(apply_reward(self.reward_fn, reward, info)), terminated, truncated, info


class SafeRLWrapper(gym.Wrapper):
    """Safe-RL view: ``step`` returns ``(obs, reward, cost, terminated, truncated, info)``.

    ``cost`` (also ``info["cost"]``) is the sum of the task's selected constraint costs this step;
    ``cost_threshold`` is the per-episode budget (default: sum of the task's thresholds).
    """

    def __init__(self, env: gym.Env, cost_threshold: float | None = None) -> None:
        super().__init__(env)
        self.cost_threshold = episode_cost_budget(env.unwrapped.task_spec, cost_threshold)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        info["cost"] = 0.0  # same info keys at reset and step
        return obs, info

    def step(self, action: Any) -> tuple[np.ndarray, float, float, bool, bool, dict[str, Any]]:  # type: ignore[override]
        obs, reward, terminated, truncated, info = self.env.step(action)
        cost = float(info["selected_cost_sum"])
        info["cost"] = cost
        return obs, reward, cost, terminated, truncated, info


class SafeRLVectorWrapper(gym.vector.VectorWrapper):
    """Vector form of :class:`SafeRLWrapper`: ``step`` returns a [N] ``cost`` array as 3rd item."""

    def __init__(self, env: gym.vector.VectorEnv, cost_threshold: float | None = None) -> None:
        super().__init__(env)
        self.cost_threshold = episode_cost_budget(env.unwrapped.task_spec, cost_threshold)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        info["cost"] = np.zeros(self.env.num_envs)
        return obs, info

    def step(self, actions: Any) -> tuple[Any, ...]:  # type: ignore[override]
        obs, reward, terminated, truncated, info = self.env.step(actions)
        info["cost"] = info["selected_cost_sum"]
        return obs, reward, info["cost"], terminated, truncated, info
