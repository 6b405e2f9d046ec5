"""Task cards: each task's idle, naive, rule and oracle on the test split, the oracle's headroom,
storage and price figures, and the targets that show the task is a decision problem."""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest
from helpers import run_cli

from powerzoo.benchmarks.baselines import BASELINES_FILE, baseline_rows, evaluate_baseline
from powerzoo.benchmarks.card import (
    CARD_TARGETS,
    STORAGE_TARGETS,
    check_card,
    headroom_pct,
    task_card,
)
from powerzoo.benchmarks.card_text import render_card
from powerzoo.benchmarks.naive import (
    NAIVE_BASELINES,
    equal_incremental_cost_dispatch,
    table_baselines,
)
from powerzoo.benchmarks.score_v2 import task_reference
from powerzoo.benchmarks.storage import storage_power_mw, trading_day_threshold_mwh
from powerzoo.tasks import list_tasks, task_spec

HEADROOM_KEYS = {"over_idle_pct", "over_naive_pct", "over_rule_pct"}
PRICE_KEYS = {"tb4_mean", "tb4_median", "negative_hour_share", "hours_above_1000_per_year"}


# ---- the card's shape ---------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["battery_arbitrage", "marl_opf"])
def test_the_card_has_the_schema_keys(task):
    card = task_card(task)
    assert {"task", "split", "policies", "headroom", "figures"} <= set(card)
    assert card["task"] == task and card["split"] == "test"
    assert set(card["headroom"]) == HEADROOM_KEYS
    for name, numbers in card["policies"].items():
        assert name in ("idle", "naive", "rule_based", "oracle")
        assert set(numbers) == {"mean_return", "over_budget_share"}
    assert isinstance(card["figures"], dict)
    json.dumps(card)  # JSON-ready
    # the benchmark's own scale: the score's anchor and headroom, and whether it is learnable
    ref = task_reference(task)
    bench = card["benchmark"]
    assert bench["anchor"] == ref.anchor and bench["headroom"] == ref.headroom
    assert bench["learnable"] == ref.learnable_headroom
    assert bench["learnable"] == (task == "battery_arbitrage")  # marl_opf: the rule is optimal
    line = "benchmark v2 scale: the oracle is"
    text = render_card(card)
    assert line in text and ("no learnable headroom" in text) == (task == "marl_opf")
    storage = task == "battery_arbitrage"  # a battery; marl_opf dispatches generators only
    assert ("storage" in card) == storage and ("prices" in card) == storage
    if storage:
        assert {"kw_year", "trading_day_share"} <= set(card["storage"])
        assert set(card["prices"]) == PRICE_KEYS
        assert list(card["policies"]) == ["idle", "naive", "rule_based", "oracle"]
    else:
        assert list(card["policies"]) == ["naive", "rule_based", "oracle"]


def test_every_task_has_a_naive_baseline_and_card_targets():
    for task in list_tasks():
        assert task in NAIVE_BASELINES and task in CARD_TARGETS, task
        assert table_baselines(task) == (*task_spec(task).baselines, "naive")
        if NAIVE_BASELINES[task].kind == "idle":
            assert "idle" in task_spec(task).baselines, task


# ---- the numbers, on a hand-made table -----------------------------------------------------------
def _row(task, policy, returns, over=None, **extra):
    over = over or [False] * len(returns)
    return {
        "task": task,
        "split": "test",
        "policy": policy,
        "episodes": len(returns),
        "day_ids": list(range(len(returns))),
        "seed": 0,
        "returns": list(returns),
        "mean": float(np.mean(returns)),
        "std": float(np.std(returns)),
        "over_budget": over,
        "over_budget_rate": float(np.mean(over)),
        **extra,
    }


