"""Day-ahead unit-commitment oracle with perfect foresight (HiGHS through ``highspy``).

The MILP (:mod:`.milp`) plans the remaining steps of an episode: commitment, outputs, reserve and
line limits, with the first step's status, output and minimum times taken from the env's state.

Lines. With at most ``EAGER_LINE_PAIRS`` (step, branch) limits (case5: 2 x 48) the MILP holds
the whole network in bus-angle form (nodal balance at every bus, the slack bus takes the
imbalance) and its schedule is the plan. On case118 (186 x 48 limits) that MILP does not solve
in a minute, so the network enters in rounds:

1. MILP with the system balance and the PTDF limits of the (step, branch) pairs found so far
   (none at first), started from the last round's schedule (a MIP start);
2. LP: the network dispatch of that commitment (status fixed, every line, bus-angle form);
   every branch it overloads joins the MILP at each step its flow is above 90 % of its rating,
   and step 1 is repeated (at most ``MAX_LINE_ROUNDS`` rounds);
3. repair, from the round with the best LP objective: at the steps the LP still overloads a
   branch, the cheapest unit (priority list) that relieves it (PTDF sensitivity below -0.05),
   may start and whose Pmin fits under the load is switched on (with the on runs and off gaps
   around it stretched to the minimum up / down times), and the LP is solved again; a trial
   that does not lower the LP objective is retried on half as many steps.

The plan is the repaired commitment with its LP dispatch. The first step of an episode has no
ramp limit (as in the env). HiGHS searches with one MIP worker and stops at a relative MIP gap of
``MIP_REL_GAP`` (0.5 %). Nothing in the plan depends on the clock: the rounds and repairs are
counted, not timed, so the plan is the same on every machine and under any load (on case118 a
day takes 40-100 s, almost all of it at the MILP's root node). ``SAFETY_TIME_LIMIT_S`` (900 s per
solve) only guards against a solver that never finishes: a plan cut by it says so in its
``status`` (``"Time limit reached"``) and is then not reproducible.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from powerzoo.tasks.unit_commitment.milp import (
    MIP_REL_GAP,
    PWL_SEGMENTS,
    add_ptdf_limits,
    build_model,
)

__all__ = ["UCPlan", "solve_uc_day", "MIP_REL_GAP", "SAFETY_TIME_LIMIT_S", "PWL_SEGMENTS"]

SAFETY_TIME_LIMIT_S = 900.0  # per solve; a guard only, never reached on the tasks' days
EAGER_LINE_PAIRS = 2000  # every line limit inside the MILP up to this many (step, branch) pairs
MAX_LINE_ROUNDS = 3
_ADD_ABOVE = 0.9  # limits added: each step an overloaded branch's flow is above 90 % of its rating
_OVERLOAD_TOL_MW = 1e-3
MAX_REPAIRS = 60
_RELIEF = 0.05  # MW of relief per MW injected for a unit to count as relieving a branch


@dataclasses.dataclass(frozen=True)
class UCPlan:
    """Schedule of the remaining steps: output [T, n] MW and status [T, n]."""

    p_mw: np.ndarray
    on: np.ndarray
    objective: float  # MILP objective ($, with the PWL fuel cost)
    status: str
    seconds: float


@dataclasses.dataclass(frozen=True)
class _Day:
    """The schedule's problem (the arguments of :func:`solve_uc_day`): every model of the day,
    MILP or dispatch LP, is built from it."""

    task: Any
    demand: np.ndarray  # [T] per unit of the task's load
    on0: np.ndarray  # [n] status before the first step
    time0: np.ndarray  # [n] steps in that status
    p0: np.ndarray  # [n] output before the first step (MW)
    free_first: bool

    def model(self, network: bool, fixed_on: np.ndarray | None) -> Any:
        """:func:`~powerzoo.tasks.unit_commitment.milp.build_model` of the day: ``(model,
        status columns, output columns)``."""
        return build_model(
            self.task,
            self.demand,
            self.on0,
            self.time0,
            self.p0,
            network=network,
            fixed_on=fixed_on,
            free_first=self.free_first,
        )


def _network_dispatch(day: _Day, on: np.ndarray) -> tuple[np.ndarray, float, str]:
    """Network dispatch LP of commitment ``on`` [T, n]: ``(p [T, n], objective, status)``."""
    m, _, p = day.model(network=True, fixed_on=on)
    x, objective, status = m.solve(SAFETY_TIME_LIMIT_S)
    if x is None:
        raise RuntimeError(f"{day.task.spec.task_id} oracle: HiGHS found no dispatch ({status})")
    return x[p], objective, status


def _switch_on(
    series: np.ndarray, t: int, on0: bool, up: int, down: int, banned: np.ndarray
) -> np.ndarray | None:
    """A unit's status [T] with step ``t`` on and the minimum up / down times kept by turning
    further steps on only (an off gap shorter than ``down`` is filled, an on run shorter than
    ``up`` is extended); ``None`` where that would turn on a ``banned`` step."""
    s = series.copy()
    s[t] = True
    t_n = s.size
    for _ in range(t_n):
        edges = np.flatnonzero(
            np.diff(np.concatenate([[on0], s]).astype(np.int8))
        )  # status changes at these steps
        bounds = np.concatenate([[0], edges, [t_n]])
        changed = False
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            started_here = a > 0 or not on0  # the run began inside the horizon (else it is free)
            if b - a == 0 or not started_here or b == t_n:
                continue
            if not s[a] and b - a < down:  # short off gap between two on runs
                s[a:b] = True
                changed = True
            elif s[a] and b - a < up:  # short on run
                s[a : min(a + up, t_n)] = True
                changed = True
        if not changed:
            break
    return None if np.any(s & ~series & banned) else s


def _repair(
    day: _Day,
    on: np.ndarray,
    p_mw: np.ndarray,
    objective: float,
    status: str,
) -> tuple[np.ndarray, np.ndarray, float, str]:
    """Commitment repair (module docstring): commit relieving units where the network dispatch
    overloads a branch while that lowers the LP objective; returns ``(on, p, objective,
    status)``."""
    task, demand, on0, time0 = day.task, day.demand, day.on0, day.time0
    f = task.fleet
    sens, rating = task.gen_flow, task.rating
    load_flow = demand[:, None] * task.load_flow_pu
    load = demand * task.load_scale
    banned = ~on0 & (
        np.arange(demand.size)[:, None] < f.min_down_steps - time0
    )  # still off at the start
    batch = demand.size  # overloaded steps treated per trial; halved when a trial does not pay
    for _ in range(MAX_REPAIRS):
        if batch == 0:
            break
        signed = p_mw @ sens - load_flow
        over = np.abs(signed) - rating
        worst_over = over.max(axis=1)
        steps = np.flatnonzero(worst_over > _OVERLOAD_TOL_MW)
        if steps.size == 0:
            break
        steps = steps[np.argsort(-worst_over[steps], kind="stable")][:batch]
        trial = on.copy()
        for t in steps:
            worst = int(np.argmax(over[t]))
            relief = np.sign(signed[t, worst]) * sens[:, worst]
            for g in task.priority_order:
                if trial[t, g] or relief[g] >= -_RELIEF:
                    continue
                series = _switch_on(
                    trial[:, g],
                    int(t),
                    bool(on0[g]),
                    int(f.min_up_steps[g]),
                    int(f.min_down_steps[g]),
                    banned[:, g],
                )
                if series is None:
                    continue
                candidate = trial.copy()
                candidate[:, g] = series
                if np.all(candidate @ f.pmin_mw <= load):  # no forced over-generation
                    trial = candidate
                    break
        if np.array_equal(trial, on):
            break
        p_new, obj_new, status_new = _network_dispatch(day, trial)
        if obj_new < objective:
            on, p_mw, objective, status = trial, p_new, obj_new, status_new
        else:
            batch = min(batch, steps.size) // 2
    return on, p_mw, objective, status


def solve_uc_day(
    task: Any,
    demand_pu: np.ndarray,
    on0: np.ndarray,
    time0: np.ndarray,
    p0: np.ndarray,
    free_first: bool = False,
) -> UCPlan:
    """Schedule for ``task`` (a :class:`~powerzoo.tasks.unit_commitment.task.UnitCommitment`) of the
    steps with demand ``demand_pu`` [T] (per unit of the task's load), from status ``on0`` [n],
    steps in it ``time0`` [n] and output ``p0`` [n] (module docstring)."""
    started = time.perf_counter()
    demand = np.asarray(demand_pu, dtype=float)
    on0 = np.asarray(on0, dtype=bool)
    time0 = np.asarray(time0, dtype=np.int64)
    p0 = np.asarray(p0, dtype=float) * on0
    day = _Day(task, demand, on0, time0, p0, free_first)
    eager = task.limited.size * demand.size <= EAGER_LINE_PAIRS
    sens, rating = task.gen_flow, task.rating  # [n, n_lim] flow per MW of each unit, [n_lim]
    load_flow = demand[:, None] * task.load_flow_pu  # [T, n_lim]
    pairs = np.zeros((demand.size, rating.size), dtype=bool)  # (step, branch) limits in the MILP
    start = None
    rounds = 0
    best: tuple[np.ndarray, np.ndarray, float, str] | None = None
    statuses: list[str] = []
    while True:
        rounds += 1
        m, u, p = day.model(network=eager, fixed_on=None)
        o_cols = add_ptdf_limits(m, p, pairs, sens, rating, load_flow, task.spec.dt_h)
        if start is not None:  # the last round's schedule, with the slacks of the new limits
            start_p = start[p]
            over = np.abs(start_p @ sens - load_flow) - rating
            start = np.concatenate([start, np.zeros(m.n_cols - start.size)])
            start[o_cols] = np.maximum(over[pairs], 0.0)
        x, objective, status = m.solve(SAFETY_TIME_LIMIT_S, start)
        statuses.append(status)
        if x is None:
            raise RuntimeError(f"{task.spec.task_id} oracle: HiGHS found no schedule ({status})")
        on = x[u] > 0.5
        if eager:
            break
        # the network dispatch of that commitment (an LP); the best round so far is kept
        p_mw, obj_lp, status_lp = _network_dispatch(day, on)
        if best is None or obj_lp < best[2]:
            best = (on, p_mw, obj_lp, status_lp)
        flow = np.abs(p_mw @ sens - load_flow)
        over = flow > rating + _OVERLOAD_TOL_MW
        new = ((flow > _ADD_ABOVE * rating) & over.any(axis=0)) & ~pairs
        if not new.any() or rounds >= MAX_LINE_ROUNDS:
            break
        pairs |= new
        start = x
    f = task.fleet
    if eager:
        p_mw = x[p]
    else:
        on, p_mw, objective, status = _repair(day, *best)
    p_mw = np.clip(p_mw, f.pmin_mw, f.pmax_mw) * on
    if any(s == "Time limit reached" for s in statuses):
        status = "Time limit reached"
    return UCPlan(p_mw, on, objective, status, time.perf_counter() - started)
