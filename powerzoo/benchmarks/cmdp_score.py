"""The budget-aware score of the baselines table: a policy cannot buy score by breaking budgets.

Every task is a constrained MDP: a reward (the objective, $) and constraint costs with
per-episode budgets (``spec.cost_thresholds``). The plain normalised score
(:func:`~powerzoo.benchmarks.baselines.normalized_score`) compares mean returns only, so a policy
that earns more by overloading lines or emptying a battery past its bounds scores above the
oracle. The CMDP score compares day by day on the table's episodes instead:

* the gain of episode ``i`` is ``g_i = R_i - R_random_i`` ($, the same start day and seed);
* an episode over its budgets keeps at most a loss: ``g_i <- min(g_i, 0)``;
* score ``= mean_i g_i / mean_i g_ref_i``, with ``g_ref`` the reference policy's gains (the
  oracle, else the best non-random baseline), clipped the same way.

A policy within budget on every day scores exactly its plain normalised score; one that is over
budget every day scores at most 0, however much it earns. Raw returns and each cost sit beside the
score in every report (as constrained-RL benchmarks report them): the score is a reading of them,
not a replacement.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from powerzoo.benchmarks.baselines import baseline_rows, evaluation_protocol, reference_policy

__all__ = ["budget_clipped_gains", "cmdp_score_of_gains", "cmdp_score", "cmdp_score_or_none"]


def budget_clipped_gains(
    returns: Sequence[float] | np.ndarray,
    baseline_returns: Sequence[float] | np.ndarray,
    over_budget: Sequence[bool] | np.ndarray | None = None,
) -> np.ndarray:
    """Per-episode gains ``returns - baseline_returns`` ($), with an over-budget episode's gain
    cut to ``min(gain, 0)``; ``over_budget=None``: every episode within budget."""
    r = np.asarray(returns, dtype=np.float64)
    base = np.asarray(baseline_returns, dtype=np.float64)
    if r.shape != base.shape or r.ndim != 1 or r.size == 0:
        raise ValueError(
            f"returns and baseline returns must be equal-length non-empty lists, got "
            f"{r.shape} and {base.shape}"
        )
    gains = r - base
    if over_budget is None:
        return gains
    over = np.asarray(over_budget, dtype=bool)
    if over.shape != r.shape:
        raise ValueError(f"over_budget has shape {over.shape}, expected {r.shape}")
    return np.where(over, np.minimum(gains, 0.0), gains)


def cmdp_score_of_gains(gains: np.ndarray, reference_gains: np.ndarray) -> float:
    """``mean(gains) / mean(reference_gains)`` (both from :func:`budget_clipped_gains`)."""
    ref = float(np.mean(reference_gains))
    if not ref > 0.0:
        raise ValueError(
            f"the reference policy gains {ref:.6g} $ per episode over random within its budgets; "
            "a score needs a positive reference gain"
        )
    return float(np.mean(gains)) / ref


def cmdp_score(
    task: str,
    returns: Sequence[float] | np.ndarray,
    over_budget: Sequence[bool] | np.ndarray | None,
    split: str = "test",
    day_ids: Sequence[int] | None = None,
) -> float:
    """CMDP score (module docstring) of per-episode ``returns`` ($ of the system, as
    :func:`~powerzoo.benchmarks.evaluation.evaluate_days` reports them) and ``over_budget``
    flags, on the baselines table's episodes of ``task`` / ``split``.

    ``returns[i]`` must be the episode of the table's ``day_ids[i]`` and seed ``seed + i``
    (:func:`~powerzoo.benchmarks.baselines.evaluation_protocol`);
    :func:`~powerzoo.benchmarks.evaluation.evaluate_days` gives both lists
    (``summary["returns"]``, ``summary["over_budget"]``). Raises ``ValueError`` when the table has
    no rows for the task, a different number of episodes, or no per-episode budget flags for the
    reference policy.

    Args:
        task: Registered task name.
        returns: Per-episode system returns ($).
        over_budget: Per-episode flags (``True``: a selected cost over its budget); ``None``: none.
        split: The table's split.
        day_ids: Score on these of the table's start days only (``returns[i]`` is the episode of
            ``day_ids[i]``, with the table's seed for that day); ``None``: every table day.

    Returns:
        The budget-aware score (0 = random, 1 = the reference policy).
    """
    rows = baseline_rows(task, split)
    if "random" not in rows:
        raise ValueError(f"no random baseline for {task!r} on {split!r}")
    if day_ids is not None:
        table_days = [int(d) for d in evaluation_protocol(task, split)["day_ids"]]
        missing = [int(d) for d in day_ids if int(d) not in table_days]
        if missing:
            raise ValueError(f"{task!r} on {split!r}: days {missing} are not in the table")
        index = [table_days.index(int(d)) for d in day_ids]
        rows = {
            name: {
                **row,
                **{
                    key: np.asarray(row[key])[index]
                    for key in ("returns", "over_budget")
                    if row.get(key) is not None
                },
            }
            for name, row in rows.items()
        }
    random_returns = rows["random"]["returns"]
    if len(returns) != len(random_returns):
        raise ValueError(
            f"{task!r} on {split!r}: the table has {len(random_returns)} episodes, got "
            f"{len(returns)} returns; evaluate on evaluation_protocol(task, split)"
        )
    reference = rows[reference_policy(rows)]
    if reference.get("over_budget") is None:
        raise ValueError(
            f"the table's {reference['policy']!r} row of {task!r} has no per-episode budget "
            "flags; recompute it with benchmarks/compute_baselines.py"
        )
    gains = budget_clipped_gains(returns, random_returns, over_budget)
    ref_gains = budget_clipped_gains(reference["returns"], random_returns, reference["over_budget"])
    return cmdp_score_of_gains(gains, ref_gains)


def cmdp_score_or_none(
    task: str, summary: dict, days: Sequence[int], seed: int, split: str = "test"
) -> float | None:
    """:func:`cmdp_score` of an ``evaluate_days`` summary run on ``days`` with ``seed``, or
    ``None`` when those are not the table's episodes or the table cannot score the task."""
    try:
        protocol = evaluation_protocol(task, split)
        if [int(d) for d in protocol["day_ids"]] != [int(d) for d in days]:
            return None
        if int(protocol["seed"]) != int(seed):
            return None
        return cmdp_score(task, summary["returns"], summary.get("over_budget"), split)
    except (ValueError, KeyError, FileNotFoundError):
        return None
