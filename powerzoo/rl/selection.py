"""Which splits a run may learn, select and tune on: never the test split.

The benchmark scores every run on the test split; a run that trains on it, keeps its best model
by evaluations on it, stops on it, or whose settings were chosen on it, is scored on the data it
was fitted to. So the test split is held out for the final evaluation alone:

* a run config's ``env.split`` (training) and ``evaluation.split`` (the periodic evaluations
  that keep the best model and feed stop conditions) must not be it
  (:func:`powerzoo.rl.config_checks.task_field_problems`);
* a hyperparameter search (a tuner) chooses on the validation split and calls
  :func:`require_selection_split` on the split it is asked to choose on.

A final evaluation on test (``powerzoo eval RUN --split test``, a campaign's
``evaluation.split: test``) is what the split is for and stays allowed.
"""

from __future__ import annotations

__all__ = [
    "HELD_OUT_SPLITS",
    "SELECTION_SPLIT",
    "selection_split_problem",
    "require_selection_split",
]

HELD_OUT_SPLITS: tuple[str, ...] = ("test",)
"""Splits kept for the final evaluation: no training, model selection or tuning on them."""

SELECTION_SPLIT = "val"
"""The split to select models and tune settings on."""


def selection_split_problem(split: str, use: str) -> str | None:
    """Why ``split`` may not serve ``use`` (for example ``"model selection"``), as one line;
    ``None`` when it may (any split but the held-out ones)."""
    if str(split) not in HELD_OUT_SPLITS:
        return None
    return (
        f"{use} on the {split!r} split is refused: it is held out for the final evaluation; "
        f"use {SELECTION_SPLIT!r}"
    )


def require_selection_split(split: str, use: str = "tuning") -> str:
    """``split`` when a tuner or a model selection may choose on it; ``ValueError`` (one line)
    for a held-out split such as ``"test"``."""
    problem = selection_split_problem(split, use)
    if problem is not None:
        raise ValueError(problem)
    return str(split)
