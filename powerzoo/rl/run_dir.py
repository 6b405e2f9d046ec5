"""Layout of a run folder, its name, and its checkpoint folders.

::

    <output_dir>/<ALGO>-<task>-seed<S>-<YYYYmmdd-HHMMSS>/
        config.yaml                       resolved run config
        run_state.json                    status, env steps, stop reason (rewritten as it goes)
        tensorboard/                      TensorBoard event files (one run, continued on resume)
        evaluation/evaluation_metrics.csv one row per evaluation, the last at the final step
        evaluation/best_model.zip         best model on the evaluation split
        evaluation/best_vecnormalize.pkl  its frozen normalisation statistics (if any)
        evaluation/best_model.json        when and how well it scored (multi-agent runs: the
                                          final models, evaluated once at the end)
        checkpoints/step_<N>/             model.zip, vecnormalize.pkl, replay_buffer.pkl,
                                          rng.pkl, state.json
        checkpoints/latest                name of the newest complete checkpoint
        model.zip, vecnormalize.pkl       final model
        agents/                           multi-agent runs instead: shared.zip or <agent>.zip

Every file is written to a temporary name in the same folder and renamed into place
(:mod:`powerzoo.fileio`), and a checkpoint folder is complete before ``checkpoints/latest`` points
at it, so a run killed at any moment leaves only whole files behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from powerzoo.fileio import atomic_write_text

__all__ = [
    "run_name",
    "CheckpointStore",
    "CONFIG_FILE",
    "STATE_FILE",
    "TENSORBOARD_DIR",
    "EVAL_DIR",
    "MODEL_FILE",
    "VECNORM_FILE",
    "CHECKPOINT_DIR",
    "REPLAY_FILE",
    "RNG_FILE",
    "AGENTS_DIR",
]

CONFIG_FILE = "config.yaml"
STATE_FILE = "run_state.json"
TENSORBOARD_DIR = "tensorboard"
EVAL_DIR = "evaluation"
CHECKPOINT_DIR = "checkpoints"
MODEL_FILE = "model.zip"
VECNORM_FILE = "vecnormalize.pkl"
REPLAY_FILE = "replay_buffer.pkl"
RNG_FILE = "rng.pkl"
AGENTS_DIR = "agents"
"""Multi-agent runs: ``agents/shared.zip`` (one shared policy) or ``agents/<agent>.zip`` (one per
agent)."""


def run_name(algorithm: str, task: str, seed: int, when: float | None = None) -> str:
    """``<ALGO>-<task>-seed<S>-<YYYYmmdd-HHMMSS>`` (local time)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if when is None else when))
    return f"{algorithm}-{task}-seed{seed}-{stamp}"


class CheckpointStore:
    """The ``checkpoints/`` folder of a run: write, list, prune and find the latest checkpoint."""

    def __init__(self, run_dir: str | Path, keep: int = 3) -> None:
        self.root = Path(run_dir) / CHECKPOINT_DIR
        self.keep = keep

    @staticmethod
    def folder_name(num_timesteps: int) -> str:
        return f"step_{num_timesteps:012d}"

    def write(self, num_timesteps: int, write_files: Callable[[Path], None]) -> Path:
        """Fill a temporary folder with ``write_files(folder)``, rename it, then point ``latest`` at
        it."""
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / self.folder_name(num_timesteps)
        tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=self.root))
        try:
            write_files(tmp)
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        atomic_write_text(self.root / "latest", final.name)
        self._prune()
        return final

    def complete(self) -> list[Path]:
        """Complete checkpoint folders, oldest first."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir() and p.name.startswith("step_"))

    def latest(self) -> Path | None:
        """The checkpoint ``latest`` names (or the newest complete folder), or ``None``."""
        pointer = self.root / "latest"
        if pointer.is_file():
            candidate = self.root / pointer.read_text().strip()
            if candidate.is_dir():
                return candidate
        folders = self.complete()
        return folders[-1] if folders else None

    def _prune(self) -> None:
        for old in self.complete()[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        for partial in self.root.glob(".partial-*"):
            shutil.rmtree(partial, ignore_errors=True)
