"""Env-steps/s of the Ray paths against the in-process ones, on one multi-agent task.

The task defaults to ``marl_opf``. Usage::

    # N = 256 envs, 2 actors, writes results/ray_throughput/
    python benchmarks/ray_throughput.py
    python benchmarks/ray_throughput.py --num-envs 1024 --collect-envs 256 --rllib-seconds 20

Rows (one env-step = one step of one task copy, every agent acting):

* ``native batched env``: ``make_env(task, framework="pettingzoo", num_envs=N)`` stepped in this
  process with random actions drawn before the clock (a pool of batches, cycled, as
  ``benchmarks/throughput.py``); auto-resets included;
* ``Ray actors, batched envs``: 2 Ray actors, each holding a native batched env of N/2 copies and
  its own pre-drawn random actions; one call = one whole rollout of ``--steps`` steps returning
  the observations [T, N/2, n_agents, d] and rewards (transfer included), both actors at once;
* ``MAPPO collect``: :class:`powerzoo.rl.mappo.collector.Collector` (in-process) against
  :class:`powerzoo.rl.mappo.remote.RemoteCollector` with 2 actors (exact mode: networks on the full
  batch shape; and ``rollout_exact=False``): policy and critic forward passes, weights sent once per
  rollout, noise, transfer and joining included; ``--collect-envs`` envs, ``--steps`` per rollout;
* ``RLlib env runners``: ``powerzoo.integrations.rllib.rllib_sampling_rate`` with 0 and 1 remote
  runners (1 env each), when that function exists; otherwise the rows say it was skipped.

Best of ``--repeats`` rollouts per row, one torch thread in this process. The 1-minute load
average is read before each row: on a shared machine the Ray rows compete for the same cores.
Writes ``results/ray_throughput/ray_throughput.{csv,md}``.
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIELDS = ("path", "n_envs", "workers", "actions", "env_steps_per_s", "seconds", "load_1m", "note")


class _EnvBlock:
    """A batched env with pre-drawn random actions (in-process, or as a Ray actor)."""

    def __init__(self, task: str, n_envs: int, seed: int, pool: int = 64) -> None:
        import warnings

        from powerzoo.rl import make_env

        warnings.simplefilter("ignore")
        self.env = make_env(task, framework="pettingzoo", num_envs=n_envs)
        self.env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        agents = list(self.env.possible_agents)
        spaces = [self.env.action_space(a) for a in agents]
        draws = [
            rng.uniform(s.low, s.high, size=(pool, *s.shape)).astype(np.float32) for s in spaces
        ]
        self.pool = [dict(zip(agents, [d[i] for d in draws], strict=True)) for i in range(pool)]
        self.i = 0

    def rollout(self, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """``n_steps`` steps; the observations [T, N, n_agents, d] and rewards [T, N, n_agents]."""
        obs_t, rew_t = [], []
        agents = self.env.possible_agents
        for _ in range(n_steps):
            obs, rewards, *_ = self.env.step(self.pool[self.i % len(self.pool)])
            self.i += 1
            obs_t.append(np.stack([obs[a] for a in agents], axis=1))
            rew_t.append(np.stack([rewards[a] for a in agents], axis=1))
        return np.stack(obs_t), np.stack(rew_t)


def _row(
    path: str,
    n_envs: int,
    workers: int,
    actions: str,
    steps_per_s: float | None,
    seconds: float,
    load: float,
    note: str = "",
) -> dict[str, Any]:
    return {
        "path": path,
        "n_envs": n_envs,
        "workers": workers,
        "actions": actions,
        "env_steps_per_s": None if steps_per_s is None else round(steps_per_s),
        "seconds": round(seconds, 2),
        "load_1m": round(load, 2),
        "note": note,
    }


def _best(fn: Any, steps: int, repeats: int) -> tuple[float, float]:
    """Best env-steps/s over ``repeats`` calls of ``fn``
    (``steps`` env steps each) and the total time."""
    best, started = 0.0, time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = max(best, steps / (time.perf_counter() - t0))
    return best, time.perf_counter() - started


def measure_native(task: str, n_envs: int, n_steps: int, repeats: int, seed: int) -> dict[str, Any]:
    load = os.getloadavg()[0]
    block = _EnvBlock(task, n_envs, seed)
    block.rollout(2)  # warm-up
    rate, seconds = _best(lambda: block.rollout(n_steps), n_steps * n_envs, repeats)
    return _row("native batched env (in-process)", n_envs, 0, "random", rate, seconds, load)


def measure_ray_blocks(
    ray: Any, task: str, n_envs: int, workers: int, n_steps: int, repeats: int, seed: int
) -> dict[str, Any]:
    from powerzoo.rl.mappo.remote import split_rows

    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    cls = ray.remote(num_cpus=1)(_EnvBlock)
    actors = [
        cls.remote(task, hi - lo, seed + k)
        for k, (lo, hi) in enumerate(split_rows(n_envs, workers))
    ]
    ray.get([a.rollout.remote(2) for a in actors])  # started and warm
    startup = time.perf_counter() - t0
    rate, seconds = _best(
        lambda: ray.get([a.rollout.remote(n_steps) for a in actors]), n_steps * n_envs, repeats
    )
    for a in actors:
        ray.kill(a)
    return _row(
        "Ray actors, batched envs (whole rollouts)",
        n_envs,
        workers,
        "random",
        rate,
        seconds,
        load,
        f"actor start {startup:.1f} s",
    )


def measure_collect(
    task: str, n_envs: int, workers: int, n_steps: int, repeats: int, seed: int, exact: bool = True
) -> dict[str, Any]:
    import torch

    from powerzoo.rl import Trainer
    from powerzoo.rl.mappo.collector import Collector
    from powerzoo.rl.mappo.remote import RemoteCollector

    load = os.getloadavg()[0]
    trainer = Trainer(
        task,
        algorithm="MAPPO",
        n_envs=n_envs,
        seed=seed,
        evaluation=None,
        checkpoint=None,
        output_dir=tempfile.mkdtemp(),
        logging={"tensorboard": False, "progress_bar": False},
        algorithm_kwargs={"rollout_exact": exact},
    )
    learner = trainer._ensure_learner()
    torch.set_num_threads(1)
    note = ""
    if workers == 0:
        collector: Any = Collector(trainer.get_env(), learner)
        path = "MAPPO collect, in-process"
    else:
        t0 = time.perf_counter()
        collector = RemoteCollector(
            learner, task, trainer.config.env.split, trainer._env_kwargs(), n_envs, workers
        )
        path = f"MAPPO collect, Ray actors ({'exact' if exact else 'rollout_exact=False'})"
    collector.reset(seed)
    collector.collect(2)  # warm-up
    if workers:
        note = f"actor start {time.perf_counter() - t0:.1f} s"
    rate, seconds = _best(lambda: collector.collect(n_steps), n_steps * n_envs, repeats)
    if workers:
        collector.close()
    return _row(path, n_envs, workers, "policy", rate, seconds, load, note)


def measure_rllib(task: str, runners: int, seconds: float) -> dict[str, Any]:
    load = os.getloadavg()[0]
    path = "RLlib env runners"
    if seconds <= 0:
        return _row(path, 1, runners, "policy", None, 0.0, load, "skipped: --rllib-seconds 0")
    try:
        from powerzoo.integrations import rllib as rllib_bridge
    except ImportError as err:
        return _row(path, runners or 1, runners, "policy", None, 0.0, load, f"skipped: {err}")
    rate_fn = getattr(rllib_bridge, "rllib_sampling_rate", None)
    if rate_fn is None:
        return _row(
            path,
            runners or 1,
            runners,
            "policy",
            None,
            0.0,
            load,
            "skipped: powerzoo.integrations.rllib.rllib_sampling_rate not available",
        )
    t0 = time.perf_counter()
    rate = float(rate_fn(task, runners, 1, seconds))
    return _row(
        path,
        max(runners, 1),
        runners,
        "policy (RLlib)",
        rate,
        time.perf_counter() - t0,
        load,
        f"{runners} remote env runner(s) x 1 env",
    )


def write_outputs(rows: list[dict[str, Any]], out: Path, header: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "ray_throughput.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        header,
        "",
        "| path | envs | Ray workers | actions | env-steps/s | load (1 min) | note |",
        "|---|---:|---:|---|---:|---:|---|",
    ]
    for r in rows:
        rate = "-" if r["env_steps_per_s"] is None else f"{r['env_steps_per_s']:,}"
        lines.append(
            f"| {r['path']} | {r['n_envs']} | {r['workers']} | "
            f"{r['actions']} | {rate} | {r['load_1m']} | {r['note']} |"
        )
    (out / "ray_throughput.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="marl_opf")
    parser.add_argument(
        "--num-envs", type=int, default=256, help="envs of the env-only rows (a) and (b)"
    )
    parser.add_argument(
        "--collect-envs", type=int, default=128, help="envs of the MAPPO collection rows (c)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=48, help="steps per rollout (one actor call)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rllib-seconds", type=float, default=10.0, help="0 skips the RLlib rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(REPO / "results" / "ray_throughput"))
    args = parser.parse_args(argv)
    import torch

    from powerzoo.rl.mappo.remote import import_ray

    torch.set_num_threads(1)
    ray = import_ray()
    cpus = os.cpu_count() or 1
    rows = [measure_native(args.task, args.num_envs, args.steps, args.repeats, args.seed)]
    ray.init(num_cpus=max(cpus, args.workers), include_dashboard=False, log_to_driver=False)
    try:
        rows.append(
            measure_ray_blocks(
                ray, args.task, args.num_envs, args.workers, args.steps, args.repeats, args.seed
            )
        )
        rows.append(
            measure_collect(args.task, args.collect_envs, 0, args.steps, args.repeats, args.seed)
        )
        rows.append(
            measure_collect(
                args.task, args.collect_envs, args.workers, args.steps, args.repeats, args.seed
            )
        )
        rows.append(
            measure_collect(
                args.task,
                args.collect_envs,
                args.workers,
                args.steps,
                args.repeats,
                args.seed,
                exact=False,
            )
        )
    finally:
        ray.shutdown()
    for runners in (0, 1):
        rows.append(measure_rllib(args.task, runners, args.rllib_seconds))
    header = (
        f"{args.task}, ray {ray.__version__}, {cpus} CPU cores, {args.steps} steps "
        f"per rollout, best of {args.repeats}; load average (1/5/15 min) at the end: "
        + "/".join(f"{x:.2f}" for x in os.getloadavg())
    )
    print(header)
    print(
        f"{'path':<52} {'envs':>5} {'wk':>3} {'actions':<15} {'env-steps/s':>12} {'load':>5}  note"
    )
    for r in rows:
        rate = "-" if r["env_steps_per_s"] is None else f"{r['env_steps_per_s']:,}"
        print(
            f"{r['path']:<52} {r['n_envs']:>5} {r['workers']:>3} {r['actions']:<15} {rate:>12} "
            f"{r['load_1m']:>5}  {r['note']}"
        )
    write_outputs(rows, Path(args.out), header)
    print(f"wrote {args.out}/ray_throughput.csv and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
