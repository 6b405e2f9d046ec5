"""The Markdown of a campaign's benchmark v2 page (:mod:`powerzoo.rl.campaigns.score_page`):
coverage, the headline aggregates, the claims, one table per task, the trials left out.

Which row a claim names: on a task with learnable headroom, among the rows within budget (pooled
mean cost within every budget) whose paired difference against the anchor has a confidence
interval above 0, the one with the highest performance; without one, the task's diagnosis, or
"no row yet above its anchor".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from powerzoo.benchmarks.evaluation import per_episode_units, return_unit
from powerzoo.benchmarks.score_v2 import (
    MIN_HEADROOM_PCT,
    ORACLE_POLICY,
    RULE_POLICY,
    TaskReference,
)
from powerzoo.benchmarks.stats import CONFIDENCE
from powerzoo.rl.campaigns.page_text import _num, _share, unsigned_zero
from powerzoo.rl.campaigns.score_aggregates import BUDGETS_FIRST
from powerzoo.rl.campaigns.score_coverage import coverage_text
from powerzoo.rl.campaigns.score_families import FAMILIES_COMMAND
from powerzoo.rl.campaigns.score_ties import AT_ANCHOR, ties_text
from powerzoo.tasks import task_spec

__all__ = [
    "MIN_SENSITIVITY",
    "budget_not_robust",
    "claim_row",
    "score_sensitivity",
    "results_markdown",
]

MIN_SENSITIVITY = 0.01
"""The score change a 1 % change of the anchor's cost should at least make (score units)."""
_STATISTICS = ("iqm", "mean", "median", "optimality_gap", "oracle_gap_pct_mean")


