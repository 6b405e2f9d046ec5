"""Native vectorised adapter: N copies of a single-agent task stepped in one batched call.

Follows Gymnasium's vector conventions with ``AutoresetMode.SAME_STEP``: when an episode ends,
``step`` returns the first observation of the next episode, the last observation in
``info["final_obs"]`` (rows flagged by ``info["_final_obs"]``) and the ending step's info in
``info["final_info"]``. The top-level ``info`` of a step always describes that step for every
row (rewards, costs, applied actions), so costs are never lost at episode boundaries.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from powerzoo.envs.runner import TaskRunner
from powerzoo.envs.scaling import AffineScaler
from powerzoo.envs.wrappers import (
    RewardSpec,
    check_forecast_horizon,
    compile_reward,
    nominal_observation_range,
    with_forecast_bounds,
)
from powerzoo.tasks.base import Task

__all__ = ["PowerZooVectorEnv"]


class PowerZooVectorEnv(VectorEnv):
    """``num_envs`` episodes of one task; ``step(actions[N, act_dim])`` is a single numpy call.

    Options mirror :func:`powerzoo.rl.make_env`: ``normalize``, ``forecast_horizon``, ``reward``.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self,
        task: Task,
        num_envs: int,
        *,
        normalize: bool = False,
        forecast_horizon: int | None = None,
        reward: RewardSpec = None,
    ) -> None:
        if task.spec.agent_mode != "single":
            raise ValueError(f"{task.spec.task_id} is multi-agent; PowerZooVectorEnv serves single-agent tasks")
        self.task = task
        self.task_spec = task.spec
        self.runner = TaskRunner(task, num_envs)
        self.num_envs = self.runner.num_envs
        self.forecast_horizon = None if forecast_horizon is None else check_forecast_horizon(self.task_spec, forecast_horizon)
        self.reward_fn = compile_reward(self.task_spec, reward)

        space = gym.spaces.Box(*self.task_spec.observation.bounds(), dtype=np.float32)
        if self.forecast_horizon:
            space = with_forecast_bounds(space, task, self.forecast_horizon)
        low, high = space.low, space.high
        a_low, a_high = self.task_spec.action.bounds()
        self.obs_scaler = self.action_scaler = None
        if normalize:
            self.obs_scaler = AffineScaler(*nominal_observation_range(self.task_spec, task, self.forecast_horizon))
            self.action_scaler = AffineScaler(*self.task_spec.action.nominal())
            low, high = self.obs_scaler.unit_bounds(low, high)
            a_low, a_high = -np.ones_like(a_low), np.ones_like(a_high)
        self.single_observation_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.single_action_space = gym.spaces.Box(a_low, a_high, dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    # ---- observation / action pipeline ------------------------------------------------------
    def _observe(self) -> np.ndarray:
        obs = self.task.observe(self.runner.state)
        if self.forecast_horizon:
            ahead = self.task.forecast(self.runner.state, self.forecast_horizon).astype(np.float32)
            obs = np.concatenate([obs, ahead], axis=1)
        return obs if self.obs_scaler is None else self.obs_scaler.to_unit(obs)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every env; ``options={"day_id": k or [k_0..k_{N-1}]}`` picks the start days."""
        if seed is not None:
            self.runner.seed(seed)
            self._np_random_seed = seed if isinstance(seed, int) else None
        elif self.runner.state is None:
            self.runner.seed(None)
        options = dict(options or {})
        unknown = set(options) - {"day_id"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; valid: day_id")
        self.runner.reset(options.get("day_id"))
        return self._observe(), self.runner.reset_info()

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if self.action_scaler is not None:
            try:
                actions = self.action_scaler.from_unit(actions)
            except (TypeError, ValueError) as err:
                raise ValueError(f"actions must be a numeric array of shape {self.action_space.shape}") from err
        _, reward, terminated, truncated, info = self.runner.step(actions, observe=False)
        if self.reward_fn is not None:
            info["task_reward"] = reward
            reward = self.reward_fn(reward, info)
        obs = self._observe()
        done = terminated | truncated
        if done.any():
            info["final_obs"] = obs
            info["_final_obs"] = done
            info["final_info"] = dict(info)
            info["_final_info"] = done
            self.runner.reset_done(done)
            obs = self._observe()
        return obs, reward, terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        self.runner.state = None

    # ---- task metadata ----------------------------------------------------------------------
    def constraint_names(self) -> tuple[str, ...]:
        """Order of ``info["constraint_costs"]`` columns."""
        return self.task_spec.constraint_names

    def reward_term_names(self) -> tuple[str, ...]:
        """Order of ``info["reward_terms"]`` columns."""
        return self.task_spec.reward_terms
