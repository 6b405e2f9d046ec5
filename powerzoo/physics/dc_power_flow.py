"""Batched DC power flow: a dense PTDF on small networks, a sparse factorisation on any size.

Lossless DC model (MATPOWER's and pandapower's ``rundcpp``): branch flow
``f_l = b_l * (theta_from - theta_to - shift_l)`` with ``b_l = 1 / (x_l * tap_l)``; a phase
shifter's angle ``shift_l`` acts as the constant flow ``-b_l * shift_l`` plus equal and opposite
injections at its ends (:func:`phase_shift_flow_mw` gives the resulting constant flow offset).
The reference (slack) bus absorbs any injection mismatch, which is why its PTDF column is 0.

:func:`dc_power_flow` works at any size: up to :data:`DENSE_MAX_BUSES` buses on a connected
network it is one product with the cached PTDF (as before); above that, or when the network has
several islands, it solves with the sparse LU of :mod:`powerzoo.physics.dc_sparse` (factorised
once per case; islands and isolated buses are described there). :func:`ptdf_matrix`,
:func:`generation_shift_matrix` and :func:`gen_bus_matrix` are dense and refuse networks above
:data:`DENSE_MAX_BUSES` buses (:func:`ptdf_rows` gives selected PTDF rows at any size).
All public functions take a leading batch dimension ``B`` (1-D inputs are also accepted and
give 1-D outputs); no Python loop runs over ``B``.
"""

from __future__ import annotations

import weakref

import numpy as np

from powerzoo.physics.blas_threads import one_blas_thread
from powerzoo.physics.dc_sparse import dc_factor
from powerzoo.physics.network import NetworkCase

__all__ = [
    "DENSE_MAX_BUSES",
    "branch_susceptance_pu",
    "bus_injection_mw",
    "dc_power_flow",
    "gen_bus_matrix",
    "generation_shift_matrix",
    "line_overload_mw",
    "overload_limits_mw",
    "phase_shift_flow_mw",
    "ptdf_matrix",
    "ptdf_rows",
]

# Largest network [buses] for which the dense matrices (PTDF, generator-bus incidence) are built.
DENSE_MAX_BUSES = 1000

_PTDF_CACHE: weakref.WeakKeyDictionary[NetworkCase, np.ndarray] = weakref.WeakKeyDictionary()
_PTDF_T_CACHE: weakref.WeakKeyDictionary[NetworkCase, np.ndarray] = weakref.WeakKeyDictionary()
_GEN_BUS_CACHE: weakref.WeakKeyDictionary[NetworkCase, np.ndarray] = weakref.WeakKeyDictionary()
_GSF_CACHE: weakref.WeakKeyDictionary[NetworkCase, np.ndarray] = weakref.WeakKeyDictionary()
_SHIFT_CACHE: weakref.WeakKeyDictionary[NetworkCase, np.ndarray] = weakref.WeakKeyDictionary()


def _check_dense(case: NetworkCase, what: str) -> None:
    if case.n_bus > DENSE_MAX_BUSES:
        raise ValueError(
            f"{case.name}: {what} is a dense matrix, built only for networks of at most "
            f"{DENSE_MAX_BUSES} buses (this one has {case.n_bus}); use dc_power_flow (sparse "
            "at any size) or ptdf_rows for the rows of the branches you monitor"
        )


def branch_susceptance_pu(case: NetworkCase) -> np.ndarray:
    """DC branch susceptance ``1 / (x * tap)`` [p.u.], 0 for out-of-service branches."""
    b = 1.0 / (case.branch_x_pu * case.branch_tap)
    return np.where(case.branch_in_service, b, 0.0)


