"""What acting with a trained SB3 model costs: ``model.predict`` against ``predict_action``.

Prints, per algorithm, the CPU microseconds of one action on one observation each way (the two
are checked equal first), and the CPU seconds of evaluating an untrained PPO policy on test days
of a single-agent task, and of training independent learners on a multi-agent task, with
``SB3Policy`` and the frozen agents acting either way. One torch thread; CPU time
(``time.process_time``), so other load on the machine moves the numbers little.

    python benchmarks/policy_speed.py
    python benchmarks/policy_speed.py --task battery_arbitrage --days 20 --calls 3000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


def _cpu_once(fn: Callable[[], Any]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def _cpu_s(fn: Callable[[], Any], rounds: int) -> float:
    """Lowest CPU seconds of ``rounds`` calls of ``fn``."""
    return min(_cpu_once(fn) for _ in range(rounds))


@contextmanager
def _through_predict() -> Iterator[None]:
    """Make ``predict_action`` fall back on ``model.predict`` for every model (the old path)."""
    from powerzoo.benchmarks import sb3_policy

    route = sb3_policy._route
    sb3_policy._route = lambda model: sb3_policy._PREDICT
    try:
        yield
    finally:
        sb3_policy._route = route


def per_call_us(task: str, calls: int, rounds: int) -> list[tuple[str, float, float]]:
    """(algorithm, predict µs, predict_action µs) per action on one observation."""
    from stable_baselines3 import A2C, PPO, SAC, TD3

    from powerzoo.benchmarks.sb3_policy import predict_action
    from powerzoo.rl import make_env

    env = make_env(task, "train", normalize=True, seed=0)
    obs = np.random.default_rng(0).uniform(-1.0, 1.0, size=(calls, *env.observation_space.shape))
    obs = obs.astype(env.observation_space.dtype)
    rows = []
    for cls in (PPO, A2C, SAC, TD3):
        model = cls("MlpPolicy", env, seed=0, device="cpu")
        for o in obs[:32]:
            expected = model.predict(o, deterministic=True)[0]
            if not np.array_equal(predict_action(model, o), expected):
                raise AssertionError(f"{cls.__name__}: predict_action differs from predict")
        old = _cpu_s(lambda m=model: [m.predict(o, deterministic=True) for o in obs], rounds)
        new = _cpu_s(lambda m=model: [predict_action(m, o) for o in obs], rounds)
        rows.append((cls.__name__, old / calls * 1e6, new / calls * 1e6))
    return rows


def evaluation_s(task: str, days: int, rounds: int) -> tuple[float, float]:
    """CPU seconds of evaluating an untrained PPO on ``days`` test days, (predict, new)."""
    from stable_baselines3 import PPO

    from powerzoo.benchmarks import SB3Policy, evaluate_days
    from powerzoo.rl import make_env

    env = make_env(task, "test", normalize=True, seed=0)
    model = PPO("MlpPolicy", env, seed=0, device="cpu")

    def run() -> float:
        return evaluate_days(SB3Policy(model), env, range(days), seed=0)["mean_return"]

    with _through_predict():
        old, old_return = _cpu_s(run, rounds), run()
    new, new_return = _cpu_s(run, rounds), run()
    if old_return != new_return:
        raise AssertionError(f"evaluation differs: {old_return} vs {new_return}")
    return old, new


def independent_learners_s(task: str, steps: int, rounds: int) -> tuple[float, float]:
    """CPU seconds of one round of independent PPO learners, ``steps`` per agent, (predict,
    new)."""
    from powerzoo.rl.sb3.marl.loops import train_independent_learners

    def run() -> None:
        train_independent_learners(task, rounds=1, steps_per_round=steps, seed=0, progress=False)

    run()  # imports and caches
    with _through_predict():
        old = _cpu_s(run, rounds)
    return old, _cpu_s(run, rounds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="battery_arbitrage", help="single-agent task")
    parser.add_argument("--multi-agent-task", default="marl_opf", help="multi-agent task")
    parser.add_argument("--calls", type=int, default=2000, help="actions timed per algorithm")
    parser.add_argument("--days", type=int, default=20, help="test days evaluated")
    parser.add_argument("--steps", type=int, default=256, help="IL env steps per agent")
    parser.add_argument("--rounds", type=int, default=3, help="repeats; the lowest is printed")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    print(f"one action on {args.task}, CPU µs (lowest of {args.rounds}):")
    print("| algorithm | predict | predict_action | speed-up |\n|---|---:|---:|---:|")
    for name, old, new in per_call_us(args.task, args.calls, args.rounds):
        print(f"| {name} | {old:.0f} | {new:.0f} | {old / new:.2f}x |")
    old, new = evaluation_s(args.task, args.days, args.rounds)
    print(f"\nPPO evaluated on {args.days} {args.task} test days: {old:.2f} s -> {new:.2f} s CPU")
    old, new = independent_learners_s(args.multi_agent_task, args.steps, args.rounds)
    print(
        f"independent PPO learners, {args.multi_agent_task}, one round of {args.steps} steps "
        f"per agent: {old:.2f} s -> {new:.2f} s CPU"
    )


if __name__ == "__main__":
    main()
