"""Damaged, cut, killed and rewritten run folders, as a user meets them.

Truncated files of every kind a run folder holds, a ``config.yaml`` that lost lines, a real
SIGKILL of a real ``powerzoo train`` (before its first checkpoint, and while checkpoints are being
written), re-writing a checkpoint step, resuming a finished run, and out-of-range config values.
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
from powerzoo.rl import ConfigError, Trainer
from powerzoo.rl import run_dir as rd

TINY_PPO = {"n_steps": 64, "batch_size": 64, "n_epochs": 1}  # 2 envs: 128 env steps a rollout
SMALL_MAPPO = {"n_steps": 8, "n_epochs": 1, "hidden_sizes": [16, 16]}
QUIET = {"progress_bar": False, "tensorboard": False}
LAST, BEFORE = "step_000000000384", "step_000000000256"


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _copy(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / run.name))


@pytest.fixture(scope="module")
def sb3_run(tmp_path_factory) -> Path:
    """A finished 384-step PPO run, checkpointed at 128, 256 and 384, evaluated at 256 and 384."""
    out = tmp_path_factory.mktemp("runs")
    trainer = Trainer(
        "battery_arbitrage",
        total_timesteps=384,
        n_envs=2,
        output_dir=str(out),
        name="ppo",
        algorithm_kwargs=TINY_PPO,
        evaluation={"freq": 256, "episodes": 1},
        checkpoint={"freq": 128},
        logging=QUIET,
    )
    trainer.train()
    trainer.close()
    return trainer.run_dir


@pytest.fixture(scope="module")
def mappo_run(tmp_path_factory) -> Path:
    """A finished 48-step MAPPO run on marl_opf, checkpointed every 16 env steps."""
    out = tmp_path_factory.mktemp("runs")
    trainer = Trainer(
        "marl_opf",
        algorithm="MAPPO",
        total_timesteps=48,
        n_envs=2,
        output_dir=str(out),
        name="mappo",
        algorithm_kwargs=SMALL_MAPPO,
        evaluation={"freq": 32, "episodes": 1},
        checkpoint={"freq": 16},
        logging=QUIET,
    )
    trainer.train()
    trainer.close()
    return trainer.run_dir


# ---- every damaged file is named --------------------------------------------------------------
@pytest.mark.parametrize(
    "file, model",
    [
        ("model.zip", "final"),
        ("vecnormalize.npz", "final"),
        ("evaluation/best_model.zip", "best"),
        ("config.yaml", "final"),
    ],
)
def test_a_damaged_file_of_a_run_is_named(sb3_run, tmp_path, file, model):
    run = _copy(sb3_run, tmp_path)
    if file == "config.yaml":  # random bytes
        (run / file).write_bytes(os.urandom(300) + b"\xff")
    else:
        _truncate(run / file)
    with pytest.raises(CorruptFileError, match=r"corrupt or unreadable \(") as caught:
        Trainer.load(run, model=model)
    assert caught.value.path == run / file
    assert str(caught.value).startswith(f"{run / file}: corrupt or unreadable (")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("file", ["model.zip", "vecnormalize.npz", "rng.npz", "state.json"])
def test_a_damaged_checkpoint_is_skipped_for_the_next_newest(sb3_run, tmp_path, file):
    run = _copy(sb3_run, tmp_path)
    damaged = run / "checkpoints" / LAST / file
    _truncate(damaged)
    expected = f"skipping checkpoint {LAST}: {damaged}: corrupt or unreadable .*; falling back to"
    with pytest.warns(UserWarning, match=expected):
        trainer = Trainer.from_checkpoint(run)
    assert trainer.num_timesteps == 256
    if file in ("model.zip", "vecnormalize.npz"):  # what load(model="latest") reads
        with pytest.warns(UserWarning, match=f"skipping checkpoint {LAST}"):
            assert Trainer.load(run, model="latest").num_timesteps == 256


@pytest.mark.parametrize("file", ["learner.pt", "collector.npz", "rng.npz", "state.json"])
def test_a_damaged_mappo_checkpoint_is_skipped_for_the_next_newest(mappo_run, tmp_path, file):
    run = _copy(mappo_run, tmp_path)
    damaged = run / "checkpoints" / "step_000000000048" / file
    _truncate(damaged)
    with pytest.warns(UserWarning, match=f"{damaged}: corrupt or unreadable"):
        trainer = Trainer.from_checkpoint(run)
    assert trainer.num_timesteps == 32


def test_a_damaged_mappo_learner_is_named(mappo_run, tmp_path):
    run = _copy(mappo_run, tmp_path)
    _truncate(run / "learner.pt")
    with pytest.raises(CorruptFileError, match="learner.pt: corrupt or unreadable"):
        Trainer.load(run)


def test_every_checkpoint_damaged_is_an_error_naming_the_newest(sb3_run, tmp_path):
    run = _copy(sb3_run, tmp_path)
    for folder in (run / "checkpoints").glob("step_*"):
        _truncate(folder / "rng.npz")
    with pytest.warns(UserWarning), pytest.raises(CorruptFileError) as caught:
        Trainer.from_checkpoint(run)
    assert caught.value.path == run / "checkpoints" / LAST / "rng.npz"


def test_a_damaged_latest_pointer_is_named_and_the_newest_checkpoint_used(sb3_run, tmp_path):
    run = _copy(sb3_run, tmp_path)
    _truncate(run / "checkpoints" / "latest")
    with pytest.warns(UserWarning, match=f"latest: corrupt or unreadable .*; using {LAST}"):
        assert Trainer.from_checkpoint(run).num_timesteps == 384


def test_a_damaged_run_state_is_named_in_a_warning(sb3_run, tmp_path):
    run = _copy(sb3_run, tmp_path)
    _truncate(run / "run_state.json")
    with pytest.warns(UserWarning, match=r"run_state.json: corrupt or unreadable \(.*going on"):
        assert Trainer.load(run).num_timesteps == 384


def test_the_command_line_names_a_damaged_file_in_one_line(sb3_run, tmp_path):
    run = _copy(sb3_run, tmp_path)
    (run / "config.yaml").write_bytes(b"\xff\xfe" + os.urandom(200))
    done = run_cli("resume", str(run))
    assert done.returncode == 2
    assert done.stderr.startswith(f"powerzoo: error: {run / 'config.yaml'}: corrupt or unreadable")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


# ---- a config.yaml that lost lines ------------------------------------------------------------
def test_a_cut_config_is_refused_naming_the_file_and_the_fields(sb3_run, tmp_path, capsys):
    run = _copy(sb3_run, tmp_path)
    lines = (run / "config.yaml").read_text().splitlines()
    kept = [line for line in lines[:-4] if not line.startswith("n_envs:")]
    (run / "config.yaml").write_text("\n".join(kept) + "\n")
    with pytest.raises(ConfigError) as caught:
        Trainer.resume(run)
    message = str(caught.value)
    assert message.startswith(f"{run / 'config.yaml'}: not the config this run was trained with")
    assert "n_envs (recorded 2, now 1)" in message and "name (recorded 'ppo', now None)" in message
    with pytest.raises(ConfigError, match="n_envs"):
        Trainer.load(run)
    assert main(["resume", str(run)]) == 2
    assert "fields that differ: n_envs" in capsys.readouterr().err
    # each checkpoint keeps the record too
    (run / "run_state.json").unlink()
    with pytest.raises(ConfigError, match=f"recorded in {run / 'checkpoints' / LAST}"):
        Trainer.from_checkpoint(run)


# ---- resuming a finished run writes nothing ----------------------------------------------------
def _snapshot(run: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(run)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(run.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("which", ["sb3", "mappo"])
def test_resuming_a_finished_run_writes_nothing(sb3_run, mappo_run, tmp_path, capsys, which):
    run = _copy(sb3_run if which == "sb3" else mappo_run, tmp_path)
    before = _snapshot(run)
    assert main(["resume", str(run)]) == 0
    assert "finished at" in capsys.readouterr().out
    assert _snapshot(run) == before


# ---- re-writing a checkpoint step --------------------------------------------------------------
def test_a_kill_while_a_checkpoint_step_is_rewritten_leaves_a_complete_folder(
    tmp_path, monkeypatch
):
    store = rd.CheckpointStore(tmp_path, keep=3)

    def files(text: str):
        return lambda folder: (folder / "state.json").write_text(text)

    store.write(128, files("first"))
    real_replace, calls = os.replace, []

    def killed_at_the_swap(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # the old folder is aside, the new one not yet in place
            raise KeyboardInterrupt("killed")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", killed_at_the_swap)
    with pytest.raises(KeyboardInterrupt):
        store.write(128, files("second"))
    monkeypatch.undo()
    latest = store.latest()
    assert latest is not None and (latest / "state.json").read_text() == "first"
    assert store.restore(lambda folder: (folder / "state.json").read_text())[1] == "first"
    store.write(128, files("third"))  # a resumed run writes the step again; the aside goes
    assert [p.name for p in store.root.iterdir() if p.is_dir()] == ["step_000000000128"]
    assert (store.latest() / "state.json").read_text() == "third"


# ---- real SIGKILLs of real training processes -------------------------------------------------
def _config(tmp_path: Path, name: str, total: int, checkpoint_freq: int) -> Path:
    cfg = {
        "task": "battery_arbitrage",
        "total_timesteps": total,
        "n_envs": 2,
        "algorithm_kwargs": TINY_PPO,
        "evaluation": None,
        "checkpoint": {"freq": checkpoint_freq, "keep": 2},
        "output_dir": str(tmp_path),
        "name": name,
        "logging": QUIET,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _train_until(config: Path, ready) -> None:
    """Start ``powerzoo train -c config``; SIGKILL it as soon as ``ready()`` holds."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "powerzoo.cli.main", "train", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_until(ready, "the moment to kill the run", proc, poll_s=0.002)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_run_killed_before_its_first_checkpoint_resumes_from_step_0(tmp_path, capsys):
    run = tmp_path / "early"
    config = _config(tmp_path, "early", total=1024, checkpoint_freq=100_000)
    _train_until(config, lambda: (run / rd.STATE_FILE).is_file())
    assert not (run / "model.zip").exists() and rd.CheckpointStore(run).latest() is None

    assert main(["train", "-c", str(config)]) == 2  # the name is taken ...
    assert "--overwrite" in capsys.readouterr().err  # ... and the message says how to replace it
    done = run_cli("resume", str(run))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "has no checkpoint (the run ended before its first one): training it again from " in (
        done.stderr
    )
    state = json.loads((run / rd.STATE_FILE).read_text())
    assert state["status"] == "finished" and state["num_timesteps"] == 1024


