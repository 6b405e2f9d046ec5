"""The per-run score: feasibility first, then performance between the best rule and the oracle.

A **run** is one algorithm x task x seed, evaluated on the task's test episodes (the baselines
table's days, :func:`~powerzoo.benchmarks.baselines.evaluation_protocol`). Its score has two
parts, read in this order:

**Feasibility.** Two readings of the per-episode budgets ``d`` (``spec.cost_thresholds`` of the
selected constraints, each in its physical unit per episode), both through
:func:`~powerzoo.benchmarks.evaluation.budget_flags` with its tolerance
(:data:`~powerzoo.benchmarks.evaluation.COST_TOLERANCE`):

* ``within_budget``: the run's **mean cost** of every budgeted constraint is within its budget,
  ``E[C_j] <= d_j`` (the constraint the -L learners train under). This is the run's verdict;
* ``feasibility``: the share of its test episodes within every budget (the chance reading,
  reported beside it), and ``max_cost_ratio``, the largest ``E[C_j] / d_j``, with its seed x
  block interval: a run within budget whose interval reaches past 1 keeps the budget on the
  mean, but not robustly.

**Performance.** ``(R - R_anchor) / (R_oracle - R_anchor)``, with ``R`` the run's mean return
($ per episode) and the baselines' means on the same days. The **anchor** is the non-learning
baseline (idle, naive or rule-based, :data:`ANCHOR_POLICIES`) with the highest mean return among
those whose mean cost keeps the budgets by the same definition as ``within_budget``; when none
keeps them, the one with the highest mean return, flagged ``anchor_within_budget = False``. No
floor and no clip: 0 is the anchor, 1 the oracle, below 0 worse than the anchor.

A task without an oracle row, or whose oracle does not beat the anchor (``R_oracle <= R_anchor``:
no headroom), has no performance scale (``scale = "gain"``, ``performance = None``): its runs are
read on the **gain** over the anchor, ``R - R_anchor`` in $ per episode, and that gain in % of the
anchor's |mean return|. The **headroom** ``R_oracle - R_anchor`` is also given in % of the
oracle's |mean return|; under :data:`MIN_HEADROOM_PCT` the task has no learnable headroom
(``learnable_headroom = False``): a performance on it measures noise in a tiny denominator and
belongs out of headline aggregates.

**Optimality gap** (cost tasks only: tasks whose oracle's return is negative on every episode,
i.e. the return is minus a cost): ``100 (R_oracle - R) / |R_oracle|``, the run's extra cost in %
of the oracle's. ``None`` elsewhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import baseline_rows, evaluation_protocol
from powerzoo.benchmarks.budget_snapshot import TaskBudgets, budgets_of
from powerzoo.benchmarks.evaluation import budget_flags
from powerzoo.benchmarks.resampling import SeedBlockResamples, episode_blocks, paired_difference
from powerzoo.benchmarks.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    percentile_interval,
)

__all__ = [
    "ANCHOR_POLICIES",
    "MIN_HEADROOM_PCT",
    "ORACLE_POLICY",
    "RULE_POLICY",
    "TaskReference",
    "task_reference",
    "mean_within_budget",
    "budget_ratios",
    "performance",
    "oracle_gap_pct",
    "score_runs",
]

ANCHOR_POLICIES = ("idle", "naive", "rule_based")
"""The non-learning baselines an anchor is chosen from (module docstring)."""
ORACLE_POLICY = "oracle"
RULE_POLICY = "rule_based"
MIN_HEADROOM_PCT = 5.0
"""A task whose oracle beats its anchor by less than this (% of the oracle's |mean return|) has
no learnable headroom: its performance is defined but not worth aggregating."""


def _budgets_or_empty(budgets: TaskBudgets | None) -> TaskBudgets:
    return budgets if budgets is not None else TaskBudgets((), {})


def mean_within_budget(
    costs: np.ndarray, cost_names: Sequence[str], budgets: TaskBudgets | None
) -> bool:
    """Whether the mean over episodes of ``costs`` [episodes, n_costs] (each cost's physical
    unit per episode, named ``cost_names``) keeps every budget of ``budgets``: ``E[C_j] <= d_j``
    within :data:`~powerzoo.benchmarks.evaluation.COST_TOLERANCE`, the test
    :func:`~powerzoo.benchmarks.evaluation.budget_flags` applies to one episode. No budgets:
    ``True``."""
    c = np.asarray(costs, dtype=np.float64).reshape(-1, len(cost_names))
    flags = budget_flags(c.mean(axis=0)[None, :], cost_names, _budgets_or_empty(budgets))
    return not bool(flags["over_budget"][0])


def budget_ratios(
    costs: np.ndarray, cost_names: Sequence[str], budgets: TaskBudgets | None
) -> dict[str, float]:
    """``{constraint: E[C_j] / d_j}`` of every budgeted constraint among ``cost_names`` (mean of
    ``costs`` [episodes, n_costs] over episodes; ``inf`` for a positive mean against a zero
    budget, 0 for a zero mean)."""
    c = np.asarray(costs, dtype=np.float64).reshape(-1, len(cost_names))
    out = {}
    for j, name in enumerate(cost_names):
        budget = _budgets_or_empty(budgets).budget(name)
        if budget is None:
            continue
        out[name] = float(_cost_ratio(c[:, j].mean(), budget))
    return out


def _cost_ratio(mean: float | np.ndarray, budget: float) -> np.ndarray:
    """``E[C] / d`` of mean cost(s) ``mean`` against ``budget``; against a zero budget ``inf``
    for a positive mean, 0 for a zero one."""
    mean = np.asarray(mean, dtype=np.float64)
    return mean / budget if budget > 0 else np.where(mean > 0, np.inf, 0.0)


_HUGE_RATIO = 1e300  # stands for inf in a percentile, which cannot interpolate between infs


def _cost_ratio_interval(
    costs: np.ndarray,
    cost_names: Sequence[str],
    budgets: TaskBudgets | None,
    resamples: SeedBlockResamples,
    confidence: float,
) -> tuple[float | None, float | None]:
    """The percentile interval of the largest ``E[C_j] / d_j`` (as :func:`budget_ratios`) over
    the seed x block ``resamples`` of a run's ``costs`` [seeds, days, n_costs]; ``(None,
    None)`` without a budget. A positive mean against a zero budget is ``inf``."""
    ratios = []
    for j, name in enumerate(cost_names):
        budget = _budgets_or_empty(budgets).budget(name)
        if budget is None:
            continue
        ratios.append(_cost_ratio(resamples.mean(costs[:, :, j]), budget))
    if not ratios:
        return None, None
    largest = np.minimum(np.max(ratios, axis=0), _HUGE_RATIO)
    low, high = percentile_interval(largest, confidence)
    return (np.inf if low >= _HUGE_RATIO else low), (np.inf if high >= _HUGE_RATIO else high)


@dataclasses.dataclass(frozen=True)
class TaskReference:
    """What a run of one task is scored against: the baselines table's episodes and the budgets.

    Attributes:
        task: Task name.
        split: Split of the table's rows.
        day_ids: The protocol's split day of each episode.
        protocol_seed: The protocol's env seed of episode 0 (episode ``i``: ``+ i``).
        budgets: The budgets scored against (:func:`~powerzoo.benchmarks.budget_snapshot.
            budgets_of`: a campaign's pinned ones where pinned).
        returns: Each baseline's return on each episode ($ per episode) [D].
        within: Whether each baseline's mean cost keeps the budgets.
        anchor: The anchor policy (module docstring).
        cost_task: Whether the task's return is minus a cost (module docstring).
    """

    task: str
    split: str
    day_ids: tuple[int, ...]
    protocol_seed: int
    budgets: TaskBudgets
    returns: Mapping[str, np.ndarray]
    within: Mapping[str, bool]
    anchor: str
    cost_task: bool

    @property
    def anchor_within_budget(self) -> bool:
        """Whether the anchor's mean cost keeps the budgets."""
        return self.within[self.anchor]

    def mean_return(self, policy: str) -> float:
        """Mean return of baseline ``policy`` ($ per episode)."""
        return float(np.mean(self.returns[policy]))

    @property
    def has_oracle(self) -> bool:
        """Whether the table has an oracle row for the task."""
        return ORACLE_POLICY in self.returns

    @property
    def headroom(self) -> float | None:
        """``R_oracle - R_anchor`` ($ per episode); ``None`` without an oracle."""
        if not self.has_oracle:
            return None
        return self.mean_return(ORACLE_POLICY) - self.mean_return(self.anchor)

    @property
    def headroom_pct(self) -> float | None:
        """:attr:`headroom` in % of the oracle's |mean return| (``None`` without an oracle or
        when that is 0)."""
        scale = abs(self.mean_return(ORACLE_POLICY)) if self.has_oracle else 0.0
        return None if self.headroom is None or scale == 0 else 100.0 * self.headroom / scale

    @property
    def learnable_headroom(self) -> bool:
        """Whether :attr:`headroom_pct` is at least :data:`MIN_HEADROOM_PCT`."""
        return self.headroom_pct is not None and self.headroom_pct >= MIN_HEADROOM_PCT

    @property
    def scale(self) -> str:
        """``"oracle"`` (performance between anchor and oracle) or ``"gain"`` (no oracle, or no
        headroom: runs read on their gain over the anchor)."""
        return "oracle" if self.headroom is not None and self.headroom > 0 else "gain"


def task_reference(task: str, split: str = "test") -> TaskReference:
    """The :class:`TaskReference` of ``task`` on ``split`` from the baselines table in use
    (:func:`~powerzoo.benchmarks.baselines.baseline_table`) and the budgets in use.

    Raises ``ValueError`` when the table has no rows for the task or none of
    :data:`ANCHOR_POLICIES`.

    Args:
        task: A task name of the table.
        split: The split of its rows.

    Returns:
        The reference.
    """
    rows = baseline_rows(task, split)
    protocol = evaluation_protocol(task, split)
    budgets = _budgets_or_empty(budgets_of(task))
    returns = {p: np.asarray(r["returns"], dtype=np.float64) for p, r in rows.items()}
    within = {
        p: mean_within_budget(
            np.asarray([list(r["mean_costs"].values())], dtype=np.float64),
            list(r["mean_costs"]),
            budgets,
        )
        for p, r in rows.items()
    }
    candidates = [p for p in ANCHOR_POLICIES if p in rows]
    if not candidates:
        raise ValueError(
            f"the baselines table has none of {', '.join(ANCHOR_POLICIES)} for {task!r} on "
            f"{split!r}: no anchor to score against"
        )
    pool = [p for p in candidates if within[p]] or candidates
    anchor = max(pool, key=lambda p: float(np.mean(returns[p])))
    oracle = returns.get(ORACLE_POLICY)
    return TaskReference(
        task=task,
        split=split,
        day_ids=tuple(int(d) for d in protocol["day_ids"]),
        protocol_seed=int(protocol["seed"]),
        budgets=budgets,
        returns=returns,
        within=within,
        anchor=anchor,
        cost_task=bool(oracle is not None and np.all(oracle < 0.0)),
    )


def performance(mean_return: float | np.ndarray, ref: TaskReference) -> float | None:
    """``(R - R_anchor) / (R_oracle - R_anchor)`` of a mean return ``R`` ($ per episode; module
    docstring); ``None`` when ``ref.scale`` is ``"gain"``."""
    if ref.scale != "oracle":
        return None
    anchor = ref.mean_return(ref.anchor)
    return float((np.asarray(mean_return) - anchor) / (ref.mean_return(ORACLE_POLICY) - anchor))


def oracle_gap_pct(mean_return: float | np.ndarray, ref: TaskReference) -> float | None:
    """``100 (R_oracle - R) / |R_oracle|``: the extra cost of mean return ``R`` ($ per episode)
    in % of the oracle's cost, on a cost task (module docstring); ``None`` elsewhere."""
    if not ref.cost_task:
        return None
    oracle = ref.mean_return(ORACLE_POLICY)
    return float(100.0 * (oracle - np.asarray(mean_return)) / abs(oracle))


def _paired_columns(prefix: str, paired: dict[str, Any] | None) -> dict[str, Any]:
    keys = ("diff", "ci_low", "ci_high", "pct", "seeds_better")
    names = ("diff", "diff_ci_low", "diff_ci_high", "diff_pct", "seeds_better")
    return {
        f"{prefix}_{n}": None if paired is None else paired[k]
        for k, n in zip(keys, names, strict=True)
    }


def score_runs(
    returns: np.ndarray,
    costs: np.ndarray,
    cost_names: Sequence[str],
    ref: TaskReference,
    *,
    blocks: Sequence[int] | np.ndarray | None = None,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Score the runs of one algorithm on one task (module docstring): one run per seed, each on
    the protocol's episodes of ``ref``.

    Intervals are the seed x test block bootstrap of :mod:`powerzoo.benchmarks.resampling`;
    paired differences are per day against the anchor and the rule-based baseline. The
    performance and the optimality gap are affine in the mean return with the table's constants
    (anchor and oracle means over all protocol days), so their intervals are those of the paired
    difference against the anchor (resp. the oracle) on that scale.

    Args:
        returns: Return of each seed on each protocol episode [S, D] ($ per episode).
        costs: Cost of each seed on each episode [S, D, K] (each constraint's unit per episode).
        cost_names: The K constraint names of ``costs``.
        ref: The task's reference (:func:`task_reference`).
        blocks: Test block of each episode [D] (default: :func:`~powerzoo.benchmarks.
            resampling.episode_blocks` of the protocol's days).
        n_resamples: Bootstrap resamples.
        confidence: Level of the intervals.
        seed: Seed of the resamples.

    Returns:
        Flat columns: the anchor and oracle (``anchor``, ``anchor_return``,
        ``anchor_within_budget``, ``oracle_return``, ``headroom``, ``headroom_pct``,
        ``learnable_headroom``, ``scale``,
        ``cost_task``); pooled over the runs with ``_ci_low`` / ``_ci_high``: ``mean_return``,
        ``feasibility``, ``performance``, ``oracle_gap_pct``, ``max_cost_ratio``;
        ``within_budget`` (pooled mean cost), ``seeds_within_budget``, ``mean_costs`` and
        ``cost_ratios``
        (dicts); ``anchor_diff*`` / ``rule_diff*`` (:func:`~powerzoo.benchmarks.resampling.
        paired_difference`); per run (lists in seed order): ``run_mean_return``,
        ``run_feasibility``, ``run_within_budget``, ``run_performance``, ``run_oracle_gap_pct``.
    """
    r = np.asarray(returns, dtype=np.float64)
    names = list(cost_names)
    n_days = len(ref.day_ids)
    if r.ndim != 2 or r.shape[1] != n_days:
        raise ValueError(f"returns have shape {r.shape}, expected (seeds, {n_days})")
    c = np.asarray(costs, dtype=np.float64).reshape(*r.shape, len(names))
    if blocks is None:
        blocks = episode_blocks(ref.task, ref.split, ref.day_ids)
    resamples = SeedBlockResamples.draw(r.shape[0], blocks, n_resamples, seed)
    within_day = ~np.asarray(
        budget_flags(c.reshape(-1, len(names)), names, ref.budgets)["over_budget"], dtype=bool
    ).reshape(r.shape)
    anchor = ref.returns[ref.anchor]
    out: dict[str, Any] = {
        "anchor": ref.anchor,
        "anchor_return": ref.mean_return(ref.anchor),
        "anchor_within_budget": ref.anchor_within_budget,
        "oracle_return": ref.mean_return(ORACLE_POLICY) if ref.has_oracle else None,
        "headroom": ref.headroom,
        "headroom_pct": ref.headroom_pct,
        "learnable_headroom": ref.learnable_headroom,
        "scale": ref.scale,
        "cost_task": ref.cost_task,
        "mean_return": float(r.mean()),
    }
    resampled_return = resamples.mean(r)
    out["mean_return_ci_low"], out["mean_return_ci_high"] = percentile_interval(
        resampled_return, confidence
    )
    out["feasibility"] = float(within_day.mean())
    out["feasibility_ci_low"], out["feasibility_ci_high"] = percentile_interval(
        resamples.mean(within_day.astype(np.float64)), confidence
    )
    pooled = c.reshape(-1, len(names))
    out["within_budget"] = mean_within_budget(pooled, names, ref.budgets)
    runs_within = [mean_within_budget(c[s], names, ref.budgets) for s in range(r.shape[0])]
    out["seeds_within_budget"] = int(sum(runs_within))
    ratios = budget_ratios(pooled, names, ref.budgets)
    out["max_cost_ratio"] = max(ratios.values()) if ratios else None
    out["max_cost_ratio_ci_low"], out["max_cost_ratio_ci_high"] = _cost_ratio_interval(
        c, names, ref.budgets, resamples, confidence
    )
    out["mean_costs"] = {n: float(pooled[:, j].mean()) for j, n in enumerate(names)}
    out["cost_ratios"] = ratios
    to_anchor = paired_difference(r, anchor, resamples, confidence)
    out["performance"] = performance(r.mean(), ref)
    out["performance_ci_low"] = out["performance_ci_high"] = None
    if ref.scale == "oracle":  # the scale is the table's constant; the difference is resampled
        out["performance_ci_low"] = to_anchor["ci_low"] / ref.headroom
        out["performance_ci_high"] = to_anchor["ci_high"] / ref.headroom
    out["oracle_gap_pct"] = oracle_gap_pct(r.mean(), ref)
    out["oracle_gap_pct_ci_low"] = out["oracle_gap_pct_ci_high"] = None
    if ref.cost_task:
        oracle = ref.returns[ORACLE_POLICY]
        to_oracle = paired_difference(r, oracle, resamples, confidence)
        scale = 100.0 / abs(float(oracle.mean()))
        out["oracle_gap_pct_ci_low"] = -to_oracle["ci_high"] * scale
        out["oracle_gap_pct_ci_high"] = -to_oracle["ci_low"] * scale
    out.update(_paired_columns("anchor", to_anchor))
    rule = ref.returns.get(RULE_POLICY)
    out.update(
        _paired_columns(
            "rule", None if rule is None else paired_difference(r, rule, resamples, confidence)
        )
    )
    out["run_mean_return"] = r.mean(axis=1).tolist()
    out["run_feasibility"] = within_day.mean(axis=1).tolist()
    out["run_within_budget"] = runs_within
    out["run_performance"] = [performance(x, ref) for x in r.mean(axis=1)]
    out["run_oracle_gap_pct"] = [oracle_gap_pct(x, ref) for x in r.mean(axis=1)]
    return out
