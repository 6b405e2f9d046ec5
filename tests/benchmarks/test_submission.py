"""Submission folders: the format's checks, ``powerzoo score`` end to end, and a committed row of
the benchmark reproduced from a hand-made folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from powerzoo.benchmarks.aggregates import aggregate_scores
from powerzoo.benchmarks.score_v2 import score_runs, task_reference
from powerzoo.benchmarks.submission import SubmissionError, read_submission
from powerzoo.benchmarks.submission_score import RESULT_COLUMNS, read_run_scores
from powerzoo.cli.main import main
from powerzoo.rl.campaigns.gather import pinned_campaign_files

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = ROOT / "results" / "benchmark"
COMMITTED = ROOT / "docs" / "results" / "results.csv"


def _trial_dirs(row):
    name = row["policy"].replace("/", "-")
    return [CAMPAIGN / "trials" / f"{row['task']}-{name}-seed{s}" for s in row["seeds"].split()]


def _committed_row(task=None):
    """A trained row of the committed results table whose trial records are all here."""
    with COMMITTED.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["kind"] != "trained" or (task is not None and row["task"] != task):
                continue
            if all((d / "trial.json").is_file() for d in _trial_dirs(row)):
                return row
    pytest.skip("no committed trained row with its trial records")


def _records(row):
    return [json.loads((d / "trial.json").read_text()) for d in _trial_dirs(row)]


def write_by_hand(folder, records, *, env_seeds="campaign", **meta):
    """A submission folder written field by field from trial records (no PowerZoo writer)."""
    folder.mkdir(parents=True, exist_ok=True)
    first = records[0]
    fields = {
        "algorithm": first["label"],
        "task": first["task"],
        "split": "test",
        "seeds": [r["seed"] for r in records],
        "code_hash": "0123abcd",
        "env_steps": int(first["num_timesteps"]),
        "wall_time_s": 61.5,
        "hardware": "1 core, test machine",
        "tuning_budget": {"configurations": 1, "split": "val"},
        "env_seeds": env_seeds,
        **meta,
    }
    (folder / "meta.json").write_text(json.dumps(fields))
    for rec in records:
        names = rec["cost_names"]
        lines = [",".join(["episode", "day_id", "env_seed", "return", "length"])]
        lines[0] += "".join(f",cost_{n}" for n in names)
        for e in rec["episodes"]:
            values = [e["episode"], e["day_id"], e["env_seed"], repr(e["return"]), e["length"]]
            values += [repr(e[f"cost_{n}"]) for n in names]
            lines.append(",".join(map(str, values)))
        (folder / f"episodes_seed{rec['seed']}.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_powerzoo_score_reproduces_a_committed_row(tmp_path, capsys):
    row = _committed_row("battery_arbitrage")
    records = _records(row)
    folder = write_by_hand(tmp_path / "sub", records)
    table = tmp_path / "results.csv"
    argv = ["score", str(folder), "--campaign", str(CAMPAIGN), "--table", str(table)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"{row['task']} / {row['policy']}" in printed and "performance" in printed
    with table.open() as f:
        (scored,) = list(csv.DictReader(f))
    # benchmark v1's columns of the committed table, to the last digit
    for v1 in ("normalized_score", "cmdp_score", "over_budget_rate"):
        assert scored[f"v1_{v1}"] == row[v1]
    assert scored["mean_return"] == row["mean_return"]
    assert scored["v1_mean_return_ci_low"] == row["mean_return_ci_low"]
    # the v2 numbers, computed here directly from the trial records
    names = records[0]["cost_names"]
    returns = np.array([[e["return"] for e in r["episodes"]] for r in records])
    costs = np.array([[[e[f"cost_{n}"] for n in names] for e in r["episodes"]] for r in records])
    with pinned_campaign_files(CAMPAIGN):
        direct = score_runs(returns, costs, names, task_reference(row["task"]))
    for key in ("performance", "performance_ci_low", "feasibility", "anchor_diff"):
        assert scored[key] == repr(direct[key])
    assert scored["anchor_diff_ci_high"] == repr(direct["anchor_diff_ci_high"])
    assert json.loads(scored["run_performance"]) == direct["run_performance"]
    assert scored["paired_on"] == "days"  # the campaign's env seeds are not the baselines'
    # --from-trial writes the same episodes: the same scores
    assert (
        main(
            ["score", str(tmp_path / "again"), "--campaign", str(CAMPAIGN), "--json"]
            + [a for d in _trial_dirs(row) for a in ("--from-trial", str(d))]
        )
        == 0
    )
    again = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    for key in ("performance", "feasibility", "rule_diff_ci_low"):
        assert again[key] == direct[key]
    assert repr(again["v1_cmdp_score"]) == row["cmdp_score"]
    assert main(argv) == 0  # the same submission again: its row is replaced, not added
    assert len(table.read_text().splitlines()) == 2


def _protocol_folder(tmp_path, n_seeds=2):
    """A small valid folder on the protocol's env seeds (seed-0 episodes copied per seed)."""
    record = json.loads(
        (_trial_dirs(_committed_row("battery_arbitrage"))[0] / "trial.json").read_text()
    )
    records = [{**record, "seed": s} for s in range(n_seeds)]
    return write_by_hand(tmp_path / "sub", records, env_seeds="protocol")