def test_headroom_storage_and_trading_days_on_a_hand_made_table(tmp_path):
    task = "battery_arbitrage"
    energy = 100.0  # MWh; a trading day moves more than 5 % of a full cycle, 10 MWh
    assert trading_day_threshold_mwh(energy) == pytest.approx(10.0)
    storage = {"storage_power_mw": 25.0, "storage_energy_mwh": energy}
    rows = [
        _row(task, "idle", [-40.0, -60.0]),  # mean -50
        _row(task, "naive", [-50.0, -50.0]),
        _row(task, "rule_based", [100.0, 100.0], over=[True, False]),
        _row(
            task,
            "oracle",
            [140.0, 160.0],  # mean 150
            storage_throughput_mwh=[[12.0], [9.0]],  # one trading day of two
            **storage,
        ),
    ]
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"results": rows}))
    card = task_card(task, table=table)
    assert card["policies"]["rule_based"] == {"mean_return": 100.0, "over_budget_share": 0.5}
    h = card["headroom"]
    assert h["over_idle_pct"] == pytest.approx(100 * (150 + 50) / 50)  # 400 %
    assert h["over_naive_pct"] == pytest.approx(400.0)
    assert h["over_rule_pct"] == pytest.approx(100 * (150 - 100) / 100)  # 50 %
    s = card["storage"]
    assert s["power_kw"] == 25_000.0 and s["reference"] == "idle"
    assert s["kw_year"] == pytest.approx((150 + 50) * 365 / 25_000)  # one-day episodes
    assert s["trading_day_share"] == 0.5
    assert s["rule_leaves_share"] == pytest.approx((150 - 100) / (150 + 50))
    assert card["episodes"] == 2 and card["notes"] == []


def test_the_oracle_n1_shortfall_steps_figure_counts_the_oracle_rows_short_steps(tmp_path):
    steps = {"thermal_overload": [0, 1], "reserve_shortfall": [2, 3], "power_imbalance": [0, 0]}
    rows = [
        _row(task, "oracle", [-10.0, -12.0], episode_cost_steps=steps)
        for task in ("tso", "marl_uc", "marl_opf")
    ]
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"results": rows}))
    assert task_card("tso", table=table)["figures"]["oracle_n1_shortfall_steps"] == 5.0
    # only tso's reserve_shortfall holds the N-1 row (marl_uc carries 10 % of its load alone)
    for task in ("marl_uc", "marl_opf"):
        assert "oracle_n1_shortfall_steps" not in task_card(task, table=table)["figures"]
    table.write_text(json.dumps({"results": [_row("tso", "oracle", [-10.0])]}))  # no counts
    assert "oracle_n1_shortfall_steps" not in task_card("tso", table=table)["figures"]


def test_the_tso_table_oracle_is_short_of_reserve_on_no_step():
    figures = task_card("tso")["figures"]
    assert figures.get("oracle_n1_shortfall_steps") == 0.0


def test_headroom_is_relative_to_the_compared_returns_magnitude():
    assert headroom_pct(-90.0, -100.0) == pytest.approx(10.0)  # costs: 10 % less cost
    assert headroom_pct(110.0, 100.0) == pytest.approx(10.0)
    assert headroom_pct(5.0, 0.0) is None and headroom_pct(None, 1.0) is None


def test_a_missing_row_is_said_not_invented(tmp_path):
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"results": [_row("marl_opf", "oracle", [-10.0])]}))
    card = task_card("marl_opf", table=table)
    assert card["policies"]["naive"] == {"mean_return": None, "over_budget_share": None}
    assert card["headroom"]["over_naive_pct"] is None
    assert any("run powerzoo card marl_opf --recompute" in n for n in card["notes"])
    assert any("naive not measured" in u for u in check_card(card))


# ---- targets ------------------------------------------------------------------------------------
def _good_storage_card():
    return {
        "task": "battery_arbitrage",
        "split": "test",
        "naive": {"kind": "idle", "doc": "idle"},
        "policies": {
            "idle": {"mean_return": 0.0, "over_budget_share": 0.0},
            "naive": {"mean_return": 0.0, "over_budget_share": 0.0},
            "rule_based": {"mean_return": 50.0, "over_budget_share": 0.0},
            "oracle": {"mean_return": 100.0, "over_budget_share": 0.0},
        },
        "headroom": {"over_idle_pct": None, "over_naive_pct": None, "over_rule_pct": 100.0},
        "storage": {"kw_year": 40.0, "trading_day_share": 0.8, "rule_leaves_share": 0.5},
        "figures": {},
    }


def test_check_card_passes_a_card_that_meets_its_targets():
    card = _good_storage_card()
    assert check_card(card) == []
    card["targets"] = dataclasses.asdict(STORAGE_TARGETS)  # a card may carry its targets itself
    assert check_card(card) == []