def _score(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else unsigned_zero(f"{value:.{digits}f}")


def _interval(row: Mapping[str, Any], key: str, digits: int = 3) -> str:
    """``0.412 [0.301, 0.522]`` of column ``key`` and its ``_ci_low`` / ``_ci_high``."""
    if row.get(key) is None:
        return "n/a"
    low, high = row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
    bounds = "" if low is None else f" [{_score(low, digits)}, {_score(high, digits)}]"
    return _score(row[key], digits) + bounds


def _estimate(row: Mapping[str, Any], digits: int = 3) -> str:
    """``0.412 [0.301, 0.522]`` of an aggregate row (``value``, ``ci_low``, ``ci_high``)."""
    renamed = {"x": row["value"], "x_ci_low": row["ci_low"], "x_ci_high": row["ci_high"]}
    return _interval(renamed, "x", digits)


def _signed(value: float) -> str:
    return unsigned_zero(("+" if value > 0 else "") + _num(value))


def _paired(row: Mapping[str, Any], prefix: str) -> str:
    """``+120 [+35, +210] (+1.2 %), 4/5 better`` of the paired difference ``prefix_*``."""
    diff = row.get(f"{prefix}_diff")
    if diff is None:
        return "n/a"
    pct = row[f"{prefix}_diff_pct"]
    return (
        f"{_signed(diff)} [{_signed(row[f'{prefix}_diff_ci_low'])}, "
        f"{_signed(row[f'{prefix}_diff_ci_high'])}]"
        + ("" if pct is None else f" ({pct:+.2f} %)")
        + f", {row[f'{prefix}_seeds_better']}/{row['n_seeds']} better"
    )


def _share_interval(row: Mapping[str, Any], key: str) -> str:
    return f"{_share(row[key])} [{_share(row[f'{key}_ci_low'])}, {_share(row[f'{key}_ci_high'])}]"


def claim_row(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """Among ``rows`` (one task's), the row within budget whose paired difference against the
    anchor has its interval above 0 with the highest performance (then the highest difference);
    ``None`` if none has."""
    above = [r for r in rows if r["within_budget"] and above_anchor(r["anchor_diff_ci_low"], r)]

    def rank(r: Mapping[str, Any]) -> tuple[float, float]:
        perf = r["performance"]
        return (float("-inf") if perf is None else perf, r["anchor_diff"])

    return max(above, key=rank) if above else None


def above_anchor(value: float | None, row: Mapping[str, Any]) -> bool:
    """Whether ``value`` (per episode: ``row``'s paired difference against its anchor, or a
    bound of its interval) is above the anchor by more than :data:`AT_ANCHOR`."""
    scale = max(abs(row.get("anchor_return") or 0.0), 1.0)
    return value is not None and value > AT_ANCHOR * scale


def _aggregate_cell(aggregates: Sequence[Mapping[str, Any]], family: str, stat: str) -> str:
    row = next((a for a in aggregates if a["family"] == family and a["statistic"] == stat), None)
    if row is None:
        return "n/a"
    digits = 2 if stat == "oracle_gap_pct_mean" else 3
    return _estimate(row, digits)


def _task_lists(scored: Any) -> str:
    scored_tasks = {r["task"] for r in scored.rows}
    groups: dict[str, list[str]] = {"headline": [], "no learnable headroom": []}
    groups["no oracle scale"] = []
    for task, ref in scored.references.items():
        if ref is None or ref.scale != "oracle":
            groups["no oracle scale"].append(task)
        elif not ref.learnable_headroom:
            groups["no learnable headroom"].append(f"{task} ({_score(ref.headroom_pct, 2)} %)")
        elif task in scored_tasks:
            groups["headline"].append(task)
    waiting = [
        t for t, ref in scored.references.items() if t not in scored_tasks and _learnable(ref)
    ]
    return (
        f"Tasks in the headline (headroom of at least {MIN_HEADROOM_PCT:g} % and a finished "
        f"row): {', '.join(groups['headline']) or 'none yet'}. No learnable headroom (rule-to-"
        f"oracle headroom under {MIN_HEADROOM_PCT:g} %; left out of the headline): "
        f"{', '.join(groups['no learnable headroom']) or 'none'}. No oracle scale (no oracle, "
        f"or none above the anchor; read on the gain): "
        f"{', '.join(groups['no oracle scale']) or 'none'}. With headroom but no finished row "
        f"yet: {', '.join(waiting) or 'none'}.\n"
    )


def _learnable(ref: TaskReference | None) -> bool:
    return ref is not None and ref.learnable_headroom


def _headline_text(scored: Any) -> str:
    aggregates = scored.aggregates
    families = list(dict.fromkeys(a["family"] for a in aggregates))
    if not families:
        return "No finished row on a task with learnable headroom yet.\n\n" + _task_lists(scored)
    lines = [
        "| family | tasks | runs | runs per task | IQM [95% CI] | mean [95% CI] | median "
        "[95% CI] | optimality gap [95% CI] | cost above the oracle, % [95% CI] | runs within "
        "budget |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for family in families:
        iqm = next(a for a in aggregates if a["family"] == family and a["statistic"] == "iqm")
        cells = [_aggregate_cell(aggregates, family, s) for s in _STATISTICS]
        within = [
            w
            for r in scored.rows
            if r["family"] == family and r["task"] in iqm["tasks"]
            for w in r["run_within_budget"]
        ]
        cells.append(f"{sum(within)}/{len(within)}")
        per_task = [
            sum(len(r["run_performance"]) for r in scored.rows if (r["family"], r["task"]) == key)
            for key in ((family, t) for t in iqm["tasks"])
        ]
        low, high = min(per_task), max(per_task)
        spread = f"{low}-{high}" if low < high else str(low)
        row = f"| {family} | {iqm['n_tasks']} | {iqm['n_runs']} | {spread} | "
        lines.append(row + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n\n"
    text += (
        "Per-run performance (0 = anchor, 1 = oracle) pooled over the tasks with learnable "
        "headroom: IQM of all runs, mean and median of the tasks' means, optimality gap "
        "1 - mean(min(score, 1)); cost above the oracle: the mean over the family's cost tasks "
        "of the runs' extra cost in % of the oracle's; runs within budget: the runs whose mean "
        "cost keeps every budget (these aggregates read performance alone and count every run; "
        "the probability of improvement below also ranks the budgets first). Intervals: "
        "stratified bootstrap, runs drawn within each task: a task with one run adds no spread, "
        "so until every task has several runs the intervals are too narrow.\n\n"
        + _task_lists(scored)
    )
    pairs = [a for a in aggregates if a["versus"] and not a["statistic"].endswith(BUDGETS_FIRST)]
    if pairs:
        first = {
            (a["family"], a["versus"]): a
            for a in aggregates
            if a["statistic"].endswith(BUDGETS_FIRST)
        }
        text += (
            "\nProbability of improvement (a run of X above a run of Y on the same task, "
            "averaged over the tasks both have): budgets first (a run whose mean cost keeps every "
            "budget above every run that does not, then performance), and on performance alone:"
            "\n\n| X | Y | tasks | P(X > Y), budgets first [95% CI] | P(X > Y), performance "
            "alone [95% CI] |\n|---|---|---:|---:|---:|\n"
            + "".join(
                f"| {a['family']} | {a['versus']} | {a['n_tasks']} | "
                f"{_estimate(first[(a['family'], a['versus'])])} | {_estimate(a)} |\n"
                for a in pairs
            )
        )
    if scored.files.get("profiles") is not None:
        text += (
            "\nPerformance profiles (the share of runs scoring above each threshold, averaged "
            "over the tasks, with a stratified bootstrap band): left, every run on performance "
            "alone; right, a run over any budget counts as scoring above no threshold, so a "
            "family's curve never rises above its share of runs within budget (runs scoring "
            "below the lowest threshold drawn count above none in either panel).\n"
            f"\n![performance profiles]({scored.files['profiles'].name})\n"
        )
    return text


def _claims_text(scored: Any, diagnoses: Mapping[str, str]) -> str:
    lines = []
    for task, ref in scored.references.items():
        mine = [r for r in scored.rows if r["task"] == task]
        best, units = claim_row(mine), per_episode_units([task])
        if ref is not None and ref.scale != "oracle" and best is not None:
            lines.append(
                f"- **{task}** (no oracle scale, read on the gain): {best['label']} within "
                f"budget, {_paired(best, 'anchor')} against {best['anchor']} ({units})."
            )
        if not _learnable(ref):
            continue
        if best is not None:
            lines.append(
                f"- **{task}**: {best['label']} within budget, performance "
                f"{_interval(best, 'performance')}, {_paired(best, 'anchor')} against "
                f"{best['anchor']} ({units})." + _above_oracle_text(best)
            )
        elif task in diagnoses:
            lines.append(f"- **{task}**: no row above its anchor yet. {diagnoses[task]}")
        else:
            lines.append(f"- **{task}**: no row yet above its anchor.")
    if ties := ties_text(scored.rows):
        lines.append(ties)
    dull = {
        t: s
        for t, ref in scored.references.items()
        if ref is not None and (s := score_sensitivity(ref)) is not None and s < MIN_SENSITIVITY
    }
    lines.append(
        f"- Score sensitivity (score change for a 1 % change of the anchor's cost) under "
        f"{MIN_SENSITIVITY:g}: "
        + (", ".join(f"{t} ({s:.4f})" for t, s in dull.items()) if dull else "no cost task")
        + "."
    )
    return "\n".join(lines) + "\n"


def budget_not_robust(row: Mapping[str, Any]) -> bool:
    """Whether a row within budget (its pooled mean cost) has a seed x block interval of its
    largest ``E[C] / d`` that reaches past 1: the budget kept on the mean, not robustly."""
    high = row.get("max_cost_ratio_ci_high")
    return bool(row.get("within_budget")) and high is not None and high > 1.0


def _above_oracle_text(row: Mapping[str, Any]) -> str:
    """The caveats of a claim: a performance above 1 (a return above the oracle's, bought with
    the budget: the learners constrain the mean cost, not each episode's), and a mean-cost
    interval reaching past the budget (:func:`budget_not_robust`)."""
    if row.get("max_cost_ratio") is None:
        return ""
    spent = (
        f"its largest mean cost is {_share(row['max_cost_ratio'])} of its budget"
        + (
            f" [{_share(row['max_cost_ratio_ci_low'])}, {_share(row['max_cost_ratio_ci_high'])}]"
            if row.get("max_cost_ratio_ci_high") is not None
            else ""
        )
        + f" and {_share(1.0 - row['feasibility'])} of its test episodes are over a budget"
    )
    text = ""
    if row["performance"] is not None and row["performance"] > 1.0:
        text += (
            " Performance above 1 is a return above the oracle's, within the mean-cost budget "
            f"the learners train under: {spent}."
        )
    if budget_not_robust(row):
        text += (
            " Within budget on the mean only: the interval of its mean cost reaches past the "
            "budget" + ("." if text else f" ({spent}).")
        )
    return text


def score_sensitivity(ref: TaskReference) -> float | None:
    """The score change for a 1 % change of the anchor's cost, ``0.01 |R_anchor| / (R_oracle -
    R_anchor)`` (score units), on a cost task with an oracle scale; ``None`` elsewhere."""
    if not ref.cost_task or ref.scale != "oracle":
        return None
    return 0.01 * abs(ref.mean_return(ref.anchor)) / ref.headroom


def _reference_text(task: str, ref: Any) -> str:
    if ref is None:
        return "The baselines table cannot score this task (no anchor or no rows)."
    anchor = f"anchor {ref.anchor} {_num(ref.mean_return(ref.anchor))}" + (
        "" if ref.anchor_within_budget else " (over budget: no anchor candidate keeps the budgets)"
    )
    oracle = f"oracle {_num(ref.mean_return(ORACLE_POLICY))}" if ref.has_oracle else "no oracle"
    headroom = "n/a" if ref.headroom_pct is None else f"{ref.headroom_pct:.2f} %"
    sens = score_sensitivity(ref)
    return (
        f"Returns in {return_unit(task_spec(task))}; {len(ref.day_ids)} test episodes. "
        f"{anchor}; {oracle}; headroom {headroom}"
        + ("" if ref.learnable_headroom else " (no learnable headroom)")
        + ("" if sens is None else f"; score sensitivity {sens:.4f} per 1 % of the anchor's cost")
        + "."
    )


def _millions(steps: float) -> str:
    return f"{steps / 1e6:.3g}M" if steps >= 1e6 else f"{steps / 1e3:.3g}k"


def _steps_text(row: Mapping[str, Any]) -> str:
    """``1.71M (1.3M-2.72M)``: the row's median env steps and, over several seeds, their range
    (track S gives CPU seconds, and machines differ in the steps a CPU-second buys)."""
    median = _millions(row["median_env_steps"])
    low, high = row.get("min_env_steps"), row.get("max_env_steps")
    if low is None or high is None or low == high or row.get("n_seeds", 1) < 2:
        return median
    return f"{median} ({_millions(low)}-{_millions(high)})"


def _task_table(task: str, rows: Sequence[Mapping[str, Any]], anchor: str) -> str:
    head = [
        "label",
        "seeds",
        "within budget",
        "episodes within budget [95% CI]",
        "performance [95% CI]",
        "optimality gap % [95% CI]",
        f"vs anchor ({anchor}) [95% CI]",
        f"vs {RULE_POLICY} [95% CI]",
        "env steps: median (seeds' range)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in rows:
        within = "yes" if r["within_budget"] else "NO"
        cells = [
            r["label"],
            f"{r['n_seeds']}/{r['n_trials_planned']}",
            f"{within}, {r['seeds_within_budget']}/{r['n_seeds']}",
            _share_interval(r, "feasibility"),
            _interval(r, "performance"),
            _interval(r, "oracle_gap_pct", 2),
            _paired(r, "anchor"),
            "anchor" if r["anchor"] == RULE_POLICY else _paired(r, "rule"),
            _steps_text(r),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _tasks_text(scored: Any, diagnoses: Mapping[str, str]) -> list[str]:
    parts = []
    for task in scored.folder.campaign.tasks:
        ref = scored.references.get(task)
        mine = [r for r in scored.rows if r["task"] == task]
        text = f"### {task}\n\n{_reference_text(task, ref)}\n\n"
        if mine:
            text += _task_table(task, mine, mine[0]["anchor"])
        else:
            text += "No finished trial yet.\n"
        if task in diagnoses:
            text += f"\n**Diagnosis (measured).** {diagnoses[task]}\n"
        figure = (scored.files.get("curves") or {}).get(task)
        if figure is not None:
            text += f"\n![{task} learning curves]({figure.parent.name}/{figure.name})\n"
        parts.append(text)
    return parts


def _family_line(r: Mapping[str, Any]) -> str:
    """One table line of a ``families_v2.csv`` row."""
    trained = r["source"] == "trained"
    label = r["label"] if trained else f"{r['label']} (baseline)"
    if not trained and r["days"] == "own":
        label = f"{r['label']} (baseline, on its own days)"
    within = "n/a" if r["within_budget"] is None else ("yes" if r["within_budget"] else "NO")
    pct = "n/a" if r["drop_pct"] is None else f"{r['drop_pct']:+.2f} %"
    drop = f"{_signed(r['drop'])} [{_signed(r['drop_ci_low'])}, {_signed(r['drop_ci_high'])}]"
    cells = [
        r["split"],
        label,
        str(r["n_seeds"]) if trained else "-",
        str(r["episodes"]),
        f"{_num(r['mean_return'])} [{_num(r['mean_return_ci_low'])}, "
        f"{_num(r['mean_return_ci_high'])}]",
        drop,
        pct,
        f"{r['seeds_dropping']}/{r['n_seeds']}" if trained else "-",
        f"{within} ({_share(r['feasibility'])})",
    ]
    return "| " + " | ".join(cells) + " |"


def _families_text(scored: Any) -> str:
    """The held-out families section: per task, its rows (trained, then the baselines')."""
    rows, given = scored.family_rows, scored.families_dir
    trained = [r for r in rows if r["source"] == "trained"]
    seeds = (
        "the same env seeds"
        if all(r["env_seeds_paired"] for r in trained)
        else ("the same days (env seeds differ where the protocol tests a subset of the days)")
    )
    text = (
        "Each trained row on the held-out scenario families its trials were also tested on "
        "(the campaign's `evaluation.families`): the family days whose calendar day is a test "
        f"day, each paired with the same trial's episode on that test day, on {seeds}. Drop = "
        "mean test return on the twin days - mean family return (per episode, in the task's "
        f"return unit; > 0: the family costs the row return) [{CONFIDENCE:.0%} seed x test block "
        "bootstrap "
        "interval]; drop %: in % of |mean test return|; seeds dropping: seeds whose own mean "
        "drop is > 0; within budget: the pooled mean cost on the family keeps every budget "
        "(the share of family episodes within every budget). Trials whose record holds no "
        "family episodes are not counted.\n\n"
    )
    if not trained:
        text += "No finished trial holds family episodes yet.\n\n"
    if given is None:
        text += (
            "The rule's and the oracle's drops are not on this page: write them with "
            f"`{FAMILIES_COMMAND}` for each task, then pass `--families-dir DIR`.\n\n"
        )
    else:
        text += (
            f"Baselines: the `powerzoo families` outputs in `{given}`, on the trained rows' "
            "family days where they hold them all (else on their own days, as marked); their "
            "budget columns over all their family episodes.\n\n"
        )
    head = [
        "family",
        "label",
        "seeds",
        "episodes",
        "mean return [95% CI]",
        "drop [95% CI]",
        "drop %",
        "seeds dropping",
        "within budget (episodes within)",
    ]
    for task in scored.folder.campaign.tasks:
        mine = [r for r in rows if r["task"] == task]
        if not mine:
            continue
        lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
        order = list(dict.fromkeys(r["split"] for r in mine))
        lines += [_family_line(r) for f in order for r in mine if r["split"] == f]
        text += f"**{task}**\n\n" + "\n".join(lines) + "\n\n"
        if given is not None and not any(r["source"] == "baseline" for r in mine):
            text += f"No `powerzoo families` output of {task} in `{given}`.\n\n"
    return text


def results_markdown(
    scored: Any, n_resamples: int, command: str, diagnoses: Mapping[str, str]
) -> str:
    """``results_v2.md``: how it was made, coverage, headline aggregates, claims, one table per
    task (``scored``: a :class:`~powerzoo.rl.campaigns.score_page.ScoredCampaign`)."""
    campaign = scored.folder.campaign
    cov = scored.coverage
    paired = "days and env seeds" if campaign.env_seeds == "protocol" else "days"
    parts = [
        f"# PowerZoo benchmark v2 results: campaign `{campaign.name}`\n\n"
        f"Generated by `{command}` from the campaign folder's trial records: nothing was "
        "trained or evaluated again; regenerate it rather than editing it. "
        f"{cov['finished']} of {cov['planned']} trials finished"
        + (" (every trial)." if cov["finished"] == cov["planned"] else " (a partial campaign).")
        + "\n\n"
        f"Each row is one algorithm/setting on one task, its finished seeds written as a "
        f"submission folder (`{scored.files['submissions'].name}/<task>__<label>/`) and scored "
        "as `powerzoo score <folder> --campaign <campaign folder>` scores it (docs/submission.md): "
        f"test split `{campaign.split}`, paired with the baselines table on {paired}. Within "
        "budget: the pooled mean cost keeps every budget (seeds within / seeds; a row within "
        "budget may have a seed over, and the headline's per-run counts judge each seed on its "
        "own); episodes within budget: the share of test episodes within every budget. "
        "Performance: (R - R_anchor) / (R_oracle - R_anchor), the anchor being the best idle, "
        "naive or rule-based baseline that keeps the budgets; no floor. The oracle keeps every "
        "budget on every test day, a stricter constraint than the mean cost a row is held to, "
        "so a row within budget can score above 1. Optimality gap: extra cost in % of the "
        "oracle's (cost tasks). Paired differences: mean per-episode return difference "
        "(per episode, in the task's return unit), seeds whose mean difference is above float "
        "noise (1e-8 of the baseline's |mean return|). Intervals: "
        f"{CONFIDENCE:.0%} percentile, {n_resamples:,} seed x test block bootstrap resamples; "
        "with few seeds (each row gives its count) and the test split's few blocks, such a "
        "bootstrap has few distinct "
        "draws and its intervals tend to be too narrow, so a claim on one or two seeds is "
        "provisional. A task's claim is the best of its rows whose interval is above 0 (up to "
        "three per task here), with no correction for that choice.\n",
        "## Coverage\n\n" + coverage_text(scored),
        "## Headline: families across tasks\n\n" + _headline_text(scored),
        "## Claims\n\n" + _claims_text(scored, diagnoses),
        "## Held-out families\n\n" + _families_text(scored),
        "## Per task\n",
        *_tasks_text(scored, diagnoses),
    ]
    return "\n".join(parts)
