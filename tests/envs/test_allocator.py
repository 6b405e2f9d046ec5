"""Batched envs keep freed temporaries mapped (glibc): no page faults per step at large N."""

import json
import os
import platform

import pytest
from helpers import run_python

from powerzoo.scratch import keep_freed_memory

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt tuning is glibc-only")

_FAULTS = r"""
import json, resource, sys
import numpy as np
from powerzoo.rl import make_env
from powerzoo import scratch
env = make_env("tso", num_envs=1024, seed=0)
env.reset(seed=0)
rng = np.random.default_rng(0)
space = env.single_action_space
actions = [rng.uniform(space.low, space.high, size=(1024,) + space.shape).astype(np.float32)
           for _ in range(4)]
for i in range(6):
    env.step(actions[i % 4])
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(12):
    env.step(actions[i % 4])
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 12
print(json.dumps({"faults_per_step": faults, "tuned": scratch.keep_freed_memory()}))
"""


def _run(code: str, **env: str) -> dict:
    out = run_python(
        code,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", **env},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@glibc
def test_keep_freed_memory_is_on_for_batches_and_idempotent():
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # once per process; later calls report the same


@glibc
def test_a_batched_uc_step_faults_no_pages_back_in():
    # without the tuning this loop takes ~800-1,800 minor page faults per step (tso, N = 1,024):
    # glibc hands the freed temporaries back to the OS and the next step maps them again
    result = _run(_FAULTS)
    assert result["tuned"] is True
    assert result["faults_per_step"] < 50


def test_opt_out_leaves_the_allocator_alone():
    code = (
        "import json; from powerzoo.scratch import keep_freed_memory; "
        "print(json.dumps(keep_freed_memory()))"
    )
    out = run_python(code, check=True, env={**os.environ, "POWERZOO_KEEP_FREED_MEMORY": "0"})
    assert json.loads(out.stdout) is False


def test_the_single_env_does_not_touch_the_allocator():
    code = (
        "import json; from powerzoo.rl import make_env; from powerzoo import scratch; "
        "env = make_env('battery_arbitrage'); env.reset(seed=0); "
        "env.step(env.action_space.sample()); print(json.dumps(scratch._allocator_tuned))"
    )
    out = run_python(code, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) is None
