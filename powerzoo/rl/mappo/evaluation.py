"""The evaluations of a ``MAPPOTrainer`` run: one row per evaluation, and the best policy kept.

The row (return, costs, per-agent returns, multipliers of ``-L`` runs) goes to the evaluation CSV
and TensorBoard; the best evaluated policy is written to ``evaluation/best_policy.npz``, and read
back, checked against the training env, by :func:`read_best_policy`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.envs.introspect import inspect_env
from powerzoo.fileio import CorruptFileError, read_or_corrupt, write_json
from powerzoo.rl import run_dir as rd

__all__ = [
    "BEST_POLICY_FILE",
    "budget_excess",
    "evaluate_now",
    "mean_costs_within",
    "rank",
    "read_best_policy",
]

BEST_POLICY_FILE = "best_policy.npz"


def read_best_policy(file: Path, env: Any) -> Any:
    """The exported policy in ``file``, refused if it lacks the observation normalisation the
    training ``env`` applies (the native trainer's statistics: the env's fixed affine map).

    Args:
        file: ``evaluation/best_policy.npz``.
        env: The run's training env.

    Returns:
        The :class:`~powerzoo.rl.mappo.policy.MAPPOPolicy`.

    Raises:
        CorruptFileError: The file is damaged, or lacks the statistics.
    """
    from powerzoo.rl.mappo.policy import MAPPOPolicy

    policy = read_or_corrupt(file, MAPPOPolicy.load)
    bare = [name for name, g in policy.groups.items() if g.obs_mid is None]
    if bare and inspect_env(env).obs_scaler is not None:
        raise CorruptFileError(
            file,
            f"no observation statistics for group(s) {', '.join(bare)}, but this run "
            "normalises observations (env.normalize in its config)",
        )
    return policy


def evaluate_now(trainer: Any, eval_env: Any, days: list[int]) -> dict[str, Any]:
    """Evaluate ``trainer`` (a ``MAPPOTrainer``) on ``days``; log the row, keep the best policy."""
    from powerzoo.benchmarks.evaluation import evaluate_days
    from powerzoo.rl.evaluation_log import evaluation_row, write_evaluation_csv

    ev = trainer.config.evaluation
    deterministic = True if ev is None else ev.deterministic
    policy = trainer.policy(deterministic)
    started = time.perf_counter()
    summary = evaluate_days(policy, eval_env, days, seed=trainer.config.seed)
    row = evaluation_row(summary, trainer.num_timesteps, time.perf_counter() - started)
    row.update({f"return_{a}": v for a, v in summary.get("mean_agent_returns", {}).items()})
    row.update(
        {
            f"lambda_{n}": float(v)
            for n, v in zip(trainer.cost_names, trainer.learner.multipliers, strict=True)
        }
    )
    if trainer.lagrangian:  # -L: within the budgets by the learners' own (mean-cost) check first
        row["days_over_budget"] = float(summary["over_budget_rate"])  # reported, not ranked
        row["budget_excess"] = budget_excess(
            summary["mean_costs"], trainer.cost_names, trainer.spec.cost_thresholds
        )
        row["feasible"] = mean_costs_within(
            summary["mean_costs"], trainer.cost_names, trainer.spec.cost_thresholds
        )
    best = max((rank(r) for r in trainer.evaluations), default=None)
    row["new_best"] = best is None or rank(row) > best
    trainer.evaluations.append(row)
    eval_dir = trainer.run_dir / rd.EVAL_DIR
    write_evaluation_csv(eval_dir, trainer.evaluations)
    if row["new_best"]:
        policy.save(eval_dir / BEST_POLICY_FILE)
        write_json(
            eval_dir / "best_model.json",
            {
                "timestep": row["timestep"],
                "mean_return": row["mean_return"],
                "day_ids": list(days),
                "seed": trainer.config.seed,
                "deterministic": deterministic,
                "model": BEST_POLICY_FILE,
            },
        )
    trainer._log(
        {
            f"eval/{k}": row[k]
            for k in ("mean_return", "std_return", "mean_length", "violation_rate")
        }
    )
    trainer._log({f"eval/cost_{n}": row[f"cost_{n}"] for n in summary["mean_costs"]})
    trainer._write_state("running")
    return row


def evaluate_at_start(trainer: Any, eval_env: Any, days: list[int]) -> dict[str, Any] | None:
    """Before the first iteration of a fresh run: evaluate the untrained policy (row 0, a
    candidate for the best policy) where :func:`~powerzoo.rl.algorithms.evaluates_at_start`
    says so for the run's algorithm and ``evaluation.at_start``. Returns the row, or ``None``."""
    from powerzoo.rl.algorithms import evaluates_at_start

    ev = trainer.config.evaluation
    if not evaluates_at_start(trainer.config.algorithm, None if ev is None else ev.at_start):
        return None
    return evaluate_now(trainer, eval_env, days)


def budget_excess(
    mean_costs: dict[str, float], names: Sequence[str], thresholds: dict[str, float | None]
) -> float:
    """How far the mean costs are over their budgets: the sum over ``names`` of
    ``max(cost / budget - 1, 0)`` (0 within every budget; costs without a budget left out)."""
    total = 0.0
    for name in names:
        budget = thresholds.get(name)
        if budget:
            total += max(float(mean_costs[name]) / float(budget) - 1.0, 0.0)
    return total


def mean_costs_within(
    mean_costs: dict[str, float], names: Sequence[str], thresholds: dict[str, float | None]
) -> bool:
    """Whether the mean episode costs of ``names`` keep their budgets by the check the -L
    learners train under and the score reads (:func:`~powerzoo.rl.mappo.lagrangian.within_budgets`,
    ``E[C_j] <= d_j`` with the cost tolerance); costs without a budget left out."""
    from powerzoo.rl.mappo.lagrangian import within_budgets

    budgeted = [n for n in names if thresholds.get(n) is not None]
    if not budgeted:
        return True
    return within_budgets(
        np.array([[float(mean_costs[n]) for n in budgeted]]),
        np.array([float(thresholds[n]) for n in budgeted]),
    )


def rank(row: dict[str, Any]) -> tuple[float, float, float]:
    """Order of evaluations for the best policy (``-L``): within the budgets by the mean-cost
    check first (``feasible``: the constraint the learner trains under and the score's verdict),
    then the smaller :func:`budget_excess` (among evaluations over budget, the one nearer its
    budgets: otherwise an early, unconstrained model wins on return), then return."""
    return (
        float(bool(row.get("feasible", True))),
        -float(row.get("budget_excess", 0.0)),
        float(row["mean_return"]),
    )