@pytest.mark.parametrize(
    ("change", "flagged"),
    [
        (lambda c: c["storage"].update(kw_year=12.5), "12.50 $/kW-year < 30"),
        (lambda c: c["storage"].update(trading_day_share=0.3), "trading-day share 0.300 < 0.5"),
        (lambda c: c["storage"].update(rule_leaves_share=0.1), "rule leaves 0.100 < 0.2"),
        (lambda c: c["storage"].update(kw_year=None), "(kw_year) not measured"),
        (
            lambda c: c["policies"]["oracle"].update(over_budget_share=0.05),
            "oracle is over budget on 5.0 % of the episodes",
        ),
        (
            lambda c: c["policies"]["oracle"].update(mean_return=40.0),
            "oracle (40.00) is below rule_based (50.00)",
        ),
        (
            lambda c: c["policies"]["rule_based"].update(mean_return=-5.0),
            "rule_based (-5.00) is below idle (0.00)",
        ),
        (
            lambda c: c["policies"]["naive"].update(mean_return=None),
            "naive not measured: run powerzoo card battery_arbitrage --recompute",
        ),
    ],
)
def test_check_card_flags_a_card_that_misses_a_target(change, flagged):
    card = copy.deepcopy(_good_storage_card())
    change(card)
    unmet = check_card(card)
    assert len(unmet) == 1 and flagged in unmet[0] and unmet[0].startswith("battery_arbitrage: ")


def test_a_dispatch_card_needs_no_storage_figures_but_the_rule_above_naive():
    card = _good_storage_card()
    del card["storage"], card["policies"]["idle"]
    card["task"], card["naive"] = "marl_opf", {"kind": "dispatch", "doc": "network-blind"}
    assert check_card(card) == []
    card["policies"]["naive"]["mean_return"] = 60.0
    assert check_card(card) == [
        "marl_opf: rule_based (50.00) is below naive (60.00) in mean return"
    ]


def test_a_figure_outside_its_bound_or_missing_is_an_unmet_target():
    """The figure bounds of a task's targets: opf_118 needs congestion on >= 30 % of the oracle's
    steps and a naive dispatch >= 2 % costlier; tso's oracle no step short of N-1 reserve."""
    card = _good_storage_card()
    del card["storage"], card["policies"]["idle"]
    card["task"], card["naive"] = "opf_118", {"kind": "dispatch", "doc": "network-blind"}
    card["policies"]["naive"]["mean_return"] = 10.0
    card["figures"] = {"congestion_step_share": 0.42, "naive_gap_pct": 24.0}
    assert check_card(card) == []
    card["figures"] = {"congestion_step_share": 0.25}
    assert check_card(card) == [
        "opf_118: figure congestion_step_share = 0.25, target >= 0.3",
        "opf_118: figure naive_gap_pct not measured, target >= 2",
    ]
    card["task"], card["figures"] = "tso", {"oracle_n1_shortfall_steps": 3.0}
    assert check_card(card) == ["tso: figure oracle_n1_shortfall_steps = 3, target <= 0"]
    card["figures"] = {"oracle_n1_shortfall_steps": 0.0}
    assert check_card(card) == []


# ---- the command ---------------------------------------------------------------------------------
def test_the_cli_json_parses_and_matches_the_api():
    run = run_cli("card", "battery_arbitrage", "--json")
    assert run.returncode == 0, run.stderr
    printed = json.loads(run.stdout)
    unmet = printed.pop("unmet_targets")
    card = task_card("battery_arbitrage")
    assert printed == json.loads(json.dumps(card))
    assert unmet == check_card(card)
    text = run_cli("card", "battery_arbitrage")
    assert text.returncode == 0 and text.stdout.startswith("battery_arbitrage: task card")
    assert "naive (idle)" in text.stdout and "oracle" in text.stdout


def test_the_cli_refuses_max_episodes_without_recompute():
    run = run_cli("card", "battery_arbitrage", "--max-episodes", "2")
    assert run.returncode == 2 and "--max-episodes needs --recompute" in run.stderr


@pytest.mark.parametrize("task", ["battery_arbitrage", "marl_opf"])
def test_recompute_reproduces_the_stored_returns_of_its_days(task, tmp_path):
    """``--recompute --max-episodes 2`` measures the first and last table day again (into a copy
    of the table here): the card's policies give the stored returns of those days exactly (the
    oracle to HiGHS's tolerance across releases, as in test_baselines); random, whose stream
    runs across the episodes, only on the first day."""
    table = tmp_path / "baselines.json"
    table.write_bytes(BASELINES_FILE.read_bytes())
    run = run_cli(
        "card", task, "--recompute", "--max-episodes", "2", "--table", str(table), "--json"
    )
    assert run.returncode == 0, run.stderr
    card = json.loads(run.stdout)
    new, stored = baseline_rows(task, "test", table), baseline_rows(task, "test")
    assert set(new) == set(table_baselines(task))
    for policy, row in new.items():
        days = row["day_ids"]
        assert row["episodes"] == 2 and days == [0, stored[policy]["day_ids"][-1]]
        if policy not in stored:
            continue
        index = [stored[policy]["day_ids"].index(d) for d in days]
        expected = np.asarray(stored[policy]["returns"])[index]
        if policy == "random":
            expected, row["returns"] = expected[:1], row["returns"][:1]
        rtol = 1e-5 if policy == "oracle" else 1e-12
        np.testing.assert_allclose(row["returns"], expected, rtol=rtol, err_msg=policy)
    assert card["episodes"] == 2
    assert card["policies"]["oracle"]["mean_return"] == pytest.approx(new["oracle"]["mean"])
    if "storage" in card:  # the recomputed oracle row records its storage throughput
        assert len(new["oracle"]["storage_throughput_mwh"]) == 2
        assert card["storage"]["trading_day_share"] is not None


