"""The shortcuts of the feeder devices' steps give what their general formulas give: the AVC with
every row inside its band, the flexible loads' open payback windows and slot sums."""

from __future__ import annotations

import numpy as np
import pytest

from powerzoo.devices.flexible_load import (
    FlexibleLoadParams,
    FlexibleLoadState,
    flexible_load_step,
)
from powerzoo.devices.tap_changer import TapChangerParams, TapChangerState, avc_step

P = TapChangerParams()  # band [1.016667, 1.033333] p.u.
HALF_HOUR_S = 1800.0


def _state(tap, timer, operations):
    return TapChangerState(*(np.asarray(x, dtype=np.int64) for x in (tap, timer, operations)))


@pytest.mark.parametrize("v", [[1.02], [1.017, 1.0333, 1.025]])
def test_avc_inside_the_band_resets_the_timers_and_holds_the_taps(v):
    n = len(v)
    state = _state([3] * n, [2] * n, [5] * n)
    new, moves = avc_step(P, state, np.array(v), HALF_HOUR_S)
    assert moves.dtype == np.int64 and moves.tolist() == [0] * n
    assert new.tap.tolist() == [3] * n and new.operations.tolist() == [5] * n
    assert new.timer.tolist() == [0] * n
    # fresh arrays: the next step may not write into the old state
    for old, fresh in zip(
        (state.tap, state.timer, state.operations),
        (new.tap, new.timer, new.operations),
        strict=True,
    ):
        assert not np.shares_memory(old, fresh)


def test_avc_rows_are_independent_of_their_batch():
    v = np.array([1.02, 0.99, 1.05, np.nan])  # inside, below, above, no measurement
    state = _state([3, 0, 2, 1], [0, 0, 0, 4], [0, 1, 2, 3])
    new, moves = avc_step(P, state, v, HALF_HOUR_S)
    assert moves.tolist() == [0, 5, -3, 0]  # 0.99 -> 1.021 (5 taps); 1.05 -> 1.031 (3 taps)
    assert new.timer.tolist() == [0, 0, 0, 0]  # moved or inside (a NaN is not outside)
    for row in range(v.size):
        single = _state(state.tap[[row]], state.timer[[row]], state.operations[[row]])
        one, one_move = avc_step(P, single, v[[row]], HALF_HOUR_S)
        assert one_move.tolist() == [moves[row]]
        assert (one.tap[0], one.timer[0], one.operations[0]) == (
            new.tap[row],
            new.timer[row],
            new.operations[row],
        )


def _reference_step(params, due, base, curtail, shift, dt_h, remaining):
    """The flexible loads' formulas written out slot by slot (the module docstring's rules)."""
    curtail = np.clip(curtail, 0.0, params.curtail_max)
    shift = np.clip(shift, 0.0, params.shift_max)
    window = np.minimum(remaining, params.payback_steps)[:, None]
    shift = np.where(window > 0, shift, 0.0)
    share = shift * (base * dt_h) / np.maximum(window, 1)
    new_due = np.zeros_like(due)
    new_due[:, :-1] = due[:, 1:]
    for slot in range(params.payback_steps):
        new_due[:, slot] += share * (slot < window)
    backlog = new_due[:, 0].copy()
    for slot in range(1, params.payback_steps):
        backlog += new_due[:, slot]
    p_mw = base * (1.0 - curtail - shift) + due[:, 0] / dt_h
    return new_due, backlog, p_mw, shift


@pytest.mark.parametrize("n_units", [1, 4])
@pytest.mark.parametrize("remaining", [[30, 12], [8, 30], [3, 30], [0, 5], [0, 0]])
def test_flexible_loads_match_their_formulas_to_the_bit(n_units, remaining):
    params = FlexibleLoadParams(n_units=n_units, payback_steps=8)
    rng = np.random.default_rng(n_units + sum(remaining))
    b = len(remaining)
    due = rng.uniform(0.0, 0.1, (b, 8, n_units)) * 10.0 ** rng.uniform(-3, 1, (b, 8, n_units))
    backlog = due.sum(axis=1)
    base = rng.uniform(0.0, 2.0, (b, n_units))
    curtail, shift = rng.uniform(-0.2, 1.2, (2, b, n_units))
    steps_left = np.array(remaining)
    got = flexible_load_step(
        params, FlexibleLoadState(due, backlog), base, curtail, shift, 0.5, steps_left
    )
    new_due, new_backlog, p_mw, shift_applied = _reference_step(
        params, due, base, curtail, shift, 0.5, steps_left
    )
    np.testing.assert_array_equal(got.state.due_mwh, new_due, strict=True)
    np.testing.assert_array_equal(got.state.backlog_mwh, new_backlog, strict=True)
    np.testing.assert_array_equal(got.p_mw, p_mw, strict=True)
    np.testing.assert_array_equal(got.shift_fraction, shift_applied, strict=True)
    assert got.state.due_mwh.flags.c_contiguous
    if min(remaining) == 0:  # nothing is shifted on the last step, and the refusal is reported
        last = steps_left == 0
        assert np.all(got.shift_fraction[last] == 0.0)
        assert np.all(got.shift_refused_mwh[last] >= 0.0)
    # a single row steps alike in any batch
    one = flexible_load_step(
        params,
        FlexibleLoadState(due[:1], backlog[:1]),
        base[:1],
        curtail[:1],
        shift[:1],
        0.5,
        steps_left[:1],
    )
    np.testing.assert_array_equal(one.state.backlog_mwh, got.state.backlog_mwh[:1], strict=True)
    np.testing.assert_array_equal(one.p_mw, got.p_mw[:1], strict=True)
