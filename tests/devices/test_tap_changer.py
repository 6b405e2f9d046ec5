"""The on-load tap changer and its automatic voltage controller against hand-computed cases, and
the LTC in a feeder task's loop."""

import numpy as np
import pytest

from powerzoo.devices.tap_changer import (
    TapChangerParams,
    TapChangerState,
    avc_moves,
    avc_step,
    head_vm_pu,
    regulated_voltage_pu,
    settled_tap,
    tap_changer_reset,
    tap_changer_set,
)
from powerzoo.tasks.dso import Dso

P = TapChangerParams()  # band 1.025 +- 1/120 p.u. = [1.016667, 1.033333], 0.625 % a tap
HALF_HOUR_S = 1800.0


def _state(tap, timer=0, operations=0):
    tap = np.asarray(tap, dtype=np.int64)
    return TapChangerState(
        tap, np.full(tap.shape, timer, dtype=np.int64), np.full(tap.shape, operations, np.int64)
    )


def test_documented_values_and_the_head_voltage():
    assert (P.n_steps, P.step_pu, P.source_vm_pu) == (16, 0.00625, 1.0)
    assert P.band_pu == pytest.approx((1.025 - 1 / 120, 1.025 + 1 / 120))
    np.testing.assert_allclose(head_vm_pu(P, np.array([-16, 0, 3, 16])), [0.9, 1.0, 1.01875, 1.1])
    # 45 s of delay and 10 s between operations: within a 30-minute step the delay has expired
    # and the whole range fits; at 15-s steps the delay spans 3 steps, one operation a step
    assert P.delay_steps(HALF_HOUR_S) == 1 and P.max_operations(HALF_HOUR_S) == 32
    assert P.delay_steps(15.0) == 3 and P.max_operations(15.0) == 1
    assert P.delay_steps(60.0) == 1 and P.max_operations(60.0) == 2  # 45 s, then one more
    assert settled_tap(P) == 3  # from 1.00 p.u.: 1.00625, 1.0125, 1.01875 (the first in band)
    with pytest.raises(ValueError, match="exceed one tap step"):
        TapChangerParams(bandwidth_pu=0.005)


def test_moves_bring_the_voltage_into_the_band_and_stop_at_its_edge():
    tap = np.array([0, 0, 0, 0, 5])
    v = np.array([1.0, 1.02, 1.05, 1.0166, 1.034])
    # 1.00: up ceil(0.016667 / 0.00625) = 3; inside: 0; 1.05: down ceil(0.016667 / 0.00625) = 3;
    # just below the band: 1 up; just above it: 1 down
    np.testing.assert_array_equal(avc_moves(P, tap, v, 32), [3, 0, -3, 1, -1])
    np.testing.assert_array_equal(avc_moves(P, tap, v, 2), [2, 0, -2, 1, -1])  # per-step cap


def test_limits_at_plus_minus_16():
    moves = avc_moves(P, np.array([15, -14, 16]), np.array([0.95, 1.10, 0.90]), 32)
    np.testing.assert_array_equal(moves, [1, -2, 0])  # clipped at +16 / -16; at the limit: none
    state, moves = tap_changer_set(P, _state([0, 0, 10]), np.array([20.0, -17.4, 9.6]))
    np.testing.assert_array_equal(state.tap, [16, -16, 10])
    np.testing.assert_array_equal(moves, [16, -16, 0])
    np.testing.assert_array_equal(state.operations, [16, 16, 0])


def test_time_delay_counts_steps_outside_the_band():
    # 15-s task steps: the 45 s delay is 3 steps of the voltage outside the band
    state = _state([0, 0])
    low = np.array([1.0, 1.0])
    for step in range(2):
        state, moves = avc_step(P, state, low, 15.0)
        np.testing.assert_array_equal(moves, [0, 0])
        np.testing.assert_array_equal(state.timer, [step + 1, step + 1])
    # row 1 comes back into the band: its timer resets; row 0 acts at its third step, one
    # operation (one per 15-s step), and its timer restarts
    state, moves = avc_step(P, state, np.array([1.0, 1.02]), 15.0)
    np.testing.assert_array_equal(moves, [1, 0])
    np.testing.assert_array_equal(state.tap, [1, 0])
    np.testing.assert_array_equal(state.timer, [0, 0])
    np.testing.assert_array_equal(state.operations, [1, 0])


def test_half_hour_steps_act_at_once_and_rows_are_independent():
    state = _state([0, 3, -2, 16], operations=5)
    v = np.array([1.0, 1.02, 1.05, 0.95])
    state, moves = avc_step(P, state, v, HALF_HOUR_S)
    np.testing.assert_array_equal(moves, [3, 0, -3, 0])
    np.testing.assert_array_equal(state.tap, [3, 3, -5, 16])
    np.testing.assert_array_equal(state.operations, [8, 5, 8, 5])
    np.testing.assert_array_equal(state.timer, [0, 0, 0, 1])  # the row at its limit keeps counting
    # the same rows one at a time give the same answer
    for row in range(4):
        one, m = avc_step(P, _state([[0, 3, -2, 16][row]], operations=5), v[[row]], HALF_HOUR_S)
        assert one.tap[0] == state.tap[row] and m[0] == moves[row]


def test_line_drop_compensation():
    ldc = TapChangerParams(ldc_r_pu=0.02, ldc_x_pu=0.01)
    # |1.02 - (0.02 + 0.01j) (0.5 - 0.2j)| = |1.02 - (0.012 + 0.001j)|
    v = regulated_voltage_pu(ldc, np.array([1.02 + 0j]), np.array([0.5 - 0.2j]))
    assert v[0] == pytest.approx(abs(1.008 - 0.001j))
    assert regulated_voltage_pu(P, np.array([1.02 + 0.01j]))[0] == pytest.approx(abs(1.02 + 0.01j))
    with pytest.raises(ValueError, match="head current"):
        regulated_voltage_pu(ldc, np.array([1.0 + 0j]))
    assert tap_changer_reset(P, 3, tap=-2).tap.tolist() == [-2, -2, -2]


