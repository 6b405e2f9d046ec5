"""The observation of ``marl_ev_v2g``: its fields in every mode and where they sit."""

from __future__ import annotations

import dataclasses
from typing import Any

from powerzoo.devices.ev_fleet import EVFleetParams
from powerzoo.tasks.spec import VectorSpec

__all__ = ["FORECAST_STEPS", "Slots", "observation_modes"]

FORECAST_STEPS = 6  # price look-ahead of the local_plus_forecast observation
PRICE_FLOOR, PRICE_CAP = -1000.0, 10000.0  # $/MWh: space bounds, a wholesale floor and cap


def observation_modes(n: int, v: int, fleet: EVFleetParams, horizon: int) -> dict[str, tuple]:
    """Observation fields of each mode: (name, unit, low, high, nominal_low, nominal_high)."""
    cap, hours = fleet.battery_kwh, float(horizon)
    time = (
        ("hour_sin", "-", -1.0, 1.0, -1.0, 1.0),
        ("hour_cos", "-", -1.0, 1.0, -1.0, 1.0),
        ("time_remaining", "fraction of horizon", 0.0, 1.0, 0.0, 1.0),
        ("price_per_mwh", "$/MWh", PRICE_FLOOR, PRICE_CAP, 0.0, 150.0),
    )
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
        ("demand_pu", "p.u. of annual peak", 0.0, 2.0, 0.0, 1.0),
        ("feeder_p_mw", "MW", -10.0, 10.0, 0.0, 3.0),
        ("v_min_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
        ("v_max_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
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
    forecast = tuple(
        (f"price_t{k}_per_mwh", "$/MWh", PRICE_FLOOR, PRICE_CAP, 0.0, 150.0)
        for k in range(1, FORECAST_STEPS + 1)
    )
    neighbours = (
        ("upstream_v_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
        ("downstream_v_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
    )
    return {
        "global": time + system + own + cars,
        "local": time + own + cars,
        "local_plus_forecast": time + own + cars + forecast,
        "local_plus_voltage": time + own + cars + neighbours,
    }


@dataclasses.dataclass(frozen=True)
class Slots:
    """Where the blocks of one observation mode start (``None``: not in the mode); blocks are
    contiguous."""

    width: int
    time: slice
    price: int
    own: int  # own_v_pu, own_prev_p_mw, own_bus_load_mw, own_plugged_share
    cars: int  # plugged, soc, hours_to_departure, energy_needed: V entries each
    system: (
        int | None
    )  # demand_pu, feeder_p_mw, v_min_pu, v_max_pu, plugged shares, energy needed per site
    forecast: int | None
    neighbours: int | None

    @classmethod
    def of(cls, spec: VectorSpec) -> Slots:
        def start(name: str) -> Any:
            return spec.names.index(name) if name in spec.names else None

        return cls(
            spec.dim,
            spec.slot("hour_sin", "hour_cos", "time_remaining"),
            spec.slot("price_per_mwh"),  # type: ignore[arg-type]
            start("own_v_pu"),
            start("plugged_0"),
            start("demand_pu"),
            start("price_t1_per_mwh"),
            start("upstream_v_pu"),
        )
