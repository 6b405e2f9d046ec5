"""Network-blind economic dispatch at one incremental cost (the "lambda" dispatch).

:func:`equal_incremental_cost_dispatch` is the classic economic dispatch: the cheapest outputs of
units with convex quadratic costs that meet a total demand within each unit's bounds, the network
ignored. Every unit not at a bound runs at one incremental cost ``lambda``. With a step's bounds
(ramps, Pmin) it is the first stage of an operator's security-constrained economic dispatch
(:mod:`powerzoo.physics.redispatch` then relieves the congestion); alone it is the network-blind
naive baseline of the dispatch tasks.
"""

from __future__ import annotations

import numpy as np

__all__ = ["equal_incremental_cost_dispatch"]


def _unit_supply(
    lam: np.ndarray, lo: np.ndarray, hi: np.ndarray, c1: np.ndarray, c2: np.ndarray, upper: bool
) -> np.ndarray:
    """Each unit's output [B, K, n] at incremental costs ``lam`` [B, K]: quadratic units where
    their marginal cost ``c1 + 2 c2 p`` meets ``lam`` (within their bounds), linear units at
    ``hi`` above their ``c1`` and ``lo`` below it; at ``lam == c1`` a linear unit gives ``hi``
    when ``upper``, else ``lo``."""
    lam = lam[..., None]
    quad = c2 > 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        p_quad = np.clip((lam - c1) / np.where(quad, 2.0 * c2, 1.0), lo, hi)
    above = lam >= c1 if upper else lam > c1
    p_lin = np.where(above, hi, lo)
    return np.where(quad, p_quad, p_lin)


def equal_incremental_cost_dispatch(
    total_mw: np.ndarray,
    pmin_mw: np.ndarray,
    pmax_mw: np.ndarray,
    c1_per_mwh: np.ndarray,
    c2_per_mw2h: np.ndarray,
) -> np.ndarray:
    """The cheapest dispatch [B, n] (MW) of units with costs ``c2 p^2 + c1 p`` that meets
    ``total_mw`` [B] within ``[pmin, pmax]``, ignoring the network.

    The optimum runs every unit not at a bound at one incremental cost ``lambda``
    (``c1 + 2 c2 p = lambda``): the total output is a non-decreasing, piecewise linear function
    of ``lambda`` whose break points are the incremental costs at the units' bounds (and the
    ``c1`` of linear-cost units, where it jumps), so ``lambda`` is found exactly between two
    break points. Units with linear costs at the marginal ``lambda`` share what is left in
    proportion to their room. The demand is clipped to ``[sum pmin, sum pmax]``.

    Args:
        total_mw: Demand to meet [B] (or a scalar), MW.
        pmin_mw: Lower bounds [n] or [B, n], MW.
        pmax_mw: Upper bounds [n] or [B, n], MW (``>= pmin_mw``).
        c1_per_mwh: Linear cost coefficients [n], $/MWh.
        c2_per_mw2h: Quadratic cost coefficients [n] (``>= 0``), $/MW^2h.

    Returns:
        Outputs [B, n], MW.
    """
    demand = np.atleast_1d(np.asarray(total_mw, dtype=np.float64))
    b = demand.size
    c1 = np.asarray(c1_per_mwh, dtype=np.float64)
    c2 = np.asarray(c2_per_mw2h, dtype=np.float64)
    n = c1.size
    lo = np.broadcast_to(np.asarray(pmin_mw, dtype=np.float64), (b, n))
    hi = np.maximum(np.broadcast_to(np.asarray(pmax_mw, dtype=np.float64), (b, n)), lo)
    if np.any(c2 < 0.0):
        raise ValueError("equal_incremental_cost_dispatch needs convex costs (c2 >= 0)")
    demand = np.clip(demand, lo.sum(axis=1), hi.sum(axis=1))
    quad = c2 > 0.0
    # break points [B, K]: incremental costs at each quadratic unit's bounds, c1 of linear ones
    points = np.concatenate(
        [
            np.where(quad, c1 + 2.0 * c2 * lo, c1),
            np.where(quad, c1 + 2.0 * c2 * hi, c1),
        ],
        axis=1,
    )
    points = np.sort(points, axis=1)
    s_lo = _unit_supply(points, lo[:, None], hi[:, None], c1, c2, upper=False).sum(axis=2)
    s_hi = _unit_supply(points, lo[:, None], hi[:, None], c1, c2, upper=True).sum(axis=2)
    rows = np.arange(b)
    # the first break point whose upper supply reaches the demand (the last one always does)
    k = np.argmax(s_hi >= demand[:, None] - 1e-9, axis=1)
    lam_k = points[rows, k]
    inside_jump = s_lo[rows, k] <= demand + 1e-9
    # between break points k-1 and k the supply is linear in lambda: interpolate
    km1 = np.maximum(k - 1, 0)
    left, right = s_hi[rows, km1], s_lo[rows, k]
    span = np.where(right - left > 0.0, right - left, 1.0)
    lam_between = points[rows, km1] + (demand - left) / span * (lam_k - points[rows, km1])
    lam = np.where(inside_jump, lam_k, lam_between)
    p = _unit_supply(lam[:, None], lo[:, None], hi[:, None], c1, c2, upper=False)[:, 0]
    # linear units at the marginal cost share the remainder in proportion to their room
    marginal = ~quad & np.isclose(c1, lam[:, None], rtol=0.0, atol=1e-12) & inside_jump[:, None]
    room = np.where(marginal, hi - lo, 0.0)
    rest = demand - p.sum(axis=1)
    total_room = room.sum(axis=1)
    share = np.where(
        total_room > 0.0, np.clip(rest / np.where(total_room > 0, total_room, 1.0), 0.0, 1.0), 0.0
    )
    return p + room * share[:, None]
