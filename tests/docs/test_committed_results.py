"""The published benchmark results agree with the trial records they come from.

The results page (``docs/results/``) and the README's summary table are generated from the
campaign's trial records (``results/benchmark/``) by ``powerzoo campaign-report``; the measured
diagnoses (``campaigns/benchmark_diagnoses.yaml``) name the tasks, scripts and configs a reader
re-runs. A record added without regenerating the page, a hand edit of the table, or a diagnosis
citing a file that moved fails here.
"""

from __future__ import annotations

import re

import pytest
from helpers import REPO_ROOT

from powerzoo.rl.campaigns import load_campaign
from powerzoo.rl.campaigns.page import read_diagnoses, write_results_page

CAMPAIGN = REPO_ROOT / "campaigns" / "benchmark.yaml"
DIAGNOSES = REPO_ROOT / "campaigns" / "benchmark_diagnoses.yaml"
RECORDS = REPO_ROOT / "results" / "benchmark"
PAGE = REPO_ROOT / "docs" / "results"
REGENERATE = (
    "regenerate with `powerzoo campaign-report results/benchmark --out docs/results "
    "--diagnoses campaigns/benchmark_diagnoses.yaml --preface campaigns/benchmark_preface.md` "
    "and copy summary.md's table into README.md"
)


def _table(text: str) -> list[str]:
    """The first Markdown table of ``text`` (its lines)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


@pytest.fixture(scope="module")
def summary_now(tmp_path_factory) -> str:
    if not (RECORDS / "campaign.json").is_file():
        pytest.skip("no campaign records in results/benchmark")
    out = tmp_path_factory.mktemp("results_page")
    page = write_results_page(RECORDS, out, plots=False, diagnoses=read_diagnoses(DIAGNOSES))
    return page.summary.read_text(encoding="utf-8")


def test_the_committed_summary_is_what_the_records_give(summary_now):
    committed = (PAGE / "summary.md").read_text(encoding="utf-8")
    assert _table(committed) == _table(summary_now), (
        f"docs/results/summary.md is stale; {REGENERATE}"
    )


def test_the_readme_shows_the_summary_table_and_the_trial_count(summary_now):
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Benchmark results") :]
    assert _table(section) == _table(summary_now), f"README's results table is stale; {REGENERATE}"
    finished = sum(1 for t in (RECORDS / "trials").iterdir() if (t / "trial.json").is_file())
    total = len(load_campaign(CAMPAIGN).trials)
    assert f"{total} trials" in section
    if finished < total:
        assert re.search(rf"\b{finished} trials have\s+finished", section), (
            f"README should say {finished} of the {total} trials have finished"
        )


def test_the_page_opens_with_its_preface():
    """The v1 page says first that its tasks have changed since (a regeneration without
    ``--preface`` would drop that)."""
    page = (PAGE / "index.md").read_text(encoding="utf-8")
    preface = (REPO_ROOT / "campaigns" / "benchmark_preface.md").read_text(encoding="utf-8")
    title, body = page.split("\n\n", 1)
    assert title == "# PowerZoo benchmark results: campaign `benchmark`"
    assert body.startswith(preface.strip() + "\n\n"), f"docs/results/index.md: {REGENERATE}"


def test_every_diagnosis_names_a_campaign_task_and_files_that_exist():
    diagnoses = read_diagnoses(DIAGNOSES)
    tasks = {t.task for t in load_campaign(CAMPAIGN).trials}
    assert set(diagnoses) <= tasks, (
        f"diagnoses of tasks outside the campaign: {set(diagnoses) - tasks}"
    )
    lines = DIAGNOSES.read_text().splitlines()
    long = [n for n, line in enumerate(lines, 1) if len(line) > 100]
    assert not long, f"campaigns/benchmark_diagnoses.yaml: lines over 100 columns: {long}"
    split = [n for n, line in enumerate(lines, 1) if line[-2:-1].isalpha() and line.endswith("-")]
    assert not split, (
        f"campaigns/benchmark_diagnoses.yaml: lines ending in a hyphenated word's hyphen {split} "
        "(folded, 'no-control' would read 'no- control')"
    )
    for task, text in diagnoses.items():
        for cited in re.findall(r"\b((?:benchmarks|configs)/[\w./-]+\.(?:py|yaml|md))", text):
            assert (REPO_ROOT / cited).is_file(), f"the {task} diagnosis cites {cited}, not found"
