"""The ``dso`` oracle's day plan: one LP on HiGHS of the flexible loads' curtailment and shift
with the voltage band on LinDistFlow (:mod:`powerzoo.tasks.dso`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.devices.flexible_load import payback_matrix
from powerzoo.physics.highs import new_highs
from powerzoo.tasks.feeder import add_voltage_band, unit_variables

__all__ = ["HORIZON", "solve_day"]

HORIZON = 48  # steps of a dso day


def solve_day(
    params: Any, base: np.ndarray, v2_base: np.ndarray, sens: np.ndarray, t0: int, dt_h: float
) -> tuple[np.ndarray, np.ndarray]:
    """Curtail and shift fractions [T, 6] of the day plan (LP on HiGHS via highspy).

    Minimise ``VOLL x curtailed MWh + 0.01 $/MWh x shifted MWh + voltage penalty`` with fractions
    in ``[0, flex_max_fraction]`` (0.5 by default, the env's action bound; no shift on the last
    step). The flexible units' demand changes by
    ``dp = -base (c + s) + W (base s)`` (payback matrix ``W``), the squared voltages by
    ``dp @ sens`` (:func:`powerzoo.tasks.feeder.add_voltage_band`). Losses are not in the LP
    (LinDistFlow is lossless); the plan pays them under the exact flow.
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
    penalty = add_voltage_band(h, v2_base, dp @ sens, bound)
    cost = params.voll_per_mwh * dt_h * h.qsum((base * curtail).ravel())
    if shift is not None:
        cost = cost + 0.01 * dt_h * h.qsum((base[:-1] * shift).ravel())
    h.minimize(cost if penalty is None else cost + penalty)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"dso oracle LP failed: {h.modelStatusToString(h.getModelStatus())}")
    shift_plan = np.zeros((t, n))
    if shift is not None:
        shift_plan[:-1] = h.vals(shift)
    return h.vals(curtail), shift_plan
