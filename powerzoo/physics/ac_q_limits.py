"""Reactive limits enforced in the batched AC power flow: PV -> PQ switching, row by row.

:func:`enforce_q_limits` takes the solution of :func:`powerzoo.physics.ac_pf.ac_power_flow`
with every voltage-controlling bus held at its set-point and switches, as pandapower's
``runpp(enforce_q_lims=True)`` (and MATPOWER's ``ENFORCE_Q_LIMS``) does, every PV bus whose
units' reactive output is outside their limits to a PQ bus with that output fixed at the
violated limit, re-solves, and repeats until no further bus leaves its limits.  A switched bus
never switches back (pandapower's rule); the slack bus is never switched (its units take the
balance, and may stay outside their limits: reported, not enforced).

Batched: each row ``b`` of the batch has its own set of switched buses (a mask ``[n, B]``),
and the re-solve is one Newton-Raphson over all rows that switched a bus in this pass, on the
extended unknowns (angle and magnitude at every PV and PQ bus), where a PV bus still holding
its voltage has the row ``dVm = 0`` in place of its reactive equation.  Its Jacobian is the
block-diagonal matrix of those rows, factorised with one ``splu`` per iteration; no Python
loop over rows.

Several units on one bus act as one with the summed limits (the bus data of
:class:`~powerzoo.physics.ac_network.ACNetwork`): pandapower splits a bus's reactive output
among its units in proportion to their reactive ranges, so every unit of the bus reaches its
limit together and the bus is switched with their summed limit.  Units: p.u. on the case's
base MVA inside, Mvar for the limits.
"""

from __future__ import annotations

import dataclasses
import weakref

import numpy as np
from scipy.sparse.linalg import splu

from powerzoo.physics.ac_network import ACNetwork
from powerzoo.physics.ac_newton import (
    DIVERGED,
    Solver,
    jacobian,
    jacobian_template,
    mismatch,
    rotate,
)

__all__ = ["enforce_q_limits"]


@dataclasses.dataclass(frozen=True, eq=False)
class _Extended:
    """The solver with magnitude unknowns at every PV bus too (``n_pq`` = ``n_pvpq``), and
    which template entries lie in a PV bus's reactive row."""

    solver: Solver
    n_pq: int  # PQ buses of the case (the first n_pq solver buses)
    entry_pv: np.ndarray  # [nnz] int: the PV bus (0 .. n_pv - 1) whose Q row holds entry e, or -1
    in_pv_row: np.ndarray  # [nnz] bool: entry_pv >= 0
    diagonal: np.ndarray  # [nnz] bool: entry on the Jacobian's diagonal


_EXTENDED: weakref.WeakKeyDictionary[Solver, _Extended] = weakref.WeakKeyDictionary()


def _extended(s: Solver) -> _Extended:
    cached = _EXTENDED.get(s)
    if cached is not None:
        return cached
    template = jacobian_template(s.ybus, s.n_pvpq, s.n_pvpq)
    ext = dataclasses.replace(s, n_pq=s.n_pvpq, **template)
    rows = template["j_indices"]
    n_j = template["j_indptr"].size - 1
    cols = np.repeat(np.arange(n_j), np.diff(template["j_indptr"]))
    pv = rows - s.n_pvpq - s.n_pq  # the PV bus of a reactive row
    entry_pv = np.where(pv >= 0, pv, -1)
    out = _Extended(ext, s.n_pq, entry_pv, entry_pv >= 0, rows == cols)
    _EXTENDED[s] = out
    return out


