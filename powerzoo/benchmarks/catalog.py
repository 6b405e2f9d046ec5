"""Task descriptions with the numbers of the packaged baselines table.

:func:`info` and :func:`describe` are :func:`powerzoo.tasks.info` and
:func:`powerzoo.tasks.describe` with each baseline's numbers filled in from ``baselines.json``
(mean and standard deviation of the episode return on the table's split, $ per episode; the
system return for multi-agent tasks, :func:`powerzoo.benchmarks.evaluation.return_unit`).
``powerzoo describe TASK [--json]`` prints them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from powerzoo.benchmarks.baselines import load_baselines
from powerzoo.tasks import registry

__all__ = ["baseline_numbers", "info", "describe"]


def baseline_numbers(task: str, path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """``{policy: {"split", "mean", "std"}}`` of ``task`` in the baselines table (default: the
    packaged ``baselines.json``); empty when there is no table. Returns in $ per episode."""
    try:
        rows = load_baselines(path)["results"]
    except FileNotFoundError:
        return {}
    return {
        r["policy"]: {"split": r["split"], "mean": r["mean"], "std": r["std"]}
        for r in rows
        if r["task"] == task
    }


def info(name: str, path: str | Path | None = None) -> dict[str, Any]:
    """:func:`powerzoo.tasks.info` of task ``name`` with the table's baseline numbers."""
    return registry.info(name, baseline_numbers(name, path))


def describe(name: str, path: str | Path | None = None) -> str:
    """:func:`powerzoo.tasks.describe` of task ``name`` with the table's baseline numbers."""
    return registry.describe(name, baseline_numbers(name, path))
