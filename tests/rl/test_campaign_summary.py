"""The one-table summary of a scored campaign (``summary_v2.md``): verdicts by task kind."""

from __future__ import annotations

from types import SimpleNamespace

from powerzoo.benchmarks.score_v2 import task_reference
from powerzoo.rl.campaigns.score_diagnosis import TaskDiagnosis
from powerzoo.rl.campaigns.score_summary import best_within_budget, summary_markdown


def _row(task, label, diff, low, within=True):
    return {
        "task": task,
        "label": label,
        "within_budget": within,
        "anchor_diff": diff,
        "anchor_diff_ci_low": low,
        "anchor_diff_ci_high": diff + 5.0,
        "performance": None,
    }


def _scored(rows, tasks):
    trials = [SimpleNamespace(task=t) for t in tasks for _ in range(5)]
    records = {f"{r['task']}-{i}": {"task": r["task"]} for i, r in enumerate(rows)}
    folder = SimpleNamespace(records=records, campaign=SimpleNamespace(tasks=tasks, trials=trials))
    return SimpleNamespace(
        folder=folder, rows=rows, references={t: task_reference(t) for t in tasks}
    )


def _cells(text):
    return {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in text.splitlines()[2:]}


def test_a_task_without_an_oracle_scale_is_read_on_the_gain():
    assert task_reference("gencos_bidding").scale != "oracle"
    tasks = ["gencos_bidding", "dc_microgrid", "battery_arbitrage"]
    rows = [
        {**_row("gencos_bidding", "MAPPO/default", 100.0, 20.0), "n_seeds": 2},
        _row("dc_microgrid", "PPO/objective", -10.0, -20.0),
        _row("dc_microgrid", "PPO-L/default", -5.0, -9.0),
        _row("dc_microgrid", "PPO-RESIDUAL/objective", 50.0, 10.0, within=False),
    ]
    late = {"late": ("PPO/objective", "PPO-L/default")}
    measured = {"dc_microgrid": TaskDiagnosis(("late",), "Measured: ...", late)}
    cells = _cells(summary_markdown(_scored(rows, tasks), measured))
    # read on the gain, with its seeds as a claim is
    assert (
        cells["gencos_bidding"][5] == "**above the anchor** (2 seeds, provisional; no oracle scale)"
    )
    assert cells["gencos_bidding"][2] == "-"  # no headroom without an oracle
    # no claim: the within-budget row with the largest paired difference, and the measured
    # verdict naming the rows it is about
    assert cells["dc_microgrid"][3] == "PPO-L/default"
    assert cells["dc_microgrid"][5] == (
        "below the anchor, compute-bound (PPO/objective, PPO-L/default)"
    )
    bare = _cells(
        summary_markdown(_scored(rows, tasks), {"dc_microgrid": TaskDiagnosis(("late",), "")})
    )
    assert bare["dc_microgrid"][5] == "below the anchor, compute-bound"
    assert cells["dc_microgrid"][6] == "3/5 |"
    assert cells["battery_arbitrage"][3:6] == ["-", "-", "no finished trial yet"]


def test_best_within_budget_prefers_the_claim():
    rows = [_row("t", "a", 30.0, -1.0), _row("t", "b", 10.0, 2.0), _row("t", "c", 90.0, 5.0, False)]
    assert best_within_budget(rows)["label"] == "b"
    assert best_within_budget(rows[:1])["label"] == "a"
    assert best_within_budget(rows[2:]) is None


def test_the_claims_name_an_above_anchor_row_of_a_task_without_an_oracle_scale():
    from powerzoo.rl.campaigns.score_page_text import _claims_text

    row = {
        **_row("gencos_bidding", "MAPPO/default", 100.0, 20.0),
        "anchor": "rule_based",
        "anchor_diff_pct": 1.5,
        "anchor_seeds_better": 5,
        "n_seeds": 5,
        "scale": "gain",
        "run_performance": [],
    }
    scored = _scored([row], ["gencos_bidding"])
    text = _claims_text(scored, {})
    assert "- **gencos_bidding** (no oracle scale, read on the gain): MAPPO/default within" in text
    assert "+100.00 [+20.00, +105.00] (+1.50 %), 5/5 better against rule_based ($ per" in text
