"""Congestion-aware rule-based dispatch: merit order + redispatch by PTDF sensitivities.

The "security-constrained redispatch by sensitivities" an operator applies by hand, batched
over a leading dimension ``B`` (numpy over the batch; the Python loops run over redispatch
iterations, never over ``B``).  Inputs: bus loads, unit limits, offer prices
(``marginal_cost``) and the network's PTDF; no optimisation solver is called.

Heuristic
---------
Branch flows are ``f = PTDF (C_g p - d)`` (lossless DC; the balance is kept exact, so the
slack bus supplies nothing) and the total overload is ``sum_k max(|f_k| - F_k, 0)``.

1. **Merit order.**  Every unit at ``Pmin``; the rest of the load goes to the units cheapest
   first (``marginal_cost``, stable order).  Exact balance if
   ``sum(Pmin) <= load <= sum(Pmax)`` (the load is clipped to that range otherwise).
2. **Pairwise redispatch (economic phase).**  In every env with an overload, the target is
   its most overloaded branch ``l`` (flow sign ``s``).  Moving ``x`` MW from unit ``d`` (down)
   to unit ``u`` (up) relieves ``l`` by ``r = s (a_ld - a_lu)`` MW per MW, with
   ``a_lg = PTDF[l, bus(g)]``, at ``mc_u - mc_d`` $/MWh per MW.  Pairs with ``r > 0`` and room
   to move are ranked by **cost per MW of relief** ``(mc_u - mc_d) / r`` (cheapest first, ties
   by pair index); the first one whose shift also lowers the *total* overload (directional
   derivative < 0, branches at their rating count as pushed if the shift pushes them outward)
   is applied with ``x = min(overload_l / r, Pmax_u - p_u, p_d - Pmin_d, x*)``, ``x*`` the exact
   minimiser of the (convex, piecewise linear) total overload along the shift.  One unit up,
   one down by the same amount: balance exact, unit limits respected.  If no pair qualifies,
   the branch is *blocked* for that env and its next most overloaded branch is tried (blocks
   are cleared by the env's next shift).  Runs for at most ``max_pair_shifts`` iterations.
3. **Minimum-volume redispatch (security phase).**  Where several binding branches interact,
   every single pair that relieves one branch pushes another one over its rating and the
   pairwise shifts zig-zag.  The remaining overloads are then cleared together: the
   minimum-norm shift ``d`` of the movable units with ``sum(d) = 0`` that brings *every*
   overloaded branch back to its rating while keeping the flow of every branch already at
   its rating (least squares on the centred PTDF rows).  Units whose shift would cross a
   limit are removed and ``d`` recomputed (active set), then the step is ``min(1, unit
   limits, x*)`` with the same exact line search.  Branches that reach their rating join the
   held set at the next iteration.  Runs for at most ``max_iterations`` iterations.

Guarantees: the balance is exact (to round-off) and every unit stays in ``[Pmin, Pmax]``;
every applied step lowers the total overload (it never increases, see
``RedispatchResult.overload_trace_mw``); the number of iterations is bounded; the result is
deterministic (stable sorts, ties by index), though not continuous in the load: a round-off
change can flip a near-tie (parallel lines, units with equal offers) and give a different,
equally valid redispatch.  Zero overload is reached when the security phase finds a descent
step until the end: on every load tried (case5 and case118, all splits, and case118 up to
1.3x its peak load) exactly when the hard-limit DC-OPF is feasible; this is no proof
(see ``RedispatchResult.converged``).  The rule is a baseline, not an optimiser: on
case5 (one binding line, linear costs) the cheapest relieving pair *is* the DC-OPF's
redispatch; on case118 its cost stays above the DC-OPF's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from powerzoo.physics.blas_threads import one_blas_thread
from powerzoo.physics.dc_power_flow import line_overload_mw, ptdf_matrix
from powerzoo.physics.network import NetworkCase

__all__ = [
    "RedispatchResult",
    "congestion_aware_dispatch",
    "merit_order_dispatch",
    "redispatch",
    "rule_dispatch_from_system_load",
]

_SENS_TOL = 1e-4  # MW of relief per MW moved below which a direction is not a relief
_ARGMIN_ROUNDS = 1  # cheapest pair checked alone before sorting more of them
_TOP_PAIRS = 64  # pairs checked at once after those
_EPS = 1e-12
# default bound of the economic phase: on case118 more pair shifts change the day's cost by
# < 0.3 % while the time grows linearly (case5 needs at most 2)
_MAX_PAIR_SHIFTS = 32


@dataclass(frozen=True)
class RedispatchResult:
    """Outcome of :func:`redispatch`; arrays lead with the batch dimension ``B``."""

    gen_p_mw: np.ndarray  # [B, n_gen] congestion-aware dispatch
    merit_order_p_mw: np.ndarray  # [B, n_gen] starting point (network ignored)
    branch_flow_mw: np.ndarray  # [B, n_branch] flows of gen_p_mw
    overload_mw: np.ndarray  # [B] residual total branch overload of gen_p_mw
    merit_order_overload_mw: np.ndarray  # [B] total branch overload of the merit order
    converged: np.ndarray  # [B] no branch overloaded by more than the tolerance
    n_pair_shifts: np.ndarray  # [B] pairwise shifts applied (economic phase)
    n_volume_steps: np.ndarray  # [B] minimum-volume steps applied (security phase)
    overload_trace_mw: np.ndarray  # [n_iterations + 1, B] total overload, start then per iteration


@dataclass(frozen=True)
class _Grid:
    """Per-call network data restricted to the branches with a finite rating."""

    sens_t: np.ndarray  # [n_gen, n_lim] flow change per MW injected by each unit
    load_flow: np.ndarray  # [B, n_lim] flow caused by the loads (flow = p @ sens_t - load_flow)
    rate: np.ndarray  # [n_lim]
    pmin: np.ndarray  # [B, n_gen]
    pmax: np.ndarray  # [B, n_gen]
    tol: float

    def flow(self, p: np.ndarray) -> np.ndarray:
        return p @ self.sens_t - self.load_flow

    def overload(self, flow: np.ndarray) -> np.ndarray:
        return np.maximum(np.abs(flow) - self.rate, 0.0)


def _overload_slope(flow: np.ndarray, q: np.ndarray, rate: np.ndarray, tol: float) -> np.ndarray:
    """d/dx of the total overload ``sum_k max(|f_k + x q_k| - F_k, 0)`` at ``x = 0+``.

    ``flow`` broadcasts against ``q`` ``[..., n_lim]``.  Overloaded branches contribute
    ``sign(f) q``, branches within ``tol`` of their rating ``max(sign(f) q, 0)``, others 0.
    """
    h = np.where(q >= 0.0, flow, -flow)  # flow measured along the direction it moves
    sign = np.where(-rate - h > tol, -1.0, np.where(rate - h > tol, 0.0, 1.0))
    return (sign * np.abs(q)).sum(axis=-1)


def _overload_line_search(
    flow: np.ndarray, q: np.ndarray, rate: np.ndarray, tol: float
) -> np.ndarray:
    """Step ``x >= 0`` [b] minimising the total overload along ``q`` [b, n_lim] (inf: unbounded).

    The total overload is convex and piecewise linear in ``x``: its slope starts at
    :func:`_overload_slope` and grows by ``|q_k|`` where branch ``k`` leaves an overload or
    enters one; the minimiser is the first such point where the slope is no longer negative.
    """
    v = np.abs(q)
    h = np.where(q >= 0.0, flow, -flow)
    with np.errstate(divide="ignore", invalid="ignore"):
        leave = np.where((-rate - h > tol) & (v > 0.0), (-rate - h) / v, np.inf)
        enter = np.where((rate - h > tol) & (v > 0.0), (rate - h) / v, np.inf)
    points = np.concatenate([leave, enter], axis=1)  # [b, 2 n_lim]
    order = np.argsort(points, axis=1, kind="stable")
    points = np.take_along_axis(points, order, axis=1)
    weights = np.take_along_axis(np.concatenate([v, v], axis=1), order, axis=1)
    slope = _overload_slope(flow, q, rate, tol)[:, None] + np.cumsum(weights, axis=1)
    rows = np.arange(points.shape[0])
    stop = np.argmax(slope >= 0.0, axis=1)
    return np.where(slope[rows, stop] >= 0.0, points[rows, stop], np.inf)


def _step_cap(p: np.ndarray, d: np.ndarray, pmin: np.ndarray, pmax: np.ndarray) -> np.ndarray:
    """Largest ``x`` [b] with ``pmin <= p + x d <= pmax`` (ratio test)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(d > _EPS, (pmax - p) / d, np.inf)
        down = np.where(d < -_EPS, (pmin - p) / d, np.inf)
    return np.maximum(np.minimum(up, down).min(axis=1), 0.0)


