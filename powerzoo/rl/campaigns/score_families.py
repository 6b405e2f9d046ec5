"""Held-out scenario families on the benchmark v2 page: how much each trained row, and the rule
and the oracle, lose when the test days turn into a held-out family.

A campaign with ``evaluation.families`` tests each trial's model on family days too
(:mod:`powerzoo.rl.campaigns.family_episodes`): every family episode names its twin test day, the
test day of the same calendar day, and resets with the protocol's env seed of that test day. Per
(task, label) and family, over the finished trials whose record holds rows of that family (older
records without them are not counted) and on the (family day, twin test day) pairs every one of
them holds:

* ``mean_return``: mean family return ($ per episode), and ``test_mean_return``: the same trials'
  mean return on the twin test days (their own test episodes);
* ``drop = test_mean_return - mean_return`` ($ per episode; > 0: the family costs the row
  return), the mean of the per-episode paired differences, with the seed x test block bootstrap
  interval of :mod:`powerzoo.benchmarks.resampling` (blocks of the twin test days), and
  ``drop_pct``, the drop in % of ``|test_mean_return|``; ``seeds_dropping``: seeds whose own
  mean drop is > 0;
* ``feasibility``: the share of family episodes within every budget, and ``within_budget``: the
  pooled mean cost keeps every budget (:func:`~powerzoo.benchmarks.score_v2.mean_within_budget`);
* ``env_seeds_paired``: whether each family episode's env seed is its twin test episode's (true
  when the protocol tests every day of the split; a protocol testing a subset of days numbers its
  env seeds by episode, so the pairs then share the day but not the env seed).

The baselines' rows come from ``powerzoo families`` outputs (:func:`read_family_tables`): the
same drop over their episodes, restricted to the trained rows' family days when it holds all of
them (``days``: ``trained``, else ``own``), its interval over test blocks; their budget columns
are those of ``families.csv`` (every family episode of the table).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.budget_snapshot import TaskBudgets, budgets_of
from powerzoo.benchmarks.evaluation import budget_flags
from powerzoo.benchmarks.families import scenario_families
from powerzoo.benchmarks.resampling import SeedBlockResamples, episode_blocks
from powerzoo.benchmarks.score_v2 import mean_within_budget
from powerzoo.benchmarks.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    percentile_interval,
)

__all__ = [
    "FAMILY_COLUMNS",
    "FAMILIES_COMMAND",
    "trained_family_rows",
    "read_family_tables",
    "baseline_family_rows",
    "campaign_family_rows",
]

FAMILY_COLUMNS = (
    "task",
    "label",
    "source",
    "split",
    "n_seeds",
    "episodes",
    "days",
    "env_seeds_paired",
    "mean_return",
    "mean_return_ci_low",
    "mean_return_ci_high",
    "test_mean_return",
    "drop",
    "drop_ci_low",
    "drop_ci_high",
    "drop_pct",
    "seeds_dropping",
    "feasibility",
    "within_budget",
)
"""Columns of ``families_v2.csv``: one row per (task, label, family); ``source`` ``trained`` (a
campaign row) or ``baseline`` (``label`` the policy); ``split`` the family."""
FAMILIES_COMMAND = "powerzoo families TASK --out DIR/TASK"
"""The command that writes one task's baselines table of a ``--families-dir DIR``."""
TABLE_FILES = ("family_episodes.csv", "families.csv")


def _ordered(task: str, names: set[str]) -> list[str]:
    """``names`` in the task's family order (:func:`scenario_families`), unknown ones last."""
    known = [f for f in scenario_families(task) if f in names]
    return known + sorted(names - set(known))


def _budgets(task: str) -> TaskBudgets:
    return budgets_of(task) or TaskBudgets((), {})


def _drop_columns(
    family_returns: np.ndarray,
    test_returns: np.ndarray,
    resampled: tuple[np.ndarray, np.ndarray],
    confidence: float,
) -> dict[str, Any]:
    """The return and drop columns of paired returns [S, D] ($ per episode), with the resampled
    means ``(family, drop)`` [R] for the intervals."""
    test_mean = float(test_returns.mean())
    drop = test_mean - float(family_returns.mean())
    low, high = percentile_interval(resampled[0], confidence)
    drop_low, drop_high = percentile_interval(resampled[1], confidence)
    return {
        "episodes": int(family_returns.size),
        "mean_return": float(family_returns.mean()),
        "mean_return_ci_low": low,
        "mean_return_ci_high": high,
        "test_mean_return": test_mean,
        "drop": drop,
        "drop_ci_low": drop_low,
        "drop_ci_high": drop_high,
        "drop_pct": 100.0 * drop / abs(test_mean) if test_mean != 0 else None,
    }


def _shared_pairs(
    runs: Sequence[tuple[Mapping[str, Any], list[Mapping[str, Any]]]],
) -> list[tuple[int, int]]:
    """``(family day, twin test day)`` pairs every run holds, the twin among its test days, in
    the first run's order."""
    shared = None
    for record, rows in runs:
        tested = {int(e["day_id"]) for e in record["episodes"]}
        mine = {(int(r["day_id"]), int(r["test_day_id"])) for r in rows}
        mine = {p for p in mine if p[1] in tested}
        shared = mine if shared is None else shared & mine
    first = [(int(r["day_id"]), int(r["test_day_id"])) for r in runs[0][1]]
    return [p for p in dict.fromkeys(first) if p in (shared or set())]


