"""The evaluation log of a run folder: ``evaluation/evaluation_metrics.csv``, one row per
evaluation.

Every trainer (SB3, SB3 multi-agent, native MAPPO) writes its evaluations through these two
functions, so the CSV has the same columns whatever trained the agent.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from powerzoo.fileio import atomic_write_text

__all__ = [
    "EVAL_CSV",
    "evaluation_row",
    "write_evaluation_csv",
    "read_evaluation_csv",
    "selected_row",
]


EVAL_CSV = "evaluation_metrics.csv"
"""One row per evaluation, in the run's ``evaluation/`` folder."""


def evaluation_row(summary: dict[str, Any], timestep: int, seconds: float) -> dict[str, Any]:
    """One ``evaluation_metrics.csv`` row from an
    :func:`~powerzoo.benchmarks.evaluation.evaluate_days` summary.

    ``timestep``: env steps trained when evaluated; ``seconds``: wall time of the evaluation.
    """
    return {
        "timestep": int(timestep),
        "episodes": summary["episodes"],
        "mean_return": summary["mean_return"],
        "std_return": summary["std_return"],
        "iqm_return": summary["iqm_return"],
        "mean_length": summary["mean_length"],
        **{f"cost_{k}": v for k, v in summary["mean_costs"].items()},
        "violation_rate": summary["violation_rate"],
        "eval_seconds": round(seconds, 3),
    }


def write_evaluation_csv(eval_dir: str | Path, history: Sequence[dict[str, Any]]) -> Path:
    """(Re)write ``eval_dir/evaluation_metrics.csv`` atomically from every row of ``history``."""
    fields: list[str] = []
    for row in history:
        fields += [k for k in row if k not in fields]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    writer.writerows(history)
    return atomic_write_text(Path(eval_dir) / EVAL_CSV, buffer.getvalue())


def read_evaluation_csv(path: str | Path) -> list[dict[str, str]]:
    """The rows of an ``evaluation_metrics.csv`` as written (text values); none when the file is
    missing."""
    path = Path(path)
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def selected_row(rows: Sequence[dict[str, Any]]) -> int | None:
    """Index of the evaluation whose model best-model selection keeps: the last row marked
    ``new_best``, the highest ``mean_return`` when none is marked; ``None`` for no rows."""
    if not rows:
        return None
    marked = [i for i, r in enumerate(rows) if str(r.get("new_best", "")).strip() == "True"]
    if marked:
        return marked[-1]
    return max(range(len(rows)), key=lambda i: float(rows[i]["mean_return"]))
