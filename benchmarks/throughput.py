"""Env throughput: steps/s with random actions (resets included), import and construction time, peak memory.

Usage: python benchmarks/throughput.py [--tasks battery_arbitrage] [--num-envs 1024] [--seconds 3]

Each measurement runs in a fresh subprocess pinned to one BLAS thread, so peak memory (ru_maxrss)
and import time belong to that measurement alone. Random actions are drawn for 64 steps at a time
with one generator call (for multi-agent tasks: for all agents at once), inside the timed loop.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

_CHILD = r"""
import json, os, resource, sys, time
mode, task, num_envs, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
t0 = time.perf_counter(); import powerzoo; import_s = time.perf_counter() - t0
import numpy as np
from powerzoo.rl import make_env
t0 = time.perf_counter()
import warnings; warnings.simplefilter("ignore")
from powerzoo.tasks import task_spec
fw = "pettingzoo" if task_spec(task).agent_mode == "multi" else "gymnasium"
env = make_env(task, framework=fw, num_envs=None if mode == "single" else num_envs, seed=0)
build_s = time.perf_counter() - t0
rng = np.random.default_rng(0)
multi = hasattr(env, "possible_agents")
n_per_call = 1 if mode == "single" else num_envs
if multi:
    # one uniform draw per batch for every agent (per-agent draws would cost more than a step)
    agents = env.possible_agents
    low = np.stack([env.action_space(a).low for a in agents])
    high = np.stack([env.action_space(a).high for a in agents])
    def sample(k):
        draws = rng.uniform(low, high, size=(k,) + low.shape).astype(np.float32)
        return [dict(zip(agents, step)) for step in draws]
    done = lambda te, tr: (not env.agents) if mode == "single" else False
else:
    space = env.action_space
    def sample(k):
        return rng.uniform(space.low, space.high, size=(k,) + space.low.shape).astype(np.float32)
    done = lambda te, tr: mode == "single" and (te or tr)
batch = 64
calls = 0
t0 = time.perf_counter()
while time.perf_counter() - t0 < seconds:
    for a in sample(batch):
        _, _, term, trunc, _ = env.step(a)
        if done(term, trunc):
            env.reset()
    calls += batch
elapsed = time.perf_counter() - t0
print(json.dumps({"task": task, "mode": mode, "num_envs": n_per_call, "steps_per_s": calls * n_per_call / elapsed,
                  "import_s": import_s, "build_s": build_s,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(mode: str, task: str, num_envs: int, seconds: float) -> dict:
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    import os

    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, task, str(num_envs), str(seconds)],
        capture_output=True, text=True, env={**os.environ, **env}, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from powerzoo.tasks import list_tasks

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=None, help="tasks to measure (default: all registered)")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    tasks = args.tasks or list_tasks()
    print(f"{'task':<22} {'mode':<8} {'envs':>5} {'steps/s':>12} {'import s':>9} {'build s':>8} {'peak MB':>8}")
    for task in tasks:
        for mode in ("single", "vector"):
            r = measure(mode, task, args.num_envs, args.seconds)
            print(f"{r['task']:<22} {r['mode']:<8} {r['num_envs']:>5} {r['steps_per_s']:>12,.0f} "
                  f"{r['import_s']:>9.3f} {r['build_s']:>8.3f} {r['peak_rss_mb']:>8.1f}")


if __name__ == "__main__":
    main()
