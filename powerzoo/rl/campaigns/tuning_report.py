"""What equal tuning gained: one table (and one figure) over the folders ``powerzoo tune`` wrote.

Each folder's ``tuning.json`` gives the budget and the chosen configuration, its ``tuning.csv``
every configuration's validation return and budgets. The table has one line per folder: the
untuned preset's validation return (when ``--preset`` trained it), the best configuration's, the
gain, how many configurations kept the task's budgets, and the CPU time spent. The figure shows
each configuration's validation return per algorithm, the preset marked, so the spread of the
search and the preset's place in it are seen at a glance.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from powerzoo.fileio import read_json

__all__ = ["TuningOutcome", "read_tuning", "tuning_table", "plot_tuning"]


@dataclasses.dataclass(frozen=True)
class TuningOutcome:
    """One tuning folder's numbers.

    Attributes:
        task: The task tuned.
        algorithm: The algorithm tuned.
        setting: The campaign setting it started from, or ``None``.
        configurations: Sampled configurations (the tuning budget).
        best_index: The chosen configuration.
        best: Its ``tuning.json`` row (``val_return``, ``within_budget``, ...).
        preset: The untuned preset's row, or ``None`` when it was not trained.
        gain_over_preset: Best minus preset validation return, or ``None``.
        cpu_hours: CPU time of every configuration (the preset's included).
        rows: Every ``tuning.csv`` line (text values; the preset's ``config`` is ``preset``).
    """

    task: str
    algorithm: str
    setting: str | None
    configurations: int
    best_index: int
    best: dict[str, Any]
    preset: dict[str, Any] | None
    gain_over_preset: float | None
    cpu_hours: float
    rows: list[dict[str, str]]


def read_tuning(folder: str | Path) -> TuningOutcome:
    """The outcome of the tuning run in ``folder``.

    Args:
        folder: A folder ``powerzoo tune`` wrote (``tuning.json`` and ``tuning.csv`` inside).

    Returns:
        Its :class:`TuningOutcome`; ``FileNotFoundError`` naming the file when one is missing
        (the run has not finished).
    """
    from powerzoo.rl.campaigns.tuning import TUNING_CSV, TUNING_JSON

    folder = Path(folder)
    for name in (TUNING_JSON, TUNING_CSV):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name}: not there (has the tuning run finished?)")
    record = read_json(folder / TUNING_JSON)
    with (folder / TUNING_CSV).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return TuningOutcome(
        task=record["task"],
        algorithm=record["algorithm"],
        setting=(record.get("campaign") or {}).get("setting"),
        configurations=int(record["configurations"]),
        best_index=int(record["best_index"]),
        best=record["best"],
        preset=record.get("preset"),
        gain_over_preset=record.get("gain_over_preset"),
        cpu_hours=float(record["total_cpu_seconds"]) / 3600.0,
        rows=rows,
    )


def _return_text(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    over = "" if row["within_budget"] else " (over budget)"
    return f"{float(row['val_return']):,.2f}{over}"


def tuning_table(outcomes: Sequence[TuningOutcome]) -> str:
    """A markdown table, one line per tuning run.

    Args:
        outcomes: From :func:`read_tuning`.

    Returns:
        The table (header included), ending with a newline.
    """
    lines = [
        "| task | algorithm | configurations | preset, val return | best tuned, val return "
        "| gain over the preset | within budget | CPU hours |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for o in outcomes:
        within = sum(r["config"] != "preset" and r["within_budget"] == "True" for r in o.rows)
        gain = o.gain_over_preset
        name = o.algorithm + (f"/{o.setting}" if o.setting else "")
        lines.append(
            f"| {o.task} | {name} | {o.configurations} | {_return_text(o.preset)} "
            f"| {_return_text(o.best)} (config {o.best_index}) "
            f"| {'-' if gain is None else f'{gain:+,.2f}'} "
            f"| {within} of {o.configurations} | {o.cpu_hours:.2f} |"
        )
    return "\n".join(lines) + "\n"


def plot_tuning(outcomes: Sequence[TuningOutcome], path: str | Path) -> Path:
    """Each configuration's validation return, one column per tuning run: dots for the sampled
    configurations (hollow when over budget), a ring around the chosen one, a red line at the
    preset (dashed when over budget); one panel per task.

    Args:
        outcomes: From :func:`read_tuning`.
        path: The PNG file to write.

    Returns:
        ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(o.task for o in outcomes))  # one panel per task: its own scale
    widths = [sum(o.task == t for o in outcomes) for t in tasks]
    fig, axes = plt.subplots(
        1,
        len(tasks),
        figsize=(max(5.0, 1.4 * len(outcomes) + 1.5 * len(tasks)), 3.8),
        gridspec_kw={"width_ratios": widths},
        squeeze=False,
    )
    for ax, task in zip(axes[0], tasks, strict=True):
        runs = [o for o in outcomes if o.task == task]
        for x, o in enumerate(runs):
            for r in o.rows:
                value = float(r["val_return"])
                within = r["within_budget"] == "True"
                if r["config"] == "preset":
                    style = "-" if within else "--"
                    ax.hlines(value, x - 0.3, x + 0.3, color="tab:red", lw=2, linestyles=style)
                    continue
                face = "tab:blue" if within else "none"
                ax.scatter(x, value, s=28, facecolors=face, edgecolors="tab:blue")
                if int(r["config"]) == o.best_index:
                    ax.scatter(x, value, s=110, facecolors="none", edgecolors="k", lw=1.2)
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels([o.algorithm for o in runs], fontsize=8)
        ax.set_xlim(-0.6, len(runs) - 0.4)
        ax.set_title(task, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("validation return ($ per episode)")
    fig.suptitle(
        "tuned configurations (filled: within budget; ringed: chosen)\n"
        "red line: the untuned preset (dashed: over budget)",
        fontsize=8,
    )
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
