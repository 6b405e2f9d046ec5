"""Layout of a run folder, its name, and its checkpoint folders.

::

    <output_dir>/<ALGO>-<task>-seed<S>-<YYYYmmdd-HHMMSS>/
        config.yaml                       resolved run config
        run_state.json                    status, env steps, stop reason (rewritten as it goes)
        tensorboard/                      TensorBoard event files (one run, continued on resume)
        evaluation/evaluation_metrics.csv one row per evaluation, the last at the final step
        evaluation/best_model.zip         best model on the evaluation split
        evaluation/best_vecnormalize.npz  its frozen normalisation statistics (if any)
        evaluation/best_model.json        when and how well it scored (multi-agent runs: the
                                          final models, evaluated once at the end)
        checkpoints/step_<N>/             model.zip, vecnormalize.npz, replay_buffer.npz,
                                          rng.npz, state.json
        checkpoints/latest                name of the newest complete checkpoint
        model.zip, vecnormalize.npz       final model
        agents/                           multi-agent runs instead: shared.zip or <agent>.zip
    <output_dir>/.<run name>.lock         held by the process writing the run (:func:`lock_run_dir`)

Every file is written to a temporary name in the same folder and renamed into place
(:mod:`powerzoo.fileio`), and a checkpoint folder is complete before ``checkpoints/latest`` points
at it, so a run killed at any moment leaves only whole files behind. Re-writing a checkpoint step
that exists moves the old folder aside first (``.old-step_<N>-<pid>``), renames the new one into
place, then deletes the old one: a kill in between leaves one of the two, which reading finds.

Every file of a run folder is read through :func:`powerzoo.fileio.read_or_corrupt` (the readers
below): a damaged file raises :class:`~powerzoo.fileio.CorruptFileError` naming it, and
:meth:`CheckpointStore.restore` skips a damaged checkpoint for the next newest with a warning.

Reading a run folder runs no code by default (:mod:`powerzoo.rl.safe_files`): statistics, RNG
and collector states and replay buffers are plain arrays (``.npz``), torch files are read with
``weights_only=True``, SB3 models are rebuilt from the run config with only their parameters read
from the zip (:mod:`powerzoo.rl.sb3.files`). The pickles of older PowerZoo versions
(``vecnormalize.pkl``, ``rng.pkl``, ``collector.pkl``, ``replay_buffer.pkl``) are read only with
``trust_pickle=True`` (``--trust-pickle``).

One process writes a run folder at a time: ``train`` and ``resume`` hold
``<output_dir>/.<run name>.lock`` (:func:`lock_run_dir`), and a second writer gets
:class:`RunFolderBusyError` naming the holder (pid and host).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from powerzoo.fileio import CorruptFileError, atomic_write_text, exclusive_lock, read_or_corrupt

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
    "RunFolderBusyError",
    "lock_run_dir",
    "read_state",
    "check_zip",
    "read_run_state",
]

T = TypeVar("T")

CONFIG_FILE = "config.yaml"
STATE_FILE = "run_state.json"
TENSORBOARD_DIR = "tensorboard"
EVAL_DIR = "evaluation"
CHECKPOINT_DIR = "checkpoints"
MODEL_FILE = "model.zip"
VECNORM_FILE = "vecnormalize.npz"
REPLAY_FILE = "replay_buffer.npz"
RNG_FILE = "rng.npz"
AGENTS_DIR = "agents"
"""Multi-agent runs: ``agents/shared.zip`` (one shared policy) or ``agents/<agent>.zip`` (one per
agent)."""


def run_name(algorithm: str, task: str, seed: int, when: float | None = None) -> str:
    """``<ALGO>-<task>-seed<S>-<YYYYmmdd-HHMMSS>`` (local time)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if when is None else when))
    return f"{algorithm}-{task}-seed{seed}-{stamp}"


