"""Native PPO throughput: batched collection, end-to-end MAPPO (PPO-L), SB3 shared policy (PPO).

Usage: python benchmarks/mappo_throughput.py [--task marl_opf] [--collect-envs 1024]
       [--train-envs 128] [--timesteps 61440] [--sb3-timesteps 61440] [--seed 0] [--json OUT]

One torch thread everywhere; torch's one-time imports of its first optimiser step are done before
any row is timed (:func:`warm_up_torch`). Rows:

* ``collect``: :class:`powerzoo.rl.mappo.collector.Collector` over ``--collect-envs`` envs (actors
  and the centralised critic in the loop, final-observation values included), env steps per second
  of ``collect()``;
* ``MAPPO``: ``Trainer(task, algorithm="MAPPO")`` with the defaults of
  ``configs/<task>_mappo.yaml``'s algorithm_kwargs (no evaluation, no checkpoints, no
  TensorBoard), ``--timesteps`` env steps over the wall time of ``train()`` (collection and PPO
  epochs);
* ``SB3 shared PPO``: :func:`powerzoo.rl.sb3.marl.train_shared_policy` (one SB3 PPO policy for all
  agents, the ``powerzoo train`` default before MAPPO) with ``configs/<task>.yaml``'s
  algorithm_kwargs, the same number of env steps (SB3 counts agent-steps: ``n_agents`` times
  more).

On a single-agent task (``--task battery_arbitrage``) the native rows run ``PPO-L`` (the task's
one agent, ``configs/<task>_ppo_l.yaml``'s algorithm_kwargs) and the SB3 row is
``Trainer(task, algorithm="PPO")`` with ``configs/<task>.yaml``'s algorithm_kwargs (native vector
env, ``VecNormalize``; no evaluation, no checkpoints); give both the same ``n_envs`` with
``--train-envs N --sb3-envs N``.

Env steps: one step of one task copy, all agents acting (agent-steps = env steps x n_agents).

``--time-to-rule STEPS`` adds the wall time to the rule's return within the budgets on one core:
the run config ``--rule-config`` (default ``configs/<task>_mappo.yaml``: its algorithm, n_envs,
total_timesteps and algorithm_kwargs, so the learning-rate schedule is the preset's) trains with
one torch thread for at most STEPS env steps, evaluated every ``--rule-every`` env steps on
``--rule-days`` validation days spread evenly (deterministic policy, seed 0; the test split is
held out, :mod:`powerzoo.rl.selection`). It stops at the first evaluation whose mean return is at
least the rule-based policy's on the same days (run on them first), less ``--rule-gap`` percent
of its magnitude (default 0), and whose mean episode cost of every selected constraint is within
the task's budget (``cost_thresholds``), and prints its env steps and training seconds
(evaluations excluded), or that it did not get there within STEPS (with the best return reached
within the budgets, and the costs of the best return).
Where the rule is the optimum (``marl_opf``: its merit order with PTDF redispatch equals the
DC-OPF oracle to 0.02 $ a day), a continuous policy only comes near it: give ``--rule-gap``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def _kwargs(path: Path) -> dict[str, Any]:
    return (
        dict(yaml.safe_load(path.read_text()).get("algorithm_kwargs") or {})
        if path.is_file()
        else {}
    )


def _native(task: str) -> tuple[str, str]:
    """The native algorithm of ``task`` and the config file its algorithm_kwargs come from."""
    from powerzoo.tasks.registry import task_spec

    if task_spec(task).agent_mode == "multi":
        return "MAPPO", f"{task}_mappo.yaml"
    return "PPO-L", f"{task}_ppo_l.yaml"


def measure_collect(
    task: str, n_envs: int, n_steps: int = 16, repeats: int = 3, seed: int = 0
) -> float:
    """Env steps/s of MAPPO rollout collection on ``n_envs`` envs (best of ``repeats``)."""
    from powerzoo.rl import Trainer
    from powerzoo.rl.mappo.collector import Collector

    trainer = Trainer(
        task,
        algorithm=_native(task)[0],
        n_envs=n_envs,
        seed=seed,
        evaluation=None,
        checkpoint=None,
        output_dir=tempfile.mkdtemp(),
        logging={"tensorboard": False, "progress_bar": False},
    )
    learner = trainer._ensure_learner()
    collector = Collector(trainer.get_env(), learner)
    collector.reset(seed)
    collector.collect(2)  # warm-up
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        collector.collect(n_steps)
        best = max(best, n_steps * n_envs / (time.perf_counter() - started))
    return best


def warm_up_torch() -> None:
    """One Adam step on a tiny network: torch imports about 800 modules (its compiler stack) on
    the first optimiser step, about 2 s here, which would otherwise be charged to whichever row
    is timed first."""
    import torch

    net = torch.nn.Linear(4, 2)
    optimiser = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.zeros(3, 4)).sum().backward()
    optimiser.step()


def measure_mappo(task: str, n_envs: int, timesteps: int, seed: int = 0) -> dict[str, float]:
    """End-to-end MAPPO training: env steps/s and the final training-episode return."""
    import torch

    algorithm, config = _native(task)
    kwargs = _kwargs(REPO / "configs" / config)
    torch.set_num_threads(1)
    return _timed_train(task, algorithm, kwargs, n_envs, timesteps, seed)


def _timed_train(
    task: str, algorithm: str, kwargs: dict[str, Any], n_envs: int, timesteps: int, seed: int
) -> dict[str, float]:
    """Env steps, seconds and env-steps/s of ``Trainer(task, algorithm).train()`` with no
    evaluation, checkpoints, TensorBoard or progress bar (the trainer's build is not timed)."""
    from powerzoo.rl import Trainer

    trainer = Trainer(
        task,
        algorithm=algorithm,
        total_timesteps=timesteps,
        n_envs=n_envs,
        seed=seed,
        evaluation=None,
        checkpoint=None,
        output_dir=tempfile.mkdtemp(),
        algorithm_kwargs=kwargs,
        logging={"tensorboard": False, "progress_bar": False},
    )
    started = time.perf_counter()
    steps = trainer.train().num_timesteps
    seconds = time.perf_counter() - started
    return {"env_steps": steps, "seconds": seconds, "steps_per_s": steps / seconds}


def measure_sb3_shared(task: str, n_envs: int, timesteps: int, seed: int = 0) -> dict[str, float]:
    """The SB3 shared-policy path (``train_shared_policy``) for the same number of env steps;
    SB3 PPO through the Trainer on a single-agent task."""
    import torch

    from powerzoo.rl.sb3.marl.loops import train_shared_policy
    from powerzoo.tasks.registry import task_spec

    torch.set_num_threads(1)
    n_agents = len(task_spec(task).agents)
    kwargs = _kwargs(REPO / "configs" / f"{task}.yaml")
    if n_agents == 1:  # single-agent task: SB3 PPO through the Trainer
        return _timed_train(task, "PPO", kwargs, n_envs, timesteps, seed)
    started = time.perf_counter()
    train_shared_policy(
        task,
        "PPO",
        total_timesteps=timesteps * n_agents,
        n_envs=n_envs,
        seed=seed,
        algo_kwargs=kwargs,
        progress=False,
    )
    seconds = time.perf_counter() - started
    return {"env_steps": timesteps, "seconds": seconds, "steps_per_s": timesteps / seconds}


def measure_time_to_rule(
    task: str,
    config: Path,
    max_timesteps: int,
    every: int,
    n_days: int,
    seed: int = 0,
    gap_percent: float = 0.0,
) -> dict[str, Any]:
    """Env steps and training seconds (one torch thread, evaluations excluded) until the policy
    of ``config`` first reaches the rule-based return, less ``gap_percent`` % of its magnitude,
    within every selected budget (module docstring); ``reached`` says whether it did within
    ``max_timesteps`` env steps."""
    import numpy as np

    from powerzoo.benchmarks.baselines import evaluate_baseline, select_days
    from powerzoo.envs.introspect import task_of
    from powerzoo.rl import Trainer, make_env
    from powerzoo.rl.selection import SELECTION_SPLIT
    from powerzoo.tasks.registry import task_spec

    run = yaml.safe_load(config.read_text())
    spec = task_spec(task)
    days = select_days(task_of(make_env(task, split=SELECTION_SPLIT)).n_days, n_days)
    rule = evaluate_baseline(task, "rule_based", SELECTION_SPLIT, day_ids=days)
    rule_return = float(np.mean(rule["returns"]))
    target = rule_return - abs(rule_return) * float(gap_percent) / 100.0
    budgets = {name: float(spec.cost_thresholds[name]) for name in spec.selected_constraints}
    trainer = Trainer(
        task,
        algorithm=run.get("algorithm", _native(task)[0]),
        total_timesteps=int(run.get("total_timesteps", max_timesteps)),
        n_envs=int(run.get("n_envs", 64)),
        seed=seed,
        evaluation={"split": SELECTION_SPLIT, "freq": every, "episodes": n_days},
        checkpoint=None,
        output_dir=tempfile.mkdtemp(),
        algorithm_kwargs=dict(run.get("algorithm_kwargs") or {}),
        logging={"tensorboard": False, "progress_bar": False},
        torch_threads=1,
    )

    def within(row: dict[str, Any]) -> bool:
        return all(row[f"cost_{name}"] <= limit for name, limit in budgets.items())

    seconds: dict[int, float] = {}  # training seconds (evaluations excluded) at each evaluation

    def stop(progress: Any) -> bool:
        rows = trainer.evaluations
        fresh = bool(rows) and rows[-1]["timestep"] == progress.num_timesteps
        if fresh:
            spent = sum(r["eval_seconds"] for r in rows)
            seconds[progress.num_timesteps] = time.perf_counter() - started - spent
        past_rule = fresh and rows[-1]["mean_return"] >= target and within(rows[-1])
        return past_rule or progress.num_timesteps >= max_timesteps

    started = time.perf_counter()
    trainer.train(stop_conditions=[stop])
    wall = time.perf_counter() - started
    rows = trainer.evaluations
    hit = next((r for r in rows if r["mean_return"] >= target and within(r)), None)
    past = next((r for r in rows if r["mean_return"] >= target), None)  # budgets aside
    feasible = [r for r in rows if within(r)]
    best = max(rows, key=lambda r: r["mean_return"])
    train_seconds = wall - sum(r["eval_seconds"] for r in rows)
    return {
        "config": str(config),
        "days": len(days),
        "rule_return": rule_return,
        "gap_percent": float(gap_percent),
        "target_return": target,
        "budgets": budgets,
        "reached": hit is not None,
        "env_steps": int(hit["timestep"] if hit else trainer.num_timesteps),
        "train_seconds": seconds.get(hit["timestep"], train_seconds) if hit else train_seconds,
        "past_rule_env_steps": None if past is None else int(past["timestep"]),
        "past_rule_seconds": None if past is None else seconds.get(past["timestep"]),
        "past_rule_costs": None if past is None else {n: past[f"cost_{n}"] for n in budgets},
        "best_feasible_return": max((r["mean_return"] for r in feasible), default=None),
        "best_return": best["mean_return"],
        "best_return_costs": {name: best[f"cost_{name}"] for name in budgets},
    }


def _print_time_to_rule(out: dict[str, Any]) -> None:
    budgets = ", ".join(f"{name} <= {limit:g}" for name, limit in out["budgets"].items())
    gap = out.get("gap_percent", 0.0)
    within_gap = f" less {gap:g} % ({out['target_return']:,.0f})" if gap else ""
    print(
        f"  time to the rule's return ({out['rule_return']:,.0f} on {out['days']} validation days)"
        f"{within_gap} within the budgets ({budgets} per episode), "
        f"{Path(out['config']).name}, one core:"
    )
    if out["past_rule_env_steps"] is not None and not out["reached"]:
        costs = ", ".join(f"{k} {v:,.3g}" for k, v in out["past_rule_costs"].items())
        print(
            f"    the rule's return with the budgets aside: {out['past_rule_env_steps']:,} env "
            f"steps, {out['past_rule_seconds']:.0f} s of training (costs {costs})"
        )
    if out["reached"]:
        print(f"    {out['env_steps']:,} env steps, {out['train_seconds']:.0f} s of training")
        return
    feasible = out["best_feasible_return"]
    costs = ", ".join(f"{k} {v:,.3g}" for k, v in out["best_return_costs"].items())
    print(
        f"    not reached within {out['env_steps']:,} env steps "
        f"({out['train_seconds']:.0f} s of training); best return within the budgets: "
        + ("none" if feasible is None else f"{feasible:,.0f}")
        + f"; best return {out['best_return']:,.0f} with costs {costs}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="marl_opf")
    parser.add_argument("--collect-envs", type=int, default=1024)
    parser.add_argument("--train-envs", type=int, default=128)
    parser.add_argument(
        "--sb3-envs", type=int, default=8, help="n_envs of the SB3 path (configs/<task>.yaml: 8)"
    )
    parser.add_argument("--timesteps", type=int, default=61_440)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    parser.add_argument(
        "--time-to-rule",
        type=int,
        default=0,
        metavar="STEPS",
        help="also train --rule-config for at most STEPS env steps until it reaches the rule's "
        "return within the budgets (0: skip)",
    )
    parser.add_argument("--rule-config", default=None, help="default: configs/<task>_mappo.yaml")
    parser.add_argument("--rule-every", type=int, default=49_152, help="env steps per evaluation")
    parser.add_argument("--rule-days", type=int, default=8, help="validation days per evaluation")
    parser.add_argument(
        "--rule-gap",
        type=float,
        default=0.0,
        metavar="PERCENT",
        help="count the rule as reached within PERCENT %% of its return (default 0)",
    )
    parser.add_argument("--only-time-to-rule", action="store_true", help="skip the throughput rows")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    warm_up_torch()
    to_rule = None
    if args.time_to_rule:
        config = Path(args.rule_config or REPO / "configs" / _native(args.task)[1])
        to_rule = measure_time_to_rule(
            args.task,
            config,
            args.time_to_rule,
            args.rule_every,
            args.rule_days,
            args.seed,
            args.rule_gap,
        )
        if args.only_time_to_rule:
            print(f"{args.task}, one torch thread")
            _print_time_to_rule(to_rule)
            if args.json:
                Path(args.json).write_text(json.dumps({"time_to_rule": to_rule}, indent=2))
            return 0
    collect = measure_collect(args.task, args.collect_envs, seed=args.seed)
    mappo = measure_mappo(args.task, args.train_envs, args.timesteps, args.seed)
    sb3 = measure_sb3_shared(args.task, args.sb3_envs, args.timesteps, args.seed)
    native, sb3_name = _native(args.task)[0], "SB3 shared PPO"
    if native == "PPO-L":
        sb3_name = "SB3 PPO"
    print(f"{args.task}, one torch thread")
    print(
        f"  collect ({native} actors + critics), "
        f"{args.collect_envs} envs: {collect:>10,.0f} env-steps/s"
    )
    print(
        f"  {native} end-to-end, {args.train_envs} envs, {mappo['env_steps']:,} env steps: "
        f"{mappo['steps_per_s']:>10,.0f} env-steps/s ({mappo['seconds']:.1f} s)"
    )
    print(
        f"  {sb3_name}, {args.sb3_envs} envs, {sb3['env_steps']:,} env steps: "
        f"{sb3['steps_per_s']:>10,.0f} env-steps/s ({sb3['seconds']:.1f} s)"
    )
    print(f"  {native} / {sb3_name}: {mappo['steps_per_s'] / sb3['steps_per_s']:.1f}x")
    if to_rule is not None:
        _print_time_to_rule(to_rule)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "task": args.task,
                    "collect_steps_per_s": collect,
                    "mappo": mappo,
                    "sb3_shared": sb3,
                    "time_to_rule": to_rule,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
