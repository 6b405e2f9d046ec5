"""Quantities a task step works out once and hands on give what computing them again gives.

The battery's settlement value carried in the state, the shut-down block shared by the
commitment and the info, the diesel's minimum times with equal and unequal run and down times,
and the line terms of one row block against those of several.
"""

import numpy as np
import pytest

from powerzoo.devices.diesel import DieselCommitment, DieselParams
from powerzoo.scratch import ROW_BLOCK
from powerzoo.tasks import make_task
from powerzoo.tasks.base import merge_state

DT_H = 5.0 / 60.0


def test_battery_state_carries_the_settlement_of_its_soc():
    task = make_task("battery_arbitrage", "test")
    rng = np.random.default_rng(2)
    state = task.reset(rng, np.arange(6))
    np.testing.assert_array_equal(state.settlement, task.settlement(state.day_id, state.soc))
    for t in range(task.spec.horizon):
        soc_before = state.soc
        state, out = task.step(state, rng.uniform(-25.0, 25.0, (6, 1)), rng)
        # the value of the new SOC, and the step's term is its change since the last step
        want = task.settlement(state.day_id, state.soc)
        np.testing.assert_array_equal(state.settlement, want)
        np.testing.assert_array_equal(
            out.reward_terms[:, 3], want - task.settlement(state.day_id, soc_before)
        )
        if t == 20:  # rows restarted mid-day (an autoreset) take the fresh state's value
            done = np.array([True, False, True, False, False, True])
            state = merge_state(state, done, task.reset(rng, np.arange(6)))
            np.testing.assert_array_equal(
                state.settlement, task.settlement(state.day_id, state.soc)
            )
    assert np.any(state.settlement != 0.0)  # the SOC moved: the check above was not all zeros


def _plain_diesel_step(d, on, steps, request):
    """The diesel's minimum run and down times, written plainly."""
    min_up, min_down = d.min_steps(DT_H)
    locked = np.where(on, steps < min_up, steps < min_down)
    on_next = np.where(locked, on, request >= 0.5 * d.p_min_mw)
    hold = np.maximum(np.where(on, min_up, min_down) - steps, 0) * DT_H
    return on_next, np.where(on_next == on, steps + 1, 1), on_next & ~on, locked, hold


@pytest.mark.parametrize("up_h, down_h", [(1.0, 1.0), (1.0, 0.25), (0.0, 0.5), (0.0, 0.0)])
def test_diesel_commitment_matches_the_plain_rule(up_h, down_h):
    params = DieselParams(min_up_h=up_h, min_down_h=down_h)
    commitment = DieselCommitment(params, DT_H)
    rng = np.random.default_rng(4)
    on, steps = commitment.initial_state(16)
    for _ in range(60):
        request = rng.choice([0.0, 0.3, 0.375, 1.0, 2.5], 16)
        want_on, want_steps, want_started, want_locked, want_hold = _plain_diesel_step(
            params, on, steps, request
        )
        assert commitment.locked(on, steps).tolist() == want_locked.tolist()
        np.testing.assert_array_equal(commitment.hold_h(on, steps), want_hold)
        out = commitment.step(on, steps, request)
        assert out.on.tolist() == want_on.tolist()
        assert out.started.dtype == bool and out.started.tolist() == want_started.tolist()
        assert out.steps_in_state.dtype == np.int64
        np.testing.assert_array_equal(out.steps_in_state, want_steps)
        on, steps = out.on, out.steps_in_state


def test_commitment_with_the_shutdown_block_given_is_the_same():
    task = make_task("tso")
    f, rng = task.fleet, np.random.default_rng(6)
    on = rng.random((8, task._n)) < 0.6
    time_in_state = rng.integers(1, 20, on.shape)
    p = rng.uniform(0.0, 1.0, on.shape) * f.pmax_mw * on
    want_on = rng.random(on.shape) < 0.5
    blocked = f.shutdown_blocked(on, p)
    assert blocked.any()  # some stops are refused, so the block matters
    given = f.commit(on, time_in_state, want_on, p, blocked)
    computed = f.commit(on, time_in_state, want_on, p)
    for a, b in zip(given, computed, strict=True):
        assert a.tolist() == b.tolist()


def test_line_terms_of_several_row_blocks_are_those_of_each_block():
    task = make_task("tso")
    rng = np.random.default_rng(8)
    b = ROW_BLOCK + 5  # two row blocks
    p = rng.uniform(0.0, 1.0, (b, task._n)) * task.fleet.pmax_mw
    demand = rng.uniform(0.5, 1.2, b)
    overload, loading, n_congested = task._branch_terms(p, demand)
    assert overload.shape == loading.shape == n_congested.shape == (b,)
    assert n_congested.dtype == np.int64 and np.any(overload > 0.0)
    for rows in (slice(0, ROW_BLOCK), slice(ROW_BLOCK, b)):  # each block on its own, exactly
        block = task._branch_terms(p[rows], demand[rows])
        for got, want in zip((overload, loading, n_congested), block, strict=True):
            assert got[rows].tobytes() == want.tobytes()
    # and the plain DC flow's terms
    flow = np.abs(p @ task.gen_flow - demand[:, None] * task.load_flow_pu)
    np.testing.assert_allclose(overload, np.maximum(flow - task.rating, 0.0).sum(axis=1))
    np.testing.assert_allclose(loading, (flow / task.rating).max(axis=1))
    np.testing.assert_array_equal(n_congested, (flow >= task.rating - 1e-6).sum(axis=1))
