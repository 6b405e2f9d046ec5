"""The one-table summary of a scored campaign (``summary_v2.md``), the table README.md shows.

One row per campaign task: its anchor (marked where none of idle, naive and rule-based keeps
the budgets) and headroom (``R_oracle - R_anchor`` on the test days, per episode in the tasks'
return units and in %
of the oracle's |mean return|), the row reported: the best row within the budgets (the
claim where there is one, else the within-budget row with the largest paired difference against
the anchor), its paired
difference against the anchor with the 95 % interval, a verdict and the trials finished of those
planned. Verdicts: ``claim`` (the row's interval is above 0; with its seeds, provisional under
:data:`FIRM_CLAIM_SEEDS`, and "within budget on the mean only" where the interval of its mean
cost reaches past a budget), ``no learnable headroom``, ``no
oracle scale`` (no oracle above the anchor, e.g. a market task without one; a row whose interval
is above 0 there is marked ``above the anchor``, with its seeds as a claim), or the measured
diagnosis's kinds (:mod:`~powerzoo.rl.campaigns.score_diagnosis`), each naming the rows it is
about: the row reported need not be one of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from powerzoo.benchmarks.evaluation import per_episode_units
from powerzoo.rl.campaigns.page_text import seeds_text, signed_money
from powerzoo.rl.campaigns.score_diagnosis import TaskDiagnosis
from powerzoo.rl.campaigns.score_page_text import budget_not_robust, claim_row

__all__ = ["FIRM_CLAIM_SEEDS", "SHORT_VERDICTS", "best_within_budget", "summary_markdown"]

FIRM_CLAIM_SEEDS = 3
"""Seeds a claim needs not to be marked provisional: with one or two, the seed x block bootstrap
has few distinct draws and its intervals tend to be too narrow."""

SHORT_VERDICTS = {
    "unsure": "above the anchor, interval reaching 0",
    "over": "above the anchor only over budget",
    "late": "below the anchor, compute-bound",
    "early": "below the anchor, training did not beat its start",
    "below": "below the anchor",
}
"""The table's words for each measured verdict kind."""


def best_within_budget(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The claim row of a task's ``rows``, else its within-budget row with the highest paired
    difference against the anchor (``None`` when no row keeps the budgets)."""
    claim = claim_row(rows)
    if claim is not None:
        return claim
    within = [r for r in rows if r["within_budget"] and r.get("anchor_diff") is not None]
    return max(within, key=lambda r: r["anchor_diff"]) if within else None


def _money(value: float | None) -> str:
    return "-" if value is None else signed_money(value)


def _seeds(claim: Mapping[str, Any]) -> str:
    """``"n seeds"``, with ``", provisional"`` under :data:`FIRM_CLAIM_SEEDS`."""
    n = int(claim["n_seeds"])
    return seeds_text(n) + (", provisional" if n < FIRM_CLAIM_SEEDS else "")


def _short_verdict(diagnosis: TaskDiagnosis, kind: str) -> str:
    """The table's words for one verdict kind, with the rows it is about."""
    labels = diagnosis.labels.get(kind, ())
    return SHORT_VERDICTS[kind] + (f" ({', '.join(labels)})" if labels else "")


def summary_markdown(scored: Any, diagnoses: Mapping[str, TaskDiagnosis]) -> str:
    """The summary table (Markdown) of a :class:`~powerzoo.rl.campaigns.score_page.
    ScoredCampaign` with its measured ``diagnoses`` (module docstring)."""
    folder = scored.folder
    finished = Counter(record["task"] for record in folder.records.values())
    planned = Counter(trial.task for trial in folder.campaign.trials)
    units = per_episode_units(folder.campaign.tasks)
    lines = [
        f"| task | anchor | headroom, {units} (% of the absolute value of the oracle's mean "
        "return) | row "
        "reported (the claim, else the within-budget row with the largest paired difference) | "
        "against the "
        f"anchor, {units} [95% CI] | verdict | trials finished |",
        "|---|---|---:|---|---:|---|---:|",
    ]
    for task in folder.campaign.tasks:
        ref = scored.references.get(task)
        rows = [r for r in scored.rows if r["task"] == task]
        best = best_within_budget(rows)
        if ref is None:
            anchor, headroom = "-", "-"
        else:
            pct = "" if ref.headroom_pct is None else f" ({ref.headroom_pct:.1f} %)"
            anchor, headroom = ref.anchor, f"{_money(ref.headroom)}{pct}"
            if not ref.anchor_within_budget:
                anchor += " (over budget: no anchor candidate keeps the budgets)"
        claim = claim_row(rows)
        if not rows:
            verdict = "no finished trial yet"
        elif ref is None or ref.scale != "oracle":  # no oracle above the anchor: the gain only
            verdict = (
                f"**above the anchor** ({_seeds(claim)}; no oracle scale)"
                if claim
                else "no oracle scale"
            )
        elif not ref.learnable_headroom:
            verdict = "no learnable headroom"
        elif claim is not None:
            robust = "" if not budget_not_robust(claim) else "; within budget on the mean only"
            verdict = f"**claim** ({_seeds(claim)}{robust})"
        elif task in diagnoses:
            verdict = "; ".join(_short_verdict(diagnoses[task], k) for k in diagnoses[task].kinds)
        else:
            verdict = "-"
        if best is None:
            label, diff = "none" if rows else "-", "-"
        else:
            label = best["label"]
            diff = (
                f"{_money(best['anchor_diff'])} [{_money(best['anchor_diff_ci_low'])}, "
                f"{_money(best['anchor_diff_ci_high'])}]"
            )
        lines.append(
            f"| {task} | {anchor} | {headroom} | {label} | {diff} | {verdict} | "
            f"{finished[task]}/{planned[task]} |"
        )
    return "\n".join(lines) + "\n"
