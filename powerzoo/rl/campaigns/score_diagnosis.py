"""Measured diagnoses of the tasks where no trained row is above its anchor within the budgets.

For every task with learnable headroom and no claim (:func:`~powerzoo.rl.campaigns.
score_page_text.claim_row` finds none), the page says what the records measured, row by row:

* the paired difference against the anchor on the test days, with its interval, and whether the
  row keeps the budgets (else its largest mean cost over its budget);
* the row's validation curves (``run/evaluation/evaluation_metrics.csv`` of each trial, the
  evaluations the best model was chosen from): where in training the chosen model was found, as
  a share of the env steps the allowance gave. Found in the last fifth on most seeds: the
  learner was still improving when the allowance ran out (compute-bound). Found in the first
  fifth on most seeds: training did not improve on its first evaluations (a residual learner's
  first policy is the rule itself).

and a verdict over the rows: above the anchor within budget but not significantly, above it
only over budget; else compute-bound, no improvement from training, or below the anchor.
Nothing is trained or evaluated again; the text is regenerated with the page.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.rl.campaigns.page_text import seeds_text, signed_money
from powerzoo.rl.campaigns.score_page_text import above_anchor, claim_row
from powerzoo.rl.campaigns.trial import trial_dir
from powerzoo.rl.evaluation_log import EVAL_CSV

__all__ = [
    "CURVE_FILE",
    "Curve",
    "TaskDiagnosis",
    "VERDICTS",
    "campaign_diagnoses",
    "merged_diagnoses",
    "read_curve",
    "row_diagnosis",
    "task_diagnosis",
]

CURVE_FILE = Path("run") / "evaluation" / EVAL_CSV
"""A trial's validation curve, relative to its folder ``trials/<trial id>/``."""
LATE_SHARE = 0.8
"""A best model found at or after this share of training counts as found late."""
EARLY_SHARE = 0.2
"""A best model found at or before this share of training counts as found early."""


@dataclasses.dataclass(frozen=True)
class Curve:
    """One trial's validation curve, reduced to what the diagnosis reads.

    Attributes:
        first_return: Mean validation return of the first evaluation ($ per episode).
        best_return: That of the evaluation the best model was kept from.
        best_step: Env steps at that evaluation.
        last_step: Env steps at the last evaluation.
    """

    first_return: float
    best_return: float
    best_step: int
    last_step: int

    @property
    def best_share(self) -> float:
        """Where in training the best model was found: its step over the last evaluation's (0: at
        step 0, 1: the last evaluation)."""
        return self.best_step / self.last_step if self.last_step > 0 else 1.0


def read_curve(path: str | Path) -> Curve | None:
    """The :class:`Curve` of an ``evaluation_metrics.csv`` (columns ``timestep``,
    ``mean_return`` and ``new_best``), or ``None`` when the file is missing or has no row. The
    best model is the last evaluation marked ``new_best`` (the highest mean return when none is).
    """
    from powerzoo.rl.evaluation_log import read_evaluation_csv, selected_row

    rows = read_evaluation_csv(path)
    best = selected_row(rows)
    if best is None:
        return None
    steps = [int(float(r["timestep"])) for r in rows]
    returns = [float(r["mean_return"]) for r in rows]
    return Curve(returns[0], returns[best], steps[best], steps[-1])


def _curve_text(curves: Sequence[Curve], median_steps: float | None) -> tuple[str, str | None]:
    """The curve part of a row's sentence and its kind (``"late"``, ``"early"`` or None)."""
    if not curves:
        return "", None
    n = len(curves)
    shares = [c.best_share for c in curves]
    late = sum(s >= LATE_SHARE for s in shares)
    early = sum(s <= EARLY_SHARE for s in shares)
    steps = f" of {median_steps / 1e6:.3g}M env steps" if median_steps else ""
    text = f"; best validation model at {np.median(shares):.0%}{steps}"
    if 2 * late > n:
        return text + f" (still improving when the allowance ran out on {late} of {n})", "late"
    if 2 * early > n:
        gain = np.median([c.best_return - c.first_return for c in curves])
        untrained = sum(c.best_step == 0 for c in curves)  # evaluated before the first update
        kept = (
            f"; the untrained policy (a residual's: the rule) kept on {untrained} of {n}"
            if untrained
            else ""
        )
        return (
            text + f" (found in the first fifth of training on {early} of {n}: later training "
            f"did not beat it; median gain over the first evaluation {signed_money(gain)}{kept})",
            "early",
        )
    return text, None