def free_run_name(
    output_dir: str | Path, algorithm: str, task: str, seed: int, when: float | None = None
) -> str:
    """:func:`run_name`, with ``-2``, ``-3``, ... appended while ``output_dir`` already has a
    folder of that name (two runs started within the same second).

    Args:
        output_dir: the folder the run folder goes in.
        algorithm: the algorithm's name (``PPO``, ``MAPPO``, ...).
        task: the task's name.
        seed: the run's seed.
        when: the start time (seconds since the epoch; default: now).

    Returns:
        A run-folder name not yet taken in ``output_dir``.
    """
    base = run_name(algorithm, task, seed, when)
    name, k = base, 2
    while (Path(output_dir) / name).exists():
        name, k = f"{base}-{k}", k + 1
    return name


class RunFolderBusyError(ValueError):
    """Another process writes the run folder (trains or resumes it)."""


def lock_run_dir(run_dir: str | Path) -> contextlib.AbstractContextManager[Path]:
    """Hold the run folder ``run_dir`` for one writer, for the ``with`` block.

    An exclusive lock (:func:`powerzoo.fileio.exclusive_lock`, as the campaign folder's) on
    ``<parent>/.<name>.lock`` beside the folder, so that it also covers a folder not created yet
    and one replaced by ``overwrite``. Records ``pid <N> on <host>``; a second writer gets
    :class:`RunFolderBusyError` naming that holder. The parent folder is created if missing.

    Args:
        run_dir: The run folder (need not exist yet).

    Returns:
        A context manager yielding the lock file's path.
    """
    run_dir = Path(run_dir).absolute()
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    path = run_dir.parent / f".{run_dir.name}.lock"

    def busy(holder: str) -> RunFolderBusyError:
        return RunFolderBusyError(
            f"run folder {run_dir} is being written by another process ({holder}; lock file "
            f"{path}); wait for it to end, or train under another --name"
        )

    return exclusive_lock(path, busy, f"pid {os.getpid()} on {socket.gethostname()}")


def read_state(path: str | Path, keys: Sequence[str] = ()) -> dict[str, Any]:
    """Read a JSON state file (``state.json``, ``run_state.json``) that must be an object holding
    ``keys``; :class:`~powerzoo.fileio.CorruptFileError` otherwise."""

    def read(p: Path) -> dict[str, Any]:
        data = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        missing = [k for k in keys if k not in data]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        return data

    return read_or_corrupt(path, read)


def check_zip(path: str | Path, members: Sequence[str] = ("data",)) -> Path:
    """Check the zip archive ``path`` (an SB3 model: ``data`` among its ``members``): every
    member's CRC, and that ``members`` are there; returns the path.

    :class:`~powerzoo.fileio.CorruptFileError` if it is truncated or damaged (a truncated SB3
    zip can still open as the torch archive stored inside it, hence the member check).
    """

    def check(p: Path) -> Path:
        with zipfile.ZipFile(p) as archive:
            bad = archive.testzip()
            missing = [m for m in members if m not in archive.namelist()]
        if bad is not None:
            raise ValueError(f"member {bad} fails its checksum")
        if missing:
            raise ValueError(f"no {', '.join(missing)} in the archive: truncated?")
        return p

    return read_or_corrupt(path, check)


def read_run_state(run_dir: str | Path) -> dict[str, Any] | None:
    """``run_state.json`` of ``run_dir`` (``None`` if absent); a damaged one is named in a warning
    and read as absent: the checkpoints hold everything a resume needs, and the file is rewritten
    as the run goes."""
    path = Path(run_dir) / STATE_FILE
    if not path.is_file():
        return None
    try:
        return read_state(path)
    except CorruptFileError as err:
        warnings.warn(f"{err}; going on without it", stacklevel=2)
        return None


_STEP = re.compile(r"^(?:\.old-)?step_(\d+)(?:-\d+)?$")


def _step_of(folder: Path) -> int | None:
    match = _STEP.match(folder.name)
    return None if match is None else int(match.group(1))


_PARTIAL = re.compile(r"^\.partial-(\d+)-")


