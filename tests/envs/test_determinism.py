"""Same seed, same trajectory: in one process, and against the recorded reference of every task.

The reference (``tests/fixtures/trajectories.npz``, written by ``tests/envs/trajectories.py``)
pins each task's observations, rewards, done flags, costs, reward terms and applied actions
through every adapter (Gymnasium env raw and normalised, native vector env, PettingZoo, dict env,
multi-agent vector env), so a refactor that changes any number of any task fails here.

On the machine kind that wrote the file (``trajectories_machine.json``: numpy, scipy, SIMD
dispatch, BLAS kernels) the replay equals it to 1e-12. Another kind rounds ``exp`` or a matrix
product differently in the last bit; an AC flow or a feeder's fixed point may then take another
iteration, and a float32 observation round to its neighbour: measured between an AVX-512 and an
AVX2 machine, up to 1.2e-5 relative (voltage_control_118), so there the tolerance is 1e-4
relative. Any change of a task's model moves numbers far more than that.
"""

import json

import numpy as np
import pytest
import trajectories

from powerzoo.tasks import list_tasks


@pytest.fixture(scope="module")
def reference():
    with np.load(trajectories.REFERENCE_FILE) as data:
        return {key: data[key] for key in data.files}


def test_reference_covers_every_task_and_adapter(reference):
    tasks = {key.split("/")[0] for key in reference}
    assert tasks == set(list_tasks())
    assert len(reference) == 3 * len(tasks)


@pytest.mark.parametrize("task", list_tasks())  # one test per task: the workers share them
def test_trajectories_match_the_reference(reference, task):
    replayed = trajectories.all_trajectories([task])
    mine = {key: value for key, value in reference.items() if key.split("/")[0] == task}
    assert replayed.keys() == mine.keys()
    same_kind = json.loads(trajectories.MACHINE_FILE.read_text()) == trajectories.machine_kind()
    # the same machine kind: equal up to 1e-12 (exact where nothing is summed differently);
    # another kind: the last-bit differences its rounding grows into (module docstring)
    rtol, atol = (1e-12, 1e-12) if same_kind else (1e-4, 1e-6)
    for key, expected in mine.items():
        got = replayed[key]
        assert got.shape == expected.shape, key
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=key)


def test_the_reference_names_the_machine_kind_that_wrote_it():
    recorded = json.loads(trajectories.MACHINE_FILE.read_text())
    assert recorded.keys() == trajectories.machine_kind().keys()
    assert recorded["blas_kernels"] and recorded["numpy"]


@pytest.mark.parametrize("task", ["battery_arbitrage", "marl_opf", "dc_microgrid"])
def test_same_seed_gives_bit_identical_trajectories(task):
    spec_mode = trajectories.single_agent if task != "marl_opf" else None
    if spec_mode is None:
        first = trajectories.multi_agent(task, "auto", normalize=False)
        second = trajectories.multi_agent(task, "auto", normalize=False)
    else:
        first = spec_mode(task, normalize=True)
        second = spec_mode(task, normalize=True)
    np.testing.assert_array_equal(first, second)
