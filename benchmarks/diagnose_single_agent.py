"""Why do trained policies miss the rule within the budgets on a single-agent task?

Rolls out baselines (random, rule_based, oracle), the task's hand policies and, optionally, a
short training run of the campaign's algorithm on the test days of the packaged baselines table,
and prints per policy: the mean return ($/day), the mean of each reward term, each constraint cost
against its per-episode budget, the share of days over budget, the budget-aware score against the
table's random and oracle rows (0 = random, 1 = oracle) and a few task quantities (energy traded,
curtailed, diesel, ...). The battery task also prints its price spreads against the round trip's
break-even.

    python benchmarks/diagnose_single_agent.py --task battery_arbitrage
    python benchmarks/diagnose_single_agent.py --task dso --policies rule_based,shift_only
    python benchmarks/diagnose_single_agent.py --task dc_microgrid_safe --train PPO-L \
        --timesteps 100000 --days 16
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import evaluation_protocol
from powerzoo.benchmarks.cmdp_score import cmdp_score
from powerzoo.benchmarks.evaluation import budget_flags, rollout
from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.envs.make import make_env

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS = ("battery_arbitrage", "dso", "dc_scheduling", "dc_microgrid", "dc_microgrid_safe", "tso")


class ConstantPolicy:
    """Applies one fixed action (the env's physical units) on every step."""

    def __init__(self, action: np.ndarray) -> None:
        self.action = np.asarray(action, dtype=np.float32)

    def reset(self) -> None:
        """Nothing to reset."""

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        """The fixed action."""
        return self.action


class VoltageFeedback:
    """``dso``: curtails ``fraction`` of every flexible load on the steps after one whose lowest
    voltage was below ``threshold_pu`` (p.u.), else nothing (observation entry 5 is v_min_pu)."""

    def __init__(self, n_actions: int, threshold_pu: float, fraction: float) -> None:
        self.curtail = np.tile([fraction, 0.0], n_actions // 2).astype(np.float32)
        self.idle = np.zeros(n_actions, dtype=np.float32)
        self.threshold_pu = threshold_pu

    def reset(self) -> None:
        """Nothing to reset."""

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        """Curtail after a low-voltage step."""
        return self.curtail if float(obs[5]) < self.threshold_pu else self.idle


class RuleWith:
    """The task's rule-based policy with some action entries replaced by fixed values."""

    def __init__(self, env: Any, fixed: dict[int, float]) -> None:
        self.rule = make_baseline_policy("rule_based", env)
        self.fixed = fixed

    def reset(self) -> None:
        """Resets the rule."""
        self.rule.reset()

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        """The rule's action with the fixed entries overwritten."""
        action = np.array(self.rule.act(obs, info), dtype=np.float32)
        for i, v in self.fixed.items():
            action[i] = v
        return action


def hand_policies(task: str, env: Any) -> dict[str, Callable[[], Any]]:
    """Simple hand policies of ``task`` (names -> factories), in the env's physical units."""
    n = env.action_space.shape[0]
    if task == "battery_arbitrage":
        return {"idle": lambda: ConstantPolicy(np.zeros(n))}
    if task == "dso":
        # shifting is free in the reward: defer half of every flexible load on every step
        shift = np.tile([0.0, 0.5], n // 2)
        return {
            "shift_only": lambda: ConstantPolicy(shift),
            "curtail_below_0.95": lambda: VoltageFeedback(n, 0.95, 0.5),
            "curtail_below_0.955": lambda: VoltageFeedback(n, 0.955, 0.5),
        }
    if task in ("dc_microgrid", "dc_microgrid_safe"):
        # the rule, but the diesel forced on at full output / the battery left idle
        return {
            "rule_diesel_full": lambda: RuleWith(env, {4: 2.5}),
            "rule_no_battery": lambda: RuleWith(env, {3: 0.0}),
            "rule_cool_18c": lambda: RuleWith(env, {2: 18.0}),
        }
    if task == "dc_scheduling":
        return {"rule_cool_32c": lambda: RuleWith(env, {2: 32.0})}
    if task == "tso":
        # every unit asked on at half its Pmax (the committed units' AGC balances the load)
        high = env.action_space.high
        half = np.where(np.arange(n) % 2 == 0, 0.5 * high, 1.0)
        return {"all_on_half": lambda: ConstantPolicy(half)}
    return {}


# per-episode task quantities: name -> (info key, reduction over the steps)
def _extras(task: str) -> dict[str, Callable[[list[dict[str, Any]]], float]]:
    def total(key: str, scale: float = 1.0, col: int | None = None) -> Callable[..., float]:
        def f(infos: list[dict[str, Any]]) -> float:
            vals = [np.asarray(i[key], dtype=np.float64) for i in infos]
            vals = [v[col] if col is not None else v for v in vals]
            return float(np.sum(np.abs(vals)) * scale)

        return f

    def mean(key: str, col: int | None = None) -> Callable[..., float]:
        def f(infos: list[dict[str, Any]]) -> float:
            vals = [np.asarray(i[key], dtype=np.float64) for i in infos]
            return float(np.mean([v[col] if col is not None else v for v in vals]))

        return f

    if task == "battery_arbitrage":
        return {"throughput_mwh": total("action_applied", 0.5)}
    if task == "dso":
        return {
            "curtailed_mwh": total("flex_curtailed_mwh"),
            "shifted_mwh": total("flex_shifted_mwh"),
        }
    if task == "dc_scheduling":
        return {
            "setpoint_c": mean("action_applied", 2),
            "cooling_mwh": total("cooling_mw", 0.5),
            "it_mwh": total("it_mw", 0.5),
        }
    if task in ("dc_microgrid", "dc_microgrid_safe"):
        dt = 5 / 60
        return {
            "setpoint_c": mean("action_applied", 2),
            "it_mwh": total("it_mw", dt),
            "cooling_mwh": total("cooling_mw", dt),
            "diesel_mwh": total("diesel_mw", dt),
            "battery_mwh": total("battery_p_mw", dt),
            "grid_mwh": total("grid_import_mw", dt),
            "dropped_gpuh": total("dropped_gpuh"),
        }
    if task == "tso":
        return {"starts": total("n_starts"), "committed": mean("n_committed")}
    return {}


def run_policy(task: str, env: Any, policy: Any, days: list[int], seed: int) -> dict[str, Any]:
    """Rolls ``policy`` out on ``days`` (seed ``seed + i`` on the table's i-th day; the policy
    keeps its own random stream across days, as in the table) and returns per-episode returns
    ($), reward terms, costs and task quantities."""
    extras = _extras(task)
    protocol = evaluation_protocol(task, "test")
    index = {d: i for i, d in enumerate(protocol["day_ids"])}
    returns, terms, costs, extra = [], [], [], []
    for day in days:
        infos: list[dict[str, Any]] = []
        record_info = infos.append
        rec = rollout(
            env,
            policy,
            day_id=day,
            seed=seed + index[day],
            on_step=lambda *a, keep=record_info: keep(a[-1]),
        )
        returns.append(rec["return"])
        costs.append(rec["costs"])
        terms.append(np.sum([np.asarray(i["reward_terms"], dtype=np.float64) for i in infos], 0))
        extra.append([f(infos) for f in extras.values()])
    return {
        "returns": np.asarray(returns),
        "terms": np.asarray(terms),
        "costs": np.asarray(costs),
        "extras": np.asarray(extra).reshape(len(days), len(extras)),
    }


def report(task: str, env: Any, name: str, out: dict[str, Any], days: list[int]) -> None:
    """Prints one policy's line: return, terms, costs against budgets, days over, score."""
    spec = env.task_spec
    flags = budget_flags(out["costs"], spec.constraint_names, spec)
    score = cmdp_score(task, out["returns"], flags["over_budget"], "test", day_ids=days)
    terms = ", ".join(
        f"{t} {v:,.1f}" for t, v in zip(spec.reward_terms, out["terms"].mean(0), strict=True)
    )
    budgets = spec.cost_thresholds
    cost = ", ".join(
        f"{c} {v:.4g}" + (f" (budget {budgets[c]:g})" if c in budgets else "")
        for c, v in zip(spec.constraint_names, out["costs"].mean(0), strict=True)
    )
    extra = ", ".join(
        f"{k} {v:,.2f}" for k, v in zip(_extras(task), out["extras"].mean(0), strict=True)
    )
    print(
        f"{name}: return {out['returns'].mean():,.1f} $/day; budget-aware score {score:.3f}; "
        f"over budget on {100 * flags['over_budget_rate']:.0f} % of {len(days)} days\n"
        f"    terms/day: {terms}\n    costs/day: {cost}\n    {extra}"
    )


def battery_spreads(env: Any, days: list[int]) -> None:
    """Prints the day's price spread (max - min, $/MWh) against the round trip's break-even."""
    params = env.unwrapped.task.params.battery
    eta_c, eta_d = params.charge_efficiency, params.discharge_efficiency
    wear = params.degradation_cost_per_mwh
    spreads, gaps = [], []
    for day in days:
        env.reset(seed=0, options={"day_id": day})
        prices = []
        done = False
        while not done:
            _, _, term, trunc, info = env.step(np.zeros(1, dtype=np.float32))
            prices.append(info["price_per_mwh"])
            done = term or trunc
        lo, hi = min(prices), max(prices)
        spreads.append(hi - lo)
        # a MWh bought at lo sells eta_c * eta_d MWh at hi, wear paid on both legs (grid side)
        gaps.append(eta_c * eta_d * hi - lo - wear * (1 + eta_c * eta_d))
    spreads, gaps = np.asarray(spreads), np.asarray(gaps)
    print(
        f"price spread (max - min) {spreads.mean():.1f} $/MWh on average (median "
        f"{np.median(spreads):.1f}); a round trip bought at the day's minimum and sold at its "
        f"maximum gains {gaps.mean():.1f} $/MWh bought on average after losses (eta "
        f"{eta_c * eta_d:.3f}) and wear ({wear:g} $/MWh each way); it pays on "
        f"{int((gaps > 0).sum())} of {len(days)} days"
    )


def trained_policy(task: str, algo: str, setting: str, timesteps: int, seed: int) -> Any:
    """Trains ``algo`` (PPO or PPO-L) for ``timesteps`` env steps with the campaign's settings
    (``campaigns/benchmark.yaml``) and returns the trainer (its ``policy()`` and
    ``make_eval_env``)."""
    from powerzoo.rl.trainer import Trainer

    kwargs: dict[str, Any] = {"output_dir": "/tmp/powerzoo_diagnose", "overwrite": True}
    reward = None if setting == "objective" else setting
    if algo == "PPO-L":
        kwargs.update(
            n_envs=64,
            env={"split": "train", "normalize": True},
            algorithm_kwargs={
                "n_steps": 48,
                "n_epochs": 10,
                "n_minibatches": 4,
                "learning_rate": 1e-3,
                "lambda_lr": 0.05,
            },
        )
        source: Any = task
    else:
        # the campaign's PPO rows: the task's preset configs/<task>.yaml, its reward overridden
        source = str(REPO_ROOT / "configs" / f"{task}.yaml")
        kwargs.update(env={"split": "train", "normalize": True, "reward": reward})
        kwargs["stop_conditions"] = []
    kwargs["evaluation"] = {"split": "val", "freq": max(timesteps // 4, 1), "episodes": 8}
    kwargs["checkpoint"] = None
    trainer = Trainer(source, algo, total_timesteps=timesteps, seed=seed, **kwargs)
    start = time.process_time()
    trainer.train()
    print(f"trained {algo}/{setting} {timesteps} steps in {time.process_time() - start:.0f} s CPU")
    return trainer


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=TASKS, required=True)
    parser.add_argument("--days", type=int, default=None, help="first N table days (default all)")
    parser.add_argument(
        "--policies", default=None, help="comma list (default: baselines and hand policies)"
    )
    parser.add_argument(
        "--train", default=None, help="also train PPO or PPO-L briefly", choices=("PPO", "PPO-L")
    )
    parser.add_argument("--setting", default="objective", choices=("objective", "penalized"))
    parser.add_argument("--timesteps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    protocol = evaluation_protocol(args.task, "test")
    days = [int(d) for d in protocol["day_ids"]][: args.days]
    env = make_env(args.task, split="test")
    hands = hand_policies(args.task, env)
    names = args.policies.split(",") if args.policies else ["random", "rule_based", "oracle"]
    if not args.policies:
        names += list(hands)
    if args.task == "battery_arbitrage":
        battery_spreads(env, days)
    for name in names:
        policy = hands[name]() if name in hands else make_baseline_policy(name, env)
        report(
            args.task, env, name, run_policy(args.task, env, policy, days, protocol["seed"]), days
        )
    if args.train:
        trainer = trained_policy(args.task, args.train, args.setting, args.timesteps, args.seed)
        eval_env = trainer.make_eval_env("test", objective=True)
        out = run_policy(args.task, eval_env, trainer.policy(), days, protocol["seed"])
        report(args.task, env, f"{args.train}/{args.setting} (final)", out, days)


if __name__ == "__main__":
    main()
