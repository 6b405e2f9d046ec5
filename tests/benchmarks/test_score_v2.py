"""The per-run score: feasibility, the anchor, performance, optimality gap, paired intervals."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from powerzoo.benchmarks.baselines import baseline_table, load_baselines
from powerzoo.benchmarks.budget_snapshot import task_budgets
from powerzoo.benchmarks.evaluation import COST_TOLERANCE, budget_flags
from powerzoo.benchmarks.score_v2 import (
    mean_within_budget,
    oracle_gap_pct,
    performance,
    score_runs,
    task_reference,
)

DAYS = list(range(6))
BLOCKS = [4, 4, 9, 9, 14, 14]


def _row(policy, returns, overload, *, task="toy"):
    return {
        "task": task,
        "split": "test",
        "policy": policy,
        "returns": list(map(float, returns)),
        "mean": float(np.mean(returns)),
        "mean_costs": {"overload": float(overload), "noise": 0.0},
        "day_ids": DAYS,
        "seed": 0,
    }


@contextlib.contextmanager
def toy_table(tmp_path, rows, budget=1.0):
    """A baselines table and budgets of a made-up task ``toy`` (one budgeted cost)."""
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"generated_by": "test", "results": rows}))
    budgets = tmp_path / "budgets.json"
    budgets.write_text(
        json.dumps({"toy": {"selected": ["overload"], "thresholds": {"overload": budget}}})
    )
    with baseline_table(table), task_budgets(budgets):
        yield


def _flat(value):
    return np.full(len(DAYS), float(value))


def _baselines(rule_overload=0.5):
    return [
        _row("random", _flat(-500), 9.0),
        _row("idle", _flat(-300), 0.0),
        _row("naive", _flat(-100), 2.0),  # best return of the three, but over its budget
        _row("rule_based", _flat(-110), rule_overload),
        _row("oracle", _flat(-90), 0.0),
    ]


def test_anchor_is_the_best_non_learning_baseline_that_keeps_the_budgets(tmp_path):
    with toy_table(tmp_path, _baselines()):
        ref = task_reference("toy")
    assert ref.anchor == "rule_based" and ref.anchor_within_budget
    assert not ref.within["naive"] and ref.within["idle"]
    assert ref.cost_task and ref.scale == "oracle"
    assert ref.headroom == pytest.approx(20.0)
    assert performance(-90.0, ref) == pytest.approx(1.0)
    assert performance(-110.0, ref) == pytest.approx(0.0)
    assert performance(-130.0, ref) == pytest.approx(-1.0)  # no floor
    assert performance(-80.0, ref) == pytest.approx(1.5)  # no clip
    assert oracle_gap_pct(-99.0, ref) == pytest.approx(10.0)


def test_without_a_baseline_within_budget_the_anchor_is_the_best_return_flagged(tmp_path):
    with toy_table(tmp_path, _baselines(rule_overload=3.0)):
        ref = task_reference("toy")
    assert ref.anchor == "idle"  # idle keeps the budget: it is the only one left
    rows = [r for r in _baselines(rule_overload=3.0) if r["policy"] != "idle"]
    with toy_table(tmp_path, rows):
        ref = task_reference("toy")
    assert ref.anchor == "naive" and not ref.anchor_within_budget


def test_task_without_oracle_is_read_on_its_gain(tmp_path):
    rows = [r for r in _baselines() if r["policy"] != "oracle"]
    with toy_table(tmp_path, rows):
        ref = task_reference("toy")
        out = score_runs(
            np.full((2, 6), -100.0), np.zeros((2, 6, 1)), ["overload"], ref, blocks=BLOCKS
        )
    assert ref.scale == "gain" and not ref.cost_task
    assert out["performance"] is None and out["oracle_gap_pct"] is None
    assert out["anchor_diff"] == pytest.approx(10.0)
    assert out["anchor_diff_pct"] == pytest.approx(100 * 10.0 / 110.0)


def test_one_budget_definition_for_runs_and_baselines():
    """The mean-cost verdict is budget_flags' per-episode test applied to the mean cost: one
    episode gives the same verdict both ways, at the tolerance's edge too."""

    class Spec:
        selected_constraints = ("overload",)
        cost_thresholds = {"overload": 1.0}

    for cost in (0.0, 1.0, 1.0 + 0.5 * COST_TOLERANCE, 1.0 + 2 * COST_TOLERANCE, 5.0):
        per_episode = not budget_flags(np.array([[cost]]), ["overload"], Spec)["over_budget"][0]
        assert mean_within_budget(np.array([[cost]]), ["overload"], Spec) == per_episode
    # the mean may keep a budget that single days break (and the share says so)
    costs = np.array([[0.0], [0.0], [3.0]])
    assert mean_within_budget(costs, ["overload"], Spec)
    assert np.mean(budget_flags(costs, ["overload"], Spec)["over_budget"]) == pytest.approx(1 / 3)


