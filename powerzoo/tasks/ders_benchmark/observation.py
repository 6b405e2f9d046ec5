"""The observation of ``marl_ders_benchmark``: its fields in every mode and where they sit."""

from __future__ import annotations

import dataclasses
from typing import Any

from powerzoo.tasks.feeder_observation import TIME_PRICE_FIELDS, FeederSlots, neighbour_fields
from powerzoo.tasks.spec import VectorSpec

__all__ = ["AGENTS", "BATTERIES", "PVS", "LOADS", "N_PER_KIND", "Slots", "observation_modes"]

N_PER_KIND = 4  # units per kind: batteries, PV inverters, flexible loads
BATTERIES = tuple(f"battery_{i}" for i in range(N_PER_KIND))
PVS = tuple(f"pv_{i}" for i in range(N_PER_KIND))
LOADS = tuple(f"load_{i}" for i in range(N_PER_KIND))
AGENTS = BATTERIES + PVS + LOADS

_V = ("p.u.", 0.0, 1.2, 0.9, 1.05)
_TIME = TIME_PRICE_FIELDS
_KIND = tuple(
    (f"is_{k}", "one-hot", 0.0, 1.0, 0.0, 1.0) for k in ("battery", "pv", "flexible_load")
)


def _device(pv_mw: float) -> tuple:
    """The own device's block; the PV bound is the PV inverters' rating (MW)."""
    return (
        ("own_v_pu", *_V),
        ("own_soc", "fraction", 0.0, 1.0, 0.0, 1.0),
        ("own_pv_available_mw", "MW", 0.0, pv_mw, 0.0, pv_mw),
        ("own_base_load_mw", "MW", 0.0, 2.0, 0.0, 0.3),
        ("own_backlog_mwh", "MWh", 0.0, 2.0, 0.0, 0.2),
    )


_DEVICE = _device(1.0)  # its names only are read below
_PREV = (
    ("own_prev_p_mw", "MW (+ into the feeder)", -2.0, 2.0, -0.5, 0.5),
    ("own_prev_q_mvar", "Mvar (+ injection)", -2.0, 2.0, -0.5, 0.5),
    ("own_bus_load_mw", "MW", 0.0, 2.0, 0.0, 0.6),
)
_NEIGHBOURS = neighbour_fields(_V[-1])
_SYSTEM = (
    ("demand_pu", "p.u. of annual peak", 0.0, 2.0, 0.0, 1.0),
    ("pv_cf", "fraction", 0.0, 1.0, 0.0, 1.0),
    ("feeder_p_mw", "MW", -20.0, 30.0, 0.0, 12.0),
    ("p_loss_mw", "MW", 0.0, 5.0, 0.0, 0.6),
    ("v_min_pu", *_V),
    ("v_max_pu", *_V),
)
_FLEET = (
    *((f"v_{a}_pu", *_V) for a in AGENTS),
    *((f"soc_{a}", "fraction", 0.0, 1.0, 0.0, 1.0) for a in BATTERIES),
    *((f"backlog_{a}_mwh", "MWh", 0.0, 2.0, 0.0, 0.2) for a in LOADS),
)


def observation_modes(pv_mw: float) -> dict[str, tuple]:
    """Fields of each observation mode: (name, unit, low, high, nominal_low, nominal_high)."""
    device = _device(pv_mw)
    return {
        "ders_local": _TIME + _KIND + device,
        "global": _TIME + _KIND + device + _SYSTEM + _FLEET,
        "local": _TIME + device + _PREV,
        "local_plus_voltage": _TIME + device + _PREV + _NEIGHBOURS,
    }


def _names(fields: tuple) -> tuple[str, ...]:
    return tuple(f[0] for f in fields)


@dataclasses.dataclass(frozen=True)
class Slots(FeederSlots):
    """Where the blocks of one observation mode start (``None``: not in the mode); blocks are
    contiguous."""

    device: int  # own_v_pu, own_soc, own_pv_available_mw, own_base_load_mw, own_backlog_mwh
    kind: slice | None
    prev: int | None  # own_prev_p_mw, own_prev_q_mvar, own_bus_load_mw
    neighbours: int | None
    system: int | None
    fleet: int | None  # v of every DER bus, soc of every battery, backlog of every load

    @staticmethod
    def task_slots(spec: VectorSpec) -> dict[str, Any]:
        def start(fields: tuple) -> Any:
            names = _names(fields)
            if not set(names) <= set(spec.names):
                return None
            where = spec.slot(*names)
            return where.start if isinstance(where, slice) else where

        return {
            "device": start(_DEVICE),
            "kind": spec.slot(*_names(_KIND)) if start(_KIND) is not None else None,
            "prev": start(_PREV),
            "neighbours": start(_NEIGHBOURS),
            "system": start(_SYSTEM),
            "fleet": start(_FLEET),
        }
