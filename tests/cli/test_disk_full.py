"""A disk that fills up under `powerzoo collect` and `powerzoo train`: one error line, no traceback.

The full disk is a file-size limit (``ulimit -f``: ``RLIMIT_FSIZE`` set in the child once it has
imported PowerZoo), the same failure a full disk (``ENOSPC``) gives: Python ignores ``SIGXFSZ``,
so a write past the limit fails with ``EFBIG`` instead of killing the process. The temporary
file being written is removed.
"""

from __future__ import annotations

import subprocess

from helpers import run_python

LIMITED = (
    "import resource, sys; from powerzoo.cli.main import main; "
    "limit = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
    "sys.exit(main(sys.argv[2:]))"
)


def run_limited(limit: int, *args: str) -> subprocess.CompletedProcess:
    """``powerzoo ARGS`` in a fresh interpreter that may write files of at most ``limit`` bytes."""
    return run_python(LIMITED, str(limit), *args)


def error_line(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if not line.startswith("powerzoo: warn")]
    assert "Traceback" not in run.stderr and len(errors) == 1, run.stderr
    return errors[0]


def test_collect_on_a_full_disk(tmp_path):
    path = tmp_path / "data" / "d.h5"
    run = run_limited(100_000, "collect", "battery_arbitrage", "--episodes", "200", "-o", str(path))
    assert error_line(run) == (
        f"powerzoo: error: cannot write {path}: File too large (errno 27); the partial dataset "
        f"was removed and {path} left as it was"
    )
    assert list(path.parent.iterdir()) == []  # no temporary file, no dataset


def test_train_on_a_full_disk(tmp_path):
    run_dir = tmp_path / "runs" / "full"
    run = run_limited(
        20_000,
        "train",
        "battery_arbitrage",
        "--algo",
        "PPO",
        "--timesteps",
        "64",
        "--output-dir",
        str(tmp_path / "runs"),
        "--name",
        "full",
        "--no-progress",
    )
    assert error_line(run) == (
        f"powerzoo: error: cannot write {run_dir}: File too large (errno 27); free space, then "
        f"`powerzoo resume {run_dir}` or train again"
    )
    left = [p.name for p in run_dir.rglob("*") if p.name.startswith(".") and p.is_file()]
    assert left == []  # the model being saved was a temporary file: removed
