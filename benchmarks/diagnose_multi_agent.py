"""Why do trained policies miss the rule within the budgets on a multi-agent task?

Rolls out baselines (random, rule_based, oracle, idle where the task has it), a few hand policies
and, optionally, trained run folders (``--run``, e.g. a campaign trial's ``run`` folder; its best
policy) on the test days of the packaged baselines table, and prints per policy: the mean return
($ per episode, the shared reward or the team's), the mean of each reward term, each constraint
cost against its per-episode budget, the share of episodes over budget, the budget-aware score
against the table's random and oracle rows (0 = random, 1 = oracle) and what the agents do:

* batteries (``joint_trans_dist*``, ``marl_der_arbitrage``): throughput (MWh charged +
  discharged per episode), the share of steps at a SOC bound, the power asked beyond it, the
  episodes with any trade;
* generators (``joint_trans_dist*``): mean output of each unit (MW), regulation energy (MWh
  within the band) and the mean absolute mismatch (MW);
* AC tasks (``acopf_118``, ``voltage_control_118``): the units whose reactive output leaves
  their limits most (Mvarh per episode, above ``q_max`` or below ``q_min``), their limits, and
  the mean voltage set-point of every unit.

    python benchmarks/diagnose_multi_agent.py --task joint_trans_dist
    python benchmarks/diagnose_multi_agent.py --task acopf_118 --policies rule_based --days 1
    python benchmarks/diagnose_multi_agent.py --task marl_der_arbitrage \
        --run results/some_run/run
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import evaluation_protocol
from powerzoo.benchmarks.cmdp_score import cmdp_score
from powerzoo.benchmarks.evaluation import budget_flags, rollout
from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.envs.make import make_env

TASKS = (
    "joint_trans_dist",
    "joint_trans_dist_7d",
    "joint_trans_dist_118",
    "acopf_118",
    "voltage_control_118",
    "marl_der_arbitrage",
)
BATTERY_TASKS = ("joint_trans_dist", "joint_trans_dist_7d", "joint_trans_dist_118")
AC_TASKS = ("acopf_118", "voltage_control_118")


class ConstantPolicy:
    """Applies one fixed action per agent (the env's physical units) on every step."""

    def __init__(self, actions: dict[str, np.ndarray]) -> None:
        self.actions = {a: np.asarray(v, dtype=np.float32) for a, v in actions.items()}

    def reset(self) -> None:
        """Nothing to reset."""

    def act(self, obs: Any, info: Any) -> dict[str, np.ndarray]:
        """The fixed actions."""
        return self.actions


class RuleWithBatteries:
    """The task's rule with every battery agent's action replaced by ``battery_mw`` (MW, +
    discharge), e.g. pinned at full charge as a saturated policy asks."""

    def __init__(self, env: Any, battery_mw: float) -> None:
        self.rule = make_baseline_policy("rule_based", env)
        self.battery_mw = np.float32(battery_mw)

    def reset(self) -> None:
        """Resets the rule."""
        self.rule.reset()

    def act(self, obs: Any, info: Any) -> dict[str, np.ndarray]:
        """The rule's actions, the batteries' overwritten."""
        out = dict(self.rule.act(obs, info))
        for a in out:
            if a.startswith("battery"):
                out[a] = np.full_like(np.asarray(out[a], np.float32), self.battery_mw)
        return out


def hand_policies(task: str, env: Any) -> dict[str, Any]:
    """Simple hand policies of ``task`` (names -> factories)."""
    if task in BATTERY_TASKS:
        return {
            "rule_batteries_charge": lambda: RuleWithBatteries(env, -0.5),
            "rule_batteries_discharge": lambda: RuleWithBatteries(env, 0.5),
        }
    if task == "marl_der_arbitrage":
        zeros = {a: np.zeros(env.action_space(a).shape) for a in env.possible_agents}
        full = {a: env.action_space(a).high for a in env.possible_agents}
        return {
            "idle": lambda: ConstantPolicy(zeros),
            "discharge_full": lambda: ConstantPolicy(full),
        }
    return {}


class _Tracker:
    """Collects the per-step quantities of one episode (see the module docstring)."""

    def __init__(self, task: str, env: Any) -> None:
        self.task, self.env = task, env
        self.core = env.unwrapped.core if hasattr(env, "unwrapped") else env.core
        self.steps: list[dict[str, Any]] = []

    def __call__(self, obs: Any, action: Any, reward: Any, nxt: Any, te: Any, tr: Any, info: Any):
        row: dict[str, Any] = {"terms": np.asarray(info["reward_terms"], dtype=np.float64)}
        if "battery_p_mw" in info:
            row["bat_p"] = np.atleast_1d(np.asarray(info["battery_p_mw"], dtype=np.float64))
            row["soc"] = np.atleast_1d(np.asarray(info["soc"], dtype=np.float64))
        if "action_requested" in info:
            row["requested"] = np.asarray(info["action_requested"], dtype=np.float64).ravel()
        if "regulation_mwh" in info:
            row["regulation"] = float(info["regulation_mwh"])
            row["signed"] = float(np.sum(info["imbalance_mw"]))
            row["mismatch"] = abs(row["signed"])
        if self.task in AC_TASKS:
            state = self.core.runner.state
            row["q"] = np.asarray(state.prev_q_mvar[0], dtype=np.float64)
            row["vm"] = np.asarray(state.prev_vm_pu[0], dtype=np.float64)
            row["load"] = float(np.asarray(info["total_load_mw"]).ravel()[0])
        self.steps.append(row)


def run_policy(task: str, env: Any, policy: Any, days: list[int], seed: int) -> dict[str, Any]:
    """Rolls ``policy`` out on ``days`` (seed ``seed + i`` on the table's i-th day) and returns
    the per-episode returns, reward terms, costs and the step records of every episode."""
    index = {d: i for i, d in enumerate(evaluation_protocol(task, "test")["day_ids"])}
    returns, costs, episodes = [], [], []
    for day in days:
        tracker = _Tracker(task, env)
        rec = rollout(env, policy, day_id=day, seed=seed + index[day], on_step=tracker)
        returns.append(rec["return"])
        costs.append(rec["costs"])
        episodes.append(tracker.steps)
    terms = np.asarray([np.sum([s["terms"] for s in ep], axis=0) for ep in episodes])
    return {
        "returns": np.asarray(returns),
        "costs": np.asarray(costs),
        "terms": terms,
        "episodes": episodes,
    }


def _battery_lines(task: Any, out: dict[str, Any], dt: float) -> list[str]:
    eps = out["episodes"]
    p = np.asarray([[s["bat_p"] for s in ep] for ep in eps])  # [E, T, n_bat]
    soc = np.asarray([[s["soc"] for s in ep] for ep in eps])
    lo, hi = float(np.min(task.battery.soc_min)), float(np.max(task.battery.soc_max))
    at_bound = (soc <= lo + 1e-3) | (soc >= hi - 1e-3)
    throughput = np.abs(p).sum(axis=(1, 2)) * dt
    n_bat = p.shape[2]
    traded = (np.abs(p).sum(axis=(1, 2)) > 1e-6).sum()
    asked = ""
    if eps[0][0]["requested"].size == getattr(task, "n_gen", 0) + n_bat:  # units, then batteries
        req = np.asarray([[s["requested"][-n_bat:] for s in ep] for ep in eps])
        asked = f"mean asked power per battery {np.round(req.mean(axis=(0, 1)), 3).tolist()} MW, "
    return [
        f"batteries: throughput {throughput.mean():.2f} MWh/episode; episodes with a trade "
        f"{traded} of {len(eps)}; steps at a SOC bound {100 * at_bound.mean():.0f} %; "
        f"{asked}applied {np.round(p.mean(axis=(0, 1)), 3).tolist()} MW (+ discharge); "
        f"final SOC {np.round(soc[:, -1].mean(axis=0), 2).tolist()}"
    ]


def _generator_lines(task: Any, out: dict[str, Any]) -> list[str]:
    eps = out["episodes"]
    g = task.n_gen
    reg = np.asarray([sum(s["regulation"] for s in ep) for ep in eps])
    mis = np.asarray([np.mean([s["mismatch"] for s in ep]) for ep in eps])
    signed = np.asarray([np.mean([s["signed"] for s in ep]) for ep in eps])
    line = (
        f"generators: regulation {reg.mean():.1f} MWh/episode; mean |mismatch| "
        f"{mis.mean():.2f} MW (generation - load: {signed.mean():+.2f} MW on average)"
    )
    if g <= 10 and eps[0][0]["requested"].size >= g:  # one agent per unit, units first
        req = np.asarray([[s["requested"][:g] for s in ep] for ep in eps])  # [E, T, n_gen]
        line += (
            f"; mean output per unit {np.round(req.mean(axis=(0, 1)), 1).tolist()} MW "
            f"(marginal costs {np.round(task.marginal_cost, 1).tolist()} $/MWh)"
        )
    return [line]


def _reactive_lines(task: Any, out: dict[str, Any], dt: float, top: int = 6) -> list[str]:
    grid = task.grid
    q = np.asarray([[s["q"] for s in ep] for ep in out["episodes"]])  # [E, T, n_gen]
    vm = np.asarray([[s["vm"] for s in ep] for ep in out["episodes"]])
    above = np.maximum(q - grid.q_max_mvar, 0.0).sum(axis=1).mean(axis=0) * dt
    below = np.maximum(grid.q_min_mvar - q, 0.0).sum(axis=1).mean(axis=0) * dt
    beyond = above + below
    order = np.argsort(-beyond)[:top]
    parts = [
        f"gen_{i} (bus {int(grid.gen_bus[i]) + 1}) {beyond[i]:,.0f} "
        f"{'above q_max' if above[i] >= below[i] else 'below q_min'} "
        f"[{grid.q_min_mvar[i]:g}, {grid.q_max_mvar[i]:g}] Mvar, "
        f"mean q {q[:, :, i].mean():,.0f}, v {vm[:, :, i].mean():.3f}"
        for i in order
    ]
    # beyond the limits by load: the steps below and above the median system load
    load = np.asarray([[s["load"] for s in ep] for ep in out["episodes"]])
    step_beyond = (np.maximum(q - grid.q_max_mvar, 0.0) + np.maximum(grid.q_min_mvar - q, 0.0)).sum(
        axis=2
    )  # [E, T] Mvar
    light = load <= np.median(load)
    by_load = (
        f"    by load: {step_beyond[light].mean():,.0f} Mvar beyond on the lighter half of the "
        f"steps ({load[light].mean():,.0f} MW), {step_beyond[~light].mean():,.0f} on the heavier "
        f"({load[~light].mean():,.0f} MW)"
    )
    n_out = int((beyond > 1e-6).sum())
    share = beyond[order].sum() / max(beyond.sum(), 1e-12)
    return [
        f"reactive: {beyond.sum():,.0f} Mvarh/episode beyond the limits, "
        f"{above.sum():,.0f} above q_max and {below.sum():,.0f} below q_min, from {n_out} of "
        f"{len(beyond)} units; the top {top} ({100 * share:.0f} %):",
        *(f"      {p}" for p in parts),
        f"    voltage at the units' buses: mean {vm.mean():.3f} p.u. (set-points of the case: "
        f"mean {grid.vm_set_pu.mean():.3f}, range {grid.vm_set_pu.min():.3f}-"
        f"{grid.vm_set_pu.max():.3f})",
        by_load,
    ]


def report(task: str, env: Any, name: str, out: dict[str, Any], days: list[int]) -> None:
    """Prints one policy's lines: return, terms, costs against budgets, days over, score and
    what its agents do."""
    spec = env.task_spec
    flags = budget_flags(out["costs"], spec.constraint_names, spec)
    score = cmdp_score(task, out["returns"], flags["over_budget"], "test", day_ids=days)
    terms = ", ".join(
        f"{t} {v:,.1f}" for t, v in zip(spec.reward_terms, out["terms"].mean(0), strict=True)
    )
    budgets = spec.cost_thresholds
    over = out["costs"] > np.asarray([budgets.get(c, np.inf) for c in spec.constraint_names])
    cost = ", ".join(
        f"{c} {v:.4g}" + (f" (budget {budgets[c]:g}, over on {n} eps)" if c in budgets else "")
        for c, v, n in zip(spec.constraint_names, out["costs"].mean(0), over.sum(0), strict=True)
    )
    print(
        f"{name}: return {out['returns'].mean():,.1f} $/episode; budget-aware score {score:.3f}; "
        f"over budget on {100 * flags['over_budget_rate']:.0f} % of {len(days)} episodes\n"
        f"    terms/episode: {terms}\n    costs/episode: {cost}"
    )
    inner = env.unwrapped.core.task if hasattr(env, "unwrapped") else env.core.task
    dt = spec.dt_h
    lines: list[str] = []
    if "bat_p" in out["episodes"][0][0]:
        lines += _battery_lines(inner, out, dt)
    if "regulation" in out["episodes"][0][0]:
        lines += _generator_lines(inner, out)
    if task in AC_TASKS:
        lines += _reactive_lines(inner, out, dt)
    for line in lines:
        print(f"    {line}")


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=TASKS, required=True)
    parser.add_argument("--days", type=int, default=None, help="first N table days (default all)")
    parser.add_argument(
        "--policies", default=None, help="comma list (default: baselines and hand policies)"
    )
    parser.add_argument(
        "--run", action="append", default=[], help="a trained run folder (its best policy)"
    )
    args = parser.parse_args()

    protocol = evaluation_protocol(args.task, "test")
    days = [int(d) for d in protocol["day_ids"]][: args.days]
    env = make_env(args.task, split="test")
    hands = hand_policies(args.task, env)
    if args.policies is None:
        names = [n for n in ("random", "rule_based", "oracle") if args.task not in AC_TASKS]
        names += ["rule_based"] if args.task in AC_TASKS else []
        names += [n for n in hands if n != "idle"] + (["idle"] if "idle" in hands else [])
    else:
        names = [n for n in args.policies.split(",") if n]
    for name in names:
        policy = hands[name]() if name in hands else make_baseline_policy(name, env)
        out = run_policy(args.task, env, policy, days, protocol["seed"])
        report(args.task, env, name, out, days)
    for run_dir in args.run:
        from powerzoo.cli.runs import load_run

        trainer, model = load_run(run_dir)
        eval_env = trainer.make_eval_env("test", objective=True)
        out = run_policy(args.task, eval_env, trainer.policy(True), days, protocol["seed"])
        report(args.task, env, f"{run_dir} ({trainer.algorithm}, {model})", out, days)


if __name__ == "__main__":
    main()
