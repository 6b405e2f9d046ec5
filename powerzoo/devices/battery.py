"""Batched battery energy storage model.

Sign convention: power ``p_mw > 0`` discharges (energy delivered to the grid), ``p_mw < 0``
charges. Efficiencies act on the storage side: charging ``|p| dt`` MWh from the grid stores
``eta_c |p| dt``; delivering ``p dt`` MWh to the grid takes ``p dt / eta_d`` from storage.
A request that would push the state of charge (SOC) past its bounds is cut to the feasible
power, and the storage-side energy that was asked beyond the bound is reported so a task can
charge it as a constraint cost.

Wear: every battery of PowerZoo pays ``degradation_cost_per_mwh`` = 7.5 $ per MWh of grid-side
throughput on each leg (every MWh charged and every MWh discharged), a knob on every battery
(:class:`BatteryParams`, :class:`~powerzoo.devices.inverter_battery.InverterBatteryParams`,
:class:`~powerzoo.devices.ev_fleet.EVFleetParams`) and a task keyword of every task with storage.
Derivation, for a 2024 lithium-iron-phosphate (LFP) grid pack: replacement at 100-115 $/kWh over
6,000-10,000 full cycles at 80 % depth of discharge, where one cycle moves 2 x 0.8 = 1.6 kWh of
throughput per kWh of capacity, so a pack's life is 9,600-16,000 kWh of throughput per kWh and
each MWh of throughput uses 100/16 to 115/9.6, i.e. 6.3-12 $, of it. In grid use calendar
ageing (time at state of charge and temperature) takes a large share of the pack's life whatever
the cycling, so the marginal cost of cycling sits in the lower part of that range: 7.5 $/MWh per
leg (15 $ per MWh moved through a round trip).

End-of-episode settlement: a task whose episode ends with more or less energy stored than it
started with settles the difference (:func:`settlement_value`), so selling the energy the
battery was given at reset is not counted as profit.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

__all__ = [
    "BatteryDispatch",
    "BatteryParams",
    "BatteryStep",
    "WEAR_COST_PER_MWH",
    "battery_step",
    "feasible_power_mw",
    "reach_start_soc_mw",
    "settlement_value",
]

WEAR_COST_PER_MWH = 7.5  # $ per MWh of grid-side throughput, each leg (module docstring)

_TOLERANCE_MW = (
    1e-5  # requests within 10 W of a limit count as feasible (float32 actions, LP round-off)
)


@dataclasses.dataclass(frozen=True)
class BatteryParams:
    """Ratings of one battery (scalars, or arrays broadcastable against the batch).

    ``degradation_cost_per_mwh`` is the wear cost in $ per MWh of grid-side throughput (charged
    + discharged), :data:`WEAR_COST_PER_MWH` = 7.5 $/MWh per leg by default: 2024 LFP packs at
    100-115 $/kWh over 6,000-10,000 cycles at 80 % depth of discharge give 6.3-12 $/MWh, and
    calendar ageing puts the marginal cost of cycling in the lower part (module docstring).
    """

    energy_capacity_mwh: float = 100.0
    power_max_mw: float = 25.0
    charge_efficiency: float = 0.95
    discharge_efficiency: float = 0.95
    soc_min: float = 0.1
    soc_max: float = 0.9
    degradation_cost_per_mwh: float = WEAR_COST_PER_MWH  # $ per MWh of grid-side throughput

    def __post_init__(self) -> None:
        if not 0.0 <= self.soc_min < self.soc_max <= 1.0:
            raise ValueError(
                f"need 0 <= soc_min < soc_max <= 1, got {self.soc_min}, {self.soc_max}"
            )
        for name in ("charge_efficiency", "discharge_efficiency"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        for name in ("energy_capacity_mwh", "power_max_mw"):
            if getattr(self, name) <= 0.0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.degradation_cost_per_mwh < 0.0:
            raise ValueError("degradation_cost_per_mwh must be non-negative")


@dataclasses.dataclass(slots=True)
class BatteryStep:
    """Result of one battery step; every field is an array [B] (a slotted record: built every
    step, and a frozen dataclass's ``__init__`` costs several times as much on small batches)."""

    soc: np.ndarray  # SOC after the step (fraction of capacity)
    p_mw: np.ndarray  # power actually exchanged with the grid (+ discharge)
    charge_mwh: np.ndarray  # grid-side energy charged this step (>= 0)
    discharge_mwh: np.ndarray  # grid-side energy discharged this step (>= 0)
    soc_violation_mwh: np.ndarray  # storage-side energy requested beyond the SOC bounds (>= 0)


class BatteryDispatch:
    """The battery's SOC model at a fixed step ``dt_h``: the one implementation behind
    :func:`battery_step` and :func:`feasible_power_mw`.

    Calling an instance steps a batch whose requests are within ``[-power_max_mw,
    power_max_mw]`` (a task's action space) without the SOC-violation term, for a task that
    steps the battery every step and does not charge requests beyond the SOC bounds;
    :meth:`step` is the full step with that term (what :func:`battery_step` runs). Its
    constants are folded once and exactly:

    * requests are within the rating, so cutting them to the SOC-feasible power needs no
      ``min`` with the rating (:func:`battery_step` cuts to the rating as well);
    * ``-(x / y) == x / (-y)`` and ``max(-p, 0) * dt == max(p * (-dt), 0)`` in IEEE arithmetic
      (signed zeros included; only a NaN's sign bit can differ), so the negations fold into
      constants.

    ``float64_constants=True`` (the default) makes the parameters 0-d float64 arrays (numpy
    converts a Python float operand on every call, which dominates on small batches): for
    float64 batches. ``False`` keeps the parameters' own values (Python floats, or arrays for a
    fleet), so numpy's Python-scalar rules apply and a float32 batch stays float32: what the
    module functions use. Either way the values equal the plain formulas' bit for bit (tested).
    """

    def __init__(
        self, params: BatteryParams, dt_h: float, *, float64_constants: bool = True
    ) -> None:
        const = (lambda x: np.array(x, np.float64)) if float64_constants else (lambda x: x)
        self.soc_min, self.soc_max, self.capacity_mwh = (
            const(params.soc_min),
            const(params.soc_max),
            const(params.energy_capacity_mwh),
        )
        self.power_max_mw = const(params.power_max_mw)
        self.charge_efficiency, self.discharge_efficiency = (
            const(params.charge_efficiency),
            const(params.discharge_efficiency),
        )
        self.charge_divisor = const(
            params.charge_efficiency * dt_h
        )  # MWh stored per MW charged over the step
        self.neg_charge_divisor = const(-(params.charge_efficiency * dt_h))
        self.dt_h, self.neg_dt_h, self.zero = const(dt_h), const(-dt_h), const(0.0)
        # storage-side MWh per MW asked beyond a bound over the step: discharging, charging
        self.discharge_mwh_per_mw = const(dt_h / params.discharge_efficiency)
        self.charge_mwh_per_mw = const(dt_h * params.charge_efficiency)
        self.tolerance_mw = const(_TOLERANCE_MW)

    def _soc_limits(self, soc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(storage room below ``soc_max`` in MWh, discharge power in MW the energy above
        ``soc_min`` allows over the step), before the power rating."""
        maximum, zero, cap = np.maximum, self.zero, self.capacity_mwh
        stored_above_min = maximum(soc - self.soc_min, zero) * cap
        room_below_max = maximum(self.soc_max - soc, zero) * cap
        return room_below_max, stored_above_min * self.discharge_efficiency / self.dt_h

    def feasible_power_mw(self, soc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Largest charge and discharge power (MW, both >= 0) the SOC bounds and the rating
        allow."""
        room_below_max, p_dis_mw = self._soc_limits(soc)
        return np.minimum(room_below_max / self.charge_divisor, self.power_max_mw), np.minimum(
            p_dis_mw, self.power_max_mw
        )

    def apply_power(
        self, soc: np.ndarray, p_mw: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(SOC after the step, ``p_mw``, charged MWh, discharged MWh) for a feasible grid-side
        power ``p_mw``."""
        maximum, zero = np.maximum, self.zero
        discharge_mwh = maximum(p_mw, zero) * self.dt_h
        charge_mwh = maximum(p_mw * self.neg_dt_h, zero)
        new_soc = (
            soc
            + (self.charge_efficiency * charge_mwh - discharge_mwh / self.discharge_efficiency)
            / self.capacity_mwh
        )
        return (
            new_soc.clip(self.soc_min, self.soc_max),
            p_mw,
            charge_mwh,
            discharge_mwh,
        )  # the clip: round-off only

    def step(self, soc: np.ndarray, p_request_mw: np.ndarray) -> BatteryStep:
        """The step of requests ``p_request_mw`` [B] (MW, + discharge) from SOC ``soc`` [B]: the
        request cut to the feasible power, and the storage-side energy (MWh) asked beyond the SOC
        bounds, none for an excess within 10 W (see :func:`battery_step`)."""
        p_ch_max, p_dis_max = self.feasible_power_mw(soc)
        p_request_mw = np.asarray(p_request_mw)
        new_soc, p_mw, charge_mwh, discharge_mwh = self.apply_power(
            soc, p_request_mw.clip(-p_ch_max, p_dis_max)
        )
        excess_mw = p_request_mw - p_mw  # > 0: asked too much discharge, < 0: too much charge
        excess_abs = np.abs(excess_mw)
        within = excess_abs < self.tolerance_mw
        if np.count_nonzero(within) == within.size:  # every request feasible (a NaN is not)
            soc_violation_mwh = np.zeros(within.shape)
        else:
            storage_mwh_per_mw = np.where(
                excess_mw > self.zero, self.discharge_mwh_per_mw, self.charge_mwh_per_mw
            )
            soc_violation_mwh = np.where(within, 0.0, excess_abs * storage_mwh_per_mw)
        return BatteryStep(new_soc, p_mw, charge_mwh, discharge_mwh, soc_violation_mwh)

    def __call__(
        self, soc: np.ndarray, p_request_mw: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(SOC after the step, grid-side power MW, charged MWh, discharged MWh), each [B], for
        requests [B] within the rating."""
        room_below_max, p_dis_mw = self._soc_limits(soc)
        # ndarray.clip is np.clip without its Python-level dispatch (the same ufunc, the same
        # values)
        return self.apply_power(
            soc, p_request_mw.clip(room_below_max / self.neg_charge_divisor, p_dis_mw)
        )


@functools.lru_cache(maxsize=32, typed=True)
def _cached_dispatch(params: BatteryParams, dt_h: float) -> BatteryDispatch:
    return BatteryDispatch(params, dt_h, float64_constants=False)


def _dispatch(params: BatteryParams, dt_h: float) -> BatteryDispatch:
    """The functions' :class:`BatteryDispatch` (the parameters' own values as constants)."""
    try:
        return _cached_dispatch(params, dt_h)
    except TypeError:  # unhashable: ratings given as arrays (a fleet), built for this call
        return BatteryDispatch(params, dt_h, float64_constants=False)


def reach_start_soc_mw(
    p_mw: np.ndarray,
    gap_mwh: np.ndarray,
    later_mwh: np.ndarray,
    eta_c: np.ndarray | float,
    eta_d: np.ndarray | float,
    dt_h: float,
    p_ch_max: np.ndarray,
    p_dis_max: np.ndarray,
) -> np.ndarray:
    """``p_mw`` (MW, + discharge) moved just enough that the start SOC stays reachable.

    ``gap_mwh`` is the stored energy above the start (storage side, + above) and ``later_mwh``
    what full power over the steps after this one moves (grid side). Where the later steps could
    no longer give back the surplus, the battery discharges at least the power that closes the
    rest now; where they could no longer refill the deficit, it charges at least that much.
    Elsewhere ``p_mw`` is returned as it is (the rules' own choice, charging included).

    Args:
        p_mw: Requested powers, MW.
        gap_mwh: Stored energy above the start SOC, MWh (storage side).
        later_mwh: Grid-side energy full power moves over the later steps, MWh.
        eta_c: Charge efficiency.
        eta_d: Discharge efficiency.
        dt_h: Step length, hours.
        p_ch_max: Largest feasible charging power, MW (>= 0).
        p_dis_max: Largest feasible discharging power, MW (>= 0).

    Returns:
        The powers, MW.
    """
    must_dis = np.clip((gap_mwh - later_mwh / eta_d) * eta_d / dt_h, 0.0, p_dis_max)
    must_ch = np.clip((-gap_mwh - later_mwh * eta_c) / (eta_c * dt_h), 0.0, p_ch_max)
    p = np.where(must_dis > 0.0, np.maximum(p_mw, must_dis), p_mw)
    return np.where(must_ch > 0.0, np.minimum(p, -must_ch), p)


def feasible_power_mw(
    params: BatteryParams, soc: np.ndarray, dt_h: float
) -> tuple[np.ndarray, np.ndarray]:
    """Largest charge and discharge power (MW, both >= 0) the SOC bounds allow over ``dt_h``."""
    return _dispatch(params, dt_h).feasible_power_mw(soc)


def battery_step(
    params: BatteryParams, soc: np.ndarray, p_request_mw: np.ndarray, dt_h: float
) -> BatteryStep:
    """Advance SOC by one step of ``dt_h`` hours under requested power ``p_request_mw`` [B].

    The request is first limited to ``[-power_max_mw, power_max_mw]`` by the caller's action
    space; here it is cut to what the SOC bounds allow (and the rating, should it exceed it).

    Args:
        params: The battery's ratings.
        soc: State of charge [B], fraction of capacity.
        p_request_mw: Requested power [B], MW (+ discharge).
        dt_h: Step length, hours.

    Returns:
        New SOC, power delivered (MW), energy charged and discharged (MWh), SOC violation (MWh).
    """
    return _dispatch(params, dt_h).step(soc, p_request_mw)


def settlement_value(
    stored_change_mwh: np.ndarray,
    price_per_mwh: np.ndarray,
    charge_efficiency: float | np.ndarray,
    discharge_efficiency: float | np.ndarray,
    wear_per_mwh: float | np.ndarray,
) -> np.ndarray:
    """Value ($) of a change of stored energy over an episode, settled at ``price_per_mwh``.

    ``stored_change_mwh`` = stored energy at the end - stored energy at the start (storage side,
    MWh). A surplus is valued as if sold through the battery: ``surplus x eta_d x (price -
    wear)``; a deficit costs what buying it back through the battery would: ``deficit / eta_c x
    (price + wear)``. Arrays broadcast together. The value is concave in the change, so an LP
    can carry it with a surplus and a deficit variable.

    Args:
        stored_change_mwh: Stored energy at the end minus at the start, MWh (storage side).
        price_per_mwh: Settlement price, $/MWh.
        charge_efficiency: Charging efficiency, fraction.
        discharge_efficiency: Discharging efficiency, fraction.
        wear_per_mwh: Wear cost, $ per MWh of grid-side throughput.

    Returns:
        The value, $ (negative for a deficit).
    """
    change = np.asarray(stored_change_mwh, dtype=np.float64)
    surplus = np.maximum(change, 0.0) * discharge_efficiency * (price_per_mwh - wear_per_mwh)
    deficit = np.maximum(-change, 0.0) / charge_efficiency * (price_per_mwh + wear_per_mwh)
    return surplus - deficit
