"""Writing a dataset file: blocks of whole episodes appended to HDF5, the file put in place
atomically.

:class:`HDF5Appender` appends episode-major blocks to chunked, gzip-compressed, resizable datasets
(layout in :mod:`powerzoo.benchmarks.offline.schema`), so memory does not grow with the number of
episodes. :func:`write_hdf5_atomically` writes the file under a temporary name in the target folder
(``.<stem>-XXXX.tmp``, by :func:`powerzoo.fileio.atomic_save`) and renames it into place only when
complete; an exception or ``KeyboardInterrupt`` removes the temporary file, so the target never
holds a partial dataset.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.offline.schema import require_h5py, storage_array
from powerzoo.fileio import atomic_save

__all__ = ["HDF5Appender", "write_hdf5_atomically"]

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

    def _append(self, name: str, block: np.ndarray) -> None:
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


def _fsync(path: Path) -> None:
    """Force ``path``'s bytes to disk before it is renamed into place."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_hdf5_atomically(path: str | os.PathLike[str], fill: Callable[[Any], Any]) -> Path:
    """Create the HDF5 file ``path`` with ``fill(h5file)``, atomically; returns ``path``.

    The file is written under a temporary name, closed, synced to disk and renamed into place; if
    ``fill`` raises (``KeyboardInterrupt`` included) the temporary file is removed and ``path`` is
    left as it was. Missing parent folders are created.
    """
    h5py = require_h5py()

    def write(tmp: Path) -> None:
        with h5py.File(tmp, "w", rdcc_nbytes=CHUNK_CACHE_BYTES) as h5file:
            fill(h5file)
        _fsync(tmp)

    return atomic_save(path, write, tmp_suffix=".tmp")
