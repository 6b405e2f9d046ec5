"""The results page of a campaign folder, checked on a hand-built partial campaign.

The folder is written by hand in the schema ``powerzoo campaign`` writes (``campaign.json``,
``trials/<id>/trial.json``, ``trials/<id>/run/evaluation/evaluation_metrics.csv``) on the real
``battery_arbitrage`` test days, with returns chosen against the packaged baselines table so that
every number on the page can be computed by hand: a feasible PPO row earning half and 0.7 of the
oracle's gain per day, and a SAC row that earns more than the oracle every day by breaking the
state-of-charge budget.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from powerzoo.benchmarks.baselines import baseline_rows, evaluation_protocol
from powerzoo.benchmarks.stats import bootstrap_ci
from powerzoo.cli.main import main
from powerzoo.rl.campaigns.page import (
    campaign_timing,
    learning_curves,
    read_campaign_folder,
    write_results_page,
)
from powerzoo.rl.campaigns.page_text import _num, _share, best_within_budget
from powerzoo.rl.campaigns.spec import CampaignSpec, TrialSpec
from powerzoo.rl.campaigns.trial import base_record
from powerzoo.tasks import task_spec

TASK = "battery_arbitrage"
FEASIBLE, GREEDY = "PPO/feasible", "SAC/greedy"
SHARE_OF_ORACLE_GAIN = {0: 0.5, 1: 0.7}  # PPO seed -> its return = random + share x oracle gain
GREEDY_COST = 5.0  # soc_violation per episode, budget 1.0
# (start, seconds of training, seconds of evaluation) of each finished trial
TIMES = {
    "battery_arbitrage-PPO-feasible-seed0": (1000.0, 50.0, 10.0),
    "battery_arbitrage-PPO-feasible-seed1": (1000.0, 70.0, 10.0),
    "battery_arbitrage-SAC-greedy-seed0": (1100.0, 150.0, 50.0),
}
CURVES = {0: {100: -900.0, 200: -500.0}, 1: {100: -700.0, 200: -300.0}}  # PPO seed -> log
BEST_STEPS = {0: (100,), 1: (100, 200)}  # PPO seed -> evaluations that set a new best model


def _trial(algorithm: str, setting: str, seed: int) -> TrialSpec:
    config = {"task": TASK, "algorithm": algorithm, "seed": seed}
    return TrialSpec(
        f"{TASK}-{algorithm}-{setting}-seed{seed}",
        TASK,
        algorithm,
        setting,
        seed,
        config,
        f"hash{algorithm}{seed}",
    )


def _episodes(trial: TrialSpec, returns: np.ndarray, cost: float, days: list[int]) -> list:
    return [
        {
            "task": TASK,
            "policy": trial.trial_label,
            "seed": trial.seed,
            "episode": i,
            "day_id": day,
            "env_seed": trial.seed * 1_000_000 + i,
            "return": float(r),
            "length": 48,
            "total_cost": cost,
            "cost_soc_violation": cost,
        }
        for i, (day, r) in enumerate(zip(days, returns, strict=True))
    ]


# the code of each finished trial's record (SAC seed 0: a record from before trials kept it)
CODE = {
    "battery_arbitrage-PPO-feasible-seed0": ("a" * 40, "5eed5eed5eed5eed"),
    "battery_arbitrage-PPO-feasible-seed1": ("b" * 40 + "+modified", "5eed5eed5eed5eed"),
}


def _write_record(out: Path, trial: TrialSpec, returns: np.ndarray, cost: float) -> None:
    days = evaluation_protocol(TASK)["day_ids"]
    start, train, evaluate = TIMES[trial.trial_id]
    record = {
        **base_record(trial),  # the spec fields every record starts with
        "status": "finished",
        "num_timesteps": 200,
        "train_seconds": train,
        "eval_seconds": evaluate,
        "started_at": start,
        "finished_at": start + train + evaluate,
        "model": "best",
        "run_dir": "/elsewhere/run",  # another machine's path: the page must not need it
        "days": days,
        "cost_names": ["soc_violation"],
        "episodes": _episodes(trial, returns, cost, days),
        "mean_return": float(np.mean(returns)),
        "normalized_score": None,
        "plots": [],
    }
    if trial.trial_id in CODE:
        commit, source = CODE[trial.trial_id]
        record["code"] = {"version": "0.1.0", "commit": commit, "source_hash": source}
    else:
        del record["code"]
    folder = out / "trials" / trial.trial_id
    (folder / "run" / "evaluation").mkdir(parents=True)
    (folder / "trial.json").write_text(json.dumps(record))
    if trial.algorithm == "PPO":
        log = CURVES[trial.seed]
        rows = ["timestep,episodes,mean_return,cost_soc_violation,violation_rate,new_best"]
        rows += [
            f"{step},8,{value},0.0,0.0,{step in BEST_STEPS[trial.seed]}"
            for step, value in log.items()
        ]
        (folder / "run" / "evaluation" / "evaluation_metrics.csv").write_text("\n".join(rows))


@pytest.fixture(scope="module")
def campaign_dir(tmp_path_factory) -> Path:
    """A partial campaign: PPO seeds 0 and 1 and SAC seed 0 finished, PPO seed 2 not started,
    SAC seed 1 interrupted (a run folder, no record), SAC seed 2 failed (``error.txt``)."""
    out = tmp_path_factory.mktemp("campaign")
    trials = [_trial("PPO", "feasible", s) for s in (0, 1, 2)]
    trials += [_trial("SAC", "greedy", s) for s in (0, 1, 2)]
    campaign = CampaignSpec(
        "handmade", (TASK,), (0, 1, 2), "test", None, ("random", "rule_based", "oracle"),
        "best", True, tuple(trials),
    )  # fmt: skip
    (out / "campaign.json").write_text(json.dumps(campaign.to_dict()))
    rows = baseline_rows(TASK, "test")
    random = np.asarray(rows["random"]["returns"])
    oracle = np.asarray(rows["oracle"]["returns"])
    for seed, share in SHARE_OF_ORACLE_GAIN.items():
        _write_record(out, trials[seed], random + share * (oracle - random), 0.0)
    _write_record(out, trials[3], oracle + 100.0, GREEDY_COST)
    (out / "trials" / trials[4].trial_id / "run").mkdir(parents=True)
    (out / "trials" / trials[5].trial_id).mkdir(parents=True)
    (out / "trials" / trials[5].trial_id / "error.txt").write_text(
        "Traceback (most recent call last):\nRuntimeError: the env diverged\n"
    )
    return out


@pytest.fixture(scope="module")
def page(campaign_dir, tmp_path_factory):
    before = sorted(p for p in campaign_dir.rglob("*"))
    page = write_results_page(campaign_dir, tmp_path_factory.mktemp("page"))
    assert sorted(p for p in campaign_dir.rglob("*")) == before  # nothing written there
    return page


def _row(page, policy: str) -> dict:
    return next(r for r in page.rows if r["policy"] == policy)


def test_pooled_rows_match_hand_computed_scores(page):
    table = baseline_rows(TASK, "test")
    random = np.asarray(table["random"]["returns"])
    gain = np.asarray(table["oracle"]["returns"]) - random
    pooled = np.concatenate([random + s * gain for s in SHARE_OF_ORACLE_GAIN.values()])
    row = _row(page, FEASIBLE)
    assert row["episodes"] == pooled.size and row["n_seeds"] == 2
    assert row["mean_return"] == pytest.approx(pooled.mean())
    low, high = bootstrap_ci(pooled)  # the same resamples as the table's statistics
    assert (row["mean_return_ci_low"], row["mean_return_ci_high"]) == pytest.approx((low, high))
    assert row["normalized_score"] == pytest.approx(0.6)  # (0.5 + 0.7) / 2 of the oracle's gain
    assert row["cmdp_score"] == pytest.approx(0.6)
    assert row["over_budget_rate"] == 0.0 and row["cost_soc_violation_mean"] == 0.0
    greedy = _row(page, GREEDY)
    clipped = np.minimum(np.asarray(table["oracle"]["returns"]) + 100.0 - random, 0.0)
    assert greedy["normalized_score"] > 1.0  # above the oracle on return alone
    assert greedy["cmdp_score"] == pytest.approx(clipped.mean() / gain.mean())
    assert greedy["cmdp_score"] <= 0.0 and greedy["over_budget_rate"] == 1.0
    assert greedy["cost_soc_violation_mean"] == GREEDY_COST


def test_baseline_rows_are_the_tables_without_rerunning(page):
    table = baseline_rows(TASK, "test")
    for policy in ("random", "rule_based", "oracle"):
        row = _row(page, policy)
        assert row["kind"] == "baseline"
        assert row["mean_return"] == pytest.approx(table[policy]["mean"])
        assert row["over_budget_rate"] == pytest.approx(table[policy]["over_budget_rate"])
    assert _row(page, "oracle")["cmdp_score"] == pytest.approx(1.0)
    assert _row(page, "random")["normalized_score"] == pytest.approx(0.0)


def test_the_idle_row_is_shown_beside_the_campaigns_baselines(page):
    """The campaign lists random, rule-based and oracle; the table's idle row (the battery at
    rest, 0 $ a day) is shown too, scored on the same scale: a trained row below it would do
    worse than doing nothing."""
    table = baseline_rows(TASK, "test")
    random, oracle = table["random"]["returns"], table["oracle"]["returns"]
    idle = _row(page, "idle")
    assert idle["kind"] == "baseline" and idle["mean_return"] == 0.0
    expected = -np.mean(random) / (np.mean(oracle) - np.mean(random))
    assert idle["cmdp_score"] == pytest.approx(expected)
    assert idle["over_budget_rate"] == 0.0
    summary = page.summary.read_text()
    assert "| task | idle | rule-based | oracle | best trained within budget |" in summary
    line = next(line for line in summary.splitlines() if line.startswith(f"| {TASK} "))
    assert line.startswith(f"| {TASK} | {expected:.3f} (0% over) | ")
    text = page.index.read_text()
    assert "| idle | table, seed 0 | 0.00 [0.00, 0.00] |" in text
    assert f"Idle: {task_spec(TASK).idle_doc}." in text


def test_the_summary_picks_the_feasible_row_over_a_higher_scoring_infeasible_one(page):
    assert best_within_budget(page.rows)["policy"] == FEASIBLE
    summary = page.summary.read_text()
    line = next(line for line in summary.splitlines() if line.startswith(f"| {TASK} "))
    assert f"{FEASIBLE}: 0.600 [" in line and GREEDY not in line
    # the return next to the rule's (scores compress where random is far worse than the rule)
    rule = _row(page, "rule_based")["mean_return"]
    feasible = _row(page, FEASIBLE)["mean_return"]
    assert f"0% over, return {_num(feasible)} against the rule's {_num(rule)}, 2/3 seeds" in line
    assert "at most 5% of the test days" in summary
    assert summary in page.index.read_text()  # the page carries the same table


def test_shares_keep_one_decimal_unless_whole():
    assert [_share(r) for r in (0.0, 3 / 65, 0.05, 7 / 130, 1.0, None)] == [
        "0%", "4.6%", "5%", "5.4%", "100%", "n/a"
    ]  # fmt: skip


def test_the_page_has_the_task_table_plots_and_missing_trials(page):
    text = page.index.read_text()
    assert "3 of 6 trials finished (a partial campaign: 3 trials missing" in text
    assert "of trial time, 7.8 min of it still to run (about 3.9 min on two workers)" in text
    assert "| soc_violation / episode (budget 1) |" in text
    # each seed with the env steps of the model tested (the last new best; no log: "?")
    assert f"| {FEASIBLE} | 2/3: 0 (100), 1 (200) | " in text
    assert f"| {GREEDY} | 1/3: 0 (?) | " in text
    assert f"`{TASK}` {FEASIBLE}: seed 2: not started" in text
    assert (
        f"`{TASK}` {GREEDY}: seed 1: in progress or interrupted; "
        "seed 2: failed: RuntimeError: the env diverged"
    ) in text
    for name in (f"return_vs_cost_{TASK}.png", f"learning_curves_{TASK}.png"):
        assert (page.index.parent / name).stat().st_size > 10_000
        assert f"]({name})" in text
    with (page.index.parent / "results.csv").open() as handle:
        policies = [r["policy"] for r in csv.DictReader(handle)]
    assert policies == ["random", "rule_based", "oracle", "idle", FEASIBLE, GREEDY]


def test_learning_curves_average_the_seeds_at_each_step(campaign_dir):
    (curve,) = learning_curves(read_campaign_folder(campaign_dir), TASK)  # SAC logged nothing
    assert curve.label == FEASIBLE
    assert curve.timesteps.tolist() == [100, 200]
    assert curve.mean.tolist() == [-800.0, -400.0]
    assert curve.n_seeds.tolist() == [2, 2]
    assert (curve.low[0], curve.high[0]) == pytest.approx(bootstrap_ci([-900.0, -700.0]))


def test_compute_time_from_the_records_and_the_cluster_estimate(campaign_dir):
    timing = campaign_timing(read_campaign_folder(campaign_dir), workers=(2, 16))
    assert timing["finished"] == 3
    assert timing["trial_seconds"] == 60.0 + 80.0 + 200.0
    assert timing["wall_seconds"] == 1300.0 - 1000.0  # first start to last end
    # missing: PPO seed 2 at the PPO mean (70 s), SAC seeds 1 and 2 at the SAC one (200 s)
    assert timing["estimated_missing"] == 3
    assert timing["total_seconds"] == 340.0 + 70.0 + 2 * 200.0
    assert timing["left_seconds"] == 70.0 + 2 * 200.0
    assert timing["longest"] == ("battery_arbitrage-SAC-greedy-seed0", 200.0)
    assert timing["cluster"] == {2: 810.0 / 2, 16: 200.0}  # never below the longest trial
    assert timing["code"] == [
        {"source_hash": "5eed5eed5eed5eed", "commits": ["a" * 40, "b" * 40 + "+modified"],
         "trials": 2},
        {"source_hash": None, "commits": [], "trials": 1},
    ]  # fmt: skip


def test_the_page_names_the_code_of_the_records(page):
    text = page.index.read_text()
    assert (
        "2 by sources `5eed5eed5eed5eed` (commit `aaaaaaaaaa`, `bbbbbbbbbb+modified`); "
        "1 recorded before trials kept their code." in text
    )


def test_cli_writes_the_page_and_names_its_files(campaign_dir, tmp_path, capsys):
    out = tmp_path / "page"
    assert main(["campaign-report", str(campaign_dir), "--out", str(out), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert f"results page: {out / 'index.md'}" in printed
    assert "3 of 6 trial(s) finished; 3 missing, listed on the page" in printed
    assert not list(out.glob("*.png"))


def test_a_folder_without_campaign_json_is_one_error_line(tmp_path, capsys):
    assert main(["campaign-report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"powerzoo: error: no campaign.json in {tmp_path.resolve()}; pass the --out folder of "
        "`powerzoo campaign`"
    )
    assert not os.listdir(tmp_path)


def test_diagnoses_are_printed_under_the_summary_and_in_the_task_section(campaign_dir, tmp_path):
    from powerzoo.rl.campaigns.page import read_diagnoses

    path = tmp_path / "diagnoses.yaml"
    path.write_text(f"{TASK}: >\n  The budget asks for\n  more than the policy can do.\n")
    diagnoses = read_diagnoses(path)
    assert diagnoses == {TASK: "The budget asks for more than the policy can do."}
    page = write_results_page(campaign_dir, tmp_path / "page", plots=False, diagnoses=diagnoses)
    summary = page.summary.read_text()
    assert f"- **{TASK}**: The budget asks for more than the policy can do." in summary
    assert "**Diagnosis (measured).** The budget asks" in page.index.read_text()
    with pytest.raises(ValueError, match="does not hold: marl_uc"):
        write_results_page(campaign_dir, tmp_path / "p2", plots=False, diagnoses={"marl_uc": "x"})
    path.write_text("- a list\n")
    with pytest.raises(ValueError, match="maps task names to text"):
        read_diagnoses(path)


def test_a_preface_is_printed_under_the_title_and_an_empty_one_is_refused(
    campaign_dir, tmp_path, capsys
):
    preface = tmp_path / "preface.md"
    preface.write_text("!!! warning\n    These tasks have changed since.\n")
    out = tmp_path / "page"
    args = ["campaign-report", str(campaign_dir), "--out", str(out), "--no-plots"]
    assert main([*args, "--preface", str(preface)]) == 0
    lines = (out / "index.md").read_text().splitlines()
    assert lines[0].startswith("# PowerZoo benchmark results")
    assert lines[2:4] == ["!!! warning", "    These tasks have changed since."]
    assert lines[5].startswith("3 of 6 trials finished")
    capsys.readouterr()
    preface.write_text("\n  \n")
    assert main([*args, "--preface", str(preface)]) == 2
    assert capsys.readouterr().err.strip() == f"powerzoo: error: --preface {preface} is empty"
    assert main([*args, "--preface", str(tmp_path / "missing.md")]) == 2
    assert "missing.md" in capsys.readouterr().err


def test_a_rewritten_page_drops_the_figures_of_tasks_it_no_longer_shows(campaign_dir, tmp_path):
    stale = tmp_path / "learning_curves_withdrawn_task.png"
    stale.write_bytes(b"an earlier report's figure")
    write_results_page(campaign_dir, tmp_path)
    assert not stale.exists()
    assert (tmp_path / f"learning_curves_{TASK}.png").is_file()
