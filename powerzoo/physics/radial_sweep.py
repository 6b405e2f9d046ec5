"""The numerical core of :mod:`powerzoo.physics.radial_pf` (internal): per-feeder index plans,
the dense and level-by-level sweep iterations over a batch, and the work buffers they reuse.

Rows are the non-slack buses in breadth-first order, grouped by depth (children after their
parents). Two working layouts: ``[B, m]`` (dense: one path-impedance product per iteration) and
``[m, B]`` (sweep: a loop over the tree depth, each step a contiguous block of rows).
"""

from __future__ import annotations

import sys
import threading
import weakref

import numpy as np

from powerzoo.physics.feeder import RadialFeeder

__all__ = [
    "FeederPlan",
    "backward",
    "cold_start",
    "feeder_plan",
    "gather",
    "iterate",
    "voltage_step",
]

RETIRE_FROM = 12  # from this iteration on, converged rows leave the working batch
DIVERGED_STEP_PU = 2.0  # a voltage change larger than this in one iteration is divergence
_OUTPUT_POOL = 4  # result blocks kept for reuse per feeder and thread
_SCRATCH_MIN_SIZE = 4096  # gather() writes through the scratch buffer from this size on
# ufuncs called directly: no Python wrapper (ndarray.max's) between the loop and the kernel
_max_reduce, _subtract, _absolute, _dot = np.maximum.reduce, np.subtract, np.absolute, np.dot


def _as_slice(index: np.ndarray) -> slice | np.ndarray:
    """A slice for a contiguous increasing index array (no gather), else the array."""
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0]) + index.size)
    return index


