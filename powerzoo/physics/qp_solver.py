"""Solver chain for the DC-OPF's convex QP: HiGHS, HiGHS on rescaled columns, then a numpy
interior-point method.

The DC-OPF is handed to the solvers as a generic convex QP with a diagonal Hessian::

    min 0.5 x' diag(hess) x + cost' x   s.t.  row_lo <= A x <= row_up,  col_lo <= x <= col_up

whose row bounds change per load (:class:`QPModel` holds the rest).  Every solver returns
``(status, x, row_dual)`` with ``row_dual[i] = d(optimal objective) / d(the active bound of
row i)``, HiGHS's convention.

Robustness.  HiGHS's only QP method is a null-space active-set solver.  With soft line limits
the Hessian is only positive *semi*-definite (the slack columns have zero curvature), and on a
few loads (e.g. some half-hours of ``opf_118``) the solver's update of the Cholesky factor of
the reduced Hessian meets a non-positive pivot through round-off; it then stops with
"Non-convex" and model status "Not Set" although the problem is convex.  Whether this happens
depends on the iteration path, i.e. on the load and on the units of the columns.  Each load
HiGHS fails on (without proving infeasibility) is therefore solved again by HiGHS on the same
model with columns rescaled to per unit of ``base_mva``, then to 10 MW, and finally by a
primal-dual interior-point method in numpy (Mehrotra predictor-corrector,
:func:`solve_qp_ipm`), which is indifferent to a semidefinite Hessian.  Every accepted
solution is checked for primal feasibility; :meth:`SolverChain.solve` raises ``RuntimeError``
if no method succeeds.  highspy is imported lazily.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import numpy as np

from powerzoo.physics.highs import new_highs

__all__ = ["HighsQP", "QPModel", "SolverChain", "solve_qp_ipm"]

_log = logging.getLogger(__name__)

_INFEASIBLE = ("infeasible", "unbounded or infeasible")  # HiGHS verdicts kept as NaN rows
_FEAS_TOL = 1e-7  # relative primal-feasibility check of every accepted solution
_IPM_TOL = 1e-9  # relative residual / complementarity tolerance of the interior-point fallback


@dataclass(frozen=True)
class QPModel:
    """The convex QP of the module docstring, less its row bounds (they change per solve)."""

    name: str
    hess: np.ndarray  # [n_col] diagonal of Q (>= 0)
    cost: np.ndarray  # [n_col]
    a_dense: np.ndarray  # [n_row, n_col]
    col_lower: np.ndarray  # [n_col] (may be -inf)
    col_upper: np.ndarray  # [n_col] (may be +inf)

    def violation(self, x: np.ndarray, row_lo: np.ndarray, row_up: np.ndarray) -> float:
        """Largest relative bound / row violation of ``x`` (0 if feasible)."""
        act = self.a_dense @ x
        scale = 1.0 + max(
            float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0))
            for b in (row_lo, row_up, self.col_lower, self.col_upper)
        )
        worst = max(
            float(np.max(row_lo - act, initial=0.0)),
            float(np.max(act - row_up, initial=0.0)),
            float(np.max(self.col_lower - x, initial=0.0)),
            float(np.max(x - self.col_upper, initial=0.0)),
        )
        return worst / scale if np.isfinite(worst) else np.inf


class HighsQP:
    """HiGHS on ``model`` with columns rescaled by ``col_scale`` (``x = col_scale * x_model``).

    Rows stay in MW, so row duals need no rescaling.  The instance is reused for every load
    (HiGHS warm-starts the next solve from the previous one).

    It uses highspy's low-level API on purpose, not its modelling API (``addVariable`` /
    ``addConstr``): the model is handed over once as arrays (a column-wise ``HighsLp`` and a
    diagonal ``HighsHessian``), and from one load to the next only the row bounds change
    (``changeRowsBounds``), so HiGHS starts each solve from the previous active set instead
    of a model rebuilt from Python expressions.  The DC-OPF oracles solve one such QP per
    step of an episode (hundreds per call), so the per-solve overhead sets their speed.
    """

    def __init__(self, model: QPModel, col_scale: float) -> None:
        import highspy

        self._hs = highspy
        self.scale = float(col_scale)
        inf = highspy.kHighsInf
        n_row, n_col = model.a_dense.shape
        lp = highspy.HighsLp()
        lp.num_col_ = n_col
        lp.num_row_ = n_row
        lp.col_cost_ = model.cost * self.scale
        lp.col_lower_ = np.where(np.isinf(model.col_lower), -inf, model.col_lower / self.scale)
        lp.col_upper_ = np.where(np.isinf(model.col_upper), inf, model.col_upper / self.scale)
        lp.row_lower_ = np.zeros(n_row)
        lp.row_upper_ = np.zeros(n_row)
        a_csc = model.a_dense.T * self.scale  # column j of A = row j of A^T
        nz_rows, nz_cols = np.nonzero(a_csc)  # sorted by column of A, then row of A
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.searchsorted(nz_rows, np.arange(n_col + 1)).astype(np.int32)
        lp.a_matrix_.index_ = nz_cols.astype(np.int32)
        lp.a_matrix_.value_ = a_csc[nz_rows, nz_cols]
        lp.a_matrix_.num_col_ = n_col
        lp.a_matrix_.num_row_ = n_row

        # the active-set QP solver needs a few hundred iterations here; a hard cap turns a
        # (rare) cycling solve into a failure that the next method handles
        highs = new_highs(qp_iteration_limit=max(1000, 10 * (n_col + n_row)))
        highs.passModel(lp)
        diag = model.hess * self.scale**2
        nz = np.flatnonzero(diag)
        if nz.size:
            # diagonal Hessian in HiGHS's triangular CSC format; HiGHS itself adds explicit
            # zeros for the all-zero columns (the slacks)
            hess = highspy.HighsHessian()
            hess.dim_ = n_col
            hess.format_ = highspy.HessianFormat.kTriangular
            hess.start_ = np.searchsorted(nz, np.arange(n_col + 1)).astype(np.int32)
            hess.index_ = nz.astype(np.int32)
            hess.value_ = diag[nz]
            highs.passHessian(hess)
        self.highs = highs
        self._rows = np.arange(n_row, dtype=np.int32)

    def __call__(
        self, row_lo: np.ndarray, row_up: np.ndarray
    ) -> tuple[str, np.ndarray | None, np.ndarray | None]:
        """Solve with these row bounds (warm start): ``(status, x, row_dual)``."""
        inf = self._hs.kHighsInf
        lo = np.where(np.isinf(row_lo), -inf, row_lo)
        up = np.where(np.isinf(row_up), inf, row_up)
        self.highs.changeRowsBounds(self._rows.size, self._rows, lo, up)
        self.highs.run()
        model_status = self.highs.getModelStatus()
        text = self.highs.modelStatusToString(model_status).lower()
        if model_status != self._hs.HighsModelStatus.kOptimal:
            if text not in _INFEASIBLE:
                self.highs.clearSolver()  # start the next load cold
            return text, None, None
        sol = self.highs.getSolution()
        return "optimal", np.asarray(sol.col_value) * self.scale, np.asarray(sol.row_dual)


class SolverChain:
    """HiGHS (warm-started), then, for a load HiGHS fails on without an infeasibility
    verdict: HiGHS on the model rescaled to per-unit columns, to 10 MW columns, and finally
    the interior-point method :func:`solve_qp_ipm`."""

    def __init__(self, model: QPModel, base_mva: float) -> None:
        self.model = model
        self._methods: dict[str, object] = {}
        self._recipes = {
            "highs": lambda: HighsQP(model, 1.0),
            f"highs (columns in {base_mva:g} MW)": lambda: HighsQP(model, base_mva),
            "highs (columns in 10 MW)": lambda: HighsQP(model, 10.0),
            "interior point": lambda: functools.partial(solve_qp_ipm, model),
        }

    def _method(self, name: str):
        if name not in self._methods:
            self._methods[name] = self._recipes[name]()
        return self._methods[name]

    def solve(
        self, row_lo: np.ndarray, row_up: np.ndarray, label: str
    ) -> tuple[str, np.ndarray | None, np.ndarray | None]:
        """``(status, x, row_dual)`` for these row bounds: ``"optimal"`` with a solution, or
        HiGHS's infeasibility verdict with ``None``; raises ``RuntimeError`` (naming ``label``)
        when every method fails."""
        tried = []
        for name in self._recipes:
            text, x, y = self._method(name)(row_lo, row_up)
            if text == "optimal":
                violation = self.model.violation(x, row_lo, row_up)
                if violation <= _FEAS_TOL:
                    if tried:
                        _log.info(
                            "%s DC-OPF, %s: solved by %s after %s",
                            self.model.name,
                            label,
                            name,
                            "; ".join(tried),
                        )
                    return text, x, y
                text = f"optimal but infeasible by {violation:.2g}"
            elif text in _INFEASIBLE and name.startswith("highs"):
                return text, None, None
            tried.append(f"{name}: {text}")
        raise RuntimeError(
            f"{self.model.name} DC-OPF, {label}: every solver failed ({'; '.join(tried)})"
        )


def solve_qp_ipm(
    model: QPModel,
    row_lo: np.ndarray,
    row_up: np.ndarray,
    tol: float = _IPM_TOL,
    max_iter: int = 200,
) -> tuple[str, np.ndarray | None, np.ndarray | None]:
    """Primal-dual interior-point method (Mehrotra predictor-corrector) for the convex QP.

    Independent of HiGHS's active-set QP solver and indifferent to a semidefinite Hessian.
    Fixed columns are eliminated; equal-bound rows are equalities ``E x = b``; every finite
    inequality bound becomes ``g x + s = h`` with ``s, z >= 0``.  Returns ``"optimal"`` only
    when the relative primal / dual residuals and the complementarity gap are below ``tol``.
    """
    lo_c, up_c = model.col_lower, model.col_upper
    fixed = np.isfinite(lo_c) & (lo_c == up_c)
    free = ~fixed
    x_full = np.where(fixed, lo_c, 0.0)
    a_free = model.a_dense[:, free]
    shift = model.a_dense[:, fixed] @ lo_c[fixed]
    lo_r, up_r = row_lo - shift, row_up - shift
    eq = np.isfinite(lo_r) & (lo_r == up_r)
    e_mat, e_rhs = a_free[eq], lo_r[eq]
    ineq = np.flatnonzero(~eq)
    has_up, has_lo = np.isfinite(up_r[ineq]), np.isfinite(lo_r[ineq])
    row_up_idx, row_lo_idx = ineq[has_up], ineq[has_lo]
    r_mat = np.vstack([a_free[row_up_idx], -a_free[row_lo_idx]])  # row part of G
    hess, cost = model.hess[free], model.cost[free]
    lo_f, up_f = lo_c[free], up_c[free]
    cu, cl = np.flatnonzero(np.isfinite(up_f)), np.flatnonzero(np.isfinite(lo_f))
    c_idx = np.concatenate([cu, cl])  # column part of G: +e_j (upper), -e_j (lower)
    c_sign = np.concatenate([np.ones(cu.size), -np.ones(cl.size)])
    h = np.concatenate([up_r[row_up_idx], -lo_r[row_lo_idx], up_f[cu], -lo_f[cl]])
    n, m_r, n_eq, m = int(free.sum()), r_mat.shape[0], e_mat.shape[0], h.size

    def g_mul(v: np.ndarray) -> np.ndarray:
        return np.concatenate([r_mat @ v, c_sign * v[c_idx]])

    def gt_mul(w: np.ndarray) -> np.ndarray:
        return r_mat.T @ w[:m_r] + np.bincount(c_idx, weights=c_sign * w[m_r:], minlength=n)

    kkt = np.zeros((n + n_eq, n + n_eq))
    kkt[:n, n:] = e_mat.T
    kkt[n:, :n] = e_mat

    def set_kkt(w: np.ndarray) -> None:
        """Reduced KKT matrix [[H + G' diag(w) G, E'], [E, 0]]."""
        kkt[:n, :n] = r_mat.T @ (w[:m_r, None] * r_mat)
        kkt[np.arange(n), np.arange(n)] += hess + np.bincount(c_idx, weights=w[m_r:], minlength=n)

    # Mehrotra's starting point: the least-squares solution of the KKT system with unit
    # weights (s = h - G x, z = -s), both shifted into the positive orthant
    set_kkt(np.ones(m))
    try:
        start = np.linalg.solve(kkt, np.concatenate([gt_mul(h) - cost, e_rhs]))
    except np.linalg.LinAlgError:
        return "singular system", None, None
    x, y = start[:n], np.zeros(n_eq)
    s = h - g_mul(x)
    z = -s.copy()
    if m:
        s += max(-1.5 * float(s.min()), 0.0)
        z += max(-1.5 * float(z.min()), 0.0)
        s += 1e-8 * (1.0 + float(np.abs(h).max()))  # strictly positive even if s == 0
        z += 1e-8 * (1.0 + float(np.abs(cost).max(initial=0.0)))
        s_z = float(s @ z)
        s, z = s + 0.5 * s_z / float(z.sum()), z + 0.5 * s_z / float(s.sum())
    scale_p = 1.0 + max(np.max(np.abs(h), initial=0.0), np.max(np.abs(e_rhs), initial=0.0))
    scale_d = 1.0 + np.max(np.abs(cost), initial=0.0)

    def newton(r_c, residuals, w, s):
        """Newton step (dx, dy, ds, dz) for complementarity target ``s * z + ds*z + s*dz = r_c``."""
        r_d, r_e, r_i = residuals
        rhs = np.concatenate([-r_d - gt_mul(w * r_i + r_c / s), -r_e])
        sol = np.linalg.solve(kkt, rhs)
        dx, dy = sol[:n], sol[n:]
        g_dx = g_mul(dx)
        return dx, dy, -r_i - g_dx, w * (g_dx + r_i) + r_c / s

    def step_to_boundary(v: np.ndarray, dv: np.ndarray) -> float:
        neg = dv < 0
        return float(min(1.0, np.min(-v[neg] / dv[neg], initial=np.inf)))

    for _ in range(max_iter):
        r_d = hess * x + cost + e_mat.T @ y + gt_mul(z)
        r_e = e_mat @ x - e_rhs
        r_i = g_mul(x) + s - h
        gap = float(s @ z)
        objective = float(0.5 * hess @ (x * x) + cost @ x)
        if (
            max(np.max(np.abs(r_e), initial=0.0), np.max(np.abs(r_i), initial=0.0)) <= tol * scale_p
            and np.max(np.abs(r_d), initial=0.0) <= tol * scale_d
            and gap <= tol * (1.0 + abs(objective))
        ):
            x_full[free] = x
            row_dual = np.zeros(model.a_dense.shape[0])
            row_dual[eq] = -y
            row_dual[row_up_idx] -= z[: row_up_idx.size]
            row_dual[row_lo_idx] += z[row_up_idx.size : m_r]
            return "optimal", x_full, row_dual
        w = z / s
        set_kkt(w)
        mu = gap / m if m else 0.0

        residuals = (r_d, r_e, r_i)
        try:
            _, _, ds_a, dz_a = newton(-s * z, residuals, w, s)  # predictor (affine scaling)
            alpha = min(step_to_boundary(s, ds_a), step_to_boundary(z, dz_a))
            mu_aff = float((s + alpha * ds_a) @ (z + alpha * dz_a)) / m if m else 0.0
            sigma = (mu_aff / mu) ** 3 if mu > 0 else 0.0
            r_c = sigma * mu - s * z - ds_a * dz_a
            dx, dy, ds, dz = newton(r_c, residuals, w, s)  # corrector
        except np.linalg.LinAlgError:
            return "singular system", None, None
        if not (np.all(np.isfinite(dx)) and np.all(np.isfinite(dz))):
            return "numerical breakdown", None, None
        alpha = 0.995 * min(step_to_boundary(s, ds), step_to_boundary(z, dz))
        alpha = min(alpha, 1.0)
        x, y, s, z = x + alpha * dx, y + alpha * dy, s + alpha * ds, z + alpha * dz
    return "iteration limit", None, None
