"""Batched first-order server-zone temperature under a setpoint-tracking cooling plant.

Energy balance of the zone (one lumped heat capacity ``C``)::

    C dT/dt = P_heat + UA (T_out - T) - Q_cool

``P_heat`` is the IT power (all of it becomes heat), ``UA`` the envelope conductance and
``Q_cool`` the heat the plant removes. The plant's controller aims for the setpoint with time
constant ``tau``: over a step it asks for the heat that brings ``T`` to
``T_target = T_set + (T - T_set) exp(-dt / tau)``, limited to ``[0, q_max]`` (it cannot heat).
The update is explicit Euler over the step, exact when the plant is not at a limit; it is
stable when ``dt UA / C < 1`` (checked).

Parameters:

* ``heat_capacity_mwh_per_k = 0.05`` (180 MJ/K): air of a ~12,000 m3 data hall (~15 MJ/K) plus
  the lumped mass of servers, racks and raised floor; at the cluster's 2.6 MW peak the room
  warms by about 0.9 K/min with no cooling.
* ``ua_mw_per_k = 0.01``: envelope conductance of a large single-storey hall (10 kW/K).
* ``tau_min = 10``: closed-loop time constant of the cooling controller.
* ``temp_max_c = 27``: upper bound of the ASHRAE TC 9.9 recommended envelope for server inlet
  air (classes A1-A4, 18-27 deg C; "Thermal Guidelines for Data Processing Environments",
  5th ed., 2021); time above it is the ``overtemperature`` cost.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

__all__ = ["ZoneParams", "ZoneStepper", "zone_step", "setpoint_reaching"]


@dataclasses.dataclass(frozen=True)
class ZoneParams:
    """Thermal parameters of the server zone."""

    heat_capacity_mwh_per_k: float = 0.05
    ua_mw_per_k: float = 0.01
    tau_min: float = 10.0
    temp_max_c: float = 27.0

    def __post_init__(self) -> None:
        if self.heat_capacity_mwh_per_k <= 0.0 or self.ua_mw_per_k < 0.0 or self.tau_min <= 0.0:
            raise ValueError("heat capacity and tau must be positive, UA non-negative")

    def check_step(self, dt_h: float) -> None:
        """Raise if explicit Euler over ``dt_h`` would be unstable for these parameters.

        Args:
            dt_h: Step length, hours.
        """
        if dt_h * self.ua_mw_per_k / self.heat_capacity_mwh_per_k >= 1.0:
            raise ValueError("zone model unstable: need dt * UA / C < 1")


def zone_step(
    params: ZoneParams,
    temp_c: np.ndarray,
    temp_out_c: np.ndarray,
    setpoint_c: np.ndarray,
    heat_mw: np.ndarray,
    q_max_mw: float,
    dt_h: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Advance the zone temperature over ``dt_h``; return (new temperature deg C, heat removed
    MW).

    Args:
        params: The zone's thermal parameters.
        temp_c: Zone temperature [B], deg C.
        temp_out_c: Outdoor temperature [B], deg C.
        setpoint_c: Cooling setpoint [B], deg C.
        heat_mw: Heat released in the zone [B], MW.
        q_max_mw: Most heat the cooling can remove, MW.
        dt_h: Step length, hours.

    Returns:
        New temperature [B] (deg C) and heat removed [B] (MW).
    """
    return _stepper(params, q_max_mw, dt_h)(temp_c, temp_out_c, setpoint_c, heat_mw)


def _tracking_decay(params: ZoneParams, dt_h: float) -> float:
    """Fraction of the gap to the setpoint the controller leaves after ``dt_h`` hours."""
    return math.exp(-dt_h * 60.0 / params.tau_min)


def setpoint_reaching(
    params: ZoneParams, temp_c: np.ndarray, target_c: float, dt_h: float
) -> np.ndarray:
    """Setpoint (deg C) under which the controller takes the zone from ``temp_c`` to ``target_c`` in
    one step.

    Exact while the plant is not at a limit (see :func:`zone_step`); the result may lie outside
    any setpoint range, so callers clip it.
    """
    decay = _tracking_decay(params, dt_h)
    return (target_c - np.asarray(temp_c) * decay) / (1.0 - decay)


