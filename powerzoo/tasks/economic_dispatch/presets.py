"""The one-day presets of the per-unit dispatch model: ``marl_opf`` (case5) and ``opf_118``
(case118)."""

from __future__ import annotations

import dataclasses

from powerzoo.tasks.economic_dispatch.layout import DispatchParams
from powerzoo.tasks.economic_dispatch.model import EconomicDispatch

__all__ = ["CASE118_LOAD_SCALE", "MarlOpf", "Opf118", "Opf118Params"]

CASE118_LOAD_SCALE = 1.4
"""Bus loads of the case118 dispatch tasks: the case's published loads x this x the daily demand
shape, so the published load sits at about 72 % of the year's peak (5,910 MW; 2,506 MW at the
year's lowest half-hour, above the 2,201 MW the committed fleet cannot go below). At the
unit-commitment tasks' 1.1 the one binding branch (the 345/138 kV transformer 8-5) binds in 6 %
of the test half-hours under the oracle; at 1.4 in about 40 %."""


@dataclasses.dataclass(frozen=True)
class Opf118Params(DispatchParams):
    """The numbers of an ``opf_118`` / ``opf_118_7d`` episode (:class:`DispatchParams`, with the
    case118 load level :data:`CASE118_LOAD_SCALE`)."""

    load_scale: float = CASE118_LOAD_SCALE


class MarlOpf(EconomicDispatch):
    """Preset ``marl_opf``: the dispatch model on the PJM 5-bus case (case5, published ratings of
    400 MW on branch 1-2 and 240 MW on 4-5), five generator agents, one day; the units' Pmin by
    technology are scaled by 0.72 so that the committed fleet fits under the year's lowest load.
    """

    task_id = "marl_opf"
    case_name = "case5"
    horizon = 48
    description = (
        "Five generator agents dispatch the PJM 5-bus system (DC power flow) over one day."
    )


class Opf118(EconomicDispatch):
    """Preset ``opf_118``: the dispatch model on the IEEE 118-bus case, 54 generator agents,
    one day, at 1.4 x the case's published loads; branches rated by voltage class (binding: the
    oracle's dispatch has a branch at its rating in about 40 % of the test half-hours).
    """

    task_id = "opf_118"
    case_name = "case118"
    horizon = 48
    Params = Opf118Params
    description = (
        "54 generator agents dispatch the IEEE 118-bus system with binding line limits and unit "
        "ramps over one day."
    )
