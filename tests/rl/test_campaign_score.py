"""The benchmark v2 results of a campaign folder (``powerzoo campaign-score``), checked on a
hand-built partial campaign.

The folder is written by hand in the schema ``powerzoo campaign`` writes with ``env_seeds:
protocol`` (``campaign.json``, ``trials/<id>/trial.json``): each trial's test episodes are the
packaged baselines table's days and env seeds, its returns the rule's plus a chosen share of the
oracle's lead on each day, so the scores are known: on ``battery_arbitrage`` (learnable
headroom) PPO and PPO-L keep the budget and PPO-RESIDUAL breaks it; ``dc_microgrid`` (a cost
task with headroom) has one PPO seed below its anchor; ``marl_opf`` has no learnable headroom.

The ``battery_arbitrage`` records also hold held-out family episodes (``heatwave`` within the
budget, ``low_renewable`` far over it), each the twin test episode's return less a chosen drop per
seed and a day term, except one older PPO-L record that holds none; a hand-written ``powerzoo
families`` output gives the rule's and the oracle's drops.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from powerzoo.benchmarks.aggregates import (
    aggregate_scores,
    performance_profile,
    probability_of_improvement,
)
from powerzoo.benchmarks.baselines import BASELINES_FILE, baseline_rows, evaluation_protocol
from powerzoo.benchmarks.families import FamilyResult, write_families
from powerzoo.benchmarks.resampling import SeedBlockResamples, episode_blocks
from powerzoo.benchmarks.score_v2 import task_reference
from powerzoo.benchmarks.submission import read_submission
from powerzoo.benchmarks.submission_score import RESULT_COLUMNS, score_submission
from powerzoo.cli.main import main
from powerzoo.provenance import code_provenance
from powerzoo.rl.campaigns import score_summary
from powerzoo.rl.campaigns.family_episodes import family_plan
from powerzoo.rl.campaigns.score_aggregates import (
    BUDGETS_FIRST,
    budgets_first_scores,
    within_budget_runs,
)
from powerzoo.rl.campaigns.score_families import FAMILY_COLUMNS, trained_family_rows
from powerzoo.rl.campaigns.score_page import (
    AGGREGATE_COLUMNS,
    ROW_COLUMNS,
    algorithm_family,
    write_campaign_scores,
)
from powerzoo.rl.campaigns.score_page_text import (
    _above_oracle_text,
    budget_not_robust,
    claim_row,
    score_sensitivity,
)
from powerzoo.rl.campaigns.score_readme import BLOCKS, coverage_sentence, markers, replace_block
from powerzoo.rl.campaigns.score_ties import largest_tie, ties_text
from powerzoo.rl.campaigns.spec import CampaignSpec, TrialSpec
from powerzoo.rl.campaigns.trial import base_record

RESAMPLES = 200  # enough for the checks; every number is compared at the same resamples
SEEDS = (0, 1, 2)
# (task, algorithm, setting) -> {seed: share of the oracle's lead over the rule on each day}
SHARES = {
    ("battery_arbitrage", "PPO", "objective"): {0: 0.3, 1: 0.5, 2: 0.4},
    ("battery_arbitrage", "PPO-L", "default"): {0: -0.2, 1: 0.1},
    ("battery_arbitrage", "PPO-RESIDUAL", "objective"): {0: 0.6},  # seed 1 damaged, 2 failed
    ("dc_microgrid", "PPO", "objective"): {0: -0.1},
    ("marl_opf", "PPO", "objective"): {0: 0.2, 1: 0.3},
}
OVER_BUDGET = {("battery_arbitrage", "PPO-RESIDUAL", "objective")}  # 3 x the budget every day
DAMAGED = "battery_arbitrage-PPO-RESIDUAL-objective-seed1"
FAILED = "battery_arbitrage-PPO-RESIDUAL-objective-seed2"
CPU_S, EVAL_S, STEPS = 300.0, 40.0, 120_000  # per finished trial (steps: + 1000 x seed)
HARDWARE = {"cpu_model": "Test CPU 9000", "cpu_count": 2, "cpus_usable": 1, "torch_device": "cpu"}
DIAGNOSIS = "measured: the learner stays below the rule within its 300 s"
CURVE_TRIAL = "dc_microgrid-PPO-objective-seed0"  # its validation curve peaks at its last point
CURVE = "timestep,mean_return,new_best\n10000,-900.0,True\n20000,-950.0,False\n30000,-700.0,True\n"
FAMILY_TASK = "battery_arbitrage"
FAMILY_DROPS = {0: 40.0, 1: -10.0, 2: 25.0}  # $ per episode, by seed (plus day_id % 3)
OVER_BUDGET_FAMILY = "low_renewable"  # family costs 3 x the budget every day
NO_FAMILIES = "battery_arbitrage-PPO-L-default-seed1"  # an older record: no family episodes
BASELINE_DROPS = {"rule_based": 100.0, "oracle": 50.0}  # $ per episode (plus day_id % 3)
BASELINE_OWN_DAYS = 5  # the baselines' low_renewable table holds only its first 5 days


@functools.cache
def _plan(task: str, family: str) -> tuple[tuple[int, int, int], ...]:
    """(family day, test day, env seed) of every family episode of the protocol."""
    protocol = evaluation_protocol(task)
    return tuple(family_plan(task, family, protocol["day_ids"], protocol["seed"]))


def _family_rows(trial: TrialSpec, episodes: list[dict], budget: float) -> dict:
    """``record["families"]``: each family day's return is its twin test episode's less the
    seed's drop and ``day_id % 3``."""
    by_day = {e["day_id"]: e for e in episodes}
    out = {}
    for family in ("heatwave", OVER_BUDGET_FAMILY):
        rows = []
        for day, test_day, env_seed in _plan(trial.task, family):
            twin = by_day[test_day]
            cost = (
                3.0 * budget + 1.0 if family == OVER_BUDGET_FAMILY else twin["cost_soc_violation"]
            )
            drop = FAMILY_DROPS[trial.seed] + day % 3
            rows.append(
                {
                    "day_id": day,
                    "test_day_id": test_day,
                    "env_seed": env_seed,
                    "return": twin["return"] - drop,
                    "length": 48,
                    "total_cost": cost,
                    "cost_soc_violation": cost,
                }
            )
        out[family] = rows
    return out


