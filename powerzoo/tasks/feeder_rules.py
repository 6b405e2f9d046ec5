"""Building blocks of the feeder tasks' rule-based controllers: what a distribution operator
writes to keep a feeder in its limits from local measurements.

Every function is vectorised over the batch and reads only what a rule observes (its own bus
voltage, the feeder's highest voltage, the power it delivered last step, its state of charge,
the time of day, the system demand, the PV it has available); the thresholds are documented
where they are defined.

* :func:`absorb_charge_mw`: a battery absorbs the midday PV surplus when the voltage rises,
  an integrating volt-watt control with the IEEE 1547-2018 volt-watt droop as its floor;
* :func:`sun_steps` and :func:`solar_soak_power_mw`: "solar soak" storage: empty the battery
  before the sun, charge it from the surplus by :func:`absorb_charge_mw`, trade by the
  time-of-use schedule otherwise;
* :func:`load_relief_fraction`: flexible load relieved in proportion to the system demand above
  the level where the far end of the feeder leaves the band, at units whose own bus voltage is
  low;
* :func:`export_limit_curtailment`: PV output capped at an export limit.
"""

from __future__ import annotations

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.markets import DEFAULT_MARKET
from powerzoo.data.profiles import get_profiles
from powerzoo.devices.battery import feasible_power_mw
from powerzoo.devices.inverter_battery import InverterBatteryParams

__all__ = [
    "ABSORB_V_SET_PU",
    "ABSORB_BAND_PU",
    "VOLT_WATT_START_PU",
    "VOLT_WATT_FULL_PU",
    "CHARGE_BLOCK_PU",
    "absorb_charge_mw",
    "export_limit_curtailment",
    "load_relief_fraction",
    "solar_soak_power_mw",
    "sun_steps",
]

# Voltage-triggered charging (p.u.). The integrating control holds the feeder's highest voltage
# at ABSORB_V_SET_PU, just inside the 1.05 p.u. band (ANSI C84.1 Range A), so a battery stores
# no more of the surplus than the band needs; ABSORB_BAND_PU is the voltage error that moves
# its charging by its full rating in one step (about the deadbeat gain of three 0.5 MW
# batteries on the 33-bus feeder). Its floor is the IEEE 1547-2018 volt-watt droop, shifted
# into the band: no absorption at VOLT_WATT_START_PU, full rating at VOLT_WATT_FULL_PU (the
# standard's category B curve runs from 1.06 to 1.10 p.u.), which acts in the step the voltage
# jumps, before the integrator has caught up with a fast PV ramp.
ABSORB_V_SET_PU = 1.049
ABSORB_BAND_PU = 0.03
VOLT_WATT_START_PU = 1.03
VOLT_WATT_FULL_PU = 1.055
# above this voltage the PV surplus is on the feeder: the time-of-use schedule does not charge
# (the room is kept for the voltage-triggered charging)
CHARGE_BLOCK_PU = 1.035
# a step belongs to the sun when the average day's PV output is at least this share of its
# peak (at 30-minute steps on the base profiles: 07:30-17:00)
SUN_SHARE = 0.25
# the battery empties over this many hours before the first step of the sun
PRE_SUN_HOURS = 3.0


def absorb_charge_mw(
    v_pu: np.ndarray, prev_charge_mw: np.ndarray, power_max_mw: float
) -> np.ndarray:
    """Charging power (MW, >= 0) that absorbs a PV surplus: an integrating volt-watt control.

    ``v_pu`` is the voltage the battery acts on (p.u., last step's flow), ``prev_charge_mw`` the
    charging it delivered last step. The charge moves by ``power_max_mw x (v - 1.049) / 0.03``
    from last step's (``ABSORB_V_SET_PU``, ``ABSORB_BAND_PU``), and is at least the volt-watt
    droop ``power_max_mw x (v - 1.03) / (1.055 - 1.03)``, within [0, ``power_max_mw``].
    """
    step = prev_charge_mw + power_max_mw * (v_pu - ABSORB_V_SET_PU) / ABSORB_BAND_PU
    droop = power_max_mw * (v_pu - VOLT_WATT_START_PU) / (VOLT_WATT_FULL_PU - VOLT_WATT_START_PU)
    return np.clip(np.maximum(step, droop), 0.0, power_max_mw)


