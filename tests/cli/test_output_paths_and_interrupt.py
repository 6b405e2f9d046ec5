"""One line, no traceback, when an output path cannot be written or training is interrupted.

``powerzoo train``, ``collect`` and ``campaign`` check where they will write before they build or
run anything: a file given as the output folder (or a folder as the output file), or a folder that
cannot be written, is one ``powerzoo: error:`` line and exit status 2. Ctrl-C during ``powerzoo
train`` is exit status 130 with one line saying how to go on, and the run folder no longer says
``running``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from powerzoo import fileio
from powerzoo.cli.main import main

SMOKE = REPO_ROOT / "campaigns" / "smoke.yaml"


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("powerzoo: warning:")]
    assert len(lines) == 1, err
    assert lines[0].startswith("powerzoo: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("not a folder\n")
    return path


@pytest.fixture
def unwritable(tmp_path, monkeypatch) -> Path:
    """A folder this process may not write in: by its mode for a normal user; as root (who may
    write anywhere) by the answer of ``os.access``, the check the commands make."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o500)
        yield folder
        folder.chmod(0o700)
        return
    real = os.access

    def access(path, mode, *args, **kwargs):
        if Path(path).resolve() == folder.resolve() and mode & os.W_OK:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(fileio.os, "access", access)
    yield folder


def test_train_into_a_file_or_below_one(capsys, a_file):
    for out in (a_file, a_file / "runs"):
        args = ["train", "battery_arbitrage", "--timesteps", "64", "--output-dir", str(out)]
        assert main(args) == 2
        line = _one_error_line(capsys)
        assert str(out) in line and "is a file" in line, line
    assert a_file.read_text() == "not a folder\n"


def test_train_into_an_unwritable_folder(capsys, unwritable):
    out = unwritable / "runs"
    assert main(["train", "battery_arbitrage", "--timesteps", "64", "--output-dir", str(out)]) == 2
    line = _one_error_line(capsys)
    assert str(out) in line and "not writable" in line


def test_collect_into_a_folder_a_file_or_an_unwritable_folder(capsys, tmp_path, a_file, unwritable):
    for output, words in (
        (tmp_path, "is a folder"),
        (a_file / "data.h5", "which is a file"),
        (unwritable / "data.h5", "not writable"),
    ):
        assert main(["collect", "battery_arbitrage", "--episodes", "1", "-o", str(output)]) == 2
        line = _one_error_line(capsys)
        assert str(output) in line and words in line, line


def test_campaign_into_a_file_or_an_unwritable_folder(capsys, a_file, unwritable):
    for out, words in ((a_file, "is a file"), (unwritable / "smoke", "not writable")):
        assert main(["campaign", str(SMOKE), "--out", str(out)]) == 2
        line = _one_error_line(capsys)
        assert str(out) in line and words in line, line
    assert not (unwritable / "smoke").exists()


def test_an_os_error_of_a_command_is_one_line(capsys, monkeypatch, tmp_path):
    """A refusal the early checks cannot see (a folder made read-only meanwhile, a read-only
    filesystem) still ends in one line."""
    import powerzoo.cli.main as cli

    def refuse(args):
        raise PermissionError(13, "Permission denied", str(tmp_path / "x"))

    monkeypatch.setattr(cli, "_cmd_list", refuse)
    assert main(["list"]) == 2
    assert (
        _one_error_line(capsys)
        == f"powerzoo: error: cannot use {tmp_path / 'x'}: Permission denied"
    )


def test_ctrl_c_during_train_stops_with_one_line_and_marks_the_run(tmp_path):
    """SIGINT once the command says training started (its output is waited on, not a clock):
    exit 130, one line naming ``powerzoo resume``, ``run_state.json`` no longer ``running``."""
    run = tmp_path / "runs" / "ppo"
    command = [
        sys.executable, "-m", "powerzoo.cli.main", "train", "battery_arbitrage",
        "--timesteps", "10000000", "--output-dir", str(run.parent), "--name", run.name,
    ]  # fmt: skip
    # SIGINT back to its default in the child: a pytest-xdist worker (and a background job of a
    # non-interactive shell) ignores it, and a child inherits an ignored signal, so Python would
    # never raise KeyboardInterrupt there
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # a safety net against a hang only, far beyond any machine's start-up time
    watchdog = threading.Timer(1800, process.kill)
    watchdog.start()
    try:
        started = ""
        for line in process.stdout:
            if line.startswith("training started"):
                started = line
                break
        assert started, f"no start line; stderr: {process.stderr.read()}"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate()
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
    assert str(run) in started and f"powerzoo resume {run}" in started
    assert process.returncode == 130, err
    lines = [line for line in err.splitlines() if not line.startswith("powerzoo: warning:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("powerzoo: interrupted") and f"powerzoo resume {run}" in lines[0]
    state = json.loads((run / "run_state.json").read_text())
    assert state["status"] == "interrupted"
