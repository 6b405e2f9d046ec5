"""``volt_var_123``'s oracle: a perfect-foresight plan on mixed-integer models linearised around
the exact three-phase flow and checked with it, in two stages (:func:`plan_day`):

* the step-by-step plan of this module (:func:`plan_steps`), the reference;
* whole-day MILPs, re-linearised around the best plan so far (:mod:`.oracle_day`), which
  weigh a move now against the moves it saves later and the losses of the whole day. The
  oracle returns the best plan under the exact flow (least violation, then least cost), the
  reference included: never worse than the step-by-step plan.

On the 65 test days: the step-by-step plan returns -52.44 $ a day (3.06 tap operations, no
capacitor switching, no violation), the oracle -50.62 $ (the same operations, no violation;
1.82 $ a day better, 0.18-20.3 $ a day), in 5.8 s of one core a day (3.6 s the step-by-step
plan, 2.2 s the day stage; 10.1 s at most).

Step by step, each step of the day is planned in time order, knowing that step's loads, PV
output and price exactly; the wear of a move is charged against the setting the plan left at
the previous step, which is the only coupling between steps (the plan does not look further
ahead, so it may move a tap that a later step moves back). One step:

1. Around the current candidate ``x = (taps, capacitors, PV reactive power)`` (at first: the
   previous step's taps and capacitors, PV at unity) one batched call of the exact flow solves
   ``x`` and, for each device, ``x`` with that device moved: one tap step (up, or down at the
   top), the capacitor switched, the PV inverter at its full reactive limit. The differences
   give the sensitivity of every bus-phase voltage and of the losses to each device.
2. A MILP on HiGHS: integer taps in +-16 and within 4 steps of the candidate's (a trust region
   for the linearisation), binary capacitors, continuous PV reactive power within its limits;
   each bus-phase voltage within 0.05 p.u. of a band edge, linearised, inside [0.952, 1.048]
   p.u. (0.002 p.u. of room for the linearisation error) with slacks priced at 100,000 $ per
   p.u. (voltages farther off are checked by the exact flow of the solution, whose round
   linearises around it); minimise the losses (linearised in the taps and capacitors) at the
   step's price, the wear of the tap and capacitor moves, and 0.0001 $ per kvar of PV reactive
   power (so that the inverters work only where the voltage needs them; their effect on the
   losses is left out).
3. The MILP's solution becomes the next candidate, solved exactly in the next round. After four
   rounds (or when a round returns a candidate already solved) the plan keeps, of every
   candidate solved exactly, the one with the least voltage violation, then the least cost
   (losses and wear under the exact flow). Holding the previous settings is the first
   candidate, so a move is made only when the exact flow shows it pays.

Alone, this plan is not a whole-day optimum: it does not weigh a move now against the moves it
saves later, and it leaves the PV's effect on the losses out; the second stage does both.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from powerzoo.physics.highs import new_highs
from powerzoo.tasks.volt_var.grid import V_HIGH_PU, V_LOW_PU, VoltVarFeeder
from powerzoo.tasks.volt_var.oracle_day import improve_day
from powerzoo.tasks.volt_var.oracle_linear import (
    MARGIN_PU,
    Q_PRICE,
    SLACK_PRICE,
    TAP_REACH,
    DayInputs,
    outranks,
    sensitivity_rows,
)
from powerzoo.tasks.volt_var.spec import TAP_STEPS

__all__ = ["DayInputs", "StepCosts", "plan_day", "plan_step", "plan_steps"]

ROUNDS = 4
ROW_REACH_PU = 0.05  # voltage rows where a band edge is this near (module docstring)


@dataclasses.dataclass(frozen=True)
class StepCosts:
    """The prices of one step's plan."""

    loss_per_kw: float  # $ per kW of losses over the step (price x dt / 1000, price >= 0)
    tap_per_operation: float  # $
    capacitor_per_operation: float  # $


def _exact_cost(costs: StepCosts, losses_kw: float, moves: tuple) -> float:
    taps, caps, prev_taps, prev_caps = moves
    return (
        costs.loss_per_kw * losses_kw
        + costs.tap_per_operation * float(np.abs(taps - prev_taps).sum())
        + costs.capacitor_per_operation * float(np.abs(caps - prev_caps).sum())
    )


