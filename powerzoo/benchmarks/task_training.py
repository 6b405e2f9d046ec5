"""The "Training and results" part of a task page: the task's run presets in ``configs/`` and
the link to its section of the benchmark results page.

A preset is a run config (:mod:`powerzoo.rl.config`) in the repository's ``configs/`` folder
whose ``task`` is the task: ``powerzoo train -c configs/<file>`` runs it. The results page
(``docs/results/index.md``) has one section per task, titled by the task's name, so the link is
``../results/index.md#<task>`` from a task page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CONFIGS_DIR", "in_campaign", "task_presets", "training_blocks"]

CONFIGS_DIR = Path(__file__).resolve().parents[2] / "configs"
"""The repository's run presets (absent from an installed wheel: the pages then say where they
are)."""

RESULTS_PAGE = "../results/index.md"
"""The benchmark results page, relative to a task page (``docs/tasks/<task>.md``)."""

CAMPAIGN_FILE = Path(__file__).resolve().parents[2] / "results" / "benchmark" / "campaign.json"
"""The committed benchmark campaign whose results page the task pages link to (absent from an
installed wheel: every task then links to the page)."""


def in_campaign(task: str) -> bool:
    """Whether the committed benchmark campaign ran ``task`` (so the results page has its
    section); ``True`` where the campaign file is missing.

    Args:
        task: A task name.

    Returns:
        ``True`` if the results page has a section for the task.
    """
    if not CAMPAIGN_FILE.is_file():
        return True
    return task in json.loads(CAMPAIGN_FILE.read_text(encoding="utf-8")).get("tasks", [])


def task_presets(task: str, configs_dir: Path | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The run presets of ``task``: ``(file name, parsed config)`` of every ``*.yaml`` file of
    ``configs_dir`` (default :data:`CONFIGS_DIR`) whose ``task`` field is ``task``, sorted by
    name; ``[]`` where the folder is missing.

    Args:
        task: A task name.
        configs_dir: The folder of presets.

    Returns:
        The matching presets, in file-name order.
    """
    folder = CONFIGS_DIR if configs_dir is None else Path(configs_dir)
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.yaml")):
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(config, dict) and config.get("task") == task:
            found.append((path.name, config))
    return found


def training_blocks(task: str, configs_dir: Path | None = None) -> list[Any]:
    """Blocks of the task page's "Training and results" section: a sentence, a table of the
    presets ``(["preset", "algorithm", "total timesteps", "command"], rows)`` and the link to
    the task's results.

    Args:
        task: A task name.
        configs_dir: The folder of presets (default :data:`CONFIGS_DIR`).

    Returns:
        Markdown strings and ``(header, rows)`` tables, in page order.
    """
    presets = task_presets(task, configs_dir)
    results = (
        f"Benchmark results of trained policies on this task: [{task} on the results page]"
        f"({RESULTS_PAGE}#{task})."
        if in_campaign(task)
        else "No trained policies of this task on the results page yet: the committed benchmark "
        "campaign predates it (its baselines are in the table above)."
    )
    if not presets:
        return [
            "No run preset of this task in the repository's `configs/` folder: "
            f"`powerzoo train {task}` trains with the defaults.",
            results,
        ]
    rows = [
        [
            f"`configs/{name}`",
            str(config.get("algorithm", "PPO")),
            f"{int(float(config['total_timesteps'])):,}" if "total_timesteps" in config else "-",
            f"`powerzoo train -c configs/{name}`",
        ]
        for name, config in presets
    ]
    return [
        "Run presets in the repository's `configs/` folder (the benchmark's settings; each "
        "file's comments say how it was tuned):",
        (["preset", "algorithm", "total timesteps", "command"], rows),
        results,
    ]
