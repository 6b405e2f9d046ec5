"""Writing a dataset file: blocks of whole episodes appended to HDF5, the file put in place
atomically.

:class:`HDF5Appender` appends episode-major blocks to chunked, gzip-compressed, resizable datasets
(layout in :mod:`powerzoo.benchmarks.offline.schema`), so memory does not grow with the number of
episodes. :func:`write_hdf5_atomically` writes the file under a temporary name in the target folder
(``.<stem>-XXXX.<host>.<pid>.tmp``, by :func:`powerzoo.fileio.atomic_save`) and renames it into
place only when complete; an exception, ``KeyboardInterrupt`` or ``SIGTERM`` removes the temporary
file, so the target never holds a partial dataset. A process killed outright (``SIGKILL``, power
loss) cannot clean up: the next write to the same path removes the temporary files of writers on
this host whose process is gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.offline.schema import require_h5py, storage_array
from powerzoo.fileio import DiskFullError, atomic_save, disk_full_cause

__all__ = ["HDF5Appender", "write_hdf5_atomically", "remove_stale_temporary_files"]

CHUNK_BYTES = 128 * 1024  # target size of one HDF5 chunk before compression, bytes
CHUNK_CACHE_BYTES = 4 * 1024**2  # HDF5 raw-data chunk cache of the open file, bytes


class HDF5Appender:
    """Appends blocks of whole episodes to chunked, gzip-compressed, resizable datasets.

    ``n_steps`` / ``n_episodes`` count what was written so far.
    """

    def __init__(self, h5file: Any, compression_level: int) -> None:
        self.file = h5file
        self.compression_level = compression_level
        self.n_steps = 0
        self.n_episodes = 0
        # kept open: HDF5 writes a dataset's cached chunks when it is closed, where a failed
        # write (disk full) could only be ignored; open, they are written by the file's flush
        self._datasets: dict[str, Any] = {}

    def _append(self, name: str, block: np.ndarray) -> None:
        dataset = self._datasets.get(name)
        if dataset is None:
            dataset = self.file.get(name)
        row_shape = block.shape[1:]
        if dataset is None:
            row_bytes = max(1, block.dtype.itemsize * int(np.prod(row_shape, dtype=np.int64)))
            chunk_rows = int(np.clip(CHUNK_BYTES // row_bytes, 1, 65536))
            dataset = self.file.create_dataset(
                name,
                shape=(0, *row_shape),
                maxshape=(None, *row_shape),
                dtype=block.dtype,
                chunks=(chunk_rows, *row_shape),
                compression="gzip",
                compression_opts=self.compression_level,
                shuffle=True,
            )
        elif dataset.shape[1:] != row_shape:
            raise ValueError(
                f"{name}: rows changed shape from {dataset.shape[1:]} "
                f"to {row_shape} during collection"
            )
        self._datasets[name] = dataset
        n = dataset.shape[0]
        dataset.resize(n + block.shape[0], axis=0)
        dataset[n:] = block

    def write_episodes(self, columns: dict[str, np.ndarray], lengths: np.ndarray) -> int:
        """Append a block of whole episodes (episode-major columns);
        returns the number of episodes."""
        starts_in_block = np.cumsum(lengths) - lengths
        returns = np.add.reduceat(
            np.asarray(columns["rewards"], dtype=np.float64), starts_in_block, axis=0
        )
        for name, values in columns.items():
            self._append(name, storage_array(name, values))
        self._append("episode_starts", (self.n_steps + starts_in_block).astype(np.int64))
        self._append("episode_lengths", lengths.astype(np.int64))
        self._append("episode_returns", returns)
        self.n_steps += int(lengths.sum())
        self.n_episodes += int(lengths.size)
        self.file.flush()
        return int(lengths.size)


def _discard_writes(h5file: Any) -> None:
    """Point the open HDF5 file's descriptor at ``/dev/null``: the file is abandoned, and closing
    it (which writes what HDF5 still caches) must not fail again, since HDF5 cannot recover from a
    failed close (it crashes the process when it exits)."""
    try:
        handle = h5file.id.get_vfd_handle()
    except Exception:  # noqa: BLE001 - not the POSIX driver: nothing to redirect
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        os.dup2(null, handle)
    finally:
        os.close(null)


def _fsync(path: Path) -> None:
    """Force ``path``'s bytes to disk before it is renamed into place."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _host() -> str:
    """This machine's name, reduced to characters safe in a file name."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


def remove_stale_temporary_files(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files that writers of ``path`` killed on this host left behind.

    A temporary file ``.<stem>-XXXX.<host>.<pid>.tmp`` is stale when ``<host>`` is this machine
    and no process ``<pid>`` runs; files of live writers and of other hosts are kept. Returns the
    files removed.
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    pattern = re.compile(
        re.escape(f".{path.stem}-") + r".+\." + re.escape(_host()) + r"\.(\d+)\.tmp"
    )
    removed = []
    for candidate in path.parent.iterdir():
        match = pattern.fullmatch(candidate.name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            with contextlib.suppress(FileNotFoundError):
                candidate.unlink()
                removed.append(candidate)
    return removed


@contextlib.contextmanager
def _sigterm_removes(written: list[Path]) -> Iterator[None]:
    """Inside the block, ``SIGTERM`` first removes the temporary file ``written[0]`` (once
    known), then ends the process as the signal's default action would. Only in the main thread
    and where that default action is in place (a handler of the caller's is left alone).

    The file is removed in the handler itself: an exception raised there can land in a callback
    whose exceptions Python ignores (a weakref finaliser), and the process would run on.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        for tmp in written:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def write_hdf5_atomically(path: str | os.PathLike[str], fill: Callable[[Any], Any]) -> Path:
    """Create the HDF5 file ``path`` with ``fill(h5file)``, atomically; returns ``path``.

    The file is written under a temporary name, closed, synced to disk and renamed into place; if
    ``fill`` raises (``KeyboardInterrupt`` included) or the process gets ``SIGTERM``, the
    temporary file is removed and ``path`` is left as it was. A write refused for space (disk
    full, ``ulimit -f``, quota) becomes one :class:`~powerzoo.fileio.DiskFullError` naming
    ``path``. Temporary files of earlier writers
    of ``path`` that were killed are removed first (:func:`remove_stale_temporary_files`).
    Missing parent folders are created.
    """
    h5py = require_h5py()

    written: list[Path] = []

    def write(tmp: Path) -> None:
        written.append(tmp)
        h5file = h5py.File(tmp, "w", rdcc_nbytes=CHUNK_CACHE_BYTES)
        try:
            fill(h5file)
            h5file.flush()  # a write refused for space fails here, not in close()
        except BaseException as err:
            if disk_full_cause(err) is None:
                h5file.close()
                raise
            _discard_writes(h5file)
            with contextlib.suppress(Exception):  # the full disk is the error to report
                h5file.close()
            raise
        h5file.close()
        _fsync(tmp)

    remove_stale_temporary_files(path)
    try:
        with _sigterm_removes(written):
            return atomic_save(path, write, tmp_suffix=f".{_host()}.{os.getpid()}.tmp")
    except Exception as err:
        full = disk_full_cause(err)
        if full is None:
            raise
        raise DiskFullError(
            path, full, f"the partial dataset was removed and {path} left as it was"
        ) from err