def _newton(ext: _Extended, v, vm, s_spec, hold, tol, max_iter, rows, iters, done) -> None:
    """Newton-Raphson on ``rows`` of ``v`` / ``vm`` (in place) with the PV buses where ``hold``
    (``[n_pv, B]`` bool) is set keeping their magnitude; ``done`` set where converged."""
    s, n_pq = ext.solver, ext.n_pq
    n_a = s.n_pvpq
    gather = np.maximum(ext.entry_pv, 0)
    active = rows
    for it in range(max_iter + 1):
        sub_v, sub_vm = v[:, active], vm[:, active]
        sub_hold = hold[:, active]
        f, _ = mismatch(s, sub_v, s_spec[:, active])
        f[n_a + n_pq :][sub_hold] = 0.0  # a held bus: its reactive output is free
        norm = np.abs(f).max(axis=0) if f.shape[0] else np.zeros(active.size)
        norm = np.where(np.isfinite(norm), norm, np.inf)
        ok = norm < tol
        done[active[ok]] = True
        go = ~ok & (norm < DIVERGED)
        if not go.any() or it == max_iter:
            return
        active, f = active[go], f[:, go]
        sub_v, sub_vm, sub_hold = sub_v[:, go], sub_vm[:, go], sub_hold[:, go]
        jac = jacobian(s, sub_v)
        data = jac.data.reshape(active.size, -1)
        # [k, nnz]: the entries of a held bus's reactive row become the row dVm = 0
        pinned = sub_hold.T[:, gather] & ext.in_pv_row
        data[pinned] = 0.0
        data[pinned & ext.diagonal] = 1.0
        try:
            lu = splu(jac, permc_spec="MMD_AT_PLUS_A")
        except RuntimeError:  # singular Jacobian: no solution near these rows' iterates
            return
        dx = lu.solve(np.ravel(f, order="F")).reshape(active.size, 2 * n_a).T
        dx[n_a + n_pq :][sub_hold] = 0.0
        rotate(sub_v[:n_a], np.negative(dx[:n_a]))
        new_vm = sub_vm[:n_a] - dx[n_a:]
        sub_v[:n_a] *= new_vm / sub_vm[:n_a]
        sub_vm[:n_a] = new_vm
        v[:, active], vm[:, active] = sub_v, sub_vm
        iters[active] += 1


def enforce_q_limits(
    net: ACNetwork,
    s: Solver,
    v: np.ndarray,
    vm: np.ndarray,
    s_spec: np.ndarray,
    done: np.ndarray,
    iters: np.ndarray,
    tol_pu: float,
    max_iter: int,
) -> np.ndarray:
    """Switch PV buses at their reactive limits to PQ and re-solve, in place (module docstring).

    ``v`` / ``vm`` ``[n, B]``: the solved state in solver bus order (complex / magnitude p.u.),
    ``s_spec`` ``[n, B]``: the specified injections [p.u.] (its reactive part at the switched
    buses gets their limit), ``done`` / ``iters`` ``[B]``: converged flags and iteration counts
    (updated; a row that does not converge after a switch is flagged and switches no further).
    Returns the side of the limit each bus was fixed at, ``[n, B]`` int8 (+1 the units' summed
    ``q_max``, -1 ``q_min``, 0 not switched), in solver order.
    """
    n_pq, n_a = s.n_pq, s.n_pvpq
    ext = _extended(s)
    b = v.shape[1]
    side = np.zeros((v.shape[0], b), dtype=np.int8)
    if n_a == n_pq:
        return side
    pv_public = np.full(v.shape[0], -1)
    pub = np.flatnonzero(net.bus_internal >= 0)
    pv_public[s.position[net.bus_internal[pub]]] = pub
    pv_bus = pv_public[n_pq:n_a]
    q_max = net.q_max_mvar[pv_bus][:, None] / net.base_mva
    q_min = net.q_min_mvar[pv_bus][:, None] / net.base_mva
    q_fixed = s_spec.imag[n_pq:n_a].copy()
    y_pv = s.ybus[n_pq:n_a]
    pv_side = side[n_pq:n_a]
    for _ in range(n_a - n_pq):
        q_gen = (v[n_pq:n_a] * np.conj(y_pv @ v)).imag - q_fixed
        free = (pv_side == 0) & done[None, :]
        over = free & (q_gen > q_max)
        under = free & (q_gen < q_min)
        new = over | under
        if not new.any():
            break
        pv_side[over], pv_side[under] = 1, -1
        limit = np.where(over, q_max, q_min)
        s_spec.imag[n_pq:n_a][new] = (q_fixed + limit)[new]
        rows = np.flatnonzero(new.any(axis=0))
        done[rows] = False
        _newton(ext, v, vm, s_spec, pv_side == 0, tol_pu, max_iter, rows, iters, done)
    return side
