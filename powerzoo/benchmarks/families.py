"""Scenario families: how much a policy loses when the test days turn into a held-out family.

A task's scenario families are its splits beyond train / val / test (:func:`scenario_families`):
the calendar's stress splits (:data:`powerzoo.data.calendar.STRESS_SPLITS`: ``heatwave``,
``low_renewable``, ``load_stress``, ``price_spike``, ``cold_snap``; the workload shock of the
data-centre tasks) and a task's own (``gencos_bidding``: ``demand_shift``, ``renewable_shock``;
``tso``: ``line_tightening``), as far as the task accepts them (``TaskSpec.splits``). Each
family is a transform of the profiles or of the grid on the test days (``heatwave`` and
``cold_snap`` on the test days of their months), so no family day was trained or tuned on.

:func:`evaluate_families` runs policies (the rule and the oracle by default) on the test split
and on each family, and pairs every family episode with the test episode of the same calendar
day and the same env seed: episode on test day ``d`` resets with ``seed + d`` (with every test
day, the baselines table's protocol) and a family episode whose calendar day is test day ``d``
resets with ``seed + d`` too. A family's **drop** is the paired difference of means,
``drop = mean(R_test) - mean(R_family)`` over its days ($ per episode; positive: the family
costs the policy return), and ``drop_pct = 100 drop / |mean(R_test)|`` over the same days.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import load_baselines, select_days
from powerzoo.benchmarks.evaluation import rollout, summarize_episodes
from powerzoo.benchmarks.naive import table_baselines
from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.data.calendar import BASE_SPLITS
from powerzoo.envs.make import make_env
from powerzoo.fileio import atomic_write_text
from powerzoo.progress import progress_bar
from powerzoo.tasks import make_task, task_spec

__all__ = [
    "FAMILY_POLICIES",
    "MIN_TEST_EPISODES",
    "FamilyResult",
    "scenario_families",
    "paired_days",
    "evaluate_families",
    "write_families",
    "count_test_episodes",
]

FAMILY_POLICIES = ("rule_based", "oracle")
"""The policies a family table shows by default."""
MIN_TEST_EPISODES = 16
"""Test episodes every task's baselines should hold (fewer make per-task intervals useless)."""
ROW_FIELDS = (
    "task",
    "policy",
    "split",
    "episodes",
    "mean_return",
    "std_return",
    "test_mean_return",
    "drop",
    "drop_pct",
    "over_budget_rate",
    "violation_rate",
    "seconds",
)
EPISODE_FIELDS = (
    "task",
    "policy",
    "split",
    "day_id",
    "calendar_day",
    "test_day_id",
    "env_seed",
    "return",
    "test_return",
    "total_cost",
)


def scenario_families(task: str) -> tuple[str, ...]:
    """The held-out families ``task`` accepts: its splits other than train / val / test, in the
    spec's order."""
    return tuple(s for s in task_spec(task).splits if s not in BASE_SPLITS)


def paired_days(task: str, family: str, max_episodes: int | None = None) -> list[tuple[int, int]]:
    """``(family day, test day)`` pairs of the same calendar day: the family's split days
    (``max_episodes`` of them evenly spread, :func:`~powerzoo.benchmarks.baselines.select_days`)
    that are test days too."""
    test_days = make_task(task, "test").split_days
    fam = make_task(task, family)
    chosen = select_days(fam.n_days, max_episodes)
    where = {int(c): i for i, c in enumerate(test_days)}
    return [(d, where[int(fam.split_days[d])]) for d in chosen if int(fam.split_days[d]) in where]


@dataclasses.dataclass
class FamilyResult:
    """The family table of one task.

    Attributes:
        task: Task name.
        rows: One row per (policy, split) (:data:`ROW_FIELDS`), test first.
        episodes: One row per episode (:data:`EPISODE_FIELDS`).
        cost_names: The task's constraint names.
        notes: What was left out and why.
    """

    task: str
    rows: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    cost_names: tuple[str, ...]
    notes: list[str]


def _run(
    env: Any,
    policy: Any,
    days: Sequence[int],
    seed: int,
    label: str,
    progress: bool | None,
    test_days: Sequence[int] | None = None,
) -> list[Any]:
    """One episode per day of ``days``; the one on day ``days[i]`` resets with ``seed`` plus
    its test day (``test_days[i]``, default ``days[i]``)."""
    twins = days if test_days is None else test_days
    bar = progress_bar(list(zip(days, twins, strict=True)), progress=progress, desc=label)
    return [rollout(env, policy, day_id=int(d), seed=int(seed + t)) for d, t in bar]


