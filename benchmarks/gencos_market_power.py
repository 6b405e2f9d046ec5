"""Market power of the ``gencos_bidding`` baselines: prices and price-cost margins per policy.

Usage::

    python benchmarks/gencos_market_power.py                       # test split, every test day
    python benchmarks/gencos_market_power.py --splits test demand_shift renewable_shock --days 20

Same episodes as the baseline table (``make_env(task, split=split, seed=seed)``, episode ``i``
on split day ``day_ids[i]`` reset with ``seed + i``, the random policy one stream), for the
policies random, rule_based (myopic best response) and truthful (markup 0). Per policy:

* team profit: $ per day, summed over the five companies;
* mean LMP: load-weighted over buses and steps [$/MWh];
* price / competitive: mean LMP over that of truthful bidding on the same steps (the loads are
  exogenous, so truthful bidding gives the competitive price of the same step);
* Lerner index: ``sum p (LMP - mc) / sum p LMP`` over dispatched units and steps (``mc`` the
  true marginal cost); price-cost ratio: ``sum p LMP / sum p mc``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from powerzoo.benchmarks.baselines import select_days
from powerzoo.benchmarks.evaluation import rollout
from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.envs.introspect import task_of
from powerzoo.rl import make_env

TASK = "gencos_bidding"
POLICIES = ("random", "rule_based", "truthful")


def market_power(
    split: str = "test", n_days: int | None = None, seed: int = 0
) -> dict[str, dict[str, float]]:
    """Summary per policy (module docstring) on ``n_days``
    evenly spread days of ``split`` (``None``: all)."""
    out: dict[str, dict[str, float]] = {}
    lmp_by_policy: dict[str, np.ndarray] = {}
    for name in POLICIES:
        env = make_env(TASK, split=split, seed=seed)
        task = task_of(env)
        days = select_days(task.n_days, n_days)
        policy = make_baseline_policy(name, env, seed)
        steps: list[tuple[float, float, float, float, float]] = []
        c1, c2, bus = task.case.gen_c1_per_mwh, task.case.gen_c2_per_mw2h, task.case.gen_bus

        def record(
            obs,
            action,
            reward,
            next_obs,
            terminated,
            truncated,
            info,
            steps=steps,
            c1=c1,
            c2=c2,
            bus=bus,
        ):
            p = np.asarray(info["gen_p_mw"], dtype=float)
            lmp = np.asarray(info["lmp_per_mwh"], dtype=float)[bus]
            load = float(info["total_load_mw"])
            steps.append(
                (
                    float(info["mean_lmp_per_mwh"]) * load,
                    load,
                    float(p @ lmp),
                    float(p @ (c1 + 2 * c2 * p)),
                    float(np.sum(reward)),
                )
            )

        for i, day in enumerate(days):
            rollout(env, policy, day_id=day, seed=seed + i, on_step=record)
        rows = np.asarray(steps)
        lmp_by_policy[name] = rows[:, 0] / rows[:, 1]
        paid, valued = rows[:, 2].sum(), rows[:, 3].sum()
        out[name] = {
            "days": len(days),
            "team_profit_per_day": float(rows[:, 4].sum() / len(days)),
            "mean_lmp_per_mwh": float(rows[:, 0].sum() / rows[:, 1].sum()),
            "lerner_index": float((paid - valued) / paid),
            "price_cost_ratio": float(paid / valued),
        }
    for name in POLICIES:
        out[name]["price_over_competitive"] = (
            out[name]["mean_lmp_per_mwh"] / out["truthful"]["mean_lmp_per_mwh"]
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Market power of the gencos_bidding baselines.")
    parser.add_argument("--splits", nargs="+", default=["test"])
    parser.add_argument(
        "--days", type=int, default=None, help="days per split, evenly spread (default: all)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--json", type=Path, default=None, help="also write the numbers to this file"
    )
    args = parser.parse_args(argv)
    results = {}
    header = (
        f"{'split':<16} {'policy':<11} {'days':>4} {'profit $/day':>13} {'mean LMP':>9} "
        f"{'x compet.':>9} {'Lerner':>7} {'P/MC':>6}"
    )
    print(header + "\n" + "-" * len(header))
    for split in args.splits:
        results[split] = market_power(split, args.days, args.seed)
        for name, r in results[split].items():
            print(
                f"{split:<16} {name:<11} {r['days']:>4d} {r['team_profit_per_day']:>13,.0f} "
                f"{r['mean_lmp_per_mwh']:>9.2f} {r['price_over_competitive']:>9.3f} "
                f"{r['lerner_index']:>7.3f} {r['price_cost_ratio']:>6.3f}"
            )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