def _edit_csv(path, row, column, value):
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[row + 1].split(",")
    cells[header.index(column)] = value
    lines[row + 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


def _drop_meta_field(folder):
    meta = json.loads((folder / "meta.json").read_text())
    del meta["tuning_budget"]
    (folder / "meta.json").write_text(json.dumps(meta))


def _drop_column(folder):
    path = folder / "episodes_seed0.csv"
    rows = [line.split(",")[:-1] for line in path.read_text().splitlines()]
    path.write_text("\n".join(",".join(r) for r in rows) + "\n")


def _add_column(folder, name, seeds=(0, 1), at_front=False):
    for seed in seeds:
        path = folder / f"episodes_seed{seed}.csv"
        rows = path.read_text().splitlines()
        cells = [name] + [str(i) for i in range(len(rows) - 1)]
        rows = [f"{c},{r}" if at_front else f"{r},{c}" for c, r in zip(cells, rows, strict=True)]
        path.write_text("\n".join(rows) + "\n")


def _drop_last_row(folder):
    path = folder / "episodes_seed1.csv"
    path.write_text("\n".join(path.read_text().splitlines()[:-1]) + "\n")


BREAKAGES = {
    "missing meta": (lambda f: (f / "meta.json").unlink(), r"meta\.json: missing"),
    "missing field": (_drop_meta_field, r"missing field\(s\) tuning_budget"),
    "missing seed file": (
        lambda f: (f / "episodes_seed1.csv").unlink(),
        r"episodes_seed1\.csv: missing",
    ),
    "stray seed": (
        lambda f: (f / "episodes_seed7.csv").write_text("x\n"),
        r"episodes_seed7\.csv: not a seed of meta\.json",
    ),
    "wrong day": (
        lambda f: _edit_csv(f / "episodes_seed0.csv", 3, "day_id", "4"),
        r"row 3: day_id 4, expected 3",
    ),
    "wrong env seed": (
        lambda f: _edit_csv(f / "episodes_seed1.csv", 2, "env_seed", "1000002"),
        r"row 2: env_seed 1000002, expected 2",
    ),
    "nan return": (
        lambda f: _edit_csv(f / "episodes_seed0.csv", 5, "return", "nan"),
        r"row 5: return is NaN",
    ),
    "text cost": (
        lambda f: _edit_csv(f / "episodes_seed0.csv", 1, "cost_soc_violation", "low"),
        r"row 1: cost_soc_violation 'low' is not a number",
    ),
    "budgeted cost missing": (_drop_column, r"no column cost_soc_violation"),
    "too few episodes": (_drop_last_row, r"64 episodes, expected 65"),
    "impossible length": (
        lambda f: _edit_csv(f / "episodes_seed1.csv", 4, "length", "49"),
        r"episodes_seed1\.csv: row 4: length 49, not between 1 and 48 \(the horizon of "
        r"battery_arbitrage in steps\)",
    ),
    "misspelt column": (
        lambda f: _add_column(f, "retrun"),
        r"unknown column 'retrun' \(did you mean 'return'\?\); the columns are episode, ",
    ),
    "pandas index": (
        lambda f: _add_column(f, "", at_front=True),
        r"an unnamed column '' \(a pandas index\? write with index=False\)",
    ),
    "cost of no constraint": (
        lambda f: _add_column(f, "cost_foo"),
        r"column cost_foo: battery_arbitrage has no constraint 'foo' \(its constraints, in "
        r"env\.unwrapped\.constraint_names\(\) order: soc_violation\)",
    ),
    "negative cost": (
        lambda f: _edit_csv(f / "episodes_seed0.csv", 2, "cost_soc_violation", "-50.0"),
        r"row 2: cost_soc_violation -50\.0 is negative \(a cost is a violation, >= 0\)",
    ),
    "misspelt optional field": (
        lambda f: _edit_meta(f, env_seed="protocol"),
        r"unknown field\(s\) env_seed \(did you mean 'env_seeds'\?\)",
    ),
    "tuned on test": (
        lambda f: _edit_meta(f, tuning_budget={"configurations": 8, "split": "test"}),
        r"settings chosen on the test split are refused",
    ),
    "not a split": (
        lambda f: _edit_meta(f, split="tset"),
        r"split 'tset' is not a split of battery_arbitrage \(train, val, test, ",
    ),
    "a split without baselines": (
        lambda f: _edit_meta(f, split="val"),
        r"on 'val': no baseline numbers .* \(a submission is scored on a split the baselines "
        r"were measured on: test\)",
    ),
}


def _edit_meta(folder, **fields):
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, **fields}))


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_a_broken_folder_is_refused_in_one_line(tmp_path, breakage):
    folder = _protocol_folder(tmp_path)
    with pinned_campaign_files(CAMPAIGN):
        sub = read_submission(folder)  # valid as written
        assert sub.seeds == (0, 1) and sub.returns.shape == (2, 65)
        break_it, message = BREAKAGES[breakage]
        break_it(folder)
        with pytest.raises(SubmissionError, match=message) as err:
            read_submission(folder)
    assert "\n" not in str(err.value)


