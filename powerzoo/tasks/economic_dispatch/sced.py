"""The dispatch tasks' network with unit limits, their initial dispatch and their baselines.

* :func:`limited_case`: the task's case with Pmin by technology (:mod:`.limits`), its ratings
  checked with those units (below), cached.
* The **rule**, an operator's security-constrained economic dispatch (SCED,
  :func:`sced_dispatch`): the equal-incremental-cost ("lambda") dispatch of the observed load
  within every unit's step range (Pmin, Pmax and the ramps from its last output), then
  redispatch by PTDF sensitivities within the same range until no line is overloaded
  (:func:`powerzoo.physics.redispatch.redispatch` started from the lambda dispatch).
* The **naive** baseline (:mod:`powerzoo.benchmarks.naive`): the same lambda dispatch within the
  same ranges, the network ignored.
* The **oracle** of the one-day tasks (:func:`ramped_plan`): a DC-OPF per step on HiGHS with
  soft line limits at the reward's overload price, each step within its ramp range from the
  step before (:func:`powerzoo.physics.multi_period_opf.solve_ramped_sequence`).
* The **initial dispatch** (:func:`initial_dispatch`): each episode starts from the rule's
  dispatch, without ramp limits, of the load of the half-hour before its first step (the
  previous day's 23:30), a dispatch within every unit's ``[Pmin, Pmax]`` that keeps the
  ratings where redispatch can (the network-blind lambda dispatch on cases above 1,000 buses).

Ratings checked with the task's units: the case loader makes every library case operable with
the case's own unit limits (:mod:`powerzoo.physics.operable_ratings`, Pmin mostly 0). Pmin by
technology can leave no dispatch within those ratings: on case300 three units' Pmin (184, 235
and 780 MW) exceed the voltage-class ratings of their step-up transformers (181 and 491 MW) and
of the lines behind them, so its DC-OPF keeps 520-580 MW of overload with the task's Pmin. So
:func:`limited_case` runs the same check again on the case with the task's units, at the
task's lowest and peak load (``load_scale`` x the year's lowest calendar demand and x 1), and
re-rates what binds to 1.15 x its DC-OPF flow (case300: 6 more branches; case5, case14, case30,
case118 at 1.1 and 1.4, case1354pegase and case2869pegase: none).
:func:`~powerzoo.physics.operable_ratings.rerating_of` of the task's case gives that record.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.profiles import get_profiles
from powerzoo.physics.lambda_dispatch import equal_incremental_cost_dispatch
from powerzoo.physics.multi_period_opf import solve_ramped_sequence
from powerzoo.physics.network import NetworkCase
from powerzoo.physics.operable_ratings import with_operable_ratings
from powerzoo.physics.redispatch import redispatch
from powerzoo.tasks.economic_dispatch.limits import DispatchLimits, dispatch_limits
from powerzoo.tasks.transmission import STEP_MINUTES, congestion_ready_case

__all__ = [
    "RANGE_MARGIN_MW",
    "initial_dispatch",
    "limited_case",
    "lowest_demand_pu",
    "ramped_plan",
    "sced_dispatch",
]

RANGE_MARGIN_MW = 1e-3
"""The rule and the naive policy set every unit this far inside its step range (when the range
is wider than twice this), so that a range computed from float32 observations never puts a
setpoint outside the env's float64 range."""


@functools.cache
def lowest_demand_pu() -> float:
    """The lowest value of the data year's calendar demand shape (per unit of the case's load):
    the base scenario's (the other scenarios' demand is never lower)."""
    steps = 24 * 60 // STEP_MINUTES
    demand = get_profiles("base", STEP_MINUTES).series["demand_pu"]
    return float(np.min(demand[: calendar.N_DAYS * steps]))


@functools.lru_cache(maxsize=16)
def limited_case(case_name: str, load_scale: float) -> tuple[NetworkCase, DispatchLimits]:
    """``case_name``'s network with its line ratings (:func:`congestion_ready_case`, checked
    with the task's units: module docstring) and the dispatch limits of its units at bus loads
    ``load_scale x`` the case's (:mod:`.limits`).

    Args:
        case_name: A transmission case name of :func:`powerzoo.physics.cases.load_case`.
        load_scale: The task's bus loads per unit of calendar demand, x the case's loads.

    Returns:
        The case with the units' Pmin and operable ratings, and the units' limits.
    """
    base = congestion_ready_case(case_name)
    trough = lowest_demand_pu() * float(load_scale)
    limits = dispatch_limits(base, trough * float(base.total_load_mw), STEP_MINUTES / 60.0)
    case = with_operable_ratings(
        limits.with_units(base), "dispatch units", (trough, float(load_scale))
    )
    return case, limits


