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

runs on the load-phase voltages ``v`` only: ``A Y0^-1 A^T`` is a small dense matrix, cached on
the feeder with the rest of :mod:`~powerzoo.physics.unbalanced.operators`, so one iteration is
one complex matrix product for the whole batch. Regulator taps other than those in the files
enter as each row's correcting currents of the regulator units (the Woodbury identity, updated
by block Jacobi within the same iteration), no refactorisation.

Each row iterates on its own (:mod:`~powerzoo.physics.unbalanced.fixed_point`) with an
Anderson step, first in single precision (complex64: half the cost of a product) until its
step is below ``1e-5`` p.u., then in double precision until no load-phase voltage moves more
than ``tol_pu`` of its base; one more product gives every node voltage. The result of a row does
not depend on the other rows of the batch, to the last bit. Rows that do not converge (loading
beyond the feeder's voltage collapse) are reported in ``converged`` and keep their last finite
iterate, never an exception. BLAS runs on one thread. Checked against OpenDSS (controls off,
same taps) in ``tests/physics/unbalanced/``.
"""

from __future__ import annotations

import numpy as np

from powerzoo.physics.blas_threads import one_blas_thread
from powerzoo.physics.unbalanced.feeder import Feeder
from powerzoo.physics.unbalanced.fixed_point import (
    CONVERGED,
    LoadCurrents,
    iterate,
    rows_matmul,
    unit_currents,
)
from powerzoo.physics.unbalanced.operators import FlowOperators, flow_operators, unit_blocks
from powerzoo.physics.unbalanced.result import UnbalancedPFResult

__all__ = ["SINGLE_PRECISION_TOL_PU", "UnbalancedPFResult", "unbalanced_power_flow"]

SINGLE_PRECISION_TOL_PU = 1e-5
"""Step [p.u.] below which a row leaves the single-precision iterations (complex64 resolves
load-phase voltages to about 1e-7 p.u.); the double-precision ones then reach ``tol_pu``."""

ROWS_PER_BLOCK = 256
"""Rows solved together: the temporaries of a block stay in the caches (and in memory the
allocator reuses), and the products are still large enough for BLAS."""

SINGLE_PRECISION_MAX_ITER = 30
"""Most single-precision iterations of a row (a row still moving then goes on in double)."""


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


def _load_currents(
    feeder: Feeder, ops: FlowOperators, s_nominal: np.ndarray, p_unit: np.ndarray | None
) -> LoadCurrents:
    """Coefficients of each load phase's current for the rows' powers ``s_nominal`` [B, L] [VA]."""
    i_p = s_nominal.real / ops.vbase  # conj(S) / V_base: real part P / V_base,
    i_q = -s_nominal.imag / ops.vbase  # imaginary part -Q / V_base [A]
    masks = ops.exponent_masks

    def with_exponent(e: int) -> np.ndarray | None:
        in_p, in_q = masks[("p", e)], masks[("q", e)]
        if not (in_p.any() or in_q.any()):
            return None
        out = np.empty(s_nominal.shape, dtype=np.complex128)
        out.real = i_p * in_p
        out.imag = i_q * in_q
        return out

    const = ops.i_nom[None, :] if (i2 := with_exponent(2)) is None else ops.i_nom - i2
    other = []
    for part, cols, e in ops.other_exponents:
        cur = i_p[:, cols] + 0j if part == "p" else 1j * i_q[:, cols]
        other.append((cols, cur, e))
    return LoadCurrents(
        const=np.ascontiguousarray(np.broadcast_to(const, s_nominal.shape)),
        inv_sq=with_exponent(0),
        inv_abs=with_exponent(1),
        other=tuple(other),
        p_unit=p_unit,
    )


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
        tol_pu: Stop a row when none of its load-phase voltages moves more than this in one
            iteration [p.u.].
        max_iter: Iteration limit (of the double-precision iterations); rows not converged by
            then have ``converged == False``.
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
    ops = flow_operators(feeder)
    with one_blas_thread():
        return _solve(feeder, ops, p, q, tap, tol_pu, max_iter)


def _outputs(batch: int, widths: list[tuple[int, type]]) -> list[np.ndarray]:
    """Contiguous [batch, width] arrays carved from one allocation (one large block of memory
    is cheaper to obtain than several mid-sized ones)."""
    sizes = [-(-batch * w * np.dtype(dt).itemsize // 64) * 64 for w, dt in widths]
    buffer = np.empty(sum(sizes), dtype=np.uint8)
    out, start = [], 0
    for (w, dt), size in zip(widths, sizes, strict=True):
        out.append(buffer[start : start + batch * w * np.dtype(dt).itemsize].view(dt))
        out[-1] = out[-1].reshape(batch, w)
        start += size
    return out


def _solve(feeder, ops, p, q, tap, tol_pu, max_iter) -> UnbalancedPFResult:
    batch = p.shape[0]
    lp = feeder.load_phase_load
    scale = feeder.load_phase_share * 1000.0
    p_unit = unit_blocks(feeder, ops, tap) if feeder.n_regulators else None
    n_lp = len(lp)
    v_node, v_lp, s_nominal, vm = _outputs(
        batch,
        [(feeder.n_node, np.complex128), (n_lp, np.complex128), (n_lp, np.complex128)]
        + [(feeder.n_bus * 3, np.float64)],
    )
    converged = np.empty(batch, dtype=bool)
    iterations = 0
    for lo in range(0, batch, ROWS_PER_BLOCK):
        rows = slice(lo, lo + ROWS_PER_BLOCK)
        s_rows = s_nominal[rows]
        s_rows.real = p[rows][:, lp] * scale
        s_rows.imag = q[rows][:, lp] * scale
        loads = _load_currents(feeder, ops, s_rows, None if p_unit is None else p_unit[rows])
        u, converged[rows], its = _solve_block(ops, loads, tol_pu, max_iter, v_node[rows])
        iterations = max(iterations, its)
        np.multiply(u, ops.vbase, out=v_lp[rows])
        vm[rows] = np.nan
        with np.errstate(all="ignore"):
            vm[rows, ops.phase_slots] = np.abs(v_node[rows][:, ops.phase_nodes]) / ops.phase_base
    return UnbalancedPFResult(
        v_node=v_node,
        vm_pu=vm.reshape(batch, feeder.n_bus, 3),
        converged=converged,
        iterations=iterations,
        feeder=feeder,
        taps=np.array(tap),
        v_load_phase=v_lp,
        s_load_phase_nominal=s_nominal,
    )


def _solve_block(
    ops: FlowOperators, loads: LoadCurrents, tol_pu: float, max_iter: int, v_node: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """Load-phase voltages [p.u.], convergence and the most iterations of a block of rows;
    its node voltages [V] go to ``v_node``."""
    rows = len(loads.const)
    x = None if loads.p_unit is None else np.zeros((rows, 2 * loads.p_unit.shape[1]), complex)
    rough = iterate(
        ops,
        loads.astype(np.complex64),
        np.broadcast_to(ops.u0.astype(np.complex64), loads.const.shape),
        x,
        max(tol_pu, SINGLE_PRECISION_TOL_PU),
        min(max_iter, SINGLE_PRECISION_MAX_ITER),
    )
    state = iterate(ops, loads, rough.u.astype(np.complex128), rough.x, tol_pu, max_iter)
    with np.errstate(all="ignore"):
        g = loads.current(state.u)
        v_node[:] = rows_matmul(g, ops.x_a)
        v_node += ops.x_src
        if loads.p_unit is not None:
            w = rows_matmul(g, ops.z_ul)
            w += ops.w0
            v_node -= rows_matmul(unit_currents(ops, loads.p_unit, w, state.x), ops.x_u)
    iterations = int(np.max(rough.iterations + state.iterations))
    return state.u, state.status == CONVERGED, iterations