def _admissible_relief(
    ratio: np.ndarray,
    slope_data: tuple[np.ndarray, np.ndarray, np.ndarray],
    env: np.ndarray,
    pair: np.ndarray,
    n_g: int,
) -> np.ndarray:
    """[t, c] True where pair ``pair[t, c]`` of env ``env[t]`` may move and its shift lowers
    the total overload (directional derivative below ``-_SENS_TOL``)."""
    lin, at_sens, at_sign = slope_data
    up, dn = pair // n_g, pair % n_g
    slope = lin[env[:, None], up] - lin[env[:, None], dn]
    if at_sens.shape[1]:
        q_at = at_sens[up] - at_sens[dn]  # [t, c, n_at]
        slope = slope + np.maximum(at_sign[env, None, :] * q_at, 0.0).sum(axis=2)
    return np.isfinite(np.take_along_axis(ratio[env], pair, axis=1)) & (slope < -_SENS_TOL)


def _pair_phase(
    grid: _Grid, p: np.ndarray, mc: np.ndarray, max_shifts: int, trace: list[np.ndarray]
) -> np.ndarray:
    """Economic phase (module docstring, step 2); updates ``p`` in place, returns shift counts."""
    n_b, n_g = p.shape
    tol, rate, sens_t = grid.tol, grid.rate, grid.sens_t
    sens = np.ascontiguousarray(sens_t.T)  # [n_lim, n_gen]
    cost_diff = (mc[:, None] - mc[None, :]).ravel()  # pair index = up * n_g + down
    blocked = np.zeros((n_b, rate.size), dtype=bool)
    n_shifts = np.zeros(n_b, dtype=np.int64)
    rows_all = np.arange(n_b)
    flow = grid.flow(p)
    over = grid.overload(flow)
    for _ in range(max_shifts):
        cand = np.where(blocked | (over <= tol), -1.0, over)
        target_all = np.argmax(cand, axis=1)
        act = np.flatnonzero(cand[rows_all, target_all] > 0.0)
        if act.size == 0:
            break
        b = act.size
        rows = np.arange(b)
        target = target_all[act]
        f_a, p_a = flow[act], p[act]
        gap = np.abs(f_a) - rate
        sign = np.sign(f_a)
        a = sens[target] * sign[rows, target][:, None]  # [b, n_gen] signed target sensitivity
        relief = (a[:, None, :] - a[:, :, None]).reshape(b, n_g * n_g)  # [b, up * n_g + down]
        room_up, room_dn = grid.pmax[act] - p_a, p_a - grid.pmin[act]
        # directional derivative of the total overload along a pair's shift: linear over the
        # overloaded branches, plus max(., 0) over the branches at their rating (evaluated
        # only for the candidates checked; it can only raise the derivative)
        lin = np.where(gap > tol, sign, 0.0) @ sens  # [b, n_gen]
        lin_pair = (lin[:, :, None] - lin[:, None, :]).reshape(b, n_g * n_g)
        movable = (room_up > tol)[:, :, None] & (room_dn > tol)[:, None, :]
        ok = (relief > _SENS_TOL) & (lin_pair < -_SENS_TOL) & movable.reshape(b, -1)
        ratio = np.full(relief.shape, np.inf)
        np.divide(cost_diff, relief, out=ratio, where=ok)
        at_rating = np.abs(gap) <= tol
        at_cols = np.flatnonzero(at_rating.any(axis=0))
        slope_data = (
            lin,
            sens_t[:, at_cols],  # [n_gen, n_at]
            np.where(at_rating[:, at_cols], sign[:, at_cols], 0.0),  # [b, n_at]
        )
        chosen = np.full(b, -1)
        todo = rows
        for _round in range(_ARGMIN_ROUNDS):  # the cheapest pair alone (cheap argmin) ...
            pair = np.argmin(ratio[todo], axis=1)[:, None]  # first index among ties
            found = _admissible_relief(ratio, slope_data, todo, pair, n_g)[:, 0]
            chosen[todo[found]] = pair[found, 0]
            ratio[todo, pair[:, 0]] = np.inf  # checked
            todo = todo[~found & np.isfinite(ratio[todo]).any(axis=1)]
            if todo.size == 0:
                break
        for width in (_TOP_PAIRS, n_g * n_g):  # ... then the next cheapest, then all, in order
            if todo.size == 0:
                break
            if width < n_g * n_g:
                pairs = np.argpartition(ratio[todo], width - 1, axis=1)[:, :width]
                keys = np.take_along_axis(ratio[todo], pairs, axis=1)
                pairs = np.take_along_axis(pairs, np.lexsort((pairs, keys), axis=1), axis=1)
            else:
                pairs = np.argsort(ratio[todo], axis=1, kind="stable")
            good = _admissible_relief(ratio, slope_data, todo, pairs, n_g)
            first = np.argmax(good, axis=1)
            found = good[np.arange(todo.size), first]
            chosen[todo[found]] = pairs[found, first[found]]
            todo = todo[~found & (np.isfinite(ratio[todo]).sum(axis=1) > width)]

        moved = np.flatnonzero(chosen >= 0)
        up, dn = chosen[moved] // n_g, chosen[moved] % n_g
        shift = np.minimum.reduce(
            [
                gap[moved, target[moved]] / relief[moved, chosen[moved]],  # clears the target
                room_up[moved, up],
                room_dn[moved, dn],
                _overload_line_search(f_a[moved], sens_t[up] - sens_t[dn], rate, tol),
            ]
        )
        keep = shift > 0.0
        env, up, dn, dx = act[moved][keep], up[keep], dn[keep], shift[keep]
        p[env, up] = np.minimum(p[env, up] + dx, grid.pmax[env, up])
        p[env, dn] = np.maximum(p[env, dn] - dx, grid.pmin[env, dn])
        n_shifts[env] += 1
        blocked[env] = False
        stuck = np.setdiff1d(act, env)
        blocked[stuck, target_all[stuck]] = True
        flow = grid.flow(p)
        over = grid.overload(flow)
        trace.append(over.sum(axis=1))
    return n_shifts


