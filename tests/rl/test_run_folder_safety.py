"""Run folders are checked before they are trusted.

* A run that normalises observations cannot be evaluated, loaded or resumed without its
  statistics file, nor with a file that holds something else.
* One writer per run folder: a second ``train --name`` of the same run, or a second ``resume``,
  is refused naming the holder, and no writer deletes another's ``.partial-*`` folder.
* Loading runs no code: a crafted pickle placed as a statistics, RNG, collector or learner file,
  or inside a model zip, is never unpickled by ``eval``, ``load`` or ``resume``; the pickles of an
  older PowerZoo are read only with ``trust_pickle=True`` / ``--trust-pickle``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from powerzoo.cli.main import main
from powerzoo.fileio import CorruptFileError, atomic_write_text, write_json
from powerzoo.rl import Trainer
from powerzoo.rl import run_dir as rd
from powerzoo.rl import safe_files as sf
from powerzoo.rl.checkpoint import rng_from_arrays
from powerzoo.rl.run_dir import RunFolderBusyError
from powerzoo.rl.safe_files import PickleRefusedError

TINY_PPO = {"n_steps": 64, "batch_size": 64, "n_epochs": 1}  # 2 envs: 128 env steps a rollout
SMALL_MAPPO = {"n_steps": 8, "n_epochs": 1, "hidden_sizes": [16, 16]}
QUIET = {"progress_bar": False, "tensorboard": False}
LAST = "step_000000000384"


@pytest.fixture(scope="module")
def sb3_run(tmp_path_factory) -> Path:
    """A finished 384-step PPO run (VecNormalize on), checkpointed at 128, 256 and 384."""
    trainer = Trainer(
        "battery_arbitrage",
        total_timesteps=384,
        n_envs=2,
        output_dir=str(tmp_path_factory.mktemp("runs")),
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
    trainer = Trainer(
        "marl_opf",
        algorithm="MAPPO",
        total_timesteps=48,
        n_envs=2,
        output_dir=str(tmp_path_factory.mktemp("runs")),
        name="mappo",
        algorithm_kwargs=SMALL_MAPPO,
        evaluation={"freq": 32, "episodes": 1},
        checkpoint={"freq": 16},
        logging=QUIET,
    )
    trainer.train()
    trainer.close()
    return trainer.run_dir


def _copy(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / run.name))


def _unfinished(run: Path) -> Path:
    """``run`` as a kill after its second-to-last checkpoint leaves it (resume trains on)."""
    folders = rd.CheckpointStore(run).complete()
    shutil.rmtree(folders[-1])
    atomic_write_text(run / "checkpoints" / "latest", folders[-2].name)
    write_json(run / "run_state.json", {"status": "running"})
    return run


def _scores(trainer) -> tuple:
    summary = trainer.evaluate("val", n_episodes=2)
    return summary["mean_return"], summary["std_return"], summary["mean_costs"]


def _one_line_error(capsys, *args: str) -> str:
    """``powerzoo ARGS`` in this process: exit status 2 and one error line (after any warning
    lines), which is returned."""
    capsys.readouterr()
    assert main(list(args)) == 2
    *warnings, error = capsys.readouterr().err.strip().split("\n")
    assert all(w.startswith("powerzoo: warning: ") for w in warnings), warnings
    assert error.startswith("powerzoo: error: "), error
    return error


# ---- the statistics of a run that normalises ---------------------------------------------------
@pytest.mark.parametrize("model", ["final", "best", "latest"])
def test_missing_statistics_are_an_error_on_load_and_eval(sb3_run, tmp_path, capsys, model):
    run = _copy(sb3_run, tmp_path)
    where = {"final": run, "best": run / "evaluation", "latest": run / "checkpoints"}[model]
    for file in [*where.glob("*vecnormalize.npz"), *where.glob("step_*/vecnormalize.npz")]:
        file.unlink()
    missing = {
        "final": run / "vecnormalize.npz",
        "best": run / "evaluation" / "best_vecnormalize.npz",
        "latest": run / "checkpoints" / LAST / "vecnormalize.npz",
    }[model]
    expected = f"{missing} is missing: this run normalises its observations"
    skipped = pytest.warns(UserWarning, match="skipping checkpoint")
    with skipped if model == "latest" else contextlib.nullcontext():
        with pytest.raises(FileNotFoundError, match="is missing") as caught:
            Trainer.load(run, model=model)
    assert str(caught.value).startswith(expected) and "\n" not in str(caught.value)
    line = _one_line_error(capsys, "eval", str(run), "--model", model, "--episodes", "1")
    assert line.startswith(f"powerzoo: error: {expected}")


def test_missing_statistics_are_an_error_on_resume(sb3_run, tmp_path, capsys):
    run = _unfinished(_copy(sb3_run, tmp_path))
    for file in run.glob("checkpoints/step_*/vecnormalize.npz"):
        file.unlink()
    newest = run / "checkpoints" / "step_000000000256" / "vecnormalize.npz"
    with pytest.warns(UserWarning, match="skipping checkpoint"):
        with pytest.raises(FileNotFoundError, match="is missing") as caught:
            Trainer.resume(run)
    assert str(caught.value).startswith(f"{newest} is missing: this run normalises")
    assert not (run / "checkpoints" / LAST).exists()  # nothing was trained or written


@pytest.mark.parametrize("model", ["final", "best"])
def test_statistics_of_the_wrong_kind_are_named(sb3_run, tmp_path, capsys, model):
    run = _copy(sb3_run, tmp_path)
    file = (
        run / "vecnormalize.npz" if model == "final" else run / "evaluation/best_vecnormalize.npz"
    )
    sf.write_arrays(file, {"something": np.zeros(3)})
    with pytest.raises(CorruptFileError, match="not the expected kind of file") as caught:
        Trainer.load(run, model=model)
    assert caught.value.path == file
    line = _one_line_error(capsys, "eval", str(run), "--model", model, "--episodes", "1")
    assert line.startswith(f"powerzoo: error: {file}: corrupt or unreadable (missing obs_mean")


def test_statistics_of_the_wrong_kind_are_named_on_resume(sb3_run, tmp_path):
    run = _unfinished(_copy(sb3_run, tmp_path))
    for folder in rd.CheckpointStore(run).complete():
        shutil.copy(folder / "rng.npz", folder / "vecnormalize.npz")
    with pytest.warns(UserWarning, match="skipping checkpoint"):
        with pytest.raises(CorruptFileError, match="missing obs_mean") as caught:
            Trainer.resume(run)
    assert caught.value.path == run / "checkpoints" / "step_000000000256" / "vecnormalize.npz"


def test_a_trusted_pickle_of_the_wrong_type_is_named(sb3_run, tmp_path):
    run = _copy(sb3_run, tmp_path)
    (run / "vecnormalize.npz").unlink()
    (run / "vecnormalize.pkl").write_bytes(pickle.dumps({"mean": [0.0]}))
    with pytest.raises(CorruptFileError, match="holds a dict, not VecNormalize statistics"):
        Trainer.load(run, model="final", trust_pickle=True)


def test_a_native_policy_without_its_observation_statistics_is_refused(mappo_run, tmp_path):
    run = _copy(mappo_run, tmp_path)
    file = run / "evaluation" / "best_policy.npz"
    with np.load(file) as data:
        kept = {k: data[k] for k in data.files if not k.endswith(("/obs_mid", "/obs_half"))}
    sf.write_arrays(file, kept)
    with pytest.raises(CorruptFileError, match="no observation statistics for group") as caught:
        Trainer.load(run, model="best")
    assert caught.value.path == file


# ---- one writer per run folder -----------------------------------------------------------------
WRITER = """
import sys
from powerzoo.rl import Trainer

