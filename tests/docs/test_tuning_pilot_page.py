"""The committed equal-tuning pilot page agrees with the tuning records it reports.

``docs/results/tuning_pilot.md`` quotes the table ``powerzoo tune-report`` prints for the folders
under ``results/tuning_pilot/`` and the baselines' validation returns on the same days; a record
committed without updating the page, or a hand edit of a number, fails here.
"""

from __future__ import annotations

import pytest
from helpers import REPO_ROOT

from powerzoo.rl.campaigns.tuning import TUNING_JSON
from powerzoo.rl.campaigns.tuning_report import read_tuning, tuning_table
from powerzoo.rl.evaluation_log import EVAL_CSV, read_evaluation_csv

PILOT = REPO_ROOT / "results" / "tuning_pilot"
PAGE = REPO_ROOT / "docs" / "results" / "tuning_pilot.md"
FIGURE = REPO_ROOT / "docs" / "results" / "tuning_pilot" / "tuning_report.png"


def _folders():
    folders = sorted(p.parent for p in PILOT.glob(f"*/{TUNING_JSON}"))
    assert folders, f"no finished tuning run under {PILOT}"
    return folders


def test_page_quotes_the_tune_report_table_of_the_committed_records():
    table = tuning_table([read_tuning(f) for f in _folders()])
    assert table in PAGE.read_text(encoding="utf-8"), (
        "regenerate the table with `powerzoo tune-report results/tuning_pilot/* "
        "--out docs/results/tuning_pilot` and paste it into docs/results/tuning_pilot.md"
    )
    assert FIGURE.stat().st_size > 10_000


def test_every_configuration_was_trained_and_scored_as_the_campaign_does():
    for folder in _folders():
        outcome = read_tuning(folder)
        assert outcome.setting is not None  # started from the campaign's own setting
        assert outcome.preset is not None
        for row in outcome.rows:
            assert row["stop_reason"].startswith("cpu_time"), row  # the track's CPU allowance
            assert int(row["selected_step"]) <= int(row["env_steps"])


def _tasks() -> list[str]:
    return sorted({read_tuning(f).task for f in _folders()})


@pytest.mark.parametrize("task", _tasks())
@pytest.mark.parametrize("policy", ["rule_based", "oracle"])
def test_the_baselines_returns_quoted_are_on_the_same_validation_days(task, policy, tmp_path):
    from powerzoo.benchmarks.campaign import run_campaign

    outcome = next(o for o in map(read_tuning, _folders()) if o.task == task)
    result = run_campaign(
        [outcome.task],
        [policy],
        seeds=[0],
        split="val",
        episodes=int(outcome.best["val_episodes"]),
        out_dir=tmp_path,
        plots=False,
    )
    mean = float(next(r for r in result.rows if r["policy"] == policy)["mean_return"])
    assert f"| {task} | {policy} | {mean:,.2f} |" in PAGE.read_text(encoding="utf-8")
    residual = PILOT / f"{outcome.task}-PPO-RESIDUAL" / "runs" / "preset"
    if policy == "rule_based" and residual.is_dir():
        # the untrained residual is the rule: its first validation evaluation (before any update)
        # is this same return, so the tuner's validation days and env seeds are the bench's
        first = read_evaluation_csv(residual / "evaluation" / EVAL_CSV)[0]
        assert int(first["timestep"]) == 0
        assert float(first["mean_return"]) == pytest.approx(mean, rel=1e-8)
