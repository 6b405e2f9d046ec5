"""Day-ahead unit-commitment MILP with perfect foresight (HiGHS through ``highspy``).

For the remaining ``T`` steps of an episode and ``n`` units (binary status ``u``, start-up ``v``
and shut-down ``w`` indicators, output ``p``)::

    min  sum_t,g [ fuel_g(p) + no_load_g u + SU_g v + SD_g w ] dt-scaled
         + 10 IMBALANCE_PRICE dt sum_t (s+ + s-) + 10 OVERLOAD_PENALTY dt sum_t r_t
         + OVERLOAD_PENALTY dt sum_t,l o_tl
    s.t. v_t - w_t = u_t - u_{t-1},   v_t <= 1 - u_{t-1},   w_t <= u_{t-1}
         sum_{k=t-UT+1..t} v_k <= u_t,   sum_{k=t-DT+1..t} w_k <= 1 - u_t       (min up / down)
         Pmin u_t <= p_t <= Pmax u_t,   p_t <= Pmax u_t - (Pmax - SUmax) v_t     (start-up output)
         p_t - p_{t-1} <= RU u_{t-1} + SUmax v_t,   p_{t-1} - p_t <= RD u_t + Pmax w_t (ramps)
         sum_g p_t + s+_t - s-_t = load_t                                         (balance)
         sum_g Pmax u_t + r_t >= (1 + margin) load_t                              (reserve)
         |PTDF_l (C_g p_t - d_t)| <= F_l + o_tl                                   (lines)

with the first step's ``u_{t-1}``, ``p_{t-1}`` and the minimum times still to serve taken from
the env's state, exactly the rules the env applies (:mod:`powerzoo.devices.thermal_unit`). The
convex quadratic fuel cost ``c2 p^2 + c1 p`` is replaced by its secant on ``PWL_SEGMENTS`` equal
segments of ``[0, Pmax]`` (an over-estimate, exact at the breakpoints; the replay in the env
scores the true cost). Imbalance and reserve shortfall are soft at 10x their price (last
resorts), line overloads at ``OVERLOAD_PENALTY`` (1,000 $/MWh, as the dispatch oracles).

Lines. With at most ``EAGER_LINE_PAIRS`` (step, branch) limits (case5: 2 x 48) the MILP holds
the whole network in bus-angle form (nodal balance at every bus, the slack bus takes the
imbalance) and its schedule is the plan. On case118 (186 x 48 limits) that MILP does not solve
in a minute, so the network enters in rounds:

1. MILP with the system balance and the PTDF limits of the (step, branch) pairs found so far
   (none at first), started from the last round's schedule (a MIP start);
2. LP: the network dispatch of that commitment (status fixed, every line, bus-angle form);
   every branch it overloads joins the MILP at each step its flow is above 90 % of its rating,
   and step 1 is repeated (at most ``MAX_LINE_ROUNDS`` rounds, while time is left);
3. repair, from the round with the best LP objective: at the steps the LP still overloads a
   branch, the cheapest unit (priority list) that relieves it (PTDF sensitivity below -0.05),
   may start and whose Pmin fits under the load is switched on (with the on runs and off gaps
   around it stretched to the minimum up / down times), and the LP is solved again; a trial
   that does not lower the LP objective is retried on half as many steps.

The plan is the repaired commitment with its LP dispatch. The first step of an episode has no
ramp limit (as in the env). HiGHS searches with one MIP worker and stops at a relative MIP gap of
``MIP_REL_GAP`` (0.5 %); the whole plan has a wall-clock budget of ``TIME_LIMIT_S`` (55 s,
``REPAIR_RESERVE_S`` of it kept for the repair), so on case118 the number of rounds (and the
plan) depends on the machine's speed and load: the oracle is reproducible on case5, where the
single MILP solves to the gap in about a second, but not bit-for-bit on case118.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from powerzoo.physics.dc_power_flow import branch_susceptance_pu
from powerzoo.tasks.unit_commitment.spec import IMBALANCE_PRICE, OVERLOAD_PENALTY, RESERVE_MARGIN

__all__ = ["UCPlan", "solve_uc_day", "MIP_REL_GAP", "TIME_LIMIT_S", "PWL_SEGMENTS"]

MIP_REL_GAP = 0.005
TIME_LIMIT_S = 55.0  # wall-clock limit of one MILP solve
EAGER_LINE_PAIRS = 2000  # every line limit inside the MILP up to this many (step, branch) pairs
MAX_LINE_ROUNDS = 3
MIN_ROUND_S = 18.0  # a new MILP round starts only with this much of the time limit left
REPAIR_RESERVE_S = 8.0  # time kept for the LP dispatch and the commitment repair
_ADD_ABOVE = 0.9  # limits added: each step an overloaded branch's flow is above 90 % of its rating
_OVERLOAD_TOL_MW = 1e-3
MAX_REPAIRS = 60
MIN_REPAIR_S = 3.0  # a repair step starts only with this much of the time limit left
_RELIEF = 0.05  # MW of relief per MW injected for a unit to count as relieving a branch
PWL_SEGMENTS = 4
DISP = False
_SLACK_FACTOR = 10.0  # imbalance and reserve shortfall are priced 10x a line overload: last resorts


@dataclasses.dataclass(frozen=True)
class UCPlan:
    """Schedule of the remaining steps: output [T, n] MW and status [T, n]."""

    p_mw: np.ndarray
    on: np.ndarray
    objective: float  # MILP objective ($, with the PWL fuel cost)
    status: str
    seconds: float


class _Model:
    """Columns and sparse rows of one MILP, collected as triplets."""

    def __init__(self) -> None:
        self.n_cols = 0
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []
        self.cost: list[np.ndarray] = []
        self.integer: list[np.ndarray] = []
        self.n_rows = 0
        self.r: list[np.ndarray] = []
        self.c: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.row_lo: list[np.ndarray] = []
        self.row_hi: list[np.ndarray] = []

    def cols(
        self,
        shape: tuple[int, ...],
        lo: float | np.ndarray,
        hi: float | np.ndarray,
        cost: float | np.ndarray = 0.0,
        integer: bool = False,
    ) -> np.ndarray:
        size = int(np.prod(shape))
        idx = np.arange(self.n_cols, self.n_cols + size).reshape(shape)
        self.n_cols += size
        self.lo.append(np.broadcast_to(np.asarray(lo, float), shape).ravel())
        self.hi.append(np.broadcast_to(np.asarray(hi, float), shape).ravel())
        self.cost.append(np.broadcast_to(np.asarray(cost, float), shape).ravel())
        self.integer.append(np.full(size, int(integer)))
        return idx

    def rows(
        self,
        terms: list[tuple[np.ndarray, float | np.ndarray]],
        lo: float | np.ndarray,
        hi: float | np.ndarray,
        shape: tuple[int, ...],
    ) -> np.ndarray:
        """Rows ``lo <= sum coef * x[cols] <= hi``, one per entry of ``shape``; each term's
        ``cols`` broadcasts to ``shape`` (or has an extra trailing axis summed over)."""
        size = int(np.prod(shape))
        ids = np.arange(self.n_rows, self.n_rows + size).reshape(shape)
        for cols, coef in terms:
            cols = np.asarray(cols)
            extra = cols.shape[len(shape) :]
            rows = np.broadcast_to(ids.reshape(shape + (1,) * len(extra)), cols.shape)
            self.r.append(rows.ravel())
            self.c.append(cols.ravel())
            self.v.append(np.broadcast_to(np.asarray(coef, float), cols.shape).ravel())
        self.row_lo.append(np.broadcast_to(np.asarray(lo, float), shape).ravel())
        self.row_hi.append(np.broadcast_to(np.asarray(hi, float), shape).ravel())
        self.n_rows += size
        return ids

    def triplets(self, rows: np.ndarray, cols: np.ndarray, coef: float | np.ndarray) -> None:
        """Add ``coef`` at (``rows``, ``cols``) (same shapes; ``coef`` broadcasts)."""
        self.r.append(np.asarray(rows).ravel())
        self.c.append(np.asarray(cols).ravel())
        self.v.append(np.broadcast_to(np.asarray(coef, float), np.shape(cols)).ravel())

    def solve(
        self, time_limit_s: float, start: np.ndarray | None = None
    ) -> tuple[np.ndarray | None, float, str]:
        """Solve on HiGHS (one MIP worker, relative gap :data:`MIP_REL_GAP`); ``start``: a MIP start
        (values of the first ``len(start)`` columns, the rest 0). Returns ``(x, objective,
        status)``."""
        import highspy

        h = highspy.Highs()
        h.setOptionValue("output_flag", DISP)
        # no "threads" option: HiGHS >= 1.16 refuses to run ("Not Set") when it differs from the
        # process's thread scheduler, which the first HiGHS solve in the process fixes; the MIP
        # search runs on one worker anyway
        h.setOptionValue("mip_rel_gap", MIP_REL_GAP)
        h.setOptionValue("time_limit", float(max(time_limit_s, 1.0)))
        cost = np.concatenate(self.cost)
        h.addCols(
            self.n_cols,
            cost,
            np.concatenate(self.lo),
            np.concatenate(self.hi),
            0,
            np.empty(0, np.int32),
            np.empty(0, np.int32),
            np.empty(0),
        )
        integer = np.flatnonzero(np.concatenate(self.integer)).astype(np.int32)
        if integer.size:
            h.changeColsIntegrality(
                integer.size, integer, np.full(integer.size, highspy.HighsVarType.kInteger)
            )
        from scipy.sparse import csr_matrix  # sums duplicate entries

        a = csr_matrix(
            (np.concatenate(self.v), (np.concatenate(self.r), np.concatenate(self.c))),
            shape=(self.n_rows, self.n_cols),
        )
        a.eliminate_zeros()
        a.sort_indices()
        h.addRows(
            self.n_rows,
            np.concatenate(self.row_lo),
            np.concatenate(self.row_hi),
            a.nnz,
            a.indptr[:-1].astype(np.int32),
            a.indices.astype(np.int32),
            a.data,
        )
        if start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = np.concatenate([start, np.zeros(self.n_cols - start.size)]).tolist()
            h.setSolution(sol)
        h.run()
        status = h.modelStatusToString(h.getModelStatus())
        solution = h.getSolution()
        if not solution.value_valid:
            return None, np.nan, status
        return np.asarray(solution.col_value), float(h.getInfo().objective_function_value), status


def _window_terms(cols: np.ndarray, min_steps: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Terms ``sum_{k=t-m+1..t} cols[k, g]`` for every (t, g), as one term per lag (coef 0 where out
    of window)."""
    t_n = cols.shape[0]
    terms = []
    for lag in range(int(min_steps.max(initial=1))):
        src = np.clip(np.arange(t_n) - lag, 0, None)
        valid = ((np.arange(t_n) - lag) >= 0)[:, None] & (lag < min_steps)[None, :]
        terms.append((cols[src], valid.astype(float)))
    return terms