def _trained_row(
    task: str,
    runs: Sequence[tuple[Mapping[str, Any], list[Mapping[str, Any]]]],
    n_resamples: int,
    confidence: float,
    seed: int,
) -> dict[str, Any] | None:
    """The columns of one (task, label, family) from its runs (record, family rows)."""
    pairs = _shared_pairs(runs)
    if not pairs:
        return None
    names = list(runs[0][0]["cost_names"])
    fam, test, costs, same_seed = [], [], [], True
    for record, rows in runs:
        by_pair = {(int(r["day_id"]), int(r["test_day_id"])): r for r in rows}
        by_day = {int(e["day_id"]): e for e in record["episodes"]}
        picked = [by_pair[p] for p in pairs]
        twins = [by_day[t] for _, t in pairs]
        fam.append([float(r["return"]) for r in picked])
        test.append([float(e["return"]) for e in twins])
        costs.append([[float(r[f"cost_{n}"]) for n in names] for r in picked])
        same_seed &= all(
            r.get("env_seed") == e.get("env_seed") for r, e in zip(picked, twins, strict=True)
        )
    fam_r, test_r = np.asarray(fam), np.asarray(test)
    blocks = episode_blocks(task, "test", [t for _, t in pairs])
    resamples = SeedBlockResamples.draw(len(runs), blocks, n_resamples, seed)
    diffs = test_r - fam_r
    out = _drop_columns(fam_r, test_r, (resamples.mean(fam_r), resamples.mean(diffs)), confidence)
    budgets = _budgets(task)
    c = np.asarray(costs, dtype=np.float64).reshape(-1, len(names))
    over = budget_flags(c, names, budgets)["over_budget"]
    return {
        **out,
        "n_seeds": len(runs),
        "days": "trained",
        "env_seeds_paired": same_seed,
        "seeds_dropping": int(np.sum(diffs.mean(axis=1) > 0.0)),
        "feasibility": float(1.0 - np.mean(np.asarray(over, dtype=bool))),
        "within_budget": mean_within_budget(c, names, budgets),
    }


