"""Wrappers for single-agent PowerZoo envs: forecast window, normalisation, reward override, safe RL.

:func:`powerzoo.rl.make_env` applies them in this order (inner to outer)::

    PowerZooEnv -> ForecastWrapper -> NormalizeWrapper -> RewardOverrideWrapper -> SafeRLWrapper

The native vector env takes the same options and calls the same helper functions here, so each
rule exists once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from powerzoo.envs.scaling import AffineScaler
from powerzoo.tasks.spec import TaskSpec

__all__ = [
    "ForecastWrapper",
    "NormalizeWrapper",
    "RewardOverrideWrapper",
    "SafeRLWrapper",
    "SafeRLVectorWrapper",
    "compile_reward",
    "nominal_observation_range",
]

RewardSpec = str | Mapping[str, float] | Callable[[dict[str, Any]], Any] | None


def nominal_observation_range(spec: TaskSpec, task: Any, forecast_horizon: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Nominal observation range including the forecast entries (used for normalisation)."""
    low, high = spec.observation.nominal()
    if forecast_horizon:
        f_low, f_high = task.forecast_range(forecast_horizon, nominal=True)
        low, high = np.concatenate([low, f_low]), np.concatenate([high, f_high])
    return low, high


def with_forecast_bounds(space: gym.spaces.Box, task: Any, horizon: int) -> gym.spaces.Box:
    """``space`` extended by the bounds of ``horizon`` forecast steps of the task's series."""
    f_low, f_high = task.forecast_range(horizon)
    low = np.concatenate([space.low, f_low.astype(np.float32)])
    high = np.concatenate([space.high, f_high.astype(np.float32)])
    return gym.spaces.Box(low, high, dtype=np.float32)


def check_forecast_horizon(spec: TaskSpec, horizon: Any) -> int:
    """Validate ``forecast_horizon``: a positive int, for tasks with forecastable series."""
    if not spec.forecast_series:
        raise ValueError(f"{spec.task_id} has no exogenous series to forecast")
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ValueError(f"forecast_horizon must be a positive int, got {horizon!r}")
    if horizon > spec.horizon:
        raise ValueError(f"forecast_horizon {horizon} exceeds the episode horizon {spec.horizon}")
    return int(horizon)


def compile_reward(spec: TaskSpec, reward: RewardSpec) -> Callable[[np.ndarray, dict[str, Any]], np.ndarray] | None:
    """Turn a ``reward=`` argument into ``f(reward, info) -> reward`` (batched), or ``None``.

    Accepted forms:

    * ``None``: the task's own reward;
    * a preset name from ``spec.reward_presets`` (e.g. ``"penalized"``);
    * a dict of weights: keys from ``spec.reward_terms`` (weight of that term, default 1) and
      from ``spec.constraint_names`` (penalty per unit of that cost, default 0), i.e.
      ``reward = sum_k w_k * term_k - sum_j c_j * cost_j``;
    * a callable ``f(info) -> reward`` computing the reward from the step's info.

    Anything else, or an unknown key, raises ``ValueError``.
    """
    if reward is None:
        return None
    if callable(reward):
        user_fn = reward
        return lambda _reward, info: np.asarray(user_fn(info), dtype=np.float64)
    if isinstance(reward, str):
        if reward not in spec.reward_presets:
            raise ValueError(
                f"unknown reward preset {reward!r} for {spec.task_id}; valid: {', '.join(spec.reward_presets) or 'none'}"
            )
        reward = spec.reward_presets[reward]
    if not isinstance(reward, Mapping):
        raise ValueError(f"reward must be None, a preset name, a dict of weights or a callable, got {reward!r}")
    valid = spec.reward_terms + spec.constraint_names
    unknown = set(reward) - set(valid)
    if unknown:
        raise ValueError(f"unknown reward key(s) {sorted(unknown)} for {spec.task_id}; valid: {', '.join(valid)}")
    term_w = np.asarray([float(reward.get(k, 1.0)) for k in spec.reward_terms])
    cost_w = np.asarray([float(reward.get(k, 0.0)) for k in spec.constraint_names])

    def weighted(_reward: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        terms = np.asarray(info["reward_terms"], dtype=np.float64)
        costs = np.asarray(info["constraint_costs"], dtype=np.float64)
        return terms @ term_w - costs @ cost_w

    return weighted


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
        self.observation_space = with_forecast_bounds(env.observation_space, base.task, self.horizon)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        ahead = self.env.unwrapped.forecast(self.horizon).astype(np.float32)
        return np.concatenate([observation, ahead])

    def nominal_observation_range(self) -> tuple[np.ndarray, np.ndarray]:
        base = self.env.unwrapped
        return nominal_observation_range(base.task_spec, base.task, self.horizon)


class NormalizeWrapper(gym.Wrapper):
    """Observations scaled to about [-1, 1]; actions taken in [-1, 1] and mapped to physical units.

    The maps are the fixed affine ones of :class:`~powerzoo.envs.scaling.AffineScaler` built from
    the task spec (no running statistics), so they are identical in every process.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        base = env.unwrapped
        if isinstance(env, ForecastWrapper):
            low, high = env.nominal_observation_range()
        else:
            low, high = base.task_spec.observation.nominal()
        self.obs_scaler = AffineScaler(low, high)
        self.action_scaler = AffineScaler(*base.task_spec.action.nominal())
        o_low, o_high = self.obs_scaler.unit_bounds(env.observation_space.low, env.observation_space.high)
        self.observation_space = gym.spaces.Box(o_low, o_high, dtype=np.float32)
        dim = env.action_space.shape[0]
        self.action_space = gym.spaces.Box(-np.ones(dim, np.float32), np.ones(dim, np.float32), dtype=np.float32)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self.obs_scaler.to_unit(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        physical = self.action_scaler.from_unit(_finite_action(action))
        obs, reward, terminated, truncated, info = self.env.step(physical)
        return self.obs_scaler.to_unit(obs), reward, terminated, truncated, info


def _finite_action(action: Any) -> np.ndarray:
    try:
        return np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"action must be numeric, got {action!r}") from err


class RewardOverrideWrapper(gym.Wrapper):
    """Replaces the reward by :func:`compile_reward`'s function of the step info.

    The task's own reward stays available as ``info["task_reward"]``.
    """

    def __init__(self, env: gym.Env, reward: RewardSpec) -> None:
        super().__init__(env)
        fn = compile_reward(env.unwrapped.task_spec, reward)
        if fn is None:
            raise ValueError("RewardOverrideWrapper needs a reward preset, weights dict or callable")
        self.reward_fn = fn

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        info["task_reward"] = reward
        return obs, float(self.reward_fn(np.asarray(reward), info)), terminated, truncated, info


class SafeRLWrapper(gym.Wrapper):
    """Safe-RL view: ``step`` returns ``(obs, reward, cost, terminated, truncated, info)``.

    ``cost`` (also ``info["cost"]``) is the sum of the task's selected constraint costs this step;
    ``cost_threshold`` is the per-episode budget (default: sum of the task's thresholds).
    """

    def __init__(self, env: gym.Env, cost_threshold: float | None = None) -> None:
        super().__init__(env)
        self.cost_threshold = episode_cost_budget(env.unwrapped.task_spec, cost_threshold)

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

    def step(self, actions: Any) -> tuple[Any, ...]:  # type: ignore[override]
        obs, reward, terminated, truncated, info = self.env.step(actions)
        info["cost"] = info["selected_cost_sum"]
        return obs, reward, info["cost"], terminated, truncated, info
