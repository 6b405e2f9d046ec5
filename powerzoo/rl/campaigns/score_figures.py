"""The benchmark v2 page's learning-curve figures: per task, each row's validation return against
env steps (mean over its finished seeds, with a 95 % bootstrap band), from the trials'
``evaluation_metrics.csv`` (:func:`~powerzoo.rl.campaigns.page.learning_curves`).

Written to ``<out>/curves/learning_curves_<task>.png``; a task's figure goes when it has no
curve any more. Drawn without the Matplotlib version in the file, so a figure redrawn from the
same records is the same file.
"""

from __future__ import annotations

from pathlib import Path

from powerzoo.benchmarks.plots import plot_learning_curves
from powerzoo.benchmarks.report import file_label
from powerzoo.rl.campaigns.page import CampaignFolder, learning_curves

__all__ = ["CURVES_DIR", "learning_curve_figures"]

CURVES_DIR = "curves"
"""Folder of the figures, inside the page's folder."""


def learning_curve_figures(folder: CampaignFolder, out_dir: str | Path) -> dict[str, Path]:
    """Draw every campaign task's learning curves that have a finished trial with a validation
    log; ``{task: PNG path}``. Figures of tasks without one are removed.

    Args:
        folder: The campaign folder as read.
        out_dir: The page's folder (figures go to its ``curves/``).
    """
    out = Path(out_dir) / CURVES_DIR
    drawn: dict[str, Path] = {}
    for task in folder.campaign.tasks:
        curves = learning_curves(folder, task)
        path = out / f"learning_curves_{file_label(task)}.png"
        if curves:
            title = f"{task}: validation return (mean over seeds, 95% bootstrap CI)"
            drawn[task] = plot_learning_curves(curves, task, path, title=title)
        else:
            path.unlink(missing_ok=True)
    return drawn
