"""The task pages committed in docs/tasks/ are what the generator writes now.

README and GitHub link to ``docs/tasks/<task>.md``, so the pages live in git; they are generated
from each task's spec, class docstring and the packaged baselines (``powerzoo docs-pages``). A
change to any of these without regenerating the pages fails here, in well under a second (the
pages are rendered, not written; the figures are checked to exist, not redrawn).
"""

from __future__ import annotations

import difflib

import pytest
from helpers import REPO_ROOT

from powerzoo.benchmarks.task_pages import index_page, render_markdown
from powerzoo.tasks import list_tasks

TASK_PAGES = REPO_ROOT / "docs" / "tasks"
REGENERATE = (
    "regenerate the task pages with `powerzoo docs-pages --out docs/tasks` (redraws the figures "
    "too; add --keep-figures to rewrite only the pages) and commit docs/tasks/"
)


def _stale(path, expected: str) -> str:
    """The failure message of a page that differs from ``expected``: a short diff and the fix."""
    committed = path.read_text(encoding="utf-8").splitlines()
    diff = difflib.unified_diff(
        committed, expected.splitlines(), "committed", "generated now", lineterm="", n=1
    )
    shown = "\n".join(list(diff)[:30])
    return f"docs/tasks/{path.name} is out of date; {REGENERATE}.\n{shown}"


@pytest.mark.parametrize("task", list_tasks())
def test_the_committed_page_is_what_the_generator_writes(task):
    path = TASK_PAGES / f"{task}.md"
    assert path.is_file(), f"docs/tasks/{task}.md is missing; {REGENERATE}"
    assert (TASK_PAGES / "img" / f"{task}.png").is_file(), (
        f"docs/tasks/img/{task}.png is missing; {REGENERATE}"
    )
    expected = render_markdown(task, f"img/{task}.png")
    assert path.read_text(encoding="utf-8") == expected, _stale(path, expected)


def test_the_committed_index_lists_every_task_and_no_other():
    path = TASK_PAGES / "index.md"
    assert path.is_file(), f"docs/tasks/index.md is missing; {REGENERATE}"
    expected = index_page()
    assert path.read_text(encoding="utf-8") == expected, _stale(path, expected)
    pages = {p.stem for p in TASK_PAGES.glob("*.md")} - {"index"}
    assert pages == set(list_tasks()), (
        f"docs/tasks/ holds pages of no registered task: {sorted(pages - set(list_tasks()))}; "
        "delete them"
    )
