"""The diesel generator's on/off status under its minimum run and down times, and its starts."""

import numpy as np
import pytest

from powerzoo.devices.diesel import DieselCommitment, DieselParams

DT_H = 5.0 / 60.0


def run(commitment, requests, n_rows=1):
    """Outputs [T, B] and starts [T, B] of a set stepped through ``requests`` [T] from its
    initial state (off, free to start)."""
    on, steps = commitment.initial_state(n_rows)
    outputs, starts = [], []
    for request in requests:
        out = commitment.step(on, steps, np.full(n_rows, request))
        on, steps = out.on, out.steps_in_state
        outputs.append(out.output_mw)
        starts.append(out.started)
    return np.array(outputs), np.array(starts)


def test_defaults_and_their_steps():
    d = DieselParams()
    assert (d.start_up_cost, d.min_up_h, d.min_down_h) == (50.0, 1.0, 1.0)
    assert d.min_steps(DT_H) == (12, 12) and d.min_steps(0.5) == (2, 2)
    assert DieselParams(min_up_h=0.1, min_down_h=0.0).min_steps(DT_H) == (2, 0)
    with pytest.raises(ValueError, match="start_up_cost must be non-negative"):
        DieselParams(start_up_cost=-1.0)
    with pytest.raises(ValueError, match="min_up_h and min_down_h must be non-negative"):
        DieselParams(min_down_h=-0.5)


def test_a_start_runs_an_hour_and_a_stop_rests_an_hour():
    commitment = DieselCommitment(DieselParams(), DT_H)
    # on for one step, off for 20, on for 20
    out, starts = run(commitment, [1.0] + [0.0] * 20 + [1.2] * 20)
    out, starts = out[:, 0], starts[:, 0]
    np.testing.assert_allclose(out[:12], [1.0] + [0.75] * 11)  # held at its minimum output
    np.testing.assert_array_equal(out[12:24], 0.0)  # stopped at step 12, rests to step 24
    np.testing.assert_allclose(out[24:], 1.2)
    assert np.flatnonzero(starts).tolist() == [0, 24]


def test_requests_below_half_the_minimum_output_ask_for_the_set_off():
    commitment = DieselCommitment(DieselParams(), DT_H)
    out, starts = run(commitment, [0.3, 0.374, 0.375, 0.2])
    np.testing.assert_allclose(out[:, 0], [0.0, 0.0, 0.75, 0.75])
    assert starts[:, 0].tolist() == [False, False, True, False]


def test_without_minimum_times_the_set_follows_every_request():
    commitment = DieselCommitment(DieselParams(min_up_h=0.0, min_down_h=0.0), DT_H)
    requests = [1.0, 0.0, 1.0, 0.0, 2.0]
    out, starts = run(commitment, requests, n_rows=3)
    np.testing.assert_allclose(out, np.array(requests)[:, None] * np.ones(3))
    assert starts[:, 0].tolist() == [True, False, True, False, True]


def test_hold_hours_count_down_to_zero():
    commitment = DieselCommitment(DieselParams(), DT_H)
    on, steps = commitment.initial_state(2)
    assert commitment.hold_h(on, steps).tolist() == [0.0, 0.0]  # free to start at once
    out = commitment.step(on, steps, np.array([1.0, 0.0]))
    hold = commitment.hold_h(out.on, out.steps_in_state)
    np.testing.assert_allclose(hold, [11 * DT_H, 0.0])  # 11 steps of its run left; still free
    assert commitment.locked(out.on, out.steps_in_state).tolist() == [True, False]