def _solve_milp(
    v0: np.ndarray,
    sens: np.ndarray,
    loss_grad: np.ndarray,
    x0: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    prev: np.ndarray,
    costs: StepCosts,
    n_int: tuple[int, int],
) -> np.ndarray | None:
    """One step's MILP (module docstring, 2.); ``None`` if HiGHS finds no solution.

    Columns: ``x`` (taps, capacitors, PV kvar), ``|x - prev|`` (``prev`` 0 for the kvar: the
    wear and the reactive power priced), one slack per voltage row. Voltage rows only where a
    band edge is within :data:`ROW_REACH_PU` of ``v0`` (one farther off is caught by the exact
    check of the candidate, whose round has rows around it).
    """
    import highspy

    n_r, n_c = n_int
    n_x = x0.size
    low = np.flatnonzero(v0 < V_LOW_PU + ROW_REACH_PU)
    high = np.flatnonzero(v0 > V_HIGH_PU - ROW_REACH_PU)
    m = low.size + high.size
    n_col = 2 * n_x + m
    cost = np.zeros(n_col)
    cost[: n_r + n_c] = costs.loss_per_kw * loss_grad[: n_r + n_c]
    cost[n_x : n_x + n_r] = costs.tap_per_operation
    cost[n_x + n_r : n_x + n_r + n_c] = costs.capacitor_per_operation
    cost[n_x + n_r + n_c : 2 * n_x] = Q_PRICE
    cost[2 * n_x :] = SLACK_PRICE
    lo = np.concatenate([bounds[0], np.zeros(n_col - n_x)])
    hi = np.concatenate([bounds[1], np.full(n_col - n_x, np.inf)])
    # low rows: sens x + slack >= 0.952 - v0 + sens x0; high rows: sens x - slack <= 1.048 - ...
    rhs = sens @ x0 - v0
    sign = np.concatenate([np.ones(low.size), -np.ones(high.size)])
    rows_v = sp.hstack(
        [sp.csr_matrix(sens[np.concatenate([low, high])]), sp.csr_matrix((m, n_x)), sp.diags(sign)]
    )
    v_lo = np.concatenate([V_LOW_PU + MARGIN_PU + rhs[low], np.full(high.size, -np.inf)])
    v_hi = np.concatenate([np.full(low.size, np.inf), V_HIGH_PU - MARGIN_PU + rhs[high]])
    # |x - prev| <= aux, as aux - x >= -prev and aux + x >= prev
    eye_x = sp.identity(n_x, format="csr")
    pad = sp.csr_matrix((n_x, m))
    rows_a = sp.vstack([sp.hstack([-eye_x, eye_x, pad]), sp.hstack([eye_x, eye_x, pad])])
    a = sp.vstack([rows_v, rows_a]).tocsr()
    a.sort_indices()
    h = new_highs(mip_rel_gap=1e-4, time_limit=10.0)
    h.addCols(n_col, cost, lo, hi, 0, np.empty(0, np.int32), np.empty(0, np.int32), np.empty(0))
    integer = np.arange(n_r + n_c, dtype=np.int32)
    h.changeColsIntegrality(
        integer.size, integer, np.full(integer.size, highspy.HighsVarType.kInteger)
    )
    h.addRows(
        a.shape[0],
        np.concatenate([v_lo, -prev, prev]),
        np.concatenate([v_hi, np.full(2 * n_x, np.inf)]),
        a.nnz,
        a.indptr[:-1].astype(np.int32),
        a.indices.astype(np.int32),
        a.data,
    )
    h.run()
    solution = h.getSolution()
    if not solution.value_valid:
        return None
    x = np.asarray(solution.col_value)[:n_x]
    x[: n_r + n_c] = np.round(x[: n_r + n_c])
    return x


