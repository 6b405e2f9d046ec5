"""benchmarks/single_env_speed.py and its numpy floors: the floors do the task's arithmetic, and the
script times every layer of the single env and writes its table."""

import importlib.util
import sys

import numpy as np
import pytest
from helpers import REPO_ROOT

from powerzoo.rl import make_env

BENCHMARKS = REPO_ROOT / "benchmarks"


def _load(name):
    sys.path.insert(0, str(BENCHMARKS))  # the script imports numpy_floor as its child does
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def floors():
    return _load("numpy_floor")


@pytest.mark.parametrize("task_id", ["battery_arbitrage", "marl_opf", "opf_118"])
def test_floor_equals_the_task_model_over_an_episode(floors, task_id):
    multi = task_id != "battery_arbitrage"
    env = make_env(task_id, seed=0, framework="pettingzoo" if multi else "gymnasium")
    runner = env.core.runner if multi else env.unwrapped.runner
    rng = np.random.default_rng(0)
    actions = [rng.uniform(runner.act_low, runner.act_high) for _ in range(16)]
    assert floors.check_floor(task_id, runner.task, actions, day_id=3) < 1e-12
    # a floor that skipped part of the step would not match: the check sees the difference
    broken = floors.FLOORS[task_id]
    try:
        floors.FLOORS[task_id] = lambda task, day: _scaled(broken(task, day))
        assert floors.check_floor(task_id, runner.task, actions, day_id=3) > 1e-3
    finally:
        floors.FLOORS[task_id] = broken


def _scaled(step):
    def wrong(action):
        reward, costs, obs = step(action)
        return reward * 1.01, costs, obs

    wrong.reset = step.reset
    return wrong


def test_script_times_every_layer_and_writes_its_table(tmp_path):
    script = _load("single_env_speed")
    script.main(["--tasks", "marl_opf", "--steps", "60", "--rounds", "1", "--out", str(tmp_path)])
    text = (tmp_path / "single_env_speed.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `marl_opf`"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    floor, task, runner, core, env = (float(c) for c in cells[1:6])
    assert 0 < floor and 0 < task and 0 < runner and 0 < core and 0 < env
    assert float(cells[6]) == pytest.approx(env / floor, rel=0.01)
    assert cells[8] == "440"  # the earlier implementation's figure for the ratio
    assert (tmp_path / "single_env_speed.csv").read_text().startswith("task,floor_us")
