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

from powerzoo.envs.pipeline import (
    ActionPipeline,
    ObservationPipeline,
    RewardSpec,
    apply_reward,
    compile_reward,
)
from powerzoo.envs.runner import TaskRunner, start_day_option
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
        self.observations = ObservationPipeline(task, forecast_horizon=forecast_horizon, normalize=normalize)
        self.actions = ActionPipeline(self.task_spec, normalize=normalize)
        self.forecast_horizon = self.observations.forecast_horizon
        self.obs_scaler, self.action_scaler = self.observations.scaler, self.actions.scaler
        self.reward_fn = compile_reward(self.task_spec, reward)
        self.single_observation_space = self.observations.space
        self.single_action_space = gym.spaces.Box(self.actions.low, self.actions.high, dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def _observe(self) -> np.ndarray:
        return self.observations.observe(self.runner.state)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every env; ``options={"day_id": k or [k_0..k_{N-1}]}`` picks the start days."""
        if seed is not None:
            self.runner.seed(seed)
            self._np_random_seed = seed if isinstance(seed, int) else None
        elif self.runner.state is None:
            self.runner.seed(None)
        self.runner.reset(start_day_option(options))
        return self._observe(), self.runner.reset_info()

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        try:
            actions = self.actions.to_physical(actions)
        except ValueError as err:
            raise ValueError(f"actions must be a numeric array of shape {self.action_space.shape}") from err
        _, reward, terminated, truncated, info = self.runner.step(actions, observe=False)
        reward = apply_reward(self.reward_fn, reward, info)
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
