"""Reading run-folder files without running code, and the pickles of older run folders.

Unpickling a file runs whatever code it names, so by default nothing of a run folder is
unpickled: statistics, RNG and collector states and replay buffers are ``.npz`` arrays
(:func:`write_arrays`, :func:`read_arrays`: ``allow_pickle=False``, a pickle in their place is
named as corrupt), torch files are read with ``torch.load(weights_only=True)``
(:func:`read_torch`, :func:`read_weights_only`). Older PowerZoo versions wrote pickles instead
(:data:`PICKLE_FORMAT`, and NumPy objects in ``learner.pt``): they are read only with
``trust_pickle=True`` (``--trust-pickle`` on the command line), else :class:`PickleRefusedError`
names the file and the flag (:func:`read_pickle`, :func:`read_versioned`).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from powerzoo.fileio import CorruptFileError, atomic_save, read_or_corrupt
from powerzoo.rl.run_dir import REPLAY_FILE, RNG_FILE, VECNORM_FILE

__all__ = [
    "PICKLE_FORMAT",
    "PickleRefusedError",
    "read_pickle",
    "read_versioned",
    "read_arrays",
    "write_arrays",
    "read_weights_only",
    "read_torch",
]

T = TypeVar("T")

PICKLE_FORMAT = {
    VECNORM_FILE: "vecnormalize.pkl",
    REPLAY_FILE: "replay_buffer.pkl",
    RNG_FILE: "rng.pkl",
    "collector.npz": "collector.pkl",
}
"""The file an older PowerZoo wrote, in the pickle format, in place of each array file."""


class PickleRefusedError(ValueError):
    """A run-folder file that only unpickling could read, refused because ``trust_pickle`` is off.

    The message is one line naming the file and ``--trust-pickle``; ``path`` is kept.
    """

    def __init__(self, path: str | Path, what: str) -> None:
        self.path = Path(path)
        super().__init__(
            f"{path}: {what}; unpickling it can run code, so it is not read by default. If the "
            "run folder comes from a trusted source, pass --trust-pickle (Python: "
            "trust_pickle=True)"
        )


def _loads_pickle(path: Path) -> Any:
    return pickle.loads(path.read_bytes())


def read_pickle(path: str | Path, trust_pickle: bool = False) -> Any:
    """Unpickle ``path`` (a file of an older run folder); only with ``trust_pickle=True``.

    Args:
        path: The pickle file.
        trust_pickle: Unpickle it (runs whatever code it holds): for trusted run folders only.

    Returns:
        The unpickled object.

    Raises:
        PickleRefusedError: ``trust_pickle`` is off (the file is never opened).
        CorruptFileError: The file is damaged.
    """
    if not trust_pickle:
        raise PickleRefusedError(path, "written in the pickle format of an older PowerZoo")
    return read_or_corrupt(path, _loads_pickle)


def read_versioned(
    path: str | Path,
    read: Callable[[Path], T],
    read_old: Callable[[Any], T] | None = None,
    trust_pickle: bool = False,
) -> T:
    """Read an array file of a run folder, or the pickle an older PowerZoo wrote in its place.

    ``read(path)`` if ``path`` exists; else, if :data:`PICKLE_FORMAT` names an older file for
    it (``best_`` prefixes kept) and that file exists, ``read_old(object unpickled from it)``
    with ``trust_pickle=True`` (:class:`PickleRefusedError` without); else
    ``FileNotFoundError`` naming ``path``.

    Args:
        path: The file (``vecnormalize.npz``, ``rng.npz``, ...).
        read: Reads the current format.
        read_old: Turns the unpickled object into what ``read`` returns (default: as is).
        trust_pickle: Read the older pickle too.

    Returns:
        What ``read`` (or ``read_old``) returns.
    """
    path = Path(path)
    old_path = _pickle_twin(path)
    if not path.is_file() and old_path is not None and old_path.is_file():
        obj = read_pickle(old_path, trust_pickle)
        return obj if read_old is None else read_or_corrupt(old_path, lambda p: read_old(obj))
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    return read(path)


def _pickle_twin(path: Path) -> Path | None:
    """The older pickle file of array file ``path`` (``best_vecnormalize.npz`` ->
    ``best_vecnormalize.pkl``), or ``None``."""
    for name, old in PICKLE_FORMAT.items():
        if path.name.endswith(name):
            return path.with_name(path.name[: -len(name)] + old)
    return None


_PICKLE_MAGIC = b"\x80"  # protocol 2 and later


def _load_arrays(path: Path) -> dict[str, np.ndarray]:
    with open(path, "rb") as handle:
        if handle.read(1) == _PICKLE_MAGIC:
            raise ValueError("a pickle, not arrays: never unpickled from this file")
    with np.load(path, allow_pickle=False) as data:
        if not hasattr(data, "files"):
            raise ValueError("one array, not an .npz archive")
        return {key: data[key] for key in data.files}


def read_arrays(path: str | Path, keys: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` file ``path`` (which must hold ``keys``), read without
    unpickling anything.

    Args:
        path: The ``.npz`` file.
        keys: Arrays it must hold.

    Returns:
        ``{name: array}``.

    Raises:
        CorruptFileError: The file is damaged, is not an ``.npz`` archive (a pickle, say), holds
            object arrays, or lacks one of ``keys``.
    """

    def read(p: Path) -> dict[str, np.ndarray]:
        arrays = _load_arrays(p)
        missing = [k for k in keys if k not in arrays]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}: not the expected kind of file")
        return arrays

    return read_or_corrupt(path, read)


