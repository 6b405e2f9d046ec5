"""Which splits a run may learn, select and tune on: train and val, never the test days.

The benchmark scores every run on the test split, and the stress splits (``heatwave``,
``load_stress``, ...) are the test days with transformed inputs, scored as held-out scenario
families. A run that trains on any of them, keeps its best model by evaluations on them, stops
on them, or whose settings were chosen on them, is scored on days it was fitted to. So only
``train`` and ``val`` serve learning and choosing:

* a run config's ``env.split`` (training) and ``evaluation.split`` (the periodic evaluations
  that keep the best model and feed stop conditions) must be one of them
  (:func:`powerzoo.rl.config_checks.task_field_problems`);
* a hyperparameter search (a tuner) chooses on the validation split and calls
  :func:`require_selection_split` on the split it is asked to choose on.

A final evaluation on test or a stress split (``powerzoo eval RUN --split test``, a campaign's
``evaluation.split: test`` and its held-out families) is what those splits are for and stays
allowed.
"""

from __future__ import annotations

__all__ = [
    "LEARNING_SPLITS",
    "HELD_OUT_SPLITS",
    "SELECTION_SPLIT",
    "selection_split_problem",
    "require_selection_split",
]

LEARNING_SPLITS: tuple[str, ...] = ("train", "val")
"""The splits a run may train, select models and tune on: their days are not test days."""

HELD_OUT_SPLITS: tuple[str, ...] = ("test",)
"""The split kept for the final evaluation; the stress splits start on its days and are held
out with it (every split not in :data:`LEARNING_SPLITS`)."""

SELECTION_SPLIT = "val"
"""The split to select models and tune settings on."""


def selection_split_problem(split: str, use: str) -> str | None:
    """Why ``split`` may not serve ``use`` (for example ``"model selection"``), as one line;
    ``None`` when it may (``train`` or ``val``)."""
    split = str(split)
    if split in LEARNING_SPLITS:
        return None
    return (
        f"{use} on the {split!r} split is refused: only {' and '.join(LEARNING_SPLITS)} may be "
        "learnt or chosen on (test, and the stress splits that start on its days, are held out "
        f"for the final evaluation); use {SELECTION_SPLIT!r}"
    )


def require_selection_split(split: str, use: str = "tuning") -> str:
    """``split`` when a tuner or a model selection may choose on it (``train`` or ``val``);
    ``ValueError`` (one line) for the test split and the splits on its days."""
    problem = selection_split_problem(split, use)
    if problem is not None:
        raise ValueError(problem)
    return str(split)
