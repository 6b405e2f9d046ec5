"""DC-OPF over time: a dispatch coupled by ramps and energy budgets, step by step or as a whole.

Both solvers dispatch a sequence of ``T`` steps of ``dt_h`` hours with soft line limits priced at
``soft_line_penalty`` ($/MWh), each unit within its ``[Pmin, Pmax]`` and its ramp range from the
step before, ``[max(Pmin, p_prev - ramp_down), min(Pmax, p_prev + ramp_up)]`` (the first step
from ``initial_p_mw``), some units with an energy budget over the ``T`` steps:

* :func:`solve_ramped_sequence`: the **myopic** optimum. Each step is a DC-OPF
  (:func:`~powerzoo.physics.dc_opf.solve_dc_opf`, exact quadratic costs) within the step's ramp
  range from the previous step's solution; a unit with an energy budget gets at most the energy
  left over ``dt_h``. No look-ahead: a free unit with an energy budget runs flat out until the
  budget is spent.
* :func:`solve_multi_period_dc_opf`: the **whole-horizon** optimum. One LP over every step
  (HiGHS)::

      min  sum_t dt (sum_g C_g(p_gt) + penalty sum_l s_lt)
      s.t. sum_g p_gt = sum_i d_it                                  (every step)
           -ramp_down_g <= p_gt - p_g,t-1 <= ramp_up_g               (p_g,-1 = the start)
           sum_t p_gt dt <= E_g                                      (units with a budget)
           |PTDF_l (C_g p_t - d_t)| <= F_l + s_lt,  s_lt >= 0
           Pmin_g <= p_gt <= Pmax_g

  with each quadratic cost ``C_g`` as ``segments`` linear pieces (its secants); HiGHS's QP
  solver (active set) takes minutes on a week of case118, the LP a second. Then each step is
  re-solved as the exact QP of the myopic solver, the units with an energy budget held at the
  LP's schedule: the week's plan with exact step costs (the pieces alone leave about 0.1 % of
  the cost on the table with 8 pieces).

  The LP's flow rows are added lazily, as market-clearing engines do: it is solved with the flow
  rows of the (step, branch) pairs given (``monitored``), the flows of the solution are
  computed for every branch and step, the pairs above their rating (and the pairs of the same
  branch loaded above 95 % of it, to save rounds) join the monitored set, and the LP is solved
  again until no pair is above its rating. A pair left out is within its limit at the optimum,
  so the optimum is the full problem's.

Both keep the balance exact (the reference bus supplies nothing) and return the dispatch
``[T, n_gen]`` in MW. Both run at any network size: flows come from
:func:`~powerzoo.physics.dc_power_flow.dc_power_flow` (sparse solves above 1,000 buses) and the
LP's flow rows from :func:`~powerzoo.physics.dc_power_flow.ptdf_rows` of the watched branches
only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from powerzoo.physics.dc_opf import dispatch_cost, solve_dc_opf
from powerzoo.physics.dc_power_flow import (
    bus_injection_mw,
    dc_power_flow,
    phase_shift_flow_mw,
    ptdf_rows,
)
from powerzoo.physics.highs import new_highs
from powerzoo.physics.network import NetworkCase

__all__ = ["MultiPeriodResult", "solve_multi_period_dc_opf", "solve_ramped_sequence"]

_LAZY_TOL_MW = 1e-4  # a pair this far above its rating joins the monitored set
_NEAR_SHARE = 0.95  # pairs of a violated branch loaded above this share join with it
_MAX_ROUNDS = 30
SEGMENTS = 8  # linear pieces of each unit's quadratic cost in the whole-horizon LP


@dataclass(frozen=True)
class MultiPeriodResult:
    """A dispatch over ``T`` steps (arrays lead with the step axis)."""

    gen_p_mw: np.ndarray  # [T, n_gen]
    branch_flow_mw: np.ndarray  # [T, n_branch]
    overload_mw: np.ndarray  # [T] flow above the ratings, summed over the branches
    cost: float  # $ over the horizon: generation (with c0) + overload at the penalty price
    status: str  # "optimal", or HiGHS's verdict (the dispatch is then NaN from that step on)
    rounds: int  # lazy flow-row rounds of the LP (0 for the sequence)


def _check(case: NetworkCase, loads: np.ndarray, p0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    loads = np.atleast_2d(np.asarray(loads, dtype=float))
    if loads.shape[1] != case.n_bus:
        raise ValueError(f"load_mw must be [T, n_bus] with n_bus={case.n_bus}, got {loads.shape}")
    p0 = np.asarray(p0, dtype=float)
    if p0.shape != (case.n_gen,):
        raise ValueError(f"initial_p_mw must be [n_gen], got {p0.shape}")
    return loads, p0


def _ratings(case: NetworkCase) -> np.ndarray:
    """Flow limits [n_branch] MW (inf: unlimited or out of service)."""
    rate = np.where(np.isfinite(case.branch_rate_a_mw), case.branch_rate_a_mw, np.inf)
    return np.where(case.branch_in_service, rate, np.inf)


def _flows(case: NetworkCase, p: np.ndarray, loads: np.ndarray) -> np.ndarray:
    """Branch flows [T, n_branch] MW of dispatch ``p`` [T, n_gen] under bus loads [T, n_bus]
    (:func:`~powerzoo.physics.dc_power_flow.dc_power_flow`: dense shift factors up to 1,000
    buses, sparse solves above)."""
    return dc_power_flow(case, bus_injection_mw(case, np.nan_to_num(p), loads))


def _result(
    case: NetworkCase,
    p: np.ndarray,
    loads: np.ndarray,
    dt_h: float,
    penalty: float,
    status: str,
    rounds: int,
) -> MultiPeriodResult:
    flow = _flows(case, p, loads)
    over = np.maximum(np.abs(flow) - _ratings(case), 0.0).sum(axis=1)
    cost = float((dispatch_cost(case, p).sum() + penalty * over.sum()) * dt_h)
    return MultiPeriodResult(p, flow, over, cost, status, rounds)


def solve_ramped_sequence(
    case: NetworkCase,
    load_mw: np.ndarray,
    initial_p_mw: np.ndarray,
    ramp_up_mw: np.ndarray,
    ramp_down_mw: np.ndarray,
    dt_h: float,
    soft_line_penalty: float,
    energy_mwh: dict[int, float] | None = None,
    fixed_mw: dict[int, np.ndarray] | None = None,
) -> MultiPeriodResult:
    """The myopic optimum (module docstring): one DC-OPF per step within its ramp range.

    Args:
        case: The network (its ``[Pmin, Pmax]`` and costs are the units').
        load_mw: Bus demand [T, n_bus], MW.
        initial_p_mw: The dispatch of the step before the first [n_gen], MW.
        ramp_up_mw: Largest rise of each unit in one step [n_gen], MW.
        ramp_down_mw: Largest fall of each unit in one step [n_gen], MW.
        dt_h: Step length, hours.
        soft_line_penalty: Price of flow above a rating, $/MWh.
        energy_mwh: Energy budget over the ``T`` steps of some units ``{unit: MWh}``.
        fixed_mw: Outputs [T] MW some units are held at (within their step's range).

    Returns:
        The dispatch, its flows, overload and cost.
    """
    loads, p0 = _check(case, load_mw, initial_p_mw)
    pmin, pmax = case.gen_limits_mw
    left = {g: float(e) for g, e in (energy_mwh or {}).items()}

    def bounds_of(t: int, p_prev: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        p_prev = p0 if p_prev is None else p_prev
        if t > 0:
            for g in left:
                left[g] -= p_prev[g] * dt_h
        lo = np.clip(p_prev - ramp_down_mw, pmin, pmax)
        hi = np.clip(p_prev + ramp_up_mw, lo, pmax)
        for g, e in left.items():
            hi[g] = max(min(hi[g], e / dt_h), pmin[g])
            lo[g] = min(lo[g], hi[g])
        for g, series in (fixed_mw or {}).items():
            lo[g] = hi[g] = np.clip(series[t], lo[g], hi[g])
        return lo, hi

    r = solve_dc_opf(case, loads, soft_line_penalty=soft_line_penalty, bounds_of=bounds_of)
    out = np.array(r.gen_p_mw, dtype=float)
    bad = np.flatnonzero(r.status != "optimal")
    status = "optimal" if bad.size == 0 else str(r.status[bad[0]])
    if bad.size:  # a failed step leaves the rest of the sequence without its start
        out[bad[0] :] = np.nan
    return _result(case, out, loads, dt_h, soft_line_penalty, status, 0)


def solve_multi_period_dc_opf(
    case: NetworkCase,
    load_mw: np.ndarray,
    initial_p_mw: np.ndarray,
    ramp_up_mw: np.ndarray,
    ramp_down_mw: np.ndarray,
    dt_h: float,
    soft_line_penalty: float,
    energy_mwh: dict[int, float] | None = None,
    monitored: np.ndarray | None = None,
    segments: int = SEGMENTS,
) -> MultiPeriodResult:
    """The whole-horizon optimum (module docstring): one LP over the ``T`` steps on HiGHS, then
    each step's exact QP with the energy-limited units at the LP's schedule.

    Args:
        case: The network (its ``[Pmin, Pmax]`` and costs are the units').
        load_mw: Bus demand [T, n_bus], MW.
        initial_p_mw: The dispatch of the step before the first [n_gen], MW.
        ramp_up_mw: Largest rise of each unit in one step [n_gen], MW.
        ramp_down_mw: Largest fall of each unit in one step [n_gen], MW.
        dt_h: Step length, hours.
        soft_line_penalty: Price of flow above a rating, $/MWh.
        energy_mwh: Energy budget over the ``T`` steps of some units ``{unit: MWh}``.
        monitored: Bool [T, n_branch]: (step, branch) pairs whose flow rows start in the LP
            (e.g. the myopic solution's binding pairs; ``None``: none).
        segments: Linear pieces of each quadratic cost in the LP.

    Returns:
        The dispatch, its flows, overload and cost; ``status`` is HiGHS's verdict where it
        finds no optimum (the dispatch is then NaN).
    """
    loads, p0 = _check(case, load_mw, initial_p_mw)
    n_t, n_g = loads.shape[0], case.n_gen
    ramp_up = np.asarray(ramp_up_mw, dtype=float)
    ramp_down = np.asarray(ramp_down_mw, dtype=float)
    rate = _ratings(case)
    watch = np.zeros((n_t, case.n_branch), bool) if monitored is None else monitored.copy()
    watch &= np.isfinite(rate)
    for rounds in range(1, _MAX_ROUNDS + 1):
        status, p = _solve_lp(
            case,
            loads,
            p0,
            ramp_up,
            ramp_down,
            dt_h,
            soft_line_penalty,
            energy_mwh,
            watch,
            segments,
        )
        if status != "optimal":
            return _result(case, np.full((n_t, n_g), np.nan), loads, dt_h, 0.0, status, rounds)
        flow = np.abs(_flows(case, p, loads))
        over = (flow > rate + _LAZY_TOL_MW) & ~watch
        if not over.any():
            break
        watch |= over | (over.any(axis=0) & (flow >= _NEAR_SHARE * rate))
    else:
        raise RuntimeError(f"{case.name}: the multi-period DC-OPF's flow rows did not settle")
    fixed = {g: p[:, g] for g in energy_mwh or {}}
    exact = solve_ramped_sequence(
        case, loads, p0, ramp_up, ramp_down, dt_h, soft_line_penalty, fixed_mw=fixed
    )
    return dataclasses.replace(exact, rounds=rounds)


def _solve_lp(
    case: NetworkCase,
    loads: np.ndarray,
    p0: np.ndarray,
    ramp_up: np.ndarray,
    ramp_down: np.ndarray,
    dt_h: float,
    penalty: float,
    energy_mwh: dict[int, float] | None,
    watch: np.ndarray,
    segments: int,
) -> tuple[str, np.ndarray]:
    """One LP of :func:`solve_multi_period_dc_opf` with the flow rows of the ``watch`` pairs:
    ``(status, p [T, n_gen])``. Columns: ``p`` step-major, one slack per watched pair, then
    ``segments`` cost pieces per unit and step (``p = Pmin + sum_k x_k``, ``0 <= x_k <= w``,
    ``w = (Pmax - Pmin) / segments``, the slope of piece ``k`` the quadratic's secant)."""
    import highspy

    n_t, n_g = loads.shape[0], case.n_gen
    on = case.gen_in_service.astype(float)
    pmin, pmax = case.gen_limits_mw
    pair_t, pair_l = np.nonzero(watch)
    n_s, n_p, k = pair_t.size, n_t * n_g, int(segments)
    n_col = n_p + n_s + n_p * k
    col = np.arange(n_p).reshape(n_t, n_g)
    rows: list[sparse.spmatrix] = []
    lo: list[np.ndarray] = []
    up: list[np.ndarray] = []

    def block(vals: np.ndarray, r: np.ndarray, c: np.ndarray, n_rows: int) -> None:
        rows.append(sparse.csr_matrix((vals, (r, c)), (n_rows, n_col)))

    total = loads.sum(axis=1)  # balance of every step
    block(np.tile(on, n_t), np.repeat(np.arange(n_t), n_g), col.ravel(), n_t)
    lo.append(total)
    up.append(total)
    tied = np.flatnonzero(np.minimum(ramp_up, ramp_down) < pmax - pmin - 1e-9)
    if n_t > 1 and tied.size:  # ramps between steps (units whose ramp is below their range)
        m = (n_t - 1) * tied.size
        r = np.arange(m)
        now, prev = col[1:, tied].ravel(), col[:-1, tied].ravel()
        block(np.r_[np.ones(m), -np.ones(m)], np.r_[r, r], np.r_[now, prev], m)
        lo.append(np.tile(-ramp_down[tied], n_t - 1))
        up.append(np.tile(ramp_up[tied], n_t - 1))
    for g, e in (energy_mwh or {}).items():  # energy budgets
        block(np.full(n_t, dt_h), np.zeros(n_t, dtype=np.int64), col[:, g], 1)
        lo.append(np.array([-np.inf]))
        up.append(np.array([float(e)]))
    if n_s:  # flow rows of the watched pairs: a_l p_t - s <= F + o,  a_l p_t + s >= -F + o
        branches, row_of = np.unique(pair_l, return_inverse=True)
        ptdf = ptdf_rows(case, branches)  # [n_watched_branches, n_bus], at any network size
        a = ptdf[:, case.gen_bus] * on  # [n_watched_branches, n_gen]
        shift = phase_shift_flow_mw(case)[pair_l]
        offset = np.einsum("pb,pb->p", ptdf[row_of], loads[pair_t]) - shift
        f = case.branch_rate_a_mw[pair_l]
        r = np.r_[np.repeat(np.arange(n_s), n_g), np.arange(n_s)]
        c = np.r_[col[pair_t].ravel(), n_p + np.arange(n_s)]
        for sign, row_lo, row_up in ((-1.0, -np.inf, offset + f), (1.0, offset - f, np.inf)):
            block(np.r_[a[row_of].ravel(), np.full(n_s, sign)], r, c, n_s)
            lo.append(np.broadcast_to(row_lo, n_s))
            up.append(np.broadcast_to(row_up, n_s))
    # the cost pieces: p_gt - sum_k x_gtk = Pmin_g
    c2 = np.where(case.gen_in_service, case.gen_c2_per_mw2h, 0.0)
    c1 = np.where(case.gen_in_service, case.gen_c1_per_mwh, 0.0)
    width = (pmax - pmin) / k
    slope = c1[:, None] + c2[:, None] * (
        2.0 * pmin[:, None] + (2 * np.arange(k) + 1) * width[:, None]
    )
    pieces = n_p + n_s + np.arange(n_p * k).reshape(n_p, k)
    block(
        np.tile(np.r_[1.0, -np.ones(k)], n_p),
        np.repeat(np.arange(n_p), k + 1),
        np.concatenate([col.reshape(n_p, 1), pieces], axis=1).ravel(),
        n_p,
    )
    lo.append(np.tile(pmin, n_t))
    up.append(np.tile(pmin, n_t))
    col_lo = np.r_[np.tile(pmin, n_t), np.zeros(n_s + n_p * k)]
    col_up = np.r_[np.tile(pmax, n_t), np.full(n_s, np.inf), np.tile(np.repeat(width, k), n_t)]
    col_lo[:n_g] = np.clip(p0 - ramp_down, pmin, pmax)  # the first step from the start
    col_up[:n_g] = np.clip(p0 + ramp_up, col_lo[:n_g], pmax)
    cost = np.r_[np.zeros(n_p), np.full(n_s, penalty), np.tile(slope.ravel(), n_t)] * dt_h

    a_all = sparse.vstack(rows).tocsc()
    a_all.eliminate_zeros()
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n_col, a_all.shape[0]
    lp.col_cost_ = cost
    lp.col_lower_ = col_lo
    lp.col_upper_ = np.where(np.isinf(col_up), inf, col_up)
    row_lo, row_up = np.concatenate(lo), np.concatenate(up)
    lp.row_lower_ = np.where(np.isinf(row_lo), -inf, row_lo)
    lp.row_upper_ = np.where(np.isinf(row_up), inf, row_up)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a_all.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a_all.indices.astype(np.int32)
    lp.a_matrix_.value_ = a_all.data
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n_col, a_all.shape[0]
    highs = new_highs()
    highs.passModel(lp)
    highs.run()
    text = highs.modelStatusToString(highs.getModelStatus()).lower()
    if text != "optimal":
        return text, np.full((n_t, n_g), np.nan)
    x = np.asarray(highs.getSolution().col_value)
    return "optimal", np.clip(x[:n_p].reshape(n_t, n_g), pmin, pmax)