def _volume_phase(
    grid: _Grid, p: np.ndarray, max_steps: int, trace: list[np.ndarray]
) -> np.ndarray:
    """Security phase (module docstring, step 3); updates ``p`` in place, returns step counts."""
    n_b, n_g = p.shape
    tol, rate, sens_t = grid.tol, grid.rate, grid.sens_t
    sens = sens_t.T
    n_steps = np.zeros(n_b, dtype=np.int64)
    for _ in range(max_steps):
        flow = grid.flow(p)
        gap = np.abs(flow) - rate
        act = np.flatnonzero(gap.max(axis=1) > tol)
        if act.size == 0:
            break
        f_a, g_a, p_a = flow[act], gap[act], p[act]
        lo_a, hi_a = grid.pmin[act], grid.pmax[act]
        held = g_a >= -tol  # overloaded or at the rating
        lines = np.flatnonzero(held.any(axis=0))  # union over the batch keeps systems small
        held = held[:, lines]
        rows = (np.sign(f_a[:, lines]) * held)[:, :, None] * sens[lines][None]  # [b, m, n_gen]
        rhs = -np.where(g_a[:, lines] > tol, g_a[:, lines], 0.0)  # overloads to 0, held stay
        eye = np.eye(lines.size)
        free = ((hi_a - p_a) > tol) | ((p_a - lo_a) > tol)
        for _pass in range(n_g):
            n_free = np.maximum(free.sum(axis=1), 1)[:, None]
            centred = (
                rows - (rows * free[:, None, :]).sum(axis=2, keepdims=True) / n_free[:, :, None]
            )
            centred = centred * free[:, None, :]  # d = centred' lam sums to 0 over the free units
            gram = centred @ centred.transpose(0, 2, 1)
            scale = np.trace(gram, axis1=1, axis2=2) / lines.size
            gram = gram + (1e-9 * scale + _EPS)[:, None, None] * eye + (~held)[:, :, None] * eye
            lam = np.linalg.solve(gram, rhs[:, :, None])[:, :, 0]
            d = (centred * lam[:, :, None]).sum(axis=1)
            d = (d - d.sum(axis=1, keepdims=True) / n_free) * free  # exact balance
            bad = free & (((d > _EPS) & (hi_a - p_a <= tol)) | ((d < -_EPS) & (p_a - lo_a <= tol)))
            if not bad.any():
                break
            free &= ~bad
        q = d @ sens_t
        x = np.minimum.reduce(
            [
                np.ones(act.size),
                _step_cap(p_a, d, lo_a, hi_a),
                _overload_line_search(f_a, q, rate, tol),
            ]
        )
        good = (_overload_slope(f_a, q, rate, tol) < 0.0) & (x > 0.0)
        if not good.any():
            break
        env = act[good]
        p[env] = np.clip(p_a[good] + x[good, None] * d[good], lo_a[good], hi_a[good])
        n_steps[env] += 1
        trace.append(grid.overload(grid.flow(p)).sum(axis=1))
    return n_steps


