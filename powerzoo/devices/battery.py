"""Batched battery energy storage model.

Sign convention: power ``p_mw > 0`` discharges (energy delivered to the grid), ``p_mw < 0``
charges. Efficiencies act on the storage side: charging ``|p| dt`` MWh from the grid stores
``eta_c |p| dt``; delivering ``p dt`` MWh to the grid takes ``p dt / eta_d`` from storage.
A request that would push the state of charge (SOC) past its bounds is cut to the feasible
power, and the storage-side energy that was asked beyond the bound is reported so a task can
charge it as a constraint cost.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["BatteryDispatch", "BatteryParams", "BatteryStep", "battery_step", "feasible_power_mw"]

_TOLERANCE_MW = 1e-5  # requests within 10 W of a limit count as feasible (float32 actions, LP round-off)


@dataclasses.dataclass(frozen=True)
class BatteryParams:
    """Ratings of one battery (scalars, or arrays broadcastable against the batch)."""

    energy_capacity_mwh: float = 100.0
    power_max_mw: float = 25.0
    charge_efficiency: float = 0.95
    discharge_efficiency: float = 0.95
    soc_min: float = 0.1
    soc_max: float = 0.9
    degradation_cost_per_mwh: float = 2.0  # $ per MWh of grid-side throughput

    def __post_init__(self) -> None:
        if not 0.0 <= self.soc_min < self.soc_max <= 1.0:
            raise ValueError(f"need 0 <= soc_min < soc_max <= 1, got {self.soc_min}, {self.soc_max}")
        for name in ("charge_efficiency", "discharge_efficiency"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        for name in ("energy_capacity_mwh", "power_max_mw"):
            if getattr(self, name) <= 0.0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.degradation_cost_per_mwh < 0.0:
            raise ValueError("degradation_cost_per_mwh must be non-negative")


@dataclasses.dataclass(frozen=True)
class BatteryStep:
    """Result of one battery step; every field is an array [B]."""

    soc: np.ndarray  # SOC after the step (fraction of capacity)
    p_mw: np.ndarray  # power actually exchanged with the grid (+ discharge)
    charge_mwh: np.ndarray  # grid-side energy charged this step (>= 0)
    discharge_mwh: np.ndarray  # grid-side energy discharged this step (>= 0)
    soc_violation_mwh: np.ndarray  # storage-side energy requested beyond the SOC bounds (>= 0)


def feasible_power_mw(params: BatteryParams, soc: np.ndarray, dt_h: float) -> tuple[np.ndarray, np.ndarray]:
    """Largest charge and discharge power (MW, both >= 0) the SOC bounds allow over ``dt_h``."""
    cap = params.energy_capacity_mwh
    stored_above_min = np.maximum(soc - params.soc_min, 0.0) * cap
    room_below_max = np.maximum(params.soc_max - soc, 0.0) * cap
    p_ch_max = np.minimum(room_below_max / (params.charge_efficiency * dt_h), params.power_max_mw)
    p_dis_max = np.minimum(stored_above_min * params.discharge_efficiency / dt_h, params.power_max_mw)
    return p_ch_max, p_dis_max


def battery_step(
    params: BatteryParams, soc: np.ndarray, p_request_mw: np.ndarray, dt_h: float
) -> BatteryStep:
    """Advance SOC by one step of ``dt_h`` hours under requested power ``p_request_mw`` [B].

    The request is first limited to ``[-power_max_mw, power_max_mw]`` by the caller's action
    space; here it is cut to what the SOC bounds allow.
    """
    cap = params.energy_capacity_mwh
    eta_c, eta_d = params.charge_efficiency, params.discharge_efficiency
    p_ch_max, p_dis_max = feasible_power_mw(params, soc, dt_h)
    p_request_mw = np.asarray(p_request_mw)
    # ndarray.clip is np.clip without its Python-level dispatch (the same ufunc, the same values)
    p_mw = p_request_mw.clip(-p_ch_max, p_dis_max)

    discharge_mwh = np.maximum(p_mw, 0.0) * dt_h
    charge_mwh = np.maximum(-p_mw, 0.0) * dt_h
    excess_mw = p_request_mw - p_mw  # > 0: asked too much discharge, < 0: too much charge
    # storage-side energy asked beyond the bounds; an excess within the tolerance counts as none
    excess_abs = np.abs(excess_mw)
    storage_mwh_per_mw = np.where(excess_mw > 0.0, dt_h / eta_d, dt_h * eta_c)
    soc_violation_mwh = np.where(excess_abs < _TOLERANCE_MW, 0.0, excess_abs * storage_mwh_per_mw)

    new_soc = soc + (eta_c * charge_mwh - discharge_mwh / eta_d) / cap
    new_soc = new_soc.clip(params.soc_min, params.soc_max)  # round-off only
    return BatteryStep(new_soc, p_mw, charge_mwh, discharge_mwh, soc_violation_mwh)


class BatteryDispatch:
    """:func:`battery_step` at a fixed ``dt_h`` for float64 batches, without the SOC-violation term.

    For a task that steps the battery every step and does not charge requests beyond the SOC
    bounds. The parameters become 0-d arrays once (numpy converts a Python float operand on
    every call, which dominates on small batches) and a few operations are folded exactly:

    * requests are within ``[-power_max_mw, power_max_mw]`` (the caller's action space, as
      for :func:`battery_step`), so cutting them to the SOC-feasible power needs no ``min``
      with the rating;
    * ``-(x / y) == x / (-y)`` and ``max(-p, 0) * dt == max(p * (-dt), 0)`` in IEEE arithmetic
      (signed zeros included), so the negations fold into constants.

    Every returned value equals :func:`battery_step`'s bit for bit (float64 inputs; tested).
    """

    def __init__(self, params: BatteryParams, dt_h: float) -> None:
        def f64(x: float) -> np.ndarray:
            return np.array(x, np.float64)

        self.soc_min, self.soc_max, self.capacity_mwh = f64(params.soc_min), f64(params.soc_max), f64(params.energy_capacity_mwh)
        self.charge_efficiency, self.discharge_efficiency = f64(params.charge_efficiency), f64(params.discharge_efficiency)
        self.neg_charge_divisor = f64(-(params.charge_efficiency * dt_h))  # the product battery_step divides by
        self.dt_h, self.neg_dt_h, self.zero = f64(dt_h), f64(-dt_h), f64(0.0)

    def __call__(self, soc: np.ndarray, p_request_mw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(SOC after the step, grid-side power MW, charged MWh, discharged MWh), each [B]."""
        maximum, zero, cap = np.maximum, self.zero, self.capacity_mwh
        stored_above_min = maximum(soc - self.soc_min, zero) * cap
        room_below_max = maximum(self.soc_max - soc, zero) * cap
        p_mw = p_request_mw.clip(room_below_max / self.neg_charge_divisor, stored_above_min * self.discharge_efficiency / self.dt_h)
        discharge_mwh = maximum(p_mw, zero) * self.dt_h
        charge_mwh = maximum(p_mw * self.neg_dt_h, zero)
        new_soc = soc + (self.charge_efficiency * charge_mwh - discharge_mwh / self.discharge_efficiency) / cap
        return new_soc.clip(self.soc_min, self.soc_max), p_mw, charge_mwh, discharge_mwh
