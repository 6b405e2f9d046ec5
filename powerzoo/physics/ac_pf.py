"""Batched AC power flow on meshed networks (PV / PQ / slack buses), over a leading axis ``B``.

:func:`ac_power_flow` solves the full AC power-flow equations ``S_i = V_i conj((Y V)_i)`` of an
:class:`~powerzoo.physics.ac_network.ACNetwork` (pandapower's model of the network of that
name) for ``B`` injection scenarios at once, in polar coordinates, with the unknowns of
MATPOWER / pandapower's Newton-Raphson: the angle at PV and PQ buses, the magnitude at PQ
buses.  Two stages, both vectorised over the batch (no Python loop over ``B``):

1. **Chord Newton** (the default path).  The Newton Jacobian of the case at its own loading
   (pandapower's solution) is LU-factorised once per network (``scipy.sparse.linalg.splu``) and
   every iteration solves it for all ``B`` mismatch vectors at once, from that solution as the
   starting point.  The fixed point is the power-flow solution itself, so a row stops at the
   same mismatch tolerance as Newton-Raphson (rate measured: about one decimal digit per
   iteration for loads within +-10 % of the case's; about 6-8 iterations).
2. **Newton-Raphson** for the rows the chord iteration does not finish (too slow a decrease,
   ``chord_max_iter`` reached, or divergence): the exact Jacobian of every such row, assembled
   as one sparse block-diagonal matrix over those rows and factorised with one ``splu`` per
   iteration, from the rows' starting point, up to ``max_iter`` iterations.

A row converges when the largest active / reactive mismatch of its equations is below
``tol_pu`` (per unit on the case's base MVA; 1e-8 p.u. is pandapower's default
``tolerance_mva=1e-8``, which it compares to the same p.u. mismatch).  A row that does not
converge, or diverges to a non-finite state, is flagged in ``converged`` and never raises; it
holds its last finite iterate, which is **not** a solution.

Generator reactive limits are **reported, not enforced** (no PV -> PQ switching; this is
pandapower's ``enforce_q_lims=False``): ``gen_q_mvar`` is the reactive output the
voltage-controlling units need at each PV / slack bus and ``q_limit_violated`` flags where it is
outside the units' summed limits.  Units: MW, Mvar, MVA, p.u., degrees.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from powerzoo.physics.ac_network import PQ, REF, ACNetwork, ac_network

__all__ = ["ACPFResult", "ac_power_flow"]

_DIVERGED = 1e6  # a mismatch above this (p.u.) counts as diverged


@dataclass(frozen=True, eq=False)
class ACPFResult:
    """AC power-flow result for ``B`` scenarios; ``[B, n]`` arrays (or ``[n]`` for 1-D input).

    Bus arrays follow the network's public bus order, branch arrays its branch order; buses
    and branches out of service hold NaN.  Rows with ``converged == False`` hold the last finite
    iterate, not a solution.  Arrays may be transposed (Fortran-ordered) views.
    """

    vm_pu: np.ndarray  # voltage magnitude [p.u.]
    va_deg: np.ndarray  # voltage angle [deg]
    converged: np.ndarray  # [B] bool
    iterations: np.ndarray  # [B] int: chord + Newton iterations the row took
    p_mw: np.ndarray  # net active injection at each bus, computed (slack: its balance) [MW]
    q_mvar: np.ndarray  # net reactive injection, computed (PV / slack: with the units') [Mvar]
    gen_q_mvar: np.ndarray  # voltage-controlling units' reactive output, PV/slack buses [Mvar]
    q_limit_violated: np.ndarray  # bool, gen_q_mvar outside the units' summed limits
    p_from_mw: np.ndarray  # [B, n_branch] branch flow into the branch at its from-end [MW]
    q_from_mvar: np.ndarray
    p_to_mw: np.ndarray  # at the to-end [MW]
    q_to_mvar: np.ndarray
    loading_percent: np.ndarray  # 100 * max(|S_from|, |S_to|) / rate_mva (0 when unrated)


@dataclass(frozen=True, eq=False)
class _Solver:
    """Per-network matrices of the solve (built once per ACNetwork object)."""

    ybus: sp.csr_matrix
    yf: sp.csr_matrix
    yt: sp.csr_matrix
    pvpq: np.ndarray
    pq: np.ndarray
    ref: np.ndarray
    ctrl: np.ndarray  # internal PV + slack buses
    chord_lu: object  # splu of the base-case Jacobian
    # exact-Jacobian template: J[j_row, j_col] = kind[src](ybus nonzero e), in CSC order
    j_kind: np.ndarray
    j_src: np.ndarray
    j_indices: np.ndarray
    j_indptr: np.ndarray
    diag: np.ndarray  # position of (i, i) in ybus.data


_SOLVERS: weakref.WeakKeyDictionary[ACNetwork, _Solver] = weakref.WeakKeyDictionary()


def _solver(net: ACNetwork) -> _Solver:
    cached = _SOLVERS.get(net)
    if cached is not None:
        return cached
    n, f, t = net.n_internal, net.branch_from, net.branch_to
    m = f.size
    rows = np.arange(m)
    yf = sp.csr_matrix(
        (np.concatenate([net.y_ff, net.y_ft]), (np.r_[rows, rows], np.r_[f, t])), (m, n)
    )
    yt = sp.csr_matrix(
        (np.concatenate([net.y_tf, net.y_tt]), (np.r_[rows, rows], np.r_[f, t])), (m, n)
    )
    cf = sp.csr_matrix((np.ones(m), (rows, f)), (m, n))
    ct = sp.csr_matrix((np.ones(m), (rows, t)), (m, n))
    ybus = (cf.T @ yf + ct.T @ yt + sp.diags(net.y_shunt) + sp.eye(n) * 0).tocsr()
    ybus.sum_duplicates()
    ybus.sort_indices()
    pq = np.flatnonzero(net.bus_type == PQ)
    ref = np.flatnonzero(net.bus_type == REF)
    pvpq = np.flatnonzero(net.bus_type != REF)
    ctrl = np.flatnonzero(net.bus_type != PQ)
    # template of the Jacobian's sparsity, from the nonzeros of ybus (all diagonals included)
    coo = ybus.tocoo()
    e = np.arange(coo.nnz)
    r, c = coo.row, coo.col
    diag = np.empty(n, dtype=np.int64)
    diag[r[r == c]] = e[r == c]
    p_row = np.full(n, -1)
    p_row[pvpq] = np.arange(pvpq.size)
    q_row = np.full(n, -1)
    q_row[pq] = pvpq.size + np.arange(pq.size)
    kinds, srcs, jr, jc = [], [], [], []
    # kind: 0 Re dS/dVa, 1 Re dS/dVm, 2 Im dS/dVa, 3 Im dS/dVm
    for kind, row_map, col_map in (
        (0, p_row, p_row),
        (1, p_row, q_row),
        (2, q_row, p_row),
        (3, q_row, q_row),
    ):
        keep = (row_map[r] >= 0) & (col_map[c] >= 0)
        kinds.append(np.full(keep.sum(), kind))
        srcs.append(e[keep])
        jr.append(row_map[r[keep]])
        jc.append(col_map[c[keep]])
    kind_a, src_a, jr_a, jc_a = (np.concatenate(x) for x in (kinds, srcs, jr, jc))
    order = np.lexsort((jr_a, jc_a))  # CSC: by column, then row
    n_j = pvpq.size + pq.size
    indptr = np.zeros(n_j + 1, dtype=np.int64)
    np.add.at(indptr, jc_a + 1, 1)
    np.cumsum(indptr, out=indptr)
    solver = _Solver(
        ybus=ybus,
        yf=yf,
        yt=yt,
        pvpq=pvpq,
        pq=pq,
        ref=ref,
        ctrl=ctrl,
        chord_lu=None,
        j_kind=kind_a[order],
        j_src=src_a[order],
        j_indices=jr_a[order],
        j_indptr=indptr,
        diag=diag,
    )
    jac0 = _jacobian(solver, net.v_base[:, None])
    object.__setattr__(solver, "chord_lu", splu(jac0, permc_spec="COLAMD"))
    _SOLVERS[net] = solver
    return solver


def _jacobian(s: _Solver, v: np.ndarray) -> sp.csc_matrix:
    """Block-diagonal Newton Jacobian ``[k n_j, k n_j]`` of the ``k`` states ``v [n, k]``."""
    y = s.ybus
    coo_row = np.repeat(np.arange(y.shape[0]), np.diff(y.indptr))
    current = y @ v
    t = v[coo_row] * np.conj(y.data[:, None] * v[y.indices])  # V_i conj(y_ik V_k)
    d_va = -1j * t
    d_vm = t / np.abs(v[y.indices])
    d_va[s.diag] += 1j * v * np.conj(current)
    d_vm[s.diag] += np.conj(current) * v / np.abs(v)
    parts = np.stack([d_va.real, d_vm.real, d_va.imag, d_vm.imag])
    values = parts[s.j_kind, s.j_src]  # [nnz_j, k]
    k = v.shape[1]
    n_j, nnz = s.j_indptr.size - 1, s.j_indices.size
    indices = (s.j_indices[None, :] + n_j * np.arange(k)[:, None]).ravel()
    indptr = np.concatenate(
        [(s.j_indptr[:-1][None, :] + nnz * np.arange(k)[:, None]).ravel(), [nnz * k]]
    )
    return sp.csc_matrix((values.T.ravel(), indices, indptr), shape=(k * n_j, k * n_j))


def _mismatch(s: _Solver, v: np.ndarray, s_spec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stacked mismatch ``[n_j, k]`` (P at PV+PQ, Q at PQ) [p.u.] and its max-norm ``[k]``."""
    mis = v * np.conj(s.ybus @ v) - s_spec
    f = np.concatenate([mis.real[s.pvpq], mis.imag[s.pq]])
    norm = np.abs(f).max(axis=0) if f.shape[0] else np.zeros(f.shape[1])
    return f, np.where(np.isfinite(norm), norm, np.inf)