class Gate:  # a stop condition that reports the lock is held, then waits for the test
    opened = False
    def __call__(self, progress):
        if not self.opened:
            self.opened = True
            print("holding", flush=True)
            sys.stdin.readline()
        return False

what, where = sys.argv[1], sys.argv[2]
if what == "train":
    trainer = Trainer("battery_arbitrage", total_timesteps=256, n_envs=2, output_dir=where,
                      name="same", algorithm_kwargs={"n_steps": 64, "batch_size": 64,
                      "n_epochs": 1}, evaluation=None, checkpoint={"freq": 128},
                      logging={"progress_bar": False, "tensorboard": False})
    result = trainer.train(stop_conditions=[Gate()])
else:
    result = Trainer.resume(where, stop_conditions=[Gate()]).result
print(result.status, result.num_timesteps, flush=True)
"""


def _start_writer(tmp_path: Path, what: str, where: Path) -> subprocess.Popen:
    """A ``train`` or ``resume`` in another process, paused while it holds the run's lock (it
    prints ``holding``, then waits for a line on stdin)."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, what, str(where)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / f"{what}.err").open("w"),
        text=True,
    )
    line = writer.stdout.readline()  # blocks until it holds the lock (or ends)
    assert line == "holding\n", (line, (tmp_path / f"{what}.err").read_text())
    return writer


