"""How fast this machine runs what a campaign trial runs, per CPU-second of one core.

Usage::

    python benchmarks/machine_speed.py                                  # print the figures
    python benchmarks/machine_speed.py --append results/benchmark_v2/machines.jsonl

Track S gives every trial the same CPU seconds, and machines of one CPU name differ (measured:
an AVX2 machine gave about half the env steps per CPU-second of the AVX-512 machines that ran a
campaign's first seeds). This measures a fixed workload on one core, one BLAS and one torch
thread, as a trial runs: a single env of three tasks stepped with random actions (Gymnasium for
``battery_arbitrage``, PettingZoo for ``marl_uc`` and ``acopf_118``), and Adam updates of a
256-256 MLP on batches of 256 (a PPO minibatch's size). Each part keeps its fastest of
``--rounds`` rounds (noise only ever adds time). ``--append`` adds the figures with the machine's
hardware (:func:`powerzoo.rl.tracks.hardware_info`) and the time as one JSON line, so a campaign
folder keeps which machine ran when, and how fast it was.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

TASK_STEPS = {"battery_arbitrage": 4000, "marl_uc": 1000, "acopf_118": 200}


def env_steps_per_cpu_s(task: str, steps: int, rounds: int) -> float:
    """Single-env steps per CPU-second of ``task`` under random actions (fastest round)."""
    from powerzoo.rl import make_env

    env = make_env(task, seed=0)
    rng = np.random.default_rng(0)
    multi = hasattr(env, "possible_agents")
    best = np.inf
    for _ in range(rounds):
        env.reset(seed=0)
        if multi:
            agents = list(env.possible_agents)
            spaces = {a: env.action_space(a) for a in agents}
            actions = [
                {a: rng.uniform(s.low, s.high).astype(s.dtype) for a, s in spaces.items()}
                for _ in range(steps)
            ]
        else:
            space = env.action_space
            actions = [rng.uniform(space.low, space.high).astype(space.dtype) for _ in range(steps)]
        start = time.process_time()
        for action in actions:
            out = env.step(action)
            done = (out[2][agents[0]] or out[3][agents[0]]) if multi else (out[2] or out[3])
            if done:
                env.reset()
        best = min(best, time.process_time() - start)
    return steps / best


def torch_updates_per_cpu_s(updates: int, rounds: int) -> float:
    """Adam updates per CPU-second of a 64-256-256-8 MLP on batches of 256 (fastest round)."""
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 256), torch.nn.Tanh()
    )
    head = torch.nn.Linear(256, 8)
    params = [*net.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=3e-4)
    x, y = torch.randn(256, 64), torch.randn(256, 8)
    best = np.inf
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(updates):
            loss = ((head(net(x)) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        best = min(best, time.process_time() - start)
    return updates / best


def measure(
    rounds: int = 3, updates: int = 300, task_steps: dict[str, int] | None = None
) -> dict[str, Any]:
    """The figures and the hardware, on one core and one BLAS and torch thread; ``task_steps``:
    steps per round of each task (default :data:`TASK_STEPS`)."""
    import torch
    from threadpoolctl import threadpool_limits

    from powerzoo.rl.tracks import hardware_info

    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        chosen = TASK_STEPS if task_steps is None else task_steps
        env = {task: env_steps_per_cpu_s(task, n, rounds) for task, n in chosen.items()}
        updates_per_s = torch_updates_per_cpu_s(updates, rounds)
    return {
        "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "env_steps_per_cpu_s": {task: round(v, 1) for task, v in env.items()},
        "torch_updates_per_cpu_s": round(updates_per_s, 1),
        "hardware": hardware_info(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per part (fastest kept)")
    parser.add_argument("--append", type=Path, help="add the figures as a JSON line to FILE")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    from powerzoo.benchmarks.trial_submission import kernels_text

    figures = measure(args.rounds)
    hw = figures["hardware"]
    print(f"{hw['cpu_model']}{kernels_text(hw)}")
    for task, v in figures["env_steps_per_cpu_s"].items():
        print(f"  {task:<18} {v:>10,.1f} env steps per CPU-second (single env)")
    print(
        f"  {'torch MLP':<18} {figures['torch_updates_per_cpu_s']:>10,.1f} Adam updates per CPU-s"
    )
    if args.append:
        args.append.parent.mkdir(parents=True, exist_ok=True)
        with args.append.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(figures) + "\n")
        print(f"appended to {args.append}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
