"""Reactive limits enforced in the batched AC power flow against pandapower's
``runpp(enforce_q_lims=True)``, on perturbed scenarios drawn here (seeded): every load scaled
by a common factor and its own jitter, the units' active set-points and voltage set-points
moved, then each row re-solved by pandapower with the same data.

Compared where both converge: voltage magnitudes to 1e-6 p.u., angles to 1e-5 degrees, the
units' reactive output to 1e-4 Mvar and which units are held at which limit (exactly).  A row
our flow reports as converged must be one pandapower solves too; pandapower may solve a few
more on case300, whose limits leave it near collapse: it goes on switching buses after a
switching pass that did not converge, where this flow flags the row instead.
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
Q_TOL = 1e-4  # Mvar
ENFORCED = {**PANDAPOWER_PF_OPTIONS, "enforce_q_lims": True}

# case: (rows, common load factor range, per-load jitter, unit P change share, unit V change
# [p.u.], rows that must be compared); case300 solves only near 0.95 of its load with its limits
SCENARIOS = {
    "case14": (5, (0.9, 1.2), 0.05, 0.1, 0.02, 5),
    "case118": (5, (0.9, 1.2), 0.05, 0.1, 0.02, 5),
    "case300": (8, (0.93, 0.97), 0.0, 0.0, 0.0, 2),
    "case1354pegase": (3, (0.9, 1.05), 0.05, 0.1, 0.02, 3),
}


def _positions(net, column) -> np.ndarray:
    position = {b: k for k, b in enumerate(net.bus.index)}
    return np.array([position[b] for b in column], dtype=np.int64)


def _runpp(net) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pp.runpp(net, **ENFORCED)
    except Exception:  # LoadflowNotConverged
        return False
    return True


def _perturbed(net, network, case: str, seed: int):
    """Our inputs ``[B, n_bus]`` and pandapower's data of each row."""
    rows, (lo, hi), jitter, p_share, v_step, _ = SCENARIOS[case]
    rng = np.random.default_rng(seed)
    load_bus, gen_bus = _positions(net, net.load.bus), _positions(net, net.gen.bus)
    on = net.gen.in_service.to_numpy(bool)
    p_load = (net.load.p_mw * net.load.scaling).to_numpy()
    q_load = (net.load.q_mvar * net.load.scaling).to_numpy()
    p = np.repeat(network.p_mw[None], rows, axis=0)
    q = np.repeat(network.q_mvar[None], rows, axis=0)
    vm = np.repeat(network.vm_pu[None], rows, axis=0)
    data = []
    for k in range(rows):
        factor = rng.uniform(lo, hi) * rng.uniform(1 - jitter, 1 + jitter, len(net.load))
        d_p = rng.uniform(-p_share, p_share, len(net.gen)) * net.gen.p_mw.to_numpy()
        d_v = rng.uniform(-v_step, v_step, len(net.gen))
        np.add.at(p[k], load_bus, -p_load * (factor - 1.0))
        np.add.at(q[k], load_bus, -q_load * (factor - 1.0))
        np.add.at(p[k], gen_bus[on], d_p[on])
        vm[k, gen_bus[on]] = net.gen.vm_pu.to_numpy()[on] + d_v[on]
        data.append((factor, d_p, d_v))
    return p, q, vm, data