def _finish(writer: subprocess.Popen, tmp_path: Path, what: str) -> str:
    out, _ = writer.communicate("go\n")
    assert writer.returncode == 0, (tmp_path / f"{what}.err").read_text()
    return out.strip()


def _holder(writer: subprocess.Popen) -> str:
    return f"(pid {writer.pid} on {socket.gethostname()}; lock file "


def test_two_trainings_under_one_name_the_second_is_refused_naming_the_holder(tmp_path, capsys):
    out = tmp_path / "runs"
    first = _start_writer(tmp_path, "train", out)
    run = out / "same"
    try:
        # another live writer's folder in progress: the first's clean-up must leave it alone
        others = run / "checkpoints" / f".partial-{os.getpid()}-other"
        others.mkdir(parents=True)
        line = _one_line_error(
            capsys, "train", "battery_arbitrage", "--name", "same", "--output-dir", str(out),
            "--timesteps", "128", "--no-progress",
        )  # fmt: skip
        assert line.startswith(f"powerzoo: error: run folder {run} is being written by another")
        assert _holder(first) in line
        with pytest.raises(RunFolderBusyError, match=f"pid {first.pid} on "):
            Trainer("battery_arbitrage", name="same", output_dir=str(out), overwrite=True).train()
        assert (run / "config.yaml").is_file()  # not replaced by the refused overwrite
    finally:
        done = _finish(first, tmp_path, "train")
    assert done == "finished 256"
    assert others.is_dir()  # written checkpoints 128 and 256, pruned, and left it
    assert sorted(p.name for p in (run / "checkpoints").glob("step_*")) == [
        "step_000000000128",
        "step_000000000256",
    ]
    with pytest.raises(FileExistsError, match="already holds a run"):  # free again, and finished
        Trainer("battery_arbitrage", name="same", output_dir=str(out)).train()


def test_two_resumes_of_one_run_the_second_is_refused_naming_the_holder(sb3_run, tmp_path, capsys):
    run = _unfinished(_copy(sb3_run, tmp_path / "copy"))
    first = _start_writer(tmp_path, "resume", run)
    try:
        line = _one_line_error(capsys, "resume", str(run))
        assert line.startswith(f"powerzoo: error: run folder {run} is being written by another")
        assert _holder(first) in line
        with pytest.raises(RunFolderBusyError, match=f"pid {first.pid} on "):
            Trainer.resume(run)
    finally:
        done = _finish(first, tmp_path, "resume")
    assert done == "finished 384"
    assert json.loads((run / "run_state.json").read_text())["status"] == "finished"


def test_checkpoint_clean_up_keeps_the_partial_folders_of_live_writers(tmp_path):
    store = rd.CheckpointStore(tmp_path, keep=2)
    store.root.mkdir()
    with subprocess.Popen([sys.executable, "-c", "pass"]) as ended:
        pass
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=-1)
    try:
        kept = store.root / f".partial-{live.pid}-writing"
        gone = [
            store.root / f".partial-{ended.pid}-killed",  # a writer no longer running
            store.root / f".partial-{os.getpid()}-mine",  # this process's own leftover
            store.root / ".partial-abc123",  # an older PowerZoo's name, without a pid
        ]
        for folder in [kept, *gone]:
            folder.mkdir()
        store.write(1, lambda folder: (folder / "f").write_text("x"))
        assert kept.is_dir() and not any(folder.exists() for folder in gone)
    finally:
        live.communicate(b"")


