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

Generator reactive limits are **reported, not enforced** by default (no PV -> PQ switching;
pandapower's ``enforce_q_lims=False``): ``gen_q_mvar`` is the reactive output the
voltage-controlling units need at each PV / slack bus and ``q_limit_violated`` flags where it is
outside the units' summed limits.  With ``enforce_q_lims=True`` every PV bus whose units leave
their limits is switched to a PQ bus with its output fixed at the violated limit and the row is
re-solved, until no further bus leaves its limits (pandapower's ``runpp(enforce_q_lims=True)``,
:mod:`powerzoo.physics.ac_q_limits`); ``q_limit_side`` then says which buses were switched and
at which limit, ``n_q_limited`` how many per row; the slack bus is never switched.  Units: MW,
Mvar, MVA, p.u., degrees.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from powerzoo.physics.ac_network import ACNetwork, ac_network
from powerzoo.physics.ac_newton import (
    CHORD_REFRESHES,
    REFRESH_MIN_ROWS,
    iterate,
    jacobian,
    solver_of,
)
from powerzoo.physics.ac_q_limits import enforce_q_limits
from powerzoo.physics.batched_lu import BatchedLU
from powerzoo.physics.blas_threads import one_blas_thread

__all__ = ["ACPFResult", "ac_power_flow"]


@dataclass(frozen=True, eq=False)
class ACPFResult:
    """AC power-flow result for ``B`` scenarios; ``[B, n]`` arrays (or ``[n]`` for 1-D input).

    Bus arrays follow the network's public bus order, branch arrays its branch order; buses
    and branches out of service hold NaN.  Rows with ``converged == False`` hold the last finite
    iterate, not a solution.  The branch quantities are computed on first access.  Arrays may
    be transposed (Fortran-ordered) views.  ``p_mw`` / ``q_mvar`` are the injections into the
    network model, whose shunts are part of it (pandapower's ``res_bus`` counts the shunts'
    consumption at the bus instead).
    """

    vm_pu: np.ndarray  # voltage magnitude [p.u.]
    va_deg: np.ndarray  # voltage angle [deg]
    converged: np.ndarray  # [B] bool
    iterations: np.ndarray  # [B] int: chord + Newton iterations the row took
    p_mw: np.ndarray  # net active injection at each bus, computed (slack: its balance) [MW]
    q_mvar: np.ndarray  # net reactive injection, computed (PV / slack: with the units') [Mvar]
    gen_q_mvar: np.ndarray  # voltage-controlling units' reactive output, PV/slack buses [Mvar]
    q_limit_violated: np.ndarray  # bool, gen_q_mvar outside the units' summed limits
    q_limit_side: np.ndarray  # int8: +1 / -1 bus switched to PQ at the units' q_max / q_min
    n_q_limited: np.ndarray  # [B] int: buses switched to PQ at a reactive limit
    network: ACNetwork = field(repr=False)
    voltage: np.ndarray = field(repr=False)  # [n_internal, B] complex, solver bus order
    single: bool = field(default=False, repr=False)

    @functools.cached_property
    def _branch(self) -> tuple[np.ndarray, np.ndarray]:
        net, s, v = self.network, solver_of(self.network), self.voltage
        s_from = v[s.branch_from] * np.conj(s.yf @ v) * net.base_mva
        s_to = v[s.branch_to] * np.conj(s.yt @ v) * net.base_mva
        br = np.flatnonzero(net.branch_internal >= 0)
        out = np.full((2, net.n_branch, v.shape[1]), np.nan + 0j)
        out[0, br] = s_from[net.branch_internal[br]]
        out[1, br] = s_to[net.branch_internal[br]]
        out = np.moveaxis(out, 2, 1)  # [2, B, n_branch]
        return (out[0, 0], out[1, 0]) if self.single else (out[0], out[1])

    @property
    def p_from_mw(self) -> np.ndarray:
        """Active power into each branch at its from-end ``[B, n_branch]`` [MW]."""
        return self._branch[0].real

    @property
    def q_from_mvar(self) -> np.ndarray:
        """Reactive power into each branch at its from-end [Mvar]."""
        return self._branch[0].imag

    @property
    def p_to_mw(self) -> np.ndarray:
        """Active power into each branch at its to-end [MW]."""
        return self._branch[1].real

    @property
    def q_to_mvar(self) -> np.ndarray:
        """Reactive power into each branch at its to-end [Mvar]."""
        return self._branch[1].imag

    @property
    def loading_percent(self) -> np.ndarray:
        """``100 max(|S_from|, |S_to|) / rate_mva`` (0 for unrated branches) [%]."""
        mva = np.maximum(np.abs(self._branch[0]), np.abs(self._branch[1]))
        return 100.0 * mva / self.network.rate_mva


_BUS_FIELDS = (
    "vm_pu",
    "va_deg",
    "converged",
    "iterations",
    "p_mw",
    "q_mvar",
    "gen_q_mvar",
    "q_limit_violated",
    "q_limit_side",
    "n_q_limited",
)


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
    enforce_q_lims: bool = False,
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
    ``chord_max_iter``: chord iterations; ``enforce_q_lims``: switch PV buses at their units'
    reactive limits to PQ (module docstring; each switching pass re-solves the rows that
    switched with up to ``max_iter`` Newton-Raphson iterations).  1-D inputs give 1-D outputs
    (``converged`` and ``iterations`` then 0-d).  Raises ``ValueError`` for inputs of the
    wrong shape.

    Args:
        case: A network name or an ``ACNetwork``.
        p_mw: Net active injections [B, n_bus] or [n_bus], MW.
        q_mvar: Net reactive injections [B, n_bus] or [n_bus], Mvar.
        vm_pu: Voltage set-points at PV and slack buses, p.u. (default: the case's).
        tol_pu: Convergence tolerance on the largest mismatch, p.u.
        max_iter: Newton-Raphson iterations after the chord stage.
        chord_max_iter: Chord iterations.
        enforce_q_lims: Switch PV buses whose units leave their reactive limits to PQ.

    Returns:
        Voltages (p.u., degrees), computed injections (MW, Mvar), the voltage-controlling
        units' reactive output (Mvar), the buses held at a reactive limit and convergence per
        row.
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
    # one BLAS thread: SuperLU's factorisations and solves call BLAS, whose threaded kernels may
    # sum in another order; the same bits whatever the thread count (physics.blas_threads)
    with one_blas_thread():
        return _solve(
            net, p, q, vm_set, b, single, tol_pu, max_iter, chord_max_iter, enforce_q_lims
        )


def _solve(net, p, q, vm_set, b, single, tol_pu, max_iter, chord_max_iter, q_lims) -> ACPFResult:
    """The two stages of :func:`ac_power_flow` on validated inputs."""
    s = solver_of(net)
    pub = np.flatnonzero(net.bus_internal >= 0)
    idx = s.position[net.bus_internal[pub]]
    n_int = net.n_internal

    def internal(x: np.ndarray) -> np.ndarray:  # public [B?, n] -> solver order [n_int, b]
        out = np.empty((n_int, b))
        out[idx] = np.broadcast_to(np.atleast_2d(x)[:, pub], (b, pub.size)).T
        return out

    s_spec = internal(p) + 1j * internal(q)
    s_spec /= net.base_mva
    vm = np.repeat(np.abs(s.v_base)[:, None], b, axis=1)
    vm[s.n_pq :] = internal(vm_set)[s.n_pq :]
    if not np.isfinite(vm[s.n_pq :]).all():
        raise ValueError("vm_pu must be finite at the PV and slack buses")
    v = vm * (s.v_base / np.abs(s.v_base))[:, None]
    start_v, start_vm = v.copy(), vm.copy()
    iters = np.zeros(b, dtype=np.int64)
    done = np.zeros(b, dtype=bool)
    rows = np.arange(b)
    iterate(s, v, vm, s_spec, tol_pu, chord_max_iter, rows, iters, done, exact=False)
    left = np.flatnonzero(~done & np.isfinite(v).all(axis=0))
    for _ in range(CHORD_REFRESHES):
        if left.size < REFRESH_MIN_ROWS:
            break
        # one Jacobian shared by the rows left, at their mean state, then chord from where they
        # are: far cheaper than a Newton step of every row when the rows are alike
        mean_v = vm[:, left].mean(axis=1) * np.exp(1j * np.angle(v[:, left]).mean(axis=1))
        shared = BatchedLU(jacobian(s, mean_v[:, None]))
        iterate(s, v, vm, s_spec, tol_pu, chord_max_iter, left, iters, done, False, shared)
        left = np.flatnonzero(~done & np.isfinite(v).all(axis=0))
    left = np.flatnonzero(~done)
    if left.size:
        # restart the unfinished rows from the starting point with the exact Jacobian
        v[:, left], vm[:, left] = start_v[:, left], start_vm[:, left]
        iterate(s, v, vm, s_spec, tol_pu, max_iter, left, iters, done, exact=True)
    side = np.zeros(v.shape, dtype=np.int8)
    if q_lims:
        side = enforce_q_limits(net, s, v, vm, s_spec, done, iters, tol_pu, max_iter)
    return _result(net, s, v, q, done, iters, single, side)


def _result(net, s, v, q, done, iters, single, side) -> ACPFResult:
    done &= np.isfinite(v).all(axis=0)
    s_bus = v * np.conj(s.ybus @ v)
    s_bus *= net.base_mva  # [n_int, B] MVA
    pub = np.flatnonzero(net.bus_internal >= 0)
    idx = s.position[net.bus_internal[pub]]
    b = v.shape[1]
    identity = pub.size == net.n_bus and np.array_equal(idx, np.arange(idx.size))

    def public(x: np.ndarray) -> np.ndarray:
        if identity:
            return x.T
        out = np.full((net.n_bus, b), np.nan)
        out[pub] = x[idx]
        return out.T

    q_fixed = np.broadcast_to(np.atleast_2d(q), (b, net.n_bus))
    gen_q = public(s_bus.imag) - q_fixed
    is_ctrl = np.zeros(net.n_bus, dtype=bool)
    is_ctrl[pub[idx >= s.n_pq]] = True
    gen_q[:, ~is_ctrl] = np.nan
    q_side = np.zeros((b, net.n_bus), dtype=np.int8)
    q_side[:, pub] = side[idx].T
    # a switched bus holds its limit (the flow meets it to the tolerance): report it exactly
    gen_q = np.where(q_side > 0, net.q_max_mvar, np.where(q_side < 0, net.q_min_mvar, gen_q))
    violated = (gen_q > net.q_max_mvar + 1e-6) | (gen_q < net.q_min_mvar - 1e-6)
    out = ACPFResult(
        vm_pu=public(np.abs(v)),
        va_deg=public(np.degrees(np.angle(v))),
        converged=done,
        iterations=iters,
        p_mw=public(s_bus.real),
        q_mvar=public(s_bus.imag),
        gen_q_mvar=gen_q,
        q_limit_violated=violated,
        q_limit_side=q_side,
        n_q_limited=np.count_nonzero(q_side, axis=1),
        network=net,
        voltage=v,
        single=single,
    )
    if not single:
        return out
    return ACPFResult(
        **{k: getattr(out, k)[0] for k in _BUS_FIELDS}, network=net, voltage=v, single=True
    )
