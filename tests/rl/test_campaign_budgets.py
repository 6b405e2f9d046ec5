"""A campaign folder keeps the constraint budgets of its day (``task_budgets.json``).

The folders are hand-built on the real ``battery_arbitrage`` test days (budget today: 1 MWh of
state-of-charge violation per day): one trained row earns the oracle's return every day with
3 MWh of violation. Against today's budget it is over on every day and scores at most 0;
against a pinned budget of 5 MWh it is within budget and scores exactly the oracle's 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from powerzoo.benchmarks.baselines import baseline_rows, evaluation_protocol
from powerzoo.benchmarks.budget_snapshot import budget_snapshot, budgets_of, task_budgets
from powerzoo.rl.campaigns.gather import BASELINES_FILE, TASK_BUDGETS_FILE, gather
from powerzoo.rl.campaigns.page import write_results_page
from powerzoo.rl.campaigns.spec import CampaignSpec, TrialSpec
from powerzoo.rl.campaigns.trial import base_record, protocol_days
from powerzoo.tasks import task_spec

TASK = "battery_arbitrage"
COST = 3.0  # soc_violation per episode (MWh): over today's budget, within the pinned one
PINNED = {TASK: {"selected": ["soc_violation"], "thresholds": {"soc_violation": 5.0}}}


def _trial() -> TrialSpec:
    config = {"task": TASK, "algorithm": "PPO", "seed": 0}
    return TrialSpec(f"{TASK}-PPO-pinned-seed0", TASK, "PPO", "pinned", 0, config, "hash0")


def _record(trial: TrialSpec, days: list[int], returns: np.ndarray) -> dict:
    episodes = [
        {
            "task": TASK,
            "policy": trial.trial_label,
            "seed": trial.seed,
            "episode": i,
            "day_id": int(day),
            "env_seed": i,
            "return": float(r),
            "length": 48,
            "total_cost": COST,
            "cost_soc_violation": COST,
        }
        for i, (day, r) in enumerate(zip(days, returns, strict=True))
    ]
    return {
        **base_record(trial),
        "status": "finished",
        "num_timesteps": 100,
        "train_seconds": 1.0,
        "eval_seconds": 1.0,
        "started_at": 0.0,
        "finished_at": 2.0,
        "model": "final",
        "run_dir": "/elsewhere/run",
        "days": [int(d) for d in days],
        "cost_names": ["soc_violation"],
        "episodes": episodes,
        "mean_return": float(np.mean(returns)),
        "normalized_score": None,
        "plots": [],
    }


def _campaign(trial: TrialSpec, episodes: int | None, baselines: tuple[str, ...]) -> CampaignSpec:
    return CampaignSpec(
        "budgets", (TASK,), (0,), "test", episodes, baselines, "final", False, (trial,)
    )


@pytest.fixture
def campaign_dir(tmp_path) -> Path:
    """A finished one-trial campaign scored on the baselines table's days: the trained row
    returns the oracle's return every day, with :data:`COST` of violation."""
    trial = _trial()
    campaign = _campaign(trial, None, ("random", "oracle"))
    (tmp_path / "campaign.json").write_text(json.dumps(campaign.to_dict()))
    days = evaluation_protocol(TASK)["day_ids"]
    oracle = np.asarray(baseline_rows(TASK, "test")["oracle"]["returns"])
    folder = tmp_path / "trials" / trial.trial_id
    folder.mkdir(parents=True)
    (folder / "trial.json").write_text(json.dumps(_record(trial, days, oracle)))
    return tmp_path


def _trained(page) -> dict:
    return next(r for r in page.rows if r["kind"] == "trained")


def test_the_live_budget_is_a_real_budget_the_row_breaks():
    spec = task_spec(TASK)
    assert "soc_violation" in spec.selected_constraints
    assert (
        spec.cost_thresholds["soc_violation"] < COST < PINNED[TASK]["thresholds"]["soc_violation"]
    )


def test_without_the_file_the_page_counts_the_tasks_budgets_now(campaign_dir, tmp_path):
    page = write_results_page(campaign_dir, tmp_path / "page", plots=False)
    row = _trained(page)
    assert row["over_budget_rate"] == 1.0
    assert row["cmdp_score"] is not None and row["cmdp_score"] <= 0.0
    budget = task_spec(TASK).cost_thresholds["soc_violation"]
    assert f"soc_violation / episode (budget {budget:g})" in page.index.read_text()


def test_a_pinned_budget_scores_the_folder_against_its_day(campaign_dir, tmp_path):
    (campaign_dir / TASK_BUDGETS_FILE).write_text(json.dumps(PINNED))
    page = write_results_page(campaign_dir, tmp_path / "page", plots=False)
    row = _trained(page)
    assert row["over_budget_rate"] == 0.0
    assert row["cmdp_score"] == pytest.approx(1.0)  # the oracle's returns, within budget
    assert "soc_violation / episode (budget 5)" in page.index.read_text()
    # outside the page the live budgets are back
    assert (
        budgets_of(TASK).budget("soc_violation") == task_spec(TASK).cost_thresholds["soc_violation"]
    )


def test_a_pinned_unselected_constraint_is_shown_without_budget(campaign_dir, tmp_path):
    (campaign_dir / TASK_BUDGETS_FILE).write_text(
        json.dumps({TASK: {"selected": [], "thresholds": {}}})
    )
    page = write_results_page(campaign_dir, tmp_path / "page", plots=True)
    row = _trained(page)
    assert row["over_budget_rate"] == 0.0
    assert "soc_violation / episode (no budget)" in page.index.read_text()
    assert (tmp_path / "page" / f"return_vs_cost_{TASK}.png").is_file()


def test_the_gathering_pins_the_budgets_of_its_first_day(tmp_path):
    trial = _trial()
    campaign = _campaign(trial, 2, ("random",))
    days = protocol_days(campaign, TASK)
    record = _record(trial, days, np.zeros(len(days)))
    out = tmp_path / "out"
    first = gather(campaign, {trial.trial_id: record}, out, progress=False)
    assert json.loads((out / TASK_BUDGETS_FILE).read_text()) == budget_snapshot([TASK])
    assert _trained_row(first)["over_budget_rate"] == 1.0
    # the task's budget changes later: the folder is still scored against the pinned one
    (out / TASK_BUDGETS_FILE).write_text(json.dumps(PINNED))
    second = gather(campaign, {trial.trial_id: record}, out, progress=False)
    assert _trained_row(second)["over_budget_rate"] == 0.0
    assert json.loads((out / TASK_BUDGETS_FILE).read_text()) == PINNED  # kept, not rewritten
    # the baselines were counted again against the pinned budgets, not read back from before
    assert json.loads((out / BASELINES_FILE).read_text())["key"]["budgets"] == PINNED


def _trained_row(outcome) -> dict:
    return next(r for r in outcome.result.rows if r["kind"] == "trained")


def test_the_context_restores_the_live_budgets(tmp_path):
    path = tmp_path / TASK_BUDGETS_FILE
    path.write_text(json.dumps(PINNED))
    live = budgets_of(TASK)
    with task_budgets(path):
        assert budgets_of(TASK).budget("soc_violation") == 5.0
        # a task the file does not name: its live budgets
        assert budgets_of("dso").cost_thresholds == dict(task_spec("dso").cost_thresholds)
    assert budgets_of(TASK) == live