def test_score_runs_feasibility_and_paired_columns(tmp_path):
    returns = np.array([[-100.0] * 6, [-95.0] * 6])
    costs = np.zeros((2, 6, 1))
    costs[0, 5, 0] = 3.0  # seed 0: one day over, mean 0.5 within the budget of 1
    costs[1, :, 0] = 2.0  # seed 1: every day over
    with toy_table(tmp_path, _baselines()):
        ref = task_reference("toy")
        out = score_runs(returns, costs, ["overload"], ref, blocks=BLOCKS, n_resamples=300)
    assert out["run_within_budget"] == [True, False]
    assert out["run_feasibility"] == pytest.approx([5 / 6, 0.0])
    assert out["feasibility"] == pytest.approx(5 / 12)
    assert out["seeds_within_budget"] == 1
    assert out["within_budget"] is False  # pooled mean cost 1.25 > 1
    assert out["max_cost_ratio"] == pytest.approx(1.25)
    # its seed x block interval: a resample of seed 0 alone keeps the budget (mean cost at most
    # 3 / 6 x its days' weight), one of seed 1 alone does not (2.0 on every day)
    low, high = out["max_cost_ratio_ci_low"], out["max_cost_ratio_ci_high"]
    assert 0.0 <= low < 1.0 < high == pytest.approx(2.0)
    assert low <= out["max_cost_ratio"] <= high
    assert out["run_performance"] == pytest.approx([0.5, 0.75])
    assert out["performance"] == pytest.approx(0.625)
    assert out["anchor_diff"] == pytest.approx(12.5)
    assert out["anchor_seeds_better"] == 2
    assert out["oracle_gap_pct"] == pytest.approx(100 * 7.5 / 90)
    # performance is affine in the return: its interval is the anchor difference's on that scale
    assert out["performance_ci_low"] == pytest.approx(out["anchor_diff_ci_low"] / 20.0)
    assert out["performance_ci_high"] == pytest.approx(out["anchor_diff_ci_high"] / 20.0)


def _cost_tasks_of_packaged_table():
    tasks = sorted({r["task"] for r in load_baselines()["results"] if r["split"] == "test"})
    refs = []
    for task in tasks:
        try:
            ref = task_reference(task)
        except ValueError:
            continue
        if ref.cost_task and ref.scale == "oracle":
            refs.append(ref)
    return refs


def test_a_one_percent_cost_change_moves_the_score_of_every_cost_task():
    """On the packaged table's rows: a policy at the oracle's cost that spends 1 % more loses
    at least 0.01 of score (the random-anchored v1 score moves far less on grid tasks)."""
    refs = _cost_tasks_of_packaged_table()
    assert len(refs) >= 8
    v1_moves = {}
    for ref in refs:
        oracle = ref.mean_return("oracle")
        move = performance(oracle, ref) - performance(1.01 * oracle, ref)
        # the move is 0.01 x |oracle| / (oracle - anchor): at least 0.01 wherever the anchor
        # costs at most twice the oracle; a task with more headroom still moves by >= 0.005
        # (volt_var_123: the rule costs 2.02 x the oracle, a 1 % change moves 0.0098)
        anchor_cost_ratio = ref.mean_return(ref.anchor) / oracle
        assert move >= (0.01 if anchor_cost_ratio <= 2.0 else 0.005), (ref.task, ref.anchor, move)
        random = ref.mean_return("random")  # the v1 score's 0, the oracle its 1
        v1_moves[ref.task] = 0.01 * abs(oracle) / (oracle - random)
    assert min(v1_moves.values()) < 0.001  # what the v1 score could not see


def test_score_runs_reproduces_the_direct_formula_on_real_rows():
    ref = next(r for r in _cost_tasks_of_packaged_table() if r.task == "opf_118")
    oracle = ref.returns["oracle"]
    runs = np.stack([oracle * 1.01, oracle * 1.02])
    costs = np.zeros((*runs.shape, 1))
    out = score_runs(runs, costs, ["thermal_overload"], ref, n_resamples=200)
    anchor, best = ref.mean_return(ref.anchor), oracle.mean()
    assert out["performance"] == pytest.approx((runs.mean() - anchor) / (best - anchor))
    assert out["oracle_gap_pct"] == pytest.approx(1.5)
    assert out["run_oracle_gap_pct"] == pytest.approx([1.0, 2.0])


def test_the_cost_ratio_interval_against_a_zero_budget_is_infinite_where_the_cost_is_positive():
    from powerzoo.benchmarks.budget_snapshot import TaskBudgets
    from powerzoo.benchmarks.resampling import SeedBlockResamples
    from powerzoo.benchmarks.score_v2 import _cost_ratio_interval

    budgets = TaskBudgets(("shed", "overload"), {"shed": 0.0, "overload": 2.0})
    resamples = SeedBlockResamples.draw(2, BLOCKS, n_resamples=200, seed=0)
    costs = np.zeros((2, len(BLOCKS), 2))
    costs[:, :, 1] = 1.0  # overload at half its budget every day
    assert _cost_ratio_interval(costs, ["shed", "overload"], budgets, resamples, 0.95) == (
        pytest.approx(0.5),
        pytest.approx(0.5),
    )
    costs[1, :, 0] = 0.1  # seed 1 sheds load: inf whenever it is drawn, 0.5 when it is not
    low, high = _cost_ratio_interval(costs, ["shed", "overload"], budgets, resamples, 0.95)
    assert low == pytest.approx(0.5) and high == np.inf
    none = TaskBudgets((), {})
    assert _cost_ratio_interval(costs, ["shed", "overload"], none, resamples, 0.95) == (None, None)
