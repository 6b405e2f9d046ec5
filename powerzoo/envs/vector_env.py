"""Native vectorised adapter: N copies of a single-agent task stepped in one batched call.

Follows Gymnasium's vector conventions. ``autoreset_mode`` (``make_env(..., num_envs=N,
autoreset_mode=...)``) says what happens when an episode ends:

* ``"next_step"`` (default, Gymnasium's own default, accepted by its vector wrappers): the step
  that ends an episode returns its last observation; the next ``step`` call resets that row
  (its action is ignored), returning the new episode's first observation with reward 0, both
  flags false and zero costs in that row of ``info``.
* ``"same_step"``: the ending step already returns the next episode's first observation; the
  last one is in ``info["final_obs"]`` (rows flagged by ``info["_final_obs"]``) and the ending
  step's info in ``info["final_info"]``. The top-level ``info`` of a step always describes
  that step for every row (rewards, costs, applied actions), so costs are never lost.
* ``"disabled"``: rows are never reset by ``step``; once a row's episode has ended, ``step``
  raises ``RuntimeError`` (as the single env does after its episode) until the finished rows
  are restarted by ``reset(options={"reset_mask": m})`` or ``reset()``.

``reset(seed=..., options={"day_id": k or [k_0..k_{N-1}], "reset_mask": [N] bools})`` picks the
start days and, with a mask, resets only those rows; any other option key raises. ``seed`` is an
int or a list of N ints; the N rows share one generator seeded from it. Actions ``[N, act_dim]``
follow :func:`~powerzoo.envs.runner.conform_action` (numbers only; axes of length 1 may be added
or dropped).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from powerzoo.envs.metadata import TaskMetadata
from powerzoo.envs.pipeline import (
    ActionPipeline,
    ObservationPipeline,
    RewardSpec,
    apply_reward,
    compile_reward,
)
from powerzoo.envs.runner import RESET_OPTIONS, TaskRunner, reset_options, short_repr
from powerzoo.tasks.base import Task, merge_state

__all__ = ["PowerZooVectorEnv", "AUTORESET_MODES"]

AUTORESET_MODES = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}
_MODE_NAMES = {mode: name for name, mode in AUTORESET_MODES.items()}
VECTOR_RESET_OPTIONS = (*RESET_OPTIONS, "reset_mask")


def autoreset_mode_of(mode: str | AutoresetMode) -> AutoresetMode:
    """Gymnasium's ``AutoresetMode`` for a name (``"next_step"``, ...) or the enum itself."""
    if isinstance(mode, AutoresetMode):
        return mode
    if mode not in AUTORESET_MODES:
        raise ValueError(f"unknown autoreset_mode {mode!r}; valid: {', '.join(AUTORESET_MODES)}")
    return AUTORESET_MODES[mode]


