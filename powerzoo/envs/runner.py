"""The engine under every adapter: one task, a batch of ``B`` episodes, explicit RNG.

The Gymnasium env is this runner with ``B = 1`` and the native vector env is it with ``B = N``,
so action checking, truncation, autoreset bookkeeping and the CMDP info keys exist once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.tasks.base import StepOutput, Task, merge_state

__all__ = ["TaskRunner", "cost_info"]


def cost_info(task: Task, costs: np.ndarray) -> dict[str, Any]:
    """CMDP info keys (SPEC 3.2) from a cost array [B, n_constraints]; the only place they are built."""
    spec = task.spec
    selected = costs[:, spec.selected_index]
    info: dict[str, Any] = {
        "constraint_costs": costs,
        "cost_sum": costs.sum(axis=1),
        "selected_constraint_names": spec.selected_constraints,
        "selected_constraint_costs": selected,
        "selected_cost_sum": selected.sum(axis=1),
        "is_safe": ~np.any(costs > 0.0, axis=1),
    }
    for i, name in enumerate(spec.constraint_names):
        info[f"cost_{name}"] = costs[:, i]
    return info


class TaskRunner:
    """Batched episodes of one task: reset, checked step, truncation, partial reset."""

    def __init__(self, task: Task, num_envs: int = 1) -> None:
        if int(num_envs) < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.task = task
        self.spec = task.spec
        self.num_envs = int(num_envs)
        self.act_low, self.act_high = (a.astype(np.float64) for a in task.spec.action.bounds())
        self.rng = np.random.default_rng()
        self.state: Any = None

    # ---- seeding and reset ------------------------------------------------------------------
    def seed(self, seed: int | None) -> None:
        """Re-seed the runner's generator (``None``: fresh OS entropy)."""
        self.rng = np.random.default_rng(seed)

    def _day_ids(self, n: int, day_id: Any) -> np.ndarray:
        if day_id is None:
            return self.rng.integers(0, self.task.n_days, size=n)
        day_id = np.asarray(day_id)
        if day_id.ndim == 0:
            day_id = np.full(n, day_id)
        if day_id.shape != (n,):
            raise ValueError(f"day_id must be an int or an array of {n} ints, got shape {day_id.shape}")
        return self.task.check_day_id(day_id)

    def reset(self, day_id: Any = None) -> np.ndarray:
        """Start all ``B`` episodes (on ``day_id`` if given, else on days drawn from the split)."""
        self.state = self.task.reset(self.rng, self._day_ids(self.num_envs, day_id))
        return self.task.observe(self.state)

    def reset_done(self, done: np.ndarray) -> None:
        """Restart the episodes flagged in ``done`` [B] on freshly drawn days (autoreset).

        Draws a start day for every row (so the RNG stream does not depend on which rows
        ended) and keeps the fresh state only where ``done``.
        """
        fresh = self.task.reset(self.rng, self._day_ids(self.num_envs, None))
        self.state = merge_state(self.state, done, fresh)

    def reset_info(self) -> dict[str, Any]:
        """Info returned by ``reset``: where each episode starts."""
        day_id = self.task.episode_day(self.state)
        return {
            "day_id": day_id,
            "date": calendar.DATES[self.task.calendar_day(day_id)],
            "step": self.task.time_index(self.state),
        }

    # ---- stepping ---------------------------------------------------------------------------
    def check_action(self, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """Validate a physical action batch [B, act_dim]; clip into bounds.

        Returns the clipped action (float64) and a [B] flag of rows that were clipped. Wrong
        shape, non-numeric dtype and NaN/inf raise ``ValueError``.
        """
        try:
            action = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{self.spec.task_id}: action must be numeric, got {action!r}") from err
        expected = (self.num_envs, self.spec.action.dim)
        if action.shape != expected:
            if action.size == expected[0] * expected[1] and self.num_envs == 1:
                action = action.reshape(expected)
            else:
                raise ValueError(
                    f"{self.spec.task_id}: action has shape {action.shape}, expected "
                    f"{expected[1:] if self.num_envs == 1 else expected} "
                    f"({', '.join(self.spec.action.names)})"
                )
        if not np.all(np.isfinite(action)):
            raise ValueError(f"{self.spec.task_id}: action contains NaN or inf: {action.tolist()}")
        clipped = np.clip(action, self.act_low, self.act_high)
        return clipped, np.any(clipped != action, axis=1)

    def step(
        self, action: Any, observe: bool = True
    ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One batched step; returns obs (``None`` if not ``observe``), reward, terminated, truncated, info."""
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        physical, clipped = self.check_action(action)
        self.state, out = self.task.step(self.state, physical, self.rng)
        truncated = (self.task.time_index(self.state) >= self.spec.horizon) & ~out.terminated
        info = self._step_info(out, physical, clipped)
        obs = self.task.observe(self.state) if observe else None
        return obs, out.reward, out.terminated, truncated, info

    def _step_info(self, out: StepOutput, requested: np.ndarray, clipped: np.ndarray) -> dict[str, Any]:
        info: dict[str, Any] = dict(out.info)
        info.update(cost_info(self.task, out.constraint_costs))
        info["reward_terms"] = out.reward_terms
        info["action_requested"] = requested
        info["action_applied"] = out.action_applied
        info["action_clipped"] = clipped
        info["day_id"] = self.task.episode_day(self.state)
        info["step"] = self.task.time_index(self.state)
        return info
