"""MkDocs hook: the task pages (``docs/tasks/``, not in git) are written before every build.

So that ``mkdocs build`` and ``mkdocs serve`` work on a fresh clone without ``make docs``. A
figure already there is kept (``make docs`` redraws them all with ``powerzoo docs-pages``).
"""

from __future__ import annotations

from pathlib import Path

from powerzoo.benchmarks.task_pages import write_pages


def on_pre_build(config, **kwargs) -> None:
    """Write every task's page into ``<docs_dir>/tasks`` and draw the figures that are missing."""
    write_pages(Path(config["docs_dir"]) / "tasks", reuse_figures=True)
