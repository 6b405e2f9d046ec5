"""Offline-dataset collection speed: transitions/s, peak memory and file size, random policy.

Usage: python benchmarks/collect_speed.py [--task battery_arbitrage] [--num-envs 1 256]
                                          [--transitions 100000] [--million]

``--num-envs 1`` collects with the single Gymnasium env (episode ``i`` seeded ``seed + i``);
``N > 1`` with the native vector env (one batched step for ``N`` episodes). ``--million`` collects
1,000,000 transitions (20,834 episodes of 48 steps on battery_arbitrage) to show that memory stays
flat however long the collection. Each measurement runs in a fresh subprocess, so its peak RSS
(``ru_maxrss``) belongs to it alone; the file is written to a temporary folder and deleted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile


def child(task: str, num_envs: int, n_episodes: int, out_dir: str) -> dict:
    """One collection in this process; returns its measurements."""
    import resource
    import time

    from powerzoo.benchmarks.offline import DatasetGenerator
    from powerzoo.benchmarks.policies import make_baseline_policy
    from powerzoo.envs.make import make_env

    env = make_env(task, num_envs=None if num_envs == 1 else num_envs)
    path = os.path.join(out_dir, f"{task}_{num_envs}.h5")
    generator = DatasetGenerator(env, info_keys=["constraint_costs", "cost_sum", "is_safe"])
    started = time.perf_counter()
    policy = make_baseline_policy("random", env, seed=None)  # collect() seeds it
    dataset = generator.collect(policy, n_episodes, path, seed=0, progress=False)
    seconds = time.perf_counter() - started
    n_steps = dataset.n_steps
    dataset.close()
    size = os.path.getsize(path)
    os.remove(path)
    return {
        "task": task,
        "num_envs": num_envs,
        "episodes": n_episodes,
        "transitions": n_steps,
        "transitions_per_s": n_steps / seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "mb_per_million": size / 1e6 * 1e6 / n_steps,
    }


def measure(task: str, num_envs: int, n_episodes: int) -> dict:
    """Run :func:`child` in a fresh interpreter pinned to one BLAS thread."""
    threads = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as out_dir:
        out = subprocess.run(
            [sys.executable, __file__, "--child", task, str(num_envs), str(n_episodes), out_dir],
            capture_output=True,
            text=True,
            env={**os.environ, **threads},
            check=True,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        task, num_envs, n_episodes, out_dir = (
            sys.argv[2],
            int(sys.argv[3]),
            int(sys.argv[4]),
            sys.argv[5],
        )
        print(json.dumps(child(task, num_envs, n_episodes, out_dir)))
        return
    from powerzoo.tasks import task_spec

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="battery_arbitrage")
    parser.add_argument(
        "--num-envs",
        type=int,
        nargs="+",
        default=[1, 256],
        help="1 = single env; N > 1 = vector env",
    )
    parser.add_argument(
        "--transitions",
        type=int,
        default=100_000,
        help="transitions per measurement (default 100,000)",
    )
    parser.add_argument(
        "--million", action="store_true", help="collect 1,000,000 transitions per measurement"
    )
    args = parser.parse_args()
    transitions = 1_000_000 if args.million else args.transitions
    n_episodes = math.ceil(transitions / task_spec(args.task).horizon)
    print(
        f"{'task':<20} {'envs':>5} {'episodes':>9} {'transitions':>12} "
        f"{'transitions/s':>14} {'peak RSS MB':>12} {'MB per 1M':>10}"
    )
    for num_envs in args.num_envs:
        r = measure(args.task, num_envs, n_episodes)
        print(
            f"{r['task']:<20} {r['num_envs']:>5} {r['episodes']:>9,} "
            f"{r['transitions']:>12,} {r['transitions_per_s']:>14,.0f} "
            f"{r['peak_rss_mb']:>12.1f} {r['mb_per_million']:>10.1f}"
        )


if __name__ == "__main__":
    main()