class ZoneStepper:
    """The zone's energy balance at a fixed step ``dt_h`` and plant capacity ``q_max_mw``: the
    one implementation behind :func:`zone_step`.

    ``float64_constants=True`` (the default) makes the parameters and step constants 0-d
    float64 arrays (numpy converts a Python float operand on every call, which dominates on
    small batches): for float64 batches. ``False`` keeps them Python floats, so numpy's
    Python-scalar rules apply and a float32 batch stays float32: what :func:`zone_step` uses.
    """

    def __init__(
        self, params: ZoneParams, q_max_mw: float, dt_h: float, *, float64_constants: bool = True
    ) -> None:
        const = (lambda x: np.array(x, np.float64)) if float64_constants else (lambda x: x)
        c = params.heat_capacity_mwh_per_k
        self.ua_mw_per_k, self.decay = (
            const(params.ua_mw_per_k),
            const(_tracking_decay(params, dt_h)),
        )
        self.c_over_dt, self.dt_over_c = const(c / dt_h), const(dt_h / c)
        self.q_max_mw, self.zero = const(q_max_mw), const(0.0)

    def __call__(
        self,
        temp_c: np.ndarray,
        temp_out_c: np.ndarray,
        setpoint_c: np.ndarray,
        heat_mw: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(new zone temperature deg C, heat removed MW), each [B], under IT heat ``heat_mw``
        [B]."""
        return self.step_parts(temp_c, temp_out_c, setpoint_c, heat_mw)[:2]

    def step_parts(
        self,
        temp_c: np.ndarray,
        temp_out_c: np.ndarray,
        setpoint_c: np.ndarray,
        heat_mw: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`__call__`'s (new temperature deg C, heat removed MW) and the two terms of the
        controller's ask, each [B] (MW): the envelope's gain ``UA (T_out - T)`` and the tracking
        heat ``(T - T_target) C / dt``. Under IT heat ``h`` the plant removes
        ``clip(h + envelope + tracking, 0, q_max)``, so a step that re-runs on less heat or a
        smaller removal (:meth:`step_removing`) reuses them."""
        envelope = self.ua_mw_per_k * (temp_out_c - temp_c)
        gains = heat_mw + envelope
        target = setpoint_c + (temp_c - setpoint_c) * self.decay  # where the controller aims
        tracking = (temp_c - target) * self.c_over_dt
        q_cool = np.minimum(np.maximum(gains + tracking, self.zero), self.q_max_mw)
        return temp_c + (gains - q_cool) * self.dt_over_c, q_cool, envelope, tracking

    def step_removing(
        self,
        temp_c: np.ndarray,
        envelope_mw: np.ndarray,
        heat_mw: np.ndarray,
        q_cool_mw: np.ndarray,
    ) -> np.ndarray:
        """Zone temperature [B] (deg C) after a step in which the plant removes ``q_cool_mw`` [B]
        (MW, e.g. less than its controller asks for when its power is short) under IT heat
        ``heat_mw`` [B] (MW); ``envelope_mw`` [B] is the envelope's gain of :meth:`step_parts`."""
        return temp_c + ((heat_mw + envelope_mw) - q_cool_mw) * self.dt_over_c


@functools.lru_cache(maxsize=16, typed=True)
def _cached_stepper(params: ZoneParams, q_max_mw: float, dt_h: float) -> ZoneStepper:
    return ZoneStepper(params, q_max_mw, dt_h, float64_constants=False)


def _stepper(params: ZoneParams, q_max_mw: float, dt_h: float) -> ZoneStepper:
    """The function's :class:`ZoneStepper` (the parameters' own values as constants)."""
    try:
        return _cached_stepper(params, q_max_mw, dt_h)
    except TypeError:  # unhashable: a capacity or step given as an array, built for this call
        return ZoneStepper(params, q_max_mw, dt_h, float64_constants=False)