def _step(s: _Solver, va: np.ndarray, vm: np.ndarray, dx: np.ndarray) -> None:
    n_a = s.pvpq.size
    va[s.pvpq] -= dx[:n_a]
    vm[s.pq] -= dx[n_a:]


def _chord(s, va, vm, s_spec, tol, max_iter, iters, done):
    """Chord iterations on all rows; fills ``iters`` and ``done`` (converged rows)."""
    active = np.arange(va.shape[1])
    prev = np.full(active.size, np.inf)
    for _ in range(max_iter + 1):
        v = vm[:, active] * np.exp(1j * va[:, active])
        f, norm = _mismatch(s, v, s_spec[:, active])
        ok = norm < tol
        done[active[ok]] = True
        # keep iterating rows that are not converged and still shrink fast enough
        go = ~ok & (norm < 0.5 * prev) & (norm < _DIVERGED)
        if not go.any() or _ == max_iter:
            return
        if not go.all():
            active, f, norm = active[go], f[:, go], norm[go]
        prev = norm
        dx = s.chord_lu.solve(np.ascontiguousarray(f))
        sub_va, sub_vm = va[:, active], vm[:, active]
        _step(s, sub_va, sub_vm, dx)
        va[:, active], vm[:, active] = sub_va, sub_vm
        iters[active] += 1


