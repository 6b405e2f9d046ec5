"""Share of SB3 PPO training time spent building and copying per-env info dicts.

Usage: python benchmarks/info_share.py [--tasks battery_arbitrage dc_microgrid] [--n-envs 64]
       [--timesteps 16384]

Trains PPO as ``benchmarks/train_throughput.py`` does (same hyperparameters, one torch thread),
once on each env path, and times the info work inside ``model.learn``: on the DummyVecEnv path
SB3's ``deepcopy`` of the list of info dicts every step (each a Gymnasium env's full info); on
the native path ``NativeVecEnv._infos`` (the per-env dicts built from the batched arrays, only
the keys SB3 and the Trainer's callbacks read). Each run is a fresh subprocess.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import train_throughput
import stable_baselines3.common.vec_env.dummy_vec_env as dummy_vec_env
from powerzoo.rl import native_vec_env
kind, task, n_envs, timesteps = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
spent = [0.0]
def timed(f):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0
    return wrapper
dummy_vec_env.deepcopy = timed(dummy_vec_env.deepcopy)
native_vec_env.NativeVecEnv._infos = timed(native_vec_env.NativeVecEnv._infos)
r = train_throughput._measure(kind, "PPO", task, n_envs, timesteps, 0, {})
print(json.dumps({"path": kind, "task": task, "learn_s": r["learn_s"], "info_s": spent[0]}))
"""


def measure(kind: str, task: str, n_envs: int, timesteps: int) -> dict:
    """One PPO run on env path ``kind`` ("native" | "dummy") in a fresh subprocess."""
    threads = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, here, kind, task, str(n_envs), str(timesteps)],
        capture_output=True,
        text=True,
        env={**os.environ, **threads},
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{kind} {task} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=["battery_arbitrage", "dc_microgrid"])
    parser.add_argument("--n-envs", type=int, default=64)
    parser.add_argument("--timesteps", type=int, default=16384)
    args = parser.parse_args(argv)
    print(f"{'task':<18} {'path':<7} {'learn s':>8} {'info s':>7} {'share':>6}")
    started = time.perf_counter()
    for task in args.tasks:
        for kind in ("dummy", "native"):
            r = measure(kind, task, args.n_envs, args.timesteps)
            print(
                f"{task:<18} {kind:<7} {r['learn_s']:>8.2f} {r['info_s']:>7.3f} "
                f"{100 * r['info_s'] / r['learn_s']:>5.1f}%",
                flush=True,
            )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
