"""The observation of ``marl_ev_v2g``: its fields in every mode and where they sit."""

from __future__ import annotations

import dataclasses
from typing import Any

from powerzoo.devices.ev_fleet import EVFleetParams
from powerzoo.tasks.feeder_observation import (
    SYSTEM_FIELDS,
    TIME_PRICE_FIELDS,
    FeederSlots,
    neighbour_fields,
    price_forecast_fields,
)
from powerzoo.tasks.spec import VectorSpec

__all__ = ["FORECAST_STEPS", "Slots", "observation_modes"]

FORECAST_STEPS = 6  # price look-ahead of the local_plus_forecast observation


def observation_modes(n: int, v: int, fleet: EVFleetParams, horizon: int) -> dict[str, tuple]:
    """Observation fields of each mode: (name, unit, low, high, nominal_low, nominal_high)."""
    cap, hours = fleet.battery_kwh, float(horizon)
    time = TIME_PRICE_FIELDS
    site_mw = v * fleet.charge_max_kw / 1000.0
    own = (
        ("own_v_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
        ("own_prev_p_mw", "MW (+ into the feeder)", -site_mw, site_mw, -site_mw, site_mw),
        ("own_bus_load_mw", "MW", 0.0, 2.0, 0.0, 0.3),
        ("own_plugged_share", "fraction", 0.0, 1.0, 0.0, 1.0),
    )
    cars = (
        *((f"plugged_{j}", "0/1", 0.0, 1.0, 0.0, 1.0) for j in range(v)),
        *((f"soc_{j}", "fraction", 0.0, 1.0, 0.0, 1.0) for j in range(v)),
        *((f"hours_to_departure_{j}", "h", 0.0, hours, 0.0, 24.0) for j in range(v)),
        *(
            (f"energy_needed_kwh_{j}", "kWh (goal - energy)", -cap, cap, -20.0, 20.0)
            for j in range(v)
        ),
    )
    system = (
        *SYSTEM_FIELDS,
        *((f"plugged_share_site_{i}", "fraction", 0.0, 1.0, 0.0, 1.0) for i in range(n)),
        *(
            (
                f"energy_needed_site_{i}_mwh",
                "MWh",
                -v * cap / 1e3,
                v * cap / 1e3,
                -0.2 * v / 20,
                0.2 * v / 20,
            )
            for i in range(n)
        ),
    )
    forecast = price_forecast_fields(FORECAST_STEPS)
    neighbours = neighbour_fields()
    return {
        "global": time + system + own + cars,
        "local": time + own + cars,
        "local_plus_forecast": time + own + cars + forecast,
        "local_plus_voltage": time + own + cars + neighbours,
    }


@dataclasses.dataclass(frozen=True)
class Slots(FeederSlots):
    """Where the blocks of one observation mode start (``None``: not in the mode); blocks are
    contiguous."""

    own: int  # own_v_pu, own_prev_p_mw, own_bus_load_mw, own_plugged_share
    cars: int  # plugged, soc, hours_to_departure, energy_needed: V entries each
    system: (
        int | None
    )  # demand_pu, feeder_p_mw, v_min_pu, v_max_pu, plugged shares, energy needed per site
    forecast: int | None
    neighbours: int | None

    @staticmethod
    def task_slots(spec: VectorSpec) -> dict[str, Any]:
        def start(name: str) -> Any:
            return spec.names.index(name) if name in spec.names else None

        blocks = ("own_v_pu", "plugged_0", "demand_pu", "price_t1_per_mwh", "upstream_v_pu")
        fields = ("own", "cars", "system", "forecast", "neighbours")
        return {field: start(name) for field, name in zip(fields, blocks, strict=True)}
