"""Read a case from its on-disk cache, or build it and write the cache (shared by every case
loader)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

__all__ = ["read_or_build", "write_npz_cache"]

T = TypeVar("T")


def read_or_build(
    path: Path | None,
    read: Callable[[Path], T],
    build: Callable[[], T],
    write: Callable[[Path, T], None],
    source: str,
) -> T:
    """``read(path)`` if the cache file is there and valid, else ``build()`` and
    ``write(path, value)``.

    An unreadable or inconsistent cache file is rebuilt with a ``RuntimeWarning`` naming it and
    ``source`` (where the data come from); ``path=None`` (no cache folder) always builds.
    """
    if path is not None and path.exists():
        try:
            return read(path)
        except Exception as err:  # noqa: BLE001 - any unreadable / inconsistent file is rebuilt
            warnings.warn(
                f"powerzoo: case cache {str(path)!r} is unreadable ({type(err).__name__}: {err}); "
                f"rebuilding it from {source}",
                RuntimeWarning,
                stacklevel=4,
            )
    value = build()
    if path is not None:
        write(path, value)
    return value


def write_npz_cache(path: Path, arrays: dict[str, np.ndarray], what: str) -> None:
    """Save ``arrays`` to the cache file ``path`` atomically; a failure only warns (``what``: the
    kind of cache, for the message), since the cache only speeds loading up."""
    from powerzoo.fileio import atomic_save

    try:
        atomic_save(path, lambda tmp: np.savez(tmp, **arrays))
    except OSError as err:
        warnings.warn(
            f"powerzoo: cannot write the {what} cache {str(path)!r} ({err}); "
            "set POWERZOO_CACHE_DIR to a writable directory to speed up case loading",
            RuntimeWarning,
            stacklevel=4,
        )
