"""Time-of-use battery schedules read from the price data, shared by the feeder tasks' rules.

The rule-based controllers of ``marl_der_arbitrage`` and ``marl_ders_benchmark`` charge their
batteries in the cheapest steps of the average day and discharge them in the dearest ones. The
plan is read from the base price profile's train days (the same plan in every split, so a rule
never sees the data of the split it is scored on).
"""

from __future__ import annotations

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.profiles import get_profiles
from powerzoo.devices.battery import feasible_power_mw
from powerzoo.devices.inverter_battery import InverterBatteryParams

__all__ = ["TOU_STEPS", "tou_schedule", "tou_mode", "tou_battery_power_mw"]

TOU_STEPS = 8  # steps of charging and of discharging a day (8 half-hours: 4 h each way)


def tou_schedule(
    steps_per_day: int, tou_steps: int = TOU_STEPS, step_minutes: int = 30
) -> np.ndarray:
    """Time-of-use plan [steps_per_day]: -1 in the ``tou_steps`` cheapest steps of the average
    day, +1 in the dearest, else 0 (average over the train days of the base price profile)."""
    price = get_profiles("base", step_minutes).series["price_per_mwh"][
        : calendar.N_DAYS * steps_per_day
    ]
    mean_day = price.reshape(calendar.N_DAYS, steps_per_day)[
        calendar.split_day_indices("train")
    ].mean(axis=0)
    order = np.argsort(mean_day, kind="stable")
    plan = np.zeros(steps_per_day, dtype=np.int64)
    plan[order[:tou_steps]] = -1
    plan[order[-tou_steps:]] = 1
    return plan


def tou_mode(
    plan: np.ndarray, time_remaining: np.ndarray, horizon: int, steps_per_day: int
) -> np.ndarray:
    """The plan's entry [B] (-1 charge, +1 discharge, 0 idle) at the step an observation's
    ``time_remaining`` [B] (fraction of the horizon) stands for."""
    t = np.rint((1.0 - time_remaining) * horizon).astype(np.int64)
    return plan.take(np.clip(t, 0, horizon - 1) % steps_per_day)


def tou_battery_power_mw(
    battery: InverterBatteryParams,
    mode: np.ndarray,
    soc: np.ndarray,
    dt_h: float,
    tou_steps: int = TOU_STEPS,
) -> np.ndarray:
    """Battery powers [B, n] (MW, + discharge) of the time-of-use rule in ``mode`` [B].

    Each battery moves its usable energy in ``tou_steps`` steps (a quarter of it per hour with
    the defaults), within what its state of charge ``soc`` [B, n] allows over ``dt_h`` hours.
    """
    p_ch_max, p_dis_max = feasible_power_mw(battery, soc, dt_h)  # type: ignore[arg-type]
    usable = (battery.soc_max - battery.soc_min) * battery.energy_capacity_mwh
    rate = usable / (tou_steps * dt_h)  # MW that moves the usable energy in tou_steps steps
    charge = np.minimum(rate / battery.charge_efficiency, p_ch_max)
    discharge = np.minimum(rate * battery.discharge_efficiency, p_dis_max)
    return np.where(mode[:, None] < 0, -charge, np.where(mode[:, None] > 0, discharge, 0.0))