def _trial(task: str, algorithm: str, setting: str, seed: int) -> TrialSpec:
    config = {"task": task, "algorithm": algorithm, "seed": seed}
    trial_id = f"{task}-{algorithm}-{setting}-seed{seed}"
    return TrialSpec(trial_id, task, algorithm, setting, seed, config, f"hash-{trial_id}")


def _record(trial: TrialSpec, share: float, over_budget: bool) -> dict:
    rows = baseline_rows(trial.task, "test")
    rule, oracle = rows["rule_based"], rows["oracle"]
    protocol = evaluation_protocol(trial.task)
    budgets = task_reference(trial.task).budgets
    names = list(rule["episode_costs"])
    episodes = []
    for i, day in enumerate(protocol["day_ids"]):
        costs = {n: float(rule["episode_costs"][n][i]) for n in names}
        if over_budget:
            costs = {n: 3.0 * (budgets.budget(n) or 0.0) + 1.0 for n in names}
        ret = rule["returns"][i] + share * (oracle["returns"][i] - rule["returns"][i])
        episodes.append(
            {
                "seed": trial.seed,
                "episode": i,
                "day_id": day,
                "env_seed": protocol["seed"] + i,
                "return": float(ret),
                "length": 48,
                "total_cost": sum(costs.values()),
                **{f"cost_{n}": c for n, c in costs.items()},
            }
        )
    families = {}
    if trial.task == FAMILY_TASK and trial.trial_id != NO_FAMILIES:
        families = {"families": _family_rows(trial, episodes, budgets.budget("soc_violation"))}
    return {
        **families,
        **base_record(trial),
        "status": "finished",
        "num_timesteps": STEPS + 1000 * trial.seed,
        "env_steps": STEPS + 1000 * trial.seed,
        "train_seconds": CPU_S + 5.0,
        "cpu_seconds": CPU_S,
        "eval_seconds": EVAL_S,
        "model": "best",
        "env_seeds": "protocol",
        "hardware": HARDWARE,
        "days": list(protocol["day_ids"]),
        "cost_names": names,
        "episodes": episodes,
    }


def _campaign(trials: list[TrialSpec]) -> CampaignSpec:
    tasks = tuple(dict.fromkeys(t.task for t in trials))
    return CampaignSpec(
        "handmade_v2", tasks, SEEDS, "test", None, (), "best", False, tuple(trials),
        env_seeds="protocol",
    )  # fmt: skip


def _write_folder(out: Path, finished: bool = True) -> CampaignSpec:
    trials = [_trial(*key, s) for key in SHARES for s in SEEDS]
    campaign = _campaign(trials)
    out.mkdir(parents=True, exist_ok=True)
    (out / "campaign.json").write_text(json.dumps(campaign.to_dict()))
    if not finished:
        return campaign
    for trial in trials:
        key = (trial.task, trial.algorithm, trial.setting)
        folder = out / "trials" / trial.trial_id
        if trial.trial_id == FAILED:
            folder.mkdir(parents=True)
            (folder / "error.txt").write_text("Traceback ...\nRuntimeError: boom\n")
        elif trial.trial_id == DAMAGED:
            folder.mkdir(parents=True)
            record = _record(trial, 0.6, over_budget=False)
            record["episodes"][3]["env_seed"] += 1  # not the protocol's env seed
            (folder / "trial.json").write_text(json.dumps(record))
        elif trial.seed in SHARES[key]:
            folder.mkdir(parents=True)
            record = _record(trial, SHARES[key][trial.seed], key in OVER_BUDGET)
            (folder / "trial.json").write_text(json.dumps(record))
            if trial.trial_id == CURVE_TRIAL:
                (folder / "run" / "evaluation").mkdir(parents=True)
                (folder / "run" / "evaluation" / "evaluation_metrics.csv").write_text(CURVE)
    return campaign


def _write_baseline_families(out: Path) -> Path:
    """A ``powerzoo families`` output of ``FAMILY_TASK`` (``out/<task>/``, by
    :func:`write_families`): each baseline's family return is its test return on the twin day
    less its drop and ``day_id % 3``; ``heatwave`` on every family day, ``low_renewable`` on its
    first :data:`BASELINE_OWN_DAYS` days only."""
    table = baseline_rows(FAMILY_TASK, "test")
    rows, episodes = [], []
    for policy, shift in BASELINE_DROPS.items():
        test = table[policy]["returns"]
        for family in ("heatwave", "low_renewable"):
            plan = _plan(FAMILY_TASK, family)
            plan = plan if family == "heatwave" else plan[:BASELINE_OWN_DAYS]
            returns = [test[t] - shift - d % 3 for d, t, _ in plan]
            twins = [test[t] for _, t, _ in plan]
            episodes += [
                {"task": FAMILY_TASK, "policy": policy, "split": family, "day_id": d,
                 "calendar_day": 0, "test_day_id": t, "env_seed": seed, "return": r,
                 "test_return": test[t], "total_cost": 0.0}
                for (d, t, seed), r in zip(plan, returns, strict=True)
            ]  # fmt: skip
            drop = float(np.mean(twins) - np.mean(returns))
            rows.append(
                {"task": FAMILY_TASK, "policy": policy, "split": family, "episodes": len(plan),
                 "mean_return": float(np.mean(returns)), "std_return": 0.0,
                 "test_mean_return": float(np.mean(twins)), "drop": drop, "drop_pct": None,
                 "over_budget_rate": 0.25, "violation_rate": 0.25, "seconds": 0.0,
                 "mean_costs": {"soc_violation": 0.0}}
            )  # fmt: skip
    result = FamilyResult(FAMILY_TASK, rows, episodes, ("soc_violation",), [])
    write_families(result, out / FAMILY_TASK)
    return out


