"""Every number of a submission, re-derived from its episodes: the row ``powerzoo score`` prints
and adds to a results table.

:func:`score_submission` scores a checked :class:`~powerzoo.benchmarks.submission.Submission`
with :func:`~powerzoo.benchmarks.score_v2.score_runs` (feasibility, performance, optimality gap,
paired differences against the anchor and the rule, seed x test block intervals) and adds the
submission's compute (``env_steps``, ``wall_time_s``, ``hardware``, ``tuning_budget``) and, for
comparison with benchmark v1 tables, the v1 columns of the same episodes
(:func:`~powerzoo.benchmarks.report.summary_row`: normalised score against random, budget-aware
score, days over budget, pooled-episode interval) under a ``v1_`` prefix.

The results table is a CSV file with the columns :data:`RESULT_COLUMNS`, one row per submission;
floats are written with ``repr`` (exact round trip), blanks are empty cells, per-run lists and
per-cost dicts are JSON.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.report import csv_text, summary_row
from powerzoo.benchmarks.score_v2 import RULE_POLICY, score_runs, task_reference
from powerzoo.benchmarks.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE
from powerzoo.benchmarks.submission import Submission, expected_env_seeds
from powerzoo.fileio import atomic_write_text

__all__ = [
    "RESULT_COLUMNS",
    "score_submission",
    "append_result",
    "has_result",
    "result_text",
    "read_run_scores",
]

_PAIRED = ("diff", "diff_ci_low", "diff_ci_high", "diff_pct", "seeds_better")
RESULT_COLUMNS = (
    "task",
    "split",
    "algorithm",
    "seeds",
    "n_seeds",
    "episodes",
    "env_seeds",
    "paired_on",
    "env_steps",
    "wall_time_s",
    "hardware",
    "code_hash",
    "tuning_budget",
    "within_budget",
    "seeds_within_budget",
    "feasibility",
    "feasibility_ci_low",
    "feasibility_ci_high",
    "max_cost_ratio",
    "max_cost_ratio_ci_low",
    "max_cost_ratio_ci_high",
    "mean_return",
    "mean_return_ci_low",
    "mean_return_ci_high",
    "scale",
    "anchor",
    "anchor_return",
    "anchor_within_budget",
    "oracle_return",
    "headroom",
    "headroom_pct",
    "learnable_headroom",
    "cost_task",
    "performance",
    "performance_ci_low",
    "performance_ci_high",
    "oracle_gap_pct",
    "oracle_gap_pct_ci_low",
    "oracle_gap_pct_ci_high",
    *(f"anchor_{k}" for k in _PAIRED),
    *(f"rule_{k}" for k in _PAIRED),
    "run_mean_return",
    "run_feasibility",
    "run_within_budget",
    "run_performance",
    "run_oracle_gap_pct",
    "mean_costs",
    "cost_ratios",
    "v1_normalized_score",
    "v1_cmdp_score",
    "v1_over_budget_rate",
    "v1_mean_return_ci_low",
    "v1_mean_return_ci_high",
    "intervals",
)
"""Columns of the results table (module docstring; the scores' definitions are in
:mod:`powerzoo.benchmarks.score_v2`)."""

_V1 = ("normalized_score", "cmdp_score", "over_budget_rate", "mean_return_ci_low")
_V1 += ("mean_return_ci_high",)


def score_submission(
    sub: Submission,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """The results row of a checked submission (:data:`RESULT_COLUMNS`), against the baselines
    table and budgets in use.

    Args:
        sub: A submission read by :func:`~powerzoo.benchmarks.submission.read_submission`.
        n_resamples: Bootstrap resamples of every interval.
        confidence: Level of the intervals.
        seed: Seed of the resamples.

    Returns:
        The row (lists and dicts for the per-run and per-cost columns).
    """
    ref = task_reference(sub.task, sub.split)
    scores = score_runs(
        sub.returns,
        sub.costs,
        sub.cost_names,
        ref,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
    )
    v1 = summary_row(
        sub.task,
        sub.algorithm,
        "submission",
        str(sub.folder),
        sub.episode_records(),
        sub.day_ids,
        sub.cost_names,
        sub.split,
    )
    meta = sub.meta
    n = len(sub.day_ids)
    protocol_seeds = expected_env_seeds("protocol", 0, ref.protocol_seed, n)
    paired = all(
        expected_env_seeds(sub.env_seeds, s, ref.protocol_seed, n) == protocol_seeds
        for s in sub.seeds
    )
    return {
        "task": sub.task,
        "split": sub.split,
        "algorithm": sub.algorithm,
        "seeds": list(sub.seeds),
        "n_seeds": len(sub.seeds),
        "episodes": len(sub.day_ids),
        "env_seeds": sub.env_seeds,
        "paired_on": "days and env seeds" if paired else "days",
        "env_steps": int(meta["env_steps"]),
        "wall_time_s": float(meta["wall_time_s"]),
        "hardware": meta["hardware"],
        "code_hash": meta["code_hash"],
        "tuning_budget": meta["tuning_budget"],
        **scores,
        **{f"v1_{k}": v1[k] for k in _V1},
        "intervals": (
            f"{confidence:.0%} percentile, {n_resamples} seed x test block resamples, "
            f"numpy default_rng({seed})"
        ),
    }


def _csv_ready(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with lists and dicts as JSON text (floats keep ``repr``'s digits)."""
    return {k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()}