def trained_family_rows(
    task: str,
    label: str,
    records: Sequence[Mapping[str, Any]],
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> list[dict[str, Any]]:
    """The :data:`FAMILY_COLUMNS` rows of one (task, label): one per family any of its finished
    trial records holds rows of (module docstring).

    Args:
        task: The task.
        label: The campaign label (algorithm/setting).
        records: Its finished trials' records (``episodes``, ``cost_names``, ``families``).
        n_resamples: Bootstrap resamples of every interval.
        confidence: Level of the intervals.
        seed: Seed of the resamples.

    Returns:
        The rows, in the task's family order; none when no record holds family rows.
    """
    held = {
        f
        for r in records
        if isinstance(r.get("families"), Mapping)
        for f, rows in r["families"].items()
        if rows
    }
    out = []
    for family in _ordered(task, held):
        runs = [
            (r, list(r["families"][family]))
            for r in records
            if isinstance(r.get("families"), Mapping) and r["families"].get(family)
        ]
        row = _trained_row(task, runs, n_resamples, confidence, seed)
        if row is not None:
            out.append({"task": task, "label": label, "source": "trained", "split": family, **row})
    return out


def _table_files(folder: Path) -> list[Path]:
    """The ``family_episodes.csv`` files of a ``--families-dir``: in it or one folder down."""
    return sorted([*folder.glob(TABLE_FILES[0]), *folder.glob(f"*/{TABLE_FILES[0]}")])


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def read_family_tables(folder: str | Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The ``powerzoo families`` outputs under ``folder``: each output folder (``families.csv``
    and ``family_episodes.csv``, as ``write_families`` writes them) is ``folder`` itself or one
    of its sub-folders (``DIR/<task>/`` from ``powerzoo families TASK --out DIR/TASK``); the
    task is read from the files, not from the folder's name.

    Args:
        folder: The ``--families-dir``.

    Returns:
        ``{(task, policy, family): {"episodes": [rows], "summary": families.csv row, "file":
        path}}`` for every held-out family (the test rows are the episodes' ``test_return``).

    Raises:
        FileNotFoundError: ``folder`` is not a folder, holds no ``family_episodes.csv``, or one
            without its ``families.csv``.
        ValueError: two outputs hold the same task, policy and family.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder (pass a folder of `powerzoo families`)")
    files = _table_files(root)
    if not files:
        raise FileNotFoundError(
            f"{root}: no {TABLE_FILES[0]} in it or in its sub-folders (write one per task with "
            f"`{FAMILIES_COMMAND.replace('DIR', str(root))}`)"
        )
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for path in files:
        summary_file = path.with_name(TABLE_FILES[1])
        if not summary_file.is_file():
            raise FileNotFoundError(f"{path.parent}: {TABLE_FILES[0]} without {TABLE_FILES[1]}")
        summaries = {(r["task"], r["policy"], r["split"]): r for r in _read_csv(summary_file)}
        mine: dict[tuple[str, str, str], dict[str, Any]] = {}
        for row in _read_csv(path):
            key = (row["task"], row["policy"], row["split"])
            if row["split"] == "test":
                continue
            if key in out:
                raise ValueError(
                    f"{key[0]} {key[1]} on {key[2]} is in both {out[key]['file']} and {path}"
                )
            entry = mine.setdefault(
                key, {"episodes": [], "summary": summaries.get(key), "file": path}
            )
            entry["episodes"].append(row)
        out.update(mine)
    return out


def _float(text: str | None) -> float | None:
    return None if text in (None, "") else float(text)


def baseline_family_rows(
    task: str,
    tables: Mapping[tuple[str, str, str], Mapping[str, Any]],
    trained_days: Mapping[str, set[int]],
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> list[dict[str, Any]]:
    """The :data:`FAMILY_COLUMNS` rows of ``task``'s baselines (``source`` ``baseline``) from
    :func:`read_family_tables`: per policy and family, its drop on the family days of
    ``trained_days[family]`` when its table holds every one of them (``days`` ``trained``), else
    on all its days (``own``), with the test block bootstrap interval.

    Args:
        task: The task.
        tables: :func:`read_family_tables`.
        trained_days: ``{family: family days of the trained rows}`` (empty: none).
        n_resamples: Bootstrap resamples of every interval.
        confidence: Level of the intervals.
        seed: Seed of the resamples.

    Returns:
        The rows, by policy in the table's order, then in the task's family order.
    """
    mine = {k: v for k, v in tables.items() if k[0] == task}
    policies = list(dict.fromkeys(k[1] for k in mine))
    budgets = _budgets(task)
    out = []
    for policy in policies:
        for family in _ordered(task, {k[2] for k in mine if k[1] == policy}):
            entry = mine[(task, policy, family)]
            episodes = entry["episodes"]
            wanted = trained_days.get(family) or set()
            held = {int(e["day_id"]) for e in episodes}
            days = "trained" if wanted and wanted <= held else "own"
            if days == "trained":
                episodes = [e for e in episodes if int(e["day_id"]) in wanted]
            fam = np.asarray([[float(e["return"]) for e in episodes]])
            test = np.asarray([[float(e["test_return"]) for e in episodes]])
            blocks = episode_blocks(task, "test", [int(e["test_day_id"]) for e in episodes])
            resamples = SeedBlockResamples.draw(1, blocks, n_resamples, seed)
            resampled = (resamples.day_mean(fam[0]), resamples.day_mean(test[0] - fam[0]))
            summary = entry["summary"] or {}
            rate = _float(summary.get("over_budget_rate"))
            names = [k.removeprefix("cost_") for k in summary if k.startswith("cost_")]
            means = [_float(summary[f"cost_{n}"]) for n in names]
            within = None
            if names and all(m is not None for m in means):
                within = mean_within_budget(np.asarray([means]), names, budgets)
            out.append(
                {
                    "task": task,
                    "label": policy,
                    "source": "baseline",
                    "split": family,
                    **_drop_columns(fam, test, resampled, confidence),
                    "n_seeds": 1,
                    "days": days,
                    "env_seeds_paired": True,
                    "seeds_dropping": None,
                    "feasibility": None if rate is None else 1.0 - rate,
                    "within_budget": within,
                }
            )
    return out


def _family_days(records: Sequence[Mapping[str, Any]]) -> dict[str, set[int]]:
    """``{family: family days}`` held by any of ``records``."""
    out: dict[str, set[int]] = {}
    for record in records:
        held = record.get("families")
        for family, rows in held.items() if isinstance(held, Mapping) else ():
            out.setdefault(family, set()).update(int(r["day_id"]) for r in rows)
    return out


def campaign_family_rows(
    tasks: Sequence[str],
    groups: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]],
    tables: Mapping[tuple[str, str, str], Mapping[str, Any]] | None,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
) -> list[dict[str, Any]]:
    """Every :data:`FAMILY_COLUMNS` row of a campaign: per task (in ``tasks``' order) its
    trained rows (:func:`trained_family_rows`, ``groups``' order), then its baselines' rows
    (:func:`baseline_family_rows`) when ``tables`` (:func:`read_family_tables`) are given.

    Args:
        tasks: The campaign's tasks.
        groups: ``{(task, label): finished trial records}``.
        tables: The baselines' ``powerzoo families`` outputs, or ``None``.
        n_resamples: Bootstrap resamples of every interval.

    Returns:
        The rows.
    """
    out: list[dict[str, Any]] = []
    for task in tasks:
        mine = {label: records for (t, label), records in groups.items() if t == task}
        for label, records in mine.items():
            out += trained_family_rows(task, label, records, n_resamples)
        if tables is not None:
            days = _family_days([r for records in mine.values() for r in records])
            out += baseline_family_rows(task, tables, days, n_resamples)
    return out
