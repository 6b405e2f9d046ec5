"""Same seed, same trajectory: in one process, and against the recorded reference of every task.

The reference (``tests/fixtures/trajectories.npz``, written by ``tests/envs/trajectories.py``)
pins each task's observations, rewards, done flags, costs, reward terms and applied actions
through every adapter (Gymnasium env raw and normalised, native vector env, PettingZoo, dict env,
multi-agent vector env), so a refactor that changes any number of any task fails here.
"""

import numpy as np
import pytest
import trajectories

from powerzoo.tasks import list_tasks


@pytest.fixture(scope="module")
def reference():
    with np.load(trajectories.REFERENCE_FILE) as data:
        return {key: data[key] for key in data.files}


@pytest.fixture(scope="module")
def replayed():
    return trajectories.all_trajectories()


def test_reference_covers_every_task_and_adapter(reference):
    tasks = {key.split("/")[0] for key in reference}
    assert tasks == set(list_tasks())
    assert len(reference) == 3 * len(tasks)


def test_trajectories_match_the_reference(reference, replayed):
    assert replayed.keys() == reference.keys()
    for key, expected in reference.items():
        got = replayed[key]
        assert got.shape == expected.shape, key
        # exact on the machine that wrote the file; the tolerance only absorbs last-bit
        # differences of another CPU's SIMD summation order
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=key)


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
