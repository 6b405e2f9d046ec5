"""Single-env step cost by layer: numpy floor, task model, runner, multi-agent core, env.

Usage::

    python benchmarks/single_env_speed.py                       # every task
    python benchmarks/single_env_speed.py --tasks opf_118 marl_opf battery_arbitrage
    python benchmarks/single_env_speed.py --steps 3000 --rounds 7 --out results/single_env_speed

Each task runs in a fresh subprocess pinned to one BLAS thread. The single env is built as a user
builds it (``make_env(task, seed=0)``: Gymnasium for single-agent tasks, PettingZoo for
multi-agent ones) and stepped with random actions drawn before the clock, resets in the loop.
The layers under it are timed on the same actions:

* ``floor``: the task's arithmetic written straight through (``benchmarks/numpy_floor.py``;
  checked equal to the task model on one episode before it is timed), where one exists;
* ``task``: the task model's ``step`` and ``observe`` at B = 1;
* ``runner``: :class:`~powerzoo.envs.runner.TaskRunner` ``step`` (action check, CMDP info,
  truncation, observation);
* ``core``: :class:`~powerzoo.envs.multi_agent_core.MultiAgentCore` ``step`` (the agents' dict
  to the joint action, per-agent observations), multi-agent tasks only;
* ``env``: ``env.step`` (per-agent dicts and infos, Python scalars).

The clock is the process's CPU time (``time.process_time``), so the figures stay close to an idle
machine's on a busy one; the layers run in interleaved rounds of ``--steps`` steps and each keeps
its fastest round (noise only ever adds time). The table gives µs per step, ``env / floor`` and the
single env's steps/s (CPU) against the earlier CPU implementation of the same task where its
figure is known (``EARLIER_STEPS_PER_S``). Written to ``OUT/single_env_speed.{csv,md}``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

EARLIER_STEPS_PER_S = {
    "battery_arbitrage": 470,
    "marl_opf": 440,
    "opf_118": 210,
    "marl_ders_benchmark": 230,
    "gencos_bidding": 470,
    "dso": 350,
    "dc_microgrid": 4800,
    "dc_microgrid_safe": 4800,
}
"""Single-env steps/s of the earlier CPU implementation of the same tasks (pure numpy, one core
of the 2-core CI-class machine)."""

LAYERS = ("floor", "task", "runner", "core", "env")

_CHILD = r"""
import json, sys, time, warnings
sys.path.insert(0, sys.argv[1])
task_id, steps, rounds = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
warnings.simplefilter("ignore")
import numpy as np
import numpy_floor
from powerzoo.rl import make_env
from powerzoo.tasks import task_spec

spec = task_spec(task_id)
multi = spec.agent_mode == "multi"
horizon = spec.horizon
env = make_env(task_id, seed=0, framework="pettingzoo" if multi else "gymnasium")
core = env.core if multi else None
runner = core.runner if multi else env.unwrapped.runner
task = runner.task
env.reset(seed=0)
rng = np.random.default_rng(0)
POOL = 256
if multi:
    agents = list(env.possible_agents)
    spaces = [env.action_space(a) for a in agents]
    actions = [{a: rng.uniform(s.low, s.high).astype(np.float32) for a, s in zip(agents, spaces)}
               for _ in range(POOL)]
    joint = [runner.check_action(core.joint_action(a))[0] for a in actions]
else:
    space = env.action_space
    actions = [rng.uniform(space.low, space.high).astype(np.float32) for _ in range(POOL)]
    joint = [runner.check_action(a)[0] for a in actions]

def run_env(n):
    for i in range(n):
        if multi:
            if not env.agents:
                env.reset()
            env.step(actions[i % POOL])
        else:
            _, _, terminated, truncated, _ = env.step(actions[i % POOL])
            if terminated or truncated:
                env.reset()

def run_core(n):
    core.reset()
    for i in range(n):
        if i % horizon == horizon - 1:
            core.reset()
        else:
            core.step(actions[i % POOL])

def run_runner(n):
    runner.reset()
    for i in range(n):
        if i % horizon == horizon - 1:
            runner.reset()
        else:
            runner.step(joint[i % POOL])