@pytest.fixture(scope="module", params=list(SCENARIOS))
def converted(request):
    """(case name, pandapower net, its ACNetwork), once per case and module."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = _pandapower_net(request.param)
        network = network_from_pandapower(net, request.param)
    return request.param, net, network


def test_enforced_limits_match_runpp(converted):
    case, net, network = converted
    p, q, vm, data = _perturbed(net, network, case, seed=sum(map(ord, case)))
    result = ac_power_flow(network, p, q, vm, enforce_q_lims=True)
    gen_bus = _positions(net, net.gen.bus)
    base_load = net.load[["p_mw", "q_mvar"]].copy()
    base_gen = net.gen[["p_mw", "vm_pu"]].copy()
    compared = switched = 0
    try:
        for row, (factor, d_p, d_v) in enumerate(data):
            net.load["p_mw"] = base_load.p_mw * factor
            net.load["q_mvar"] = base_load.q_mvar * factor
            net.gen["p_mw"] = base_gen.p_mw + d_p
            net.gen["vm_pu"] = base_gen.vm_pu + d_v
            solved = _runpp(net)
            assert solved or not result.converged[row], f"{case} row {row}: pandapower failed"
            if not (solved and result.converged[row]):
                continue
            compared += 1
            np.testing.assert_allclose(result.vm_pu[row], net.res_bus.vm_pu, atol=VM_TOL, rtol=0)
            np.testing.assert_allclose(
                result.va_deg[row], net.res_bus.va_degree, atol=VA_TOL, rtol=0
            )
            q_gen = net.res_gen.q_mvar.to_numpy()
            np.testing.assert_allclose(result.gen_q_mvar[row, gen_bus], q_gen, atol=Q_TOL, rtol=0)
            at_max = np.abs(q_gen - net.gen.max_q_mvar.to_numpy()) < 1e-9
            at_min = np.abs(q_gen - net.gen.min_q_mvar.to_numpy()) < 1e-9
            side = result.q_limit_side[row, gen_bus]
            np.testing.assert_array_equal(side == 1, at_max)
            np.testing.assert_array_equal(side == -1, at_min)
            assert result.n_q_limited[row] == at_max.sum() + at_min.sum()
            switched += int(result.n_q_limited[row])
            # only the slack may stay outside its limits
            assert not result.q_limit_violated[row, gen_bus].any()
    finally:
        net.load[["p_mw", "q_mvar"]] = base_load
        net.gen[["p_mw", "vm_pu"]] = base_gen
    assert compared >= SCENARIOS[case][-1]
    assert switched > 0  # the scenarios do reach the limits


def test_default_reports_without_switching():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = _pandapower_net("case118")
        network = network_from_pandapower(net, "case118")
    p = np.repeat(network.p_mw[None], 2, axis=0) * np.array([[1.0], [1.15]])
    q = np.repeat(network.q_mvar[None], 2, axis=0) * np.array([[1.0], [1.15]])
    free = ac_power_flow(network, p, q)
    held = ac_power_flow(network, p, q, enforce_q_lims=True)
    assert (free.n_q_limited == 0).all() and not free.q_limit_side.any()
    assert free.q_limit_violated.any(axis=1).all()  # the set-points ask too much
    assert (held.n_q_limited > 0).all() and held.converged.all()
    # a switched bus no longer holds its set-point; the others still do
    bus = np.flatnonzero(held.q_limit_side[1])
    assert np.abs(held.vm_pu[1, bus] - network.vm_pu[bus]).min() > 1e-4
    unit_buses = np.flatnonzero(np.isfinite(network.q_max_mvar))
    kept = np.setdiff1d(unit_buses, bus)
    np.testing.assert_allclose(held.vm_pu[1, kept], network.vm_pu[kept], atol=1e-12)
    # 1-D input: one row's arrays
    single = ac_power_flow(network, p[1], q[1], enforce_q_lims=True)
    np.testing.assert_array_equal(single.q_limit_side, held.q_limit_side[1])
    assert int(single.n_q_limited) == int(held.n_q_limited[1])


def test_two_units_on_one_bus_act_as_one():
    """Two units share a bus (one of case14's split in two with different limits): pandapower
    splits the bus's output in proportion to the units' ranges, so both meet their limits
    together and the bus is held at their sum."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = _pandapower_net("case14")
        unit = net.gen.index[0]
        row = net.gen.loc[unit]
        pp.create_gen(
            net,
            row.bus,
            p_mw=0.5 * row.p_mw,
            vm_pu=row.vm_pu,
            max_q_mvar=0.3 * row.max_q_mvar,
            min_q_mvar=0.3 * row.min_q_mvar,
        )
        net.gen.loc[unit, ["p_mw", "max_q_mvar", "min_q_mvar"]] = (
            0.5 * row.p_mw,
            0.7 * row.max_q_mvar,
            0.7 * row.min_q_mvar,
        )
        net.load["q_mvar"] *= 1.6  # enough reactive demand to reach the limits
        network = network_from_pandapower(net, "case14")
        assert _runpp(net)
    result = ac_power_flow(network, network.p_mw, network.q_mvar, enforce_q_lims=True)
    bus = _positions(net, [row.bus])[0]
    assert result.q_limit_side[bus] != 0
    np.testing.assert_allclose(result.vm_pu, net.res_bus.vm_pu, atol=VM_TOL, rtol=0)
    on_bus = net.gen.bus == row.bus
    assert result.gen_q_mvar[bus] == pytest.approx(net.res_gen.q_mvar[on_bus].sum(), abs=Q_TOL)
