"""What the transmission-grid tasks share (``marl_opf``, ``opf_118``, ``opf_118_7d``,
``marl_uc``, ``tso``): the cases with binding line ratings and the units' merit order."""

from __future__ import annotations

import functools

import numpy as np

from powerzoo.physics.cases import NetworkCase, load_case
from powerzoo.physics.line_ratings import with_binding_line_ratings

__all__ = ["STEP_MINUTES", "RATING_LOAD_SCALE", "congestion_ready_case", "marginal_cost_per_mwh"]

STEP_MINUTES = 30  # every transmission task steps in half-hours
# the line ratings are derived from the DC-OPF flows at the base load times this (10 % above the
# published base load), so congestion binds at the daily peaks
RATING_LOAD_SCALE = 1.1


@functools.lru_cache(maxsize=4)
def congestion_ready_case(name: str) -> NetworkCase:
    """``name`` with binding line limits (case118) or its published ratings (case5)."""
    case = load_case(name)
    return with_binding_line_ratings(case, case.bus_pd_mw * RATING_LOAD_SCALE)


def marginal_cost_per_mwh(case: NetworkCase) -> np.ndarray:
    """Marginal cost at mid output ($/MWh) per unit, for the merit order."""
    p_mid = (case.gen_pmin_mw + case.gen_pmax_mw) / 2.0
    return case.gen_c1_per_mwh + 2.0 * case.gen_c2_per_mw2h * p_mid
