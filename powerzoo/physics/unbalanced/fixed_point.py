"""The fixed point of the batched three-phase flow on the load-phase voltages, row by row.

With the network's response ``z`` (:mod:`~powerzoo.physics.unbalanced.operators`) the voltage
``u`` across each load phase (per unit of its base) solves ``u = u0 + g(u) z``, where
``g = u * c(|u|^2)`` is the current each load phase draws beyond its admittance in the
network matrix [A]. With ``I = conj(S) / V_base`` the row's current at base voltage, a voltage
exponent ``e`` contributes ``I |u|^(e - 2)``: ``c = I_nom - I_2 - I_0 / |u|^2 - I_1 / |u|``.

Every row iterates on its own: its iterate, its Anderson step (a secant on its last two
residuals) and its convergence test use nothing of the other rows, and a row that has
converged (or failed) leaves the batch, so its bits do not depend on what else is in the batch.
The matrix products run on whole blocks of rows (:func:`rows_matmul`): a one-row product would
take BLAS's matrix-vector path, and a row in a partial block another kernel, both summing in
another order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerzoo.physics.unbalanced.operators import FlowOperators

__all__ = ["LoadCurrents", "RowState", "iterate", "rows_matmul", "unit_currents"]

CONVERGED, RUNNING, FAILED = 0, 1, 2


ROW_TILE = 12
"""Rows per block of :func:`rows_matmul`'s product. OpenBLAS's complex matrix-matrix kernels
work on blocks of rows and sum the rows of a last, partial block in another order: on its AVX2
(Haswell) kernels a row's last bits then depend on the batch's size and the row's position
(measured: blocks of 12 rows; padding to 2, 4, 8 or 16 rows still left rows that differ, 12,
24 and 48 none). With the batch padded to whole blocks every row is summed alike."""


def rows_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` [rows of a, columns of b] with each row's bits independent of the other rows.

    The product runs on ``a`` padded with zero rows to a multiple of :data:`ROW_TILE` (so one
    row is a matrix-matrix product too, not BLAS's matrix-vector path), on one BLAS thread when
    the caller pins it (:func:`powerzoo.physics.blas_threads.one_blas_thread`).
    """
    rows = a.shape[0]
    short = -rows % ROW_TILE
    if short == 0:
        return a @ b
    padded = np.zeros((rows + short, a.shape[1]), dtype=a.dtype)
    padded[:rows] = a
    return (padded @ b)[:rows]


@dataclass
class LoadCurrents:
    """Per-row coefficients of ``c(|u|^2)`` (each [B, L] complex, None when unused)."""

    const: np.ndarray  # I_nom - I_2
    inv_sq: np.ndarray | None  # I_0: times 1 / |u|^2
    inv_abs: np.ndarray | None  # I_1: times 1 / |u|
    other: tuple  # ((columns, [B, k] current I_e, exponent e), ...) for other exponents
    p_unit: np.ndarray | None  # [B, m, 2, 2] units' blocks (None: feeder without regulators)

    def take(self, keep: np.ndarray) -> LoadCurrents:
        """The rows ``keep`` (bool or index array)."""
        return LoadCurrents(
            const=self.const[keep],
            inv_sq=None if self.inv_sq is None else self.inv_sq[keep],
            inv_abs=None if self.inv_abs is None else self.inv_abs[keep],
            other=tuple((c, cur[keep], e) for c, cur, e in self.other),
            p_unit=None if self.p_unit is None else self.p_unit[keep],
        )

    def astype(self, dtype: type) -> LoadCurrents:
        """The same coefficients in ``dtype`` (complex64 for the first iterations)."""
        cast = lambda a: None if a is None else a.astype(dtype)  # noqa: E731
        return LoadCurrents(
            const=cast(self.const),
            inv_sq=cast(self.inv_sq),
            inv_abs=cast(self.inv_abs),
            other=tuple((c, cur.astype(dtype), e) for c, cur, e in self.other),
            p_unit=self.p_unit,
        )

    def current(self, u: np.ndarray) -> np.ndarray:
        """``g(u)`` [B, L]: each load phase's current beyond its nominal admittance [A]."""
        mu = u.real * u.real
        mu += u.imag * u.imag
        c = self.const
        if self.inv_sq is not None or self.inv_abs is not None or self.other:
            inv = 1.0 / mu
            if self.inv_sq is not None:
                c = c - self.inv_sq * inv
            if self.inv_abs is not None:
                c = c - self.inv_abs * np.sqrt(inv)
            for cols, cur, e in self.other:
                scaled = cur * mu[:, cols] ** (e / 2.0 - 1.0)
                if c is self.const:
                    c = c.copy()
                c[:, cols] -= scaled
        return u * c


