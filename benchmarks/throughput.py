"""Env throughput: env-steps/s and µs per env-step against batch size N, peak memory, build time.

Usage::

    python benchmarks/throughput.py                     # every task, N = 1 and 1,024
    python benchmarks/throughput.py --tasks opf_118 --num-envs 1 256 1024
    python benchmarks/throughput.py --sweep             # N = 1, 64, 256, 1,024, 4,096 + plot
    python benchmarks/throughput.py --sweep --repeats 3 # fastest of 3 fresh processes per point
    python benchmarks/throughput.py --sweep --together  # every N of a task in one process, in turn

N = 1 is the single env (Gymnasium or PettingZoo, as a user steps it); N > 1 is the native batched
env (``make_env(task, num_envs=N)``). Each measurement runs in a fresh subprocess pinned to one
BLAS thread, so peak memory (ru_maxrss) and import time belong to it alone. Random actions are
drawn before the clock starts (a pool of batches, cycled), so the figures measure PowerZoo, not the
action sampler; episode resets are included (the batched env resets finished rows itself). The clock
runs in windows of whole episodes (horizon calls, repeated until a window lasts >= 0.5 s), so every
step of the day weighs the same at every N (some hours cost more: congested peaks, harder market
LPs); windows are timed until ``--seconds`` have passed and at least three were taken, and the
**fastest window** is reported (``timeit``'s rule: on a shared machine the noise only ever adds
time; the same work in one process varies by up to 50 % between windows here, e.g. gencos_bidding's
HiGHS solves). The CSV also has the mean over all windows (``mean_steps_per_s``).
"CPU µs" is the process's CPU time per env-step: on a busy machine it stays close to the idle
figure while wall-clock steps/s drop.
``--sweep`` also writes ``results/throughput/throughput.{csv,json,md,png}`` (the Markdown table is
the README's; the plot: env-steps/s against N, log-log).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SWEEP = (1, 64, 256, 1024, 4096)
POOL_BYTES = 64 * 2**20  # at most this much pre-drawn action data per measurement
MIN_WINDOW_S = 0.5  # shortest timed window (whole episodes); the fastest of >= 3 windows is kept

_CHILD = r"""
import json, resource, sys, time, warnings
task, sizes, seconds, pool_bytes = (sys.argv[1], [int(n) for n in sys.argv[2].split(",")],
                                    float(sys.argv[3]), int(sys.argv[4]))
min_window = float(sys.argv[5])
t0 = time.perf_counter(); import powerzoo; import_s = time.perf_counter() - t0
import numpy as np
from powerzoo.rl import make_env
from powerzoo.tasks import task_spec
warnings.simplefilter("ignore")
spec = task_spec(task)
multi = spec.agent_mode == "multi"
horizon = spec.horizon

