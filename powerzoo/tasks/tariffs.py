"""Time-of-use battery schedules read from the price data, shared by the feeder tasks' rules.

The rule-based controllers of ``marl_der_arbitrage`` and ``marl_ders_benchmark`` act in the
cheapest steps of the average day (charge) and in the dearest ones (discharge), when the trade
pays after the batteries' wear and losses, and bring every battery back to its start SOC by the
end of the day, where the tasks settle the stored energy. The plan and the reference price are
read from the base price profile's train days (the same in every split, so a rule never sees
the data of the split it is scored on), of the task's market (:mod:`powerzoo.data.markets`).
"""

from __future__ import annotations

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.markets import DEFAULT_MARKET
from powerzoo.data.profiles import get_profiles
from powerzoo.devices.battery import feasible_power_mw, reach_start_soc_mw
from powerzoo.devices.inverter_battery import InverterBatteryParams

__all__ = [
    "TOU_STEPS",
    "reference_price_per_mwh",
    "tou_schedule",
    "tou_mode",
    "tou_battery_power_mw",
]

TOU_STEPS = 8  # steps of charging and of discharging a day (8 half-hours: 4 h each way)


def _mean_train_day(steps_per_day: int, step_minutes: int, market: str) -> np.ndarray:
    """Price of the average day [steps_per_day] ($/MWh) over the train days of the base
    profile of ``market``."""
    price = get_profiles("base", step_minutes, market).series["price_per_mwh"][
        : calendar.N_DAYS * steps_per_day
    ]
    return price.reshape(calendar.N_DAYS, steps_per_day)[calendar.split_day_indices("train")].mean(
        axis=0
    )


def reference_price_per_mwh(
    steps_per_day: int, step_minutes: int = 30, market: str = DEFAULT_MARKET
) -> float:
    """The rules' value of a stored MWh ($/MWh): the mean price of the train days of the base
    profile of ``market``."""
    return float(_mean_train_day(steps_per_day, step_minutes, market).mean())


def tou_schedule(
    steps_per_day: int,
    tou_steps: int = TOU_STEPS,
    step_minutes: int = 30,
    market: str = DEFAULT_MARKET,
) -> np.ndarray:
    """Time-of-use plan [steps_per_day]: -1 in the ``tou_steps`` cheapest steps of the average
    day, +1 in the dearest, else 0 (average over the train days of the base price profile of
    ``market``)."""
    mean_day = _mean_train_day(steps_per_day, step_minutes, market)
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
    tou_steps: int,
    price_per_mwh: np.ndarray,
    reference_price: float,
    steps_left: np.ndarray,
) -> np.ndarray:
    """Battery powers [B, n] (MW, + discharge) of the time-of-use rule in ``mode`` [B].

    A battery moves at most its usable energy in ``tou_steps`` steps (a quarter of it per hour
    with the defaults), within what its state of charge ``soc`` [B, n] allows over ``dt_h``
    hours. A stored MWh is valued at ``reference_price`` ``v``, and the wear ``w`` and the
    efficiencies are priced in: in a discharge step a battery sells when ``(price - w) eta_d >
    (v + w) / eta_c`` (a sale beats buying the energy back at ``v``), else it gives back only a
    surplus over its start SOC; in a charge step it buys when ``(price + w) / eta_c < (v - w)
    eta_d``, else it refills only a deficit. When full power over the ``steps_left`` [B] steps
    (this one included) could no longer close the gap to the start SOC, it moves at least the
    power that closes it now, so it ends the episode at its start SOC when the rating allows.
    """
    p_ch_max, p_dis_max = feasible_power_mw(battery, soc, dt_h)  # type: ignore[arg-type]
    usable = (battery.soc_max - battery.soc_min) * battery.energy_capacity_mwh
    rate = usable / (tou_steps * dt_h)  # MW that moves the usable energy in tou_steps steps
    charge = np.minimum(rate / battery.charge_efficiency, p_ch_max)
    discharge = np.minimum(rate * battery.discharge_efficiency, p_dis_max)
    wear = battery.degradation_cost_per_mwh
    eta_c, eta_d = battery.charge_efficiency, battery.discharge_efficiency
    price = np.asarray(price_per_mwh, dtype=np.float64)[:, None]
    sell = (price - wear) * eta_d > (reference_price + wear) / eta_c
    buy = (price + wear) / eta_c < (reference_price - wear) * eta_d
    gap = (soc - battery.soc_init) * battery.energy_capacity_mwh  # storage side, + above start
    give_back = np.minimum(discharge, np.maximum(gap, 0.0) * eta_d / dt_h)
    refill = np.minimum(charge, np.maximum(-gap, 0.0) / (eta_c * dt_h))
    m = mode[:, None]
    p = np.where(
        m > 0,
        np.where(sell, discharge, give_back),
        np.where(m < 0, -np.where(buy, charge, refill), 0.0),
    )
    later = np.maximum(steps_left[:, None] - 1.0, 0.0) * battery.power_max_mw * dt_h
    return reach_start_soc_mw(p, gap, later, eta_c, eta_d, dt_h, p_ch_max, p_dis_max)
