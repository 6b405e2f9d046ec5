"""Multi-agent economic dispatch on DC networks: the presets ``marl_opf`` (case5) and ``opf_118``
(case118) of the per-unit model (:mod:`.model`, :mod:`.presets`), ``opf_118_7d`` (a week with a
hydro plant, :mod:`.week`), and ``opf`` on any case of the case library with area or unit agents
(:mod:`.opf`); every unit with Pmin by technology and ramps (:mod:`.limits`), the rule an
operator's SCED (:mod:`.sced`)."""

from powerzoo.tasks.economic_dispatch.model import (
    DENSE_FLOW_MAX_BUSES,
    LOAD_SCALE,
    OVERLOAD_PENALTY,
    DispatchParams,
    DispatchState,
    EconomicDispatch,
)
from powerzoo.tasks.economic_dispatch.opf import Opf, OpfParams
from powerzoo.tasks.economic_dispatch.presets import MarlOpf, Opf118, Opf118Params
from powerzoo.tasks.economic_dispatch.week import Opf118Week

__all__ = [
    "DENSE_FLOW_MAX_BUSES",
    "LOAD_SCALE",
    "OVERLOAD_PENALTY",
    "DispatchParams",
    "DispatchState",
    "EconomicDispatch",
    "MarlOpf",
    "Opf",
    "Opf118",
    "Opf118Params",
    "Opf118Week",
    "OpfParams",
]
