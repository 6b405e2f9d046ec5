"""The measured diagnosis of a task without a claim: validation curves read from the trial
records, each row's sentence and the verdict over the rows."""

from __future__ import annotations

import pytest

from powerzoo.rl.campaigns.score_diagnosis import (
    Curve,
    TaskDiagnosis,
    merged_diagnoses,
    read_curve,
    row_diagnosis,
    task_diagnosis,
)
from powerzoo.rl.campaigns.score_page_text import claim_row


def _row(label, diff, within, low=None, ratio=None, steps=2_000_000, n=3):
    return {
        "label": label,
        "n_seeds": n,
        "anchor": "rule_based",
        "anchor_diff": diff,
        "anchor_diff_ci_low": diff - 10.0 if low is None else low,
        "anchor_diff_ci_high": diff + 10.0,
        "within_budget": within,
        "max_cost_ratio": ratio,
        "median_env_steps": steps,
        "headroom": 500.0,
    }


def _curve(share, first=0.0, best=10.0):
    return Curve(first, best, int(share * 1000), 1000)


def test_read_curve_takes_the_last_marked_best(tmp_path):
    path = tmp_path / "evaluation_metrics.csv"
    path.write_text("timestep,mean_return,new_best\n100,-5.0,True\n200,-3.0,True\n300,-4.0,False\n")
    assert read_curve(path) == Curve(-5.0, -3.0, 200, 300)
    assert read_curve(path).best_share == pytest.approx(2 / 3)
    unmarked = tmp_path / "unmarked.csv"
    unmarked.write_text("timestep,mean_return\n100,1.0\n200,3.0\n300,2.0\n")
    assert read_curve(unmarked) == Curve(1.0, 3.0, 200, 300)
    assert read_curve(tmp_path / "missing.csv") is None
    (tmp_path / "empty.csv").write_text("timestep,mean_return,new_best\n")
    assert read_curve(tmp_path / "empty.csv") is None


def test_curves_found_late_or_early_name_the_reason():
    late, kind = row_diagnosis(_row("PPO/x", -50.0, True), [_curve(1.0), _curve(0.9), _curve(0.1)])
    assert kind == "late" and "still improving when the allowance ran out on 2 of 3" in late
    assert late.startswith("PPO/x (3 seeds) -50.00 [-60.00, -40.00] against rule_based")
    assert "best validation model at 90% of 2M env steps" in late
    early, kind = row_diagnosis(
        _row("R/x", -5.0, True), [_curve(0.0, 1.0, 1.0), _curve(0.05, 1.0, 3.0), _curve(0.5)]
    )
    assert kind == "early" and "first fifth of training on 2 of 3" in early
    assert "median gain over the first evaluation +2.00" in early  # gains 0, 2, 10
    # the first curve's best model is its step-0 evaluation: the untrained policy
    assert early.endswith("; the untrained policy (a residual's: the rule) kept on 1 of 3)")
    mixed, kind = row_diagnosis(_row("M/x", -5.0, False, ratio=3.0), [_curve(0.5)])
    assert kind is None and "over budget (largest mean cost 3 x its budget)" in mixed
    assert row_diagnosis(_row("N/x", -5.0, True), [])[0].endswith("within budget")


def test_the_verdict_puts_budget_and_significance_before_the_curves():
    curves = {"A": [_curve(1.0)] * 3, "B": [_curve(0.95)] * 3}
    rows = [_row("A", -20.0, True), _row("B", -30.0, True)]
    found = task_diagnosis(rows, curves)
    text = found.text
    assert found.kinds == ("late",) and found.labels == {"late": ("A", "B")}
    assert text.startswith("Measured: Compute-bound: most rows were still improving")
    assert "The oracle is +500.00 $ per episode above the anchor." in text
    assert text.endswith("(still improving when the allowance ran out on 3 of 3).")
    over = task_diagnosis([_row("A", 40.0, False, ratio=2.0), _row("B", -30.0, True)], curves).text
    assert over.startswith("Measured: Above the anchor only over budget (A).")
    both = task_diagnosis([_row("A", 40.0, True, low=-5.0), _row("B", 30.0, False)], curves)
    assert both.kinds == ("unsure", "over")
    assert both.labels == {"unsure": ("A",), "over": ("B",)}  # the rows each verdict is about
    unsure = both.text
    assert unsure.startswith("Measured: Above the anchor within budget, but with an interval")
    early = task_diagnosis(rows, {"A": [_curve(0.0)] * 3, "B": [_curve(0.1)] * 3}).text
    assert early.startswith("Measured: Training did not beat the first policies of most rows.")
    below = task_diagnosis(rows, {})
    assert below.text.startswith("Measured: No row is above the anchor.")
    assert below.labels == {}  # every row: none named


def test_a_written_diagnosis_follows_the_measured_one():
    measured = {
        "a": TaskDiagnosis(("below",), "Measured: x."),
        "b": TaskDiagnosis((), "Measured: y."),
    }
    merged = merged_diagnoses(measured, {"b": "z", "c": "w"})
    assert merged == {"a": "Measured: x.", "b": "Measured: y. z", "c": "w"}


def test_a_row_at_the_anchor_to_float_noise_is_neither_above_it_nor_a_claim():
    # a residual that kept its untrained policy (the rule): its return differs from the rule's
    # by float noise only, here 1.7e-6 $ on a 1,932 $ return, an interval of noise above 0 too
    at = {**_row("R/x", 1.7e-6, True, low=1e-7), "anchor_return": 1932.4, "performance": 1e-9}
    over = _row("P/x", 800.0, False, ratio=3.0)
    found = task_diagnosis([at, over], {"R/x": [_curve(0.0)], "P/x": [_curve(0.5)]})
    assert found.kinds == ("over",)  # not "above the anchor within budget" for R/x
    assert claim_row([at]) is None
    real = {**at, "anchor_diff": 5.0, "anchor_diff_ci_low": 1.0}
    assert claim_row([real]) is real