def _row(
    task: str, policy: str, split: str, records: list[Any], env: Any, test_returns: np.ndarray
) -> dict[str, Any]:
    summary = summarize_episodes(records, env, task)
    test_mean = float(np.mean(test_returns))
    drop = test_mean - summary["mean_return"]
    return {
        "task": task,
        "policy": policy,
        "split": split,
        "episodes": summary["episodes"],
        "mean_return": summary["mean_return"],
        "std_return": summary["std_return"],
        "test_mean_return": test_mean,
        "drop": drop,
        "drop_pct": 100.0 * drop / abs(test_mean) if test_mean != 0 else None,
        "over_budget_rate": summary["over_budget_rate"],
        "violation_rate": summary["violation_rate"],
        "mean_costs": summary["mean_costs"],
    }


def evaluate_families(
    task: str,
    policies: Iterable[str] = FAMILY_POLICIES,
    families: Iterable[str] | None = None,
    max_episodes: int | None = None,
    seed: int = 0,
    progress: bool | None = False,
    protocol_days: bool = False,
) -> FamilyResult:
    """Each policy on the test split and on each family, paired by calendar day and env seed
    (module docstring).

    Args:
        task: A registered task.
        policies: Baselines of the task (:func:`~powerzoo.benchmarks.naive.table_baselines`);
            the ones it lacks are left out with a note.
        families: Families to run (default: every one, :func:`scenario_families`).
        max_episodes: Days per split, evenly spread (``None``: every day).
        seed: Env seed of test day 0 (test day ``d``: ``seed + d``).
        progress: tqdm bars (``None``: when stderr is a terminal).
        protocol_days: Only the baselines table's test days
            (:func:`~powerzoo.benchmarks.baselines.evaluation_protocol`) and the family days
            whose calendar day is one of them: the days a campaign with ``env_seeds: protocol``
            tests every trial on (``max_episodes`` must then be ``None``).

    Returns:
        The rows and episodes.
    """
    if protocol_days and max_episodes is not None:
        raise ValueError("protocol_days already chooses the days: leave max_episodes unset")
    known = scenario_families(task)
    families = list(known if families is None else families)
    unknown = [f for f in families if f not in known]
    if unknown:
        raise ValueError(
            f"{task} has no family {', '.join(unknown)}; its families: {', '.join(known) or 'none'}"
        )
    defined = table_baselines(task)
    wanted = list(dict.fromkeys(policies))
    chosen = [p for p in wanted if p in defined]
    notes = [
        f"{task} defines no {p} baseline (its baselines: {', '.join(defined)})"
        for p in wanted
        if p not in defined
    ]
    if not chosen:
        raise ValueError("; ".join(notes))
    if protocol_days:
        from powerzoo.benchmarks.baselines import evaluation_protocol

        test_days = [int(d) for d in evaluation_protocol(task)["day_ids"]]
        chosen_days = set(test_days)
        pairs = {f: [p for p in paired_days(task, f) if p[1] in chosen_days] for f in families}
    else:
        test_days = select_days(make_task(task, "test").n_days, max_episodes)
        pairs = {f: paired_days(task, f, max_episodes) for f in families}
    for f in families:
        if not pairs[f]:
            notes.append(f"{f}: none of its days is a test day; left out")
    families = [f for f in families if pairs[f]]
    needed = sorted(set(test_days) | {t for f in families for _, t in pairs[f]})
    calendars = {s: make_task(task, s).split_days for s in ("test", *families)}
    rows: list[dict[str, Any]] = []
    episodes: list[dict[str, Any]] = []
    for policy in chosen:
        by_day: dict[int, Any] = {}
        splits = [("test", list(zip(test_days, test_days, strict=True)))]
        splits += [(f, pairs[f]) for f in families]
        for split, split_pairs in splits:
            started = time.perf_counter()
            env = make_env(task, split=split, seed=seed)
            agent = make_baseline_policy(policy, env, seed)
            if split == "test":  # every test day a family pairs with, once
                records = _run(env, agent, needed, seed, f"{task}/{policy}/test", progress)
                by_day = dict(zip(needed, records, strict=True))
                records = [by_day[d] for d in test_days]
            else:
                days = [t for _, t in split_pairs]
                label = f"{task}/{policy}/{split}"
                records = _run(env, agent, [d for d, _ in split_pairs], seed, label, progress, days)
            twins = [t for _, t in split_pairs]
            paired = np.asarray([by_day[t]["return"] for t in twins])
            row = _row(task, policy, split, records, env, paired)
            rows.append({**row, "seconds": time.perf_counter() - started})
            episodes += _episode_rows(
                (task, policy, split), split_pairs, seed, records, by_day, calendars[split]
            )
    cost_names = tuple(rows[0]["mean_costs"])
    return FamilyResult(task, rows, episodes, cost_names, notes)