def sun_steps(
    steps_per_day: int, step_minutes: int = 30, market: str = DEFAULT_MARKET
) -> np.ndarray:
    """Mask [steps_per_day] of the steps of the sun: where the average train day's PV capacity
    factor (base profiles of ``market``) is at least ``SUN_SHARE`` (25 %) of its peak."""
    cf = get_profiles("base", step_minutes, market).series["pv_cf"][
        : calendar.N_DAYS * steps_per_day
    ]
    mean_day = cf.reshape(calendar.N_DAYS, steps_per_day)[calendar.split_day_indices("train")].mean(
        axis=0
    )
    return mean_day >= SUN_SHARE * mean_day.max()


def solar_soak_power_mw(
    battery: InverterBatteryParams,
    tou_p_mw: np.ndarray,
    soc: np.ndarray,
    v_pu: np.ndarray,
    prev_p_mw: np.ndarray,
    step_of_day: np.ndarray,
    sun: np.ndarray,
    dt_h: float,
) -> np.ndarray:
    """Battery powers [B, n] (MW, + discharge) of the "solar soak" rule.

    ``tou_p_mw`` [B, n] is the time-of-use schedule's power, ``soc`` [B, n] the state of
    charge, ``v_pu`` [B, n] the voltage each battery acts on, ``prev_p_mw`` [B, n] last step's
    power, ``step_of_day`` [B] the step of the day and ``sun`` the mask of :func:`sun_steps`.
    In the ``PRE_SUN_HOURS`` (3 h) before the sun a battery discharges at least the power that
    empties it to its SOC floor when the sun comes (room for the surplus); while the voltage is
    above ``CHARGE_BLOCK_PU`` (1.035) the schedule does not charge; and a battery charges at
    least :func:`absorb_charge_mw`. All within what the SOC allows.
    """
    p_ch_max, p_dis_max = feasible_power_mw(battery, soc, dt_h)  # type: ignore[arg-type]
    first = int(np.flatnonzero(sun)[0])
    to_sun = (first - step_of_day)[:, None]
    before = (to_sun > 0) & (to_sun <= round(PRE_SUN_HOURS / dt_h))
    usable = (soc - battery.soc_min) * battery.energy_capacity_mwh * battery.discharge_efficiency
    empty = np.clip(usable / (np.maximum(to_sun, 1) * dt_h), 0.0, p_dis_max)
    p = np.where(before, np.maximum(tou_p_mw, empty), tou_p_mw)
    p = np.where((p < 0.0) & (v_pu > CHARGE_BLOCK_PU), 0.0, p)
    absorb = absorb_charge_mw(v_pu, np.maximum(-prev_p_mw, 0.0), battery.power_max_mw)
    p = np.where(absorb > 0.0, np.minimum(p, -absorb), p)
    return np.clip(p, -p_ch_max, p_dis_max)


def load_relief_fraction(
    demand_pu: np.ndarray,
    v_pu: np.ndarray,
    demand_start: float,
    demand_full: float,
    v_gate_pu: float,
) -> np.ndarray:
    """Share [B, n] in [0, 1] of each flexible unit's demand to relieve.

    It rises linearly with the system demand ``demand_pu`` [B] from 0 at ``demand_start`` to 1
    at ``demand_full`` (a load-forecast demand-response schedule: the feeder's voltage falls in
    proportion to its load), at the units whose own bus voltage ``v_pu`` [B, n] (last step's
    flow) is below ``v_gate_pu``; the others are served.
    """
    share = np.clip((demand_pu - demand_start) / (demand_full - demand_start), 0.0, 1.0)
    return np.where(v_pu < v_gate_pu, share[:, None], 0.0)


def export_limit_curtailment(available_mw: np.ndarray, limit_mw: float) -> np.ndarray:
    """Curtailed fraction [same shape] that caps PV output ``available_mw`` at ``limit_mw``: 0
    below the limit, ``1 - limit / available`` above it."""
    over = available_mw > limit_mw
    return np.where(over, 1.0 - limit_mw / np.where(over, available_mw, 1.0), 0.0)