_SUBMISSION_KEY = ("task", "split", "algorithm", "seeds", "code_hash", "env_steps")
"""The columns that name one submission in a results table: its row is replaced, not added
again, when the submission is scored a second time (the same code, steps and seeds)."""


def _key(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(c, "")) for c in _SUBMISSION_KEY)


def _table_rows(path: Path) -> list[dict[str, str]] | None:
    """The rows of the results table at ``path`` with today's columns (``None`` where the file
    is absent or empty); ``ValueError`` for a file with other columns."""
    if not path.is_file():
        return None
    old = path.read_text(encoding="utf-8")
    header = next(csv.reader([old.splitlines()[0]])) if old.strip() else []
    if not header:
        return None
    if header != list(RESULT_COLUMNS) and header != [c for c in RESULT_COLUMNS if c in header]:
        raise ValueError(
            f"{path}: its columns are not those of a results table of powerzoo score; "
            "write to a new file"
        )
    return list(csv.DictReader(io.StringIO(old)))


def has_result(table: str | Path, row: Mapping[str, Any]) -> bool:
    """Whether the results table at ``table`` holds a row of the same submission as ``row``
    (same task, split, algorithm, seeds, code and env steps)."""
    rows = _table_rows(Path(table)) or []
    key = _key(_csv_ready(row))
    return any(_key(old) == key for old in rows)


def append_result(table: str | Path, row: Mapping[str, Any]) -> Path:
    """Add ``row`` to the results table at ``table`` (created with its header when absent).

    A row of the same submission (same task, split, algorithm, seeds, code hash and env steps)
    is replaced rather than added again, so scoring a folder twice does not count its runs
    twice. A table written before the results table gained columns (its columns are those of
    today's table in the same order, some missing) is rewritten with today's, its rows' new
    cells empty. Raises ``ValueError``
    when the file exists with other columns.

    Args:
        table: A results table CSV file.
        row: A row of :func:`score_submission`.

    Returns:
        The table's path.
    """
    path = Path(table)
    new = _csv_ready(row)
    rows = [old for old in (_table_rows(path) or []) if _key(old) != _key(new)]
    return atomic_write_text(path, csv_text(RESULT_COLUMNS, [*rows, new]))