def run_task(n):
    day = np.zeros(1, dtype=np.int64)
    state = task.reset(runner.rng, day)
    for i in range(n):
        if i % horizon == horizon - 1:
            state = task.reset(runner.rng, day)
        else:
            state, _ = task.step(state, joint[i % POOL], runner.rng)
            task.observe(state)

layers = {"task": run_task, "runner": run_runner}
floor_check = None
if task_id in numpy_floor.FLOORS:
    flat = [j[0] for j in joint]
    floor_check = numpy_floor.check_floor(task_id, task, flat)
    floor = numpy_floor.FLOORS[task_id](task, 0)
    def run_floor(n):
        floor.reset()
        for i in range(n):
            if i % horizon == horizon - 1:
                floor.reset()
            else:
                floor(flat[i % POOL])
    layers = {"floor": run_floor, **layers}
if multi:
    layers["core"] = run_core
layers["env"] = run_env
for run in layers.values():
    run(min(steps, 200))  # warm-up
best = {name: float("inf") for name in layers}
for _ in range(rounds):
    for name, run in layers.items():
        t0 = time.process_time()
        run(steps)
        best[name] = min(best[name], (time.process_time() - t0) / steps * 1e6)
print(json.dumps({"task": task_id, "us": best, "floor_check": floor_check}))
"""


def measure(task: str, steps: int, rounds: int) -> dict:
    """One task's layers in a fresh one-thread subprocess: ``{"task", "us": {layer: µs},
    "floor_check"}``."""
    threads = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, here, task, str(steps), str(rounds)],
        capture_output=True,
        text=True,
        env={**os.environ, **threads},
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{task} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table_rows(results: list[dict]) -> list[dict]:
    """One row per task: µs per layer, ``env / floor``, steps/s (CPU) and the ratio to the
    earlier implementation."""
    rows = []
    for r in results:
        us = r["us"]
        env_us = us["env"]
        earlier = EARLIER_STEPS_PER_S.get(r["task"])
        rows.append(
            {
                "task": r["task"],
                **{f"{layer}_us": us.get(layer) for layer in LAYERS},
                "env_over_floor": env_us / us["floor"] if "floor" in us else None,
                "env_over_task": env_us / us["task"],
                "steps_per_s": 1e6 / env_us,
                "earlier_steps_per_s": earlier,
                "vs_earlier": 1e6 / env_us / earlier if earlier else None,
                "floor_check": r["floor_check"],
            }
        )
    return rows


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def markdown(rows: list[dict]) -> str:
    """The table as Markdown."""
    lines = [
        "| task | floor µs | task µs | runner µs | core µs | env µs | env / floor "
        "| steps/s | earlier steps/s | vs earlier |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['task']}` | {_fmt(r['floor_us'], '.1f')} | {r['task_us']:.1f} "
            f"| {r['runner_us']:.1f} | {_fmt(r['core_us'], '.1f')} | {r['env_us']:.1f} "
            f"| {_fmt(r['env_over_floor'], '.2f')} | {r['steps_per_s']:,.0f} "
            f"| {_fmt(r['earlier_steps_per_s'], ',')} | {_fmt(r['vs_earlier'], '.1f')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    from powerzoo.tasks import list_tasks

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=None, help="default: every task")
    parser.add_argument("--steps", type=int, default=2000, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per layer")
    parser.add_argument("--out", type=Path, default=Path("results/single_env_speed"))
    args = parser.parse_args(argv)
    tasks = args.tasks or list(list_tasks())
    results = []
    for task in tasks:
        try:
            results.append(measure(task, args.steps, args.rounds))
        except RuntimeError as err:  # one task's failure is reported, the others still run
            print(f"{task:<24} failed: {str(err).splitlines()[-1]}", flush=True)
            continue
        row = table_rows(results[-1:])[0]
        print(
            f"{task:<24} env {row['env_us']:8.1f} µs  task {row['task_us']:7.1f} µs  "
            f"floor {_fmt(row['floor_us'], '7.1f') or '      -'}  "
            f"env/floor {_fmt(row['env_over_floor'], '5.2f') or '    -'}  "
            f"{row['steps_per_s']:9,.0f} steps/s  "
            f"vs earlier {_fmt(row['vs_earlier'], '.1f') or '-'}",
            flush=True,
        )
    rows = table_rows(results)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "single_env_speed.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "single_env_speed.md").write_text(markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
