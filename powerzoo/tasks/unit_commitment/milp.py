"""The day-ahead unit-commitment MILP of the oracle (:mod:`.oracle`), as sparse numpy blocks.

For the remaining ``T`` steps of an episode and ``n`` units (binary status ``u``, start-up ``v``
and shut-down ``w`` indicators, output ``p``)::

    min  sum_t,g [ fuel_g(p) + no_load_g u + SUC_g v + SDC_g w ] dt-scaled
         + 100 IMBALANCE_PRICE dt sum_t (s+ + s-) + 100 OVERLOAD_PENALTY dt sum_t q_t
         + 10 OVERLOAD_PENALTY dt sum_t,l o_tl
    s.t. v_t - w_t = u_t - u_{t-1},   v_t <= 1 - u_{t-1},   w_t <= u_{t-1}
         sum_{k=t-UT+1..t} v_k <= u_t,   sum_{k=t-DT+1..t} w_k <= 1 - u_t       (min up / down)
         Pmin u_t <= p_t <= Pmax u_t,   p_t <= Pmax u_t - (Pmax - SUmax) v_t     (start-up output)
         p_t - p_{t-1} <= RU u_{t-1} + SUmax v_t                                  (ramp up)
         p_{t-1} - p_t <= RD u_t + SD w_t                   (ramp down and shut-down ramp)
         sum_g p_t + s+_t - s-_t = load_t                                         (balance)
         0 <= r_gt <= R10_g u_t,   r_gt <= Pmax u_t - p_t          (10-minute spinning reserve)
         sum_g r_t + q_t >= margin load_t                                         (reserve)
         sum_g r_t - r_kt + q_t >= p_kt  for every unit k             (N-1; tso only)
         |PTDF_l (C_g p_t - d_t)| <= F_l + o_tl                                   (lines)

with the first step's ``u_{t-1}``, ``p_{t-1}`` and the minimum times still to serve taken from the
env's state, exactly the rules the env applies (:mod:`powerzoo.devices.thermal_unit`): ``SD`` is the
shut-down ramp limit ``shutdown_max_mw`` (with ``w_t = 1`` the row reads ``p_{t-1} <= SD``; a unit
on above it before the first step stays on in the first step), ``R10`` the 10-minute response
``reserve_ramp_mw`` and ``q`` the reserve shortfall (the env's ``reserve_shortfall`` cost). The N-1
row asks the reserve of the units other than ``k`` to cover ``p_k``: the tripped unit's own reserve
``r_k`` is lost with it (an off unit's row is void, ``p_k = r_k = 0``), exactly the env's row (``r``
here is at most the env's deliverable reserve, so a plan that holds the row holds it in the env).
The convex quadratic fuel cost ``c2 p^2 + c1 p`` is replaced by its secant on ``PWL_SEGMENTS`` equal
segments of ``[0, Pmax]`` (an over-estimate, exact at the breakpoints; the replay in the env scores
the true cost). The constraints the env counts as costs are soft, priced far above any fuel cost so
that the plan keeps within the tasks' budgets (1 MWh a day of each) wherever a commitment can: line
overloads at ``LINE_SLACK_FACTOR`` (100) x ``OVERLOAD_PENALTY`` (100,000 $/MWh), imbalance and
reserve shortfall at ``SLACK_FACTOR`` (100) x 1,000 $/MWh, last resorts. (On the earlier exogenous
data and its 77 test days, at 1,000 $/MWh for lines and 10,000 $/MWh for imbalance the ``marl_uc``
plan overloaded a line or left an imbalance above the budget on 17 days, where a start-up would have
cost more than the penalty. On the 65 test days of the previous data, before the current load and
weather models, lines at 10,000 $/MWh left 1.4 and 1.7 MVAh of overload on 2 days; at 100,000 $/MWh
the plan was within every budget on all 65, for 0.2 % more cost, as it is on the current data.)

:func:`build_model` holds the network either in bus-angle form (nodal balance at every bus, the
slack bus takes the imbalance) or as one system balance, to which :func:`add_ptdf_limits` adds
the PTDF limits of chosen (step, branch) pairs. :meth:`MilpModel.solve` runs HiGHS with one MIP
worker and a relative MIP gap of ``MIP_REL_GAP`` (0.5 %).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.physics.dc_power_flow import branch_susceptance_pu
from powerzoo.physics.highs import new_highs
from powerzoo.tasks.unit_commitment.spec import IMBALANCE_PRICE, OVERLOAD_PENALTY, RESERVE_MARGIN

__all__ = [
    "MIP_REL_GAP",
    "PWL_SEGMENTS",
    "MilpModel",
    "add_ptdf_limits",
    "build_model",
]

MIP_REL_GAP = 0.005
PWL_SEGMENTS = 4
DISP = False  # HiGHS's log on the console
SLACK_FACTOR = 100.0  # imbalance and reserve shortfall at 100x 1,000 $/MWh: last resorts
LINE_SLACK_FACTOR = 100.0  # line overloads at 100x OVERLOAD_PENALTY


class MilpModel:
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

        h = new_highs(log=DISP)
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


def window_terms(cols: np.ndarray, min_steps: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Terms ``sum_{k=t-m+1..t} cols[k, g]`` for every (t, g), as one term per lag (coef 0 where out
    of window)."""
    t_n = cols.shape[0]
    terms = []
    for lag in range(int(min_steps.max(initial=1))):
        src = np.clip(np.arange(t_n) - lag, 0, None)
        valid = ((np.arange(t_n) - lag) >= 0)[:, None] & (lag < min_steps)[None, :]
        terms.append((cols[src], valid.astype(float)))
    return terms


