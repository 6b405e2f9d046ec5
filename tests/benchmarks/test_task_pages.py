"""Task pages: generated from spec + docstring + baselines, a figure each; the CLI writes them."""

import re

import pytest

from powerzoo.benchmarks.task_pages import render_markdown, render_text, write_pages
from powerzoo.cli.main import main
from powerzoo.tasks import list_tasks

PAGE_SECTIONS = (
    "Description",
    "Action",
    "Observation",
    "Reward",
    "Costs",
    "Starting state",
    "Episode end",
    "Splits",
    "Baselines",
    "Arguments",
    "Example",
    "Figure",
)


@pytest.mark.parametrize("task", ["battery_arbitrage", "marl_der_arbitrage"])
def test_a_page_has_every_section_and_its_figure(tmp_path, task):
    seconds = write_pages(tmp_path, [task])
    page = (tmp_path / f"{task}.md").read_text()
    headings = re.findall(r"^## (.+)$", page, re.MULTILINE)
    assert [h for h in headings if h in PAGE_SECTIONS] == list(PAGE_SECTIONS)
    assert (tmp_path / "img" / f"{task}.png").stat().st_size > 10_000
    assert f"](img/{task}.png)" in page and "| `soc_violation` | MWh" in page
    assert "```python\nfrom powerzoo.rl import make_env" in page
    assert "| `rule_based` | test |" in page  # the packaged baselines table
    assert f"[`{task}`]({task}.md)" in (tmp_path / "index.md").read_text()
    assert seconds[task] > 0


def test_describe_prints_the_page_sections(capsys):
    assert main(["describe", "dso"]) == 0
    text = capsys.readouterr().out
    for title in PAGE_SECTIONS[:-2]:
        assert f"\n{title.upper()}\n" in text
    assert text.index("STARTING STATE") < text.index("EPISODE END") < text.index("ARGUMENTS")
    assert render_text("dso") in text and "`" not in text


def test_docs_pages_cli_writes_pages_and_rejects_an_unknown_task(tmp_path, capsys):
    out = tmp_path / "tasks"
    assert main(["docs-pages", "--out", str(out), "--tasks", "marl_opf", "--no-figures"]) == 0
    assert (out / "marl_opf.md").exists() and (out / "index.md").exists()
    assert "wrote 1 task page(s)" in capsys.readouterr().out
    # a page written later joins the index; the pages already there stay listed
    assert main(["docs-pages", "--out", str(out), "--tasks", "dso", "--no-figures"]) == 0
    index = (out / "index.md").read_text()
    assert "[`marl_opf`](marl_opf.md)" in index and "[`dso`](dso.md)" in index
    assert "[`tso`]" not in index  # no page, no row
    assert main(["docs-pages", "--out", str(out), "--tasks", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("powerzoo: error: unknown task 'nope'; registered tasks: acopf_118")


def _section(page: str, title: str) -> str:
    return page.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_multi_agent_example_is_the_pettingzoo_loop():
    example = _section(render_markdown("marl_opf"), "Example")
    assert 'make_env("marl_opf", framework="pettingzoo", split="test", seed=0)' in example
    assert "while env.agents:" in example


@pytest.mark.parametrize("task", list_tasks())
def test_a_page_says_each_thing_once_and_shows_every_default(task):
    page = render_markdown(task)
    assert _section(page, "Episode end").count("Truncated") == 1
    reward = _section(page, "Reward")
    assert reward.count('info["reward_terms"]') == 1, reward
    assert "(nested)" not in _section(page, "Arguments")


def test_nested_keywords_show_the_device_defaults():
    arguments = _section(render_markdown("battery_arbitrage"), "Arguments")
    assert "| `power_max_mw` | `25.0` |" in arguments
    assert "| `energy_capacity_mwh` | `100.0` |" in arguments
    dc = _section(render_markdown("dc_microgrid"), "Arguments")
    assert "| `battery_power_mw` | `2.0` |" in dc  # the site's own battery, not the default


def test_docs_pages_keep_figures_rewrites_only_the_pages(tmp_path, capsys):
    (tmp_path / "img").mkdir()
    figure = tmp_path / "img" / "marl_opf.png"
    figure.write_bytes(b"kept")
    assert (
        main(["docs-pages", "--out", str(tmp_path), "--tasks", "marl_opf", "--keep-figures"]) == 0
    )
    assert figure.read_bytes() == b"kept"
    assert "](img/marl_opf.png)" in (tmp_path / "marl_opf.md").read_text()


def test_every_task_page_names_its_presets_and_links_its_results_sections():
    """Each task has a run preset in configs/ that its page lists with the command that runs
    it, and its links to the results pages land on sections of those pages titled by the task:
    benchmark v2's for every task, v1's (marked as run before the task's revision) for the tasks
    v1 ran."""
    from pathlib import Path

    from powerzoo.benchmarks.task_training import (
        CAMPAIGN_FILE_V2,
        CONFIGS_DIR,
        in_campaign,
        task_presets,
    )

    docs = Path(__file__).resolve().parents[2] / "docs"
    v1_headings = set(
        re.findall(r"^## +(\S+) *$", (docs / "results" / "index.md").read_text(), re.M)
    )
    v2_page = (docs / "results_v2" / "results_v2.md").read_text()
    v2_headings = set(re.findall(r"^### +(\S+) *$", v2_page, re.M))
    assert CAMPAIGN_FILE_V2.is_file()
    for task in list_tasks():
        presets = task_presets(task)
        assert presets, f"{task} has no preset in {CONFIGS_DIR}"
        page = render_markdown(task)
        section = page[page.index("## Training and results") :]
        for name, config in presets:
            assert config["task"] == task
            assert f"`powerzoo train -c configs/{name}`" in section
        assert in_campaign(task, CAMPAIGN_FILE_V2), f"{task} is not in benchmark v2"
        assert f"(../results_v2/results_v2.md#{task})" in section
        assert task in v2_headings, f"the v2 results page has no section for {task}"
        if in_campaign(task):
            assert f"before its revision: [{task} on the benchmark v1 page]" in section
            assert f"(../results/index.md#{task})" in section
            assert task in v1_headings, f"the v1 results page has no section for {task}"
        else:  # a task newer than v1
            assert "../results/index.md" not in section
            assert task not in v1_headings


def test_a_task_without_presets_says_how_to_train_it(tmp_path):
    from powerzoo.benchmarks.task_training import training_blocks

    (tmp_path / "other.yaml").write_text("task: dso\nalgorithm: SAC\ntotal_timesteps: 1e5\n")
    blocks = training_blocks("battery_arbitrage", tmp_path)
    assert "`powerzoo train battery_arbitrage`" in blocks[0]
    header, rows = training_blocks("dso", tmp_path)[1]
    assert rows == [
        ["`configs/other.yaml`", "SAC", "100,000", "`powerzoo train -c configs/other.yaml`"]
    ]