def read_run_scores(
    table: str | Path, learnable_only: bool = True
) -> dict[str, dict[str, list[float]]]:
    """The per-run performances of a results table, ready for
    :mod:`powerzoo.benchmarks.aggregates`: ``{algorithm: {task: [score per seed]}}`` (score
    units: 0 = anchor, 1 = oracle). Rows without a performance (``scale = "gain"``) are left
    out, and with ``learnable_only`` those of tasks without learnable headroom too; two rows of
    one algorithm and task add their runs together.

    Args:
        table: A results table CSV file (:func:`append_result`).
        learnable_only: Leave out the tasks whose ``learnable_headroom`` is false.

    Returns:
        The scores by algorithm and task.
    """
    out: dict[str, dict[str, list[float]]] = {}
    with Path(table).open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row["scale"] != "oracle" or (learnable_only and row["learnable_headroom"] != "True"):
                continue
            runs = out.setdefault(row["algorithm"], {}).setdefault(row["task"], [])
            runs.extend(float(x) for x in json.loads(row["run_performance"]))
    return out


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _interval(row: Mapping[str, Any], key: str, digits: int = 3) -> str:
    low, high = row[f"{key}_ci_low"], row[f"{key}_ci_high"]
    bounds = "" if low is None else f" [{_num(low, digits)}, {_num(high, digits)}]"
    return _num(row[key], digits) + bounds


def _paired_line(row: Mapping[str, Any], prefix: str, name: str) -> str:
    if row[f"{prefix}_diff"] is None:
        return f"vs {name}: n/a (no such baseline in the table)"
    pct = row[f"{prefix}_diff_pct"]
    return (
        f"vs {name}: {_interval(row, f'{prefix}_diff', 2)} $/episode"
        f"{'' if pct is None else f' ({pct:+.2f} %)'}, "
        f"{row[f'{prefix}_seeds_better']} of {row['n_seeds']} seeds better"
    )


def result_text(row: Mapping[str, Any]) -> str:
    """The row as a few lines of text (what ``powerzoo score`` prints)."""
    head = (
        f"{row['task']} / {row['algorithm']} ({row['split']}; {row['n_seeds']} seed(s) x "
        f"{row['episodes']} episodes; env seeds {row['env_seeds']}: paired on {row['paired_on']})"
    )
    within = "yes" if row["within_budget"] else "NO"
    lines = [
        head,
        f"  within budget (mean cost E[C] <= d): {within}, {row['seeds_within_budget']} of "
        f"{row['n_seeds']} seeds; max E[C]/d {_interval(row, 'max_cost_ratio')}; share of "
        "episodes within every "
        f"budget {_interval(row, 'feasibility')}",
        f"  mean return {_interval(row, 'mean_return', 2)} $/episode",
    ]
    anchor = (
        f"{row['anchor']} {_num(row['anchor_return'], 2)}"
        f"{'' if row['anchor_within_budget'] else ' (over budget: no baseline keeps it)'}"
    )
    if row["scale"] == "oracle":
        lines.append(
            f"  performance {_interval(row, 'performance')} (0 = {anchor}, 1 = oracle "
            f"{_num(row['oracle_return'], 2)}; headroom {_num(row['headroom_pct'], 2)} %"
            f"{'' if row['learnable_headroom'] else ': no learnable headroom'})"
        )
    else:
        lines.append(f"  performance n/a: no oracle above the anchor ({anchor}); read the gain")
    if row["oracle_gap_pct"] is not None:
        lines.append(
            f"  optimality gap {_interval(row, 'oracle_gap_pct', 2)} % of the oracle's cost"
        )
    lines.append(f"  {_paired_line(row, 'anchor', row['anchor'] + ' (anchor)')}")
    if row["anchor"] != RULE_POLICY:
        lines.append(f"  {_paired_line(row, 'rule', RULE_POLICY)}")
    if row["scale"] == "oracle":
        runs = " ".join(_num(x) for x in row["run_performance"])
        lines.append(f"  per run performance: {runs}")
    lines.append(
        f"  v1: normalised score {_num(row['v1_normalized_score'])}, budget-aware score "
        f"{_num(row['v1_cmdp_score'])}, days over budget {_num(row['v1_over_budget_rate'])}"
    )
    return "\n".join(lines)