def _build(
    task: Any,
    demand: np.ndarray,
    on0: np.ndarray,
    time0: np.ndarray,
    p0: np.ndarray,
    network: bool,
    fixed_on: np.ndarray | None,
    free_first: bool,
) -> tuple[_Model, np.ndarray, np.ndarray]:
    """The model (module docstring) and its ``u``, ``p`` column indices [T, n]; ``network``: with
    the
    nodal balance and line limits (else one system balance); ``fixed_on`` [T, n]: status fixed (an
    LP)."""
    f, dt = task.fleet, task.spec.dt_h
    t_n, n = demand.size, f.n_units
    load = demand * task.load_scale
    steps = np.arange(t_n)[:, None]
    keep_on = on0 & (steps < f.min_up_steps - time0)  # minimum times still to serve
    keep_off = ~on0 & (steps < f.min_down_steps - time0)

    m = _Model()
    u_lo, u_hi = keep_on.astype(float), (~keep_off).astype(float)
    if fixed_on is not None:
        u_lo = u_hi = fixed_on.astype(float)
    u = m.cols((t_n, n), u_lo, u_hi, f.no_load_step, integer=fixed_on is None)
    v = m.cols((t_n, n), 0.0, 1.0, f.startup_cost)
    w = m.cols((t_n, n), 0.0, 1.0, f.shutdown_cost)
    p = m.cols((t_n, n), 0.0, f.pmax_mw)
    k_n = PWL_SEGMENTS if np.any(f.c2_per_mw2h > 0) else 1
    seg = f.pmax_mw / k_n
    mid = (np.arange(k_n)[:, None] + 0.5) * seg  # segment midpoints [K, n]
    slope = (f.c1_per_mwh + 2.0 * f.c2_per_mw2h * mid) * dt  # secant slope of each segment
    delta = m.cols(
        (t_n, n, k_n),
        0.0,
        np.broadcast_to(seg[None, :, None], (t_n, n, k_n)),
        np.broadcast_to(slope.T[None], (t_n, n, k_n)),
    )
    s_up = m.cols((t_n,), 0.0, np.inf, _SLACK_FACTOR * IMBALANCE_PRICE * dt)
    s_dn = m.cols((t_n,), 0.0, np.inf, _SLACK_FACTOR * IMBALANCE_PRICE * dt)
    r = m.cols((t_n,), 0.0, np.inf, _SLACK_FACTOR * OVERLOAD_PENALTY * dt)

    shape = (t_n, n)
    m.rows([(p, 1.0), (delta, -1.0)], 0.0, 0.0, shape)
    # transitions
    m.rows(
        [(v[:1], 1.0), (w[:1], -1.0), (u[:1], -1.0)],
        -on0[None].astype(float),
        -on0[None].astype(float),
        (1, n),
    )
    if t_n > 1:
        m.rows([(v[1:], 1.0), (w[1:], -1.0), (u[1:], -1.0), (u[:-1], 1.0)], 0.0, 0.0, (t_n - 1, n))
        m.rows([(v[1:], 1.0), (u[:-1], 1.0)], -np.inf, 1.0, (t_n - 1, n))
        m.rows([(w[1:], 1.0), (u[:-1], -1.0)], -np.inf, 0.0, (t_n - 1, n))
    m.rows([(v[:1], 1.0)], -np.inf, 1.0 - on0[None], (1, n))
    m.rows([(w[:1], 1.0)], -np.inf, on0[None].astype(float), (1, n))
    # minimum up / down times
    m.rows(_window_terms(v, f.min_up_steps) + [(u, -1.0)], -np.inf, 0.0, shape)
    m.rows(_window_terms(w, f.min_down_steps) + [(u, 1.0)], -np.inf, 1.0, shape)
    # output bounds and ramps
    m.rows([(p, 1.0), (u, -f.pmin_mw)], 0.0, np.inf, shape)
    m.rows([(p, 1.0), (u, -f.pmax_mw)], -np.inf, 0.0, shape)
    # ramp rows only for the units they can bind (a peaking unit ramps its whole range in a step)
    ru, rd, su, pmax = f.ramp_up_step_mw, f.ramp_down_step_mw, f.startup_max_mw, f.pmax_mw
    g = np.flatnonzero(su < pmax)
    if g.size:
        m.rows(
            [(p[:, g], 1.0), (u[:, g], -pmax[g]), (v[:, g], pmax[g] - su[g])],
            -np.inf,
            0.0,
            (t_n, g.size),
        )
    g = np.flatnonzero((ru < pmax) | (su < pmax))
    if g.size:
        if not free_first:
            m.rows(
                [(p[:1, g], 1.0), (v[:1, g], -su[g])],
                -np.inf,
                (p0 + ru * on0)[None, g],
                (1, g.size),
            )
        m.rows(
            [(p[1:, g], 1.0), (p[:-1, g], -1.0), (u[:-1, g], -ru[g]), (v[1:, g], -su[g])],
            -np.inf,
            0.0,
            (t_n - 1, g.size),
        )
    g = np.flatnonzero(rd < pmax)
    if g.size:  # p_{t-1} - p_t <= RD u_t + Pmax w_t
        if not free_first:
            m.rows(
                [(p[:1, g], -1.0), (u[:1, g], -rd[g]), (w[:1, g], -pmax[g])],
                -np.inf,
                -p0[None, g],
                (1, g.size),
            )
        m.rows(
            [(p[:-1, g], 1.0), (p[1:, g], -1.0), (u[1:, g], -rd[g]), (w[1:, g], -pmax[g])],
            -np.inf,
            0.0,
            (t_n - 1, g.size),
        )
    # reserve
    m.rows(
        [(u, f.pmax_mw), (r[:, None], 1.0)],
        ((1.0 + RESERVE_MARGIN) * load)[:, None],
        np.inf,
        (t_n, 1),
    )
    if not network:
        m.rows(
            [(p, 1.0), (s_up[:, None], 1.0), (s_dn[:, None], -1.0)],
            load[:, None],
            load[:, None],
            (t_n, 1),
        )
        return m, u, p
    # network (bus-angle form): nodal balance at every bus, the slack bus takes the imbalance
    case = task.case
    n_bus = case.n_bus
    angle_lo = np.full((t_n, n_bus), -np.inf)
    angle_hi = np.full((t_n, n_bus), np.inf)
    angle_lo[:, case.slack_bus] = angle_hi[:, case.slack_bus] = 0.0
    theta = m.cols(
        (t_n, n_bus), angle_lo, angle_hi
    )  # MW-scaled angles: flow = b (theta_f - theta_t)
    b = branch_susceptance_pu(case)
    fb, tb = case.branch_from_bus, case.branch_to_bus
    live = np.flatnonzero(b != 0.0)
    bus_rows = m.rows(
        [],
        demand[:, None] * task.bus_load_scale,
        demand[:, None] * task.bus_load_scale,
        (t_n, n_bus),
    )
    steps = np.arange(t_n)[:, None]
    m.triplets(bus_rows[:, case.gen_bus], p, 1.0)
    m.triplets(bus_rows[:, case.slack_bus], s_up, 1.0)
    m.triplets(bus_rows[:, case.slack_bus], s_dn, -1.0)
    for i_bus, j_bus, sign in ((fb, fb, -1.0), (fb, tb, 1.0), (tb, tb, -1.0), (tb, fb, 1.0)):
        # net injection at bus i = sum of flows leaving it: -(b theta_i - b theta_j) on the row of i
        m.triplets(bus_rows[steps, i_bus[live]], theta[steps, j_bus[live]], sign * b[live])
    lim = task.limited
    o = m.cols((t_n, lim.size), 0.0, np.inf, OVERLOAD_PENALTY * dt)
    flow_terms = [(theta[:, fb[lim]], b[lim]), (theta[:, tb[lim]], -b[lim])]
    m.rows(flow_terms + [(o, -1.0)], -np.inf, task.rating, (t_n, lim.size))
    m.rows(flow_terms + [(o, 1.0)], -task.rating, np.inf, (t_n, lim.size))

    return m, u, p


