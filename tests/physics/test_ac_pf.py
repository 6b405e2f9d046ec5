"""Batched meshed AC power flow (powerzoo.physics.ac_pf) against pandapower's runpp.

pandapower runs with ``PANDAPOWER_PF_OPTIONS`` (Newton-Raphson, voltage angles, DC start, T
transformer model, reactive limits not enforced, mismatch tolerance 1e-10 MVA); our flows run
to 1e-8 p.u.  Compared: voltage magnitudes to 1e-6 p.u. and angles to 1e-5 degrees (both
solutions agree to about 1e-9 p.u. / 1e-7 degrees), branch flows and the slack injection to
1e-4 MW, at the case's own loading and for eight scenarios in one batch with every load
scaled by its own random factor in [0.9, 1.1] (three of them re-solved by pandapower).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pp = pytest.importorskip("pandapower")

from powerzoo.physics.ac_network import (  # noqa: E402
    PANDAPOWER_PF_OPTIONS,
    _pandapower_net,
    network_from_pandapower,
)
from powerzoo.physics.ac_pf import ac_power_flow  # noqa: E402

VM_TOL = 1e-6  # p.u.
VA_TOL = 1e-5  # degrees
FLOW_TOL = 1e-4  # MW / Mvar
CASES = [
    "case14",
    "case30",
    "case118",
    "case300",
    "case1354pegase",
    pytest.param("case2869pegase", marks=pytest.mark.slow),
    pytest.param("GBnetwork", marks=pytest.mark.slow),
]


@pytest.fixture(scope="module", params=CASES)
def converted(request):
    """(pandapower net after runpp, its ACNetwork), once per case and module."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = _pandapower_net(request.param)
        network = network_from_pandapower(net, request.param)
    return net, network


def _bus_positions(net, column) -> np.ndarray:
    position = {b: k for k, b in enumerate(net.bus.index)}
    return np.array([position[b] for b in column])