def _episode_rows(
    keys: tuple[str, str, str],
    pairs: Sequence[tuple[int, int]],
    seed: int,
    records: Sequence[Any],
    by_day: Mapping[int, Any],
    calendar: np.ndarray,
) -> list[dict[str, Any]]:
    """Rows of :data:`EPISODE_FIELDS` of one (task, policy, split)'s episodes."""
    task, policy, split = keys
    return [
        {
            "task": task,
            "policy": policy,
            "split": split,
            "day_id": int(d),
            "calendar_day": int(calendar[d]),
            "test_day_id": int(t),
            "env_seed": int(seed + t),
            "return": float(r["return"]),
            "test_return": float(by_day[t]["return"]),
            "total_cost": float(np.sum(r["costs"])),
        }
        for (d, t), r in zip(pairs, records, strict=True)
    ]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _csv(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    lines = [",".join(columns)]
    lines += [",".join(_cell(row.get(c)) for c in columns) for row in rows]
    return "\n".join(lines) + "\n"


def _markdown(result: FamilyResult) -> str:
    """One line per split: each policy's mean return and drop, and the rule-to-oracle gap."""
    policies = list(dict.fromkeys(r["policy"] for r in result.rows))
    splits = list(dict.fromkeys(r["split"] for r in result.rows))
    cell = {(r["policy"], r["split"]): r for r in result.rows}
    head = ["split", "days"]
    for p in policies:
        head += [f"{p} return", f"{p} drop", f"{p} drop %"]
    has_gap = {"rule_based", "oracle"} <= set(policies)
    head += ["rule below oracle %"] if has_gap else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in splits:
        first = cell[(policies[0], s)]
        out = [s, str(first["episodes"])]
        for p in policies:
            r = cell[(p, s)]
            pct = "" if r["drop_pct"] is None else f"{r['drop_pct']:+.1f}"
            out += [f"{r['mean_return']:,.1f}", f"{r['drop']:+,.1f}", pct]
        if has_gap:
            rule, oracle = cell[("rule_based", s)], cell[("oracle", s)]
            scale = abs(oracle["mean_return"])
            gap = 100 * (oracle["mean_return"] - rule["mean_return"]) / scale if scale else None
            out.append("" if gap is None else f"{gap:.1f}")
        lines.append("| " + " | ".join(out) + " |")
    text = [
        f"# Scenario families of {result.task}",
        "",
        "drop = mean test return - mean family return on the same calendar days and env seeds "
        "($ per episode; positive: the family costs the policy return); the test row's own "
        "drop is 0.",
        "",
        *lines,
    ]
    text += ["", *[f"- {n}" for n in result.notes]] if result.notes else []
    return "\n".join(text) + "\n"


def write_families(result: FamilyResult, out_dir: str | Path) -> dict[str, Path]:
    """Write ``families.csv`` (one row per policy and split), ``families.md`` (one line per
    split) and ``family_episodes.csv`` (one row per episode) into ``out_dir``.

    Args:
        result: The table of :func:`evaluate_families`.
        out_dir: The output folder.

    Returns:
        The files by name.
    """
    out = Path(out_dir)
    costs = [f"cost_{n}" for n in result.cost_names]
    rows = [
        {**r, **{f"cost_{n}": r["mean_costs"][n] for n in result.cost_names}} for r in result.rows
    ]
    return {
        "csv": atomic_write_text(out / "families.csv", _csv([*ROW_FIELDS, *costs], rows)),
        "md": atomic_write_text(out / "families.md", _markdown(result)),
        "episodes": atomic_write_text(
            out / "family_episodes.csv", _csv(EPISODE_FIELDS, result.episodes)
        ),
    }


def count_test_episodes(
    min_episodes: int = MIN_TEST_EPISODES, path: str | Path | None = None
) -> list[dict[str, Any]]:
    """Per task of the baselines table: its test episodes, the test days its split has, and the
    seconds per episode of each baseline as the table recorded them; ``short`` when fewer than
    ``min_episodes``, with the seconds ``min_episodes`` episodes would take (every baseline).

    Args:
        min_episodes: Test episodes every task should hold.
        path: A baselines JSON file (default: the packaged one).

    Returns:
        One dict per task, in table order.
    """
    out: dict[str, dict[str, Any]] = {}
    for row in load_baselines(path)["results"]:
        if row["split"] != "test":
            continue
        entry = out.setdefault(
            row["task"],
            {"task": row["task"], "episodes": int(row["episodes"]), "per_episode_s": {}},
        )
        entry["episodes"] = min(entry["episodes"], int(row["episodes"]))
        entry["per_episode_s"][row["policy"]] = float(row["seconds"]) / max(int(row["episodes"]), 1)
    for entry in out.values():
        entry["test_days"] = make_task(entry["task"], "test").n_days
        entry["short"] = entry["episodes"] < min_episodes
        target = min(min_episodes, entry["test_days"])
        entry["seconds_for_min"] = target * sum(entry["per_episode_s"].values())
    return list(out.values())