def _newton(s, va, vm, s_spec, tol, max_iter, rows, iters, done):
    """Newton-Raphson on the ``rows`` given (block-diagonal Jacobian, one splu per step)."""
    active = rows
    n_j = s.j_indptr.size - 1
    for it in range(max_iter + 1):
        v = vm[:, active] * np.exp(1j * va[:, active])
        f, norm = _mismatch(s, v, s_spec[:, active])
        ok = norm < tol
        done[active[ok]] = True
        go = ~ok & (norm < _DIVERGED)
        if not go.any() or it == max_iter:
            return
        active, f, v = active[go], f[:, go], v[:, go]
        try:
            dx = splu(_jacobian(s, v), permc_spec="COLAMD").solve(np.ravel(f, order="F"))
        except RuntimeError:  # singular Jacobian: these rows have no solution nearby
            return
        dx = dx.reshape(active.size, n_j).T
        sub_va, sub_vm = va[:, active], vm[:, active]
        _step(s, sub_va, sub_vm, dx)
        va[:, active], vm[:, active] = sub_va, sub_vm
        iters[active] += 1


def _as_batch(x, n: int, what: str, b: int | None) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim not in (1, 2) or arr.shape[-1] != n:
        raise ValueError(
            f"{what} must have shape [B, {n}] or [{n}] (one value per bus in the case's bus "
            f"order); got {list(arr.shape)}"
        )
    if arr.ndim == 2 and b is not None and arr.shape[0] != b:
        raise ValueError(f"{what} has {arr.shape[0]} rows but p_mw has {b}")
    return arr


