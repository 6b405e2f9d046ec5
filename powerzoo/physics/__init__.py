"""Network physics: test cases, DC / AC / radial power flow, DC-OPF, market clearing.

Every kernel is batched over a leading axis ``B`` of scenarios and works in MW, MVAr, p.u. and
$/MWh. The public names are available at package level (``from powerzoo.physics import
load_case, dc_power_flow, solve_dc_opf``), each loaded on first use; the modules below hold the
rest of each kernel.
"""

from __future__ import annotations

from powerzoo.lazy import lazy_exports

_EXPORTS = {
    "CASE_NAMES": "powerzoo.physics.cases",
    "NetworkCase": "powerzoo.physics.cases",
    "RadialFeeder": "powerzoo.physics.cases",
    "list_cases": "powerzoo.physics.cases",
    "load_case": "powerzoo.physics.cases",
    "dc_power_flow": "powerzoo.physics.dc_power_flow",
    "ptdf_matrix": "powerzoo.physics.dc_power_flow",
    "DCOPFResult": "powerzoo.physics.dc_opf",
    "solve_dc_opf": "powerzoo.physics.dc_opf",
    "ACPFResult": "powerzoo.physics.ac_pf",
    "ac_power_flow": "powerzoo.physics.ac_pf",
    "LinDistFlowResult": "powerzoo.physics.radial_pf",
    "RadialPFResult": "powerzoo.physics.radial_pf",
    "lindistflow": "powerzoo.physics.radial_pf",
    "radial_power_flow": "powerzoo.physics.radial_pf",
    "MarketClearing": "powerzoo.physics.market_clearing",
    "MarketResult": "powerzoo.physics.market_clearing",
    "clear_market": "powerzoo.physics.market_clearing",
    "ControlAreas": "powerzoo.physics.areas",
    "control_areas": "powerzoo.physics.areas",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
