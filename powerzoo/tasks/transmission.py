"""What the transmission-grid tasks share (``marl_opf``, ``opf_118``, ``opf_118_7d``,
``marl_uc``, ``tso``): the cases with their line ratings, the load level, the price of a line
overload and the units' merit order."""

from __future__ import annotations

import functools

import numpy as np

from powerzoo.physics.cases import NetworkCase, load_case
from powerzoo.physics.line_ratings import with_voltage_class_ratings

__all__ = [
    "STEP_MINUTES",
    "BASE_LOAD_SCALE",
    "OVERLOAD_PRICE_PER_MWH",
    "congestion_ready_case",
    "marginal_cost_per_mwh",
]

STEP_MINUTES = 30  # every transmission task steps in half-hours
# bus loads are the case's published base load times this times the daily demand shape: the
# published base load then sits at about 91 % of the year's peak
BASE_LOAD_SCALE = 1.1
# $ per MWh of flow above a branch's rating, the transmission-constraint penalty factor of the
# tasks' rewards and oracles: 2,000 $/MWh, the default transmission constraint penalty factor of
# PJM's market clearing (ISOs set theirs between about 1,000 and 3,500 $/MWh); 50-100 x the
# case's marginal costs, so an optimal dispatch relieves every overload redispatch can relieve
OVERLOAD_PRICE_PER_MWH = 2000.0


@functools.lru_cache(maxsize=4)
def congestion_ready_case(name: str) -> NetworkCase:
    """``name`` with ratings by voltage class (case118,
    :mod:`powerzoo.physics.line_ratings`) or its published ratings (case5)."""
    return with_voltage_class_ratings(load_case(name))


def marginal_cost_per_mwh(case: NetworkCase) -> np.ndarray:
    """Marginal cost at mid output ($/MWh) per unit, for the merit order."""
    p_mid = (case.gen_pmin_mw + case.gen_pmax_mw) / 2.0
    return case.gen_c1_per_mwh + 2.0 * case.gen_c2_per_mw2h * p_mid