@pytest.fixture(scope="module", autouse=True)
def _table_read_once():
    """The baselines table parsed once per file rather than at each look-up: reading a folder
    checks every episode's env seed against the table's protocol, which parses the table again
    for each episode (about 15 ms each). Same table, same numbers."""
    from powerzoo.benchmarks import baselines

    parsed: dict[Path, dict] = {}
    read = baselines.load_baselines

    def load(path=None):
        key = Path(path) if path is not None else baselines._TABLE_IN_USE.get()
        key = key or baselines.BASELINES_FILE
        if key not in parsed:
            parsed[key] = read(path)
        return parsed[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(baselines, "load_baselines", load)
        yield


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    root = tmp_path_factory.mktemp("campaign_score")
    _write_folder(root / "campaign")
    _write_baseline_families(root / "families")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = write_campaign_scores(
            root / "campaign",
            root / "v2",
            diagnoses={"dc_microgrid": DIAGNOSIS},
            families_dir=root / "families",
            n_resamples=RESAMPLES,
            progress=False,
        )
    result.warnings = [str(w.message) for w in caught]
    return result


def _row(scored, task: str, label: str) -> dict:
    return next(r for r in scored.rows if r["task"] == task and r["label"] == label)


def test_every_row_is_what_powerzoo_score_gives_its_submission_folder(scored):
    assert [(r["task"], r["label"]) for r in scored.rows] == [
        ("battery_arbitrage", "PPO/objective"),
        ("battery_arbitrage", "PPO-L/default"),
        ("battery_arbitrage", "PPO-RESIDUAL/objective"),
        ("dc_microgrid", "PPO/objective"),
        ("marl_opf", "PPO/objective"),
    ]
    for row in scored.rows:
        folder = scored.files["submissions"] / f"{row['task']}__{row['label'].replace('/', '_')}"
        again = score_submission(read_submission(folder), n_resamples=RESAMPLES)
        assert {k: row[k] for k in RESULT_COLUMNS} == again
    ppo = _row(scored, "battery_arbitrage", "PPO/objective")
    assert ppo["seeds"] == [0, 1, 2] and ppo["paired_on"] == "days and env seeds"
    assert ppo["run_performance"] == pytest.approx([0.3, 0.5, 0.4], abs=1e-9)
    assert ppo["median_env_steps"] == STEPS + 1000
    assert (ppo["min_env_steps"], ppo["max_env_steps"]) == (STEPS, STEPS + 2000)
    assert ppo["cpu_core_hours"] == pytest.approx(3 * (CPU_S + EVAL_S) / 3600)
    assert ppo["n_trials_planned"] == 3
    # the CSV holds every row under the results table's columns and the campaign's
    with scored.files["results_csv"].open(newline="") as f:
        reader = csv.DictReader(f)
        table = list(reader)
    assert tuple(reader.fieldnames) == ROW_COLUMNS and len(table) == len(scored.rows)
    assert json.loads(table[0]["run_performance"]) == ppo["run_performance"]
    assert float(table[0]["performance"]) == ppo["performance"]


def test_families_and_the_headline_leave_out_tasks_without_learnable_headroom(scored):
    assert {r["label"]: r["family"] for r in scored.rows} == {
        "PPO/objective": "learner",
        "PPO-L/default": "lagrangian",
        "PPO-RESIDUAL/objective": "residual",
    }
    assert [algorithm_family(a) for a in ("MAPPO", "IPPO-L", "SAC", "MAPPO-SAFE", "BC-PPO")] == [
        "learner",
        "lagrangian",
        "learner",
        "safe",
        "bc",
    ]
    assert not _row(scored, "marl_opf", "PPO/objective")["learnable_headroom"]
    by = {(a["family"], a["statistic"]): a for a in scored.aggregates}
    learner = {
        "battery_arbitrage": _row(scored, "battery_arbitrage", "PPO/objective")["run_performance"],
        "dc_microgrid": _row(scored, "dc_microgrid", "PPO/objective")["run_performance"],
    }
    expected = aggregate_scores(learner, n_resamples=RESAMPLES)
    for stat in ("iqm", "mean", "median", "optimality_gap"):
        got = by[("learner", stat)]
        assert got["tasks"] == ["battery_arbitrage", "dc_microgrid"]  # not marl_opf
        assert {k: got[k] for k in ("value", "ci_low", "ci_high")} == expected[stat]
    assert by[("learner", "iqm")]["n_runs"] == 4
    gap = by[("learner", "oracle_gap_pct_mean")]  # the cost tasks only
    assert gap["tasks"] == ["dc_microgrid"]
    assert gap["value"] == pytest.approx(
        _row(scored, "dc_microgrid", "PPO/objective")["oracle_gap_pct"]
    )
    assert ("lagrangian", "iqm") in by and ("residual", "iqm") in by
    pairs = {
        (a["family"], a["versus"]): a
        for a in scored.aggregates
        if a["versus"] and not a["statistic"].endswith(BUDGETS_FIRST)
    }
    first = {
        (a["family"], a["versus"]): a
        for a in scored.aggregates
        if a["statistic"].endswith(BUDGETS_FIRST)
    }
    assert set(first) == set(pairs)
    assert first[("learner", "residual")]["statistic"] == "P(learner > residual), budgets first"
    ranked = budgets_first_scores(scored.rows)
    shared = first[("learner", "residual")]["tasks"]
    expected = probability_of_improvement(
        {t: ranked["learner"][t] for t in shared},
        {t: ranked["residual"][t] for t in shared},
        n_resamples=RESAMPLES,
    )
    assert {k: first[("learner", "residual")][k] for k in expected} == expected
    assert set(pairs) == {
        ("learner", "lagrangian"),
        ("learner", "residual"),
        ("lagrangian", "residual"),
    }
    p = probability_of_improvement(
        {"battery_arbitrage": learner["battery_arbitrage"]},
        {
            "battery_arbitrage": _row(scored, "battery_arbitrage", "PPO-L/default")[
                "run_performance"
            ]
        },
        n_resamples=RESAMPLES,
    )
    assert pairs[("learner", "lagrangian")]["value"] == p["value"] == 1.0  # every run above
    assert pairs[("learner", "lagrangian")]["tasks"] == ["battery_arbitrage"]
    with scored.files["aggregates_csv"].open(newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == AGGREGATE_COLUMNS
        assert len(list(reader)) == len(scored.aggregates)
    assert scored.files["profiles"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = scored.files["page"].read_text()
    assert "No learnable headroom" in page and "marl_opf (0.00 %)" in page
    assert "![performance profiles](performance_profiles.png)" in page
    assert "a run over any budget counts as scoring above no threshold" in page
    assert "| env steps: median (seeds' range) |" in page
    assert " | 121k (120k-122k) |" in page  # battery_arbitrage PPO's three seeds
    iqm = by[("learner", "iqm")]
    cell = f"{iqm['value']:.3f} [{iqm['ci_low']:.3f}, {iqm['ci_high']:.3f}]"
    assert f"| learner | 2 | 4 | 1-3 | {cell} |" in page  # runs per task: 1 to 3
    assert (
        "| X | Y | tasks | P(X > Y), budgets first [95% CI] | P(X > Y), performance alone" in page
    )
    assert page.split("| residual | 1 | 1 |")[1].split("\n")[0].endswith("| 0/1 |")  # over budget


def test_coverage_counts_finished_trials_and_core_hours(scored):
    cov = scored.coverage
    finished = sum(len(v) for v in SHARES.values())  # 9
    assert (cov["finished"], cov["planned"]) == (finished, 15)
    assert cov["per_seed"] == {0: (5, 5), 1: (3, 5), 2: (1, 5)}
    assert cov["core_hours"] == pytest.approx(finished * (CPU_S + EVAL_S) / 3600)
    assert cov["projected_core_hours"] == pytest.approx(15 * (CPU_S + EVAL_S) / 3600)
    assert cov["cluster_hours"] == pytest.approx(cov["projected_core_hours"] / 16)
    # no wall_seconds in these records: their training wall time is train_seconds
    assert cov["wall_hours"] == pytest.approx(finished * (CPU_S + 5.0 + EVAL_S) / 3600)
    page = scored.files["page"].read_text()
    assert "Trials finished: 9 of 15 (60%); per seed: seed 0: 5/5, seed 1: 3/5, seed 2: 1/5" in page
    assert f"Core-hours spent: {cov['core_hours']:.2f}" in page
    assert f"{cov['projected_core_hours']:.1f} core-hours" in page
    assert f"about {cov['cluster_hours']:.2f} h of wall time (projected / 16)" in page
    ratio = (CPU_S + 5.0 + EVAL_S) / (CPU_S + EVAL_S)
    assert (
        f"Wall time of the finished trials: {cov['wall_hours']:.2f} h in all, {ratio:.2f} x" in page
    )
    assert "Test CPU 9000, 1 of 2 cores usable, torch on cpu: 9 trial(s)" in page
    # the code each record names (all from this checkout here), one line on the page
    (version,) = cov["code"]
    assert (
        version["trials"] == finished and version["source_hash"] == code_provenance()["source_hash"]
    )
    assert "- Code (a hash of the package's Python sources" in page
    assert f"9 by sources `{version['source_hash']}`" in page
    assert "Generated by `powerzoo campaign-score" in page
    table = scored.coverage["baselines"]  # the packaged table: no folder pins one here
    assert table == {
        "file": "baselines.json",
        "pinned": False,
        "sha256": hashlib.sha256(BASELINES_FILE.read_bytes()).hexdigest()[:16],
    }
    assert f"`baselines.json`, the packaged table, sha256 `{table['sha256']}`." in page
    n_rows = len(scored.rows)
    assert (
        f"- Tuning (the rows' `tuning_budget`): {n_rows} row(s): not recorded (a PowerZoo "
        "campaign preset). A row without a recorded search" in page
    )


def test_a_damaged_record_is_left_out_with_a_note(scored):
    residual = _row(scored, "battery_arbitrage", "PPO-RESIDUAL/objective")
    assert residual["seeds"] == [0]
    assert "env seed" in scored.coverage["left_out"][DAMAGED]
    assert scored.coverage["left_out"][FAILED].startswith("failed: RuntimeError: boom")
    assert any(DAMAGED in w and "left out" in w for w in scored.warnings)
    page = scored.files["page"].read_text()
    assert f"`{DAMAGED}`: damaged record" in page and f"`{FAILED}`: failed" in page


def test_claims_name_the_best_row_within_budget_above_its_anchor(scored):
    page = scored.files["page"].read_text()
    claims = page.split("## Claims")[1].split("## Per task")[0]
    # the residual scores higher but breaks the budget: the claim is PPO's
    assert not _row(scored, "battery_arbitrage", "PPO-RESIDUAL/objective")["within_budget"]
    assert "**battery_arbitrage**: PPO/objective within budget" in claims
    # the records' diagnosis first (the curve peaks at its last point), then the written one
    dc = claims.split("**dc_microgrid**: no row above its anchor yet. Measured: ")[1].split("\n")[0]
    assert dc.startswith("Compute-bound: most rows were still improving")
    assert "PPO/objective (1 seed) -" in dc and "against rule_based, within budget" in dc
    assert "best validation model at 100% of" in dc and dc.endswith(f". {DIAGNOSIS}")
    # battery_arbitrage has a claim: no diagnosis
    assert "**battery_arbitrage**: PPO/objective within budget" in claims
    assert "marl_opf" not in claims  # no learnable headroom: no claim asked
    assert (
        "Ties (performances within 1e-09): the most runs at one performance value are 2 of 9"
        in claims
    )
    assert "under 0.01: no cost task" in claims
    ref = task_reference("dc_microgrid")
    anchor = ref.mean_return(ref.anchor)
    assert score_sensitivity(ref) == pytest.approx(
        0.01 * abs(anchor) / (ref.mean_return("oracle") - anchor)
    )
    assert score_sensitivity(task_reference("battery_arbitrage")) is None  # not a cost task
    section = page.split("### dc_microgrid")[1]
    assert "**Diagnosis (measured).** Measured: Compute-bound" in section
    assert f"{DIAGNOSIS}\n" in section


def test_claim_row_and_ties_on_chosen_rows():
    def row(label, within, low, perf):
        return {
            "label": label,
            "within_budget": within,
            "anchor_diff_ci_low": low,
            "anchor_diff": 1.0,
            "performance": perf,
        }

    rows = [row("a", True, 0.5, 0.2), row("b", False, 2.0, 0.9), row("c", True, -0.1, 0.5)]
    assert claim_row(rows)["label"] == "a"
    assert claim_row([row("b", False, 2.0, 0.9), row("c", True, 0.0, 0.5)]) is None
    assert largest_tie([0.0, 0.5, 1e-12, 0.0, 0.3]) == (3, 0.0)
    assert largest_tie([0.1, 0.2]) == (1, 0.1)
    assert largest_tie([])[0] == 0


def test_budgets_first_ranks_every_run_within_budget_above_every_run_over():
    def row(family, task, runs, within, learnable=True):
        return {
            "family": family,
            "task": task,
            "scale": "oracle",
            "learnable_headroom": learnable,
            "run_performance": runs,
            "run_within_budget": within,
        }

    rows = [
        row("learner", "a", [2.0, -0.5, None], [False, True, False]),
        row("lagrangian", "a", [-3.0, 0.1], [True, True]),
        row("learner", "b", [0.2], [False], learnable=False),  # left out of the headline
    ]
    ranked = budgets_first_scores(rows)
    assert set(ranked) == {"learner", "lagrangian"} and set(ranked["learner"]) == {"a"}
    learner, lagrangian = ranked["learner"]["a"], ranked["lagrangian"]["a"]
    assert learner[0] == 2.0  # over budget: its performance as it is
    assert min(learner[1], *lagrangian) > learner[0]  # every run within budget above it
    assert lagrangian[0] < learner[1] < lagrangian[1]  # order of performance kept among them
    # performance alone, the learner wins half its pairs and ties none; budgets first, fewer
    perf = probability_of_improvement({"a": [2.0, -0.5]}, {"a": [-3.0, 0.1]}, n_resamples=10)
    first = probability_of_improvement({"a": learner}, {"a": lagrangian}, n_resamples=10)
    assert (perf["value"], first["value"]) == (0.75, 0.25)
    assert budgets_first_scores([]) == {}
    # the within-budget profile: a run over budget sits below every threshold it reads
    within = within_budget_runs(rows, below=-9.0)
    assert within["learner"]["a"] == [-9.0, -0.5] and within["lagrangian"]["a"] == [-3.0, 0.1]
    profile = performance_profile(within["learner"], [-5.0, -1.0, 0.0], n_resamples=10)
    assert list(profile["fraction"]) == [0.5, 0.5, 0.0]  # at most its share within budget


def test_ties_count_a_residual_that_kept_the_rule_apart():
    def row(family, anchor, runs, returns):
        return {
            "scale": "oracle",
            "family": family,
            "anchor": anchor,
            "anchor_return": -1000.0,
            "run_performance": runs,
            "run_mean_return": returns,
        }

    rows = [  # two residual runs kept the rule, the anchor (the second to float noise)
        row("residual", "rule_based", [0.0, -4e-9, 0.3], [-1000.0, -1000.000002, -900.0]),
        row("learner", "rule_based", [-4e-9, -4e-9, 0.1], [-1000.000002] * 2 + [-990.0]),
        row("residual", "idle", [-4e-9, None], [-1000.000002, None]),  # the rule is no anchor
    ]
    text = ties_text(rows)
    assert "at -0.000." not in text
    assert "the most runs at one performance value are 4 of 7 (57.1%; every task's runs" in text
    assert (
        "2 runs are residual learners that kept their untrained policy, the rule, which is" in text
    )
    # one of the two is in the tie at -4e-9; the other, at 0.0, is 4e-9 away from it
    assert "anchor (1 of them in that tie, the others float noise away from it): one policy" in text
    assert "Without them the most runs at one value are 3 of 5 (60.0%), at 0.000." in text
    assert ties_text([row("learner", "rule_based", [0.1, 0.2], [0.0, 1.0])]) == (
        "- Ties (performances within 1e-09): no two of the 2 runs tie."
    )
    assert "residual learners" not in ties_text(
        [row("learner", "rule_based", [0.0, 0.0], [-1000.0, -1000.0])]
    )
    assert ties_text([row("learner", "rule_based", [None], [None])]) == ""
    # the headline leaves out the tasks without learnable headroom: their ties are counted apart
    flat = {**row("residual", "rule_based", [0.0, 0.0, 0.0], [-1000.0] * 3)}
    flat["learnable_headroom"] = False
    steep = {**row("learner", "rule_based", [0.1, 0.2, 0.2], [-990.0, -980.0, -980.0])}
    steep["learnable_headroom"] = True
    text = ties_text([flat, steep])
    assert "the most runs at one performance value are 3 of 6 (50.0%" in text
    assert "learnable headroom (the headline's) the most are 2 of 3 (66.7%)" in text
    steep["run_performance"] = [0.1, 0.2, 0.3]
    assert "(the headline's) no two of the 3 runs tie." in ties_text([flat, steep])
    assert "headline" not in ties_text([steep])


def test_a_claim_above_the_oracle_says_what_budget_it_spent():
    row = {"performance": 1.05, "max_cost_ratio": 0.873, "feasibility": 0.68}
    text = _above_oracle_text(row)
    assert "return above the oracle's" in text
    assert "largest mean cost is 87.3% of its budget and 32% of its test episodes" in text
    assert _above_oracle_text({**row, "performance": 0.99}) == ""
    assert _above_oracle_text({**row, "max_cost_ratio": None}) == ""  # a task without budgets


def test_a_claim_whose_mean_cost_interval_reaches_past_the_budget_says_so():
    row = {
        "performance": 0.87,
        "within_budget": True,
        "max_cost_ratio": 0.873,
        "max_cost_ratio_ci_low": 0.2,
        "max_cost_ratio_ci_high": 1.94,
        "feasibility": 0.68,
    }
    assert budget_not_robust(row)
    text = _above_oracle_text(row)
    assert text == (
        " Within budget on the mean only: the interval of its mean cost reaches past the budget "
        "(its largest mean cost is 87.3% of its budget [20%, 194%] and 32% of its test "
        "episodes are over a budget)."
    )
    robust = {**row, "max_cost_ratio_ci_high": 0.95}
    assert not budget_not_robust(robust) and _above_oracle_text(robust) == ""
    assert not budget_not_robust({**row, "within_budget": False})  # over budget: not a claim
    # the summary's verdict carries it
    from types import SimpleNamespace

    from powerzoo.rl.campaigns.score_summary import summary_markdown

    claim = {
        **row,
        "task": "dso",
        "label": "PPO-L/default",
        "n_seeds": 2,
        "anchor": "rule_based",
        "anchor_diff": 582.0,
        "anchor_diff_ci_low": 137.0,
        "anchor_diff_ci_high": 1134.0,
        "anchor_seeds_better": 2,
        "anchor_return": -1198.0,
    }
    folder = SimpleNamespace(
        records={"x": {"task": "dso"}},
        campaign=SimpleNamespace(tasks=["dso"], trials=[SimpleNamespace(task="dso")] * 5),
    )
    scored = SimpleNamespace(folder=folder, rows=[claim], references={"dso": task_reference("dso")})
    table = summary_markdown(scored, {})
    assert "| **claim** (2 seeds, provisional; within budget on the mean only) |" in table


def test_cli_writes_the_page_and_rescoring_drops_a_gone_seed(tmp_path, capsys):
    campaign = tmp_path / "campaign"
    _write_folder(campaign)
    assert main(["campaign-score", str(campaign), "--resamples", "50", "--no-progress"]) == 0
    out = campaign / "v2"  # the default
    printed = capsys.readouterr().out
    assert f"results page: {out / 'results_v2.md'}" in printed
    assert f"plot: {out / 'performance_profiles.png'}" in printed
    assert "5 row(s) from 9 of 15 trial(s) finished" in printed
    assert "(6 trained row(s), 0 baseline row(s); no --families-dir: no baseline rows)" in printed
    page = (out / "results_v2.md").read_text()
    assert "`powerzoo families TASK --out DIR/TASK` for each task" in page
    assert (out / "performance_profiles.png").is_file()
    sub = out / "submissions" / "battery_arbitrage__PPO-L_default"
    assert sorted(p.name for p in sub.iterdir()) == [
        "episodes_seed0.csv",
        "episodes_seed1.csv",
        "meta.json",
    ]
    # a record withdrawn since: its seed leaves the submission folder, its group the table
    (campaign / "trials" / "battery_arbitrage-PPO-L-default-seed1" / "trial.json").unlink()
    (campaign / "trials" / "marl_opf-PPO-objective-seed0" / "trial.json").unlink()
    (campaign / "trials" / "marl_opf-PPO-objective-seed1" / "trial.json").unlink()
    families = _write_baseline_families(tmp_path / "families")
    argv = ["campaign-score", str(campaign), "--resamples", "50", "--families-dir", str(families)]
    assert main(argv) == 0
    assert "(6 trained row(s), 4 baseline row(s))" in capsys.readouterr().out
    assert sorted(p.name for p in sub.iterdir()) == ["episodes_seed0.csv", "meta.json"]
    assert not (out / "submissions" / "marl_opf__PPO_objective").exists()
    assert read_submission(sub).seeds == (0,)


def test_cli_errors_are_one_line(tmp_path, capsys):
    def error(*args: str) -> str:
        assert main(["campaign-score", *args]) == 2
        return capsys.readouterr().err.strip()

    assert error(str(tmp_path / "nowhere")) == (
        f"powerzoo: error: {tmp_path / 'nowhere'}: no such folder (pass a `powerzoo campaign` "
        "--out)"
    )
    assert "no campaign.json" in error(str(tmp_path))
    empty = tmp_path / "empty"
    _write_folder(empty, finished=False)
    message = error(str(empty))
    assert "no finished trial yet (0 of 15); nothing to score" in message
    assert not (empty / "v2").exists()
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    message = error(str(empty), "--out", str(blocker / "v2"))
    assert "--out" in message and "which is a file" in message
    assert "--resamples must be >= 1" in error(str(empty), "--resamples", "0")
    message = error(str(empty), "--families-dir", str(tmp_path / "nope"))
    assert "nope: no such folder (--families-dir" in message
    message = error(str(empty), "--families-dir", str(tmp_path))
    assert "no family_episodes.csv in it or in its sub-folders" in message
    bad = tmp_path / "diagnoses.yaml"
    bad.write_text("- a list\n")
    assert "a diagnoses file maps task names to text" in error(str(empty), "--diagnoses", str(bad))
    own_seeds = tmp_path / "own_seeds"
    own_seeds.mkdir()
    spec = dataclasses.replace(_campaign([_trial(*next(iter(SHARES)), 0)]), env_seeds="trial")
    (own_seeds / "campaign.json").write_text(json.dumps(spec.to_dict()))
    message = error(str(own_seeds))
    assert "tests each trial on its own env seeds" in message
    assert "evaluation.env_seeds: protocol" in message and "campaign-report" in message
    spec = dataclasses.replace(spec, episodes=3)
    (own_seeds / "campaign.json").write_text(json.dumps(spec.to_dict()))
    assert "(on evaluation.episodes days)" in error(str(own_seeds))
    assert not (own_seeds / "v2").exists()
    for message in (error(str(empty)), error(str(own_seeds))):
        assert "\n" not in message


def _family_row(scored, label: str, family: str, source: str = "trained") -> dict:
    return next(
        r
        for r in scored.family_rows
        if (r["label"], r["split"], r["source"]) == (label, family, source)
    )


def _day_term(family: str, days: int | None = None) -> float:
    """Mean of ``day_id % 3`` over a family's (first ``days``) episodes."""
    return float(np.mean([d % 3 for d, _, _ in _plan(FAMILY_TASK, family)[:days]]))


def test_family_drop_is_the_paired_mean_on_the_twin_days(scored):
    row = _family_row(scored, "PPO/objective", "heatwave")
    diffs, twins = [], None
    for seed in SEEDS:  # by hand from the records: twin test return - family return
        path = scored.folder.out_dir / "trials" / f"{FAMILY_TASK}-PPO-objective-seed{seed}"
        record = json.loads((path / "trial.json").read_text())
        test = {e["day_id"]: e["return"] for e in record["episodes"]}
        fam = record["families"]["heatwave"]
        diffs.append([test[r["test_day_id"]] - r["return"] for r in fam])
        twins = [r["test_day_id"] for r in fam]
    diffs = np.asarray(diffs)
    assert row["drop"] == pytest.approx(diffs.mean(), abs=1e-9)
    assert row["drop"] == pytest.approx(
        np.mean(list(FAMILY_DROPS.values())) + _day_term("heatwave")
    )
    resamples = SeedBlockResamples.draw(3, episode_blocks(FAMILY_TASK, "test", twins), RESAMPLES)
    low, high = np.percentile(resamples.mean(diffs), [2.5, 97.5])
    assert (row["drop_ci_low"], row["drop_ci_high"]) == pytest.approx((low, high))
    assert row["drop_ci_low"] < row["drop"] < row["drop_ci_high"]
    assert row["drop_pct"] == pytest.approx(100 * row["drop"] / abs(row["test_mean_return"]))
    assert row["mean_return"] == pytest.approx(row["test_mean_return"] - row["drop"])
    assert (row["n_seeds"], row["episodes"]) == (3, 3 * len(_plan(FAMILY_TASK, "heatwave")))
    assert row["seeds_dropping"] == 2  # seed 1 gains on the family
    assert row["env_seeds_paired"] and row["within_budget"] and row["feasibility"] == 1.0
    over = _family_row(scored, "PPO/objective", OVER_BUDGET_FAMILY)
    assert not over["within_budget"] and over["feasibility"] == 0.0
    page = scored.files["page"].read_text()
    section = page.split("## Held-out families")[1].split("## Per task")[0]
    assert "on the same env seeds" in section
    line = next(x for x in section.splitlines() if x.startswith("| heatwave | PPO/objective |"))
    assert f"| {row['drop_pct']:+.2f} % | 2/3 | yes (100%) |" in line
    with scored.files["families_csv"].open(newline="") as f:
        reader = csv.DictReader(f)
        table = list(reader)
    assert tuple(reader.fieldnames) == FAMILY_COLUMNS and len(table) == len(scored.family_rows)
    assert float(table[0]["drop"]) == row["drop"] and table[0]["split"] == "heatwave"


def test_records_without_family_episodes_are_not_counted(scored):
    lagrangian = _family_row(scored, "PPO-L/default", "heatwave")
    assert _row(scored, FAMILY_TASK, "PPO-L/default")["n_seeds"] == 2
    assert lagrangian["n_seeds"] == 1  # seed 1's record holds no family episodes
    assert lagrangian["drop"] == pytest.approx(FAMILY_DROPS[0] + _day_term("heatwave"))
    assert {r["task"] for r in scored.family_rows} == {FAMILY_TASK}  # no other task has any
    record = _record(_trial("marl_opf", "PPO", "objective", 0), 0.2, over_budget=False)
    assert trained_family_rows("marl_opf", "PPO/objective", [record]) == []


def test_baselines_drops_come_from_a_families_dir(scored):
    for policy, shift in BASELINE_DROPS.items():
        heat = _family_row(scored, policy, "heatwave", "baseline")
        assert heat["days"] == "trained"  # the table holds every family day the trials have
        assert heat["episodes"] == len(_plan(FAMILY_TASK, "heatwave"))
        assert heat["drop"] == pytest.approx(shift + _day_term("heatwave"))
        assert heat["drop_ci_low"] <= heat["drop"] <= heat["drop_ci_high"]
        assert heat["feasibility"] == 0.75 and heat["within_budget"]
        own = _family_row(scored, policy, "low_renewable", "baseline")
        assert (own["days"], own["episodes"]) == ("own", BASELINE_OWN_DAYS)
        assert own["drop"] == pytest.approx(shift + _day_term("low_renewable", BASELINE_OWN_DAYS))
    section = scored.files["page"].read_text().split("## Held-out families")[1]
    assert "| heatwave | rule_based (baseline) | - | 33 |" in section
    assert "| low_renewable | oracle (baseline, on its own days) | - | 5 |" in section
    assert "powerzoo families TASK --out DIR/TASK" not in section


def test_trained_family_rows_pair_only_the_days_every_record_holds():
    def record(seed: int, drops: list[float], env_shift: int) -> dict:
        episodes = [
            {"day_id": d, "env_seed": d, "return": 100.0 * (d + 1) * (seed + 1)} for d in range(4)
        ]
        rows = [
            {"day_id": d, "test_day_id": d, "env_seed": d + env_shift,
             "return": episodes[d]["return"] - drop, "cost_soc_violation": 0.0}
            for d, drop in enumerate(drops)
        ]  # fmt: skip
        return {"episodes": episodes, "cost_names": ["soc_violation"], "families": {"x": rows}}

    records = [record(0, [10.0, 20.0, 30.0, 40.0], 0), record(1, [-5.0, 5.0, 15.0], 1)]
    (row,) = trained_family_rows(FAMILY_TASK, "PPO/objective", records, n_resamples=50)
    assert (row["split"], row["n_seeds"], row["episodes"]) == ("x", 2, 6)  # day 3: one record
    assert row["drop"] == pytest.approx(np.mean([10, 20, 30, -5, 5, 15]))
    assert row["test_mean_return"] == pytest.approx(np.mean([100, 200, 300, 200, 400, 600]))
    assert row["seeds_dropping"] == 2 and not row["env_seeds_paired"]


def test_the_summary_table_has_one_row_per_task_with_its_verdict(scored):
    lines = scored.files["summary"].read_text().splitlines()
    assert lines[0].startswith("| task | anchor | headroom")
    cells = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in lines[2:]}
    assert set(cells) == set(scored.folder.campaign.tasks)
    battery = cells["battery_arbitrage"]
    claim = _row(scored, "battery_arbitrage", "PPO/objective")
    assert battery[3] == "PPO/objective" and battery[5] == "**claim** (3 seeds)"
    assert battery[4].startswith(f"{claim['anchor_diff']:+,.2f} [")
    assert battery[6] == "6/9 |"  # 3 + 2 + 1 records of the 9 planned (not the damaged one)
    assert cells["dc_microgrid"][5] == "below the anchor, compute-bound (PPO/objective)"
    assert cells["marl_opf"][5] == "no learnable headroom"
    assert all(line.count("|") == 8 for line in lines)  # 7 columns, no "|" inside a cell


def test_a_claim_on_few_seeds_is_marked_provisional(scored, monkeypatch):
    monkeypatch.setattr(score_summary, "FIRM_CLAIM_SEEDS", 4)
    table = score_summary.summary_markdown(scored, {})
    assert "| **claim** (3 seeds, provisional) |" in table


def test_a_task_with_validation_logs_gets_its_learning_curves_on_the_page(scored):
    curves = scored.files["curves"]
    assert set(curves) == {"dc_microgrid"}  # the only trial with a validation log
    assert curves["dc_microgrid"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    section = scored.files["page"].read_text().split("### dc_microgrid")[1].split("### ")[0]
    assert "![dc_microgrid learning curves](curves/learning_curves_dc_microgrid.png)" in section


def test_readme_blocks_are_replaced_and_nothing_else(tmp_path):
    start, end = markers("camp", "summary")
    text = f"# Title\n\nbefore\n{start}\nold table\n{end}\nafter\n"
    assert replace_block(text, "camp", "summary", "| new |") == (
        f"# Title\n\nbefore\n{start}\n| new |\n{end}\nafter\n"
    )
    with pytest.raises(ValueError, match="no coverage block: add the lines"):
        replace_block(text, "camp", "coverage", "x")
    with pytest.raises(ValueError, match="no summary block"):  # another campaign's markers
        replace_block(text, "other", "summary", "x")
    with pytest.raises(ValueError, match="block must be one of coverage, summary"):
        markers("camp", "table")
    cov = {"finished": 9, "planned": 15, "projected_core_hours": 30.4, "cluster_hours": 1.9}
    cov["workers"] = 16
    assert coverage_sentence(cov) == (
        "**Coverage:** 9 of its 15 trials have finished (about 30 core-hours in all, projected "
        "from the finished trials: about 15 h on a 2-core machine running 2 trials at a time, "
        "about 1.9 h on a 16-worker Ray cluster, on cores that run nothing else; the results "
        "page gives the wall time they took)."
    )
    assert coverage_sentence({**cov, "projected_core_hours": None}) == (
        "**Coverage:** 9 of its 15 trials have finished."
    )
    done = {**cov, "finished": 15, "core_hours": 30.37}
    assert coverage_sentence(done) == (
        "**Coverage:** all 15 trials have finished (30.4 core-hours in all: about 15 h on a "
        "2-core machine running 2 trials at a time, about 1.9 h on a 16-worker Ray cluster, on "
        "cores that run nothing else; the results page gives the wall time they took)."
    )


def test_cli_rewrites_the_readme_blocks_and_refuses_a_file_without_them(tmp_path, capsys):
    campaign = tmp_path / "campaign"
    spec = _write_folder(campaign)
    readme = tmp_path / "README.md"
    blocks = "".join(f"{a}\nold\n{b}\n" for a, b in (markers(spec.name, k) for k in BLOCKS))
    readme.write_text(f"# Project\n\n{blocks}\nkept\n")
    argv = ["campaign-score", str(campaign), "--resamples", "50", "--no-progress"]
    assert main([*argv, "--readme", str(readme)]) == 0
    assert f"coverage and summary blocks rewritten: {readme}" in capsys.readouterr().out
    text = readme.read_text()
    summary = (campaign / "v2" / "summary_v2.md").read_text()
    assert "old" not in text and text.startswith("# Project\n") and text.endswith("\nkept\n")
    assert summary in text and "**Coverage:** 9 of its 15 trials have finished (about" in text
    bare = tmp_path / "BARE.md"
    bare.write_text("# nothing to replace\n")
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "page2"), "--readme", str(bare)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"powerzoo: error: {bare}: no coverage block: add the lines")
    assert not (tmp_path / "page2").exists()  # refused before anything was scored
    assert bare.read_text() == "# nothing to replace\n"


def test_the_machines_log_is_read_line_by_line_and_put_on_the_page(scored, tmp_path):
    import dataclasses

    from powerzoo.fileio import CorruptFileError
    from powerzoo.rl.campaigns.score_coverage import coverage_text
    from powerzoo.rl.campaigns.score_page import MACHINES_FILE, read_machine_speeds

    assert read_machine_speeds(tmp_path) == [] and scored.coverage["machine_speeds"] == []
    line = {
        "measured_at": "2026-11-30T04:49:40+00:00",
        "env_steps_per_cpu_s": {"battery_arbitrage": 9838.6, "acopf_118": 73.4},
        "torch_updates_per_cpu_s": 208.4,
        "hardware": {
            "cpu_model": "AMD EPYC",
            "simd": ["AVX2"],
            "blas_kernels": ["openblas:Haswell"],
        },
    }
    (tmp_path / MACHINES_FILE).write_text(json.dumps(line) + "\n\n" + json.dumps(line) + "\n")
    speeds = read_machine_speeds(tmp_path)
    assert speeds == [line, line]
    page = coverage_text(
        dataclasses.replace(scored, coverage={**scored.coverage, "machine_speeds": speeds[:1]})
    )
    assert (
        "2026-11-30 04:49 UTC, AMD EPYC, AVX2, openblas:Haswell: battery_arbitrage 9,839, "
        "acopf_118 73 env steps per CPU-second, 208 MLP updates per CPU-second." in page
    )
    (tmp_path / MACHINES_FILE).write_text(json.dumps(line) + "\n[1, 2]\n")
    damaged = r"machines.jsonl: corrupt or unreadable \(line 2: not a JSON object\)"
    with pytest.raises(CorruptFileError, match=damaged):
        read_machine_speeds(tmp_path)
    (tmp_path / MACHINES_FILE).write_text("{oops\n")
    with pytest.raises(CorruptFileError, match=r"line 1: not JSON"):
        read_machine_speeds(tmp_path)
