"""Batched three-phase unbalanced power flow (fixed-point current injection on the node
admittance), with regulator taps as inputs.

:func:`unbalanced_power_flow` solves ``B`` load scenarios of a
:class:`~powerzoo.physics.unbalanced.feeder.Feeder` at once. The network (lines with mutual
coupling and shunt capacitance, transformers, capacitors, the source's Thevenin impedance) is
linear: ``Y V = I_source + I_loads(V)``. The loads are the nonlinear part, a current per load
phase ``i = conj(S(|v|) / v)`` with ``S`` from its voltage exponents. As OpenDSS does, each
load phase's admittance at nominal voltage ``y_nom`` goes into the matrix once,
``Y0 = Y + A^T diag(y_nom) A`` (``A``: load phase x node incidence), and the iteration

    v <- A Y0^-1 (I_source + A^T (y_nom v - i(v)))

runs on the load-phase voltages ``v`` only (``A Y0^-1 A^T`` is a small dense matrix: one complex
matrix product per iteration for the whole batch) until no load-phase voltage moves more than
``tol_pu`` of its base in an iteration; one more product gives every node voltage. ``Y0`` is
factorised once per feeder (sparse LU) and its reduced matrices are cached on the feeder.

Regulator taps other than those in the files change ``Y`` by a low-rank term: a single-phase
regulating unit adds ``y u u^T`` with ``u = [s1, -s1, -s2, s2]`` on its four winding terminals
and ``s = 1 / (V_base * tap)``, so moving taps adds ``U C(tap) U^T`` (``U``: two columns per
unit, the winding terminal differences; ``C``: a 2 x 2 block per unit). Each scenario's network
inverse is the Woodbury update ``Z - Z U (I + C U^T Z U)^-1 C U^T Z``: one small
``[B, 2m, 2m]`` solve per call, no refactorisation, no loop over the batch.

Rows that do not converge (loading beyond the feeder's voltage collapse) are reported in
``converged`` and keep their last finite iterate, never an exception. BLAS runs on one thread.
Checked against OpenDSS (controls off, same taps) in ``tests/physics/unbalanced/``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from powerzoo.physics.blas_threads import one_blas_thread
from powerzoo.physics.unbalanced.feeder import Feeder
from powerzoo.physics.unbalanced.result import UnbalancedPFResult

__all__ = ["UnbalancedPFResult", "unbalanced_power_flow"]


def _diff(x: np.ndarray, plus: np.ndarray, minus: np.ndarray) -> np.ndarray:
    """``x[plus] - x[minus]`` along axis 0, ground (-1) read as zero."""
    padded = np.concatenate([x, np.zeros((1,) + x.shape[1:], dtype=x.dtype)])
    return padded[plus] - padded[minus]


def _exponent_groups(exps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Columns with voltage exponent 1, 2 and any other non-zero one (with its value)."""
    other = np.flatnonzero((exps != 0) & (exps != 1) & (exps != 2))
    return np.flatnonzero(exps == 1), np.flatnonzero(exps == 2), other, exps[other]


def _prepare(feeder: Feeder) -> dict:
    """Factorisation of ``Y0`` and the reduced matrices of the iteration (cached per feeder)."""
    if "flow" in feeder.cache:
        return feeder.cache["flow"]
    frm, to = feeder.load_phase_from, feeder.load_phase_to
    n, n_lp = feeder.n_node, len(frm)
    vbase = feeder.load_phase_vbase
    s_nom = (feeder.p_kw + 1j * feeder.q_kvar)[feeder.load_phase_load] * 1000.0
    y_nom = np.conj(s_nom * feeder.load_phase_share) / vbase**2
    rows = np.concatenate([np.arange(n_lp)[frm >= 0], np.arange(n_lp)[to >= 0]])
    cols = np.concatenate([frm[frm >= 0], to[to >= 0]])
    vals = np.concatenate([np.ones(np.sum(frm >= 0)), -np.ones(np.sum(to >= 0))])
    incidence = sp.csr_matrix((vals, (rows, cols)), shape=(n_lp, n))
    lu = splu((feeder.y_network + incidence.T @ sp.diags(y_nom) @ incidence).tocsc())
    x_src = lu.solve(feeder.i_source)
    x_a = lu.solve(incidence.T.toarray().astype(np.complex128))
    m = len(feeder.unit_nodes)
    u_cols = np.zeros((n + 1, 2 * m), dtype=np.complex128)  # last row: ground
    for k, (a, b, c, d) in enumerate(feeder.unit_nodes):
        u_cols[a, 2 * k] += 1.0
        u_cols[b, 2 * k] -= 1.0
        u_cols[c, 2 * k + 1] += 1.0
        u_cols[d, 2 * k + 1] -= 1.0
    u_cols = u_cols[:n]
    x_u = lu.solve(u_cols) if m else np.zeros((n, 0), dtype=np.complex128)
    prep = {
        "y_nom": y_nom,
        "vb2": vbase**2,
        "x_src": x_src,
        "x_a_t": np.ascontiguousarray(x_a.T),  # [n_lp, n]
        "x_u_t": np.ascontiguousarray(x_u.T),  # [2m, n]
        "v0": _diff(x_src, frm, to),
        "z_ll": np.ascontiguousarray(_diff(x_a, frm, to).T),  # j @ z_ll: load-phase voltages
        "z_lu_t": np.ascontiguousarray(_diff(x_u, frm, to).T),  # [2m, n_lp]
        "z_ul": np.ascontiguousarray((u_cols.T @ x_a).T),  # [n_lp, 2m]
        "w0": u_cols.T @ x_src,
        "k": u_cols.T @ x_u,
        "p_groups": _exponent_groups(feeder.load_phase_exponents[:, 0]),
        "q_groups": _exponent_groups(feeder.load_phase_exponents[:, 1]),
    }
    feeder.cache["flow"] = prep
    return prep