def ptdf_matrix(case: NetworkCase) -> np.ndarray:
    """Power transfer distribution factors ``[n_branch, n_bus]`` (MW flow per MW injected).

    Column ``j`` is the flow change when 1 MW is injected at bus ``j`` and withdrawn at the
    slack bus; the slack column is zero.  Cached per case object; the result is read-only.
    Dense: raises ``ValueError`` above :data:`DENSE_MAX_BUSES` buses or on a network with
    several islands. With phase shifters the flow is ``PTDF @ p + phase_shift_flow_mw(case)``.

    Args:
        case: A connected transmission case.

    Returns:
        Read-only array [n_branch, n_bus], MW per MW.
    """
    cached = _PTDF_CACHE.get(case)
    if cached is not None:
        return cached
    _check_dense(case, "the PTDF")
    n_bus, n_branch = case.n_bus, case.n_branch
    b = branch_susceptance_pu(case)
    rows = np.arange(n_branch)
    incidence = np.zeros((n_branch, n_bus))
    incidence[rows, case.branch_from_bus] += 1.0
    incidence[rows, case.branch_to_bus] -= 1.0
    b_f = b[:, None] * incidence  # [n_branch, n_bus]
    b_bus = incidence.T @ b_f  # [n_bus, n_bus]
    keep = np.flatnonzero(np.arange(n_bus) != case.slack_bus)
    b_red = b_bus[np.ix_(keep, keep)]
    if dc_factor(case).reference.size > 1:
        raise ValueError(
            f"{case.name}: network is not connected (several islands); the dense PTDF needs "
            "one island, dc_power_flow handles several"
        )
    try:
        # PTDF_red = B_f,red @ inv(B_red) (B_red is indefinite with series capacitors, x < 0).
        # numpy rather than scipy.linalg: importing scipy.linalg costs ~0.2 s of env construction.
        # on one BLAS thread: a parallel LU gives other last bits (physics.blas_threads)
        with one_blas_thread(b_red.size):
            ptdf_red = np.linalg.solve(b_red, b_f[:, keep].T).T
    except np.linalg.LinAlgError as err:
        raise ValueError(f"{case.name}: singular B matrix") from err
    ptdf = np.zeros((n_branch, n_bus))
    ptdf[:, keep] = ptdf_red
    ptdf.setflags(write=False)
    ptdf_t = np.ascontiguousarray(ptdf.T)  # [n_bus, n_branch], for row-major batched matmul
    ptdf_t.setflags(write=False)
    _PTDF_CACHE[case] = ptdf
    _PTDF_T_CACHE[case] = ptdf_t
    return ptdf


def gen_bus_matrix(case: NetworkCase) -> np.ndarray:
    """Generator-to-bus incidence ``[n_gen, n_bus]`` (0 rows for out-of-service units).
    Dense: raises ``ValueError`` above :data:`DENSE_MAX_BUSES` buses."""
    cached = _GEN_BUS_CACHE.get(case)
    if cached is not None:
        return cached
    _check_dense(case, "the generator-bus incidence")
    c_g = np.zeros((case.n_gen, case.n_bus))
    c_g[np.arange(case.n_gen), case.gen_bus] = case.gen_in_service.astype(float)
    c_g.setflags(write=False)
    _GEN_BUS_CACHE[case] = c_g
    return c_g


