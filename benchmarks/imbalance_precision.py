"""How precise must a learned dispatch be to keep the 1 MWh/day imbalance budget?

Runs the rule-based dispatch of a task whose units' setpoints are applied as they are (the
mismatch goes to the slack bus: ``marl_opf``, ``marl_uc``, ``opf_118``), with each unit's output
setpoint scaled by ``1 +/- e`` (sign drawn per unit and day, like the steady bias of a function
approximator), and prints per relative error ``e`` the mean episode costs (``power_imbalance``:
the energy beyond the task's regulation band) and the mean regulation energy within the band.

    python benchmarks/imbalance_precision.py marl_opf --days 6
"""

from __future__ import annotations

import argparse

import numpy as np

from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.envs.make import make_env


def mean_costs(
    task: str, rel_error: float, days: int, seed: int = 0
) -> tuple[np.ndarray, float, tuple[str, ...]]:
    """Mean per-episode constraint costs (task units), mean regulation energy within the band
    (MWh) and the cost names, of the biased rule on ``days`` test days."""
    env = make_env(task, split="test")
    rule = make_baseline_policy("rule_based", env)
    rng = np.random.default_rng(seed)
    totals, regulation = [], []
    for day in range(days):
        obs, info = env.reset(seed=day, options={"day_id": day})
        rule.reset()
        agents = list(obs)
        bias = {a: 1.0 + rel_error * rng.choice([-1.0, 1.0]) for a in agents}
        total, within, done = 0.0, 0.0, False
        while not done:
            action = {a: np.array(v, dtype=np.float64) for a, v in rule.act(obs, info).items()}
            for a in agents:
                action[a][0] *= bias[a]  # the output setpoint (MW) is the first action
            obs, _, terminated, truncated, info = env.step(action)
            total = total + np.asarray(info[agents[0]]["constraint_costs"], dtype=np.float64)
            within += float(info[agents[0]].get("regulation_mwh", 0.0))
            done = any(terminated.values()) or any(truncated.values())
        totals.append(total)
        regulation.append(within)
    return np.mean(totals, axis=0), float(np.mean(regulation)), env.task_spec.constraint_names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", nargs="?", default="marl_opf")
    parser.add_argument("--days", type=int, default=6)
    args = parser.parse_args()
    for rel in (0.0, 1e-4, 1e-3, 2.5e-3, 1e-2):
        costs, regulation, names = mean_costs(args.task, rel, args.days)
        shown = ", ".join(f"{n} {c:.3f}" for n, c in zip(names, costs, strict=True))
        print(
            f"{args.task} relative setpoint error {rel:g}: mean costs/episode {shown}; "
            f"regulation within the band {regulation:.3f} MWh/episode"
        )


if __name__ == "__main__":
    main()
