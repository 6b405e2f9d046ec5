"""The observation pieces the per-agent feeder tasks share: the rows of the fields they have in
common (``(name, unit, low, high, nominal_low, nominal_high)``, :meth:`VectorSpec.from_rows`),
the slots every mode has (:class:`FeederSlots`) and the writer of the system block.

Grid values in an observation are those of the previous step's power flow (at reset, the flow of
the first step's loads with the units idle); the neighbour voltages are written by
:meth:`powerzoo.tasks.feeder.FeederTask.write_neighbour_voltages`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.tasks.spec import PRICE_CAP, PRICE_FLOOR, VectorSpec

__all__ = [
    "TIME_PRICE_FIELDS",
    "SYSTEM_FIELDS",
    "FeederSlots",
    "neighbour_fields",
    "price_forecast_fields",
    "write_system_fields",
]

TIME_PRICE_FIELDS = (  # what every per-agent feeder observation starts with
    ("hour_sin", "-", -1.0, 1.0, -1.0, 1.0),
    ("hour_cos", "-", -1.0, 1.0, -1.0, 1.0),
    ("time_remaining", "fraction of horizon", 0.0, 1.0, 0.0, 1.0),
    # nominal 0-150 $/MWh, unclipped: high_renewable's lowest prices scale to -1.2, its scarcity
    # hours to 25 on the test split and 66 at its 5,000 $/MWh cap (docs/data.md)
    ("price_per_mwh", "$/MWh", PRICE_FLOOR, PRICE_CAP, 0.0, 150.0),
)


def price_forecast_fields(n_steps: int) -> tuple:
    """Observation rows of the price ($/MWh) of the next ``n_steps`` steps (``price_t1_per_mwh``
    ...)."""
    return tuple(
        (f"price_t{k}_per_mwh", "$/MWh", PRICE_FLOOR, PRICE_CAP, 0.0, 150.0)
        for k in range(1, n_steps + 1)
    )


def neighbour_fields(nominal_high_pu: float = 1.0) -> tuple:
    """Observation rows of a unit's neighbour voltages (p.u.): ``upstream_v_pu`` (its parent
    bus) and ``downstream_v_pu`` (the lowest of its child buses); see
    :meth:`FeederTask.write_neighbour_voltages`."""
    v = ("p.u.", 0.0, 1.2, 0.9, nominal_high_pu)
    return (("upstream_v_pu", *v), ("downstream_v_pu", *v))


SYSTEM_FIELDS = (  # the feeder as a whole (bounds for the 33-bus feeder), the same for every agent
    ("demand_pu", "p.u. of annual peak", 0.0, 2.0, 0.0, 1.0),
    ("feeder_p_mw", "MW", -10.0, 10.0, 0.0, 3.0),
    ("v_min_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
    ("v_max_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
)

_min_reduce, _max_reduce = np.minimum.reduce, np.maximum.reduce


def write_system_fields(
    obs: np.ndarray, start: int, demand: np.ndarray, feeder_p_mw: np.ndarray, vm: np.ndarray
) -> None:
    """Write :data:`SYSTEM_FIELDS` into columns ``start..start + 3`` of every agent's row of
    ``obs`` [B, n_agents, width]: ``demand`` [B] (p.u.), the head power ``feeder_p_mw`` [B] (MW)
    and the lowest and highest of the voltages ``vm`` [B, n_bus] (p.u.)."""
    obs[:, :, start] = demand[:, None]
    obs[:, :, start + 1] = feeder_p_mw[:, None]
    obs[:, :, start + 2] = _min_reduce(vm, axis=1)[:, None]
    obs[:, :, start + 3] = _max_reduce(vm, axis=1)[:, None]


@dataclasses.dataclass(frozen=True)
class FeederSlots:
    """Where the fields of one per-agent observation mode sit: the fields every feeder
    observation has (:data:`TIME_PRICE_FIELDS`) and, in a subclass, the task's own."""

    width: int
    time: slice  # hour_sin, hour_cos, time_remaining
    price: int

    @classmethod
    def of(cls, spec: VectorSpec) -> Any:
        """The slots of layout ``spec``."""
        time = spec.slot(*(field[0] for field in TIME_PRICE_FIELDS[:3]))
        price = spec.slot("price_per_mwh")
        return cls(spec.dim, time, price, **cls.task_slots(spec))  # type: ignore[arg-type]

    @staticmethod
    def task_slots(spec: VectorSpec) -> dict[str, Any]:
        """The task's own slots of ``spec`` by field name (a subclass's fields)."""
        return {}
