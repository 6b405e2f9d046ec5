"""A campaign's output folder: damaged records are named, one campaign at a time.

A truncated ``trial.json`` or a ``campaign.json`` overwritten with junk stops ``powerzoo campaign``
with one line naming the file; a second ``powerzoo campaign`` into a folder another one is
running into stops at once, naming the folder and the holder's pid, and leaves the folder alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import run_cli, wait_until

from powerzoo.cli.main import main
from powerzoo.fileio import CorruptFileError
from powerzoo.rl.campaigns import OutFolderBusyError, load_campaign, run_local
from powerzoo.rl.campaigns.local import CAMPAIGN_FILE, LOCK_FILE, lock_out_dir
from powerzoo.rl.campaigns.trial import TRIAL_FILE

# one PPO trial of 64 env steps, evaluated on one test day: about 5 s
MINI = {
    "name": "mini",
    "tasks": ["battery_arbitrage"],
    "seeds": [0],
    "budget": {"total_timesteps": 64, "n_envs": 1},
    "evaluation": {
        "split": "test",
        "episodes": 1,
        "baselines": [],
        "model": "final",
        "plots": False,
    },
    "algorithms": {
        "PPO": {
            "settings": {
                "tiny": {
                    "algorithm_kwargs": {"n_steps": 64, "batch_size": 64, "n_epochs": 1},
                    "overrides": {"evaluation": None, "checkpoint": None},
                }
            }
        }
    },
}
TRIAL_ID = "battery_arbitrage-PPO-tiny-seed0"


def write_campaign(path: Path, **budget) -> Path:
    data = {**MINI, "budget": {**MINI["budget"], **budget}}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    """``(campaign file, output folder)`` of the finished mini campaign."""
    root = tmp_path_factory.mktemp("mini")
    spec = write_campaign(root / "mini.yaml")
    out = root / "out"
    outcome = run_local(spec, out, progress=False)
    assert not outcome.failed and (out / "trials" / TRIAL_ID / TRIAL_FILE).is_file()
    return spec, out


def one_error_line(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and run.stderr.count("\n") == 1, run.stderr
    return run.stderr.strip()


def campaign_cli(capsys, *args: str) -> subprocess.CompletedProcess:
    """``powerzoo campaign ARGS`` in this process (the training imports are already paid for)."""
    capsys.readouterr()
    rc = main(["campaign", *args, "--no-progress"])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, captured.out, captured.err)


def test_a_truncated_trial_record_is_one_line_naming_the_file(finished, tmp_path, capsys):
    spec, out = finished
    out = Path(shutil.copytree(out, tmp_path / "out"))
    record = out / "trials" / TRIAL_ID / TRIAL_FILE
    record.write_bytes(record.read_bytes()[:200])
    with pytest.raises(CorruptFileError) as err:
        run_local(spec, out, progress=False)
    assert err.value.path == record
    line = one_error_line(campaign_cli(capsys, str(spec), "--out", str(out)))
    assert line.startswith(f"powerzoo: error: {record}: corrupt or unreadable (")
    assert line.endswith(f"; delete {record.parent} to run trial {TRIAL_ID} again)")


def test_a_junk_campaign_record_is_one_line_naming_the_file(finished, tmp_path, capsys):
    spec, out = finished
    out = Path(shutil.copytree(out, tmp_path / "out"))
    (out / CAMPAIGN_FILE).write_bytes(os.urandom(300))
    line = one_error_line(campaign_cli(capsys, str(spec), "--out", str(out)))
    assert line.startswith(f"powerzoo: error: {out / CAMPAIGN_FILE}: corrupt or unreadable (")
    assert "or choose another --out folder)" in line


def test_a_second_campaign_into_a_busy_folder_stops_naming_the_holder(tmp_path):
    spec = write_campaign(tmp_path / "long.yaml", total_timesteps=10_000_000)
    out = tmp_path / "out"
    first = subprocess.Popen(
        [sys.executable, "-m", "powerzoo.cli.main", "campaign", str(spec), "--out", str(out)]
        + ["--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    lock = out / LOCK_FILE
    try:
        # the lock is taken first, campaign.json written just after: wait for both
        wait_until(
            lambda: (
                lock.is_file()
                and lock.read_text().strip() == str(first.pid)
                and (out / CAMPAIGN_FILE).is_file()
            ),
            "the first campaign took the folder's lock and wrote its campaign file",
            first,
        )
        held = (out / CAMPAIGN_FILE).read_bytes()
        second = run_cli("campaign", str(spec), "--out", str(out), "--no-progress")
        assert one_error_line(second) == (
            f"powerzoo: error: {out.resolve()} is in use by another campaign (pid {first.pid}, "
            f"lock file {lock.resolve()}); wait for it to finish or choose another --out folder"
        )
        assert first.poll() is None  # the first one runs on, its folder untouched
        assert (out / CAMPAIGN_FILE).read_bytes() == held
        assert not list(out.glob("trials/*/error.txt"))
        with pytest.raises(OutFolderBusyError, match=f"pid {first.pid},"):
            run_local(load_campaign(spec), out, progress=False)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
    with lock_out_dir(out):  # the system released the killed holder's lock
        assert lock.read_text().strip() == str(os.getpid())


def test_the_results_page_reads_a_real_campaign_folder(finished, tmp_path, capsys):
    _, out = finished
    record = json.loads((out / "trials" / TRIAL_ID / TRIAL_FILE).read_text())
    assert record["started_at"] < record["finished_at"]
    page = tmp_path / "page"
    assert main(["campaign-report", str(out), "--out", str(page)]) == 0
    assert "1 of 1 trial(s) finished" in capsys.readouterr().out
    text = (page / "index.md").read_text()
    assert "1 of 1 trials finished (every trial finished)" in text
    # one test day: off the table's days, scores n/a; the model tested: the run's best
    assert re.search(r"\| PPO/tiny \| 1/1: 0 \((\d+k|\d+)\) \| ", text)
    assert (page / "return_vs_cost_battery_arbitrage.png").is_file()
