"""The observation / action / reward pipeline between a task and the agent, built once per env.

Every adapter (the Gymnasium env's wrappers, the native vector env, the multi-agent core) goes
through these three pieces, so each rule exists once::

    observation  task.observe(state[, obs_mode]) -> + forecast window -> normalised (optional)
    action       [-1, 1] (optional) -> physical units -> TaskRunner (checks and clips)
    reward       the task's reward -> reward override of the step info (optional);
                 the task's own reward stays in info["task_reward"]

Normalisation uses the fixed affine maps of :class:`~powerzoo.envs.scaling.AffineScaler` built
from the spec's nominal ranges (no running statistics), identical in every process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from powerzoo.envs.runner import conform_action
from powerzoo.envs.scaling import AffineScaler
from powerzoo.tasks.base import Task
from powerzoo.tasks.spec import TaskSpec

__all__ = [
    "ObservationPipeline",
    "ActionPipeline",
    "RewardSpec",
    "compile_reward",
    "apply_reward",
    "check_forecast_horizon",
]

RewardSpec = str | Mapping[str, float] | Callable[[dict[str, Any]], Any] | None
RewardFn = Callable[[np.ndarray, dict[str, Any]], np.ndarray]


def check_forecast_horizon(spec: TaskSpec, horizon: Any) -> int:
    """Validate ``forecast_horizon``: a positive int, for tasks with forecastable series.

    Args:
        spec: The task's spec.
        horizon: The requested horizon (steps).

    Returns:
        The horizon as an int; ``ValueError`` when invalid.
    """
    if not spec.forecast_series:
        raise ValueError(f"{spec.task_id} has no exogenous series to forecast")
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ValueError(f"forecast_horizon must be a positive int, got {horizon!r}")
    if horizon > spec.horizon:
        raise ValueError(f"forecast_horizon {horizon} exceeds the episode horizon {spec.horizon}")
    return int(horizon)


class ObservationPipeline:
    """What the agent observes: the task's observation (of ``obs_mode``), forecasts, normalisation.

    ``space`` is one env's (one agent's) observation space; :meth:`observe` returns the batch
    ``[B, dim]`` (single-agent) or ``[B, n_agents, dim]`` (multi-agent), float32.
    """

    def __init__(
        self,
        task: Task,
        *,
        obs_mode: str | None = None,
        forecast_horizon: int | None = None,
        normalize: bool = False,
    ) -> None:
        spec = task.spec
        self.task = task
        self.multi_agent = spec.agent_mode == "multi"
        self.obs_mode = (obs_mode or spec.default_obs_mode) if self.multi_agent else None
        self.layout = spec.observation_spec(self.obs_mode) if self.multi_agent else spec.observation
        self.forecast_horizon = (
            None if forecast_horizon is None else check_forecast_horizon(spec, forecast_horizon)
        )
        low, high = self.layout.bounds()
        if self.forecast_horizon:
            f_low, f_high = task.forecast_range(self.forecast_horizon)
            low = np.concatenate([low, f_low.astype(np.float32)])
            high = np.concatenate([high, f_high.astype(np.float32)])
        self.physical_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.scaler: AffineScaler | None = None
        if normalize:
            self.scaler = AffineScaler(*self.nominal_range())
            low, high = self.scaler.unit_bounds(low, high)
        self.space = gym.spaces.Box(low, high, dtype=np.float32)

    def nominal_range(self) -> tuple[np.ndarray, np.ndarray]:
        """Nominal range of every entry, forecasts included (what normalisation maps to [-1, 1])."""
        low, high = self.layout.nominal()
        if self.forecast_horizon:
            f_low, f_high = self.task.forecast_range(self.forecast_horizon, nominal=True)
            low, high = np.concatenate([low, f_low]), np.concatenate([high, f_high])
        return low, high

    def observe(self, state: Any) -> np.ndarray:
        """The agent's observation batch of ``state``."""
        obs = (
            self.task.observe(state, self.obs_mode)
            if self.multi_agent
            else self.task.observe(state)
        )
        if self.forecast_horizon:
            ahead = self.task.forecast(state, self.forecast_horizon).astype(np.float32)
            obs = np.concatenate([obs, ahead], axis=1)
        return obs if self.scaler is None else self.scaler.to_unit(obs)

    def to_physical(self, obs: Any) -> np.ndarray:
        """An observation as the agent saw it, back in physical units (float64)."""
        obs = np.asarray(obs, dtype=np.float64)
        return obs if self.scaler is None else self.scaler.from_unit(obs)