def test_overwrite_replaces_a_run_folder(tmp_path, capsys):
    config = _config(tmp_path, "again", total=128, checkpoint_freq=128)
    assert main(["train", "-c", str(config)]) == 0
    (tmp_path / "again" / "stale.txt").write_text("from the first run")
    assert main(["train", "-c", str(config), "--overwrite"]) == 0
    assert not (tmp_path / "again" / "stale.txt").exists()
    assert yaml.safe_load((tmp_path / "again" / "config.yaml").read_text())["overwrite"] is True
    assert "run folder:" in capsys.readouterr().out


def test_sigkill_while_checkpoints_are_written_then_resume(tmp_path):
    run = tmp_path / "killed"
    config = _config(tmp_path, "killed", total=3072, checkpoint_freq=128)
    checkpoints = run / "checkpoints"

    def writing_a_checkpoint() -> bool:  # two checkpoints exist, a third is being written
        if len(list(checkpoints.glob("step_*"))) < 2:
            return False
        newest = int((checkpoints / "latest").read_text().split("_")[1])
        return newest >= 1536 or any(checkpoints.glob(".partial-*"))

    _train_until(config, writing_a_checkpoint)
    assert not (run / "model.zip").exists()
    killed = json.loads((run / rd.STATE_FILE).read_text())
    assert killed["status"] == "running" and killed["num_timesteps"] >= 256  # the last known step
    newest, older = sorted(checkpoints.glob("step_*"))[::-1][:2]
    _truncate(newest / "model.zip")

    done = run_cli("resume", str(run))
    assert done.returncode == 0, done.stderr[-2000:]
    warning = (
        f"powerzoo: warning: skipping checkpoint {newest.name}: {newest / 'model.zip'}: "
        f"corrupt or unreadable (no data in the archive: truncated?); falling back to {older.name}"
    )
    assert warning in done.stderr.splitlines()
    state = json.loads((run / rd.STATE_FILE).read_text())
    assert state["status"] == "finished" and state["num_timesteps"] == 3072
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "latest",
        "step_000000002944",
        "step_000000003072",
    ]


