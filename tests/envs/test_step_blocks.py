"""Task.step_block_rows: the runner steps large batches in row blocks with the same results."""

import dataclasses

import numpy as np

from powerzoo.envs.runner import TaskRunner
from powerzoo.rl import make_env
from powerzoo.scratch import ROW_BLOCK
from powerzoo.tasks import make_task
from powerzoo.tasks.base import StepOutput, concat_outputs, concat_states, state_rows


@dataclasses.dataclass
class _State:
    day_id: np.ndarray
    t: np.ndarray
    level: np.ndarray  # [B, 2]


def test_state_and_output_blocks_round_trip():
    state = _State(np.arange(5), np.zeros(5, dtype=int), np.arange(10.0).reshape(5, 2))
    blocks = [state_rows(state, rows) for rows in (slice(0, 2), slice(2, 5))]
    assert np.shares_memory(blocks[0].level, state.level)  # views, no copies
    merged = concat_states(blocks)
    for f in dataclasses.fields(state):
        np.testing.assert_array_equal(getattr(merged, f.name), getattr(state, f.name))
    out = [
        StepOutput(
            np.full(n, float(n)),
            np.ones((n, 2)),
            np.zeros((n, 1)),
            np.zeros(n, bool),
            np.ones((n, 3)),
            {"x": np.arange(n), "y": np.ones((n, 4))},
        )
        for n in (2, 3)
    ]
    joined = concat_outputs(out)
    np.testing.assert_array_equal(joined.reward, [2, 2, 3, 3, 3])
    assert joined.action_applied.shape == (5, 3) and joined.info["y"].shape == (5, 4)
    np.testing.assert_array_equal(joined.info["x"], [0, 1, 0, 1, 2])


def _rollout(task_name: str, n_envs: int, block: int | None, steps: int) -> list[tuple]:
    env = make_env(task_name, num_envs=n_envs, seed=3)
    env.runner.task.step_block_rows = block  # instance attribute: this env only
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    low, high = env.single_action_space.low, env.single_action_space.high
    out = []
    for _ in range(steps):
        action = rng.uniform(low, high, size=(n_envs, *low.shape)).astype(np.float32)
        obs, reward, term, trunc, info = env.step(action)
        out.append((obs, reward, info["constraint_costs"]))
    return out


def test_blocked_feeder_steps_match_one_piece_within_the_power_flow_tolerance():
    assert make_task("dso").step_block_rows == ROW_BLOCK
    n = ROW_BLOCK + 300  # two blocks: 1,024 and 300 rows
    blocked, whole = _rollout("dso", n, ROW_BLOCK, 4), _rollout("dso", n, None, 4)
    for (o1, r1, c1), (o2, r2, c2) in zip(blocked, whole, strict=True):
        assert o1.shape == o2.shape == (n, o1.shape[1])
        # each block iterates its own rows to the 1e-8 p.u. tolerance: differences stay far below it
        np.testing.assert_allclose(o1, o2, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(r1, r2, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(c1, c2, rtol=1e-6, atol=1e-9)


def test_small_batches_are_stepped_and_reset_in_one_call():
    runner = TaskRunner(make_task("dso"), num_envs=8)
    calls = []
    step = runner.task.step
    reset = runner.task.reset
    runner.task.step = lambda *a: calls.append(a[1].shape) or step(*a)
    runner.task.reset = lambda rng, day_id: calls.append(day_id.shape) or reset(rng, day_id)
    runner.task.step_block_rows = 4
    runner.reset(None)
    assert calls == [(4,), (4,)]
    calls.clear()
    runner.step(np.zeros((8, runner.spec.action.dim)))
    assert calls == [(4, runner.spec.action.dim), (4, runner.spec.action.dim)]
    runner.task.step_block_rows = 8
    calls.clear()
    runner.step(np.zeros((8, runner.spec.action.dim)))
    assert calls == [(8, runner.spec.action.dim)]
    calls.clear()
    runner.reset_done(np.arange(8) < 3)
    assert calls == [(8,)]