def _as_batch(name: str, value: object, width: int, label: str) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != width or array.shape[0] == 0:
        raise ValueError(
            f"{name} must have shape [{label}] or [B, {label}] with {label}={width}, "
            f"got {np.shape(value)}"
        )
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} has NaN or inf entries")
    return array


def _tap_update(feeder: Feeder, prep: dict, tap: np.ndarray) -> np.ndarray | None:
    """``M = (I + C K)^-1 C`` per row ([B, 2m, 2m]), or None when every tap is the file's."""
    if feeder.n_regulators == 0 or np.array_equal(tap, np.broadcast_to(feeder.tap_file, tap.shape)):
        return None
    unique, row_of = np.unique(tap, axis=0, return_inverse=True)  # rows often share taps
    s1, s2 = feeder.unit_winding_scales(unique)
    s10, s20 = feeder.unit_winding_scales(feeder.tap_file[None, :])
    y = feeder.unit_y
    batch, m = s1.shape
    c = np.zeros((batch, 2 * m, 2 * m), dtype=np.complex128)
    idx = np.arange(m)
    c[:, 2 * idx, 2 * idx] = y * (s1**2 - s10**2)
    c[:, 2 * idx + 1, 2 * idx + 1] = y * (s2**2 - s20**2)
    cross = -y * (s1 * s2 - s10 * s20)
    c[:, 2 * idx, 2 * idx + 1] = cross
    c[:, 2 * idx + 1, 2 * idx] = cross
    return np.linalg.solve(np.eye(2 * m) + c @ prep["k"], c)[row_of.reshape(-1)]


def _scaled(base: np.ndarray, r1: np.ndarray | None, r2: np.ndarray, groups: tuple) -> np.ndarray:
    """``base * (|v| / V_base)^exponent`` per column (``r1``, ``r2``: the ratio and its square)."""
    ones, twos, other, exps = groups
    if not (ones.size or twos.size or other.size):
        return base
    out = base.copy()
    if ones.size:
        out[:, ones] *= r1[:, ones]
    if twos.size:
        out[:, twos] *= r2[:, twos]
    if other.size:
        out[:, other] *= r2[:, other] ** (exps / 2.0)
    return out


def unbalanced_power_flow(
    feeder: Feeder,
    p_kw: object,
    q_kvar: object,
    taps: object = None,
    *,
    tol_pu: float = 1e-9,
    max_iter: int = 100,
) -> UnbalancedPFResult:
    """Three-phase power flow of ``B`` scenarios of ``feeder``.

    Args:
        feeder: From :func:`~powerzoo.physics.unbalanced.feeder.load_feeder`.
        p_kw: [B, n_loads] or [n_loads] active power of each load at its base voltage [kW]
            (``feeder.p_kw`` is the published loading; order ``feeder.load_names``).
        q_kvar: Same shape, reactive power [kvar].
        taps: [B, n_regulators] or [n_regulators] per-unit tap of each regulator's regulated
            winding (``feeder.regulator_names``; ``feeder.taps_from_steps`` converts tap
            positions); None: the taps in the files.
        tol_pu: Stop when no load-phase voltage moves more than this in one iteration [p.u.].
        max_iter: Iteration limit; rows not converged by then have ``converged == False``.
    """
    if not isinstance(feeder, Feeder):
        raise TypeError(f"feeder must be a Feeder (load_feeder(...)), got {type(feeder).__name__}")
    p = _as_batch("p_kw", p_kw, feeder.n_loads, "n_loads")
    q = _as_batch("q_kvar", q_kvar, feeder.n_loads, "n_loads")
    if p.shape != q.shape:
        raise ValueError(f"p_kw {p.shape} and q_kvar {q.shape} differ in shape")
    batch = p.shape[0]
    n_reg = feeder.n_regulators
    tap = feeder.tap_file[None, :] if taps is None else taps
    tap = _as_batch("taps", tap, n_reg, "n_regulators") if n_reg else np.zeros((1, 0))
    if tap.shape[0] not in (1, batch) or np.any(tap <= 0):
        raise ValueError(f"taps must be positive with 1 or {batch} rows, got {tap.shape}")
    tap = np.broadcast_to(tap, (batch, n_reg))
    prep = _prepare(feeder)
    with one_blas_thread():
        return _solve(feeder, prep, p, q, tap, tol_pu, max_iter)