# ---- the pieces ----------------------------------------------------------------------------------
def test_the_equal_incremental_cost_dispatch_is_the_cheapest_that_meets_the_demand():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 10))
        c1 = rng.choice([10.0, 20.0, 40.0], n) + (rng.random(n) < 0.3) * rng.random(n)
        c2 = np.where(rng.random(n) < 0.5, 0.0, 0.05 * rng.random(n))
        lo = np.where(rng.random(n) < 0.5, 0.0, 50 * rng.random(n))
        hi = lo + np.where(rng.random(n) < 0.1, 0.0, 200 * rng.random(n))
        demand = rng.uniform(lo.sum() - 10, hi.sum() + 10, 4)
        p = equal_incremental_cost_dispatch(demand, lo, hi, c1, c2)
        np.testing.assert_allclose(p.sum(axis=1), np.clip(demand, lo.sum(), hi.sum()), atol=1e-6)
        assert np.all(p >= lo - 1e-9) and np.all(p <= hi + 1e-9)
        # optimal: no unit that can go down has a dearer incremental cost than one that can go up
        mc = c1 + 2 * c2 * p
        for j in range(p.shape[0]):
            down, up = p[j] > lo + 1e-6, p[j] < hi - 1e-6
            if down.any() and up.any():
                assert mc[j][down].max() <= mc[j][up].min() + 1e-6


def test_the_naive_dispatch_meets_the_load_and_ignores_the_lines():
    # test day 13, on which case5's must-run units (Pmin by technology) do not relieve the lines
    row = evaluate_baseline("marl_opf", "naive", "test", [13])
    assert row["returns"][0] < baseline_rows("marl_opf", "test")["rule_based"]["returns"][13]
    assert row["mean_costs"]["power_imbalance"] == pytest.approx(0.0, abs=1e-6)  # balanced
    assert row["mean_costs"]["thermal_overload"] > 1.0  # case5's 1-2 and 4-5 lines overload


def test_rows_of_a_storage_task_record_the_daily_storage_throughput():
    spec = task_spec("battery_arbitrage")
    assert storage_power_mw(spec) == 25.0 and storage_power_mw(task_spec("marl_opf")) == 0.0
    idle = evaluate_baseline("battery_arbitrage", "idle", "test", [0])
    assert idle["storage_throughput_mwh"] == [[0.0]] and idle["storage_energy_mwh"] == 100.0
    oracle = evaluate_baseline("battery_arbitrage", "oracle", "test", [0, 1])
    week = evaluate_baseline("marl_ev_v2g", "idle", "test", [0])
    assert (
        len(oracle["storage_throughput_mwh"]) == 2 and len(week["storage_throughput_mwh"][0]) == 7
    )
    assert all(x >= 0.0 for day in oracle["storage_throughput_mwh"] for x in day)
    assert week["storage_power_mw"] == pytest.approx(420 * 7.2e-3)


# ---- every task's stored card ------------------------------------------------------------------
@pytest.mark.parametrize("task", list_tasks())
def test_every_tasks_stored_card_meets_its_targets(task):
    """The card of the packaged table shows the task is a decision problem: the oracle tops the
    rule, the rule tops the naive policy and idle, the oracle keeps its budgets, and a storage
    task's oracle earns its storage and trades on most days (:data:`CARD_TARGETS`)."""
    unmet = check_card(task_card(task))
    assert unmet == [], "\n".join(unmet)


def test_every_card_figure_prints_with_words_beside_its_name():
    from powerzoo.benchmarks.card_figures import FIGURE_LABELS, FIGURES

    assert set(FIGURE_LABELS) == set(FIGURES)
    text = render_card(task_card("marl_uc"))
    assert "extra cost of the network-blind dispatch over the oracle, % (naive_gap_pct): " in text
    assert "figure naive_gap_pct" not in text
