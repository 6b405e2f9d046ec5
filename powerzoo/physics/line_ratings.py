"""Line ratings that make congestion bind, for cases published without usable ratings.

pandapower's case118 rates every branch at 9,900 MW, so no dispatch could ever congest it.
:func:`binding_line_ratings` derives ratings from the branch flows ``f`` of the DC-OPF without
line limits at a given peak load: ``rating = max(1.25 |f|, 100 MW)``, then the 12 most loaded
branches are tightened to ``0.85 |f|``, so the optimal dispatch is congested at high load.
Cases with published ratings (case5: 400 MW on 1-2, 240 MW on 4-5) keep them
(:func:`with_binding_line_ratings`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from powerzoo.physics.dc_opf import solve_dc_opf
from powerzoo.physics.network import NetworkCase

__all__ = ["binding_line_ratings", "has_published_ratings", "with_binding_line_ratings"]

PLACEHOLDER_RATING_MW = 9000.0  # a case whose every rating is at least this has none published
RATING_MARGIN = 1.25  # rating per MW of peak flow
MIN_RATING_MW = 100.0
N_TIGHT_BRANCHES = 12  # most loaded branches rated below their peak flow
TIGHT_FACTOR = 0.85  # their rating per MW of peak flow
_UNLIMITED_SCALE = 1e6  # line_limit_scale that lifts every limit of the DC-OPF


def has_published_ratings(case: NetworkCase) -> bool:
    """True if any branch rating is below :data:`PLACEHOLDER_RATING_MW` (a real rating)."""
    return bool(np.any(case.branch_rate_a_mw < PLACEHOLDER_RATING_MW))


def binding_line_ratings(case: NetworkCase, peak_load_mw: np.ndarray) -> np.ndarray:
    """Branch ratings [n_branch] [MW, rounded to 0.1 MW] that bind at bus demand
    ``peak_load_mw`` [n_bus] (module docstring)."""
    peak = solve_dc_opf(case, peak_load_mw, line_limit_scale=_UNLIMITED_SCALE)
    flow = np.abs(peak.branch_flow_mw)
    rating = np.maximum(RATING_MARGIN * flow, MIN_RATING_MW)
    tight = np.argsort(flow)[-N_TIGHT_BRANCHES:]
    rating[tight] = TIGHT_FACTOR * flow[tight]
    return np.round(rating, 1)


def with_binding_line_ratings(case: NetworkCase, peak_load_mw: np.ndarray) -> NetworkCase:
    """``case`` itself if it has published ratings, else a copy rated by
    :func:`binding_line_ratings` at bus demand ``peak_load_mw`` [n_bus] [MW]."""
    if has_published_ratings(case):
        return case
    return dataclasses.replace(case, branch_rate_a_mw=binding_line_ratings(case, peak_load_mw))
