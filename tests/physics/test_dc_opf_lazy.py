"""The DC-OPF with lazy flow constraints (networks above the dense PTDF limit) finds the optimum
of the full problem."""

import numpy as np
import pytest

import powerzoo.physics.dc_opf as dc_opf
from powerzoo.physics.cases import load_case
from powerzoo.physics.dc_power_flow import phase_shift_flow_mw
from powerzoo.physics.operable_ratings import without_rerating
from powerzoo.tasks.transmission import congestion_ready_case


def test_lazy_rows_reach_the_dense_optimum_on_case118(monkeypatch: pytest.MonkeyPatch) -> None:
    case = congestion_ready_case("case118")
    loads = np.stack([case.bus_pd_mw * s for s in (1.0, 1.25, 1.4)])
    dense = dc_opf.solve_dc_opf(case, loads, soft_line_penalty=2000.0)
    monkeypatch.setattr(dc_opf, "DENSE_MAX_BUSES", 0)  # every case takes the lazy path
    lazy = dc_opf.solve_dc_opf(case, loads, soft_line_penalty=2000.0)
    assert (np.abs(dense.branch_mu_per_mwh) > 1e-6).any()  # congestion is in play
    np.testing.assert_allclose(lazy.objective_per_h, dense.objective_per_h, rtol=1e-7)
    np.testing.assert_allclose(lazy.lmp_per_mwh, dense.lmp_per_mwh, atol=1e-3)
    np.testing.assert_allclose(lazy.branch_flow_mw, dense.branch_flow_mw, atol=1e-3)


def test_lazy_rows_on_a_large_case_match_the_full_model() -> None:
    case = without_rerating(load_case("case1354pegase"))  # published ratings: congested
    assert case.n_bus > dc_opf.DENSE_MAX_BUSES
    load = case.bus_pd_mw * 0.95
    lazy = dc_opf.solve_dc_opf(case, load, soft_line_penalty=2000.0)
    assert lazy.status == "optimal"
    monitored = np.flatnonzero(np.abs(lazy.branch_mu_per_mwh) > 0)
    assert monitored.size > 0
    # the full model, every rated branch monitored, has the same optimum
    full = dc_opf._FlowRows(case, case.limited_branches, 1.0, True, 2000.0)
    text, x, _ = full.solve(load, phase_shift_flow_mw(case), label="full")
    assert text == "optimal"
    n_gen = case.n_gen
    objective = dc_opf.dispatch_cost(case, x[:n_gen]) + 2000.0 * x[n_gen:].sum()
    assert lazy.objective_per_h == pytest.approx(float(objective), rel=1e-6)
    # every rated branch is within its rating plus the priced slack
    lim = case.limited_branches
    excess = np.abs(lazy.branch_flow_mw[lim]) - case.branch_rate_a_mw[lim]
    assert np.all(excess <= lazy.line_slack_mw[lim] + 1e-5)
