"""Batched thermal units for unit commitment: on/off status, minimum up/down times, ramps, costs.

Arrays lead with the batch axis ``B`` and then the unit axis ``n``; the fleet's parameters are
``[n]`` arrays. A step of length ``dt_h`` hours works in three stages:

1. :meth:`ThermalFleet.commit`: the requested on/off status is applied where the minimum up
   and down times and the shut-down ramp allow it; elsewhere the current status is kept and the
   row is reported as overridden. A unit may switch off after ``min_up_steps`` steps on, and only
   from an output at most its shut-down ramp limit ``SD_g`` (``shutdown_max_mw``, below); it may
   switch back on after ``min_down_steps`` steps off (``time_in_state`` counts the steps spent in
   the current status, the step just finished included).
2. :meth:`ThermalFleet.dispatch_range`: output bounds of the step. Off: 0. Starting: ``[Pmin,
   max(Pmin, ramp-up per step)]`` (start-up ramp). Staying on: ``[max(Pmin, p - ramp-down),
   min(Pmax, p + ramp-up)]``. Shutting down: from ``p <= SD_g`` to 0.
3. :func:`balance_dispatch` (optional): setpoints clipped into the bounds, then the remaining
   mismatch shared by the committed units in proportion to their headroom (up or down), as
   automatic generation control would; what the bounds cannot absorb is the imbalance.

Costs of a step ($): fuel ``(c2 p^2 + c1 p) dt`` from the case's cost curve, no-load cost
``no_load_cost_per_h x on x dt``, start-up and shut-down costs per switch.

Shut-down ramp. ``SD_g = min(Pmax, max(Pmin, ramp-down per step))``: the output a unit may be
desynchronised from within one step, the shut-down ramp limit of the standard MILP unit
commitment (Carrion and Arroyo, IEEE Trans. Power Systems 21(3), 2006, constraint
``p_{t-1} <= Pmax u_t + SD w_t``). Its value is a modelling choice: a unit ramps down to its
minimum stable output, or by one step's ramp, before it is taken off line, so the ramp-down limit
holds through a shut-down (with the classes below, 30-minute steps: a base unit stops from at
most 40 % of Pmax, a mid unit from 60 %, a peaking unit, which ramps its whole range in a step,
from any output). A request to stop above ``SD_g + SHUTDOWN_TOL_MW`` is refused (the unit stays
on and ramps down).

Spinning reserve (:meth:`ThermalFleet.deliverable_reserve_mw`, :func:`reserve_requirement_mw`).
The reserve of a committed unit is what it can add within 10 minutes: ``r_g = min(Pmax - p,
10 x ramp-up per minute)``; an off unit carries none. This is the 10-minute synchronized
(spinning) reserve of ISO practice (NERC BAL-002 contingency reserve must be deployed within
the 15-minute recovery period; PJM's, NYISO's and ISO-NE's synchronized reserve products are
10-minute products). Capacity that is committed but cannot be reached in 10 minutes does not
count. The requirement is ``margin x load`` on the summed reserve and, with the contingency
term, the N-1 rule: for every online unit ``k``, ``sum_{g != k} r_g >= p_k``, the spinning
reserve of the *other* online units covers the loss of unit ``k``'s output (the "most severe
single contingency" of NERC BAL-002 and the ISOs' reserve requirements; the tripped unit's own
headroom is lost with it and does not count). So :func:`reserve_requirement_mw` returns
``max(margin x load, max_k (p_k + r_k))`` for the summed reserve, and the shortfall is
``max(margin x load - sum_g r_g, max_k (p_k - sum_{g != k} r_g), 0)``.

Unit-commitment parameters (:func:`fleet_from_case`)
--------------------------------------------------
MATPOWER's case5 and case118 give Pmax and cost curves only (Pmin is 0 and there are no
minimum up/down times, ramps or start-up costs), so those are derived from each unit's size
class by the rule below (:data:`UNIT_CLASSES`); every number is a modelling choice within the
published ranges cited, not data of the case:

========  ===========  =====  ===============  =============  =====================
class     Pmax (MW)    Pmin   ramp (%Pmax/min)  min up / down  start-up ($/MW Pmax)
========  ===========  =====  ===============  =============  =====================
peaking   < 150        30 %   10               1 h / 1 h      25
mid       150 - 400    35 %   2                4 h / 4 h      50
base      >= 400       40 %   1                8 h / 8 h      70
========  ===========  =====  ===============  =============  =====================

* Pmin, ramps and minimum up/down times follow the typical values of the IEEE Reliability Test
  System 1996 unit data (Grigg et al., IEEE Trans. Power Systems 14(3), 1999): combustion
  turbines of 1 h minimum up/down time ramping several % of their rating per minute; 155 MW
  coal steam units with Pmin 35 % of Pmax, about 2 %/min ramps and 8 h minimum up/down times;
  350 MW coal units with Pmin 40 %, about 1 %/min. The mid and base minimum up/down times are
  shortened (RTS-96: 8 h and 24-48 h) so that commitment decisions fit in a one-day episode.
* Start-up costs are of the order of the hot-start costs per MW of capacity of the NREL power
  plant cycling cost study (Kumar et al., NREL/SR-5500-55433, 2012): tens of $/MW, lowest for
  gas turbines and highest for coal units.
* Shut-down cost: 10 % of the start-up cost. No-load cost: 10 % of the full-load fuel cost
  ``c2 Pmax^2 + c1 Pmax`` per hour on (both modelling choices, no published source).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = [
    "UNIT_CLASSES",
    "UnitClass",
    "ThermalFleet",
    "fleet_from_case",
    "balance_dispatch",
    "priority_list_commitment",
    "merit_order_within",
    "reserve_requirement_mw",
    "reserve_shortfall_mw",
    "SHUTDOWN_TOL_MW",
    "RESERVE_MINUTES",
]

_TIME_CAP = 10_000  # steps; time in state stops counting here (long past any minimum time)
RESERVE_MINUTES = 10.0  # spinning reserve: what a unit can add within this many minutes
# a stop is allowed up to SD_g + this (float32 actions and solver round-off, far below any ramp)
SHUTDOWN_TOL_MW = 1e-3


@dataclasses.dataclass(frozen=True)
class UnitClass:
    """Unit-commitment parameters of one size class (module docstring)."""

    name: str
    max_pmax_mw: float  # units with Pmax below this (and above the previous class) belong here
    pmin_fraction: float
    ramp_fraction_per_min: float
    min_up_h: float
    min_down_h: float
    startup_cost_per_mw: float


UNIT_CLASSES: tuple[UnitClass, ...] = (
    UnitClass("peaking", 150.0, 0.30, 0.10, 1.0, 1.0, 25.0),
    UnitClass("mid", 400.0, 0.35, 0.02, 4.0, 4.0, 50.0),
    UnitClass("base", np.inf, 0.40, 0.01, 8.0, 8.0, 70.0),
)
SHUTDOWN_COST_FRACTION = 0.1  # of the start-up cost
NO_LOAD_FRACTION = 0.1  # of the full-load fuel cost per hour


@dataclasses.dataclass(frozen=True, eq=False)
class ThermalFleet:
    """Parameters of ``n`` thermal units (arrays ``[n]``) and a step length ``dt_h`` [h].

    Ramps are MW per hour; minimum times are hours and are rounded up to whole steps.
    """

    pmin_mw: np.ndarray
    pmax_mw: np.ndarray
    ramp_up_mw_per_h: np.ndarray
    ramp_down_mw_per_h: np.ndarray
    min_up_h: np.ndarray
    min_down_h: np.ndarray
    startup_cost: np.ndarray  # $ per start
    shutdown_cost: np.ndarray  # $ per stop
    no_load_cost_per_h: np.ndarray  # $/h while on
    c1_per_mwh: np.ndarray
    c2_per_mw2h: np.ndarray
    dt_h: float
    unit_class: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = np.asarray(self.pmax_mw).shape[0]
        for f in dataclasses.fields(self):
            if f.name in ("dt_h", "unit_class"):
                continue
            value = np.asarray(getattr(self, f.name), dtype=np.float64)
            if value.shape != (n,):
                raise ValueError(f"ThermalFleet.{f.name} has shape {value.shape}, expected ({n},)")
            if not np.all(np.isfinite(value)) or np.any(value < 0.0):
                raise ValueError(
                    f"ThermalFleet.{f.name} must be finite and non-negative, got {value.tolist()}"
                )
            value.setflags(write=False)
            object.__setattr__(self, f.name, value)
        if not self.dt_h > 0.0:
            raise ValueError(f"dt_h must be positive, got {self.dt_h}")
        if np.any(self.pmin_mw > self.pmax_mw):
            raise ValueError("pmin_mw must not exceed pmax_mw")
        if self.unit_class and len(self.unit_class) != n:
            raise ValueError(f"unit_class has {len(self.unit_class)} entries for {n} units")
        ru = self.ramp_up_mw_per_h * self.dt_h
        consts = {
            "ramp_up_step_mw": ru,
            "ramp_down_step_mw": self.ramp_down_mw_per_h * self.dt_h,
            "startup_max_mw": np.minimum(np.maximum(self.pmin_mw, ru), self.pmax_mw),
            # shut-down ramp limit SD_g: a stop only from an output at most this (module doc)
            "shutdown_max_mw": np.minimum(
                np.maximum(self.pmin_mw, self.ramp_down_mw_per_h * self.dt_h), self.pmax_mw
            ),
            # spinning reserve a committed unit can deliver: 10 minutes of its ramp-up rate
            "reserve_ramp_mw": np.minimum(
                self.ramp_up_mw_per_h * RESERVE_MINUTES / 60.0, self.pmax_mw
            ),
            "min_up_steps": np.ceil(self.min_up_h / self.dt_h - 1e-9).astype(np.int64),
            "min_down_steps": np.ceil(self.min_down_h / self.dt_h - 1e-9).astype(np.int64),
            "no_load_step": self.no_load_cost_per_h * self.dt_h,
            "c1_step": self.c1_per_mwh * self.dt_h,
            "c2_step": self.c2_per_mw2h * self.dt_h,
        }
        for key, value in consts.items():
            value.setflags(write=False)
            object.__setattr__(self, key, value)

    @property
    def n_units(self) -> int:
        """Number of units."""
        return int(self.pmax_mw.shape[0])

    # ---- 1. commitment --------------------------------------------------------------------
    def commit(
        self,
        on: np.ndarray,
        time_in_state: np.ndarray,
        want_on: np.ndarray,
        p_mw: np.ndarray,
        blocked: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Status after the minimum up/down rules and the shut-down ramp: ``(on_new, start, stop,
        overridden)``, each [B, n] bool.

        Args:
            on: Current status [B, n].
            time_in_state: Steps in the current status [B, n].
            want_on: Requested status [B, n].
            p_mw: Last output [B, n], MW; a stop is refused above ``shutdown_max_mw``.
            blocked: :meth:`shutdown_blocked` of ``on`` and ``p_mw``, if the caller has it.

        Returns:
            ``on_new``, ``start``, ``stop`` and ``overridden``, each [B, n] bool.
        """
        blocked = self.shutdown_blocked(on, p_mw) if blocked is None else blocked
        locked = (time_in_state < np.where(on, self.min_up_steps, self.min_down_steps)) | blocked
        switch = want_on != on
        overridden = switch & locked
        change = switch ^ overridden
        on_new = on ^ change
        return on_new, change & on_new, change & on, overridden

    def shutdown_blocked(self, on: np.ndarray, p_mw: np.ndarray) -> np.ndarray:
        """On units above their shut-down ramp limit (``shutdown_max_mw`` + tolerance).

        Args:
            on: Current status [B, n].
            p_mw: Last output [B, n], MW.

        Returns:
            [B, n] bool: the units that may not stop this step.
        """
        return on & (p_mw > self.shutdown_max_mw + SHUTDOWN_TOL_MW)

    def deliverable_reserve_mw(self, on: np.ndarray, p_mw: np.ndarray) -> np.ndarray:
        """Spinning reserve [B, n] in MW each unit can deliver within ``RESERVE_MINUTES``:
        ``min(Pmax - p, 10 x ramp-up per minute)`` when on (at least 0), 0 when off.

        Args:
            on: Status [B, n].
            p_mw: Output [B, n], MW.

        Returns:
            Reserve [B, n], MW.
        """
        room = np.minimum(self.pmax_mw - p_mw, self.reserve_ramp_mw)
        return np.maximum(room, 0.0) * on

    @staticmethod
    def advance_time(time_in_state: np.ndarray, changed: np.ndarray) -> np.ndarray:
        """Steps in the current status after a step [B, n]: 1 where it changed, else one more.

        Args:
            time_in_state: Steps in the status before the step [B, n].
            changed: Units whose status changed [B, n].

        Returns:
            Steps in the status after the step [B, n].
        """
        return np.where(changed, 1, np.minimum(time_in_state + 1, _TIME_CAP))

    # ---- 2. output bounds -----------------------------------------------------------------
    def dispatch_range(
        self,
        on: np.ndarray,
        p_mw: np.ndarray,
        on_new: np.ndarray,
        start: np.ndarray,
        free: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Output bounds ``(lo, hi)`` [B, n] in MW of the step (module docstring, stage 2);
        rows where ``free`` [B] is true have no ramp limit from ``p_mw`` (a start still has one).

        Args:
            on: Status before the step [B, n].
            p_mw: Last output [B, n], MW.
            on_new: Status after the commitment rules [B, n].
            start: Units starting this step [B, n].
            free: Rows without ramp limits [B] (``None``: none).

        Returns:
            Lower and upper output bounds [B, n], MW.
        """
        lo = np.maximum(self.pmin_mw, p_mw - self.ramp_down_step_mw)
        hi = np.minimum(self.pmax_mw, p_mw + self.ramp_up_step_mw)
        if free is not None and free.any():
            lo = np.where(free[:, None], self.pmin_mw, lo)
            hi = np.where(free[:, None], self.pmax_mw, hi)
        lo = np.where(start, self.pmin_mw, lo)
        hi = np.where(start, self.startup_max_mw, hi)
        lo *= on_new
        hi *= on_new
        return lo, hi

    # ---- costs ----------------------------------------------------------------------------
    def step_costs(
        self, p_mw: np.ndarray, on_new: np.ndarray, start: np.ndarray, stop: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(fuel, no_load, startup, shutdown)`` costs of the step, each [B] in $.

        Args:
            p_mw: Output [B, n], MW.
            on_new: Status after the step [B, n].
            start: Units started [B, n].
            stop: Units stopped [B, n].

        Returns:
            Fuel, no-load, start-up and shut-down cost, each [B] in $.
        """
        fuel = (p_mw * p_mw) @ self.c2_step + p_mw @ self.c1_step
        no_load = on_new @ self.no_load_step
        return fuel, no_load, start @ self.startup_cost, stop @ self.shutdown_cost

    def average_cost_per_mwh(self) -> np.ndarray:
        """Full-load average cost [$/MWh] per unit (fuel + no-load at Pmax): the priority list
        order.

        Returns:
            Cost [n], $/MWh.
        """
        p = self.pmax_mw
        return (
            self.c2_per_mw2h * p * p + self.c1_per_mwh * p + self.no_load_cost_per_h
        ) / np.maximum(p, 1e-9)

    def describe(self) -> list[dict[str, Any]]:
        """One row per unit with its parameters (for documentation and tests).

        Returns:
            Dicts of parameter name to value (MW, $/MWh, steps, $).
        """
        return [
            {
                "class": self.unit_class[i] if self.unit_class else "",
                "pmin_mw": float(self.pmin_mw[i]),
                "pmax_mw": float(self.pmax_mw[i]),
                "ramp_mw_per_h": float(self.ramp_up_mw_per_h[i]),
                "shutdown_max_mw": float(self.shutdown_max_mw[i]),
                "reserve_ramp_mw": float(self.reserve_ramp_mw[i]),
                "min_up_h": float(self.min_up_h[i]),
                "min_down_h": float(self.min_down_h[i]),
                "startup_cost": float(self.startup_cost[i]),
                "shutdown_cost": float(self.shutdown_cost[i]),
                "no_load_cost_per_h": float(self.no_load_cost_per_h[i]),
            }
            for i in range(self.n_units)
        ]


def fleet_from_case(
    pmax_mw: np.ndarray,
    c1_per_mwh: np.ndarray,
    c2_per_mw2h: np.ndarray,
    dt_h: float,
    classes: tuple[UnitClass, ...] = UNIT_CLASSES,
) -> ThermalFleet:
    """UC parameters derived from each unit's Pmax and cost curve by the size-class rule
    (module docstring); ``classes`` sorted by ``max_pmax_mw``, the last one unbounded.

    Args:
        pmax_mw: Unit ratings [n], MW.
        c1_per_mwh: Linear cost coefficients [n], $/MWh.
        c2_per_mw2h: Quadratic cost coefficients [n], $/(MW^2 h).
        dt_h: Step length, hours (minimum times and ramps are converted to steps).
        classes: The size classes.

    Returns:
        The fleet's unit-commitment parameters.
    """
    pmax = np.asarray(pmax_mw, dtype=np.float64)
    c1 = np.asarray(c1_per_mwh, dtype=np.float64)
    c2 = np.asarray(c2_per_mw2h, dtype=np.float64)
    if pmax.ndim != 1 or c1.shape != pmax.shape or c2.shape != pmax.shape:
        raise ValueError(
            f"pmax_mw, c1 and c2 must be [n] arrays of one length, got {pmax.shape}, {c1.shape}, "
            f"{c2.shape}"
        )
    bounds = np.array([c.max_pmax_mw for c in classes])
    if not np.all(np.diff(bounds) > 0) or np.isfinite(bounds[-1]):
        raise ValueError("classes must be sorted by max_pmax_mw with an unbounded last class")
    idx = np.searchsorted(bounds, pmax, side="right")

    def pick(attr: str) -> np.ndarray:
        return np.array([getattr(classes[i], attr) for i in idx], dtype=np.float64)

    ramp = pick("ramp_fraction_per_min") * pmax * 60.0
    startup = pick("startup_cost_per_mw") * pmax
    return ThermalFleet(
        pmin_mw=pick("pmin_fraction") * pmax,
        pmax_mw=pmax,
        ramp_up_mw_per_h=ramp,
        ramp_down_mw_per_h=ramp,
        min_up_h=pick("min_up_h"),
        min_down_h=pick("min_down_h"),
        startup_cost=startup,
        shutdown_cost=SHUTDOWN_COST_FRACTION * startup,
        no_load_cost_per_h=NO_LOAD_FRACTION * (c2 * pmax * pmax + c1 * pmax),
        c1_per_mwh=c1,
        c2_per_mw2h=c2,
        dt_h=float(dt_h),
        unit_class=tuple(classes[i].name for i in idx),
    )


def balance_dispatch(
    setpoint_mw: np.ndarray, lo: np.ndarray, hi: np.ndarray, load_mw: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Balanced dispatch ``(p [B, n], imbalance [B])`` in MW (module docstring, stage 3).

    ``setpoint_mw`` is clipped into ``[lo, hi]``; a shortfall ``r = load - sum(p) > 0`` is
    shared in proportion to the headroom ``hi - p`` (a surplus in proportion to ``p - lo``),
    capped at the total headroom. ``imbalance = sum(p) - load`` is what remains (0 when the
    bounds allow the balance).
    """
    p = np.minimum(np.maximum(setpoint_mw, lo), hi)
    residual = load_mw - p.sum(axis=1)
    up = (residual > 0.0)[:, None]
    room = np.where(up, hi - p, p - lo)
    total = room.sum(axis=1)
    # fraction of each unit's headroom used: |residual| / total, at most 1 (so p stays in [lo, hi])
    frac = np.minimum(residual / np.maximum(total, 1e-300), 1.0)
    frac = np.maximum(frac, -1.0)[:, None]
    p += frac * room
    return p, p.sum(axis=1) - load_mw


def priority_list_commitment(
    order: np.ndarray,
    pmax_mw: np.ndarray,
    target_mw: np.ndarray,
    must_on: np.ndarray,
    must_off: np.ndarray,
    reserve_ramp_mw: np.ndarray | None = None,
    reserve_mw: np.ndarray | None = None,
) -> np.ndarray:
    """Status [B, n]: ``must_on`` units, then units in priority ``order`` ([n], cheapest first)
    until the committed capacity ``pmax_mw`` ([n] or [B, n], MW) reaches ``target_mw`` [B] and,
    where given, their 10-minute response ``reserve_ramp_mw`` ([n] or [B, n], MW) reaches
    ``reserve_mw`` [B]; ``must_off`` units stay off."""
    free = ~must_on & ~must_off
    cap = (free * pmax_mw)[:, order]
    before = np.cumsum(cap, axis=1) - cap
    needed = target_mw - (must_on * pmax_mw).sum(axis=1)
    take = before < needed[:, None]
    if reserve_ramp_mw is not None and reserve_mw is not None:
        ramp = (free * reserve_ramp_mw)[:, order]
        ramp_before = np.cumsum(ramp, axis=1) - ramp
        take |= ramp_before < (reserve_mw - (must_on * reserve_ramp_mw).sum(axis=1))[:, None]
    pick = np.empty_like(free)
    pick[:, order] = free[:, order] & take
    return must_on | pick


def merit_order_within(
    lo: np.ndarray, hi: np.ndarray, load_mw: np.ndarray, order: np.ndarray
) -> np.ndarray:
    """Dispatch [B, n]: every unit at ``lo``, then units loaded in ``order`` ([n], cheapest first)
    up to ``hi`` until ``load_mw`` [B] is met (clipped to the range the bounds allow)."""
    room = (hi - lo)[:, order]
    residual = np.clip(load_mw - lo.sum(axis=1), 0.0, room.sum(axis=1))
    before = np.cumsum(room, axis=1) - room
    fill = np.clip(residual[:, None] - before, 0.0, room)
    p = np.empty_like(fill)
    p[:, order] = fill
    return p + lo


def reserve_requirement_mw(
    load_mw: np.ndarray,
    p_mw: np.ndarray,
    margin: float,
    contingency: bool,
    unit_reserve_mw: np.ndarray | None = None,
) -> np.ndarray:
    """Total deliverable spinning reserve [B] in MW the committed units must carry (module
    docstring): ``margin x load_mw``, and with ``contingency`` (N-1) at least ``max_k (p_k +
    r_k)``: the loss of unit ``k`` takes its reserve with it (the row ``sum_{g != k} r_g >= p_k``).

    Args:
        load_mw: System load [B], MW.
        p_mw: Unit outputs [B, n], MW.
        margin: Requirement as a share of the load.
        contingency: Add the N-1 term.
        unit_reserve_mw: Deliverable reserve of each unit [B, n], MW (needed with
            ``contingency``).

    Returns:
        The requirement on the summed reserve [B], MW.
    """
    required = margin * np.asarray(load_mw, dtype=np.float64)
    if contingency:
        if unit_reserve_mw is None:
            raise ValueError("the N-1 requirement needs each unit's reserve (unit_reserve_mw)")
        largest = np.add(p_mw, unit_reserve_mw).max(axis=1, initial=0.0)
        required = np.maximum(required, largest)
    return required


def reserve_shortfall_mw(reserve_mw: np.ndarray, required_mw: np.ndarray) -> np.ndarray:
    """How far the deliverable reserve ``reserve_mw`` [B] falls below ``required_mw`` [B] (MW)."""
    return np.maximum(required_mw - reserve_mw, 0.0)
