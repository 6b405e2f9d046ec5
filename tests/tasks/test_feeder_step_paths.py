"""The feeder tasks' step flow: its costs against their formulas whichever path computes them
(every row inside the band and the ratings, or not), and the head's tap changer in the loop."""

from __future__ import annotations

import numpy as np
import pytest

from powerzoo.devices.tap_changer import head_vm_pu
from powerzoo.tasks import make_task
from powerzoo.tasks.feeder import V_MAX_PU, V_MIN_PU


@pytest.fixture(scope="module")
def dso():
    return make_task("dso", "test")


def _formula_costs(grid, flow, loading: np.ndarray) -> np.ndarray:
    """GRID_COSTS written out: p.u. outside [0.95, 1.05] summed over buses, MVAh above the
    ratings summed over branches."""
    vm = flow.vm_pu
    voltage = (np.maximum(V_MIN_PU - vm, 0.0) + np.maximum(vm - V_MAX_PU, 0.0)).sum(axis=1)
    overload = (np.maximum(loading - 1.0, 0.0) * grid.rating_mva * 0.5).sum(axis=1)
    return np.stack([voltage, overload], axis=1)


def _loading(grid, p, q, head):
    from powerzoo.physics.radial_pf import radial_power_flow

    return radial_power_flow(grid.case, p, q, slack_vm_pu=head, max_iter=30).branch_loading


@pytest.mark.parametrize("rows", [[0], [1], [2], [0, 1, 2], [2, 0]])
def test_grid_costs_follow_their_formulas_on_every_path(dso, rows):
    grid = dso.grid
    p, q = grid.bus_loads(np.array([0.5, 1.6, 0.5])[rows])
    export = [r == 2 for r in rows]  # the far end exporting: over-voltage and overload
    p[export, 17] -= 6.0
    head = np.full(len(rows), 1.01875)
    flow = grid.solve(p, q, head_vm_pu=head)
    expected = _formula_costs(grid, flow, _loading(grid, p, q, head))
    np.testing.assert_allclose(flow.costs, expected, rtol=1e-12, atol=0.0)
    for i, row in enumerate(rows):
        if row == 0:  # light load: inside the band and the ratings, exactly 0
            assert flow.costs[i].tolist() == [0.0, 0.0]
        elif row == 1:  # heavy load: the far end sags below 0.95 p.u.
            assert flow.info["v_min_pu"][i] < V_MIN_PU and flow.costs[i, 0] > 0.0
        else:  # 6 MW exported at bus 18: above 1.05 p.u. and above a rating
            assert flow.info["v_max_pu"][i] > V_MAX_PU and flow.costs[i, 0] > 0.0
            assert flow.info["max_branch_loading"][i] > 1.0 and flow.costs[i, 1] > 0.0


def test_the_ltc_head_table_is_the_tap_formula(dso):
    params = dso.ltc.params
    taps = np.arange(-params.n_steps, params.n_steps + 1)
    np.testing.assert_array_equal(dso.ltc.head_vm_pu(taps), head_vm_pu(params, taps), strict=True)


def test_the_step_flow_reports_the_tap_and_settles_out_of_band_heads(dso):
    state = dso.reset(np.random.default_rng(0), np.array([0, 1]))
    p, q = dso.grid.bus_loads(np.array([0.5, 0.5]))
    held, ltc, ops = dso.grid_step(state, p, q)  # both heads at the AVC's tap: nothing moves
    assert ops.tolist() == [0, 0] and ltc.tap.tolist() == state.ltc_tap.tolist()
    assert held.info["ltc_operations"].tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(held.info["head_vm_pu"], dso.ltc.head_vm_pu(ltc.tap))
    assert held.info["ltc_tap"].dtype == np.float64
    state.ltc_tap = np.array([3, -4])  # row 1 at 0.975 p.u.: below the band, the AVC acts
    moved, ltc, ops = dso.grid_step(state, p, q)
    assert ops.tolist() == [0, 7] and ltc.tap.tolist() == [3, 3]
    # the flow is the one at the tap the controller settled on (to the flow's tolerance)
    np.testing.assert_allclose(moved.vm_pu, held.vm_pu, rtol=0.0, atol=1e-8)
    assert moved.info["head_vm_pu"].tolist() == held.info["head_vm_pu"].tolist()