class Point:
    # one batch size: its env, pre-drawn actions and timed windows
    def __init__(self, num_envs):
        self.num_envs, self.single = num_envs, num_envs == 1
        t0 = time.perf_counter()
        self.env = env = make_env(task, framework="pettingzoo" if multi else "gymnasium",
                                  num_envs=None if self.single else num_envs, seed=0)
        self.build_s = time.perf_counter() - t0
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        agents = list(env.possible_agents) if multi else None
        spaces = [env.action_space(a) for a in agents] if multi else [env.action_space]
        per_call = sum(int(np.prod(s.shape)) for s in spaces) * 4
        self.n_pool = int(max(4, min(256, pool_bytes // max(per_call, 1))))
        draws = [rng.uniform(s.low, s.high, size=(self.n_pool,) + s.shape).astype(np.float32)
                 for s in spaces]
        self.pool = ([dict(zip(agents, [d[i] for d in draws])) for i in range(self.n_pool)]
                     if multi else list(draws[0]))
        self.run(min(self.n_pool, 16))  # warm-up: caches, buffers sized for N
        t0 = time.perf_counter(); self.run(8); per_call = (time.perf_counter() - t0) / 8
        # whole episodes
        self.window = horizon * max(1, int(np.ceil(min_window / (per_call * horizon))))
        self.walls, self.cpus = [], []

    def run(self, n_calls):
        env, pool, n_pool = self.env, self.pool, self.n_pool
        for i in range(n_calls):
            _, _, term, trunc, _ = env.step(pool[i % n_pool])
            if self.single and ((not env.agents) if multi else (term or trunc)):
                env.reset()

    def time_window(self):
        t0, c0 = time.perf_counter(), time.process_time()
        self.run(self.window)
        self.walls.append(time.perf_counter() - t0)
        self.cpus.append(time.process_time() - c0)

points = [Point(n) for n in sizes]
while any(sum(p.walls) < seconds or len(p.walls) < 3 for p in points):
    for p in points:  # round-robin: slow phases of a shared machine hit every N alike
        p.time_window()
for p in points:
    steps = p.window * p.num_envs
    best = int(np.argmin(p.walls))
    print(json.dumps({"task": task, "num_envs": p.num_envs, "steps_per_s": steps / p.walls[best],
                      "us_per_env_step": p.walls[best] / steps * 1e6,
                      "cpu_us_per_env_step": p.cpus[best] / steps * 1e6,
                      "mean_steps_per_s": steps * len(p.walls) / sum(p.walls),
                      "windows": len(p.walls),
                      "import_s": import_s, "build_s": p.build_s,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(
    task: str, num_envs: int, seconds: float, min_window: float = MIN_WINDOW_S
) -> dict[str, Any]:
    """One measurement of ``task`` at batch size ``num_envs`` in a fresh subprocess: the fastest of
    at least three windows of whole episodes (each >= ``min_window`` s), timed for >= ``seconds`` in
    all."""
    return measure_together(task, [num_envs], seconds, min_window)[0]


def measure_together(
    task: str, sizes: list[int], seconds: float, min_window: float = MIN_WINDOW_S
) -> list[dict[str, Any]]:
    """``task`` at every batch size of ``sizes`` in one fresh subprocess, timed window by window in
    turn (round-robin), so a slow phase of a shared machine falls on every N alike; one row per N
    (peak memory is then the process's, all envs together)."""
    threads = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            task,
            ",".join(map(str, sizes)),
            str(seconds),
            str(POOL_BYTES),
            str(min_window),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **threads},
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{task} at N={sizes} failed:\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.strip().splitlines()[-len(sizes) :]]


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Env-steps/s by task (rows) and N (columns), as a Markdown table (the README's)."""
    sizes = sorted({r["num_envs"] for r in rows})
    by_key = {(r["task"], r["num_envs"]): r["steps_per_s"] for r in rows}
    lines = [
        "| task | " + " | ".join(f"N = {n:,}" for n in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    for task in dict.fromkeys(r["task"] for r in rows):
        cells = [f"{by_key[task, n]:,.0f}" if (task, n) in by_key else "–" for n in sizes]
        lines.append(f"| `{task}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_results(rows: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """CSV, JSON, a Markdown table and (matplotlib) a log-log plot of env-steps/s against N."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [
        out_dir / "throughput.csv",
        out_dir / "throughput.json",
        out_dir / "throughput.md",
        out_dir / "throughput.png",
    ]
    with paths[0].open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    paths[1].write_text(json.dumps(rows, indent=1))
    paths[2].write_text(markdown_table(rows))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = sorted((r for r in rows if r["task"] == task), key=lambda r: r["num_envs"])
        ax.plot(
            [r["num_envs"] for r in mine], [r["steps_per_s"] for r in mine], marker="o", label=task
        )
    ax.set_xscale("log", base=2)
    sizes = sorted({r["num_envs"] for r in rows})
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
    ax.set_yscale("log")
    ax.set_xlabel("batch size N (envs stepped in one call; N = 1: the single env)")
    ax.set_ylabel("env-steps/s (one core)")
    ax.set_title("PowerZoo throughput, random actions, resets included")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(paths[3], dpi=120)
    plt.close(fig)
    return paths


def main(argv: list[str] | None = None) -> None:
    from powerzoo.tasks import list_tasks

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", nargs="*", default=None, help="tasks to measure (default: all registered)"
    )
    parser.add_argument(
        "--num-envs",
        nargs="+",
        type=int,
        default=[1, 1024],
        help="batch sizes; 1 = the single env (default: 1 1024)",
    )
    parser.add_argument(
        "--sweep", action="store_true", help=f"N = {', '.join(map(str, SWEEP))}, and write results"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=3.0,
        help="timed seconds per measurement (at least 3 windows)",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="fresh processes per point; the fastest is kept"
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="time all batch sizes of a task in one process, window by window in turn (compares N "
        "fairly on a noisy machine; peak MB is then the process's)",
    )
    parser.add_argument(
        "--out", default="results/throughput", help="folder for --sweep's CSV, JSON and plot"
    )
    args = parser.parse_args(argv)
    tasks = args.tasks or list_tasks()
    unknown = sorted(set(tasks) - set(list_tasks()))
    if unknown:
        parser.error(f"unknown task(s) {unknown}; registered: {', '.join(list_tasks())}")
    sizes = list(SWEEP) if args.sweep else args.num_envs
    if any(n < 1 for n in sizes):
        parser.error("--num-envs must be positive")
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    header = (
        f"{'task':<22} {'N':>5} {'env-steps/s':>12} {'(mean)':>12} "
        f"{'µs/env-step':>12} {'CPU µs':>8} {'build s':>8} {'peak MB':>8}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for task in tasks:
        if args.together:
            runs = [measure_together(task, sizes, args.seconds) for _ in range(args.repeats)]
            points = [
                max((run[i] for run in runs), key=lambda m: m["steps_per_s"])
                for i in range(len(sizes))
            ]
        else:
            points = [
                max(
                    (measure(task, n, args.seconds) for _ in range(args.repeats)),
                    key=lambda m: m["steps_per_s"],
                )
                for n in sizes
            ]
        for n, r in zip(sizes, points, strict=True):
            rows.append(r)
            print(
                f"{task:<22} {n:>5} {r['steps_per_s']:>12,.0f} {r['mean_steps_per_s']:>12,.0f} "
                f"{r['us_per_env_step']:>12.2f} {r['cpu_us_per_env_step']:>8.2f} "
                f"{r['build_s']:>8.3f} {r['peak_rss_mb']:>8.1f}",
                flush=True,
            )
    if args.sweep:
        for path in write_results(rows, Path(args.out)):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
