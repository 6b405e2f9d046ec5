"""Multi-agent economic dispatch on DC networks: the presets ``marl_opf`` (case5), ``opf_118`` and
``opf_118_7d`` (case118), one agent per generator (:mod:`.model`), and ``opf`` on any case of the
case library with area or unit agents (:mod:`.opf`)."""

from powerzoo.tasks.economic_dispatch.model import (
    DENSE_FLOW_MAX_BUSES,
    LOAD_SCALE,
    OVERLOAD_PENALTY,
    DispatchParams,
    DispatchState,
    EconomicDispatch,
    MarlOpf,
    Opf118,
    Opf118Week,
)
from powerzoo.tasks.economic_dispatch.opf import Opf, OpfParams

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
    "Opf118Week",
    "OpfParams",
]
