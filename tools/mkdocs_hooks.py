"""MkDocs hook: the task pages (``docs/tasks/``) are brought up to date before every build.

The pages and their figures are committed (README and GitHub link to them;
``tests/docs/test_committed_task_pages.py`` checks they match the generator). The hook rewrites
only a page whose text changed (``mkdocs serve`` rebuilds on every write into the docs folder)
and draws only a missing figure; ``make docs`` redraws them all with ``powerzoo docs-pages``.
"""

from __future__ import annotations

from pathlib import Path

from powerzoo.benchmarks.task_pages import write_pages


def on_pre_build(config, **kwargs) -> None:
    """Write every task's page into ``<docs_dir>/tasks`` and draw the figures that are missing."""
    write_pages(Path(config["docs_dir"]) / "tasks", reuse_figures=True)
