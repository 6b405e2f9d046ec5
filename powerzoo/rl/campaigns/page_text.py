"""The Markdown of a campaign's results page (:mod:`powerzoo.rl.campaigns.page`): the summary
table, the compute time, one table per task, the missing trials.

Which trained row the summary names: among the rows (algorithm/setting, pooled over its finished
seeds) whose share of test days over budget is at most :data:`FEASIBLE_OVER_BUDGET_RATE`, the one
with the highest budget-aware score (ties: the higher mean return). A fixed share rather than the
rule-based policy's own: on some tasks the rule is over budget on most days, and a row as often
over budget would not be "within budget".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from powerzoo.benchmarks.baselines import baseline_rows, reference_policy
from powerzoo.benchmarks.budget_snapshot import budgets_of
from powerzoo.benchmarks.evaluation import return_unit
from powerzoo.benchmarks.stats import BOOTSTRAP_RESAMPLES, CONFIDENCE
from powerzoo.provenance import short_commit
from powerzoo.rl.campaigns.trial import tested_model_steps
from powerzoo.tasks import task_spec

__all__ = [
    "seeds_text",
    "FEASIBLE_OVER_BUDGET_RATE",
    "best_within_budget",
    "summary_markdown",
    "index_markdown",
]

FEASIBLE_OVER_BUDGET_RATE = 0.05
"""Largest share of test days over budget of a trained row the summary calls within budget (one
day in twenty)."""


def unsigned_zero(text: str) -> str:
    """``text`` (a number as written) without the sign of a value that rounds to 0 (``-0.000``
    -> ``0.000``, ``+0.00`` -> ``0.00``): a signed zero would read as below or above a bound
    printed ``0.000``."""
    return text[1:] if text[:1] in ("-", "+") and not text.strip("+-0.,") else text


def seeds_text(n: int) -> str:
    """``"1 seed"`` / ``"n seeds"``."""
    return f"{n} seed{'s' if n != 1 else ''}"


def signed_money(value: float) -> str:
    """``+1,234.50`` / ``-0.75`` ($, two decimals, always signed but for a value that rounds to
    0)."""
    return unsigned_zero(f"{value:+,.2f}")


def _num(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.2f}"


def _score(row: dict[str, Any], key: str, interval: bool = True) -> str:
    if row.get(key) is None:
        return "n/a"
    if not interval:
        return f"{row[key]:.3f}"
    return f"{row[key]:.3f} [{row[f'{key}_ci_low']:.3f}, {row[f'{key}_ci_high']:.3f}]"


def _share(rate: float | None) -> str:
    """A share as a percentage, one decimal unless it is a whole one (``4.6%``, ``5%``)."""
    if rate is None:
        return "n/a"
    return f"{rate * 100:.1f}".removesuffix(".0") + "%"


def _steps(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1000:.0f}k" if n >= 1000 else str(n)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _rank(row: dict[str, Any]) -> tuple[float, float]:
    score = row.get("cmdp_score")
    return (float("-inf") if score is None else score, row["mean_return"])


def best_within_budget(
    rows: Sequence[dict[str, Any]], max_over_budget: float = FEASIBLE_OVER_BUDGET_RATE
) -> dict[str, Any] | None:
    """The trained row (``kind == "trained"``) over budget on at most ``max_over_budget`` of its
    episodes with the highest budget-aware score (then mean return); ``None`` if none is."""
    feasible = [
        r
        for r in rows
        if r["kind"] == "trained"
        and r.get("over_budget_rate") is not None
        and r["over_budget_rate"] <= max_over_budget + 1e-12
    ]
    return max(feasible, key=_rank) if feasible else None


def _seeds_of(folder: Any, task: str, label: str, tested: bool = False) -> str:
    """Finished / planned seeds of a trained row; with ``tested``, each finished seed and the
    env steps of the model its test evaluation used (``2/5: 0 (50k), 3 (301k)``)."""
    trials = [t for t in folder.campaign.trials if t.task == task and t.label == label]
    done = [t for t in trials if t.trial_id in folder.records]
    cell = f"{len(done)}/{len(trials)}"
    if tested and done:
        steps = [tested_model_steps(folder.out_dir, t, folder.records[t.trial_id]) for t in done]
        cell += ": " + ", ".join(
            f"{t.seed} ({_steps(n)})" for t, n in zip(done, steps, strict=True)
        )
    return cell


def _rule_gap(row: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """``, return -229,375 against the rule's -199,226``: the row's mean return next to the
    rule-based policy's (task units; the scores compress where random is far worse)."""
    rule = next((r for r in rows if r["policy"] == "rule_based" and r["kind"] == "baseline"), None)
    if rule is None:
        return ""
    return f", return {_num(row['mean_return'])} against the rule's {_num(rule['mean_return'])}"