def ac_power_flow(
    case: str | ACNetwork,
    p_mw: np.ndarray,
    q_mvar: np.ndarray,
    vm_pu: np.ndarray | None = None,
    *,
    tol_pu: float = 1e-8,
    max_iter: int = 10,
    chord_max_iter: int = 30,
) -> ACPFResult:
    """Solve the AC power flow for ``B`` scenarios (see the module docstring).

    ``case``: a network name (``"case118"``, ``"GBnetwork"``, ... see
    :func:`~powerzoo.physics.ac_network.ac_network`) or an :class:`ACNetwork`.
    ``p_mw`` / ``q_mvar``: net injections (generation - demand) ``[B, n_bus]`` or ``[n_bus]``
    in the case's bus order [MW / Mvar].  At the slack bus ``p_mw`` and at PV and slack buses
    ``q_mvar`` are the fixed part only (e.g. minus the demand there): the power flow computes
    the slack / voltage-controlling units' output on top.  ``vm_pu``: voltage set-points
    ``[B, n_bus]`` or ``[n_bus]`` [p.u.], read at PV and slack buses only (default: the
    case's).  ``tol_pu``: convergence tolerance on the largest mismatch [p.u.];
    ``max_iter``: Newton-Raphson iterations for the rows the chord stage leaves;
    ``chord_max_iter``: chord iterations.  1-D inputs give 1-D outputs (``converged`` and
    ``iterations`` then 0-d).  Raises ``ValueError`` for inputs of the wrong shape.
    """
    net = ac_network(case) if isinstance(case, str) else case
    if not isinstance(net, ACNetwork):
        raise ValueError(f"case must be a network name or an ACNetwork; got {type(case)}")
    n = net.n_bus
    p = _as_batch(p_mw, n, "p_mw", None)
    q = _as_batch(q_mvar, n, "q_mvar", None)
    single = p.ndim == 1 and q.ndim == 1 and (vm_pu is None or np.ndim(vm_pu) == 1)
    b = max(p.shape[0] if p.ndim == 2 else 1, q.shape[0] if q.ndim == 2 else 1)
    for arr, what in ((p, "p_mw"), (q, "q_mvar")):
        if arr.ndim == 2 and arr.shape[0] != b:
            raise ValueError(f"{what} has {arr.shape[0]} rows but the batch has {b}")
    vm_set = net.vm_pu if vm_pu is None else _as_batch(vm_pu, n, "vm_pu", None)
    if vm_set.ndim == 2:
        if vm_set.shape[0] != b and not (single or b == 1):
            raise ValueError(f"vm_pu has {vm_set.shape[0]} rows but the batch has {b}")
        b = max(b, vm_set.shape[0])
    s = _solver(net)
    pub = np.flatnonzero(net.bus_internal >= 0)
    idx = net.bus_internal[pub]
    n_int, base = net.n_internal, net.base_mva

    def internal(x: np.ndarray) -> np.ndarray:  # public [B?, n] -> internal [n_int, b]
        out = np.empty((n_int, b))
        out[idx] = np.broadcast_to(np.atleast_2d(x)[:, pub], (b, pub.size)).T
        return out

    s_spec = (internal(p) + 1j * internal(q)) / base
    vm = np.repeat(np.abs(net.v_base)[:, None], b, axis=1)
    vm[s.ctrl] = internal(vm_set)[s.ctrl]
    va = np.repeat(np.angle(net.v_base)[:, None], b, axis=1)
    if not np.isfinite(vm[s.ctrl]).all():
        raise ValueError("vm_pu must be finite at the PV and slack buses")
    start_va, start_vm = va.copy(), vm.copy()
    iters = np.zeros(b, dtype=np.int64)
    done = np.zeros(b, dtype=bool)
    _chord(s, va, vm, s_spec, tol_pu, chord_max_iter, iters, done)
    left = np.flatnonzero(~done)
    if left.size:
        # restart the unfinished rows from the starting point with the exact Jacobian
        va[:, left], vm[:, left] = start_va[:, left], start_vm[:, left]
        _newton(s, va, vm, s_spec, tol_pu, max_iter, left, iters, done)
    return _result(net, s, va, vm, s_spec, p, q, done, iters, single)


