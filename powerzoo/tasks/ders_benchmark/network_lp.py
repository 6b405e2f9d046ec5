"""The LP of the ``marl_ders_benchmark`` oracle (:mod:`.oracle`): a sparse maximisation built
from numpy blocks, and its network rows around an operating point.

With ``dP, dQ`` the changes of net demand at the twelve DER buses from the operating point's:

* voltages (:func:`add_voltage_rows`): squared voltages ``v2 = v2_exact + dP @ S_p + dQ @ S_q``
  (LinDistFlow sensitivities, :func:`powerzoo.tasks.feeder.voltage_sq_sensitivity`) kept in the
  band narrowed by ``ORACLE_BAND_MARGIN_PU``, with slacks priced at ``ORACLE_VOLTAGE_PENALTY``;
* line flows (:func:`add_thermal_rows`): ``S_exact + dS`` (lossless DistFlow: a branch carries
  the change of everything below it) inside a ``THERMAL_SIDES``-gon inscribed in the circle of
  ``(1 - THERMAL_MARGIN) x rating x v`` (soft, priced at ``THERMAL_PENALTY``);
* losses (:func:`add_loss_rows`): ``L_exact + g . (dP, dQ) + dP' H dP + dQ' H dQ``: ``g`` the
  exact gradient at the operating point, ``H`` the DistFlow loss matrix (``sum of r / v^2`` over
  the branches two DER buses share); the quadratic is split along the eigenvectors of ``H`` and
  each square is replaced by ``LOSS_TANGENTS`` tangents (epigraph rows), which keeps the model an
  LP.

``p_max``, ``q_max`` [12] bound ``|dP|``, ``|dQ|`` at each DER bus (MW, Mvar): rows that no
feasible change can bind are left out. ``below`` [12, n_branch] is 1 where a branch lies on the
path from the head to a DER bus.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from powerzoo.physics.highs import new_highs
from powerzoo.tasks.feeder import (
    ORACLE_BAND_MARGIN_PU,
    ORACLE_VOLTAGE_PENALTY,
    V_MAX_PU,
    V_MIN_PU,
)

__all__ = [
    "LOSS_TANGENTS",
    "THERMAL_MARGIN",
    "THERMAL_PENALTY",
    "THERMAL_SIDES",
    "OperatingPoint",
    "SparseLP",
    "add_loss_rows",
    "add_thermal_rows",
    "add_voltage_rows",
]

THERMAL_SIDES = 16  # polygon inscribed in a branch's MVA limit
THERMAL_MARGIN = 0.02  # planned branch limit: 98 % of rating x voltage
THERMAL_PENALTY = 10_000.0  # $ per MVA above the planned limit per step
LOSS_TANGENTS = 15  # tangents per squared term of the loss model


class SparseLP:
    """Sparse LP under construction: column blocks with bounds and costs (maximised), row blocks."""

    def __init__(self) -> None:
        self.lb: list[np.ndarray] = []
        self.ub: list[np.ndarray] = []
        self.cost: list[np.ndarray] = []
        self.n = 0
        self.entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.row_lo: list[np.ndarray] = []
        self.row_hi: list[np.ndarray] = []
        self.m = 0

    def var(self, shape: tuple[int, ...], lb: Any, ub: Any, cost: Any = 0.0) -> np.ndarray:
        """Indices ``shape`` of new columns with bounds ``[lb, ub]`` and objective ``cost``."""
        size = int(np.prod(shape))
        for store, value in ((self.lb, lb), (self.ub, ub), (self.cost, cost)):
            store.append(np.broadcast_to(np.asarray(value, dtype=np.float64), shape).ravel())
        idx = np.arange(self.n, self.n + size).reshape(shape)
        self.n += size
        return idx

    def rows(self, cols: np.ndarray, vals: np.ndarray, lo: Any, hi: Any) -> None:
        """Rows ``lo <= sum_k vals[r, k] x[cols[r, k]] <= hi`` for ``cols`` / ``vals`` [R, K]."""
        cols, vals = np.atleast_2d(cols), np.atleast_2d(vals)
        r = cols.shape[0]
        if r == 0:
            return
        vals = np.broadcast_to(vals, cols.shape)
        row_idx = np.broadcast_to(np.arange(self.m, self.m + r)[:, None], cols.shape)
        keep = vals != 0.0
        self.entries.append((row_idx[keep], cols[keep], vals[keep]))
        self.row_lo.append(np.broadcast_to(np.asarray(lo, dtype=np.float64), (r,)).ravel())
        self.row_hi.append(np.broadcast_to(np.asarray(hi, dtype=np.float64), (r,)).ravel())
        self.m += r

    def solve(self) -> tuple[np.ndarray, tuple[int, int, int], float]:
        """Maximise on HiGHS: the solution, (columns, rows, non-zeros) and the seconds in HiGHS;
        raises ``RuntimeError`` unless the LP is solved to optimality."""
        import highspy
        from scipy.sparse import csc_matrix

        rows, cols, vals = (np.concatenate(parts) for parts in zip(*self.entries, strict=True))
        a = csc_matrix((vals, (rows, cols)), shape=(self.m, self.n))
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = self.n, self.m
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = (
            np.concatenate(x) for x in (self.cost, self.lb, self.ub)
        )
        lp.row_lower_, lp.row_upper_ = np.concatenate(self.row_lo), np.concatenate(self.row_hi)
        lp.sense_ = highspy.ObjSense.kMaximize
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.indptr, a.indices, a.data
        h = new_highs()
        h.passModel(lp)
        start = time.perf_counter()
        h.run()
        seconds = time.perf_counter() - start
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(
                f"marl_ders_benchmark oracle LP failed: {h.modelStatusToString(h.getModelStatus())}"
            )
        return np.asarray(h.getSolution().col_value), (self.n, self.m, int(a.nnz)), seconds


@dataclasses.dataclass(frozen=True)
class OperatingPoint:
    """Exact flow of the day at an operating point (net demand ``y_p``, ``y_q`` [T, 12] at the DER
    buses)."""

    y_p: np.ndarray
    y_q: np.ndarray
    v2: np.ndarray  # [T, n_bus] squared voltages
    loss: np.ndarray  # [T] MW
    grad: np.ndarray  # [T, 24] d loss / d (P, Q net demand) at the DER buses
    branch_p: np.ndarray  # [T, n_branch] sending-end flows
    branch_q: np.ndarray
    v_from: np.ndarray  # [T, n_branch] sending-end voltage


def add_voltage_rows(
    lp: SparseLP,
    pt: OperatingPoint,
    dcols: np.ndarray,
    sens_p: np.ndarray,
    sens_q: np.ndarray,
    p_max: np.ndarray,
    q_max: np.ndarray,
) -> None:
    """Soft voltage-band rows (module docstring) at the (step, bus) pairs a change could push out
    of the band; ``dcols`` [T, 24] the ``(dP, dQ)`` columns, ``sens_p`` / ``sens_q`` [12, n_bus]
    the change of ``v2`` per MW / Mvar of net demand at each DER bus."""
    sens = np.concatenate([sens_p, sens_q], axis=0)  # [24, n_bus]
    reach = np.concatenate([p_max, q_max]) @ np.abs(sens)  # [n_bus]
    lo = (V_MIN_PU + ORACLE_BAND_MARGIN_PU) ** 2
    hi = (V_MAX_PU - ORACLE_BAND_MARGIN_PU) ** 2
    for sign, need in ((1.0, pt.v2 - reach < lo), (-1.0, pt.v2 + reach > hi)):
        ts, buses = np.nonzero(need)
        if not ts.size:
            continue
        slack = lp.var((ts.size, 1), 0.0, np.inf, -ORACLE_VOLTAGE_PENALTY)
        cols = np.concatenate([dcols[ts], slack], axis=1)
        vals = np.concatenate([sens[:, buses].T, np.full((ts.size, 1), sign)], axis=1)
        if sign > 0:  # v2 + dv2 + slack >= lo
            lp.rows(cols, vals, lo - pt.v2[ts, buses], np.inf)
        else:  # v2 + dv2 - slack <= hi
            lp.rows(cols, vals, -np.inf, hi - pt.v2[ts, buses])


def add_thermal_rows(
    lp: SparseLP,
    pt: OperatingPoint,
    dp: np.ndarray,
    dq: np.ndarray,
    rating: np.ndarray,
    below: np.ndarray,
    p_max: np.ndarray,
    q_max: np.ndarray,
) -> None:
    """Soft line-flow rows (module docstring); ``dp``, ``dq`` [T, 12] the change columns,
    ``rating`` [n_branch] the branch ratings (MVA)."""
    n_der = below.shape[0]
    # polygon inscribed in the circle of (1 - margin) x rating x v: never above it
    limit = (
        (1.0 - THERMAL_MARGIN) * np.cos(np.pi / THERMAL_SIDES) * rating[None, :] * pt.v_from
    )  # [t, n_branch]
    reach_p, reach_q = p_max @ below, q_max @ below  # [n_branch]
    angles = 2 * np.pi * np.arange(THERMAL_SIDES) / THERMAL_SIDES
    facets = []
    for a in angles:
        c, s = np.cos(a), np.sin(a)
        value = c * pt.branch_p + s * pt.branch_q
        ts, brs = np.nonzero(value + abs(c) * reach_p + abs(s) * reach_q > limit)
        facets.append((c, s, value, ts, brs))
    # branches below the same DER buses see the same change of flow: per group, step and facet
    # only the
    # branch with the least headroom gives a row; one (dP, dQ) pair and one overload slack per
    # group and step
    patterns, group = np.unique(below.T, axis=0, return_inverse=True)
    group = group.ravel()
    n_group, t = patterns.shape[0], pt.v2.shape[0]
    rows = []
    for c, s, value, ts, brs in facets:
        if ts.size:
            room = np.full((t, n_group), np.inf)
            np.minimum.at(room, (ts, group[brs]), limit[ts, brs] - value[ts, brs])
            tg, gg = np.nonzero(np.isfinite(room))
            rows.append((c, s, tg, gg, room[tg, gg]))
    if not rows:
        return
    used = np.unique(np.concatenate([r[3] for r in rows]))
    flow_p, flow_q, slack = (np.full((t, n_group), -1) for _ in range(3))
    slack[:, used] = lp.var((t, used.size), 0.0, np.inf, -THERMAL_PENALTY)
    for d_vars, flow in ((dp, flow_p), (dq, flow_q)):
        flow[:, used] = lp.var((t, used.size), -np.inf, np.inf)
        cols = np.concatenate(
            [
                flow[:, used][:, :, None],
                np.broadcast_to(d_vars[:, None, :], (t, used.size, n_der)),
            ],
            2,
        )
        vals = np.concatenate(
            [
                np.ones((t, used.size, 1)),
                np.broadcast_to(-patterns[used][None], (t, used.size, n_der)),
            ],
            2,
        )
        lp.rows(cols.reshape(-1, 1 + n_der), vals.reshape(-1, 1 + n_der), 0.0, 0.0)
    for c, s, tg, gg, room in rows:
        lp.rows(
            np.stack([flow_p[tg, gg], flow_q[tg, gg], slack[tg, gg]], axis=1),
            np.array([c, s, -1.0]),
            -np.inf,
            room,
        )


def add_loss_rows(
    lp: SparseLP,
    pt: OperatingPoint,
    dp: np.ndarray,
    dq: np.ndarray,
    pc: np.ndarray,
    r_mw: np.ndarray,
    below: np.ndarray,
    p_max: np.ndarray,
    q_max: np.ndarray,
) -> np.ndarray:
    """Epigraph of ``dP' H dP + dQ' H dQ`` per step; returns the column indices [t, terms] of
    its parts. ``pc`` [T, 1]: $ per MW of loss held over the step; ``r_mw`` [n_branch]: branch
    resistance as loss MW per MW^2 at 1 p.u."""
    n_der = below.shape[0]
    t = pt.v2.shape[0]
    weight = r_mw[None, :] / np.mean(pt.v_from, axis=0)[None, :] ** 2  # [1, n_branch]
    h = (below * weight) @ below.T  # [12, 12] MW per MW^2
    lam, u = np.linalg.eigh(h)
    keep = lam > 1e-4 * lam.max()
    lam, u = lam[keep], u[:, keep]
    terms = []
    grid = np.linspace(-1.0, 1.0, LOSS_TANGENTS)
    tangents = grid * np.abs(
        grid
    )  # denser near the operating point, where the plan of a later pass stays
    for d_var, d_max in ((dp, p_max), (dq, q_max)):
        span = np.abs(u).T @ d_max  # [terms] largest |u' d|
        proj = lp.var((t, lam.size), -span, span)
        cols = np.concatenate(
            [
                np.repeat(proj[:, :, None], 1, 2),
                np.broadcast_to(d_var[:, None, :], (t, lam.size, n_der)),
            ],
            axis=2,
        )
        vals = np.concatenate(
            [np.ones((t, lam.size, 1)), np.broadcast_to(-u.T[None], (t, lam.size, n_der))],
            axis=2,
        )
        lp.rows(cols.reshape(-1, 1 + n_der), vals.reshape(-1, 1 + n_der), 0.0, 0.0)
        # an epigraph only bounds z from below, so it can price losses, never pay for them: at a
        # negative price (where more losses would earn) the plan prices them at 0 and forgoes
        # that small gain
        loss_price = np.maximum(np.broadcast_to(pc, (t, lam.size)), 0.0)
        z = lp.var((t, lam.size), 0.0, np.inf, -loss_price)
        for a in tangents:  # z >= lam (2 a y - a^2), a = tangent point
            at = a * span[None, :]
            lp.rows(
                np.stack([z, proj], -1).reshape(-1, 2),
                np.stack(
                    [np.ones((t, lam.size)), np.broadcast_to(-2 * lam * at, (t, lam.size))], -1
                ).reshape(-1, 2),
                np.broadcast_to(-lam * at**2, (t, lam.size)).ravel(),
                np.inf,
            )
        terms.append(z)
    return np.concatenate(terms, axis=1)
