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
    """Per-episode budget of the safe-RL cost (default 1.0: the episode ends within every budget
    whenever the budget-normalised cost sums to at most 1, see :func:`budget_scale`)."""
    budget = 1.0 if cost_threshold is None else float(cost_threshold)
    if not budget >= 0.0:
        raise ValueError(f"cost_threshold must be non-negative, got {cost_threshold}")
    return budget


def budget_scale(spec: TaskSpec) -> np.ndarray:
    """``1 / budget`` of each selected constraint [k]: the safe-RL cost of a step is
    ``sum_i cost_i / budget_i``, each selected cost as a fraction of its per-episode budget, so
    costs of different units (MWh, p.u., GPU-h) are never added as they are. An episode whose
    safe-RL cost sums to at most 1 keeps every budget (a sufficient, conservative condition)."""
    budgets = np.asarray([spec.cost_thresholds[n] for n in spec.selected_constraints], float)
    if np.any(budgets <= 0.0):
        raise ValueError(
            f"{spec.task_id}: the safe-RL cost divides by each selected budget; all must be "
            f"positive, got {dict(spec.cost_thresholds)}"
        )
    return 1.0 / budgets


class ForecastWrapper(gym.ObservationWrapper):
    """Appends perfect forecasts of the task's exogenous series for the next ``horizon`` steps.

    Args:
        env: A PowerZoo Gymnasium env (single-agent).
        horizon: Steps of forecast appended per series.
    """

    def __init__(self, env: gym.Env, horizon: int) -> None:
        super().__init__(env)
        base = env.unwrapped
        self.horizon = check_forecast_horizon(base.task_spec, horizon)
        self.observation_space = ObservationPipeline(base.task, forecast_horizon=self.horizon).space

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """Append the forecast to one observation.

        Args:
            observation: The wrapped env's observation [obs_dim].

        Returns:
            Observation [obs_dim + n_series * horizon], float32.
        """
        ahead = self.env.unwrapped.forecast(self.horizon).astype(np.float32)
        return np.concatenate([observation, ahead])


class NormalizeWrapper(gym.Wrapper):
    """Observations scaled to about [-1, 1]; actions taken in [-1, 1] and mapped to physical units.

    The maps are the fixed affine ones of :class:`~powerzoo.envs.pipeline.ObservationPipeline` and
    :class:`~powerzoo.envs.pipeline.ActionPipeline` built from the task spec (no running
    statistics), so they are identical in every process.

    Args:
        env: A PowerZoo Gymnasium env, possibly inside a :class:`ForecastWrapper`.
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
        """Reset the wrapped env.

        Args:
            **kwargs: Passed to the wrapped env's ``reset`` (``seed``, ``options``).

        Returns:
            Scaled observation and the info dict.
        """
        obs, info = self.env.reset(**kwargs)
        return self.obs_scaler.to_unit(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Step with an action in [-1, 1].

        Args:
            action: Action [act_dim] in [-1, 1].

        Returns:
            Scaled observation, reward ($), terminated, truncated and info.
        """
        obs, reward, terminated, truncated, info = self.env.step(self._actions.to_physical(action))
        return self.obs_scaler.to_unit(obs), reward, terminated, truncated, info


class RewardOverrideWrapper(gym.Wrapper):
    """Replaces the reward by :func:`compile_reward`'s function of the step info.

    The task's own reward stays available as ``info["task_reward"]``.

    Args:
        env: A PowerZoo Gymnasium env.
        reward: Preset name, dict of weights, or callable ``f(info) -> reward``.
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
        """Reset the wrapped env; ``info["task_reward"]`` is 0.

        Args:
            **kwargs: Passed to the wrapped env's ``reset``.

        Returns:
            Observation and the info dict.
        """
        obs, info = self.env.reset(**kwargs)
        info["task_reward"] = 0.0  # same info keys at reset and step
        return obs, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Step; the reward is the override's.

        Args:
            action: Action passed on unchanged.

        Returns:
            Observation, overridden reward, terminated, truncated and info.
        """
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(apply_reward(self.reward_fn, reward, info)), terminated, truncated, info


class SafeRLWrapper(gym.Wrapper):
    """Safe-RL view: ``step`` returns ``(obs, reward, cost, terminated, truncated, info)``.

    ``cost`` (also ``info["cost"]``) is unit-free: each selected constraint's cost this step as a
    fraction of its per-episode budget, summed (:func:`budget_scale`); ``cost_threshold`` is the
    per-episode budget of that sum (default 1.0). The costs in their own units stay in
    ``info["constraint_costs"]``.

    Args:
        env: A PowerZoo Gymnasium env.
        cost_threshold: Per-episode budget of the summed, budget-scaled cost (default 1.0).
    """

    def __init__(self, env: gym.Env, cost_threshold: float | None = None) -> None:
        super().__init__(env)
        self.cost_threshold = episode_cost_budget(env.unwrapped.task_spec, cost_threshold)
        self.scale = budget_scale(env.unwrapped.task_spec)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset the wrapped env; ``info["cost"]`` is 0.

        Args:
            **kwargs: Passed to the wrapped env's ``reset``.

        Returns:
            Observation and the info dict.
        """
        obs, info = self.env.reset(**kwargs)
        info["cost"] = 0.0  # same info keys at reset and step
        return obs, info

    def step(self, action: Any) -> tuple[np.ndarray, float, float, bool, bool, dict[str, Any]]:  # type: ignore[override]
        """Step and report the cost.

        Args:
            action: Action passed on unchanged.

        Returns:
            Observation, reward ($), cost (fraction of the budgets), terminated, truncated and info.
        """
        obs, reward, terminated, truncated, info = self.env.step(action)
        cost = float(np.dot(np.asarray(info["selected_constraint_costs"], float), self.scale))
        info["cost"] = cost
        return obs, reward, cost, terminated, truncated, info


class SafeRLVectorWrapper(gym.vector.VectorWrapper):
    """Vector form of :class:`SafeRLWrapper`: ``step`` returns a [N] ``cost`` array as 3rd item.

    Args:
        env: A PowerZoo vector env.
        cost_threshold: Per-episode budget of the summed, budget-scaled cost (default 1.0).
    """

    def __init__(self, env: gym.vector.VectorEnv, cost_threshold: float | None = None) -> None:
        super().__init__(env)
        self.cost_threshold = episode_cost_budget(env.unwrapped.task_spec, cost_threshold)
        self.scale = budget_scale(env.unwrapped.task_spec)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the wrapped env; ``info["cost"]`` is zeros [N].

        Args:
            **kwargs: Passed to the wrapped env's ``reset``.

        Returns:
            Observations and the info dict.
        """
        obs, info = self.env.reset(**kwargs)
        info["cost"] = np.zeros(self.env.num_envs)
        return obs, info

    def step(self, actions: Any) -> tuple[Any, ...]:  # type: ignore[override]
        """Step every row and report the costs.

        Args:
            actions: Actions [N, act_dim] passed on unchanged.

        Returns:
            Observations, rewards [N], costs [N], terminations, truncations and info.
        """
        obs, reward, terminated, truncated, info = self.env.step(actions)
        info["cost"] = np.asarray(info["selected_constraint_costs"], float) @ self.scale
        return obs, reward, info["cost"], terminated, truncated, info
