"""Gymnasium adapter: any single-agent task as a ``gymnasium.Env`` (the runner with B = 1)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from powerzoo.envs.metadata import TaskMetadata
from powerzoo.envs.runner import TaskRunner, start_day_option
from powerzoo.tasks.base import Task

__all__ = ["PowerZooEnv", "scalar_info"]


_NDARRAY = np.ndarray  # alias: saves an attribute lookup per key in scalar_info's loop


def scalar_info(info: dict[str, Any], row: int = 0) -> dict[str, Any]:
    """Row ``row`` of a batched info dict: [B] arrays become Python scalars, [B, k] arrays [k]."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if type(value) is _NDARRAY or isinstance(value, _NDARRAY):  # the exact type: cheaper
            if value.ndim != 1:
                value = value[row]
            elif value.dtype.kind == "M":
                value = str(value[row])
            else:
                value = value.item(row)  # the Python scalar directly, no numpy scalar in between
        out[key] = value
    return out


class PowerZooEnv(TaskMetadata, gym.Env):
    """A PowerZoo task as a Gymnasium env, in physical units.

    Observation and action spaces are the task's (``spec.observation`` / ``spec.action``);
    use :func:`powerzoo.rl.make_env` for normalisation, forecasts and the other wrappers.
    ``reset(seed=..., options={"day_id": k})`` starts on day ``k`` of the split;
    ``reset(day_id=k)`` is accepted as a shortcut. Actions follow
    :func:`~powerzoo.envs.runner.conform_action` (numbers only; ``[act_dim]``, give or take axes
    of length 1).

    Args:
        task: A single-agent task.
    """

    metadata = {"render_modes": []}

    def __init__(self, task: Task) -> None:
        if task.spec.agent_mode != "single":
            raise ValueError(
                f"{task.spec.task_id} is a multi-agent task; use framework='pettingzoo' or 'auto'"
            )
        self.task = task
        self.task_spec = task.spec
        self.runner = TaskRunner(task, num_envs=1)
        low, high = self.task_spec.observation.bounds()
        self.observation_space = gym.spaces.Box(low, high, dtype=np.float32)
        a_low, a_high = self.task_spec.action.bounds()
        self.action_space = gym.spaces.Box(a_low, a_high, dtype=np.float32)
        self._episode_over = False

    def reset(
        self,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        day_id: int | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode.

        Args:
            seed: Seed of the episode's random generator (start day and noise).
            options: ``{"day_id": k}`` starts on split day ``k``.
            day_id: Shortcut for ``options={"day_id": day_id}``.

        Returns:
            The first observation (physical units) and the info dict.
        """
        super().reset(seed=seed)
        if seed is not None or self.runner.state is None:
            self.runner.rng = self.np_random  # one generator: seeded by Gymnasium's reset(seed=)
        obs = self.runner.reset(start_day_option(options, day_id))
        self._episode_over = False
        return obs[0], scalar_info(self.runner.reset_info())

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One step; after the episode ended (terminated or truncated) ``step`` raises until
        ``reset``.

        Args:
            action: Physical action [act_dim] within the action space.

        Returns:
            Observation, reward ($ per step), terminated, truncated and the info dict.
        """
        if self._episode_over:
            raise RuntimeError("episode is over; call reset()")
        obs, reward, terminated, truncated, info = self.runner.step(action)
        term, trunc = bool(terminated.item(0)), bool(truncated.item(0))
        self._episode_over = term or trunc
        return obs[0], float(reward.item(0)), term, trunc, scalar_info(info)

    # ---- task metadata ----------------------------------------------------------------------
    def current_date(self) -> str:
        """Calendar date of the running episode (``YYYY-MM-DD``).

        Returns:
            The date as ``YYYY-MM-DD``.
        """
        return str(self.runner.current_dates()[0])

    def observation_fields(self) -> tuple[str, ...]:
        """Names of the observation entries, in order.

        Returns:
            The field names of ``spec.observation``.
        """
        return self.task_spec.observation.names

    def forecast(self, horizon: int) -> np.ndarray:
        """Perfect forecast of the task's exogenous series for the next ``horizon`` steps.

        Args:
            horizon: Steps ahead.

        Returns:
            Array [n_series * horizon], series-major, in each series' units.
        """
        return self.task.forecast(self.runner.state, horizon)[0]