@dataclass
class RowState:
    """Where each row stands after :func:`iterate`."""

    u: np.ndarray  # [B, L] load-phase voltages [p.u.]
    x: np.ndarray | None  # [B, 2m] the units' correcting currents [A]
    status: np.ndarray  # [B] CONVERGED, RUNNING (iteration limit) or FAILED (non-finite)
    iterations: np.ndarray  # [B] iterations each row took


def unit_currents(
    ops: FlowOperators, p_unit: np.ndarray, w: np.ndarray, x: np.ndarray
) -> np.ndarray:
    """One block-Jacobi update of the units' correcting currents, ``P (w - K_off x)`` [A]
    (``w``: [B, 2m] winding voltages before correction [V])."""
    t = w - rows_matmul(x, ops.k_off)
    t1, t2 = t[:, 0::2], t[:, 1::2]
    out = np.empty_like(t)
    out[:, 0::2] = p_unit[:, :, 0, 0] * t1 + p_unit[:, :, 0, 1] * t2
    out[:, 1::2] = p_unit[:, :, 1, 0] * t1 + p_unit[:, :, 1, 1] * t2
    return out


def _network(ops: FlowOperators, g: np.ndarray, loads: LoadCurrents, x: np.ndarray | None):
    """The fixed-point map: ``u0 + g z`` less the units' correction, and the units' new
    currents. In single precision only the product with ``g`` is: the correction, a
    difference of large terms, is formed in double precision."""
    n_lp = len(ops.vbase)
    out = rows_matmul(g, ops.z32 if g.dtype == np.complex64 else ops.z)
    u = out[:, :n_lp] + ops.u0
    if loads.p_unit is not None:
        x = unit_currents(ops, loads.p_unit, out[:, n_lp:] + ops.w0, x)
        u -= rows_matmul(x, ops.z_lu)
    return u.astype(g.dtype, copy=False), x


def iterate(
    ops: FlowOperators,
    loads: LoadCurrents,
    u: np.ndarray,
    x: np.ndarray | None,
    tol_pu: float,
    max_iter: int,
) -> RowState:
    """Iterate every row of ``u`` [B, L] (its dtype sets the precision; ``x``: the units'
    currents, None without regulators) until its step is
    below ``tol_pu`` [p.u.], it turns non-finite (kept: the last finite iterate) or
    ``max_iter`` iterations pass."""
    batch = len(u)
    out = u.copy()
    out_x = None if x is None else x.copy()
    status = np.full(batch, RUNNING, dtype=np.int8)
    iterations = np.zeros(batch, dtype=np.int64)
    active = np.arange(batch)
    tol = tol_pu / np.sqrt(2.0)  # on the real and imaginary parts: |step| < tol_pu
    g_old = r_old = None
    with np.errstate(all="ignore"):
        for it in range(1, max_iter + 1):
            g, x_new = _network(ops, loads.current(u), loads, x)
            r = g - u
            rv = r.view(r.real.dtype)  # [b, 2L] real and imaginary parts
            change = np.max(np.abs(rv), axis=1)
            u_new = g
            if g_old is not None:  # Anderson step on the last two residuals (secant)
                drv = rv - r_old.view(rv.dtype)
                num = np.einsum("ij,ij->i", drv, rv)
                den = np.einsum("ij,ij->i", drv, drv)
                gamma = num / np.where(den > 0, den, np.inf)
                change = change + gamma * 0.0  # a non-finite step is a failed row
                u_new = g - gamma.astype(rv.dtype)[:, None] * (g - g_old)
            finite = np.isfinite(change)
            done = finite & (change < tol)
            iterations[active] = it
            leave = ~finite | done
            if not leave.any():
                u, x, g_old, r_old = u_new, x_new, g, r
                continue
            out[active[done]] = u_new[done]
            out[active[~finite]] = u[~finite]
            if x is not None:
                out_x[active[done]] = x_new[done]
                out_x[active[~finite]] = x[~finite]
            status[active[done]] = CONVERGED
            status[active[~finite]] = FAILED
            stay = ~leave
            if not stay.any():
                break
            active = active[stay]
            u, g_old, r_old = u_new[stay], g[stay], r[stay]
            x = None if x is None else x_new[stay]
            loads = loads.take(stay)
        else:
            out[active] = u
            if x is not None:
                out_x[active] = x
    return RowState(u=out, x=out_x, status=status, iterations=iterations)
