"""How ``marl_ev_v2g``'s baselines move with the price of vehicle-to-grid wear.

Usage::

    python benchmarks/v2g_wear_sensitivity.py                        # 7 test weeks, 4 wear prices
    python benchmarks/v2g_wear_sensitivity.py --weeks 35 --wear 7.5 20 40

The task charges V2G discharge the wear of every PowerZoo battery: ``degradation_cost_per_mwh``
(7.5 $/MWh) on each leg of the cycle, 16.4 $ per MWh discharged at the default efficiencies
(:attr:`powerzoo.devices.ev_fleet.EVFleetParams.v2g_wear_per_kwh`). A car pack with a shorter
cycle life wears dearer. This script re-runs idle, the rule and the oracle with the fleet's
``degradation_cost_per_mwh`` set to each of ``--wear`` ($/MWh per leg), on ``--weeks`` evenly
spread test weeks (episode ``i`` on week ``day_ids[i]``, reset with ``seed + i``, as the baselines
table), and prints per wear price: the wear per MWh discharged, each policy's mean return ($ per
week, summed over the sites), the oracle's lead over the rule, and the energy the cars give back
to the grid (MWh of V2G discharge per week, from ``info["ev_p_kw"]``, + = discharge).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import select_days
from powerzoo.benchmarks.evaluation import rollout
from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.devices.ev_fleet import EVFleetParams
from powerzoo.envs.introspect import task_of
from powerzoo.rl import make_env

TASK = "marl_ev_v2g"
POLICIES = ("idle", "rule_based", "oracle")
DEFAULT_WEAR = (7.5, 30.0, 60.0, 100.0)  # $/MWh per leg; 7.5 is the task's default


def wear_sensitivity(
    wear_per_mwh: float,
    n_weeks: int | None = 7,
    seed: int = 0,
    policies: tuple[str, ...] = POLICIES,
) -> dict[str, Any]:
    """Idle, rule and oracle of ``marl_ev_v2g`` with V2G wear ``wear_per_mwh`` ($/MWh per leg).

    Args:
        wear_per_mwh: The fleet's ``degradation_cost_per_mwh``.
        n_weeks: Test weeks, evenly spread (``None``: all 35).
        seed: Env seed of episode 0.
        policies: Baselines to run.

    Returns:
        ``{"wear_per_mwh_discharged": $/MWh, "weeks": n, policy: {"mean_return": $ per week,
        "returns": [...], "v2g_mwh_per_week": MWh}}``.
    """
    fleet = dataclasses.replace(EVFleetParams(), degradation_cost_per_mwh=wear_per_mwh)
    env = make_env(TASK, split="test", seed=seed, fleet=fleet)
    days = select_days(task_of(env).n_days, n_weeks)
    step_h = task_of(env).spec.dt_h
    out: dict[str, Any] = {
        "wear_per_mwh_discharged": fleet.v2g_wear_per_kwh * 1e3,
        "weeks": len(days),
    }
    for name in policies:
        policy = make_baseline_policy(name, env, seed)
        discharged = [0.0]

        def record(*step: Any, total: list[float] = discharged) -> None:
            p_kw = np.asarray(step[-1]["ev_p_kw"], dtype=float)
            total[0] += float(np.clip(p_kw, 0.0, None).sum()) * step_h / 1e3

        returns = [
            rollout(env, policy, day_id=d, seed=seed + i, on_step=record)["return"]
            for i, d in enumerate(days)
        ]
        out[name] = {
            "mean_return": float(np.mean(returns)),
            "returns": [float(r) for r in returns],
            "v2g_mwh_per_week": discharged[0] / len(days),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the table (module docstring); ``--json`` also writes the numbers."""
    parser = argparse.ArgumentParser(description="marl_ev_v2g's baselines against V2G wear.")
    parser.add_argument(
        "--wear", type=float, nargs="+", default=list(DEFAULT_WEAR), help="$/MWh per leg"
    )
    parser.add_argument("--weeks", type=int, default=7, help="test weeks, evenly spread")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.weeks < 1 or min(args.wear) < 0:
        parser.error("--weeks must be >= 1 and every --wear >= 0")
    header = (
        f"{'wear $/MWh leg':>14} {'$/MWh disch.':>12} {'idle':>10} {'rule':>10} {'oracle':>10} "
        f"{'oracle-rule':>11} {'rule V2G MWh':>12} {'oracle V2G MWh':>14}"
    )
    print(f"{TASK}, test split, $ per week (sum over sites), V2G MWh discharged per week")
    print(header + "\n" + "-" * len(header))
    rows = []
    for wear in args.wear:
        r = wear_sensitivity(wear, args.weeks, args.seed)
        rows.append({"wear_per_mwh": wear, **r})
        idle, rule, oracle = (r[p]["mean_return"] for p in POLICIES)
        v2g_rule, v2g_oracle = (r[p]["v2g_mwh_per_week"] for p in ("rule_based", "oracle"))
        print(
            f"{wear:>14.1f} {r['wear_per_mwh_discharged']:>12.1f} {idle:>10,.0f} {rule:>10,.0f} "
            f"{oracle:>10,.0f} {oracle - rule:>11,.0f} {v2g_rule:>12.2f} {v2g_oracle:>14.2f}",
            flush=True,
        )
    print(f"{rows[0]['weeks']} test weeks, evenly spread; seed {args.seed}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
