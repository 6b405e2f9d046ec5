"""Train PPO on battery_arbitrage and report the normalised test score and the wall time.

    python benchmarks/train_battery.py          # 100k env steps, configs/battery_arbitrage.yaml
    python benchmarks/train_battery.py --timesteps 50000 --seeds 0 1 2

Normalised score: 0 = random policy, 1 = perfect-foresight oracle, on every test day
(``powerzoo/benchmarks/baselines.json``). The score is reported for the final model and for the
best model on the validation split.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from powerzoo.rl.config import TrainConfig
from powerzoo.rl.trainer import Trainer

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "battery_arbitrage.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--config", default=str(CONFIG))
    parser.add_argument(
        "--output-dir", default=None, help="keep run folders here (default: a temporary folder)"
    )
    args = parser.parse_args()
    base = TrainConfig.from_file(args.config)
    out = args.output_dir or tempfile.mkdtemp(prefix="powerzoo-train-battery-")
    print(
        f"{base.algorithm} on {base.task}, {args.timesteps:,} "
        f"env steps, {base.n_envs} envs, config {args.config}"
    )
    print(
        f"{'seed':>4} {'train s':>8} {'steps/s':>8} {'final $/day':>12} "
        f"{'score':>6} {'best $/day':>11} {'score':>6} {'soc_violation MWh/day':>22}"
    )
    scores = []
    for seed in args.seeds:
        config = base.model_copy(
            update={
                "seed": seed,
                "total_timesteps": args.timesteps,
                "episodes": None,
                "output_dir": out,
                "stop_conditions": [],
            }
        )
        trainer = Trainer(config)
        started = time.perf_counter()
        result = trainer.train()
        seconds = time.perf_counter() - started
        final = trainer.evaluate("test")
        best = Trainer.load(result.run_dir, model="best").evaluate("test")
        trainer.close()
        scores.append(final["normalized_score"])
        print(
            f"{seed:>4} {seconds:>8.1f} {result.num_timesteps / seconds:>8.0f} "
            f"{final['mean_return']:>12,.1f} {final['normalized_score']:>6.3f} "
            f"{best['mean_return']:>11,.1f} {best['normalized_score']:>6.3f} "
            f"{final['mean_costs']['soc_violation']:>22.1f}"
        )
    print(
        f"mean normalised score of the final models: {np.mean(scores):.3f} (target >= 0.5); "
        f"run folders in {out}"
    )


if __name__ == "__main__":
    main()
