"""Tables of a benchmark campaign: :class:`CampaignResult`, ``results.csv``, ``episodes.csv``,
``results.md``.

The columns and the protocol text are described in :mod:`powerzoo.benchmarks.campaign`. CSV values
round-trip exactly (floats written with ``repr``); blanks (``None``) are empty cells. Every file is
written atomically (:func:`powerzoo.fileio.atomic_write_text`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.budget_snapshot import budgets_of
from powerzoo.benchmarks.evaluation import return_unit
from powerzoo.benchmarks.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    EPISODE_SEED_STRIDE,
    cmdp_score_columns,
    score_columns,
    summarize_campaign_episodes,
)
from powerzoo.fileio import atomic_write_text
from powerzoo.tasks import task_spec

__all__ = [
    "CampaignResult",
    "SUMMARY_COLUMNS",
    "EPISODE_COLUMNS",
    "write_csv_tables",
    "write_results_markdown",
    "results_markdown",
    "file_label",
    "csv_text",
    "cost_columns",
    "summary_row",
]

SUMMARY_COLUMNS = (
    "task",
    "split",
    "policy",
    "kind",
    "source",
    "episodes",
    "n_seeds",
    "seeds",
    "n_days",
    "mean_return",
    "mean_return_ci_low",
    "mean_return_ci_high",
    "iqm_return",
    "iqm_return_ci_low",
    "iqm_return_ci_high",
    "std_return",
    "total_cost_mean",
    "total_cost_ci_low",
    "total_cost_ci_high",
    "violation_rate",
    "over_budget_rate",
    "mean_length",
    "normalized_score",
    "normalized_score_ci_low",
    "normalized_score_ci_high",
    "cmdp_score",
    "cmdp_score_ci_low",
    "cmdp_score_ci_high",
)
"""Fixed columns of ``results.csv``; ``cost_<name>_mean`` / ``_ci_low`` / ``_ci_high`` follow."""

EPISODE_COLUMNS = (
    "task",
    "policy",
    "seed",
    "episode",
    "day_id",
    "env_seed",
    "return",
    "length",
    "total_cost",
)
"""Fixed columns of ``episodes.csv``; ``cost_<name>`` (per constraint, summed over the episode)
follow."""


@dataclasses.dataclass
class CampaignResult:
    """What :func:`~powerzoo.benchmarks.campaign.run_campaign` measured and wrote.

    Attributes:
        rows: one dict per task x policy (the ``results.csv`` columns; ``None`` for blanks).
        episodes: one dict per episode (the ``episodes.csv`` columns).
        notes: skipped policies and other remarks (also in ``results.md``).
        cost_names: ``{task: constraint names}``.
        files: ``results_csv``, ``results_md``, ``episodes_csv`` paths.
        plots: every PNG written.
        wall_seconds: duration of the campaign (s).
    """

    out_dir: Path
    split: str
    seeds: tuple[int, ...]
    rows: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    notes: list[str]
    cost_names: dict[str, tuple[str, ...]]
    files: dict[str, Path]
    plots: list[Path]
    wall_seconds: float

    @property
    def tasks(self) -> list[str]:
        """Tasks with at least one evaluated policy, in campaign order."""
        return list(dict.fromkeys(r["task"] for r in self.rows))

    def row(self, task: str, policy: str) -> dict[str, Any]:
        """The summary row of ``policy`` on ``task`` (``KeyError`` if it was not evaluated)."""
        for r in self.rows:
            if r["task"] == task and r["policy"] == policy:
                return r
        raise KeyError(f"no result for policy {policy!r} on task {task!r}")

    def markdown(self) -> str:
        """One Markdown table per task (``### task`` heading, then the table), then the notes."""
        parts = [_markdown_table(self, task) for task in self.tasks]
        if self.notes:
            parts.append("Notes:\n\n" + "\n".join(f"- {n}" for n in self.notes))
        return "\n\n".join(parts) + "\n"


# ---- Markdown ------------------------------------------------------------------------------------
def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def _cost(value: float) -> str:
    return "0" if value == 0 else f"{value:.4g}"


def _markdown_table(result: CampaignResult, task: str) -> str:
    rows = [r for r in result.rows if r["task"] == task]
    names = result.cost_names[task]
    first = rows[0]
    unit = return_unit(task_spec(task))
    head = (
        f"### {task} ({result.split} split; "
        f"{first['n_days']} days x {first['n_seeds']} seed(s) per policy; "
        f"returns in {unit}; [95% bootstrap CI])"
    )
    header = [
        "policy",
        "episodes",
        "mean return",
        "IQM return",
        "std",
        "days over budget",
        "violation rate",
        "normalized score",
        "budget-aware score",
        *[f"{n} / episode" for n in names],
    ]
    lines = [
        head,
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    for r in rows:
        score = r["normalized_score"]
        cells = [
            f"{r['policy']}",
            f"{r['episodes']}",
            f"{_num(r['mean_return'])} [{_num(r['mean_return_ci_low'])}, "
            f"{_num(r['mean_return_ci_high'])}]",
            f"{_num(r['iqm_return'])} [{_num(r['iqm_return_ci_low'])}, "
            f"{_num(r['iqm_return_ci_high'])}]",
            _num(r["std_return"]),
            "n/a" if r.get("over_budget_rate") is None else f"{r['over_budget_rate']:.3f}",
            f"{r['violation_rate']:.3f}",
            "n/a"
            if score is None
            else (
                f"{score:.3f} [{r['normalized_score_ci_low']:.3f}, "
                f"{r['normalized_score_ci_high']:.3f}]"
            ),
            "n/a"
            if r.get("cmdp_score") is None
            else (
                f"{r['cmdp_score']:.3f} [{r['cmdp_score_ci_low']:.3f}, "
                f"{r['cmdp_score_ci_high']:.3f}]"
            ),
            *[_cost(r[f"cost_{n}_mean"]) for n in names],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def results_markdown(result: CampaignResult) -> str:
    """Text of ``results.md``: the protocol, one table per task, the notes."""
    seeds = " ".join(str(s) for s in result.seeds)
    intro = (
        "# PowerZoo benchmark campaign\n\n"
        f"Split `{result.split}`, seeds {seeds}. Episode i of seed s starts on the i-th "
        f"evaluated day with `env.reset(seed=s * {EPISODE_SEED_STRIDE} + i)`; the random "
        "policy is seeded with s. Statistics pool all episodes of all seeds; intervals "
        f"are {CONFIDENCE:.0%} percentile-bootstrap intervals ({BOOTSTRAP_RESAMPLES:,} "
        f"resamples of the episodes, `numpy.random.default_rng({BOOTSTRAP_SEED})`). "
        "Costs are per episode in each constraint's physical unit; days over budget: the share "
        "of episodes in which a selected cost exceeds the task's per-episode budget. The "
        "normalized score (0 = random, 1 = oracle or best baseline of the packaged table) "
        "compares mean returns; the budget-aware score compares day by day and lets an "
        "over-budget day keep at most a loss over random (`powerzoo.benchmarks.cmdp_score`), "
        "so a policy that breaks the budgets cannot top a feasible one. Both are n/a when "
        "the table lacks the task or when the evaluated days differ from the table's.\n"
    )
    return intro + "\n" + result.markdown()


def write_results_markdown(result: CampaignResult) -> Path:
    """Write ``results.md`` into ``result.out_dir``; its
    path is kept in ``result.files["results_md"]``."""
    result.files["results_md"] = atomic_write_text(
        result.out_dir / "results.md", results_markdown(result)
    )
    return result.files["results_md"]


# ---- CSV -----------------------------------------------------------------------------------------
def csv_text(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> str:
    """CSV text of ``rows`` under ``columns`` (keys outside them ignored): floats written with
    ``repr`` (exact round trip), ``None`` as an empty cell."""
    buffer = io.StringIO()
    writer = csv.DictWriter(
        buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n"
    )
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    return buffer.getvalue()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # round-trips exactly
    return value


def cost_columns(cost_names: dict[str, tuple[str, ...]], suffixes: Sequence[str]) -> list[str]:
    """``cost_<name><suffix>`` for every constraint name of every task (first seen first) and
    every suffix."""
    names = list(dict.fromkeys(n for names in cost_names.values() for n in names))
    return [f"cost_{n}{s}" for n in names for s in suffixes]


def summary_row(
    task: str,
    policy: str,
    kind: str,
    source: str,
    episodes: Sequence[dict[str, Any]],
    days: Sequence[int],
    cost_names: Sequence[str],
    split: str,
) -> dict[str, Any]:
    """The ``results.csv`` row of one task x policy from its episode rows (``episodes.csv``
    rows of all its seeds, evaluated on ``days`` of ``split``). Days over budget and the
    budget-aware score count the budgets :func:`~powerzoo.benchmarks.budget_snapshot.budgets_of`
    gives: a campaign folder's pinned ones inside ``task_budgets``, else the task spec's."""
    budgets = budgets_of(task)
    seeds = list(dict.fromkeys(r["seed"] for r in episodes))
    row = {
        "task": task,
        "split": split,
        "policy": policy,
        "kind": kind,
        "source": source,
        "n_seeds": len(seeds),
        "seeds": " ".join(map(str, seeds)),
        "n_days": len(days),
        **summarize_campaign_episodes(episodes, cost_names, spec=budgets),
    }
    row.update(score_columns(task, split, days, row))
    row.update(cmdp_score_columns(task, split, days, episodes, cost_names, budgets))
    return row


def write_csv_tables(result: CampaignResult) -> None:
    """Write ``results.csv`` and ``episodes.csv`` into ``result.out_dir`` (created);
    paths go to ``result.files``."""
    out, names = result.out_dir, result.cost_names
    out.mkdir(parents=True, exist_ok=True)
    result.files["results_csv"] = atomic_write_text(
        out / "results.csv",
        csv_text(
            [*SUMMARY_COLUMNS, *cost_columns(names, ("_mean", "_ci_low", "_ci_high"))], result.rows
        ),
    )
    result.files["episodes_csv"] = atomic_write_text(
        out / "episodes.csv",
        csv_text([*EPISODE_COLUMNS, *cost_columns(names, ("",))], result.episodes),
    )


def file_label(name: str) -> str:
    """``name`` with every run of characters other than letters,
    digits, ``.``, ``_``, ``-`` replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)
