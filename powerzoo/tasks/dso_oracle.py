"""The ``dso`` oracle's day plan: one LP on HiGHS of the flexible loads' curtailment and shift
with the voltage band on LinDistFlow (:mod:`powerzoo.tasks.dso`), the part of the per-episode
voltage budget the plan may spend given as an allowance (:func:`solve_day`); the passes that
linearise it around the exact flow and the tap the AVC settles on, and the measured figures, are
in :mod:`powerzoo.tasks.dso_plan` (65 test days: -532 $/day within the budget every day, the
rule -1,198; one LP that held the band, around the day without control: -1,147)."""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.devices.flexible_load import payback_matrix
from powerzoo.physics.highs import new_highs
from powerzoo.tasks.feeder import (
    ORACLE_BAND_MARGIN_PU,
    ORACLE_VOLTAGE_PENALTY,
    V_MAX_PU,
    V_MIN_PU,
    unit_variables,
)

__all__ = ["HORIZON", "SHIFT_PRICE_PER_MWH", "VIOLATION_PRICE", "solve_day"]

HORIZON = 48  # steps of a dso day
SHIFT_PRICE_PER_MWH = 0.01  # $/MWh on shifted energy: no shift the plan does not need
VIOLATION_PRICE = 1.0  # $ per p.u.-step of violation within the allowance: none for nothing


def _band_slacks(h: Any, v2_base: np.ndarray, dv2: Any, dv2_bound: np.ndarray) -> list[Any]:
    """Soft voltage-band rows ``v2_base + dv2`` inside the band narrowed by
    ``ORACLE_BAND_MARGIN_PU`` on each side, added only where ``v2_base +- dv2_bound`` crosses it;
    returns the non-negative slacks (p.u.^2) of the low and the high rows."""
    lo = (V_MIN_PU + ORACLE_BAND_MARGIN_PU) ** 2
    hi = (V_MAX_PU - ORACLE_BAND_MARGIN_PU) ** 2
    slacks = []
    for sign, need in ((1.0, v2_base - dv2_bound < lo), (-1.0, v2_base + dv2_bound > hi)):
        rows = np.flatnonzero(need.ravel())
        if not rows.size:
            continue
        slack = h.addVariables(rows.size, lb=0.0)
        expr, base = dv2.ravel()[rows], v2_base.ravel()[rows]
        if sign > 0:  # v2_base + dv2 + slack >= lo
            h.addConstrs(expr + slack >= lo - base)
        else:  # v2_base + dv2 - slack <= hi
            h.addConstrs(expr - slack <= hi - base)
        slacks.append(slack)
    return slacks


def solve_day(
    params: Any,
    base: np.ndarray,
    v2_base: np.ndarray,
    sens: np.ndarray,
    t0: int,
    dt_h: float,
    allowance_pu: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Curtail and shift fractions [T, 6] of the day plan (LP on HiGHS via highspy).

    Minimise ``VOLL x curtailed MWh + 0.01 $/MWh x shifted MWh`` plus the voltage slacks, with
    fractions in ``[0, flex_max_fraction]`` (0.5 by default, the env's action bound; no shift on
    the last step). The flexible units' demand changes by ``dp = -base (c + s) + W (base s)``
    (payback matrix ``W``), the squared voltages ``v2_base`` [T, n_bus] (p.u.^2) by ``dp @ sens``
    (LinDistFlow, :func:`powerzoo.tasks.feeder.voltage_sq_sensitivity`). The band's slacks,
    counted in p.u. of voltage (``slack / (2 x 0.95)``), are priced at :data:`VIOLATION_PRICE`
    ($ per p.u.) up to ``allowance_pu`` (p.u.-steps over the plan, summed over buses: the part
    of the episode's ``voltage_violation`` budget the plan may spend) and at
    ``ORACLE_VOLTAGE_PENALTY`` beyond it. Losses are not in the LP (LinDistFlow is lossless); the
    plan pays them under the exact flow.
    """
    import highspy

    t, n = base.shape
    h = new_highs()
    top = np.full(n, params.flex_max_fraction)
    curtail = unit_variables(h, t, np.zeros(n), top)
    shift = unit_variables(h, t - 1, np.zeros(n), top) if t > 1 else None
    dp = -base * curtail
    if shift is not None:
        shifted = base[:-1] * shift  # MW deferred at steps 0..T-2
        dp[:-1] = dp[:-1] - shifted
        dp = dp + payback_matrix(t0, HORIZON, params.payback_steps)[:, :-1] @ shifted
    bound = (1.2 * base.max(axis=0) @ np.abs(sens))[None, :] + np.zeros_like(v2_base)
    cost = params.voll_per_mwh * dt_h * h.qsum((base * curtail).ravel())
    if shift is not None:
        cost = cost + SHIFT_PRICE_PER_MWH * dt_h * h.qsum((base[:-1] * shift).ravel())
    slacks = _band_slacks(h, v2_base, dp @ sens, bound)
    if slacks:
        per_pu = 1.0 / (2.0 * V_MIN_PU)  # p.u. of voltage per p.u.^2 of slack near the band
        spent = per_pu * h.qsum([h.qsum(s) for s in slacks])
        excess = h.addVariable(lb=0.0)  # p.u.-steps beyond the allowance
        h.addConstr(spent - excess <= float(allowance_pu))
        # ORACLE_VOLTAGE_PENALTY is $ per p.u.^2 (about twice that per p.u. near the band)
        cost = cost + VIOLATION_PRICE * spent + 2.0 * V_MIN_PU * ORACLE_VOLTAGE_PENALTY * excess
    h.minimize(cost)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"dso oracle LP failed: {h.modelStatusToString(h.getModelStatus())}")
    shift_plan = np.zeros((t, n))
    if shift is not None:
        shift_plan[:-1] = h.vals(shift)
    return h.vals(curtail), shift_plan