def row_diagnosis(row: Mapping[str, Any], curves: Sequence[Curve]) -> tuple[str, str | None]:
    """One row's measured sentence and the kind of its curves (``"late"``, ``"early"`` or None).

    Args:
        row: A scored row (:data:`~powerzoo.rl.campaigns.score_page.ROW_COLUMNS`).
        curves: The validation curves of its trials (:func:`read_curve`).
    """
    n = int(row.get("n_seeds") or len(curves))
    text = f"{row['label']} ({seeds_text(n)})"
    if row.get("anchor_diff") is not None:
        text += (
            f" {signed_money(row['anchor_diff'])} [{signed_money(row['anchor_diff_ci_low'])}, "
            f"{signed_money(row['anchor_diff_ci_high'])}] against {row['anchor']}"
        )
    if row["within_budget"]:
        text += ", within budget"
    else:
        ratio = row.get("max_cost_ratio")
        text += ", over budget" + (
            f" (largest mean cost {ratio:.3g} x its budget)" if ratio is not None else ""
        )
    curve, kind = _curve_text(curves, row.get("median_env_steps"))
    return text + curve, kind


VERDICTS = {
    "unsure": "Above the anchor within budget, but with an interval reaching 0",
    "over": "Above the anchor only over budget",
    "late": "Compute-bound: most rows were still improving when the allowance ran out.",
    "early": "Training did not beat the first policies of most rows.",
    "below": "No row is above the anchor.",
}
"""The verdicts of :func:`task_diagnosis`, by kind, in the order they are tried."""


@dataclasses.dataclass(frozen=True)
class TaskDiagnosis:
    """A task's measured diagnosis.

    Attributes:
        kinds: Its verdicts' kinds (keys of :data:`VERDICTS`): ``unsure`` and / or ``over``,
            else one of ``late``, ``early``, ``below``.
        text: The page's text.
        labels: For each kind but ``below``, the labels of the rows it is about.
    """

    kinds: tuple[str, ...]
    text: str
    labels: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


def task_diagnosis(
    rows: Sequence[Mapping[str, Any]], curves: Mapping[str, Sequence[Curve]]
) -> TaskDiagnosis:
    """The measured diagnosis of one task without a claim: a verdict, then every row's sentence.

    Args:
        rows: The task's scored rows.
        curves: Validation curves by row label.
    """
    sentences, kinds = [], []
    for row in rows:
        sentence, kind = row_diagnosis(row, curves.get(row["label"], ()))
        sentences.append(sentence)
        kinds.append(kind)
    by_curve = {
        k: tuple(r["label"] for r, kind in zip(rows, kinds, strict=True) if kind == k)
        for k in ("late", "early")
    }

    def above(r: Mapping[str, Any]) -> bool:
        return above_anchor(r.get("anchor_diff"), r)

    named = {
        "unsure": [r["label"] for r in rows if r["within_budget"] and above(r)],
        "over": [r["label"] for r in rows if not r["within_budget"] and above(r)],
    }
    verdicts = tuple(k for k, labels in named.items() if labels)
    if not verdicts:
        if 2 * kinds.count("late") > len(kinds):
            verdicts = ("late",)
        elif 2 * kinds.count("early") > len(kinds):
            verdicts = ("early",)
        else:
            verdicts = ("below",)
    verdict = " ".join(
        f"{VERDICTS[k]} ({', '.join(named[k])})." if k in named else VERDICTS[k] for k in verdicts
    )
    headroom = rows[0].get("headroom") if rows else None
    if headroom is not None:
        verdict += f" The oracle is {signed_money(headroom)} $ per episode above the anchor."
    labels = {k: tuple(named.get(k, ())) or by_curve.get(k, ()) for k in verdicts if k != "below"}
    return TaskDiagnosis(verdicts, f"Measured: {verdict} " + "; ".join(sentences) + ".", labels)


def campaign_diagnoses(
    campaign_dir: str | Path,
    groups: Mapping[tuple[str, str], Sequence[Any]],
    rows: Sequence[Mapping[str, Any]],
    learnable: Mapping[str, bool],
) -> dict[str, TaskDiagnosis]:
    """``{task: measured diagnosis}`` of every task with learnable headroom, finished rows and
    no claim.

    Args:
        campaign_dir: The campaign folder (its ``trials/<id>/`` hold the curves).
        groups: ``{(task, label): finished trials}`` (objects with ``trial_id``).
        rows: Every scored row.
        learnable: Whether each task has learnable headroom.
    """
    out = {}
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == task]
        if not learnable.get(task) or claim_row(mine) is not None:
            continue
        curves = {}
        for row in mine:
            found = (
                read_curve(trial_dir(campaign_dir, t) / CURVE_FILE)
                for t in groups[task, row["label"]]
            )
            curves[row["label"]] = [c for c in found if c is not None]
        out[task] = task_diagnosis(mine, curves)
    return out


def merged_diagnoses(
    measured: Mapping[str, TaskDiagnosis], written: Mapping[str, str]
) -> dict[str, str]:
    """Each task's diagnosis from the records, followed by the one written in a diagnoses file
    (``--diagnoses``) where both exist."""
    out = dict(written)
    for task, found in measured.items():
        out[task] = f"{found.text} {written[task]}" if task in written else found.text
    return out
