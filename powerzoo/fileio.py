"""Atomic file writes: write to a temporary file in the target folder, then rename it into place.

A reader (or a crash) never sees a half-written file: it finds the old file or the new one.
Files get ordinary permissions (``0o666`` minus the umask), not ``tempfile``'s private ``0o600``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pickle
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml

try:
    import fcntl
except ImportError:  # not on POSIX: exclusive_lock holds nothing
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "atomic_save",
    "atomic_write_text",
    "write_json",
    "read_json",
    "CorruptFileError",
    "read_or_corrupt",
    "DiskFullError",
    "disk_full_cause",
    "PLAIN_NAME_RULE",
    "check_plain_name",
    "exclusive_lock",
    "OutputPathError",
    "check_output_folder",
    "check_output_file",
    "os_error_line",
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
        RuntimeError,  # torch's zip reader on a truncated file
        KeyError,  # a readable file that lacks an expected entry
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


@contextlib.contextmanager
def exclusive_lock(
    path: str | Path, busy: Callable[[str], Exception], holder: str | None = None
) -> Iterator[Path]:
    """Hold an exclusive ``flock`` on the file ``path`` (created if missing) for the ``with`` block.

    Writes ``holder`` (default: this process id) into the file. If another process holds the
    lock (or another ``with`` block of this process), raises ``busy(recorded)``, where
    ``recorded`` is what the holder wrote (``"unknown"`` if nothing). The operating system
    releases the lock when the block ends or its holder dies, killed or not. The file stays in
    place: deleting it would let two processes lock two different files. Yields ``path``; holds
    nothing where ``fcntl`` is missing (not POSIX).

    Args:
        path: The lock file.
        busy: Builds the exception raised when the lock is held elsewhere.
        holder: Text recorded in the file for the next comer (default: this process id).

    Yields:
        The lock file's path.
    """
    path = Path(path)
    if fcntl is None:
        yield path
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            recorded = os.pread(fd, 256, 0).decode("utf-8", "replace").strip() or "unknown"
            raise busy(" ".join(recorded.split())) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid() if holder is None else holder}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
"""``errno`` of a write refused for space: no space left, file too large (``ulimit -f``), quota."""


def disk_full_cause(exc: BaseException) -> OSError | None:
    """The :class:`OSError` of :data:`DISK_FULL_ERRNOS` that ``exc`` is or was raised from
    (its ``__cause__`` / ``__context__`` chain), or ``None``. HDF5's errors (h5py's
    ``RuntimeError``) carry the ``errno = <n>`` of the failed write in their message."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in DISK_FULL_ERRNOS:
            return current
        found = re.search(r"\berrno = (\d+)", str(current))
        if found and int(found.group(1)) in DISK_FULL_ERRNOS:
            code = int(found.group(1))
            return OSError(code, os.strerror(code))
        current = current.__cause__ or current.__context__
    return None


class DiskFullError(OSError):
    """Writing ``path`` failed for want of space (:func:`disk_full_cause`); the message is one
    line, ``"cannot write <path>: <reason> (errno <n>); <done>"`` (``done``: what was cleaned
    up, what to do)."""

    def __init__(self, path: str | Path, cause: OSError, done: str) -> None:
        self.path = Path(path)
        reason = os.strerror(cause.errno) if cause.errno else str(cause)
        super().__init__(
            cause.errno, f"cannot write {path}: {reason} (errno {cause.errno}); {done}"
        )

    def __str__(self) -> str:
        return str(self.strerror)


_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MAX_CHARS = 200  # below the 255-byte file-name limit of common filesystems
PLAIN_NAME_RULE = (
    "one plain folder name: letters, digits, '.', '_', '-', starting with a letter or digit, "
    f"at most {_MAX_CHARS} characters (no '/', '..', absolute path, space or newline)"
)


def check_plain_name(value: Any, field: str) -> str:
    """``value`` if it is one plain path component (letters, digits, ``.``, ``_``, ``-``,
    starting with a letter or digit: no ``..``, separator, absolute path, hidden name, space or
    control character), else ``ValueError`` naming ``field``, the value and what is allowed.

    A name that passes lands inside the folder meant for it (:mod:`powerzoo.rl.names`)."""
    if not isinstance(value, str) or not _PLAIN.fullmatch(value) or len(value) > _MAX_CHARS:
        raise ValueError(f"{field} {value!r} is not allowed; use {PLAIN_NAME_RULE}")
    return value


class OutputPathError(ValueError):
    """An output folder or file that cannot be written; the message is one line naming it, why,
    and what to do (the command line prints it as ``powerzoo: error: ...``)."""


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (``.`` for a relative path none of whose
    parts exist)."""
    current = path
    while not current.exists() and not current.is_symlink():
        parent = current.parent
        if parent == current:
            break
        current = parent
    return current


def check_output_folder(path: str | Path, what: str = "output folder") -> Path:
    """``path`` if PowerZoo can create files in it (it need not exist yet), else
    :class:`OutputPathError` in one line: ``path`` (or one of its parents) is a file, or the
    nearest existing folder is not writable (permissions, read-only filesystem).

    Nothing is created. ``what`` names the path in the message (``"--output-dir"``).
    """
    path = Path(path)
    existing = _nearest_existing(path)
    if existing.exists() and not existing.is_dir():
        where = "is a file" if existing == path else f"is inside {existing}, which is a file"
        raise OutputPathError(f"{what} {path} {where}, not a folder; give a folder path")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == path else f" (its nearest existing folder {existing} is not)"
        raise OutputPathError(
            f"{what} {path} is not writable{where}; give a folder you can write to"
        )
    return path


def check_output_file(path: str | Path, what: str = "output file") -> Path:
    """``path`` if PowerZoo can write it (atomically, through a temporary file in its folder),
    else :class:`OutputPathError` in one line: ``path`` is a folder, its folder is a file or is
    not writable. Nothing is created."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"{what} {path} is a folder; give a file path (e.g. {path}/data.h5)")
    existing = _nearest_existing(path.parent)
    if existing.exists() and not existing.is_dir():
        raise OutputPathError(
            f"{what} {path} is inside {existing}, which is a file, not a folder; give another path"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(
            f"{what} {path} cannot be written: the folder {existing} is not writable; "
            "give a path in a folder you can write to"
        )
    return path


def os_error_line(err: OSError) -> str:
    """One line for an :class:`OSError` of a file operation: ``cannot write <file>: <reason>``
    (its ``strerror`` and file names), without the ``[Errno n]`` prefix."""
    reason = err.strerror or str(err)
    names = [str(n) for n in (err.filename, err.filename2) if n is not None]
    if not names:
        return f"{reason}"
    return f"cannot use {' -> '.join(names)}: {reason}"