def write_arrays(path: str | Path, arrays: Mapping[str, Any]) -> Path:
    """Write ``arrays`` (numbers, strings, numeric arrays: no objects) to the ``.npz`` file
    ``path`` atomically.

    Args:
        path: The file to write.
        arrays: ``{name: array-like}``.

    Returns:
        The path written.
    """
    plain = {key: np.asarray(value) for key, value in arrays.items()}
    objects = [key for key, value in plain.items() if value.dtype.hasobject]
    if objects:
        raise TypeError(f"{path}: {', '.join(objects)} would need pickling")

    def write(target: Path) -> None:
        with open(target, "wb") as handle:
            np.savez(handle, **plain)

    return atomic_save(path, write)


def read_weights_only(path: str | Path, reader: Callable[[Path], T], what: str) -> T:
    """``read_or_corrupt(path, reader)`` where ``reader`` loads torch files with
    ``weights_only=True``: a file that holds more than tensors raises :class:`PickleRefusedError`
    (``what`` says what it holds), a damaged one :class:`~powerzoo.fileio.CorruptFileError`.

    Args:
        path: The file read.
        reader: Reads it (``torch.load(..., weights_only=True)`` inside).
        what: What the refused file holds, for the message.

    Returns:
        What ``reader`` returns.
    """
    try:
        return read_or_corrupt(path, reader)
    except CorruptFileError as err:
        cause = err.__cause__
        if isinstance(cause, pickle.UnpicklingError) and "Weights only" in str(cause):
            raise PickleRefusedError(path, what) from None
        raise


def read_torch(path: str | Path, trust_pickle: bool = False) -> Any:
    """``torch.load`` a learner state; :class:`~powerzoo.fileio.CorruptFileError` if damaged.

    Reads tensors and plain containers only (``weights_only=True``); a file holding other
    objects (an older PowerZoo's numpy arrays, or anything crafted) raises
    :class:`PickleRefusedError`, unless ``trust_pickle=True`` (a full unpickling: trusted run
    folders only).

    Args:
        path: The torch file.
        trust_pickle: Unpickle whatever the file holds.

    Returns:
        The loaded object.
    """
    import torch

    def load(p: Path) -> Any:
        return torch.load(p, map_location="cpu", weights_only=not trust_pickle)

    if trust_pickle:
        return read_or_corrupt(path, load)
    return read_weights_only(
        path, load, "holds pickled Python objects besides tensors (an older PowerZoo's format?)"
    )