def test_the_odd_file_out_is_the_one_named(tmp_path, monkeypatch):
    """Seeds whose cost columns differ (a constraint without a budget is optional): the file
    unlike the others is named, even when it is the first seed's."""
    from powerzoo.benchmarks import submission
    from powerzoo.benchmarks.budget_snapshot import TaskBudgets

    monkeypatch.setattr(submission, "budgets_of", lambda task: TaskBudgets((), {}))
    folder = _protocol_folder(tmp_path, n_seeds=3)
    _drop_column(folder)  # seed 0 only
    with pytest.raises(SubmissionError, match=r"episodes_seed0\.csv: cost columns \[\], the other"):
        read_submission(folder)


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    folder = _protocol_folder(tmp_path)
    path = folder / "episodes_seed0.csv"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # as Excel writes UTF-8 CSV
    with pinned_campaign_files(CAMPAIGN):
        assert read_submission(folder).returns.shape == (2, 65)


def test_cli_errors_are_one_line(tmp_path, capsys):
    folder = _protocol_folder(tmp_path)
    _edit_csv(folder / "episodes_seed0.csv", 0, "env_seed", "7")
    assert main(["score", str(folder), "--campaign", str(CAMPAIGN)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "env_seed 7, expected 0" in err
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    _edit_csv(folder / "episodes_seed0.csv", 0, "env_seed", "0")
    argv = ["score", str(folder), "--campaign", str(CAMPAIGN), "--resamples", "50"]
    assert main([*argv, "--table", str(other)]) == 2
    assert "not those of a results table" in capsys.readouterr().err
    assert other.read_text() == "a,b\n1,2\n"
    assert main(["score", str(folder), "--from-trial", "nowhere"]) == 2  # folder not empty
    assert "not empty" in capsys.readouterr().err


def test_the_printed_row_says_which_baselines_table_it_was_scored_against(tmp_path, capsys):
    """Benchmark v1's folder pins the table of the tasks before their revision: a row scored
    against it must say so, since its anchor and oracle are not today's."""
    folder = _protocol_folder(tmp_path)
    argv = ["score", str(folder), "--resamples", "50"]
    assert main(argv) == 0
    assert capsys.readouterr().out.endswith("baselines: the packaged table (today's tasks)\n")
    assert main([*argv, "--campaign", str(CAMPAIGN)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"baselines: {CAMPAIGN / 'baseline_table.json'} (sha256 ")
    assert last.endswith(
        "NOT the packaged table: the anchor and oracle are those of the day the "
        "campaign ran, not today's tasks"
    )


def test_campaign_must_be_a_campaign_folder_and_an_unpinned_one_is_said(tmp_path, capsys):
    folder = _protocol_folder(tmp_path)
    argv = ["score", str(folder), "--resamples", "50", "--campaign"]
    assert main([*argv, str(tmp_path)]) == 2
    assert f"--campaign {tmp_path}: not a campaign folder (no campaign.json)" in (
        capsys.readouterr().err
    )
    running = tmp_path / "running"  # a campaign that has not gathered yet: nothing pinned
    running.mkdir()
    (running / "campaign.json").write_text((CAMPAIGN / "campaign.json").read_text())
    assert main([*argv, str(running)]) == 0
    assert capsys.readouterr().out.endswith(
        "baselines: the packaged table (today's tasks); "
        f"{running} has pinned no table yet (it pins one when gathered)\n"
    )


def test_scoring_a_folder_twice_into_a_table_replaces_its_row(tmp_path, capsys):
    """The aggregates add the runs of two rows of one algorithm and task together, so a folder
    scored twice must not count its runs twice; another seed set is another submission."""
    folder = _protocol_folder(tmp_path)
    table = tmp_path / "t.csv"
    argv = ["score", str(folder), "--campaign", str(CAMPAIGN), "--resamples", "50"]
    argv += ["--table", str(table)]
    assert main(argv) == 0
    assert f"added the row to {table}" in capsys.readouterr().out
    first = table.read_text()
    assert main(argv) == 0
    assert "replaced the earlier row of this submission" in capsys.readouterr().out
    assert table.read_text() == first
    _edit_meta(folder, seeds=[0])
    (folder / "episodes_seed1.csv").unlink()
    assert main(argv) == 0
    with table.open() as f:
        assert [row["seeds"] for row in csv.DictReader(f)] == ["[0, 1]", "[0]"]


def test_protocol_env_seeds_are_paired_on_days_and_env_seeds(tmp_path, capsys):
    folder = _protocol_folder(tmp_path)
    table = tmp_path / "t.csv"
    argv = ["score", str(folder), "--campaign", str(CAMPAIGN), "--resamples", "100"]
    assert main([*argv, "--table", str(table)]) == 0
    with table.open() as f:
        (row,) = list(csv.DictReader(f))
    assert list(row) == list(RESULT_COLUMNS)
    assert row["paired_on"] == "days and env seeds" and row["seeds"] == "[0, 1]"
    assert json.loads(row["tuning_budget"]) == {"configurations": 1, "split": "val"}
    assert row["anchor"] == "rule_based" and row["scale"] == "oracle"
    # the table feeds the aggregates across tasks: both seeds ran the same episodes
    (run,) = set(json.loads(row["run_performance"]))
    scores = read_run_scores(table)
    assert scores == {row["algorithm"]: {"battery_arbitrage": [run, run]}}
    assert aggregate_scores(scores[row["algorithm"]])["iqm"]["value"] == pytest.approx(run)


def test_a_trial_that_recorded_its_machine_gives_the_submission_its_hardware(tmp_path):
    from powerzoo.benchmarks.trial_submission import submission_from_trials
    from powerzoo.rl.tracks import hardware_info

    source = CAMPAIGN / "trials" / "marl_opf-MAPPO-default-seed0" / "trial.json"
    record = json.loads(source.read_text())
    record["hardware"] = {**hardware_info(), "cpu_model": "Test CPU 9000"}
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "trial.json").write_text(json.dumps(record))
    meta = read_submission(submission_from_trials([trial], tmp_path / "sub")).meta
    hardware = meta["hardware"]
    assert hardware.startswith("Test CPU 9000, ") and "torch on cpu with " in hardware
    del record["hardware"]  # a trial from before compute tracks
    (trial / "trial.json").write_text(json.dumps(record))
    meta = read_submission(submission_from_trials([trial], tmp_path / "old")).meta
    assert meta["hardware"] == "not recorded (a PowerZoo campaign trial)"


def test_a_submission_from_trials_names_the_code_each_seed_ran(tmp_path):
    from powerzoo.benchmarks.trial_submission import submission_from_trials

    source = CAMPAIGN / "trials" / "marl_opf-MAPPO-default-seed0" / "trial.json"
    record = json.loads(source.read_text())
    trials = []
    for seed, commit, sources in ((0, "a" * 40, "1111"), (1, "b" * 40 + "+modified", "2222")):
        trial = tmp_path / f"trial{seed}"
        trial.mkdir()
        code = {"commit": commit, "source_hash": sources, "version": "0.1.0"}
        # tested on the protocol's env seeds whatever the seed, as a v2 campaign's trials are
        copy = {**record, "seed": seed, "code": code, "env_seeds": "protocol"}
        (trial / "trial.json").write_text(json.dumps(copy))
        trials.append(trial)
    meta = read_submission(submission_from_trials(trials, tmp_path / "two")).meta
    assert meta["code_hash"] == (
        "sources 1111 (commit aaaaaaaaaa): seed 0; "
        "sources 2222 (commit bbbbbbbbbb+modified): seed 1"
    )
    assert f"(config {record['config_hash']})" in meta["notes"]
    meta = read_submission(submission_from_trials(trials[:1], tmp_path / "one")).meta
    assert meta["code_hash"] == "sources 1111 (commit aaaaaaaaaa)"
    old = {k: v for k, v in copy.items() if k != "code"}  # a record from before code was kept
    (trials[0] / "trial.json").write_text(json.dumps(old))
    meta = read_submission(submission_from_trials(trials[:1], tmp_path / "old")).meta
    assert meta["code_hash"] == f"config {record['config_hash']}"


@pytest.mark.parametrize(
    ("task", "performance", "noted"),
    [
        ("marl_opf", -849486.42, True),  # the shared reward summed over 5 agents
        ("marl_opf", 0.5, False),
        ("marl_opf", None, False),
        ("gencos_bidding", -849486.42, False),  # per-agent rewards: their sum is right
        ("battery_arbitrage", -849486.42, False),  # one agent
    ],
)
def test_a_far_off_shared_reward_score_gets_the_system_return_note(task, performance, noted):
    from powerzoo.cli.score import system_return_note

    note = system_return_note({"task": task, "scale": "oracle", "performance": performance})
    assert bool(note) is noted
    if noted:
        assert note == (
            "powerzoo: note: performance -8.495e+05 is over 10 anchor-to-oracle distances from "
            "the anchor; marl_opf's 5 agents share one reward, so its system return is one "
            "agent's return, not their sum (docs/submission.md)"
        )
