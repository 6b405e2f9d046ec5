"""Batched DC power flow via the PTDF matrix.

Lossless DC model: branch flow ``f_l = b_l * (theta_from - theta_to)`` with
``b_l = 1 / (x_l * tap_l)`` (MATPOWER / pandapower convention, no phase shifters).
The reference (slack) bus absorbs any injection mismatch, which is why its PTDF column is 0.
All public functions take a leading batch dimension ``B`` (1-D inputs are also accepted and
give 1-D outputs); no Python loop runs over ``B``.
"""

from __future__ import annotations

import weakref

import numpy as np

from powerzoo.physics.network import NetworkCase

__all__ = [
    "branch_susceptance_pu",
    "bus_injection_mw",
    "dc_power_flow",
    "gen_bus_matrix",
    "generation_shift_matrix",
    "line_overload_mw",
    "ptdf_matrix",
]

_PTDF_CACHE: weakref.WeakKeyDictionary[NetworkCase, np.ndarray] = weakref.WeakKeyDictionary()
_PTDF_T_CACHE: weakref.WeakKeyDictionary[NetworkCase, np.ndarray] = weakref.WeakKeyDictionary()
_GEN_BUS_CACHE: weakref.WeakKeyDictionary[NetworkCase, np.ndarray] = weakref.WeakKeyDictionary()
_GSF_CACHE: weakref.WeakKeyDictionary[NetworkCase, np.ndarray] = weakref.WeakKeyDictionary()


def branch_susceptance_pu(case: NetworkCase) -> np.ndarray:
    """DC branch susceptance ``1 / (x * tap)`` [p.u.], 0 for out-of-service branches."""
    b = 1.0 / (case.branch_x_pu * case.branch_tap)
    return np.where(case.branch_in_service, b, 0.0)


def ptdf_matrix(case: NetworkCase) -> np.ndarray:
    """Power transfer distribution factors ``[n_branch, n_bus]`` (MW flow per MW injected).

    Column ``j`` is the flow change when 1 MW is injected at bus ``j`` and withdrawn at the
    slack bus; the slack column is zero.  Cached per case object; the result is read-only.
    """
    cached = _PTDF_CACHE.get(case)
    if cached is not None:
        return cached
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
    try:
        # PTDF_red = B_f,red @ inv(B_red); B_red is symmetric positive definite iff connected.
        # numpy rather than scipy.linalg: importing scipy.linalg costs ~0.2 s of env construction.
        np.linalg.cholesky(b_red)  # raises LinAlgError unless positive definite
        ptdf_red = np.linalg.solve(b_red, b_f[:, keep].T).T
    except np.linalg.LinAlgError as err:
        raise ValueError(f"{case.name}: network is not connected (singular B matrix)") from err
    ptdf = np.zeros((n_branch, n_bus))
    ptdf[:, keep] = ptdf_red
    ptdf.setflags(write=False)
    ptdf_t = np.ascontiguousarray(ptdf.T)  # [n_bus, n_branch], for row-major batched matmul
    ptdf_t.setflags(write=False)
    _PTDF_CACHE[case] = ptdf
    _PTDF_T_CACHE[case] = ptdf_t
    return ptdf


def gen_bus_matrix(case: NetworkCase) -> np.ndarray:
    """Generator-to-bus incidence ``[n_gen, n_bus]`` (0 rows for out-of-service units)."""
    cached = _GEN_BUS_CACHE.get(case)
    if cached is not None:
        return cached
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
    injection = np.matmul(gen_p_mw, gen_bus_matrix(case), out=out)
    return np.subtract(injection, load, out=injection)


def generation_shift_matrix(case: NetworkCase) -> np.ndarray:
    """Generation shift factors ``[n_gen, n_branch]``: MW of flow on each branch per MW a unit
    injects (withdrawn at the slack bus), ``gen_bus_matrix @ PTDF.T``; 0 rows for out-of-service
    units. ``gen_p_mw @ gsf - load_mw @ PTDF.T`` is the DC power flow without forming bus
    injections (54 x 186 multiply-adds per scenario instead of 118 x 186 on the 118-bus case).
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

    One matrix product; the slack bus injection is ignored (it balances the system). ``out``:
    an optional ``[B, n_branch]`` float64 array to write the flows into.
    """
    p_inj_mw = np.asarray(p_inj_mw, dtype=float)
    if p_inj_mw.shape[-1] != case.n_bus:
        raise ValueError(f"p_inj_mw last dim {p_inj_mw.shape[-1]} != n_bus {case.n_bus}")
    ptdf_t = _PTDF_T_CACHE.get(case)
    if ptdf_t is None:
        ptdf_matrix(case)
        ptdf_t = _PTDF_T_CACHE[case]
    return np.matmul(p_inj_mw, ptdf_t, out=out)


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
    rate = case.branch_rate_a_mw
    limited = case.branch_in_service & np.isfinite(rate)
    limit = np.where(limited, rate * line_limit_scale, np.inf)
    np.subtract(flow, limit, out=flow)
    return np.maximum(flow, 0.0, out=flow)
