"""``volt_var_123``'s oracle, second stage: the whole day planned on one mixed-integer model
linearised around the exact three-phase flow, re-linearised and checked with it.

Starting from a reference plan of the day (the step-by-step plan of :mod:`.oracle`), a pass:

1. Around the best plan so far, :func:`~.oracle_linear.linearise` gives, from one batched call
   of the exact flow, every step's sensitivities of each bus-phase voltage and of the losses to
   each device (one tap step, the capacitor switched, the PV inverter moved by
   :data:`Q_REACH` of its limit).
2. One HiGHS MILP for all ``T`` steps (:func:`solve_day_milp`). Per step: integer taps within
   +-16 and within :data:`~.oracle_linear.TAP_REACH` steps of the linearisation point's,
   binary capacitors, continuous PV reactive power within each inverter's limit (0 while it
   sleeps) and within :data:`Q_REACH` of its limit from the point's (trust regions of the
   linearisation; both scale with the pass's ``reach``); per regulator and capacitor and step,
   integer up and down moves with ``x_t - x_{t-1} = up_t - down_t`` (``x_{-1}``: the settings
   in force before the plan) priced at the wear (0.5 $ per tap operation, 1 $ per capacitor
   switching), so the day's wear is exact; each bus-phase voltage, linearised around its
   step's point, inside the planned band [0.952, 1.048] p.u. (widened to the voltage at the
   point where that lies between the planned band and [0.95, 1.05], so that keeping the point
   costs no slack) with slacks at 100,000 $ per p.u.; the losses, linearised in every device,
   at the step's price; 0.0001 $ per kvar of reactive power. The point is HiGHS's starting
   solution. Voltage rows are written lazily: first those within :data:`NEAR_PU` of their
   edge at the point; after each solve, those its plan breaks, then HiGHS solves again (at
   most :data:`ROW_ROUNDS` solves); rows that no plan within the trust regions can break are
   never written, nor sensitivities that move a voltage by less than 1e-6 p.u. there.
3. The MILP's plan is solved exactly (with its sensitivities, in case it becomes the best).
   A plan no better than the best halves ``reach`` for the next pass; a MILP that returns
   the best plan itself ends the passes.

:func:`improve_day` runs at most :data:`PASSES` passes and returns, of all the plans checked
with the exact flow (the reference included), the one with the least voltage violation, then
the least cost (losses at the price and wear): never worse than the reference. Each day MILP
stops at a relative gap of :data:`MIP_REL_GAP` of the day's linearised cost (about 0.03 $) or
after :data:`TIME_LIMIT_S` seconds over its solves, with its best solution so far. On a day
of 48 steps the MILP has 4,656 columns (1,584 integer) and 3,600 rows before its voltage
rows, of which 29-1,246 are written (median 179, each with its slack column), out of 13,344
bus-phase-steps; on the 65 test days HiGHS solved all 300 MILPs to the gap, in 0.15 s of CPU
on average (0.7 s at most), and the stage took 2.2 s of CPU a day (4.6 passes).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from powerzoo.physics.highs import new_highs
from powerzoo.tasks.volt_var.grid import V_HIGH_PU, V_LOW_PU, VoltVarFeeder
from powerzoo.tasks.volt_var.oracle_linear import (
    MARGIN_PU,
    Q_PRICE,
    SLACK_PRICE,
    TAP_REACH,
    DayInputs,
    Linearisation,
    linearise,
    outranks,
)
from powerzoo.tasks.volt_var.spec import TAP_STEPS

if TYPE_CHECKING:
    import highspy

__all__ = [
    "MIP_REL_GAP",
    "PASSES",
    "Q_REACH",
    "TIME_LIMIT_S",
    "DayMilp",
    "DayPlan",
    "improve_day",
    "plan_wear",
    "solve_day_milp",
]

PASSES = 6  # day MILPs per day at most (each linearised around the best plan so far)
TIME_LIMIT_S = 8.0  # HiGHS's time limit per day MILP, over all its solves [s]
MIP_REL_GAP = 1e-3  # HiGHS's relative MIP gap, of the day's linearised cost [$]
SENS_FLOOR_PU = 1e-6  # sensitivities that move a voltage less than this within bounds: left out
NEAR_PU = 0.01  # voltage rows written at first: within this of the planned band's edge at x0
ROW_ROUNDS = 6  # solves of a day MILP, each adding the voltage rows its plan breaks
ROW_TOL_PU = 1e-7  # a voltage row broken by more than this is added
Q_REACH = 0.25  # fraction of its limit a PV's reactive power may move from the linearisation point


@dataclasses.dataclass(frozen=True)
class DayPlan:
    """A plan of ``T`` steps and its figures under the exact flow."""

    taps: np.ndarray  # [T, n_reg] tap positions
    caps: np.ndarray  # [T, n_cap] capacitor states (0 or 1)
    q_kvar: np.ndarray  # [T, n_pv] PV reactive power [kvar]
    violation_pu: float  # sum over steps and bus-phases outside [0.95, 1.05] (inf: no flow)
    cost: float  # losses at the price plus wear [$]


@dataclasses.dataclass(frozen=True)
class DayMilp:
    """A solved day MILP: its plan, the wear its move columns charge, and its size."""

    taps: np.ndarray  # [T, n_reg]
    caps: np.ndarray  # [T, n_cap]
    q_kvar: np.ndarray  # [T, n_pv] [kvar]
    wear: float  # $ of the up and down move columns at the solution
    n_cols: int
    n_int: int
    n_rows: int
    status: str  # HiGHS's model status


def plan_wear(
    taps: np.ndarray,
    caps: np.ndarray,
    start: tuple[np.ndarray, np.ndarray],
    wear: tuple[float, float],
) -> float:
    """The wear of a plan [$]: its tap operations and capacitor switchings, counted from the
    settings ``start = (taps [n_reg], caps [n_cap])`` in force before its first step.

    Args:
        taps: [T, n_reg] tap positions.
        caps: [T, n_cap] capacitor states.
        start: Tap positions and capacitor states before the plan.
        wear: ($ per tap operation, $ per capacitor switching).
    """
    tap_ops = np.abs(np.diff(taps, axis=0, prepend=start[0][None])).sum()
    cap_ops = np.abs(np.diff(caps, axis=0, prepend=start[1][None])).sum()
    return float(wear[0] * tap_ops + wear[1] * cap_ops)


def _checked(
    plan: tuple[np.ndarray, np.ndarray, np.ndarray],
    lin: Linearisation,
    day: DayInputs,
    start: tuple[np.ndarray, np.ndarray],
    wear: tuple[float, float],
) -> DayPlan:
    """``plan`` with its violation and cost under the exact flow ``lin`` of it."""
    violation = float(lin.violation_pu.sum()) if lin.converged.all() else np.inf
    cost = float(day.loss_per_kw @ lin.losses_kw) + plan_wear(plan[0], plan[1], start, wear)
    return DayPlan(*plan, violation_pu=violation, cost=cost)


@dataclasses.dataclass(frozen=True)
class _VoltageRows:
    """Linearised voltage rows ``g x + slack >= b`` over the ``T x n_x`` columns of ``x``."""

    g: sp.csr_matrix  # [m, T * n_x] p.u. per unit (sign: + for a low row, - for a high row)
    b: np.ndarray  # [m] p.u.


def _voltage_rows(
    lin: Linearisation, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> _VoltageRows:
    """Every voltage row the linear model can break within the bounds ``lo``, ``hi`` [T, n_x]
    of the variables around ``x0`` [T, n_x] (module docstring, 2.)."""
    assert lin.sens is not None
    n_t, _, n_x = lin.sens.shape
    d_lo, d_hi = (lo - x0)[:, None], (hi - x0)[:, None]  # [T, 1, n_x]
    sens = np.where(np.abs(lin.sens) * np.maximum(-d_lo, d_hi) >= SENS_FLOOR_PU, lin.sens, 0.0)
    v0 = lin.vm_pu
    low = np.argwhere(v0 + np.minimum(sens * d_lo, sens * d_hi).sum(axis=2) < V_LOW_PU + MARGIN_PU)
    high = np.argwhere(
        v0 + np.maximum(sens * d_lo, sens * d_hi).sum(axis=2) > V_HIGH_PU - MARGIN_PU
    )
    which = np.concatenate([low, high])  # (step, bus-phase) of each row
    sign = np.concatenate([np.ones(len(low)), -np.ones(len(high))])
    coef = sign[:, None] * sens[which[:, 0], which[:, 1]]  # [m, n_x]
    # the planned band, widened to the voltage at x0 where that lies between it and the band
    at_x0 = v0[which[:, 0], which[:, 1]]
    low_edge = np.where(
        at_x0 >= V_LOW_PU, np.minimum(at_x0, V_LOW_PU + MARGIN_PU), V_LOW_PU + MARGIN_PU
    )
    high_edge = np.where(
        at_x0 <= V_HIGH_PU, np.maximum(at_x0, V_HIGH_PU - MARGIN_PU), V_HIGH_PU - MARGIN_PU
    )
    edge = np.where(sign > 0, low_edge, -high_edge)
    b = edge - sign * at_x0 + (coef * x0[which[:, 0]]).sum(axis=1)
    r, j = np.nonzero(coef)
    g = sp.csr_matrix((coef[r, j], (r, which[r, 0] * n_x + j)), shape=(sign.size, n_t * n_x))
    return _VoltageRows(g, b)


def _add_voltage_rows(h: highspy.Highs, rows: _VoltageRows, which: np.ndarray) -> None:
    """Add the rows ``which`` of ``rows`` to ``h``, each with a new slack column."""
    k = which.size
    if k == 0:
        return
    first = h.getNumCol()
    empty = np.empty(0, np.int32)
    h.addCols(k, np.full(k, SLACK_PRICE), np.zeros(k), np.full(k, np.inf), 0, empty, empty, [])
    g = rows.g[which]
    a = sp.hstack([g, sp.csr_matrix((k, first - g.shape[1])), sp.identity(k)]).tocsr()
    a.sort_indices()
    h.addRows(
        k,
        rows.b[which],
        np.full(k, np.inf),
        a.nnz,
        a.indptr[:-1].astype(np.int32),
        a.indices.astype(np.int32),
        a.data,
    )


def solve_day_milp(
    lin: Linearisation,
    day: DayInputs,
    x0: np.ndarray,
    start: tuple[np.ndarray, np.ndarray],
    wear: tuple[float, float],
    reach: float = 1.0,
) -> DayMilp | None:
    """The day MILP around the plan ``x0`` (module docstring, 2.); ``None`` if HiGHS finds no
    solution.

    Args:
        lin: The exact flow of ``x0`` with its sensitivities (:func:`.oracle_linear.linearise`).
        day: The steps' loads, PV, loss prices and reactive limits.
        x0: [T, n_x] the plan linearised around: taps, capacitors, PV kvar per step.
        start: Tap positions [n_reg] and capacitor states [n_cap] in force before the plan.
        wear: ($ per tap operation, $ per capacitor switching).
        reach: Scale of the trust region: taps within ``max(1, TAP_REACH x reach)`` steps of
            ``x0``, PV kvar within ``Q_REACH x reach`` of their limits.

    Columns: ``x`` [T, n_x], up moves [T, n_d], down moves [T, n_d] (``n_d`` taps and
    capacitors), ``|q|`` [T, n_pv], then one slack per voltage row written.
    """
    import highspy

    assert lin.loss_grad is not None
    n_r, n_c = start[0].size, start[1].size
    n_t, n_x = x0.shape
    n_d, n_q = n_r + n_c, n_x - n_r - n_c
    q_reach = Q_REACH * reach * day.q_limit_kvar
    tap_reach = max(1, int(TAP_REACH * reach))
    lo = np.concatenate(
        [
            np.maximum(x0[:, :n_r] - tap_reach, -TAP_STEPS),
            np.zeros((n_t, n_c)),
            np.maximum(x0[:, n_d:] - q_reach, -day.q_limit_kvar),
        ],
        axis=1,
    )
    hi = np.concatenate(
        [
            np.minimum(x0[:, :n_r] + tap_reach, TAP_STEPS),
            np.ones((n_t, n_c)),
            np.minimum(x0[:, n_d:] + q_reach, day.q_limit_kvar),
        ],
        axis=1,
    )
    c_up, c_dn, c_qa = n_t * n_x, n_t * (n_x + n_d), n_t * (n_x + 2 * n_d)
    n_col = c_qa + n_t * n_q
    x_col = np.arange(n_t * n_x).reshape(n_t, n_x)
    d_col, q_col = x_col[:, :n_d], x_col[:, n_d:]
    up_col = c_up + np.arange(n_t * n_d).reshape(n_t, n_d)
    dn_col = c_dn + np.arange(n_t * n_d).reshape(n_t, n_d)
    qa_col = c_qa + np.arange(n_t * n_q).reshape(n_t, n_q)
    # moves: x_t - x_{t-1} - up_t + down_t = (x_{-1} at t = 0, else 0)
    r_mv = np.arange(n_t * n_d).reshape(n_t, n_d)
    parts = [(r_mv, d_col, 1.0), (r_mv[1:], d_col[:-1], -1.0), (r_mv, up_col, -1.0)]
    parts += [(r_mv, dn_col, 1.0)]
    # |q|: qa - q >= 0 and qa + q >= 0
    r_q = n_t * n_d + np.arange(n_t * n_q).reshape(n_t, n_q)
    r_q2 = r_q + n_t * n_q
    parts += [(r_q, qa_col, 1.0), (r_q2, qa_col, 1.0), (r_q, q_col, -1.0), (r_q2, q_col, 1.0)]
    a = sp.csr_matrix(
        (
            np.concatenate([np.full(r.size, v) for r, _, v in parts]),
            (
                np.concatenate([r.ravel() for r, _, _ in parts]),
                np.concatenate([c.ravel() for _, c, _ in parts]),
            ),
        ),
        shape=(n_t * (n_d + 2 * n_q), n_col),
    )
    a.sort_indices()
    mv_rhs = np.zeros((n_t, n_d))
    mv_rhs[0] = np.concatenate(start)
    row_lo = np.concatenate([mv_rhs.ravel(), np.zeros(2 * n_t * n_q)])
    row_hi = np.concatenate([mv_rhs.ravel(), np.full(2 * n_t * n_q, np.inf)])
    price = day.loss_per_kw[:, None]
    grad = lin.loss_grad
    wear_d = np.concatenate([np.full(n_r, wear[0]), np.full(n_c, wear[1])])
    cost = np.concatenate(
        [(price * grad).ravel(), np.tile(wear_d, 2 * n_t), np.full(n_t * n_q, Q_PRICE)]
    )
    col_lo = np.concatenate([lo.ravel(), np.zeros(n_col - n_t * n_x)])
    col_hi = np.concatenate([hi.ravel(), np.full(n_col - n_t * n_x, np.inf)])

    h = new_highs(mip_rel_gap=MIP_REL_GAP, time_limit=TIME_LIMIT_S)
    h.addCols(n_col, cost, col_lo, col_hi, 0, np.empty(0, np.int32), np.empty(0, np.int32), [])
    h.changeObjectiveOffset(float((price[:, 0] * (lin.losses_kw - (grad * x0).sum(axis=1))).sum()))
    integer = np.concatenate([d_col.ravel(), up_col.ravel(), dn_col.ravel()]).astype(np.int32)
    h.changeColsIntegrality(
        integer.size, integer, np.full(integer.size, highspy.HighsVarType.kInteger)
    )
    h.addRows(
        a.shape[0],
        row_lo,
        row_hi,
        a.nnz,
        a.indptr[:-1].astype(np.int32),
        a.indices.astype(np.int32),
        a.data,
    )
    rows = _voltage_rows(lin, x0, lo, hi)
    x0_flat = x0.ravel()
    active = rows.b - rows.g @ x0_flat > -NEAR_PU
    step = np.diff(x0[:, :n_d], axis=0, prepend=mv_rhs[:1])
    col = np.concatenate(
        [
            x0_flat,
            np.maximum(step, 0).ravel(),
            np.maximum(-step, 0).ravel(),
            np.abs(x0[:, n_d:]).ravel(),
        ]
    )
    added = np.flatnonzero(active)
    began = time.perf_counter()
    for _ in range(ROW_ROUNDS):
        left = TIME_LIMIT_S - (time.perf_counter() - began)
        if left <= 0.0:
            break
        h.setOptionValue("time_limit", left)
        _add_voltage_rows(h, rows, added)
        col = np.concatenate(
            [col, np.maximum(rows.b[added] - rows.g[added] @ col[: n_t * n_x], 0.0)]
        )
        begin = highspy.HighsSolution()
        begin.col_value = col.tolist()
        h.setSolution(begin)
        h.run()
        solution = h.getSolution()
        if not solution.value_valid:
            return None
        col = np.asarray(solution.col_value)
        need = rows.b - rows.g @ col[: n_t * n_x]
        added = np.flatnonzero(~active & (need > ROW_TOL_PU))
        if added.size == 0:
            break
        active[added] = True
    x = col[: n_t * n_x].reshape(n_t, n_x).copy()
    x[:, :n_d] = np.round(x[:, :n_d])
    x = np.clip(x, lo, hi)
    return DayMilp(
        taps=x[:, :n_r],
        caps=x[:, n_r:n_d],
        q_kvar=x[:, n_d:],
        wear=float(cost[c_up:c_qa] @ np.round(col[c_up:c_qa])),
        n_cols=h.getNumCol(),
        n_int=integer.size,
        n_rows=h.getNumRow(),
        status=h.modelStatusToString(h.getModelStatus()),
    )


def _stacked(plan: DayPlan) -> np.ndarray:
    """[T, n_x] the settings of ``plan``: taps, capacitors, PV kvar."""
    return np.concatenate([plan.taps, plan.caps, plan.q_kvar], axis=1)


def improve_day(
    model: VoltVarFeeder,
    day: DayInputs,
    start: tuple[np.ndarray, np.ndarray],
    wear: tuple[float, float],
    reference: tuple[np.ndarray, np.ndarray, np.ndarray],
    passes: int = PASSES,
) -> tuple[DayPlan, list[DayPlan]]:
    """The best plan of the day (module docstring) from ``reference``.

    Args:
        model: The task's feeder.
        day: The steps' loads, PV, loss prices and reactive limits (``T`` steps).
        start: Tap positions [n_reg] and capacitor states [n_cap] in force before the plan.
        wear: ($ per tap operation, $ per capacitor switching).
        reference: Taps [T, n_reg], capacitors [T, n_cap], PV kvar [T, n_pv] of a plan.
        passes: Day MILPs solved at most.

    Returns:
        The best plan under the exact flow and every plan checked, the reference first.
    """
    plan = tuple(np.asarray(a, dtype=np.float64) for a in reference)
    lin = linearise(model, day, *plan, q_move=Q_REACH)
    best = _checked(plan, lin, day, start, wear)
    checked = [best]
    reach = 1.0
    for _ in range(passes):
        milp = solve_day_milp(lin, day, _stacked(best), start, wear, reach)
        if milp is None:
            break
        new = (milp.taps, milp.caps, milp.q_kvar)
        if np.allclose(np.concatenate(new, axis=1), _stacked(best), atol=1e-6):
            break  # the model's optimum within the trust region is the best plan itself
        new_lin = linearise(model, day, *new, q_move=Q_REACH)
        result = _checked(new, new_lin, day, start, wear)
        checked.append(result)
        if outranks((result.violation_pu, result.cost), (best.violation_pu, best.cost)):
            best, lin = result, new_lin
        else:
            reach /= 2.0
    return best, checked