def build_model(
    task: Any,
    demand: np.ndarray,
    on0: np.ndarray,
    time0: np.ndarray,
    p0: np.ndarray,
    network: bool,
    fixed_on: np.ndarray | None,
    free_first: bool,
) -> tuple[MilpModel, np.ndarray, np.ndarray]:
    """The model (module docstring) and its ``u``, ``p`` column indices [T, n]; ``network``: with
    the
    nodal balance and line limits (else one system balance); ``fixed_on`` [T, n]: status fixed (an
    LP)."""
    f, dt = task.fleet, task.spec.dt_h
    t_n, n = demand.size, f.n_units
    load = demand * task.load_scale
    steps = np.arange(t_n)[:, None]
    keep_on = on0 & (steps < f.min_up_steps - time0)  # minimum times still to serve
    # above its shut-down ramp limit before the first step: may not stop in the first step
    keep_on[0] |= f.shutdown_blocked(on0, p0)
    keep_off = ~on0 & (steps < f.min_down_steps - time0)

    m = MilpModel()
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
    s_up = m.cols((t_n,), 0.0, np.inf, SLACK_FACTOR * IMBALANCE_PRICE * dt)
    s_dn = m.cols((t_n,), 0.0, np.inf, SLACK_FACTOR * IMBALANCE_PRICE * dt)
    q = m.cols((t_n,), 0.0, np.inf, SLACK_FACTOR * OVERLOAD_PENALTY * dt)  # reserve shortfall
    r = m.cols((t_n, n), 0.0, f.reserve_ramp_mw)  # spinning reserve of each unit

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
    m.rows(window_terms(v, f.min_up_steps) + [(u, -1.0)], -np.inf, 0.0, shape)
    m.rows(window_terms(w, f.min_down_steps) + [(u, 1.0)], -np.inf, 1.0, shape)
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
    sd = f.shutdown_max_mw
    g = np.flatnonzero(rd < pmax)  # (SD < Pmax only where RD < Pmax)
    if g.size:  # p_{t-1} - p_t <= RD u_t + SD w_t
        if not free_first:
            m.rows(
                [(p[:1, g], -1.0), (u[:1, g], -rd[g]), (w[:1, g], -sd[g])],
                -np.inf,
                -p0[None, g],
                (1, g.size),
            )
        m.rows(
            [(p[:-1, g], 1.0), (p[1:, g], -1.0), (u[1:, g], -rd[g]), (w[1:, g], -sd[g])],
            -np.inf,
            0.0,
            (t_n - 1, g.size),
        )
    # spinning reserve: r <= R10 u, r <= Pmax u - p; sum r + q >= margin x load (and N-1 below)
    m.rows([(r, 1.0), (u, -f.reserve_ramp_mw)], -np.inf, 0.0, shape)
    m.rows([(r, 1.0), (p, 1.0), (u, -f.pmax_mw)], -np.inf, 0.0, shape)
    m.rows([(r, 1.0), (q[:, None], 1.0)], (RESERVE_MARGIN * load)[:, None], np.inf, (t_n, 1))
    if task.contingency_reserve:
        # N-1: sum_g r_g - r_k + q >= p_k for every unit k (an off unit has p_k = r_k = 0, so the
        # row is linear in the commitment through r_k <= R10 u_k, r_k <= Pmax u_k - p_k). Only
        # units with Pmax above the smallest margin x load can bind: p_k + r_k <= Pmax_k <= margin
        # x load <= sum_g r_g + q by the margin row.
        k = np.flatnonzero(f.pmax_mw > RESERVE_MARGIN * load.min())
        total = np.broadcast_to(r[:, None, :], (t_n, k.size, n))
        short = np.broadcast_to(q[:, None], (t_n, k.size))
        m.rows(
            [(total, 1.0), (r[:, k], -1.0), (short, 1.0), (p[:, k], -1.0)],
            0.0,
            np.inf,
            (t_n, k.size),
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
    o = m.cols((t_n, lim.size), 0.0, np.inf, LINE_SLACK_FACTOR * OVERLOAD_PENALTY * dt)
    flow_terms = [(theta[:, fb[lim]], b[lim]), (theta[:, tb[lim]], -b[lim])]
    m.rows(flow_terms + [(o, -1.0)], -np.inf, task.rating, (t_n, lim.size))
    m.rows(flow_terms + [(o, 1.0)], -task.rating, np.inf, (t_n, lim.size))

    return m, u, p


def add_ptdf_limits(
    m: MilpModel,
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
    o = m.cols((ts.size,), 0.0, np.inf, LINE_SLACK_FACTOR * OVERLOAD_PENALTY * dt_h)
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
