"""Run folders (written by :func:`powerzoo.rl.trainer.Trainer`) for the command line.

:func:`load_run` loads a run's model (``best`` falls back to ``final`` for runs that saved no best
model); :func:`run_entry` turns a run folder into a
:class:`~powerzoo.benchmarks.campaign.PolicyEntry` for a benchmark campaign. Loading a model
imports torch and Stable-Baselines3, so both import the trainer only when called.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.campaign import PolicyEntry
from powerzoo.rl.run_dir import CONFIG_FILE, EVAL_DIR

__all__ = ["load_run", "run_entry"]


def load_run(
    run_dir: str | Path, model: str = "best", *, trust_pickle: bool = False
) -> tuple[Any, str]:
    """``(trainer, model)``: the run's :func:`~powerzoo.rl.trainer.Trainer` and the model loaded.

    ``model`` is ``best``, ``final`` or ``latest``; ``best`` becomes ``final`` when the run saved no
    best model (no evaluations, or a multi-agent run). ``FileNotFoundError`` if ``run_dir`` is not a
    run folder, or if the statistics of a run that normalises are missing.

    Args:
        run_dir: The run folder.
        model: Which model to load.
        trust_pickle: Also read the pickles of a run folder an older PowerZoo wrote (they run
            code: trusted folders only).

    Returns:
        The trainer and the model it holds.
    """
    from powerzoo.rl.trainer import Trainer

    run_dir = Path(run_dir)
    if not (run_dir / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"{run_dir} is not a run folder (no {CONFIG_FILE})")
    best = ("best_model.zip", "best_policy.npz")  # SB3 runs, native multi-agent (MAPPO / IPPO) runs
    if model == "best" and not any((run_dir / EVAL_DIR / name).is_file() for name in best):
        model = "final"
    return Trainer.load(run_dir, model=model, trust_pickle=trust_pickle), model


def run_entry(
    run_dir: str | Path,
    model: str = "best",
    deterministic: bool = True,
    *,
    trust_pickle: bool = False,
) -> PolicyEntry:
    """A run folder as a campaign policy: its task, its evaluation env
    (:meth:`~powerzoo.rl.trainer_base.TrainerBase.make_eval_env`), its policy, labelled with the
    folder's name.

    Args:
        run_dir: The run folder.
        model: Which model to load (as :func:`load_run`).
        deterministic: Act with the policy's mode.
        trust_pickle: Also read an older PowerZoo's pickles (as :func:`load_run`).

    Returns:
        The campaign entry.
    """
    run_dir = Path(run_dir)
    trainer, model = load_run(run_dir, model, trust_pickle=trust_pickle)
    if trainer.is_multi_agent and not hasattr(trainer, "shared_model"):  # MAPPO / IPPO runs
        shown = f"{model} policy"
    elif trainer.is_multi_agent:
        shown = "shared policy" if trainer.shared_model is not None else "independent learners"
    else:
        shown = f"{model} model"
    return PolicyEntry(
        label=run_dir.resolve().name,
        task=trainer.task,
        make_env=functools.partial(trainer.make_eval_env, objective=True),
        make_policy=lambda env, seed: trainer.policy(deterministic),
        source=f"{run_dir} ({trainer.algorithm} {shown})",
        kind="trained",
    )
