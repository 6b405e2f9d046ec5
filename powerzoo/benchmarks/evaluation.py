"""Roll policies out on single-agent envs and summarise returns and constraint costs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from powerzoo.benchmarks.policies import Policy

__all__ = ["rollout", "evaluate_days", "EpisodeRecord"]


class EpisodeRecord(dict):
    """One episode: ``return``, ``length``, ``costs`` (sum per constraint) and per-step ``trace``."""


def rollout(env: Any, policy: Policy, *, day_id: int | None = None, seed: int | None = None,
            trace_keys: Iterable[str] = ()) -> EpisodeRecord:
    """Run one episode of ``policy`` in ``env`` and return its :class:`EpisodeRecord`.

    ``trace_keys`` are info keys recorded at every step (for plots).
    """
    options = None if day_id is None else {"day_id": day_id}
    obs, info = env.reset(seed=seed, options=options)
    policy.reset()
    total, length, done = 0.0, 0, False
    costs = np.zeros(len(env.unwrapped.task_spec.constraint_names))
    trace: dict[str, list[Any]] = {k: [] for k in trace_keys}
    while not done:
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        total += reward
        length += 1
        costs += info["constraint_costs"]
        for k in trace:
            trace[k].append(info[k])
        done = terminated or truncated
    return EpisodeRecord(
        {"return": total, "length": length, "costs": costs, "day_id": info["day_id"],
         "trace": {k: np.asarray(v) for k, v in trace.items()}}
    )


def evaluate_days(env: Any, policy: Policy, day_ids: Iterable[int], seed: int = 0) -> dict[str, Any]:
    """Evaluate ``policy`` on the given split days: mean/std return, mean cost, violation rate."""
    records = [rollout(env, policy, day_id=int(d), seed=seed + i) for i, d in enumerate(day_ids)]
    returns = np.asarray([r["return"] for r in records])
    costs = np.stack([r["costs"] for r in records])
    names = env.unwrapped.task_spec.constraint_names
    return {
        "episodes": len(records),
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "mean_costs": dict(zip(names, costs.mean(axis=0).tolist(), strict=True)),
        "violation_rate": float(np.mean(costs.sum(axis=1) > 0.0)),
        "returns": returns,
    }