# ---- run_state.json follows the run ------------------------------------------------------------
def test_mappo_run_state_follows_each_checkpoint_and_evaluation(tmp_path):
    trainer = Trainer(
        "marl_opf",
        algorithm="MAPPO",
        total_timesteps=48,
        n_envs=2,
        output_dir=str(tmp_path),
        name="mappo",
        algorithm_kwargs=SMALL_MAPPO,
        evaluation={"freq": 32, "episodes": 1},
        checkpoint={"freq": 16},
        logging=QUIET,
    )
    seen, write_state = [], trainer._write_state

    def recording(*args, **kwargs):
        write_state(*args, **kwargs)
        state = json.loads((trainer.run_dir / rd.STATE_FILE).read_text())
        seen.append((state["status"], state["num_timesteps"]))

    trainer._write_state = recording
    trainer.train()
    trainer.close()
    running = [steps for status, steps in seen if status == "running"]
    assert running[0] == 0 and {16, 32, 48} <= set(running)  # checkpoints and evaluations
    assert seen[-1] == ("finished", 48)


# ---- bounds, refused before a run folder exists ------------------------------------------------
@pytest.mark.parametrize(
    "fields, named",
    [
        ({"total_timesteps": 10**18}, "total_timesteps"),
        ({"n_envs": 200_000_000}, "n_envs"),
        ({"algorithm_kwargs": {"gamma": 5}}, r"algorithm_kwargs.gamma: must be in \(0, 1\]"),
        ({"algorithm_kwargs": {"n_steps": -1}}, "algorithm_kwargs.n_steps: must be >= 1"),
        ({"torch_threads": 100_000}, "torch_threads"),
        ({"algorithm_kwargs": {"learning_rate": 0}}, "algorithm_kwargs.learning_rate"),
        ({"algorithm_kwargs": {"gae_lambda": 1.5}}, "algorithm_kwargs.gae_lambda"),
        ({"algorithm_kwargs": {"batch_size": 0}}, "algorithm_kwargs.batch_size"),
        ({"total_timesteps": None, "episodes": 10**12}, "episodes"),
    ],
)
def test_out_of_range_values_are_refused_before_a_run_folder(tmp_path, capsys, fields, named):
    cfg = {"task": "battery_arbitrage", "total_timesteps": 1000, "output_dir": str(tmp_path / "o")}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**cfg, **fields}))
    assert main(["train", "-c", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(path) in err
    assert re.search(named, err), err
    assert not (tmp_path / "o").exists()


def test_the_fingerprint_ignores_how_a_run_executes_but_not_what_it_trains():
    from powerzoo.rl.config import resolve_config

    base = resolve_config("marl_opf", {"algorithm": "MAPPO"})
    same_numbers = resolve_config(
        "marl_opf",
        {
            "algorithm": "MAPPO",
            "torch_threads": 2,
            "logging": {"progress_bar": False},
            "algorithm_kwargs": {"rollout_workers": 2},
        },
    )
    other_numbers = resolve_config(
        "marl_opf", {"algorithm": "MAPPO", "algorithm_kwargs": {"learning_rate": 1e-4}}
    )
    assert same_numbers.fingerprint() == base.fingerprint() != other_numbers.fingerprint()
