"""The maintainer's campaign commit tool (``tools/campaign_commit.py``): which trial folders a
pass stages and unstages, and its dry run in a git repository."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location(
        "campaign_commit", ROOT / "tools" / "campaign_commit.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trial(folder: Path, name: str, finished: bool) -> Path:
    trial = folder / "trials" / name
    (trial / "run").mkdir(parents=True)
    (trial / "run" / "config.yaml").write_text("seed: 0\n")
    if finished:
        (trial / "trial.json").write_text("{}\n")
    return trial


def test_only_folders_with_a_record_are_finished(tmp_path):
    tool = _tool()
    _trial(tmp_path, "b-PPO-seed0", finished=True)
    _trial(tmp_path, "a-PPO-seed0", finished=True)
    _trial(tmp_path, "c-PPO-seed0", finished=False)  # still training
    names = [p.name for p in tool.finished_trials(tmp_path)]
    assert names == ["a-PPO-seed0", "b-PPO-seed0"]


def test_a_tracked_record_that_is_gone_is_unstaged(tmp_path):
    tool = _tool()
    _trial(tmp_path, "kept", finished=True)
    tracked = ["trials/kept/trial.json", "trials/set_aside/trial.json"]
    assert tool.vanished_trials(tracked, tmp_path) == ["trials/set_aside"]


def test_the_message_counts_the_batch_and_reads_the_campaign_size():
    tool = _tool()
    out = "scored 40 rows\n131 of 325 trial(s) finished; 2 running\n"
    assert tool.total_trials(out) == 325
    assert tool.total_trials("no count") is None
    message = tool.commit_message(2, 131, 325)
    assert message.startswith("Benchmark v2 campaign: 2 more trial record(s), 131 of 325 finished")


def test_a_dry_run_lists_new_and_set_aside_trials_and_writes_nothing(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    folder = tmp_path / "results" / "camp"
    _trial(folder, "old", finished=True)
    set_aside = _trial(folder, "set_aside", finished=True)
    git("add", ".")
    git("commit", "-q", "-m", "records")
    (set_aside / "trial.json").unlink()  # moved away by a re-run
    (folder / "trials" / "old" / "trial.json").write_text('{"rerun": true}\n')  # written again
    _trial(folder, "new", finished=True)
    _trial(folder, "running", finished=False)
    monkeypatch.chdir(tmp_path)
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "campaign_commit.py"), "--folder", "results/camp",
         "--dry-run"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "2 finished, 1 new, 1 changed, 1 set aside" in out.stdout
    assert "would add results/camp/trials/new" in out.stdout
    assert "would update results/camp/trials/old" in out.stdout
    assert "would unstage results/camp/trials/set_aside" in out.stdout
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True, text=True
    ).stdout
    assert "A " not in status  # nothing staged


def test_a_missing_campaign_folder_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        _tool().main(["--folder", "nowhere"])
    assert stop.value.code == 2


def test_a_failing_pass_in_the_loop_is_reported_and_does_not_stop_it(monkeypatch, capsys):
    tool = _tool()

    def broken(args):
        raise subprocess.CalledProcessError(128, ["git", "add"], stderr="index.lock exists")

    monkeypatch.setattr(tool, "one_pass", broken)
    assert tool.guarded_pass(None) == 1
    assert "index.lock exists" in capsys.readouterr().err
    monkeypatch.setattr(tool, "one_pass", lambda args: 0)
    assert tool.guarded_pass(None) == 0