class FeederPlan:
    """Index arrays and matrices of one feeder, rows = non-slack buses in breadth-first order
    (grouped by depth, children after their parents), plus per-thread work buffers."""

    def __init__(self, case: RadialFeeder) -> None:
        parent, depth = case.bus_parent, case.bus_depth
        row_of = np.full(case.n_bus, -1, dtype=np.int64)
        order: list[int] = []
        bounds: list[tuple[int, int]] = []
        for d in range(1, int(depth.max()) + 1):
            level = np.flatnonzero(depth == d)
            level = level[np.argsort(row_of[parent[level]], kind="stable")]
            bounds.append((len(order), len(order) + level.size))
            row_of[level] = np.arange(len(order), len(order) + level.size)
            order.extend(level.tolist())
        self.m = m = len(order)
        self.order = np.asarray(order, dtype=np.int64)  # bus of each row
        row_branch = case.bus_parent_branch[self.order]  # branch feeding each row
        self.branch_row = row_of[case.branch_to_bus]  # row of each branch's to-bus
        self.root_branches = np.flatnonzero(case.branch_from_bus == case.slack_bus)
        # the branch leaving the head when it is the only one (-1: several, their currents summed)
        self.root_branch = int(self.root_branches[0]) if self.root_branches.size == 1 else -1
        self.r_mva = case.branch_r_pu * case.base_mva  # losses [MW] = |J|^2 . r_mva
        self.inv_base_mva = 1.0 / case.base_mva  # MW -> p.u.
        # branch loading (current over the rating) per p.u. of branch current
        self.loading_per_pu = case.branch_i_base_ka / case.branch_rating_ka
        self.x_mva = case.branch_x_pu * case.base_mva
        z = (case.branch_r_pu + 1j * case.branch_x_pu)[row_branch]
        self.z_col = z[:, None]  # [m, 1] for the [m, B] sweep layout
        parent_row = row_of[parent[self.order]]  # -1 for rows fed by the slack
        subtree = np.eye(m)  # subtree[i, k] = 1 if row i is row k or below it (J = I @ subtree)
        for i in range(m):
            up = parent_row[i]
            while up >= 0:
                subtree[i, up] = 1.0
                up = parent_row[up]
        self.subtree = subtree
        self.subtree_branch_c = subtree[:, self.branch_row].astype(np.complex128)  # I -> J [branch]
        # path-impedance matrix Z = BCBV @ BIBC: sum of z over the branches both paths share
        self.z_path = (subtree * z[None, :]) @ subtree.T
        # level sweeps: forward (parent rows of each level), backward (unique-parent groups)
        self.forward_levels: list[tuple[int, int, slice | np.ndarray | None]] = []
        self.backward_groups: list[list[tuple[slice | np.ndarray, slice | np.ndarray]]] = []
        for start, stop in bounds:
            prow = parent_row[start:stop]
            if prow[0] < 0:
                self.forward_levels.append((start, stop, None))
                continue
            self.forward_levels.append((start, stop, _as_slice(prow)))
            rank = np.zeros(prow.size, dtype=np.int64)  # k-th child of its parent in this level
            for i in range(1, prow.size):
                rank[i] = rank[i - 1] + 1 if prow[i] == prow[i - 1] else 0
            groups = []
            for r in range(int(rank.max()) + 1):
                sel = np.flatnonzero(rank == r)
                groups.append((_as_slice(prow[sel]), _as_slice(start + sel)))
            self.backward_groups.append(groups)
        self.backward_groups.reverse()  # deepest level first
        self._local = threading.local()
        # cold-start guess: the base-case voltage drop, scaled per scenario by the ratio of its
        # total complex demand to the base demand (one or two sweeps fewer than a flat start)
        base_cs = (case.bus_pd_mw - 1j * case.bus_qd_mvar)[self.order] / case.base_mva
        base_demand = complex(base_cs.sum())
        self.inv_base_demand = 1.0 / base_demand if base_demand else 0.0
        self.base_drop = np.zeros(m, dtype=np.complex128)
        if base_demand:
            v0 = np.full(1, case.slack_vm_pu, dtype=np.complex128)
            flat = np.full((1, m), case.slack_vm_pu, dtype=np.complex128)
            with np.errstate(all="ignore"):
                v, _, _, all_ok = iterate(
                    self,
                    base_cs[None, :].copy(),
                    v0,
                    flat,
                    np.empty_like(flat),
                    np.empty_like(flat),
                    np.empty(m),
                    200,
                    1e-12,
                    False,
                )
            if all_ok:
                self.base_drop = v0[0] - v[0]

    def buffers(self, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
        """Four complex work arrays of ``shape`` and a flat real one of the same size, kept
        between calls of this thread (no allocation churn)."""
        held = getattr(self._local, "held", None)
        if held is None or held[0] != shape:
            arrays = [np.empty(shape, dtype=np.complex128) for _ in range(4)]
            held = (shape, (*arrays, np.empty(shape[0] * shape[1])))
            self._local.held = held
        return held[1]

    def output_block(self, batch: int) -> np.ndarray:
        """A float64 block for one result's eager arrays (complex bus voltages and branch
        currents, their magnitudes). Blocks are pooled: one is reused once no array viewing it
        is alive any more, which spares the page faults of fresh memory on every call."""
        size = 3 * batch * (2 * self.m + 1)
        pool = getattr(self._local, "pool", None)
        if pool is None or pool[0] != size:
            pool = (size, [])
            self._local.pool = pool
        for block in pool[1]:
            if sys.getrefcount(block) <= 3:  # the pool list, ``block`` and the call's argument
                return block
        block = np.empty(size)
        if len(pool[1]) < _OUTPUT_POOL:
            pool[1].append(block)
        return block


_PLANS: weakref.WeakKeyDictionary[RadialFeeder, FeederPlan] = weakref.WeakKeyDictionary()


def feeder_plan(case: RadialFeeder) -> FeederPlan:
    """The (cached) plan of ``case``."""
    plan = _PLANS.get(case)
    if plan is None:
        plan = _PLANS[case] = FeederPlan(case)
    return plan


def cold_start(plan: FeederPlan, cs: np.ndarray, v0: np.ndarray, v: np.ndarray, rows: bool) -> None:
    """``v = V0 - alpha * (base-case drop)``, ``alpha`` = each scenario's total complex demand
    over the base demand: the first flat-start sweep, but around the base-case voltages."""
    alpha = cs.sum(axis=0 if rows else 1)
    alpha *= plan.inv_base_demand
    if rows:
        np.multiply(plan.base_drop[:, None], alpha, out=v)
        np.subtract(v0, v, out=v)
    else:
        np.multiply(alpha[:, None], plan.base_drop, out=v)
        np.subtract(v0[:, None], v, out=v)


def gather(
    x: np.ndarray,
    columns: np.ndarray,
    scale: float,
    out: np.ndarray,
    rows: bool,
    scratch: np.ndarray | None = None,
) -> None:
    """``out = scale * x[:, columns]`` ([B, m]), or its transpose ([m, B]) when ``rows``;
    ``scratch`` (a flat array of ``x``'s dtype and size B * m) spares the temporary."""
    if scratch is None or x.shape[0] * columns.size < _SCRATCH_MIN_SIZE:
        picked = x.take(columns, axis=1)  # small: a fresh temporary is the cheaper one
    else:
        picked = x.take(columns, axis=1, out=scratch.reshape(x.shape[0], columns.size))
    np.multiply(picked.T if rows else picked, scale, out=out)


def voltage_step(
    plan: FeederPlan,
    cs: np.ndarray,
    v0: np.ndarray,
    v: np.ndarray,
    out: np.ndarray,
    work: np.ndarray,
    rows: bool,
) -> None:
    """One fixed-point iteration ``out = V0 - Z conj(S / V)``: the bus currents, then in the
    [B, m] layout (``v0``: [B, 1] or [B, m]) one product with the path impedances, or in the
    [m, B] layout (``rows``; ``v0``: [B]) a backward sweep of the branch currents and a forward
    sweep of the voltages, level by level over the tree depth."""
    np.conjugate(v, out=work)
    np.divide(cs, work, out=work)  # bus currents
    if not rows:
        _dot(work, plan.z_path, out=out)  # np.dot: matmul's BLAS call, less dispatch
        np.subtract(v0, out, out=out)
        return
    backward(plan, work)  # branch currents
    np.multiply(work, plan.z_col, out=work)  # voltage drop over each row's branch
    for start, stop, prow in plan.forward_levels:
        upstream = v0 if prow is None else out[prow]
        np.subtract(upstream, work[start:stop], out=out[start:stop])


def backward(plan: FeederPlan, current: np.ndarray) -> None:
    """Backward sweep in place on [m, B]: each row becomes the sum of its subtree."""
    for groups in plan.backward_groups:
        for prow, crow in groups:
            if isinstance(prow, slice):
                np.add(current[prow], current[crow], out=current[prow])
            else:
                current[prow] += current[crow]


def iterate(
    plan: FeederPlan,
    cs: np.ndarray,
    v0: np.ndarray,
    v: np.ndarray,
    new: np.ndarray,
    work: np.ndarray,
    scratch: np.ndarray,
    max_iter: int,
    tol: float,
    rows: bool,
) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Fixed-point iteration from ``v`` in either layout (``scratch``: flat real buffer of
    ``v.size``); returns the final iterate (same layout, full batch), ``converged [B]``, the
    number of iterations run and whether every row converged."""
    axis = 1 if rows else 0  # batch axis
    batch = v.shape[axis]
    converged: np.ndarray | None = None  # [B], once rows have retired
    result: np.ndarray | None = None  # rows retired early are filled in as they leave
    active: np.ndarray | None = None  # the rows still iterating (None: all of them)
    # the head voltage against the rows: [B] (sweep), [B, m] (dense: a same-shape subtract)
    v0_b = v0 if rows else v0[:, None].repeat(v.shape[1], axis=1)
    change = scratch[: v.size].reshape(v.shape)  # |voltage change| of the iteration
    iterations = 0
    for iterations in range(1, max_iter + 1):
        voltage_step(plan, cs, v0_b, v, new, work, rows)
        delta = _max_reduce(_absolute(_subtract(new, v, out=work), out=change), axis=None)
        if delta < tol:  # every active row converged (NaN compares False)
            if active is None:
                converged = np.empty(batch, dtype=bool)
                converged.fill(True)  # (np.ones' Python wrapper costs more at small batches)
                return new, converged, iterations, True
            converged[active] = True  # type: ignore[index]
            merged = _merge(result, active, new, axis)
            return merged, converged, iterations, bool(converged.all())  # type: ignore[union-attr]
        if iterations >= RETIRE_FROM or not delta <= DIVERGED_STEP_PU:
            if active is None:
                active, converged = np.arange(batch), np.zeros(batch, dtype=bool)
            row_change = change.max(axis=1 - axis)
            done = row_change < tol
            bad = ~(row_change <= DIVERGED_STEP_PU)  # NaN / inf / huge: keep the last iterate
            keep = ~(done | bad)
            if not keep.all():
                if result is None:
                    result = np.empty_like(v)
                _put(result, active[done], np.compress(done, new, axis=axis), axis)
                _put(result, active[bad], np.compress(bad, v, axis=axis), axis)
                converged[active[done]] = True
                if not keep.any():
                    return result, converged, iterations, bool(converged.all())
                active = active[keep]
                cs, v0 = np.compress(keep, cs, axis=axis), v0[keep]
                v0_b = v0 if rows else v0[:, None].repeat(v.shape[1], axis=1)
                new = np.compress(keep, new, axis=axis)
                v, work, change = np.empty_like(new), np.empty_like(new), np.empty(new.shape)
        v, new = new, v
    if active is None:
        return v, np.zeros(batch, dtype=bool), iterations, False
    return _merge(result, active, v, axis), converged, iterations, False  # type: ignore[return-value]


def _merge(
    result: np.ndarray | None, active: np.ndarray, values: np.ndarray, axis: int
) -> np.ndarray:
    if result is None:
        return values
    _put(result, active, values, axis)
    return result


def _put(result: np.ndarray, index: np.ndarray, values: np.ndarray, axis: int) -> None:
    if index.size:
        if axis == 0:
            result[index] = values
        else:
            result[:, index] = values