def _scenarios(net, network, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    factor = 1.0 + rng.uniform(-0.1, 0.1, (n, len(net.load)))
    load_bus = _bus_positions(net, net.load.bus)
    p_load = (net.load.p_mw * net.load.scaling).to_numpy()
    q_load = (net.load.q_mvar * net.load.scaling).to_numpy()
    p = np.repeat(network.p_mw[None], n, axis=0)
    q = np.repeat(network.q_mvar[None], n, axis=0)
    for k in range(n):
        np.add.at(p[k], load_bus, -p_load * (factor[k] - 1.0))
        np.add.at(q[k], load_bus, -q_load * (factor[k] - 1.0))
    return factor, p, q


def _check_against(net, result, row=None) -> None:
    pick = (lambda x: x) if row is None else (lambda x: x[row])
    np.testing.assert_allclose(pick(result.vm_pu), net.res_bus.vm_pu, rtol=0, atol=VM_TOL)
    np.testing.assert_allclose(pick(result.va_deg), net.res_bus.va_degree, rtol=0, atol=VA_TOL)
    n_line = len(net.line)
    np.testing.assert_allclose(
        pick(result.p_from_mw)[:n_line], net.res_line.p_from_mw, rtol=0, atol=FLOW_TOL
    )
    np.testing.assert_allclose(
        pick(result.q_to_mvar)[:n_line], net.res_line.q_to_mvar, rtol=0, atol=FLOW_TOL
    )
    if len(net.trafo):
        np.testing.assert_allclose(
            pick(result.p_from_mw)[n_line:], net.res_trafo.p_hv_mw, rtol=0, atol=FLOW_TOL
        )
    slack = _bus_positions(net, net.ext_grid.bus)
    shunt_p = np.zeros(len(net.bus))
    if len(net.shunt):
        np.add.at(shunt_p, _bus_positions(net, net.shunt.bus), net.res_shunt.p_mw.to_numpy())
    # pandapower's res_bus.p_mw is consumption at the bus, shunts included
    expected = -(net.res_bus.p_mw.to_numpy() - shunt_p)[slack]
    np.testing.assert_allclose(pick(result.p_mw)[slack], expected, rtol=0, atol=FLOW_TOL)


def test_case_loading_matches_runpp(converted):
    net, network = converted
    result = ac_power_flow(network, network.p_mw, network.q_mvar)
    assert result.vm_pu.shape == (network.n_bus,) and bool(result.converged)
    _check_against(net, result)


def test_perturbed_batch_matches_runpp(converted):
    net, network = converted
    factor, p, q = _scenarios(net, network, 8)
    result = ac_power_flow(network, p, q)
    assert result.vm_pu.shape == (8, network.n_bus)
    assert result.converged.all() and (result.iterations > 0).all()
    base = net.load[["p_mw", "q_mvar"]].copy()
    try:
        for row in (0, 3, 7):
            net.load["p_mw"] = base.p_mw * factor[row]
            net.load["q_mvar"] = base.q_mvar * factor[row]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pp.runpp(net, **PANDAPOWER_PF_OPTIONS)
            _check_against(net, result, row)
    finally:
        net.load[["p_mw", "q_mvar"]] = base
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pp.runpp(net, **PANDAPOWER_PF_OPTIONS)  # the fixture's results: the case's own


def test_generator_reactive_output_reported(converted):
    net, network = converted
    result = ac_power_flow(network, network.p_mw, network.q_mvar)
    ext = _bus_positions(net, net.ext_grid.bus)
    # the slack unit's reactive output is pandapower's ext_grid result (one unit at that bus)
    if len(net.gen) == 0 or not np.isin(ext, _bus_positions(net, net.gen.bus)).any():
        np.testing.assert_allclose(
            result.gen_q_mvar[ext], net.res_ext_grid.q_mvar, rtol=0, atol=FLOW_TOL
        )
    controlled = np.isfinite(result.gen_q_mvar)
    assert controlled[ext].all()
    assert not controlled[_bus_positions(net, net.load.bus)].all()
    outside = (result.gen_q_mvar > network.q_max_mvar + 1e-6) | (
        result.gen_q_mvar < network.q_min_mvar - 1e-6
    )
    np.testing.assert_array_equal(result.q_limit_violated, outside)


def test_non_convergent_row_is_flagged():
    network = _network("case118")
    p = np.repeat(network.p_mw[None], 3, axis=0)
    q = np.repeat(network.q_mvar[None], 3, axis=0)
    load = np.minimum(network.p_mw, 0.0)
    p[1] += 4.0 * load  # every demand x 5: beyond the voltage-collapse point
    q[1] += 4.0 * np.minimum(network.q_mvar, 0.0)
    result = ac_power_flow(network, p, q)
    np.testing.assert_array_equal(result.converged, [True, False, True])
    np.testing.assert_allclose(result.vm_pu[0], result.vm_pu[2])
    assert np.isfinite(result.vm_pu[0]).all()


def test_voltage_setpoints_are_held():
    network = _network("case14")
    vm = network.vm_pu.copy()
    controlled = np.isfinite(ac_power_flow(network, network.p_mw, network.q_mvar).gen_q_mvar)
    vm[controlled] += 0.01
    result = ac_power_flow(network, network.p_mw[None], network.q_mvar[None], vm_pu=vm[None])
    assert result.converged.all()
    np.testing.assert_allclose(result.vm_pu[0, controlled], vm[controlled], atol=1e-12)


def test_name_and_network_give_the_same_flow():
    network = _network("case14")
    by_name = ac_power_flow("case14", network.p_mw, network.q_mvar)
    np.testing.assert_allclose(
        by_name.vm_pu, ac_power_flow(network, network.p_mw, network.q_mvar).vm_pu
    )


@pytest.mark.parametrize(
    "p_shape, q_shape, vm_shape, message",
    [
        ((2, 13), (2, 14), None, r"p_mw must have shape \[B, 14\]"),
        ((2, 14), (3, 14), None, "p_mw has 2 rows but the batch has 3"),
        ((2, 14), (2, 14), (3, 14), "vm_pu has 3 rows"),
        ((2, 2, 14), (2, 14), None, "p_mw must have shape"),
        ((14,), (14,), (5,), "vm_pu must have shape"),
    ],
)
def test_bad_shapes_raise(p_shape, q_shape, vm_shape, message):
    network = _network("case14")
    vm = None if vm_shape is None else np.ones(vm_shape)
    with pytest.raises(ValueError, match=message):
        ac_power_flow(network, np.zeros(p_shape), np.zeros(q_shape), vm)


def test_unknown_case_name_raises():
    with pytest.raises(ValueError, match="unknown network 'case_nope'"):
        ac_power_flow("case_nope", np.zeros(3), np.zeros(3))


_NETWORKS: dict = {}


def _network(name):
    if name not in _NETWORKS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _NETWORKS[name] = network_from_pandapower(_pandapower_net(name), name)
    return _NETWORKS[name]


def test_disk_cache_round_trip(tmp_path):
    from powerzoo.physics.ac_network import _read_cache, _write_cache

    network = _network("case14")
    _write_cache(tmp_path / "ac-case14.npz", network)
    back = _read_cache(tmp_path / "ac-case14.npz", "case14")
    p, q = network.p_mw, network.q_mvar
    np.testing.assert_array_equal(
        ac_power_flow(back, p, q).va_deg, ac_power_flow(network, p, q).va_deg
    )
    with pytest.raises(ValueError, match="holds network 'case14'"):
        _read_cache(tmp_path / "ac-case14.npz", "case30")
