"""Trajectories do not depend on the number of BLAS threads.

OpenBLAS factorises a dense matrix of 10,000 entries or more with a parallel LU when it may use
several threads, and splits a large matrix-vector product over them: both change the last bits of
the result. A PTDF, an AC flow's LU or a feeder's power flow that took such a path gave another
trajectory (voltage_control_118: 1.9e-6 relative, after an AC flow converged in another number of
iterations), so a test run on a machine whose BLAS had two threads, or a worker whose earlier test
left two threads set, disagreed with the reference. The physics now runs these on one BLAS thread
(:mod:`powerzoo.physics.blas_threads`); this test rolls the AC tasks out in fresh processes under
one and two threads (``threadpoolctl``, a fresh process each, so nothing cached is shared) and
compares the bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
TASKS = ("acopf_118", "voltage_control_118")

CHILD = """
import sys
sys.path.insert(0, {here!r})
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits
import trajectories

with threadpool_limits(limits={threads}, user_api="blas"):
    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    counts = sorted({{lib["num_threads"] for lib in blas}})
    out = {{}}
    for task in {tasks!r}:
        out[task + "/pettingzoo"] = trajectories.multi_agent(task, "pettingzoo", normalize=True)
        out[task + "/vector"] = trajectories.multi_agent_vector(task)
np.savez({path!r}, **out)
print("blas threads", counts)
"""


def _rollouts(threads: int, path: Path) -> dict[str, np.ndarray]:
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}
    code = CHILD.format(here=str(HERE), threads=threads, tasks=TASKS, path=str(path))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"blas threads [{threads}]" in done.stdout, done.stdout
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


@pytest.mark.skipif(os.cpu_count() == 1, reason="the BLAS paths differ only with two threads")
def test_ac_tasks_give_the_same_bits_on_one_and_two_blas_threads(tmp_path):
    one = _rollouts(1, tmp_path / "one.npz")
    two = _rollouts(2, tmp_path / "two.npz")
    assert one.keys() == two.keys()
    for key, values in one.items():
        assert values.tobytes() == two[key].tobytes(), (
            f"{key}: {np.sum(values != two[key])} of {values.size} values differ between one and "
            "two BLAS threads"
        )
