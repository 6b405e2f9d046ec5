"""pandapower's AC optimal power flow as the oracle of the AC transmission tasks.

:func:`opf_net` builds pandapower's network of a case with the AC tasks' branch ratings (the
voltage-class ratings of :class:`powerzoo.tasks.ac_transmission.ACGrid`, written into the
lines' and transformers' ``max_loading_percent``); :func:`run_ac_opf` solves one step's AC-OPF
with pandapower's interior-point solver (``pandapower.runopp``: polar AC power flow equations,
bus voltage limits, branch MVA limits at both ends, units' P and Q limits) and returns the
solution, or ``None`` where the solver does not converge.  Objective: the case's generation
cost, or (``minimise="losses"``, with the non-slack units' P fixed by ``run_ac_opf``'s
``fixed_p_mw``) 1 $/MWh on the slack's output only: with every other injection fixed, the
slack's output is the load plus the losses, so the cheapest solution is the least-loss one
(pandapower's OPF has no loss objective of its own).  Each call takes about 1 s on case118
(one core), so a day of 48 half-hours takes about a minute.  pandapower is imported here only.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from powerzoo.physics.network import NetworkCase

__all__ = ["opf_net", "run_ac_opf", "unit_results"]


def opf_net(
    case: NetworkCase,
    pandapower_rate_mva: np.ndarray,
    rate_mva: np.ndarray,
    minimise: str = "cost",
) -> Any:
    """pandapower's network ``case.name`` with branch ratings ``rate_mva`` [n_branch] (MVA;
    lines first, then transformers), from pandapower's own ``pandapower_rate_mva``;
    ``minimise``: ``"cost"`` (the case's generation cost) or ``"losses"`` (module docstring)."""
    import pandapower as pp
    import pandapower.networks as pn

    if minimise not in ("cost", "losses"):
        raise ValueError(f"minimise must be 'cost' or 'losses', got {minimise!r}")

    net = getattr(pn, case.name)()
    scale = 100.0 * np.where(np.isfinite(rate_mva), rate_mva, 1e9) / pandapower_rate_mva
    n_line = len(net.line)
    net.line["max_loading_percent"] = scale[:n_line]
    if len(net.trafo):
        net.trafo["max_loading_percent"] = scale[n_line : n_line + len(net.trafo)]
    net.load["base_p_mw"] = net.load.p_mw.astype(float)
    net.load["base_q_mvar"] = net.load.q_mvar.astype(float)
    if minimise == "losses":
        net.poly_cost = net.poly_cost.iloc[0:0]
        for element in net.ext_grid.index:
            pp.create_poly_cost(net, element, "ext_grid", cp1_eur_per_mw=1.0)
    return net


def run_ac_opf(
    net: Any,
    load_factor: float,
    fixed_p_mw: np.ndarray | None = None,
    case: NetworkCase | None = None,
) -> Any | None:
    """Solve the AC-OPF of ``net`` (:func:`opf_net`) with every load at ``load_factor`` x its
    base; ``fixed_p_mw`` [n_gen] (MW, ``case``'s unit order): the active output of every unit
    of pandapower's ``gen`` table is held there (its min and max P), the slack stays free.
    ``net`` itself on success (its ``res_*`` tables), ``None`` if it did not converge."""
    import pandapower as pp

    net.load["p_mw"] = net.load.base_p_mw * load_factor
    net.load["q_mvar"] = net.load.base_q_mvar * load_factor
    if fixed_p_mw is not None:
        if case is None:
            raise ValueError("run_ac_opf: fixed_p_mw needs the case (its unit order)")
        rows = np.flatnonzero(case.gen_element_type == "gen")
        index = net.gen.index[case.gen_element[rows]]
        p = np.asarray(fixed_p_mw, dtype=float)[rows]
        net.gen.loc[index, "p_mw"] = p
        net.gen.loc[index, "min_p_mw"] = p
        net.gen.loc[index, "max_p_mw"] = p
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
