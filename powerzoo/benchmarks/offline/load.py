"""Reading a dataset: :class:`DatasetLoader` checks an HDF5 file against the schema and serves it.

Whole arrays, single episodes (read from disk) and shuffled minibatches; clear errors name the
path and the problem for missing, truncated, corrupt, foreign or inconsistent files, and for
non-finite values (NaN, inf) in the data read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.offline.schema import (
    EPISODE_KEYS,
    FORMAT_NAME,
    SCHEMA_VERSION,
    TRANSITION_KEYS,
    require_h5py,
)
from powerzoo.fileio import CorruptFileError, read_or_corrupt

__all__ = ["DatasetLoader", "plain_attr"]


def plain_attr(value: Any) -> Any:
    """HDF5 attribute value as a plain Python value (lists of str, ints, floats, bools)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OSU":
            return [plain_attr(v) for v in value.tolist()]
        return value
    if isinstance(value, np.generic):
        return value.item()
    return value


class _WholeArray:
    """A :class:`DatasetLoader` attribute holding the whole dataset of the same name, read on
    first access and kept (as ``functools.cached_property`` does)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, loader: DatasetLoader | None, owner: type | None = None) -> Any:
        if loader is None:
            return self
        value = loader.__dict__[self.name] = loader._read(self.name)
        return value


class DatasetLoader:
    """Read a PowerZoo offline dataset (layout in :mod:`powerzoo.benchmarks.offline.schema`) after
    checking it.

    Whole arrays are properties (``observations``, ``next_observations``, ``actions``, ``rewards``,
    ``terminals``, ``truncations``, ``infos``, ``episode_starts`` / ``episode_lengths`` /
    ``episode_returns``), read on first access and kept. :meth:`episode` reads one episode from
    disk; :meth:`iter_minibatches` serves shuffled minibatches. Use as a context manager, or call
    :meth:`close`, to release the file.

    Raises ``FileNotFoundError`` if ``path`` does not exist,
    :class:`~powerzoo.fileio.CorruptFileError` (``"<path>: corrupt or unreadable (<reason>)"``)
    if it is not a readable HDF5 file (truncated, corrupt) or a dataset's compressed data cannot
    be decoded (when it is read), and ``ValueError`` naming the path and the problem if it is not
    a PowerZoo dataset or has missing or inconsistent datasets.

    With ``check_finite`` (the default) every floating-point array read (whole arrays, episodes,
    minibatches) is checked: a NaN or infinity raises ``ValueError`` naming the file, the dataset
    and the first row holding one; ``check_finite=False`` serves the values as stored.

    Args:
        path: The HDF5 dataset file.
        check_finite: Refuse NaN and infinite values in the arrays read.
    """

    def __init__(self, path: str | os.PathLike[str], check_finite: bool = True) -> None:
        h5py = require_h5py()
        self.path = Path(path)
        self.check_finite = bool(check_finite)
        if not self.path.is_file():
            raise FileNotFoundError(f"offline dataset {self.path} not found")
        try:
            self._file = read_or_corrupt(self.path, lambda p: h5py.File(p, "r"))
        except CorruptFileError as err:
            raise CorruptFileError(
                self.path, f"not a readable HDF5 file: {err.reason}"
            ) from err.__cause__
        try:
            self._check_schema()
        except BaseException:
            self._file.close()
            raise

    # ---- schema check ------------------------------------------------------------------------
    def _fail(self, problem: str) -> ValueError:
        return ValueError(f"{self.path}: {problem}")

    def _check_schema(self) -> None:
        f, attrs = self._file, self._file.attrs
        found = plain_attr(attrs.get("format"))
        if found != FORMAT_NAME:
            raise self._fail(
                f"an HDF5 file but not a PowerZoo offline dataset (attribute format={found!r}, "
                f"expected {FORMAT_NAME!r}); top-level entries: {sorted(f.keys())}"
            )
        version = int(attrs.get("schema_version", -1))
        if version > SCHEMA_VERSION:
            raise self._fail(
                f"schema version {version} is newer than this PowerZoo reads ({SCHEMA_VERSION}); "
                "upgrade powerzoo"
            )
        missing = [k for k in TRANSITION_KEYS + EPISODE_KEYS if k not in f]
        missing += [f"attribute {k}" for k in ("n_steps", "n_episodes") if k not in attrs]
        if missing:
            raise self._fail(
                f"missing {', '.join(missing)} (schema version {SCHEMA_VERSION} needs "
                f"{', '.join(TRANSITION_KEYS + EPISODE_KEYS)} and attributes n_steps, n_episodes)"
            )
        n_steps, n_episodes = int(attrs["n_steps"]), int(attrs["n_episodes"])
        expected = dict.fromkeys(
            (*TRANSITION_KEYS, *(f"infos/{k}" for k in self.info_keys)), n_steps
        )
        expected.update(dict.fromkeys(EPISODE_KEYS, n_episodes))
        for name, rows in expected.items():
            found_rows = f[name].shape[0] if f[name].shape else 0
            if found_rows != rows:
                which = "n_episodes" if name in EPISODE_KEYS else "n_steps"
                raise self._fail(
                    f"{name} has {found_rows} rows, expected {rows} ({which}); "
                    "the file is inconsistent"
                )
            if rows:  # decompress the last chunk: catches damaged data early
                self._data(name, slice(rows - 1, rows), check_finite=False)
        lengths = self.episode_lengths
        if int(lengths.sum()) != n_steps or not np.array_equal(
            self.episode_starts, np.cumsum(lengths) - lengths
        ):
            raise self._fail(
                "episode_starts / episode_lengths do not tile the transitions; "
                "the file is inconsistent"
            )

    # ---- metadata ----------------------------------------------------------------------------
    @cached_property
    def attrs(self) -> dict[str, Any]:
        """Root attributes (task, split, policy, seed,
        n_episodes, n_steps, mean/std return, ...)."""
        return {k: plain_attr(v) for k, v in self._file.attrs.items()}

    @property
    def n_steps(self) -> int:
        """Number of transitions."""
        return int(self._file.attrs["n_steps"])

    @property
    def n_episodes(self) -> int:
        """Number of episodes."""
        return int(self._file.attrs["n_episodes"])

    @property
    def agents(self) -> list[str] | None:
        """Agent names (order of the agent axis), ``None`` for single-agent datasets."""
        return self.attrs.get("agents")

    @property
    def info_keys(self) -> list[str]:
        """Info keys stored under ``infos/``."""
        return sorted(self._file["infos"].keys()) if "infos" in self._file else []

    def __len__(self) -> int:
        return self.n_steps

    def __repr__(self) -> str:
        a = self.attrs
        return (
            f"DatasetLoader({str(self.path)!r}: task={a.get('task')!r}, split={a.get('split')!r}, "
            f"policy={a.get('policy')!r}, {self.n_episodes} episodes, {self.n_steps} steps)"
        )

    # ---- whole arrays ------------------------------------------------------------------------
    def _read(self, name: str) -> np.ndarray:
        return self._data(name, slice(None))

    def _data(self, name: str, rows: slice, check_finite: bool | None = None) -> np.ndarray:
        """Rows ``rows`` of dataset ``name``: :class:`~powerzoo.fileio.CorruptFileError` if
        they cannot be decoded, ``ValueError`` on a non-finite value when checked."""
        try:
            values = read_or_corrupt(self.path, lambda _: self._file[name][rows])
        except CorruptFileError as err:
            raise CorruptFileError(
                self.path, f"dataset {name!r} cannot be decoded: {err.reason}"
            ) from err.__cause__
        if self.check_finite if check_finite is None else check_finite:
            self._require_finite(name, values, rows.start or 0)
        return values

    def _require_finite(self, name: str, values: np.ndarray, first_row: int) -> None:
        if values.dtype.kind not in "fc":
            return
        bad = ~np.isfinite(values)
        if bad.any():
            row = first_row + int(np.argwhere(bad)[0][0])
            raise self._fail(
                f"dataset {name!r} holds {int(bad.sum())} non-finite value(s) (NaN or inf), the "
                f"first in row {row}; the data is damaged or came from a diverged run; "
                "recollect it, or load it as stored with DatasetLoader(path, check_finite=False)"
            )

    observations = _WholeArray()
    next_observations = _WholeArray()
    actions = _WholeArray()
    rewards = _WholeArray()
    terminals = _WholeArray()
    truncations = _WholeArray()
    episode_starts = _WholeArray()
    episode_lengths = _WholeArray()
    episode_returns = _WholeArray()

    @cached_property
    def infos(self) -> dict[str, np.ndarray]:
        return {k: self._read(f"infos/{k}") for k in self.info_keys}

    # ---- episodes and minibatches ------------------------------------------------------------
    def episode(self, index: int) -> dict[str, Any]:
        """Episode ``index`` (negative counts from the end): the transition arrays and ``infos``.

        Args:
            index: Episode number (negative counts from the end).

        Returns:
            Array name to array [length, ...], plus ``infos``.
        """
        if not -self.n_episodes <= index < self.n_episodes:
            raise IndexError(
                f"episode {index} out of range; the dataset has {self.n_episodes} episodes"
            )
        start = int(self.episode_starts[index])
        rows = slice(start, start + int(self.episode_lengths[index]))
        out: dict[str, Any] = {k: self._data(k, rows) for k in TRANSITION_KEYS}
        out["infos"] = {k: self._data(f"infos/{k}", rows) for k in self.info_keys}
        return out

    def iter_minibatches(
        self, batch_size: int, seed: int | None = 0, shuffle: bool = True, drop_last: bool = False
    ) -> Iterator[dict[str, Any]]:
        """One pass over the transitions in minibatches of ``batch_size`` (shuffled by ``seed``).

        Each batch is a dict of the transition arrays plus ``infos``; the whole dataset is read
        into memory on the first call.

        Args:
            batch_size: Transitions per batch.
            seed: Seed of the shuffle.
            shuffle: Shuffle the transitions (else in file order).
            drop_last: Drop a last batch smaller than ``batch_size``.

        Yields:
            Array name to array [batch_size, ...], plus ``infos``.
        """
        if (
            isinstance(batch_size, bool)
            or not isinstance(batch_size, (int, np.integer))
            or batch_size < 1
        ):
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        arrays = {k: getattr(self, k) for k in TRANSITION_KEYS}
        infos = self.infos
        order = (
            np.random.default_rng(seed).permutation(self.n_steps)
            if shuffle
            else np.arange(self.n_steps)
        )
        for first in range(0, self.n_steps, batch_size):
            idx = order[first : first + batch_size]
            if drop_last and idx.size < batch_size:
                return
            batch: dict[str, Any] = {k: a[idx] for k, a in arrays.items()}
            batch["infos"] = {k: a[idx] for k, a in infos.items()}
            yield batch

    # ---- export ------------------------------------------------------------------------------
    def to_minari(self, dataset_id: str, **kwargs: Any) -> Any:
        """Export to a local Minari dataset (single-agent only); needs the optional ``minari``
        package.

        See :func:`powerzoo.benchmarks.offline.minari_export.to_minari`.

        Args:
            dataset_id: Minari dataset id (``namespace/name-v0``).
            **kwargs: Passed to ``minari.create_dataset_from_buffers`` (``author``, ...).

        Returns:
            The Minari dataset.
        """
        from powerzoo.benchmarks.offline.minari_export import to_minari

        return to_minari(self, dataset_id, **kwargs)

    # ---- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close the HDF5 file (arrays already read stay usable)."""
        self._file.close()

    def __enter__(self) -> DatasetLoader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
