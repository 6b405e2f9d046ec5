"""The headline aggregates of a campaign's benchmark v2 page: per family of learners, across the
tasks with learnable headroom, the per-run performances through
:mod:`powerzoo.benchmarks.aggregates` (IQM, mean, median, optimality gap, performance profiles),
the mean optimality gap in % of the oracle's cost over the cost tasks among them, and the
probability of improvement of each pair of families, twice: on performance alone, and budgets
first.

**Budgets first.** A benchmark row counts only within its task's budgets, so the second
probability of improvement ranks every run that keeps them (its mean cost within every budget,
``run_within_budget``) above every run that does not, and two runs alike in that on their
performance: the order of the pairs ``(within budget, performance)``
(:func:`budgets_first_scores`). The IQM, mean, median and optimality gap read performance alone,
no floor, with the share of runs within budget beside them. The performance profiles are drawn
twice, side by side: every run on performance alone, and within budget (a run over any budget
counts as scoring above no threshold: :func:`within_budget_runs`), where a family's curve never
rises above its share of runs within budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.aggregates import (
    aggregate_scores,
    performance_profile,
    plot_profile_panels,
    probability_of_improvement,
)
from powerzoo.benchmarks.stats import BOOTSTRAP_RESAMPLES

__all__ = [
    "AGGREGATE_COLUMNS",
    "BUDGETS_FIRST",
    "FAMILIES",
    "PROFILE_PANELS",
    "budgets_first_scores",
    "family_aggregates",
    "within_budget_runs",
]

FAMILIES = ("learner", "lagrangian", "residual", "safe", "bc")
"""Families of learners the aggregates compare, in page order
(:func:`~powerzoo.rl.campaigns.score_page.algorithm_family`)."""
PROFILE_PANELS = (
    "every run, performance alone",
    "runs within every budget (a run over one counts below every score)",
)
"""Titles of the two panels of the performance profiles figure."""
BUDGETS_FIRST = ", budgets first"
"""Suffix of the ``statistic`` of a probability of improvement ranked budgets first
(``P(X > Y), budgets first``)."""
AGGREGATE_COLUMNS = (
    "family",
    "versus",
    "statistic",
    "value",
    "ci_low",
    "ci_high",
    "n_tasks",
    "n_runs",
    "tasks",
)
"""Columns of ``aggregates_v2.csv``: one row per family and statistic (``versus`` empty), and one
per pair of families and ranking for the probability of improvement (``statistic``
``P(X > Y)`` or ``P(X > Y), budgets first``)."""


def _family_runs(rows: Sequence[dict[str, Any]], key: str) -> dict[str, dict[str, list[float]]]:
    """``{family: {task: runs}}`` of the rows of tasks with learnable headroom whose per-run
    column ``key`` is defined (two labels of one family on one task pool their runs)."""
    out: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        if not row["learnable_headroom"] or row["scale"] != "oracle":
            continue
        runs = [x for x in row[key] if x is not None]
        if runs:
            out.setdefault(row["family"], {}).setdefault(row["task"], []).extend(runs)
    return out


def _runs_and_budgets(rows: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], float, bool]]:
    """``(row, performance, within every budget)`` of each run of the rows :func:`_family_runs`
    reads."""
    return [
        (row, performance, within)
        for row in rows
        if row["learnable_headroom"] and row["scale"] == "oracle"
        for performance, within in zip(
            row["run_performance"], row["run_within_budget"], strict=True
        )
        if performance is not None
    ]


def within_budget_runs(
    rows: Sequence[dict[str, Any]], below: float
) -> dict[str, dict[str, list[float]]]:
    """``{family: {task: runs}}`` as :func:`_family_runs` gives the per-run performances, a run
    over any budget moved to ``below`` (a score under every threshold a profile reads): the
    within-budget performance profile counts such a run as scoring above no threshold."""
    out: dict[str, dict[str, list[float]]] = {}
    for row, performance, within in _runs_and_budgets(rows):
        runs = out.setdefault(row["family"], {}).setdefault(row["task"], [])
        runs.append(performance if within else below)
    return out


def budgets_first_scores(
    rows: Sequence[dict[str, Any]],
) -> dict[str, dict[str, list[float]]]:
    """``{family: {task: runs}}`` as :func:`_family_runs` gives the per-run performances, each
    moved up by one shift common to all rows where the run keeps every budget: the shift (the
    span of all the performances, plus 1) puts every run within budget above every run over it,
    and keeps the order of performance among runs alike in that (score units plus the shift)."""
    pairs = _runs_and_budgets(rows)
    out: dict[str, dict[str, list[float]]] = {}
    if not pairs:
        return out
    values = [performance for _, performance, _ in pairs]
    shift = max(values) - min(values) + 1.0
    for row, performance, within in pairs:
        runs = out.setdefault(row["family"], {}).setdefault(row["task"], [])
        runs.append(performance + shift if within else performance)
    return out


def _profile_taus(scores: dict[str, dict[str, list[float]]]) -> np.ndarray:
    """Thresholds of the profiles: from the lowest run (at least -2, at most -0.25) to the
    highest (at least 1.25, at most 3), in score units."""
    runs = [x for tasks in scores.values() for values in tasks.values() for x in values]
    low = max(min(min(runs), -0.25), -2.0)
    high = min(max(max(runs), 1.25), 3.0)
    return np.linspace(low, high, 201)


def _aggregate_row(
    family: str, statistic: str, result: dict[str, float], tasks: dict[str, list[float]]
) -> dict[str, Any]:
    return {
        "family": family,
        "versus": None,
        "statistic": statistic,
        **result,
        "n_tasks": len(tasks),
        "n_runs": sum(len(v) for v in tasks.values()),
        "tasks": sorted(tasks),
    }


def family_aggregates(
    rows: Sequence[dict[str, Any]],
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    profile_path: str | Path | None = None,
) -> tuple[list[dict[str, Any]], Path | None]:
    """The aggregates of each family across the tasks with learnable headroom
    (:data:`AGGREGATE_COLUMNS`): ``iqm``, ``mean``, ``median`` and ``optimality_gap`` of the
    per-run performances (score units) and ``oracle_gap_pct_mean`` (the mean over its cost tasks
    of the runs' extra cost in % of the oracle's), each with its stratified bootstrap interval;
    then ``P(X > Y)`` for each pair of families, on the tasks both have, on performance alone
    and budgets first (``P(X > Y), budgets first``: :func:`budgets_first_scores`).

    Args:
        rows: Rows of ``results_v2.csv`` (lists for the per-run columns).
        n_resamples: Bootstrap resamples of every interval.
        profile_path: Where to draw the families' performance profiles (PNG); ``None``: not
            drawn.

    Returns:
        ``(aggregate rows, the PNG written or None)``; no rows when no family has a run on a task
        with learnable headroom.
    """
    scores = _family_runs(rows, "run_performance")
    gaps = _family_runs(rows, "run_oracle_gap_pct")
    families = [f for f in FAMILIES if f in scores] + sorted(set(scores) - set(FAMILIES))
    out = []
    for family in families:
        for name, result in aggregate_scores(scores[family], n_resamples=n_resamples).items():
            out.append(_aggregate_row(family, name, result, scores[family]))
        if family in gaps:
            mean_gap = aggregate_scores(gaps[family], n_resamples=n_resamples)["mean"]
            out.append(_aggregate_row(family, "oracle_gap_pct_mean", mean_gap, gaps[family]))
    ranked = budgets_first_scores(rows)
    for x, y in combinations(families, 2):
        shared = sorted(set(scores[x]) & set(scores[y]))
        if not shared:
            continue
        for runs, suffix in ((scores, ""), (ranked, BUDGETS_FIRST)):
            p = probability_of_improvement(
                {t: runs[x][t] for t in shared},
                {t: runs[y][t] for t in shared},
                n_resamples=n_resamples,
            )
            row = _aggregate_row(x, f"P({x} > {y}){suffix}", p, {t: runs[x][t] for t in shared})
            row["n_runs"] += sum(len(runs[y][t]) for t in shared)
            out.append({**row, "versus": y})
    png = None
    if profile_path is not None and scores:
        taus = _profile_taus(scores)
        profiles = {
            f: performance_profile(scores[f], taus, n_resamples=n_resamples) for f in families
        }
        below = float(taus[0]) - 1.0
        within = within_budget_runs(rows, below)
        kept = {f: performance_profile(within[f], taus, n_resamples=n_resamples) for f in families}
        png = plot_profile_panels(
            {PROFILE_PANELS[0]: profiles, PROFILE_PANELS[1]: kept}, profile_path
        )
    return out, png
