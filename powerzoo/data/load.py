"""System load model: a base shape by hour and day type times a temperature response.

``demand = shape(hour, day type) * (1 + cooling(T_lag) + heating(T_lag)) * (1 + noise)``, with
``T_lag`` the outdoor temperature smoothed with a 3 h time constant (building thermal lag).
:mod:`powerzoo.data.profiles` scales it to the base scenario's annual peak and documents the
figures it gives.

* Cooling: +3.0 % of base load per K above 18 deg C.
* Heating (:func:`heating_response`): +1.2 %/K below 11 deg C (space heating, mostly heat
  pumps in their efficient range), plus a further :data:`BACKUP_PER_K` (2.0 %/K) below
  :data:`BACKUP_BASE_C` (0 deg C). The second term is the heat pumps' resistance backup: a heat
  pump's output falls with the outdoor temperature while the house's heat loss rises, and below
  their balance point (typically near freezing) electric strips make up the shortfall at a
  coefficient of performance of 1 against the compressor's 2-3, so each further kelvin costs
  far more electricity than one above it (the slope below 0 deg C, 3.2 %/K, exceeds the cooling
  slope). Most North Carolina homes heat with electricity, many with heat pumps, which is why
  Southeast systems peak in winter as often as in summer: of 22 Southeast utility systems,
  8 were winter-peaking, 6 dual-peaking and 8 summer-peaking over 1998-2018 (Southern Alliance
  for Clean Energy, "Seasonal Electric Demand in the Southeastern United States", 2020), and
  Duke Energy resorted to rotating outages in the Carolinas on the morning of 24 December 2022
  (Winter Storm Elliott). The 2.0 %/K is calibrated, not measured: it is the slope that brings
  the typical year's winter peak within 10 % of its summer peak (0.93), a dual-peaking system;
  the heating term alone left the winter peak at 0.83 of the summer one. The ``cold_snap``
  scenario adds cold outbreaks on the winter test days (:mod:`powerzoo.data.weather`).
"""

from __future__ import annotations

import math

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.weather import STEPS_PER_DAY, STEPS_PER_HOUR, interp_hourly

__all__ = [
    "LOAD_SHAPE",
    "load_shape",
    "lagged",
    "cooling_response",
    "heating_response",
    "demand",
]

# Base shape by hour of day (value at the hour's centre, hour-beginning local standard time) and
# day type, before the temperature response: a night trough near 04:00, a morning ramp to a
# 08:00 shoulder, a flat working day and an evening peak at 18:00-20:00.
LOAD_SHAPE = np.array(
    [
        # weekday
        [0.66, 0.63, 0.61, 0.61, 0.63, 0.68, 0.77, 0.85, 0.87, 0.86, 0.86, 0.86]
        + [0.86, 0.86, 0.86, 0.87, 0.89, 0.92, 0.95, 0.95, 0.92, 0.86, 0.78, 0.71],
        # Saturday
        [0.68, 0.65, 0.63, 0.62, 0.62, 0.64, 0.68, 0.73, 0.78, 0.81, 0.83, 0.84]
        + [0.84, 0.83, 0.83, 0.83, 0.85, 0.88, 0.91, 0.91, 0.89, 0.84, 0.77, 0.71],
        # Sunday or holiday
        [0.67, 0.64, 0.62, 0.61, 0.61, 0.62, 0.65, 0.69, 0.74, 0.78, 0.80, 0.81]
        + [0.81, 0.81, 0.81, 0.81, 0.83, 0.87, 0.90, 0.91, 0.89, 0.83, 0.76, 0.70],
    ]
)
COOLING_PER_K, COOLING_BASE_C = 0.030, 18.0  # fraction of base load per K above
HEATING_PER_K, HEATING_BASE_C = 0.012, 11.0  # fraction of base load per K below
BACKUP_PER_K, BACKUP_BASE_C = 0.020, 0.0  # resistance backup: extra fraction per K below
LOAD_TEMP_LAG_H = 3.0  # time constant of the building thermal lag, hours


def load_shape() -> np.ndarray:
    """Base load shape at 5-minute resolution for every day of the year [N_DAYS * 288]."""
    hourly = LOAD_SHAPE[calendar.day_types()].reshape(-1)
    return interp_hourly(hourly)


def lagged(temp_c: np.ndarray) -> np.ndarray:
    """Exponentially smoothed 5-minute temperature (time constant ``LOAD_TEMP_LAG_H``), periodic
    over the year (the filter is warmed up on the year's last two days)."""
    alpha = 1.0 - math.exp(-1.0 / (STEPS_PER_HOUR * LOAD_TEMP_LAG_H))
    state = float(temp_c[-1])
    for value in temp_c[-2 * STEPS_PER_DAY :].tolist():
        state += alpha * (value - state)
    out = [0.0] * temp_c.size
    for i, value in enumerate(temp_c.tolist()):
        state += alpha * (value - state)
        out[i] = state
    return np.asarray(out)


def cooling_response(lagged_c: np.ndarray) -> np.ndarray:
    """Cooling load as a fraction of base load at lagged temperature ``lagged_c`` [deg C]."""
    return COOLING_PER_K * np.maximum(lagged_c - COOLING_BASE_C, 0.0)


def heating_response(lagged_c: np.ndarray) -> np.ndarray:
    """Electric heating load as a fraction of base load at lagged temperature ``lagged_c``."""
    return HEATING_PER_K * np.maximum(HEATING_BASE_C - lagged_c, 0.0) + BACKUP_PER_K * np.maximum(
        BACKUP_BASE_C - lagged_c, 0.0
    )


def demand(
    shape: np.ndarray, noise: np.ndarray, cooling_c: np.ndarray, heating_c: np.ndarray
) -> np.ndarray:
    """Unscaled demand: ``shape * (1 + cooling(cooling_c) + heating(heating_c)) * (1 + noise)``.

    Args:
        shape: Base load shape [n].
        noise: Multiplicative AR(1) noise [n].
        cooling_c: Lagged temperature the cooling term reads [n], deg C.
        heating_c: Lagged temperature the heating term reads [n], deg C (a stress event moves
            only the term it drives, so an event never lowers demand).

    Returns:
        Demand [n], in units of the base shape.
    """
    response = 1.0 + cooling_response(cooling_c) + heating_response(heating_c)
    return shape * response * (1.0 + noise)