class PowerZooVectorEnv(TaskMetadata, VectorEnv):
    """``num_envs`` episodes of one task; ``step(actions[N, act_dim])`` is a single numpy call.

    Options mirror :func:`powerzoo.rl.make_env`: ``normalize``, ``forecast_horizon``, ``reward``,
    ``autoreset_mode`` (module docstring).

    Args:
        task: A single-agent task.
        num_envs: Episodes stepped at once (N).
        normalize: Scale observations to [-1, 1] and actions from [-1, 1] by the nominal ranges.
        forecast_horizon: Append perfect forecasts of this many steps to each observation.
        reward: Reward preset name, weights or callable (``None``: the task's reward, $ per step).
        autoreset_mode: ``"next_step"``, ``"same_step"`` or ``"disabled"``.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        task: Task,
        num_envs: int,
        *,
        normalize: bool = False,
        forecast_horizon: int | None = None,
        reward: RewardSpec = None,
        autoreset_mode: str | AutoresetMode = "next_step",
    ) -> None:
        if task.spec.agent_mode != "single":
            raise ValueError(
                f"{task.spec.task_id} is multi-agent; PowerZooVectorEnv serves single-agent tasks"
            )
        self.task = task
        self.task_spec = task.spec
        self.runner = TaskRunner(task, num_envs)
        self.num_envs = self.runner.num_envs
        self.autoreset_mode = autoreset_mode_of(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = None
        # rows whose episode ended and has not restarted: NEXT_STEP resets them at the next
        # step; the other modes refuse to step them (SAME_STEP only meets them after a switch
        # of mode by autoreset_as)
        self._ended = np.zeros(self.num_envs, dtype=bool)
        self.actions = ActionPipeline(self.task_spec, normalize=normalize, num_envs=self.num_envs)
        self.observations = ObservationPipeline(
            task, forecast_horizon=forecast_horizon, normalize=normalize
        )
        self.forecast_horizon = self.observations.forecast_horizon
        self.obs_scaler, self.action_scaler = self.observations.scaler, self.actions.scaler
        self.reward_fn = compile_reward(self.task_spec, reward)
        self.single_observation_space = self.observations.space
        self.single_action_space = gym.spaces.Box(
            self.actions.low, self.actions.high, dtype=np.float32
        )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def _observe(self) -> np.ndarray:
        return self.observations.observe(self.runner.state)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every env, or the rows of ``options["reset_mask"]``; ``options["day_id"]`` picks
        start days.

        Args:
            seed: One int for the batch, or a list of N ints (one per row).
            options: ``{"day_id": k or [N], "reset_mask": [N] bool}``.

        Returns:
            Observations [N, obs_dim] and the batched info dict.
        """
        if seed is not None:
            if not isinstance(seed, (int, np.integer)) and len(seed) != self.num_envs:
                raise ValueError(
                    f"seed must be an int or a list of {self.num_envs} ints, got {len(seed)} seeds"
                )
            self.runner.seed(
                seed if isinstance(seed, (int, np.integer)) else [int(s) for s in seed]
            )
            self._np_random_seed = seed if isinstance(seed, int) else None
        elif self.runner.state is None:
            self.runner.seed(None)
        options = reset_options(options, VECTOR_RESET_OPTIONS)
        mask, day_id = options.get("reset_mask"), options.get("day_id")
        if mask is None or self.runner.state is None:
            self.runner.reset(day_id)
            self._ended[:] = False
        else:
            mask = np.asarray(mask)
            if mask.dtype != bool or mask.shape != (self.num_envs,):
                raise ValueError(
                    f"reset_mask must be {self.num_envs} bools, got {short_repr(mask)}"
                )
            self.runner.reset_done(mask, day_id)
            self._ended &= ~mask
        info = self.runner.reset_info()
        if self.reward_fn is not None:
            info["task_reward"] = np.zeros(self.num_envs)
        return self._observe(), info

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One batched step of every row (``actions`` [N, act_dim]; the module docstring says
        what happens to rows whose episode ended).

        Args:
            actions: Actions [N, act_dim].

        Returns:
            Observations [N, obs_dim], rewards [N] ($ per step), terminations [N], truncations [N]
            and the batched info dict.
        """
        pending = self._ended
        if pending.any() and self.autoreset_mode is not AutoresetMode.NEXT_STEP:
            raise RuntimeError(
                f"episode is over in row(s) {short_repr(np.flatnonzero(pending).tolist())}; "
                "call reset() for the finished rows: reset(options={'reset_mask': mask}) "
                "restarts only them "
                f"(autoreset_mode={_MODE_NAMES[self.autoreset_mode]!r} does not restart them)"
            )
        actions = self.actions.to_physical(actions)
        if pending.any():  # NEXT_STEP: rows that ended last step start again now
            self.runner.reset_done(pending)
            fresh = self.runner.state
        _, reward, terminated, truncated, info = self.runner.step(actions, observe=False)
        reward = apply_reward(self.reward_fn, reward, info)
        if pending.any():
            self.runner.state = merge_state(
                self.runner.state, pending, fresh
            )  # the reset rows did not step
            reward, terminated, truncated = self._blank_rows(
                pending, reward, terminated, truncated, info
            )
        obs = self._observe()
        done = terminated | truncated
        if self.autoreset_mode is not AutoresetMode.SAME_STEP:
            self._ended = done
        elif done.any():
            info["final_obs"] = obs
            info["_final_obs"] = done
            info["final_info"] = dict(info)
            info["_final_info"] = done
            self.runner.reset_done(done)
            obs = self._observe()
        return obs, reward, terminated, truncated, info

    def _blank_rows(
        self,
        rows: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        info: dict[str, Any],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows reset at this step (NEXT_STEP): reward 0, flags false, zero step quantities in
        ``info``."""
        n = self.num_envs
        for key, value in info.items():
            if isinstance(value, np.ndarray) and value.ndim and value.shape[0] == n:
                info[key] = np.where(
                    rows.reshape((n,) + (1,) * (value.ndim - 1)), np.zeros((), value.dtype), value
                )
        info["day_id"] = self.task.episode_day(self.runner.state)
        info["step"] = self.task.time_index(self.runner.state)
        return np.where(rows, 0.0, reward), terminated & ~rows, truncated & ~rows

    @contextlib.contextmanager
    def autoreset_as(self, mode: str | AutoresetMode) -> Iterator[PowerZooVectorEnv]:
        """Run a block under another autoreset mode (for consumers written for one mode);
        restored after.

        Rows whose episode ended stay ended across the switch: under ``"next_step"`` the next
        step restarts them, under the other modes ``step`` refuses them until ``reset``.

        Args:
            mode: ``"next_step"``, ``"same_step"`` or ``"disabled"``.

        Yields:
            This env, under ``mode``.
        """
        saved = self.autoreset_mode, self.metadata
        self.autoreset_mode = autoreset_mode_of(mode)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}
        try:
            yield self
        finally:
            self.autoreset_mode, self.metadata = saved

    def close_extras(self, **kwargs: Any) -> None:
        """Drop the batch's state.

        Args:
            **kwargs: Ignored (Gymnasium's signature).
        """
        self.runner.state = None

    # ---- task metadata ----------------------------------------------------------------------
    def current_dates(self) -> np.ndarray:
        """Calendar date of each running episode [N] (``numpy.datetime64[D]``).

        Returns:
            Dates [N], ``datetime64[D]``.
        """
        return self.runner.current_dates()
