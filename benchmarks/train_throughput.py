"""SB3 training throughput: the native vector env against DummyVecEnv over single envs.

Usage: python benchmarks/train_throughput.py [--tasks battery_arbitrage dc_microgrid]
       [--algos PPO SAC] [--n-envs 64] [--sac-n-envs 64] [--timesteps 16384] [--repeats 2]
       [--seed 0] [--ppo-epochs 10]

Each run trains one SB3 model from scratch for a fixed budget of env steps, the way the Trainer
builds it: ``make_env(task, normalize=True)`` envs, SB3 ``VecNormalize`` (observations and
rewards), episode statistics (``VecMonitor`` on the native env, SB3's ``Monitor`` per env under
``DummyVecEnv``) and the Trainer's ``ConstraintCostCallback``. The two env paths get the same
seed, the same hyperparameters (``HYPERPARAMETERS``; the task's own ``gamma``, 0.999 on the
288-step dc_microgrid, as the Trainer uses it) and one torch thread. Runs are interleaved (native,
dummy, native, dummy, ...) and each runs in a fresh subprocess; the table shows the median.

Columns: ``steps/s`` is the budget over the wall time of ``model.learn`` (collection and
gradient updates); ``collect/s`` counts only the time inside rollout collection (env steps,
policy forward passes, wrappers, callbacks); ``speed-up`` is native over dummy. The gradient
updates cost the same on both paths, so the end-to-end speed-up shrinks as they grow
(``--ppo-epochs``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

HYPERPARAMETERS: dict[str, dict[str, Any]] = {
    # 64 steps x n_envs per rollout (4,096 with 64 envs), 4 minibatches of 1,024, 10 epochs
    "PPO": {"n_steps": 64, "batch_size": 1024, "n_epochs": 10, "learning_rate": 3e-4},
    # SB3 defaults (one gradient step of 256 samples per vector step, i.e. per n_envs env steps)
    "SAC": {
        "learning_starts": 1024,
        "batch_size": 256,
        "buffer_size": 200_000,
        "train_freq": 1,
        "gradient_steps": 1,
    },
}


def _measure(
    kind: str,
    algo: str,
    task: str,
    n_envs: int,
    timesteps: int,
    seed: int,
    overrides: dict[str, Any],
) -> dict[str, Any]:
    """One training run in this process; returns its timings."""
    import functools

    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from powerzoo.rl import make_env
    from powerzoo.rl.algorithms import algorithm_class
    from powerzoo.rl.sb3.callbacks import ConstraintCostCallback
    from powerzoo.rl.sb3.native_vec_env import make_native_vec_env
    from powerzoo.tasks import task_spec

    torch.set_num_threads(1)
    spec = task_spec(task)
    kwargs = {**HYPERPARAMETERS[algo], **overrides}
    kwargs["gamma"] = spec.gamma  # the task's own discount, as the Trainer uses it

    class RolloutTimer(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.seconds = 0.0
            self._started = 0.0

        def _on_rollout_start(self) -> None:
            self._started = time.perf_counter()

        def _on_rollout_end(self) -> None:
            self.seconds += time.perf_counter() - self._started

        def _on_step(self) -> bool:
            return True

    started = time.perf_counter()
    if kind == "native":
        venv = make_native_vec_env(task, n_envs, {"normalize": True}, seed=seed)
    else:
        venv = make_vec_env(
            functools.partial(make_env, task, normalize=True),
            n_envs=n_envs,
            seed=seed,
            vec_env_cls=DummyVecEnv,
        )
    venv = VecNormalize(venv, gamma=kwargs["gamma"])
    build_s = time.perf_counter() - started
    model = algorithm_class(algo)("MlpPolicy", venv, seed=seed, verbose=0, **kwargs)
    timer = RolloutTimer()
    started = time.perf_counter()
    model.learn(timesteps, callback=[ConstraintCostCallback(spec.constraint_names), timer])
    learn_s = time.perf_counter() - started
    venv.close()
    steps = int(model.num_timesteps)
    return {
        "kind": kind,
        "algo": algo,
        "task": task,
        "n_envs": n_envs,
        "steps": steps,
        "build_s": build_s,
        "learn_s": learn_s,
        "steps_per_s": steps / learn_s,
        "collect_per_s": steps / timer.seconds,
        "hyperparameters": kwargs,
    }


def _run_child(
    kind: str,
    algo: str,
    task: str,
    n_envs: int,
    timesteps: int,
    seed: int,
    overrides: dict[str, Any],
) -> dict[str, Any]:
    threads = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    args = json.dumps([kind, algo, task, n_envs, timesteps, seed, overrides])
    out = subprocess.run(
        [sys.executable, __file__, "--child", args],
        capture_output=True,
        text=True,
        env={**os.environ, **threads},
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{kind} {algo} {task} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=["battery_arbitrage", "dc_microgrid"])
    parser.add_argument("--algos", nargs="*", default=["PPO", "SAC"])
    parser.add_argument(
        "--n-envs", type=int, default=64, help="parallel envs of PPO (and the default of SAC)"
    )
    parser.add_argument(
        "--sac-n-envs", type=int, default=None, help="parallel envs of SAC (default: --n-envs)"
    )
    parser.add_argument("--timesteps", type=int, default=16384, help="env steps per training run")
    parser.add_argument(
        "--repeats", type=int, default=2, help="runs per path (interleaved); the median is shown"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ppo-epochs", type=int, default=None, help="PPO n_epochs (default 10, SB3's)"
    )
    parser.add_argument(
        "--json", default=None, help="also write every run's timings to this JSON file"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_measure(*json.loads(args.child))))
        return

    runs: list[dict[str, Any]] = []
    overrides: dict[str, dict[str, Any]] = {"PPO": {}, "SAC": {}}
    if args.ppo_epochs is not None:
        overrides["PPO"]["n_epochs"] = args.ppo_epochs
    header = (
        f"{'algo':<5} {'task':<18} {'envs':>4} {'path':<7} {'steps/s':>9} {'collect/s':>10} "
        f"{'learn s':>8} {'speed-up':>9} {'collect x':>10}"
    )
    print(header)
    print("-" * len(header))
    for algo in args.algos:
        n_envs = args.sac_n_envs if algo.upper() == "SAC" and args.sac_n_envs else args.n_envs
        for task in args.tasks:
            results: dict[str, list[dict[str, Any]]] = {"native": [], "dummy": []}
            for _ in range(args.repeats):
                for kind in ("native", "dummy"):
                    results[kind].append(
                        _run_child(
                            kind,
                            algo.upper(),
                            task,
                            n_envs,
                            args.timesteps,
                            args.seed,
                            overrides.get(algo.upper(), {}),
                        )
                    )
            runs += results["native"] + results["dummy"]
            med = {
                kind: {
                    key: statistics.median(r[key] for r in rs)
                    for key in ("steps_per_s", "collect_per_s", "learn_s")
                }
                for kind, rs in results.items()
            }
            for kind in ("native", "dummy"):
                m = med[kind]
                speed = (
                    (
                        f"{m['steps_per_s'] / med['dummy']['steps_per_s']:>8.1f}x "
                        f"{m['collect_per_s'] / med['dummy']['collect_per_s']:>9.1f}x"
                    )
                    if kind == "native"
                    else ""
                )
                print(
                    f"{algo.upper():<5} {task:<18} {n_envs:>4} {kind:<7} {m['steps_per_s']:>9,.0f} "
                    f"{m['collect_per_s']:>10,.0f} {m['learn_s']:>8.2f} {speed}",
                    flush=True,
                )
    if args.json:
        from pathlib import Path

        from powerzoo.fileio import write_json

        used = {algo: {**HYPERPARAMETERS[algo], **overrides[algo]} for algo in HYPERPARAMETERS}
        write_json(Path(args.json), {"hyperparameters": used, "runs": runs})


if __name__ == "__main__":
    main()