def _inside(lo: np.ndarray, hi: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` pulled ``margin`` MW inside where the range is wider than twice that."""
    wide = hi - lo > 2.0 * margin
    return np.where(wide, lo + margin, lo), np.where(wide, hi - margin, hi)


def lambda_dispatch(
    case: NetworkCase,
    system_load_mw: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    margin: float = RANGE_MARGIN_MW,
) -> np.ndarray:
    """The network-blind equal-incremental-cost dispatch [B, n_gen] MW of ``system_load_mw``
    [B] within the bounds ``lo``, ``hi`` [B, n_gen] MW (pulled ``margin`` MW inside)."""
    lo, hi = _inside(lo, hi, margin)
    return equal_incremental_cost_dispatch(
        system_load_mw, lo, hi, case.gen_c1_per_mwh, case.gen_c2_per_mw2h
    )


def sced_dispatch(
    case: NetworkCase,
    system_load_mw: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    marginal_cost: np.ndarray,
    margin: float = RANGE_MARGIN_MW,
) -> np.ndarray:
    """An operator's SCED (module docstring) [B, n_gen] MW of ``system_load_mw`` [B] within the
    units' step ranges ``lo``, ``hi`` [B, n_gen] MW; bus loads are the case's load shape scaled
    to the system load. ``marginal_cost`` [n_gen] $/MWh prices the redispatch shifts; every
    unit stays ``margin`` MW inside its range."""
    load = np.atleast_1d(np.asarray(system_load_mw, dtype=np.float64))
    p = lambda_dispatch(case, load, lo, hi, margin)
    share = case.bus_pd_mw / case.bus_pd_mw.sum()
    lo, hi = _inside(lo, hi, margin)
    return redispatch(
        case, load[:, None] * share, marginal_cost, start_mw=p, pmin_mw=lo, pmax_mw=hi
    ).gen_p_mw


def initial_dispatch(task: Any, dense: bool = True) -> np.ndarray:
    """Every split day's starting dispatch [n_days, n_gen] MW of dispatch task ``task``
    (module docstring): the SCED
    (``dense``) or the lambda dispatch of the load of the step before the day's first."""
    steps = task.profiles.steps_per_day
    before = (task.split_days * steps - 1) % task._demand.size
    load = task._system_load[before]
    pmin, pmax = task.case.gen_limits_mw
    lo = np.broadcast_to(pmin, (load.size, task.case.n_gen))
    hi = np.broadcast_to(task.initial_pmax_mw, lo.shape)
    if dense:
        return sced_dispatch(task.case, load, lo, hi, task.marginal_cost, margin=0.0)
    return lambda_dispatch(task.case, load, lo, hi, margin=0.0)


def ramped_plan(task: Any, state: Any, solver: Any = solve_ramped_sequence) -> np.ndarray:
    """The dispatch of every remaining step of each episode of dispatch task ``task`` in state
    ``state`` by ``solver`` [B, H, n_gen] MW (steps already taken are 0): by default the per-step
    DC-OPF within the ramp ranges; ``solve_multi_period_dc_opf`` of
    :mod:`powerzoo.physics.multi_period_opf` (same arguments) plans the horizon whole."""
    h, limits = task.spec.horizon, task.limits
    plan = np.zeros((state.t.size, h, task.case.n_gen))
    for row in range(state.t.size):
        t0 = int(state.t[row])
        result = solver(
            task.case,
            task.bus_loads_ahead(state, row, h - t0),
            state.prev_p_mw[row],
            limits.ramp_up_mw,
            limits.ramp_down_mw,
            task.spec.dt_h,
            task.params.overload_penalty_per_mwh,
            energy_mwh=task.energy_left_of(state, row),
        )
        plan[row, t0:] = result.gen_p_mw
    return plan