class ActionPipeline:
    """How the agent's action becomes the task's physical joint action.

    ``low`` / ``high`` are the agent-facing bounds of the joint action (``[-1, 1]`` when
    normalised): ``a_phys = mid + half * a`` is applied once, before the runner clips to the
    physical bounds. ``num_envs``: the batch of actions :meth:`to_physical` takes, ``[num_envs,
    act_dim]`` (``None``: one env's ``[act_dim]``).
    """

    def __init__(
        self, spec: TaskSpec, normalize: bool = False, num_envs: int | None = None
    ) -> None:
        self.spec = spec
        dim = spec.action.dim
        self.shape = (dim,) if num_envs is None else (int(num_envs), dim)
        low, high = spec.action.bounds()
        self.scaler: AffineScaler | None = None
        if normalize:
            self.scaler = AffineScaler(*spec.action.nominal())
            low, high = -np.ones_like(low), np.ones_like(high)
        self.low, self.high = low, high

    def to_physical(self, action: Any) -> Any:
        """Agent action -> physical units (unchanged when not normalised: the runner checks it).

        A normalised action is checked first, by the runner's rule
        (:func:`~powerzoo.envs.runner.conform_action`: numbers only, axes of length 1 aside the
        shape ``self.shape``), since the affine map would turn a bool into a number.
        """
        if self.scaler is None:
            return action
        action = conform_action(
            action, self.shape, f"{self.spec.task_id}: action", self.spec.action.names
        )
        return self.scaler.from_unit(action)

    def from_physical(self, physical: Any) -> np.ndarray:
        """Physical action -> what the agent would send (float32)."""
        return np.asarray(
            physical if self.scaler is None else self.scaler.to_unit(physical), dtype=np.float32
        )


def compile_reward(spec: TaskSpec, reward: RewardSpec) -> RewardFn | None:
    """Turn a ``reward=`` argument into ``f(reward, info) -> reward`` (batched), or ``None``.

    Accepted forms:

    * ``None``: the task's own reward;
    * a preset name from ``spec.reward_presets`` (e.g. ``"penalized"``);
    * a dict of weights: keys from ``spec.reward_terms`` (weight of that term, default 1) and
      from ``spec.constraint_names`` (penalty per unit of that cost, default 0), i.e.
      ``reward = sum_k w_k * term_k - sum_j c_j * cost_j``;
    * a callable ``f(info) -> reward`` computing the reward from the step's info.

    Anything else, or an unknown key, raises ``ValueError``.

    Args:
        spec: The task's spec.
        reward: ``None``, a preset name, a dict of weights or a callable.

    Returns:
        The batched reward function, or ``None`` for the task's own reward.
    """
    if reward is None:
        return None
    if callable(reward):
        user_fn = reward
        return lambda _reward, info: np.asarray(user_fn(info), dtype=np.float64)
    if isinstance(reward, str):
        if reward not in spec.reward_presets:
            raise ValueError(
                f"unknown reward preset {reward!r} for {spec.task_id}; "
                f"valid: {', '.join(spec.reward_presets) or 'none'}"
            )
        reward = spec.reward_presets[reward]
    if not isinstance(reward, Mapping):
        raise ValueError(
            f"reward must be None, a preset name, a dict of weights or a callable, got {reward!r}"
        )
    valid = spec.reward_terms + spec.constraint_names
    unknown = set(reward) - set(valid)
    if unknown:
        raise ValueError(
            f"unknown reward key(s) {sorted(unknown)} for {spec.task_id}; valid: {', '.join(valid)}"
        )
    term_w = np.asarray([float(reward.get(k, 1.0)) for k in spec.reward_terms])
    cost_w = np.asarray([float(reward.get(k, 0.0)) for k in spec.constraint_names])

    def weighted(_reward: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        terms = np.asarray(info["reward_terms"], dtype=np.float64)
        costs = np.asarray(info["constraint_costs"], dtype=np.float64)
        return terms @ term_w - costs @ cost_w

    return weighted


def apply_reward(reward_fn: RewardFn | None, reward: Any, info: dict[str, Any]) -> Any:
    """The reward the agent gets: ``reward`` itself, or ``reward_fn``'s (then
    ``info["task_reward"] = reward``)."""
    if reward_fn is None:
        return reward
    info["task_reward"] = reward
    return reward_fn(np.asarray(reward), info)