# ---- the LTC in a feeder task -------------------------------------------------------------------
def _head_and_violation(task, days):
    rng = np.random.default_rng(0)
    state = task.reset(rng, days)
    idle = np.broadcast_to(np.asarray(task.spec.idle_action), (days.size, task.spec.action.dim))
    heads, costs, ops = [], np.zeros(days.size), np.zeros(days.size)
    for _ in range(task.spec.horizon):
        state, out = task.step(state, idle.copy(), rng)
        heads.append(out.info["head_vm_pu"])
        costs += out.constraint_costs[:, 0]
        ops += out.info["ltc_operations"]
        # the reported head is the highest voltage (no injections on the dso feeder)
        np.testing.assert_allclose(out.info["head_vm_pu"], state.grid_obs[:, 1], atol=0)
    return np.array(heads), costs, ops, state


def test_dso_with_the_ltc_holds_the_head_in_the_band_where_a_fixed_head_would_not():
    days = np.arange(0, 65, 4)
    heads, with_ltc, ops, state = _head_and_violation(Dso("test"), days)
    lo, hi = P.band_pu
    assert np.all((heads >= lo) & (heads <= hi))  # the AVC keeps its regulated bus in band
    np.testing.assert_array_equal(state.ltc_tap, 3)  # settled at reset: no operation all day
    assert np.all(ops == 0)
    fixed_heads, without, _, _ = _head_and_violation(Dso("test", ltc=False), days)
    assert np.all(fixed_heads == 1.0)  # the case's head, below the AVC band
    # the tap's 1.9 % lifts the far end: less voltage violation on every day, none on most
    assert np.all(with_ltc <= without) and with_ltc.sum() < 0.5 * without.sum()


def test_the_avc_moves_the_tap_in_a_step_and_the_flow_is_at_the_new_tap():
    task = Dso("test", ltc_band_centre_pu=1.04)  # band [1.0317, 1.0483]: 6 taps from neutral
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([0, 1]))
    assert state.ltc_tap.tolist() == [6, 6]
    state.ltc_tap = np.array([0, 6])  # row 0 starts the day at neutral
    state, out = task.step(state, np.zeros((2, 12)), rng)
    np.testing.assert_array_equal(out.info["ltc_operations"], [6, 0])
    np.testing.assert_allclose(out.info["head_vm_pu"], [1.0375, 1.0375])
    # the step's voltages are those of the flow at the new tap (the head bus is the slack)
    np.testing.assert_allclose(state.grid_obs[:, 1], 1.0375)
    assert state.ltc_operations.tolist() == [6, 0]


def test_tap_as_an_action_charges_wear_per_operation():
    task = Dso("test", ltc_action=True, ltc_wear_cost_per_operation=2.0)
    spec = task.spec
    assert spec.action.names[-1] == "ltc.tap" and spec.action.dim == 13
    assert spec.reward_terms[-1] == "ltc_wear" and spec.idle_action[-1] == 3.0
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([0, 0, 0]))
    act = np.zeros((3, 13))
    act[:, 12] = [3.0, 7.2, -16.0]  # hold; 4 up (rounded); 19 down
    state, out = task.step(state, act, rng)
    np.testing.assert_array_equal(out.info["ltc_operations"], [0, 4, 19])
    np.testing.assert_allclose(out.reward_terms[:, 2], [0.0, -8.0, -38.0])
    np.testing.assert_allclose(out.reward, out.reward_terms.sum(axis=1))
    np.testing.assert_allclose(out.info["head_vm_pu"], [1.01875, 1.04375, 0.9])
    np.testing.assert_array_equal(out.action_applied[:, 12], [3, 7, -16])
    obs = task.observe(state)
    np.testing.assert_array_equal(obs[:, task.spec.observation.slot("ltc_tap")], [3, 7, -16])
    # the rule holds the tap where it is: no wear
    state, out = task.step(state, task.rule_based_action(obs), rng)
    np.testing.assert_array_equal(out.info["ltc_operations"], 0)
    with pytest.raises(ValueError, match="ltc_action needs the tap changer"):
        Dso("test", ltc=False, ltc_action=True)


def test_line_drop_compensation_in_a_task_follows_the_load():
    task = Dso("test", ltc_ldc_r_pu=0.1, ltc_ldc_x_pu=0.05)
    params, base_mva = task.ltc.params, task.grid.case.base_mva
    lo, hi = params.band_pu
    rng = np.random.default_rng(0)
    days = np.arange(0, 65, 8)
    state = task.reset(rng, days)
    taps = []
    for _ in range(task.spec.horizon):
        state, out = task.step(state, np.zeros((days.size, 12)), rng)
        info = out.info
        head = info["head_vm_pu"]
        current = np.conj((info["feeder_p_mw"] + 1j * info["feeder_q_mvar"]) / base_mva / head)
        v_reg = regulated_voltage_pu(params, head + 0j, current)
        # the step's flow is the one the controller settled on: its load centre in the band
        assert np.all((v_reg >= lo - 1e-9) & (v_reg <= hi + 1e-9))
        taps.append(info["ltc_tap"])
    taps = np.array(taps)
    # the estimated load-centre drop lifts the head above the plain AVC's tap 3, more at the peak
    assert taps.min() > 3 and np.all(taps.max(axis=0) > taps.min(axis=0))
    np.testing.assert_array_equal(
        state.ltc_operations, np.abs(np.diff(taps, axis=0)).sum(0) + (taps[0] - 3)
    )