def merit_order_dispatch(
    case: NetworkCase, total_load_mw: np.ndarray, marginal_cost: np.ndarray
) -> np.ndarray:
    """Units at Pmin, then loaded cheapest first until ``total_load_mw`` [B] is met: [B, n_gen].

    The load is clipped to ``[sum Pmin, sum Pmax]``; inside that range the balance is exact.
    """
    pmin, pmax = case.gen_limits_mw
    order = np.argsort(np.asarray(marginal_cost, dtype=float), kind="stable")
    room = (pmax - pmin)[order]
    load = np.atleast_1d(np.asarray(total_load_mw, dtype=float))
    residual = np.clip(load - pmin.sum(), 0.0, room.sum())
    before = np.concatenate([[0.0], np.cumsum(room)[:-1]])
    fill = np.clip(residual[:, None] - before, 0.0, room)
    p = np.empty_like(fill)
    p[:, order] = fill
    return p + pmin


@one_blas_thread()  # OpenBLAS splits larger products over its threads, changing their last bits
def redispatch(
    case: NetworkCase,
    bus_load_mw: np.ndarray,
    marginal_cost: np.ndarray,
    *,
    ptdf: np.ndarray | None = None,
    max_pair_shifts: int | None = None,
    max_iterations: int | None = None,
    tolerance_mw: float = 1e-6,
    start_mw: np.ndarray | None = None,
    pmin_mw: np.ndarray | None = None,
    pmax_mw: np.ndarray | None = None,
) -> RedispatchResult:
    """Merit order, then pairwise and minimum-volume redispatch (module docstring).

    ``bus_load_mw``: ``[B, n_bus]`` (``[n_bus]`` is ``B = 1``); ``marginal_cost``: ``[n_gen]``
    $/MWh, for the merit order and to price the shifts; ``ptdf``: ``[n_branch, n_bus]``
    (default: the case's, cached); ``max_pair_shifts`` (default 32) and
    ``max_iterations`` (default ``n_gen + n_branch``) bound the two phases; overloads up to
    ``tolerance_mw`` per branch are ignored. ``pmin_mw`` / ``pmax_mw`` (``[n_gen]`` or
    ``[B, n_gen]``, MW; default the case's limits) bound every unit, e.g. a step's ramp range;
    ``start_mw`` (``[B, n_gen]``, MW, within those bounds and balanced) replaces the merit order
    as the starting dispatch (an operator's own economic dispatch, redispatched for congestion).
    """
    load = np.atleast_2d(np.asarray(bus_load_mw, dtype=float))
    if load.ndim != 2 or load.shape[1] != case.n_bus:
        raise ValueError(
            f"bus_load_mw must be [B, n_bus] with n_bus={case.n_bus}, got {load.shape}"
        )
    mc = np.asarray(marginal_cost, dtype=float)
    if mc.shape != (case.n_gen,):
        raise ValueError(f"marginal_cost must be [n_gen] with n_gen={case.n_gen}, got {mc.shape}")
    ptdf = ptdf_matrix(case) if ptdf is None else np.asarray(ptdf, dtype=float)
    if ptdf.shape != (case.n_branch, case.n_bus):
        raise ValueError(f"ptdf must be [n_branch, n_bus], got {ptdf.shape}")
    max_pair_shifts = _MAX_PAIR_SHIFTS if max_pair_shifts is None else int(max_pair_shifts)
    max_iterations = case.n_gen + case.n_branch if max_iterations is None else int(max_iterations)

    pmin, pmax = case.gen_limits_mw
    shape = (load.shape[0], case.n_gen)
    pmin = np.broadcast_to(pmin if pmin_mw is None else np.asarray(pmin_mw, float), shape)
    pmax = np.broadcast_to(pmax if pmax_mw is None else np.asarray(pmax_mw, float), shape)
    sens = ptdf[:, case.gen_bus] * case.gen_in_service  # [n_branch, n_gen]
    load_flow = load @ ptdf.T  # [B, n_branch]
    rate = case.branch_rate_a_mw
    limited = case.limited_branches  # the rest never overload
    grid = _Grid(
        sens_t=np.ascontiguousarray(sens[limited].T),
        load_flow=np.ascontiguousarray(load_flow[:, limited]),
        rate=rate[limited],
        pmin=pmin,
        pmax=pmax,
        tol=float(tolerance_mw),
    )

    if start_mw is None:
        p_merit = merit_order_dispatch(case, load.sum(axis=1), mc)
    else:
        p_merit = np.array(np.broadcast_to(np.asarray(start_mw, float), shape))
    p = p_merit.copy()
    trace = [grid.overload(grid.flow(p)).sum(axis=1)]
    n_pair = n_volume = np.zeros(load.shape[0], dtype=np.int64)
    if limited.size:  # else nothing can overload: the merit order stands
        n_pair = _pair_phase(grid, p, mc, max_pair_shifts, trace)
        n_volume = _volume_phase(grid, p, max_iterations, trace)

    flow = p @ sens.T - load_flow
    overload = line_overload_mw(case, flow)
    return RedispatchResult(
        gen_p_mw=p,
        merit_order_p_mw=p_merit,
        branch_flow_mw=flow,
        overload_mw=overload.sum(axis=1),
        merit_order_overload_mw=line_overload_mw(case, p_merit @ sens.T - load_flow).sum(axis=1),
        converged=overload.max(axis=1, initial=0.0) <= tolerance_mw,
        n_pair_shifts=n_pair,
        n_volume_steps=n_volume,
        overload_trace_mw=np.stack(trace),
    )


