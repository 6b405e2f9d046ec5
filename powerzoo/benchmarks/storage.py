"""The storage of a task, as the baselines table and the task card measure it.

A task **has storage** when its joint action sets the power of a store of energy: an entry whose
unit is ``"MW (+ discharge)"`` or ``"kW (+ discharge)"`` (a battery, an electric car behind a
bidirectional charger). Those entries' applied power (``info["action_applied"]``, what the
physics delivered) gives the storage throughput of an episode, and their action bounds its power
rating:

* **throughput** of a step (MWh) = ``sum over storage entries |applied power| x dt`` (grid side:
  energy charged plus energy discharged), summed per calendar day of the episode
  (:func:`daily_throughput`, what :func:`~powerzoo.benchmarks.evaluation.rollout` records with
  ``storage=True``);
* **power rating** (MW) = ``sum over storage entries max(|low|, |high|)`` of the action bounds
  (:func:`storage_power_mw`);
* **energy capacity** (MWh) = the stores' rated energy, read from the task's device parameters
  (:func:`storage_energy_mwh`): a ``battery`` (on the task or its ``params``) with
  ``energy_capacity_mwh`` (one value per storage entry, or one for all of them), or an EV
  ``fleet`` with ``battery_kwh`` (per car slot).

One **full cycle** moves ``2 x`` the energy capacity through the stores (charged once and
discharged once): :data:`TRADING_DAY_CYCLE_SHARE` of it in a day makes a **trading day**
(:func:`trading_day_threshold_mwh`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "STORAGE_UNITS",
    "TRADING_DAY_CYCLE_SHARE",
    "storage_entries",
    "has_storage",
    "storage_power_mw",
    "storage_energy_mwh",
    "trading_day_threshold_mwh",
    "StorageMeter",
    "daily_throughput",
]

STORAGE_UNITS = {"MW (+ discharge)": 1.0, "kW (+ discharge)": 1e-3}
"""Action units of a storage power entry, with their factor to MW."""

TRADING_DAY_CYCLE_SHARE = 0.05
"""A day is a trading day when the storage throughput exceeds this share of one full cycle
(``2 x`` the energy capacity): 5 %, i.e. 10 % of the capacity moved in and out."""


def storage_entries(spec: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, to_mw)`` of the joint action entries of ``spec`` (a
    :class:`~powerzoo.tasks.spec.TaskSpec`) that set a storage power, and each one's factor to MW.

    Args:
        spec: The task's spec.

    Returns:
        Indices [k] (int) into the joint action and factors [k] (1 for MW, 0.001 for kW); empty
        arrays for a task without storage.
    """
    picked = [(i, STORAGE_UNITS[u]) for i, u in enumerate(spec.action.units) if u in STORAGE_UNITS]
    index = np.asarray([i for i, _ in picked], dtype=np.int64)
    return index, np.asarray([f for _, f in picked], dtype=np.float64)


def has_storage(spec: Any) -> bool:
    """Whether the task of ``spec`` sets the power of a store of energy (module docstring)."""
    return storage_entries(spec)[0].size > 0


def storage_power_mw(spec: Any) -> float:
    """The total storage power rating of the task of ``spec``, MW: ``sum max(|low|, |high|)`` of
    its storage action entries (0 without storage).

    Args:
        spec: The task's spec.

    Returns:
        The rating in MW.
    """
    index, to_mw = storage_entries(spec)
    low = np.abs(np.asarray(spec.action.low, dtype=np.float64)[index])
    high = np.abs(np.asarray(spec.action.high, dtype=np.float64)[index])
    return float(np.sum(np.maximum(low, high) * to_mw))


def storage_energy_mwh(task: Any) -> float | None:
    """The total rated energy of task ``task``'s stores, MWh (module docstring); ``None`` when
    the task has no storage or its device parameters do not say.

    Args:
        task: A built task (:func:`powerzoo.tasks.make_task`).

    Returns:
        The energy capacity in MWh, or ``None``.
    """
    n = storage_entries(task.spec)[0].size
    if n == 0:
        return None
    params = getattr(task, "params", None)
    fleet = getattr(task, "fleet", None) or getattr(params, "fleet", None)
    if fleet is not None and hasattr(fleet, "battery_kwh"):
        return float(fleet.battery_kwh) * 1e-3 * n
    battery = getattr(task, "battery", None) or getattr(params, "battery", None)
    energy = getattr(battery, "energy_capacity_mwh", None)
    if energy is None:
        return None
    energy = np.asarray(energy, dtype=np.float64)
    return float(energy.sum() if energy.ndim and energy.size == n else energy.mean() * n)


def trading_day_threshold_mwh(energy_mwh: float) -> float:
    """Throughput (MWh) a day must exceed to count as a trading day: :data:`TRADING_DAY_CYCLE_SHARE`
    of one full cycle, ``2 x energy_mwh``.

    Args:
        energy_mwh: The stores' total energy capacity, MWh.

    Returns:
        The threshold in MWh.
    """
    return TRADING_DAY_CYCLE_SHARE * 2.0 * float(energy_mwh)


class StorageMeter:
    """Sums the storage throughput of one episode per calendar day.

    Args:
        spec: The task's spec (its storage entries, step length).
    """

    def __init__(self, spec: Any) -> None:
        self.index, self.to_mw = storage_entries(spec)
        self.dt_h = spec.step_minutes / 60.0
        self.steps_per_day = max(1, (24 * 60) // spec.step_minutes)
        self.days: list[float] = []
        self._step = 0

    def add(self, applied: np.ndarray) -> None:
        """Count one step of the joint applied action ``applied`` [act_dim] (physical units).

        Args:
            applied: The step's ``info["action_applied"]`` of the whole joint action.
        """
        day = self._step // self.steps_per_day
        if day == len(self.days):
            self.days.append(0.0)
        power = np.abs(np.asarray(applied, dtype=np.float64).reshape(-1)[self.index])
        self.days[day] += float(power @ self.to_mw) * self.dt_h
        self._step += 1


def daily_throughput(records: Sequence[Any]) -> list[list[float]] | None:
    """Per episode, the storage throughput of each of its days (MWh), from episode records that
    carry ``storage_mwh`` (``None`` when they do not).

    Args:
        records: :class:`~powerzoo.benchmarks.evaluation.EpisodeRecord` s.

    Returns:
        ``[[MWh of day 0, MWh of day 1, ...] per episode]``, or ``None``.
    """
    if not records or any("storage_mwh" not in r for r in records):
        return None
    return [[float(x) for x in r["storage_mwh"]] for r in records]
