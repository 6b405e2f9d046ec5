"""The committed benchmark v2 page agrees with the campaign's trial records.

``docs/results_v2/`` is written by ``powerzoo campaign-score`` from ``results/benchmark_v2/``
while the campaign runs (records are committed as trials finish). A record committed without
regenerating the page, or a hand edit of its table, fails here; two rows are re-scored from the
records (every row would take minutes once the campaign is complete).
"""

from __future__ import annotations

import csv
import re

import pytest
from helpers import REPO_ROOT

from powerzoo.benchmarks.stats import BOOTSTRAP_RESAMPLES
from powerzoo.benchmarks.submission import read_submission
from powerzoo.benchmarks.submission_score import score_submission
from powerzoo.benchmarks.trial_submission import submission_from_trials
from powerzoo.rl.campaigns.gather import pinned_campaign_files
from powerzoo.rl.campaigns.page import read_campaign_folder
from powerzoo.rl.campaigns.score_page import coverage, finished_groups
from powerzoo.rl.campaigns.score_readme import coverage_sentence, markers
from powerzoo.rl.campaigns.trial import trial_dir

RECORDS = REPO_ROOT / "results" / "benchmark_v2"
PAGE = REPO_ROOT / "docs" / "results_v2"
REGENERATE = (
    "regenerate with `powerzoo campaign-score results/benchmark_v2 --out docs/results_v2 "
    "--families-dir results/families --readme README.md`"
)
COMPARED = ("n_seeds", "episodes", "mean_return", "feasibility", "within_budget", "performance")


@pytest.fixture(scope="module")
def folder():
    if not (RECORDS / "campaign.json").is_file():
        pytest.skip("no benchmark v2 campaign records")
    return read_campaign_folder(RECORDS)


@pytest.fixture(scope="module")
def committed_rows() -> list[dict[str, str]]:
    with open(PAGE / "results_v2.csv", encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_page_covers_exactly_the_finished_records(folder, committed_rows):
    page = (PAGE / "results_v2.md").read_text(encoding="utf-8")
    finished, planned = len(folder.records), len(folder.campaign.trials)
    assert f"{finished} of {planned} trials finished" in page, f"the page is stale; {REGENERATE}"
    groups = finished_groups(folder)
    rows = {(r["task"], r["algorithm"]): int(r["n_seeds"]) for r in committed_rows}
    assert rows == {key: len(trials) for key, trials in groups.items()}, REGENERATE


def test_two_committed_rows_are_what_their_records_score(folder, committed_rows, tmp_path):
    groups = finished_groups(folder)
    chosen = [committed_rows[0], committed_rows[-1]]
    for row in chosen:
        trials = groups[(row["task"], row["algorithm"])]
        where = tmp_path / f"{row['task']}_{len(trials)}_{chosen.index(row)}"
        submission_from_trials([trial_dir(folder.out_dir, t) for t in trials], where)
        with pinned_campaign_files(RECORDS):
            fresh = score_submission(read_submission(where), n_resamples=BOOTSTRAP_RESAMPLES)
        for column in COMPARED:
            value = fresh[column]
            text = (
                "" if value is None else (repr(value) if isinstance(value, float) else str(value))
            )
            assert row[column] == text, f"{row['task']} {row['algorithm']} {column}; {REGENERATE}"


def _readme_block(block: str) -> str:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start, end = markers("benchmark_v2", block)
    return readme[readme.index(start) + len(start) + 1 : readme.index(end)]


def test_the_readme_states_the_v2_coverage(folder):
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Benchmark v2") : readme.index("## Benchmark results")]
    finished, planned = len(folder.records), len(folder.campaign.trials)
    sentence = _readme_block("coverage")
    assert sentence == coverage_sentence(coverage(folder)) + "\n", REGENERATE
    stated = (
        f"all {planned} trials have finished"
        if finished == planned
        else f"{finished} of its {planned} trials have finished"
    )
    assert f"**Coverage:** {stated}" in sentence
    assert "docs/results_v2/results_v2.md" in section and sentence in section


def test_the_readme_shows_the_committed_summary_table(folder):
    block = _readme_block("summary")
    summary = (PAGE / "summary_v2.md").read_text(encoding="utf-8")
    assert block == summary, f"README's benchmark v2 table differs from summary_v2.md; {REGENERATE}"
    finished = sum(int(line.rsplit("|", 2)[1].split("/")[0]) for line in summary.splitlines()[2:])
    assert finished == len(folder.records), REGENERATE


def test_every_figure_the_page_shows_is_committed():
    page = (PAGE / "results_v2.md").read_text(encoding="utf-8")
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", page)
    assert any(f.startswith("curves/") for f in figures)
    missing = [f for f in figures if not (PAGE / f).is_file()]
    assert missing == [], REGENERATE


def test_every_residual_trial_could_keep_its_untrained_policy_the_rule(folder):
    """The residual learners' model selection includes their untrained policy (the rule): the
    campaign asks it of every residual trial, and every finished residual record's validation
    log starts at step 0."""
    residual = [t for t in folder.campaign.trials if t.algorithm.endswith("-RESIDUAL")]
    assert residual and all(t.config["evaluation"].get("at_start") is True for t in residual)
    for trial in residual:
        if trial.trial_id not in folder.records:
            continue
        log = trial_dir(folder.out_dir, trial) / "run" / "evaluation" / "evaluation_metrics.csv"
        with open(log, encoding="utf-8", newline="") as handle:
            first = next(csv.DictReader(handle))
        assert int(first["timestep"]) == 0, f"{trial.trial_id}: no evaluation before training"