def _ptdf_limits(
    m: _Model,
    p: np.ndarray,
    pairs: np.ndarray,
    sens: np.ndarray,
    rating: np.ndarray,
    load_flow: np.ndarray,
    dt_h: float,
) -> np.ndarray:
    """Soft limits ``|PTDF_l (C_g p_t - d_t)| <= F_l + o`` of the (step, branch) ``pairs`` [T,
    n_lim];
    returns the overload columns ``o`` (in ``pairs``' row-major order)."""
    ts, ls = np.nonzero(pairs)
    o = m.cols((ts.size,), 0.0, np.inf, OVERLOAD_PENALTY * dt_h)
    if ts.size:
        coef = sens[:, ls].T  # [k, n]
        coef = np.where(np.abs(coef) > 1e-6, coef, 0.0)
        m.rows(
            [(p[ts], coef), (o[:, None], -1.0)],
            -np.inf,
            (rating[ls] + load_flow[ts, ls])[:, None],
            (ts.size, 1),
        )
        m.rows(
            [(p[ts], coef), (o[:, None], 1.0)],
            (load_flow[ts, ls] - rating[ls])[:, None],
            np.inf,
            (ts.size, 1),
        )
    return o


def _network_dispatch(
    task: Any,
    demand: np.ndarray,
    on0: np.ndarray,
    time0: np.ndarray,
    p0: np.ndarray,
    on: np.ndarray,
    free_first: bool,
) -> tuple[np.ndarray, float, str]:
    """Network dispatch LP of commitment ``on`` [T, n]: ``(p [T, n], objective, status)``."""
    m, _, p = _build(task, demand, on0, time0, p0, network=True, fixed_on=on, free_first=free_first)
    x, objective, status = m.solve(TIME_LIMIT_S)
    if x is None:
        raise RuntimeError(f"{task.spec.task_id} oracle: HiGHS found no dispatch ({status})")
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
    task: Any,
    demand: np.ndarray,
    on0: np.ndarray,
    time0: np.ndarray,
    p0: np.ndarray,
    on: np.ndarray,
    p_mw: np.ndarray,
    objective: float,
    status: str,
    started: float,
    free_first: bool,
) -> tuple[np.ndarray, np.ndarray, float, str]:
    """Commitment repair (module docstring): commit relieving units where the network dispatch
    overloads a branch while that lowers the LP objective; returns ``(on, p, objective,
    status)``."""
    f = task.fleet
    sens, rating = task.gen_flow, task.rating
    load_flow = demand[:, None] * task.load_flow_pu
    load = demand * task.load_scale
    banned = ~on0 & (
        np.arange(demand.size)[:, None] < f.min_down_steps - time0
    )  # still off at the start
    batch = demand.size  # overloaded steps treated per trial; halved when a trial does not pay
    for _ in range(MAX_REPAIRS):
        if batch == 0 or time.perf_counter() - started > TIME_LIMIT_S - MIN_REPAIR_S:
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
        p_new, obj_new, status_new = _network_dispatch(
            task, demand, on0, time0, p0, trial, free_first
        )
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
    eager = task.limited.size * demand.size <= EAGER_LINE_PAIRS
    sens, rating = task.gen_flow, task.rating  # [n, n_lim] flow per MW of each unit, [n_lim]
    load_flow = demand[:, None] * task.load_flow_pu  # [T, n_lim]
    pairs = np.zeros((demand.size, rating.size), dtype=bool)  # (step, branch) limits in the MILP
    start = None
    rounds = 0
    best: tuple[np.ndarray, np.ndarray, float, str] | None = None
    while True:
        rounds += 1
        m, u, p = _build(
            task, demand, on0, time0, p0, network=eager, fixed_on=None, free_first=free_first
        )
        o_cols = _ptdf_limits(m, p, pairs, sens, rating, load_flow, task.spec.dt_h)
        if start is not None:  # the last round's schedule, with the slacks of the new limits
            start_p = start[p]
            over = np.abs(start_p @ sens - load_flow) - rating
            start = np.concatenate([start, np.zeros(m.n_cols - start.size)])
            start[o_cols] = np.maximum(over[pairs], 0.0)
        left = TIME_LIMIT_S - (time.perf_counter() - started) - (0.0 if eager else REPAIR_RESERVE_S)
        x, objective, status = m.solve(left, start)
        if x is None:
            raise RuntimeError(f"{task.spec.task_id} oracle: HiGHS found no schedule ({status})")
        on = x[u] > 0.5
        if eager:
            break
        # the network dispatch of that commitment (an LP); the best round so far is kept
        p_mw, obj_lp, status_lp = _network_dispatch(task, demand, on0, time0, p0, on, free_first)
        if best is None or obj_lp < best[2]:
            best = (on, p_mw, obj_lp, status_lp)
        flow = np.abs(p_mw @ sens - load_flow)
        over = flow > rating + _OVERLOAD_TOL_MW
        new = ((flow > _ADD_ABOVE * rating) & over.any(axis=0)) & ~pairs
        if (
            not new.any()
            or rounds >= MAX_LINE_ROUNDS
            or time.perf_counter() - started > TIME_LIMIT_S - MIN_ROUND_S
        ):
            break
        pairs |= new
        start = x
    f = task.fleet
    if eager:
        p_mw = x[p]
    else:
        on, p_mw, objective, status = _repair(
            task, demand, on0, time0, p0, *best, started, free_first
        )
    p_mw = np.clip(p_mw, f.pmin_mw, f.pmax_mw) * on
    return UCPlan(p_mw, on, objective, status, time.perf_counter() - started)
