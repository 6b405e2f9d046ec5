"""Atomic file writes: write to a temporary file in the target folder, then rename it into place.

A reader (or a crash) never sees a half-written file: it finds the old file or the new one.
Files get ordinary permissions (``0o666`` minus the umask), not ``tempfile``'s private ``0o600``.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

__all__ = [
    "atomic_save",
    "atomic_write_text",
    "write_json",
    "read_json",
    "CorruptFileError",
    "read_or_corrupt",
]

T = TypeVar("T")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_save(
    path: str | Path, write: Callable[[Path], Any], *, tmp_suffix: str | None = None
) -> Path:
    """Call ``write(tmp_path)`` then rename the temporary file onto ``path``; returns ``path``.

    ``tmp_path`` (``.<stem>-XXXX<suffix>`` in ``path``'s folder) keeps ``path``'s suffix unless
    ``tmp_suffix`` is given: some writers, such as SB3's ``save``, append ``.zip`` to names
    without it, while a long write (an HDF5 dataset) is best marked ``.tmp`` while it runs. The
    temporary file is removed if ``write`` fails or is interrupted.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix if tmp_suffix is None else tmp_suffix
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_save(path, lambda p: p.write_text(text, encoding="utf-8"))


def write_json(path: str | Path, data: Any, indent: int = 2) -> Path:
    """Write ``data`` as JSON (numpy scalars as floats), atomically."""
    return atomic_write_text(path, json.dumps(data, indent=indent, default=float) + "\n")


def read_json(path: str | Path) -> Any:
    """Read a JSON file."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


class CorruptFileError(ValueError):
    """A file exists but cannot be decoded: truncated, overwritten with junk, or the wrong format.

    The message is one line, ``"<path>: corrupt or unreadable (<reason>)"``; ``path`` and
    ``reason`` are kept as attributes.
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: corrupt or unreadable ({reason})")


def read_or_corrupt(path: str | Path, reader: Callable[[Path], T]) -> T:
    """Return ``reader(path)``; a decoding or parsing error becomes :class:`CorruptFileError`.

    A missing file is no corruption: :class:`FileNotFoundError` propagates unchanged.
    """
    path = Path(path)
    try:
        return reader(path)
    except FileNotFoundError:
        raise
    except (
        OSError,
        ValueError,
        EOFError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        json.JSONDecodeError,
        UnicodeDecodeError,
        yaml.YAMLError,
    ) as exc:
        if isinstance(exc, CorruptFileError):
            raise
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise CorruptFileError(path, reason) from exc