def bus_injection_mw(
    case: NetworkCase,
    gen_p_mw: np.ndarray,
    load_mw: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Net bus injection ``[B, n_bus]`` [MW] = generation at the bus - demand at the bus.

    ``gen_p_mw``: ``[B, n_gen]`` or ``[n_gen]``; ``load_mw``: ``[B, n_bus]``, ``[n_bus]`` or
    ``None`` (the case's fixed demand ``bus_pd_mw``).  Out-of-service units inject nothing.
    ``out``: an optional float64 array of the result's shape to write into.
    """
    gen_p_mw = np.asarray(gen_p_mw, dtype=float)
    if gen_p_mw.shape[-1] != case.n_gen:
        raise ValueError(f"gen_p_mw last dim {gen_p_mw.shape[-1]} != n_gen {case.n_gen}")
    load = case.bus_pd_mw if load_mw is None else np.asarray(load_mw, dtype=float)
    if load.shape[-1] != case.n_bus:
        raise ValueError(f"load_mw last dim {load.shape[-1]} != n_bus {case.n_bus}")
    if case.n_bus > DENSE_MAX_BUSES:  # scatter-add instead of the dense incidence product
        on = case.gen_in_service
        batch = np.broadcast_shapes(gen_p_mw.shape[:-1], load.shape[:-1])
        injection = np.zeros(batch + (case.n_bus,)) if out is None else out
        injection[...] = 0.0
        np.add.at(
            injection.reshape(-1, case.n_bus).T,
            case.gen_bus[on],
            np.broadcast_to(gen_p_mw, batch + (case.n_gen,)).reshape(-1, case.n_gen).T[on],
        )
    else:
        injection = np.matmul(gen_p_mw, gen_bus_matrix(case), out=out)
    return np.subtract(injection, load, out=injection)


def generation_shift_matrix(case: NetworkCase) -> np.ndarray:
    """Generation shift factors ``[n_gen, n_branch]``: MW of flow on each branch per MW a unit
    injects (withdrawn at the slack bus), ``gen_bus_matrix @ PTDF.T``; 0 rows for out-of-service
    units. ``gen_p_mw @ gsf - load_mw @ PTDF.T`` is the DC power flow without forming bus
    injections (54 x 186 multiply-adds per scenario instead of 118 x 186 on the 118-bus case;
    plus :func:`phase_shift_flow_mw` with phase shifters). Dense, like :func:`ptdf_matrix`.
    Cached per case object; read-only."""
    cached = _GSF_CACHE.get(case)
    if cached is None:
        cached = gen_bus_matrix(case) @ ptdf_matrix(case).T
        cached.setflags(write=False)
        _GSF_CACHE[case] = cached
    return cached


def dc_power_flow(
    case: NetworkCase, p_inj_mw: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """Branch flows ``[B, n_branch]`` [MW, from -> to] for bus injections ``[B, n_bus]`` [MW].

    Branches are the case's: lines, then transformers, in pandapower's order. The slack bus
    injection is ignored (it balances the system; in a network of several islands each
    island's reference bus balances it, see :mod:`powerzoo.physics.dc_sparse`). Up to
    :data:`DENSE_MAX_BUSES` buses on a connected network: one product with the cached PTDF;
    otherwise sparse triangular solves with the LU factorised once per case. Phase shifters
    add their constant flow (:func:`phase_shift_flow_mw`). ``out``: an optional
    ``[B, n_branch]`` float64 array to write the flows into.
    """
    p_inj_mw = np.asarray(p_inj_mw, dtype=float)
    if p_inj_mw.shape[-1] != case.n_bus:
        raise ValueError(f"p_inj_mw last dim {p_inj_mw.shape[-1]} != n_bus {case.n_bus}")
    ptdf_t = _PTDF_T_CACHE.get(case)
    if ptdf_t is None and case.n_bus <= DENSE_MAX_BUSES and dc_factor(case).reference.size == 1:
        ptdf_matrix(case)
        ptdf_t = _PTDF_T_CACHE[case]
    if ptdf_t is None:  # sparse path
        if out is not None and p_inj_mw.ndim == 2:  # straight into out: one copy fewer
            return dc_factor(case).flows_mw(p_inj_mw, out=out)
        single = p_inj_mw.ndim == 1
        flows = dc_factor(case).flows_mw(np.atleast_2d(p_inj_mw).reshape(-1, case.n_bus))
        flows = flows.reshape(p_inj_mw.shape[:-1] + (case.n_branch,))
        if single:
            flows = flows.reshape(case.n_branch)
        if out is None:
            return flows
        out[...] = flows
        return out
    flows = np.matmul(p_inj_mw, ptdf_t, out=out)
    if dc_factor(case).has_shift:
        flows += phase_shift_flow_mw(case)
    return flows


def phase_shift_flow_mw(case: NetworkCase) -> np.ndarray:
    """Constant branch flow [n_branch] [MW] that the phase shifters cause at zero injection:
    the DC flow is ``PTDF @ p_inj + phase_shift_flow_mw(case)``. Zeros without phase shifters.
    Every user of a PTDF (DC-OPF, market clearing) adds it so that the model matches
    :func:`dc_power_flow`. Cached per case object; read-only."""
    cached = _SHIFT_CACHE.get(case)
    if cached is None:
        factor = dc_factor(case)
        if factor.has_shift:
            cached = factor.flows_mw(np.zeros((1, case.n_bus)))[0]
        else:
            cached = np.zeros(case.n_branch)
        cached.setflags(write=False)
        _SHIFT_CACHE[case] = cached
    return cached


def ptdf_rows(case: NetworkCase, branches: np.ndarray) -> np.ndarray:
    """PTDF rows ``[k, n_bus]`` of the branches ``branches`` (positions), at any network size:
    one sparse solve with the transposed factor per call (``B_red`` is symmetric), no dense
    ``n_branch x n_bus`` matrix. Equal to ``ptdf_matrix(case)[branches]`` on small networks;
    the reference-bus columns are 0."""
    factor = dc_factor(case)
    idx = np.asarray(branches, dtype=np.int64).reshape(-1)
    rows = np.zeros((idx.size, case.n_bus))
    if idx.size and factor.keep.size:
        b_f_rows = factor.b_f[idx][:, factor.keep].toarray()  # [k, n_keep]
        rows[:, factor.keep] = factor.lu.solve(np.ascontiguousarray(b_f_rows.T), trans="T").T
    return rows


def line_overload_mw(
    case: NetworkCase,
    branch_flow_mw: np.ndarray,
    line_limit_scale: float = 1.0,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Overload ``max(|flow| - scale * rate_a, 0)`` [MW], same shape as ``branch_flow_mw``.

    Unlimited branches (``rate_a_mw == inf``) and out-of-service branches never overload.
    ``out``: an optional float64 array of the flow's shape to write the result into.
    """
    flow = np.abs(np.asarray(branch_flow_mw, dtype=float), out=out)
    np.subtract(flow, overload_limits_mw(case, line_limit_scale), out=flow)
    return np.maximum(flow, 0.0, out=flow)


def overload_limits_mw(case: NetworkCase, line_limit_scale: float = 1.0) -> np.ndarray:
    """The limit above which :func:`line_overload_mw` counts overload.

    Args:
        case: The network case.
        line_limit_scale: Factor on the ratings.

    Returns:
        ``line_limit_scale x rate_a`` [n_branch] MW; ``inf`` for an unlimited or out-of-service
        branch.
    """
    rate = case.branch_rate_a_mw
    limited = case.branch_in_service & np.isfinite(rate)
    return np.where(limited, rate * line_limit_scale, np.inf)