def _baseline_cell(rows: Sequence[dict[str, Any]], policy: str | None, column: str) -> str:
    """The cell of baseline ``policy`` in the ``column`` column (named when it is another
    policy, e.g. the rule as the reference of a task without an oracle)."""
    row = next((r for r in rows if r["policy"] == policy and r["kind"] == "baseline"), None)
    if row is None:
        return "n/a"
    name = "" if policy == column else f"{policy}: "
    return f"{name}{_score(row, 'cmdp_score', False)} ({_share(row['over_budget_rate'])} over)"


def _reference(task: str, split: str) -> str | None:
    try:
        return reference_policy(baseline_rows(task, split))
    except (ValueError, FileNotFoundError):
        return None


def summary_markdown(
    folder: Any, rows: Sequence[dict[str, Any]], diagnoses: dict[str, str] | None = None
) -> str:
    """``summary.md``: one row per task of the campaign: the idle policy (doing nothing, where
    the task has it), the rule-based policy, the oracle (or the table's reference baseline) and
    the best trained row within budget (:func:`best_within_budget`), each with its budget-aware
    score and share of days over budget; then the ``diagnoses`` (task: measured reason no
    trained row reaches the rule within the budgets)."""
    campaign = folder.campaign
    lines = [
        "| task | idle | rule-based | oracle | best trained within budget | trained rows |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for task in campaign.tasks:
        mine = [r for r in rows if r["task"] == task]
        trained = [r for r in mine if r["kind"] == "trained"]
        best = best_within_budget(mine)
        if best is not None:
            cell = (
                f"{best['policy']}: {_score(best, 'cmdp_score')}, "
                f"{_share(best['over_budget_rate'])} over{_rule_gap(best, mine)}, "
                f"{_seeds_of(folder, task, best['policy'])} seeds"
            )
        elif trained:
            top = max(trained, key=_rank)
            cell = (
                f"none (best: {top['policy']} {_score(top, 'cmdp_score', False)}, "
                f"{_share(top['over_budget_rate'])} over)"
            )
        else:
            cell = "no finished trial"
        labels = list(dict.fromkeys(t.label for t in campaign.trials if t.task == task))
        done = sum(1 for r in trained if r["policy"] in labels)
        lines.append(
            f"| {task} | {_baseline_cell(mine, 'idle', 'idle')} | "
            f"{_baseline_cell(mine, 'rule_based', 'rule_based')} | "
            f"{_baseline_cell(mine, _reference(task, campaign.split), 'oracle')} | {cell} | "
            f"{done}/{len(labels)} |"
        )
    note = (
        "\nBudget-aware score (0 = random, 1 = oracle; per test day the gain over random, capped "
        "at 0 on a day over budget) with its 95 % bootstrap interval, the share of test days "
        "over budget and, for the best trained row, its mean return next to the rule's. "
        "Within budget: over budget on at most "
        f"{FEASIBLE_OVER_BUDGET_RATE:.0%} of the test days (pooled over the finished seeds). "
        "Idle: the operator does nothing (storage at 0 MW, loads served as they come, chargers "
        "charging on plug-in; each task's section says what); n/a where doing nothing is no "
        "policy (generator set-points must be chosen).\n"
    )
    if diagnoses:
        note += (
            "\nHow the trained rows miss or reach the rule within the budgets (measured):\n\n"
            + "".join(
                f"- **{task}**: {diagnoses[task]}\n" for task in campaign.tasks if task in diagnoses
            )
        )
    return "\n".join(lines) + "\n" + note


def _task_table(
    folder: Any, task: str, rows: Sequence[dict[str, Any]], names: Sequence[str]
) -> str:
    pinned = budgets_of(task)
    budgets = {n: pinned.budget(n) for n in names} if pinned is not None else {}
    head = [
        "policy",
        "seeds (model tested)",
        "mean return [95% CI]",
        "normalized score",
        "budget-aware score [95% CI]",
        "days over budget",
        *[
            f"{n} / episode (budget {budgets[n]:g})"
            if budgets.get(n) is not None
            else f"{n} / episode (no budget)"
            for n in names
        ],
    ]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|",
    ]
    for r in rows:
        seeds = (
            f"table, seed {r['seeds']}"
            if r["kind"] == "baseline"
            else _seeds_of(folder, task, r["policy"], tested=True)
        )
        cells = [
            r["policy"],
            seeds,
            f"{_num(r['mean_return'])} [{_num(r['mean_return_ci_low'])}, "
            f"{_num(r['mean_return_ci_high'])}]",
            _score(r, "normalized_score", False),
            _score(r, "cmdp_score"),
            _share(r.get("over_budget_rate")),
            *[f"{r[f'cost_{n}_mean']:.4g}" for n in names],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _timing_text(folder: Any, timing: dict[str, Any]) -> str:
    if not timing:
        return "No trial has finished yet.\n"
    campaign = folder.campaign
    n_all = len(campaign.trials)
    lines = [
        f"- Finished trials: {timing['finished']} of {n_all}; their training and test evaluation "
        f"took {_hours(timing['trial_seconds'])} in all (one core each).",
        f"- Wall time here: {_hours(timing['wall_seconds'])} from the first finished trial's "
        "start to the last one's end"
        + (
            f" (finished trials' time / wall time: {timing['parallelism']:.1f}"
            + ("; trials still running are not counted)." if folder.missing else ").")
            if timing["parallelism"]
            else "."
        ),
    ]
    if timing["estimated_missing"]:
        sources = ", ".join(f"{n} from {lv}" for lv, n in timing["estimated_from"].items())
        lines.append(
            f"- Whole campaign (estimate): {_hours(timing['total_seconds'])} of trial time, "
            f"{_hours(timing['left_seconds'])} of it still to run (about "
            f"{_hours(timing['left_seconds'] / 2)} on two workers); each of the "
            f"{timing['estimated_missing']} unfinished trials counted at the mean time of the "
            f"finished trials most like it ({sources}). Estimates from another task or algorithm "
            "are rough: multi-agent and 7-day tasks train longer."
        )
    else:
        lines.append(f"- Whole campaign: {_hours(timing['total_seconds'])} of trial time.")
    trial_id, longest = timing["longest"]
    per_n = ", ".join(f"{n} workers: {_hours(s)}" for n, s in timing["cluster"].items())
    lines += [
        f"- On a cluster (trial time / N workers, one core per trial, but never less than the "
        f"longest trial): {per_n}; lower bound {_hours(longest)} (the longest trial, "
        f"`{trial_id}`).",
        "- Not counted: the gather step of `powerzoo campaign` (it evaluates the baselines again "
        "over every seed; the tso oracle takes about a minute a day).",
        code_versions_text(timing["code"]),
    ]
    return "\n".join(lines) + "\n"


def code_versions_text(versions: list[dict[str, Any]]) -> str:
    """One line on the code that produced the records (package source hashes and commits)."""
    parts = []
    for v in versions:
        if v["source_hash"] is None:
            parts.append(f"{v['trials']} recorded before trials kept their code")
        else:
            commits = ", ".join(f"`{short_commit(c)}`" for c in v["commits"])
            parts.append(
                f"{v['trials']} by sources `{v['source_hash']}`"
                + (f" (commit {commits})" if commits else "")
            )
    return (
        "- Code (a hash of the package's Python sources, and the commit they were run from): "
        + "; ".join(parts)
        + "."
    )


def _missing_text(folder: Any) -> str:
    if not folder.missing:
        return "None: every trial finished.\n"
    groups: dict[tuple[str, str], dict[str, list[str]]] = {}
    for trial in folder.campaign.trials:
        why = folder.missing.get(trial.trial_id)
        if why is not None:
            by_why = groups.setdefault((trial.task, trial.label), {})
            by_why.setdefault(why, []).append(str(trial.seed))
    lines = []
    for (task, label), by_why in groups.items():
        parts = "; ".join(f"seed {', '.join(seeds)}: {why}" for why, seeds in by_why.items())
        lines.append(f"- `{task}` {label}: {parts}")
    return "\n".join(lines) + "\n"


def index_markdown(
    folder: Any,
    rows: Sequence[dict[str, Any]],
    cost_names: dict[str, tuple[str, ...]],
    timing: dict[str, Any],
    images: dict[str, list[Any]],
    diagnoses: dict[str, str] | None = None,
    preface: str | None = None,
) -> str:
    """``index.md``: ``preface`` (Markdown, under the title), status and protocol, the summary
    (:func:`summary_markdown`), the compute time, per task its table and plots, the missing
    trials."""
    campaign = folder.campaign
    n_done, n_all = len(folder.records), len(campaign.trials)
    status = (
        "every trial finished"
        if not folder.missing
        else f"a partial campaign: {len(folder.missing)} trials missing, listed at the end"
    )
    parts = [
        f"# PowerZoo benchmark results: campaign `{campaign.name}`\n\n"
        + (f"{preface.strip()}\n\n" if preface and preface.strip() else "")
        + f"{n_done} of {n_all} trials finished ({status}). Made by `powerzoo campaign-report` "
        "from the trial records; nothing was trained or evaluated again.\n\n"
        f"Split `{campaign.split}`. Baselines (random, rule-based, oracle and, where doing "
        "nothing is a policy, idle) are the packaged "
        "baselines table's rows (its seed, on the table's days); each trained row pools the "
        "test episodes of the finished seeds of one algorithm and setting (seeds: finished / "
        "planned, then each finished seed with the env steps of the model its test used: the "
        "best validation evaluation, which for -L runs ranks fewer days over budget first, then "
        "the smaller excess over the budgets, then the return; for the others, the return). "
        f"Intervals: {CONFIDENCE:.0%} percentile bootstrap over the pooled "
        f"episodes ({BOOTSTRAP_RESAMPLES:,} resamples). Normalized score: mean return, 0 = "
        "random, 1 = oracle. Budget-aware score: per test day the gain over random, capped at 0 "
        "on a day over budget, over the oracle's mean gain, so on any day a policy over budget "
        "cannot top one within it. Scores compress where random is far worse than the rule: the "
        "summary also gives the best row's mean return next to the rule's. Days over budget: the "
        "share of episodes (days; weeks on the week-long tasks) in which a "
        "budgeted cost exceeds the task's per-episode budget. Costs: mean per episode, in "
        "each constraint's own unit, never added together.\n",
        "## Summary\n\n" + summary_markdown(folder, rows, diagnoses),
        "## Compute time\n\n" + _timing_text(folder, timing),
    ]
    for task in campaign.tasks:
        mine = [r for r in rows if r["task"] == task]
        if not mine:
            parts.append(f"## {task}\n\nNo baseline rows and no finished trial.\n")
            continue
        unit = return_unit(task_spec(task))
        text = f"## {task}\n\nReturns in {unit}.\n\n" + _task_table(
            folder, task, mine, cost_names[task]
        )
        if any(r["policy"] == "idle" and r["kind"] == "baseline" for r in mine):
            text += f"\n\nIdle: {task_spec(task).idle_doc}."
        if diagnoses and task in diagnoses:
            text += f"\n\n**Diagnosis (measured).** {diagnoses[task]}"
        for path in images.get(task, []):
            text += f"\n\n![{path.stem}]({path.name})"
        parts.append(text + "\n")
    parts.append("## Missing trials\n\n" + _missing_text(folder))
    return "\n".join(parts)