# ---- loading runs no code ----------------------------------------------------------------------
class _Mkdir:
    """A pickle whose loading creates the folder ``marker`` (proof that it ran)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _plant(run: Path, where: str, marker: Path) -> None:
    """Put a crafted pickle at ``where`` (a glob in ``run``; ``<zip>/<member>`` inside a zip),
    removing the array file a ``.pkl`` stands in for."""
    if ".zip/" in where:
        pattern, member = where.split(".zip/")
        for file in run.glob(pattern + ".zip"):
            with zipfile.ZipFile(file) as archive:
                members = {n: archive.read(n) for n in archive.namelist()}
            target = Path(file.parent / "evil.pth")
            torch.save(_Mkdir(marker), target)
            members[member] = target.read_bytes()
            target.unlink()
            with zipfile.ZipFile(file, "w") as archive:
                for name, data in members.items():
                    archive.writestr(name, data)
        return
    files = list(run.glob(where.replace(".pkl", ".npz"))) if where.endswith(".pkl") else []
    for twin in files:
        twin.unlink()
    targets = [p.with_suffix(".pkl") for p in files] if files else list(run.glob(where))
    assert targets, where
    for file in targets:
        if file.suffix == ".pt":
            torch.save(_Mkdir(marker), file)
        else:
            file.write_bytes(pickle.dumps(_Mkdir(marker)))


OPERATIONS = {
    "load final": lambda run: Trainer.load(run, model="final"),
    "load latest": lambda run: Trainer.load(run, model="latest"),
    "resume": lambda run: Trainer.resume(run),  # the run state says "running": checkpoints read
}


CRAFTED = [  # run, where the pickle goes, what reads it, how it is refused
    ("sb3", "vecnormalize.pkl", ("load final", "eval"), "refused"),
    ("sb3", "vecnormalize.npz", ("load final", "eval"), "corrupt"),
    ("sb3", "model.zip/policy.pth", ("load final", "eval"), "refused"),
    ("sb3", "checkpoints/step_*/vecnormalize.pkl", ("load latest", "resume"), "refused"),
    ("sb3", "checkpoints/step_*/model.zip/policy.pth", ("load latest", "resume"), "refused"),
    ("sb3", "checkpoints/step_*/rng.pkl", ("resume",), "refused"),
    ("sb3", "checkpoints/step_*/rng.npz", ("resume",), "corrupt"),
    ("mappo", "learner.pt", ("load final", "eval"), "refused"),
    ("mappo", "checkpoints/step_*/learner.pt", ("load latest", "resume"), "refused"),
    ("mappo", "checkpoints/step_*/collector.pkl", ("load latest", "resume"), "refused"),
    ("mappo", "checkpoints/step_*/collector.npz", ("resume",), "corrupt"),
    ("mappo", "checkpoints/step_*/rng.pkl", ("load latest", "resume"), "refused"),
]


@pytest.mark.parametrize("which, where, operations, refusal", CRAFTED)
def test_a_crafted_pickle_is_never_unpickled(
    sb3_run, mappo_run, tmp_path, capsys, which, where, operations, refusal
):
    run = _copy(sb3_run if which == "sb3" else mappo_run, tmp_path)
    write_json(run / "run_state.json", {"status": "running"})
    marker = tmp_path / "code-ran"
    _plant(run, where, marker)
    for name in operations:
        if name == "eval":
            err = _one_line_error(capsys, "eval", str(run), "--model", "final", "--episodes", "1")
            message = err.removeprefix("powerzoo: error: ")
        else:
            error = PickleRefusedError if refusal == "refused" else CorruptFileError
            skipped = refusal == "corrupt" and where.startswith("checkpoints")
            with pytest.warns(UserWarning) if skipped else contextlib.nullcontext():
                with pytest.raises(error) as caught:
                    OPERATIONS[name](run)
            message = str(caught.value)
        assert not marker.exists(), (name, message)
        assert "\n" not in message
        if refusal == "refused":
            assert "pass --trust-pickle" in message and "trust_pickle=True" in message
        else:
            assert "corrupt or unreadable (a pickle, not arrays" in message
        named = where.split(".zip/")[0] + ".zip" if ".zip/" in where else where
        assert Path(message.split(": ", 1)[0]).match(named), message


def test_crafted_objects_in_a_model_zips_data_are_never_decoded(sb3_run, tmp_path):
    import cloudpickle

    run = _copy(sb3_run, tmp_path)
    marker = tmp_path / "code-ran"
    file = run / "model.zip"
    with zipfile.ZipFile(file) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    data = json.loads(members["data"])
    payload = base64.b64encode(cloudpickle.dumps(_Mkdir(marker))).decode()
    data["observation_space"][":serialized:"] = payload
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(file, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    loaded = Trainer.load(run, model="final")  # built from the config: data is never decoded
    assert not marker.exists()
    assert loaded.num_timesteps == 384
    with pytest.raises(Exception):  # noqa: B017 (SB3's own load runs the payload, then fails)
        Trainer.load(run, model="final", trust_pickle=True)
    assert marker.is_dir()


def test_safe_and_trusted_loading_give_the_same_model(sb3_run, tmp_path):
    safe = Trainer.load(sb3_run, model="latest")
    trusted = Trainer.load(sb3_run, model="latest", trust_pickle=True)
    for key, value in safe.model.policy.state_dict().items():
        assert torch.equal(value, trusted.model.policy.state_dict()[key]), key
    assert safe.num_timesteps == trusted.num_timesteps == 384
    assert _scores(safe) == _scores(trusted)


# ---- run folders an older PowerZoo wrote ---------------------------------------------------------
def _to_pickle_format(run: Path) -> None:
    """Rewrite ``run`` as an older PowerZoo wrote it: pickles where the arrays are, NumPy
    objects in ``learner.pt``."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from powerzoo.rl.checkpoint import collector_from_arrays, runner_state_type
    from powerzoo.rl.sb3.files import read_vecnormalize, vecnormalize_from_stats

    trainer = Trainer.load(run)
    for file in sorted(run.rglob("*.npz")):
        if file.name.endswith("vecnormalize.npz"):
            venv = DummyVecEnv([lambda: trainer.make_eval_env("train")])
            vecnormalize_from_stats(venv, read_vecnormalize(file)).save(file.with_suffix(".pkl"))
        elif file.name == "rng.npz":
            obj = rng_from_arrays(sf.read_arrays(file))
            file.with_suffix(".pkl").write_bytes(pickle.dumps(obj))
        elif file.name == "collector.npz":
            obj = collector_from_arrays(
                sf.read_arrays(file), runner_state_type(trainer.get_env(), trainer.config.seed)
            )
            file.with_suffix(".pkl").write_bytes(pickle.dumps(obj))
        else:
            continue
        file.unlink()
    for file in run.rglob("learner.pt"):
        state = torch.load(file, weights_only=True)
        state["multipliers"] = state["multipliers"].numpy()
        torch.save(state, file)


