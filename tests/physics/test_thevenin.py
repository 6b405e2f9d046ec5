"""Thevenin equivalents of a meshed network: the short-circuit level and the linearised
voltage magnitude at a bus as the loads change."""

import numpy as np
import pytest

from powerzoo.physics.thevenin import thevenin_at
from powerzoo.tasks.transmission import congestion_ready_case


@pytest.fixture(scope="module")
def case5():
    return congestion_ready_case("case5")


def test_the_case_loads_give_the_case_voltages(case5):
    th = thevenin_at("case5", case5, np.array([1, 3]))
    v = th.voltage_pu(th.case_p_mw[None, :], th.case_q_mvar[None, :])
    np.testing.assert_allclose(v[0], th.vm_case_pu, atol=1e-12)
    assert np.all(th.short_circuit_mva > 1000.0)  # strong 230 kV buses behind 1,530 MW of units


def test_voltage_falls_with_load_and_more_at_the_loaded_bus(case5):
    th = thevenin_at("case5", case5, np.array([1, 3]))
    p, q = th.case_p_mw.copy(), th.case_q_mvar.copy()
    base = th.voltage_pu(p[None], q[None])[0]
    q_more = q.copy()
    q_more[3] += 100.0  # 100 Mvar more drawn at bus 3
    v = th.voltage_pu(p[None], q_more[None])[0]
    assert v[1] < base[1] and v[0] < base[0]
    assert base[1] - v[1] > base[0] - v[0]  # the loaded bus falls most
    # linear in the loads: twice the change, twice the drop
    q_twice = q.copy()
    q_twice[3] += 200.0
    np.testing.assert_allclose(base - th.voltage_pu(p[None], q_twice[None])[0], 2 * (base - v))


def test_weaker_units_weaken_every_bus(case5):
    stiff = thevenin_at("case5", case5, np.array([1, 3]), x_units_pu=0.1)
    weak = thevenin_at("case5", case5, np.array([1, 3]), x_units_pu=0.4)
    assert np.all(weak.short_circuit_mva < stiff.short_circuit_mva)
    assert np.all(
        np.abs(weak.q_sensitivity_pu_per_mvar[:, 3]) > np.abs(stiff.q_sensitivity_pu_per_mvar[:, 3])
    )