def _solve(feeder, prep, p, q, tap, tol_pu, max_iter) -> UnbalancedPFResult:
    scale = feeder.load_phase_share * 1000.0
    s_nominal = (p[:, feeder.load_phase_load] + 1j * q[:, feeder.load_phase_load]) * scale
    p_w, q_var = s_nominal.real, s_nominal.imag
    y_nom, vb2 = prep["y_nom"], prep["vb2"]
    m_tap = _tap_update(feeder, prep, tap)

    def through_network(j: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        v = j @ prep["z_ll"]
        v += prep["v0"]
        mw = None
        if m_tap is not None:
            w = prep["w0"] + j @ prep["z_ul"]
            mw = np.matmul(m_tap, w[:, :, None])[:, :, 0]
            v -= mw @ prep["z_lu_t"]
        return v, mw

    def injection(v: np.ndarray) -> np.ndarray:
        m2 = v.real**2 + v.imag**2
        r2 = m2 / vb2
        r1 = np.sqrt(r2) if prep["p_groups"][0].size or prep["q_groups"][0].size else None
        a = _scaled(p_w, r1, r2, prep["p_groups"]) / m2
        b = _scaled(q_var, r1, r2, prep["q_groups"]) / m2
        a -= y_nom.real  # y_nom v - conj(S / v) = v (y_nom - (P - jQ) / |v|^2), in real parts
        b += y_nom.imag
        out = np.empty_like(v)
        out.real = -v.real * a - v.imag * b
        out.imag = v.real * b - v.imag * a
        return out

    batch = p.shape[0]
    v, _ = through_network(np.zeros((batch, len(y_nom)), dtype=np.complex128))
    converged = np.zeros(batch, dtype=bool)
    failed = np.zeros(batch, dtype=bool)
    iterations = 0
    tol_sq = tol_pu**2
    with np.errstate(all="ignore"):
        g_old = r_old = None
        for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is reported
            g, _ = through_network(injection(v))
            r = g - v
            change = np.max((r.real**2 + r.imag**2) / vb2, axis=1, initial=0.0)
            v_new = g
            if g_old is not None:  # Anderson step on the last two residuals (secant)
                dr = r - r_old
                num = np.sum(dr.real * r.real + dr.imag * r.imag, axis=1)
                den = np.sum(dr.real**2 + dr.imag**2, axis=1)
                gamma = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
                v_new = g - gamma[:, None] * (g - g_old)
            g_old, r_old = g, r
            failed |= ~np.isfinite(change) | ~np.all(np.isfinite(v_new), axis=1)
            if failed.any():
                v[~failed] = v_new[~failed]
            else:
                v = v_new
            converged = ~failed & (change < tol_sq)
            if np.all(converged | failed):
                break
        j = injection(v)
        _, mw = through_network(j)
        v_node = j @ prep["x_a_t"]
        v_node += prep["x_src"]
        if mw is not None:
            v_node -= mw @ prep["x_u_t"]
        base = feeder.bus_kv_base[feeder.node_bus] * 1000.0
        vm = np.full((batch, feeder.n_bus, 3), np.nan)
        node = np.flatnonzero((feeder.node_phase >= 1) & (feeder.node_phase <= 3))
        vm[:, feeder.node_bus[node], feeder.node_phase[node] - 1] = (
            np.abs(v_node[:, node]) / base[node]
        )
    return UnbalancedPFResult(
        v_node=v_node,
        vm_pu=vm,
        converged=converged,
        iterations=iterations,
        feeder=feeder,
        taps=np.array(tap),
        v_load_phase=v,
        s_load_phase_nominal=s_nominal,
    )