@pytest.mark.parametrize("which", ["sb3", "mappo"])
def test_an_older_pickle_run_folder_needs_trust_pickle(sb3_run, mappo_run, tmp_path, capsys, which):
    new = sb3_run if which == "sb3" else mappo_run
    run = _copy(new, tmp_path / "old")
    _to_pickle_format(run)
    assert not list(run.rglob("*.npz")) or which == "mappo"  # MAPPO's policies are arrays
    first = "vecnormalize.pkl" if which == "sb3" else "learner.pt"
    with pytest.raises(PickleRefusedError, match="pass --trust-pickle") as caught:
        Trainer.load(run, model="final")
    assert caught.value.path == run / first
    line = _one_line_error(capsys, "eval", str(run), "--model", "final", "--episodes", "1")
    assert line.startswith(f"powerzoo: error: {run / first}: ")
    assert line.endswith(
        "unpickling it can run code, so it is not read by default. If the run folder comes "
        "from a trusted source, pass --trust-pickle (Python: trust_pickle=True)"
    )
    # trusted: the old path reads it, and it is the same model
    for model in ("final", "latest"):
        old = Trainer.load(run, model=model, trust_pickle=True)
        assert _scores(old) == _scores(Trainer.load(new, model=model))
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "1", "--trust-pickle"]) == 0
    # resume: refused, then trusted; it ends where the new-format run ends
    _unfinished(run)
    line = _one_line_error(capsys, "resume", str(run))
    assert "pass --trust-pickle" in line
    assert main(["resume", str(run), "--trust-pickle"]) == 0
    resumed, again = Trainer.load(run), Trainer.resume(_unfinished(_copy(new, tmp_path / "new")))
    assert resumed.num_timesteps == again.num_timesteps
    if which == "mappo":  # exact continuation: the same learner as resuming the new format
        for key, value in again.learner.state_dict().items():
            assert torch.equal(value, resumed.learner.state_dict()[key]), key
