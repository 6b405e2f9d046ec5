"""The "Training and results" part of a task page: the task's run presets in ``configs/`` and
the links to its sections of the benchmark results pages.

A preset is a run config (:mod:`powerzoo.rl.config`) in the repository's ``configs/`` folder
whose ``task`` is the task: ``powerzoo train -c configs/<file>`` runs it. Each results page has
one section per task, titled by the task's name, so a task page links to
``../results_v2/results_v2.md#<task>`` (benchmark v2, on the tasks as they are) and, for the
tasks benchmark v1 ran before their revision, ``../results/index.md#<task>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CONFIGS_DIR", "in_campaign", "results_links", "task_presets", "training_blocks"]

CONFIGS_DIR = Path(__file__).resolve().parents[2] / "configs"
"""The repository's run presets (absent from an installed wheel: the pages then say where they
are)."""

RESULTS_PAGE = "../results/index.md"
"""The benchmark v1 results page, relative to a task page (``docs/tasks/<task>.md``)."""

RESULTS_PAGE_V2 = "../results_v2/results_v2.md"
"""The benchmark v2 results page, relative to a task page."""

_RESULTS = Path(__file__).resolve().parents[2] / "results"

CAMPAIGN_FILE = _RESULTS / "benchmark" / "campaign.json"
"""The committed benchmark v1 campaign (absent from an installed wheel: every task then links
to both pages)."""

CAMPAIGN_FILE_V2 = _RESULTS / "benchmark_v2" / "campaign.json"
"""The committed benchmark v2 campaign."""


def in_campaign(task: str, campaign_file: Path = CAMPAIGN_FILE) -> bool:
    """Whether the committed campaign ``campaign_file`` (default: benchmark v1) holds ``task``,
    so its results page has a section for it; ``True`` where the file is missing.

    Args:
        task: A task name.
        campaign_file: A campaign folder's ``campaign.json``.

    Returns:
        ``True`` if the campaign's results page has a section for the task.
    """
    if not campaign_file.is_file():
        return True
    return task in json.loads(campaign_file.read_text(encoding="utf-8")).get("tasks", [])


def results_links(task: str) -> str:
    """The sentence of a task page that links its sections of the benchmark results pages.

    Args:
        task: A task name.

    Returns:
        Markdown: the v2 section (where the v2 campaign holds the task), then the v1 section
        marked as run on the task before its revision (where v1 ran it).
    """
    v2 = in_campaign(task, CAMPAIGN_FILE_V2)
    v1 = in_campaign(task)
    if not (v1 or v2):
        return (
            "No trained policies of this task on the results pages yet: the committed benchmark "
            "campaigns predate it (its baselines are in the table above)."
        )
    parts = []
    if v2:
        parts.append(
            f"Trained policies on this task: [{task} on the benchmark v2 page]"
            f"({RESULTS_PAGE_V2}#{task})."
        )
    if v1:
        parts.append(
            (
                "Earlier, on the task before its revision"
                if v2
                else "On the task before its revision"
            )
            + f": [{task} on the benchmark v1 page]({RESULTS_PAGE}#{task})."
        )
    return " ".join(parts)


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
    results = results_links(task)
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
