"""Trial records are checked before a campaign's tables use them; a changed protocol reruns.

A ``trial.json`` that reads as JSON but lacks a field, holds fewer episodes than the evaluation
protocol asks for, or a NaN return, is named in one warning line (file, reason) and left out of
``powerzoo campaign``'s and ``powerzoo campaign-report``'s tables, never averaged. With
``--update``, a changed ``evaluation.episodes`` moves the trials it evaluated to ``superseded/``,
so they run again on the baselines' days. Nothing here trains: the records are written by hand.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import yaml

from powerzoo.cli.main import main
from powerzoo.rl.campaigns import load_campaign
from powerzoo.rl.campaigns.local import SUPERSEDED_DIR, check_out_dir
from powerzoo.rl.campaigns.spec import CampaignSpec, TrialSpec
from powerzoo.rl.campaigns.trial import (
    TRIAL_FILE,
    InvalidRecordError,
    base_record,
    protocol_days,
    read_record,
    record_problem,
)
from powerzoo.tasks import task_spec

TASK = "battery_arbitrage"
CAMPAIGN = {
    "name": "records",
    "tasks": [TASK],
    "seeds": [0, 1],
    "budget": {"total_timesteps": 64, "n_envs": 1},
    "evaluation": {"split": "test", "episodes": 4, "baselines": [], "model": "final"},
    "algorithms": {"PPO": {"settings": {"tiny": {"overrides": {"evaluation": None}}}}},
}
CAMPAIGN["evaluation"]["plots"] = False


def record(campaign: CampaignSpec, trial: TrialSpec) -> dict:
    """A valid record of ``trial`` on the campaign's protocol days."""
    days = protocol_days(campaign, trial.task)
    names = list(task_spec(trial.task).constraint_names)
    episodes = [
        {
            "task": trial.task,
            "policy": trial.trial_label,
            "seed": trial.seed,
            "episode": i,
            "day_id": day,
            "env_seed": trial.seed + i,
            "return": -100.0 - 10 * trial.seed - i,
            "length": 48,
            "total_cost": 0.0,
            **{f"cost_{name}": 0.0 for name in names},
        }
        for i, day in enumerate(days)
    ]
    return {
        **base_record(trial),
        "status": "finished",
        "num_timesteps": 64,
        "train_seconds": 1.0,
        "eval_seconds": 1.0,
        "started_at": 1000.0,
        "finished_at": 1002.0,
        "model": "final",
        "run_dir": "/elsewhere/run",
        "days": days,
        "cost_names": names,
        "episodes": episodes,
        "plots": [],
    }


def write(out: Path, data: dict) -> Path:
    path = out / "trials" / data["trial_id"] / TRIAL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))  # json writes a NaN as NaN, as Python's json reads it
    return path


def half_the_episodes(rec: dict) -> None:
    rec["episodes"], rec["days"] = rec["episodes"][:2], rec["days"][:2]


def nan_return(rec: dict) -> None:
    rec["episodes"][1]["return"] = math.nan


def no_days(rec: dict) -> None:
    del rec["days"], rec["cost_names"]


DAMAGE = {
    "half": (
        half_the_episodes,
        "2 test episode(s), the evaluation protocol asks for 4 (test split, "
        "evaluation.episodes: 4)",
    ),
    "nan": (nan_return, "episode 1: return is nan, not a finite number"),
    "missing": (no_days, "missing field(s) cost_names, days"),
}


@pytest.fixture
def folder(tmp_path) -> tuple[Path, CampaignSpec]:
    """``(campaign file, spec)``: the campaign file and its spec; the folder ``tmp_path/out``
    holds its ``campaign.json`` and a valid record of every trial."""
    spec_file = tmp_path / "records.yaml"
    spec_file.write_text(yaml.safe_dump(CAMPAIGN, sort_keys=False))
    campaign = load_campaign(spec_file)
    out = check_out_dir(campaign, tmp_path / "out")
    for trial in campaign.trials:
        write(out, record(campaign, trial))
    return spec_file, campaign


def damage(out: Path, campaign: CampaignSpec, kind: str) -> tuple[TrialSpec, Path, str]:
    """Damage seed 1's record; ``(trial, its path, the warning line expected)``."""
    trial = campaign.trials[1]
    rec = record(campaign, trial)
    DAMAGE[kind][0](rec)
    path = write(out, rec)
    line = (
        f"{path}: damaged trial record ({DAMAGE[kind][1]}); trial {trial.trial_id} is left out "
        f"(delete {path.parent} to run it again)"
    )
    return trial, path, line


def rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_record_is_named_and_left_out_of_the_campaign(folder, tmp_path, capsys, kind):
    spec_file, campaign = folder
    out = tmp_path / "out"
    trial, path, line = damage(out, campaign, kind)
    with pytest.raises(InvalidRecordError) as err:
        read_record(out, trial, campaign)
    assert err.value.path == path and err.value.reason == DAMAGE[kind][1]
    capsys.readouterr()
    assert main(["campaign", str(spec_file), "--out", str(out), "--no-progress"]) == 1
    err_lines = capsys.readouterr().err.splitlines()
    assert err_lines == [f"powerzoo: warning: {line}"]  # once, one line, no traceback
    (pooled,) = rows(out / "results.csv")  # the damaged seed is not averaged in
    assert (pooled["policy"], pooled["seeds"], pooled["episodes"]) == ("PPO/tiny", "0", "4")
    assert float(pooled["mean_return"]) == pytest.approx(-101.5)
    assert [r["seed"] for r in rows(out / "trials.csv")] == ["0"]
    assert path.is_file()  # left for the user to inspect


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_record_is_named_and_left_out_of_the_results_page(folder, tmp_path, capsys, kind):
    _, campaign = folder
    out = tmp_path / "out"
    trial, _, line = damage(out, campaign, kind)
    capsys.readouterr()
    assert main(["campaign-report", str(out), "--out", str(tmp_path / "page"), "--no-plots"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"powerzoo: warning: {line}"]
    assert "1 of 2 trial(s) finished; 1 missing" in captured.out
    trained = [r for r in rows(tmp_path / "page" / "results.csv") if r["kind"] == "trained"]
    assert [(r["policy"], r["seeds"], r["episodes"]) for r in trained] == [("PPO/tiny", "0", "4")]
    index = (tmp_path / "page" / "index.md").read_text()
    assert f"damaged record: {DAMAGE[kind][1]}" in index


def test_records_of_other_days_or_another_seed_are_refused(folder):
    _, campaign = folder
    trial = campaign.trials[0]
    rec = record(campaign, trial)
    assert record_problem(rec, trial, campaign) is None
    days = rec["days"]
    shifted = {**rec, "days": [d + 1 for d in days]}
    assert record_problem(shifted, trial, campaign) == (
        f"evaluated on days {[d + 1 for d in days]}, the protocol's are {days}"
    )
    other_seed = {**rec, "episodes": [{**e, "seed": 7} for e in rec["episodes"]]}
    assert record_problem(other_seed, trial, campaign) == "episode 0 has seed 7, the trial's is 0"
    inf_cost = {**rec, "episodes": [{**rec["episodes"][0], "cost_soc_violation": math.inf}]}
    inf_cost["episodes"] += rec["episodes"][1:]
    assert record_problem(inf_cost, trial, campaign) == (
        "episode 0: cost_soc_violation is inf, not a finite number"
    )


def test_update_with_another_episode_count_reruns_the_trials(folder, tmp_path):
    spec_file, campaign = folder
    out = tmp_path / "out"
    fewer = {**CAMPAIGN, "evaluation": {**CAMPAIGN["evaluation"], "episodes": 2}}
    spec_file.write_text(yaml.safe_dump(fewer, sort_keys=False))
    changed = load_campaign(spec_file)
    assert [t.config_hash for t in changed.trials] == [t.config_hash for t in campaign.trials]
    with pytest.raises(ValueError, match="holds another campaign"):
        check_out_dir(changed, out)
    check_out_dir(changed, out, update=True)
    for trial in campaign.trials:  # evaluated on 4 days, the baselines now on 2: rerun
        assert read_record(out, trial, changed) is None
    aside = sorted(p.name for p in (out / SUPERSEDED_DIR).iterdir())
    assert aside == sorted(f"{t.trial_id}-{t.config_hash}" for t in campaign.trials)


def test_update_keeps_the_trials_of_tasks_whose_protocol_did_not_change(tmp_path):
    def trial(task: str) -> TrialSpec:
        return TrialSpec(f"{task}-PPO-a-seed0", task, "PPO", "a", 0, {}, f"hash-{task}")

    trials = (trial(TASK), trial("opf"))
    before = CampaignSpec(
        "two", (TASK, "opf"), (0,), "test", {TASK: 4, "opf": 4}, (), "final", False, trials
    )
    after = CampaignSpec(
        "two", (TASK, "opf"), (0,), "test", {TASK: 4, "opf": 2}, (), "final", False, trials
    )
    out = check_out_dir(before, tmp_path / "out")
    for t in trials:
        write(out, record(before, t))
    check_out_dir(after, out, update=True)
    assert read_record(out, trials[0], after) is not None  # battery_arbitrage: still 4 days
    assert read_record(out, trials[1], after) is None  # opf: 4 days -> 2, superseded


def test_rerun_sets_a_trial_aside_and_runs_it_again(folder, tmp_path, capsys):
    spec_file, campaign = folder
    out = tmp_path / "out"  # every trial finished (the fixture's records)
    first, second = campaign.trials
    (out / "ray" / "campaign").mkdir(parents=True)  # a Tune experiment that holds both as done
    capsys.readouterr()
    args = ["campaign", str(spec_file), "--out", str(out), "--no-progress"]
    assert main([*args, "--rerun", first.trial_id]) == 0
    aside = out / SUPERSEDED_DIR / f"{first.trial_id}-{first.config_hash}-rerun"
    assert json.loads((aside / TRIAL_FILE).read_text())["started_at"] == 1000.0  # the old one
    assert (out / SUPERSEDED_DIR / "ray-0" / "campaign").is_dir()
    rerun = read_record(out, first, campaign)
    assert rerun["started_at"] > 1000.0 and rerun["num_timesteps"] >= 64  # trained again
    assert read_record(out, second, campaign)["started_at"] == 1000.0  # kept as it was


def test_rerun_of_a_trial_the_campaign_does_not_hold_is_one_line(folder, tmp_path, capsys):
    spec_file, campaign = folder
    out = tmp_path / "out"
    wrong = campaign.trials[0].trial_id.replace("seed0", "seed7")
    capsys.readouterr()
    args = ["campaign", str(spec_file), "--out", str(out), "--no-progress", "--rerun", wrong]
    assert main(args) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"powerzoo: error: campaign records holds no trial '{wrong}'")
    assert "(closest: " in line and campaign.trials[0].trial_id in line
    assert not (out / SUPERSEDED_DIR).exists()  # nothing was set aside
    assert all(read_record(out, t, campaign)["started_at"] == 1000.0 for t in campaign.trials)
