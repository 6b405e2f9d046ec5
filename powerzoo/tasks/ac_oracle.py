"""pandapower's AC optimal power flow as the oracle of the AC transmission tasks.

:func:`opf_net` builds pandapower's network of a case with the AC tasks' branch ratings (the
voltage-class ratings of :class:`powerzoo.tasks.ac_transmission.ACGrid`, written into the
lines' and transformers' ``max_loading_percent``); :func:`run_ac_opf` solves one step's AC-OPF
with pandapower's interior-point solver (``pandapower.runopp``: polar AC power flow equations,
bus voltage limits, branch MVA limits at both ends, units' P and Q limits) and returns the
solution, or ``None`` where the solver does not converge.  Each call takes about 1 s on case118
(one core), so a day of 48 half-hours takes about a minute.  pandapower is imported here only.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from powerzoo.physics.network import NetworkCase

__all__ = ["opf_net", "run_ac_opf", "unit_results"]


def opf_net(case: NetworkCase, pandapower_rate_mva: np.ndarray, rate_mva: np.ndarray) -> Any:
    """pandapower's network ``case.name`` with branch ratings ``rate_mva`` [n_branch] (MVA;
    lines first, then transformers), from pandapower's own ``pandapower_rate_mva``."""
    import pandapower.networks as pn

    net = getattr(pn, case.name)()
    scale = 100.0 * np.where(np.isfinite(rate_mva), rate_mva, 1e9) / pandapower_rate_mva
    n_line = len(net.line)
    net.line["max_loading_percent"] = scale[:n_line]
    if len(net.trafo):
        net.trafo["max_loading_percent"] = scale[n_line : n_line + len(net.trafo)]
    net.load["base_p_mw"] = net.load.p_mw.astype(float)
    net.load["base_q_mvar"] = net.load.q_mvar.astype(float)
    return net


def run_ac_opf(net: Any, load_factor: float) -> Any | None:
    """Solve the AC-OPF of ``net`` (:func:`opf_net`) with every load at ``load_factor`` x its
    base; ``net`` itself on success (its ``res_*`` tables), ``None`` if it did not converge."""
    import pandapower as pp

    net.load["p_mw"] = net.load.base_p_mw * load_factor
    net.load["q_mvar"] = net.load.base_q_mvar * load_factor
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pp.runopp(net, calculate_voltage_angles=True, numba=False, verbose=False)
    except Exception:  # pandapower raises OPFNotConverged (and others) on a failed solve
        return None
    return net if net.OPF_converged else None


def unit_results(net: Any, case: NetworkCase) -> tuple[np.ndarray, np.ndarray]:
    """``(p_mw, vm_pu)`` [n_gen] of the case's units (its order) from a solved ``net``: each
    unit's active output and its bus's voltage."""
    p = np.empty(case.n_gen)
    for table in ("gen", "ext_grid"):
        rows = np.flatnonzero(case.gen_element_type == table)
        if rows.size:
            p[rows] = net[f"res_{table}"].p_mw.to_numpy()[case.gen_element[rows]]
    vm = net.res_bus.vm_pu.to_numpy()[case.gen_bus]
    return p, vm