def _abandoned(partial: Path) -> bool:
    """Whether a ``.partial-<pid>-*`` folder was left by this process or by one no longer
    running on this host (a folder of another live writer is never deleted)."""
    match = _PARTIAL.match(partial.name)
    if match is None:  # an older PowerZoo's name, without the writer's pid
        return True
    pid = int(match.group(1))
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


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
        it.

        A folder of the same step that exists is moved aside before the swap and deleted after it,
        so no moment leaves the step without a complete folder (see the module docstring).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / self.folder_name(num_timesteps)
        tmp = Path(tempfile.mkdtemp(prefix=f".partial-{os.getpid()}-", dir=self.root))
        aside = self.root / f".old-{final.name}-{os.getpid()}"
        try:
            write_files(tmp)
            if final.exists():
                if aside.exists():
                    shutil.rmtree(aside)
                os.replace(final, aside)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        atomic_write_text(self.root / "latest", final.name)
        if aside.exists():
            shutil.rmtree(aside)
        self._prune()
        return final

    def complete(self) -> list[Path]:
        """Checkpoint folders, oldest first (``step_<N>``; an ``.old-step_<N>-*`` folder a kill
        left during a re-write stands in for a missing ``step_<N>``)."""
        if not self.root.is_dir():
            return []
        by_step: dict[int, Path] = {}
        for folder in sorted(self.root.iterdir()):
            step = _step_of(folder)
            if step is None or not folder.is_dir():
                continue
            if step not in by_step or folder.name.startswith("step_"):
                by_step[step] = folder
        return [by_step[s] for s in sorted(by_step)]

    def latest(self) -> Path | None:
        """The newest complete checkpoint folder, or ``None``.

        ``latest`` names it too; a ``latest`` that cannot be read or names no checkpoint folder is
        named in a warning (the folders are what counts: each is complete before it is renamed
        into place).
        """
        folders = self.complete()
        pointer = self.root / "latest"
        if folders and pointer.is_file():
            steps = {_step_of(f) for f in folders}
            try:
                read_or_corrupt(pointer, lambda p: self._read_pointer(p, steps))
            except CorruptFileError as err:
                warnings.warn(f"{err}; using {folders[-1].name}", stacklevel=2)
        return folders[-1] if folders else None

    def restore(self, read: Callable[[Path], T]) -> tuple[Path, T] | None:
        """``(folder, read(folder))`` for the newest checkpoint that ``read`` can read.

        ``read`` raises :class:`~powerzoo.fileio.CorruptFileError` on a damaged file (the readers
        of this module do); that checkpoint is named in a warning and the next newest is tried.
        A missing file counts as damage. ``None`` if there is no checkpoint; the newest one's
        error if every one is damaged.
        """
        if self.latest() is None:
            return None
        folders = list(reversed(self.complete()))
        first_error: Exception | None = None
        for i, folder in enumerate(folders):
            try:
                return folder, read(folder)
            except (CorruptFileError, FileNotFoundError) as err:  # damaged, or a file missing
                first_error = first_error or err
                then = f"; falling back to {folders[i + 1].name}" if i + 1 < len(folders) else ""
                warnings.warn(f"skipping checkpoint {folder.name}: {err}{then}", stacklevel=2)
        raise first_error

    @staticmethod
    def _read_pointer(path: Path, steps: set[int | None]) -> str:
        name = path.read_text(encoding="utf-8").strip()
        match = _STEP.match(name)
        if not name.startswith("step_") or match is None or int(match.group(1)) not in steps:
            raise ValueError(f"names {name[:40]!r}, which is not a checkpoint folder")
        return name

    def _prune(self) -> None:
        for old in self.complete()[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        for partial in self.root.glob(".partial-*"):
            if _abandoned(partial):
                shutil.rmtree(partial, ignore_errors=True)
        for aside in self.root.glob(".old-step_*"):
            if (self.root / aside.name[len(".old-") :].rsplit("-", 1)[0]).is_dir():
                shutil.rmtree(aside, ignore_errors=True)