def congestion_aware_dispatch(
    case: NetworkCase, bus_load_mw: np.ndarray, marginal_cost: np.ndarray, **options: Any
) -> np.ndarray:
    """Congestion-aware rule dispatch ``[B, n_gen]`` [MW] for bus loads ``[B, n_bus]``.

    ``redispatch(case, bus_load_mw, marginal_cost, **options).gen_p_mw``, with the keyword
    options of :func:`redispatch`; use :func:`redispatch` for the residual overload.
    """
    return redispatch(case, bus_load_mw, marginal_cost, **options).gen_p_mw


def rule_dispatch_from_system_load(
    case: NetworkCase,
    system_load_mw: np.ndarray,
    marginal_cost: np.ndarray,
    ptdf: np.ndarray | None = None,
) -> np.ndarray:
    """Congestion-aware dispatch ``[B, n_gen]`` from the observed system load ``[B]`` [MW].

    Bus loads are the case's load shape scaled to the system load,
    ``bus_load = L * bus_pd / sum(bus_pd)`` (exact when every bus load scales alike).
    """
    total = np.atleast_1d(np.asarray(system_load_mw, dtype=float))
    share = case.bus_pd_mw / case.bus_pd_mw.sum()
    return congestion_aware_dispatch(case, total[:, None] * share, marginal_cost, ptdf=ptdf)
