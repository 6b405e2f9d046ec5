"""Which code produced a result: package version, git commit (``+modified``), source hash."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import powerzoo
from powerzoo import provenance


@pytest.fixture
def package(tmp_path, monkeypatch) -> Path:
    """A two-file stand-in for the package, in a folder of its own (no git checkout)."""
    root = tmp_path / "checkout" / "powerzoo"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("x = 1\n")
    (root / "sub" / "mod.py").write_text("y = 2\n")
    (root / "data.csv").write_text("not source\n")
    monkeypatch.setattr(provenance, "PACKAGE_DIR", root)
    provenance.source_hash.cache_clear()
    provenance.git_commit.cache_clear()
    yield root
    provenance.source_hash.cache_clear()
    provenance.git_commit.cache_clear()


def test_the_source_hash_follows_the_python_sources_only(package):
    first = provenance.source_hash()
    assert len(first) == 16 and int(first, 16) >= 0
    (package / "data.csv").write_text("changed\n")  # not a source file
    provenance.source_hash.cache_clear()
    assert provenance.source_hash() == first
    (package / "sub" / "mod.py").write_text("y = 3\n")
    provenance.source_hash.cache_clear()
    assert provenance.source_hash() != first


def test_no_commit_outside_a_git_checkout(package):
    assert provenance.git_commit() is None
    code = provenance.code_provenance()
    assert code == {
        "version": powerzoo.__version__,  # the installed distribution's
        "commit": None,
        "source_hash": provenance.source_hash(),
    }


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_the_commit_is_marked_modified_when_the_sources_differ_from_it(package):
    checkout = package.parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "sources")
    head = git("rev-parse", "HEAD")
    assert provenance.git_commit() == head
    (checkout / "notes.txt").write_text("outside the package: not a change of its code\n")
    provenance.git_commit.cache_clear()
    assert provenance.git_commit() == head
    (package / "__init__.py").write_text("x = 2\n")
    provenance.git_commit.cache_clear()
    assert provenance.git_commit() == head + "+modified"
