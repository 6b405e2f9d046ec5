"""Which code produced a result: the package version, the git commit of the checkout it was
imported from, and a hash of its Python sources.

The source hash identifies the code even where the commit cannot (an installed wheel, or a
checkout with files changed since its last commit, marked ``+modified``). Campaign trials keep
:func:`code_provenance` in their records, so a results page can say which code produced each row.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from importlib import metadata
from pathlib import Path

__all__ = ["code_provenance", "source_hash", "git_commit", "package_version"]

PACKAGE_DIR = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """First 16 hex digits of the SHA-256 of every ``.py`` file of the package (relative path
    and contents, in path order)."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE_DIR).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(PACKAGE_DIR.parent), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit checked out where the package was imported from, ``+modified`` when its
    sources differ from it; ``None`` outside a git checkout (or without git)."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return None
    changed = _git("status", "--porcelain", "--", PACKAGE_DIR.name)
    return commit + ("+modified" if changed else "")


def short_commit(commit: str) -> str:
    """A :func:`git_commit` id shortened to 10 hex digits, keeping its ``+modified`` mark."""
    return commit[:10] + ("+modified" if commit.endswith("+modified") else "")


def package_version() -> str | None:
    """The installed distribution's version (``None`` when it is not installed)."""
    try:
        return metadata.version("powerzoo")
    except metadata.PackageNotFoundError:
        return None


def code_provenance() -> dict[str, str | None]:
    """``{"version", "commit", "source_hash"}`` of the running package."""
    return {"version": package_version(), "commit": git_commit(), "source_hash": source_hash()}