def _result(net, s, va, vm, s_spec, p, q, done, iters, single) -> ACPFResult:
    bad = ~np.isfinite(va).all(axis=0) | ~np.isfinite(vm).all(axis=0)
    done &= ~bad
    v = vm * np.exp(1j * va)
    s_bus = v * np.conj(s.ybus @ v) * net.base_mva  # [n_int, B] MVA
    pub = np.flatnonzero(net.bus_internal >= 0)
    idx = net.bus_internal[pub]
    b = v.shape[1]

    def public(x: np.ndarray) -> np.ndarray:
        out = np.full((net.n_bus, b), np.nan)
        out[pub] = x[idx]
        return out.T

    q_fixed = np.broadcast_to(np.atleast_2d(q), (b, net.n_bus))
    gen_q = public(s_bus.imag) - q_fixed
    is_ctrl = np.zeros(net.n_bus, dtype=bool)
    is_ctrl[pub[np.isin(idx, s.ctrl)]] = True
    gen_q[:, ~is_ctrl] = np.nan
    violated = (gen_q > net.q_max_mvar + 1e-6) | (gen_q < net.q_min_mvar - 1e-6)
    br = np.flatnonzero(net.branch_internal >= 0)
    bidx = net.branch_internal[br]
    s_from = v[net.branch_from] * np.conj(s.yf @ v) * net.base_mva
    s_to = v[net.branch_to] * np.conj(s.yt @ v) * net.base_mva

    def branch(x: np.ndarray) -> np.ndarray:
        out = np.full((net.n_branch, b), np.nan)
        out[br] = x[bidx]
        return out.T

    mva = branch(np.maximum(np.abs(s_from), np.abs(s_to)))
    out = ACPFResult(
        vm_pu=public(vm),
        va_deg=public(np.degrees(va)),
        converged=done,
        iterations=iters,
        p_mw=public(s_bus.real),
        q_mvar=public(s_bus.imag),
        gen_q_mvar=gen_q,
        q_limit_violated=violated,
        p_from_mw=branch(s_from.real),
        q_from_mvar=branch(s_from.imag),
        p_to_mw=branch(s_to.real),
        q_to_mvar=branch(s_to.imag),
        loading_percent=100.0 * mva / net.rate_mva,
    )
    if not single:
        return out
    return ACPFResult(**{k: getattr(out, k)[0] for k in out.__dataclass_fields__})