def plan_step(
    model: VoltVarFeeder,
    p_load_kw: np.ndarray,
    q_load_kvar: np.ndarray,
    pv_kw: np.ndarray,
    q_limit_kvar: np.ndarray,
    prev_taps: np.ndarray,
    prev_caps: np.ndarray,
    costs: StepCosts,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step's settings (module docstring).

    Args:
        model: The task's feeder.
        p_load_kw: [n_loads] loads of the step [kW]; ``q_load_kvar`` likewise [kvar].
        q_load_kvar: [n_loads] reactive loads [kvar].
        pv_kw: [n_pv] PV output of the step [kW].
        q_limit_kvar: [n_pv] each inverter's reactive limit [kvar].
        prev_taps: [n_reg] tap positions of the previous step.
        prev_caps: [n_cap] capacitor states of the previous step (0 or 1).
        costs: The step's prices.

    Returns:
        Tap positions [n_reg], capacitor states [n_cap] and PV reactive power [n_pv] (kvar).
    """
    n_r, n_c = prev_taps.size, prev_caps.size
    lo = np.concatenate([np.full(n_r, -TAP_STEPS), np.zeros(n_c), -q_limit_kvar])
    hi = np.concatenate([np.full(n_r, TAP_STEPS), np.ones(n_c), q_limit_kvar])
    prev = np.concatenate([prev_taps, prev_caps, np.zeros_like(q_limit_kvar)])
    x = prev.copy()
    best: tuple[float, float, np.ndarray] | None = None
    seen: list[np.ndarray] = []
    for round_ in range(ROUNDS + 1):
        last = round_ == ROUNDS
        t, c, r, dx = sensitivity_rows(x[:n_r], x[n_r : n_r + n_c], x[n_r + n_c :], q_limit_kvar)
        if last:
            t, c, r = t[:1], c[:1], r[:1]
        rows = t.shape[0]
        reading = model.solve(
            np.broadcast_to(p_load_kw, (rows, p_load_kw.size)),
            np.broadcast_to(q_load_kvar, (rows, q_load_kvar.size)),
            t,
            c,
            np.broadcast_to(pv_kw, (rows, pv_kw.size)),
            r,
        )
        violation = float(reading.violation_pu[0]) if reading.converged[0] else np.inf
        cost = _exact_cost(costs, float(reading.losses_kw[0]), (t[0], c[0], prev_taps, prev_caps))
        if outranks((violation, cost), None if best is None else best[:2]):
            best = (violation, cost, x.copy())
        seen.append(x.copy())
        if last:
            break
        finite = np.isfinite(reading.vm_pu[0]).ravel()
        vm = reading.vm_pu.reshape(rows, -1)[:, finite]
        sens = ((vm[1:] - vm[0]) / dx[:, None]).T  # [n_bus_phase, n_x]
        loss_grad = (reading.losses_kw[1:] - reading.losses_kw[0]) / dx
        reach = (
            np.concatenate([np.maximum(lo[:n_r], x[:n_r] - TAP_REACH), lo[n_r:]]),
            np.concatenate([np.minimum(hi[:n_r], x[:n_r] + TAP_REACH), hi[n_r:]]),
        )
        new = _solve_milp(vm[0], sens, loss_grad, x, reach, prev, costs, (n_r, n_c))
        if new is None or any(np.allclose(new, s, atol=1e-6) for s in seen):
            break
        x = new
    assert best is not None
    x = best[2]
    return x[:n_r], x[n_r : n_r + n_c], x[n_r + n_c :]


def plan_steps(
    model: VoltVarFeeder,
    day: DayInputs,
    taps: np.ndarray,
    caps: np.ndarray,
    wear: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The step-by-step plan: settings of every step of ``day`` in time order
    (:func:`plan_step`).

    Args:
        model: The task's feeder.
        day: The steps' loads, PV, loss prices and reactive limits.
        taps: [n_reg] tap positions before the first planned step.
        caps: [n_cap] capacitor states before it.
        wear: ($ per tap operation, $ per capacitor switching).

    Returns:
        Taps [T, n_reg], capacitor states [T, n_cap], PV reactive power [T, n_pv] (kvar).
    """
    n_t = day.pv_kw.shape[0]
    out_t = np.zeros((n_t, taps.size))
    out_c = np.zeros((n_t, caps.size))
    out_q = np.zeros_like(day.q_limit_kvar)
    for s in range(n_t):
        costs = StepCosts(float(day.loss_per_kw[s]), *wear)
        taps, caps, q = plan_step(
            model,
            day.p_load_kw[s],
            day.q_load_kvar[s],
            day.pv_kw[s],
            day.q_limit_kvar[s],
            taps,
            caps,
            costs,
        )
        out_t[s], out_c[s], out_q[s] = taps, caps, q
    return out_t, out_c, out_q


def plan_day(
    model: VoltVarFeeder,
    day: DayInputs,
    taps: np.ndarray,
    caps: np.ndarray,
    wear: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The oracle's plan of ``day``: the step-by-step plan (:func:`plan_steps`) improved by
    whole-day MILPs (:func:`.oracle_day.improve_day`); never worse than the former under the
    exact flow.

    Args:
        model: The task's feeder.
        day: The steps' loads, PV, loss prices and reactive limits.
        taps: [n_reg] tap positions before the first planned step.
        caps: [n_cap] capacitor states before it.
        wear: ($ per tap operation, $ per capacitor switching).

    Returns:
        Taps [T, n_reg], capacitor states [T, n_cap], PV reactive power [T, n_pv] (kvar).
    """
    reference = plan_steps(model, day, taps, caps, wear)
    best, _ = improve_day(model, day, (taps, caps), wear, reference)
    return best.taps, best.caps, best.q_kvar
