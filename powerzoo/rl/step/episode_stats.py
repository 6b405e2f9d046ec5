"""Episode statistics of a step-by-step trainer and what it logs of them.

:class:`EpisodeTracker` sums the return, length and constraint costs of the episode in progress
in each sub-env; :class:`EpisodeStats` keeps the summaries of the last finished episodes of one
mode (training or evaluation) and records them, or an ``info`` key, on an SB3 logger
(``environment_info`` of :class:`~powerzoo.rl.step.config.StepTrainerConfig`).
"""

from __future__ import annotations

import numbers
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["EPISODE_HISTORY", "EpisodeTracker", "EpisodeStats", "numeric_items"]

EPISODE_HISTORY = 100
"""Finished episodes kept per mode."""


class EpisodeTracker:
    """Running return, length and constraint costs of the episode in progress in each sub-env."""

    def __init__(self, n_envs: int) -> None:
        self.n_envs = n_envs
        self.reset()

    def reset(self) -> None:
        """Forget the episodes in progress (the next step starts new ones)."""
        self.returns = np.zeros(self.n_envs, dtype=np.float64)
        self.lengths = np.zeros(self.n_envs, dtype=np.int64)
        self.costs: list[np.ndarray | None] = [None] * self.n_envs

    def update(
        self, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Add one step; return the summaries (``return``, ``length``, ``costs``, ``env_index``)
        of the episodes that ended at it."""
        self.returns += np.asarray(rewards, dtype=np.float64).reshape(self.n_envs)
        self.lengths += 1
        finished = []
        for i, info in enumerate(infos):
            step_costs = info.get("constraint_costs")
            if step_costs is not None:
                step_costs = np.atleast_1d(np.asarray(step_costs, dtype=np.float64))
                previous = self.costs[i]
                self.costs[i] = step_costs.copy() if previous is None else previous + step_costs
            if dones[i]:
                finished.append(
                    {
                        "return": float(self.returns[i]),
                        "length": int(self.lengths[i]),
                        "costs": self.costs[i],
                        "env_index": i,
                    }
                )
                self.returns[i], self.lengths[i], self.costs[i] = 0.0, 0, None
        return finished


class EpisodeStats:
    """Finished episodes of one mode and their logging.

    Args:
        n_envs: number of sub-envs stepped together.
        prefix: logger namespace (``"rollout"`` for training, ``"eval"`` for evaluation).
        environment_info: ``"episode"`` (return, length and summed costs of each finished
            episode), another ``info`` key (its value at every step where present) or ``""``.
        cost_names: names of the ``info["constraint_costs"]`` entries, given their number.

    Attributes:
        episodes: summaries of the last :data:`EPISODE_HISTORY` finished episodes, oldest first.
    """

    def __init__(
        self,
        n_envs: int,
        prefix: str,
        environment_info: str,
        cost_names: Callable[[int], tuple[str, ...]],
    ) -> None:
        self.tracker = EpisodeTracker(n_envs)
        self.prefix = prefix
        self.environment_info = environment_info
        self.episodes: deque[dict[str, Any]] = deque(maxlen=EPISODE_HISTORY)
        self._name_costs = cost_names
        self._cost_names: tuple[str, ...] = ()

    def reset(self) -> None:
        """Forget the episodes in progress (finished ones are kept)."""
        self.tracker.reset()

    def record(
        self, logger: Any, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Add one step (``rewards`` in the env's own scale) and log it; return the episodes that
        ended."""
        finished = self.tracker.update(rewards, dones, infos)
        self.episodes.extend(finished)
        key = self.environment_info
        if not key:
            return finished
        prefix = self.prefix
        if key == "episode":
            for episode in finished:
                logger.record_mean(f"{prefix}/episode_return", episode["return"])
                logger.record_mean(f"{prefix}/episode_length", episode["length"])
                costs = episode["costs"]
                if costs is not None:
                    if len(self._cost_names) != costs.size:  # looked up once per number of costs
                        self._cost_names = self._name_costs(costs.size)
                    for name, cost in zip(self._cost_names, costs, strict=True):
                        logger.record_mean(f"{prefix}/episode_cost_{name}", float(cost))
                    logger.record_mean(f"{prefix}/episode_cost_sum", float(costs.sum()))
            return finished
        for info in infos:
            if key in info:
                for name, value in numeric_items(key, info[key]):
                    logger.record_mean(f"{prefix}/{name}", value)
        return finished


def numeric_items(name: str, value: Any) -> list[tuple[str, float]]:
    """``(log key, number)`` pairs for an info value: numbers, arrays element-wise, dicts per
    entry."""
    if isinstance(value, Mapping):
        items: list[tuple[str, float]] = []
        for key, sub in value.items():
            items.extend(numeric_items(f"{name}/{key}", sub))
        return items
    if isinstance(value, (bool, np.bool_, numbers.Number)):
        return [(name, float(value))]
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        flat = value.ravel()
        if flat.size == 1:
            return [(name, float(flat[0]))]
        return [(f"{name}_{j}", float(v)) for j, v in enumerate(flat)]
    return []
