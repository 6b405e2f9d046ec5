"""Damaged datasets and killed collections, met as a user meets them.

A dataset whose gzip block is damaged or whose data holds a NaN is refused with the file (and the
dataset) named; a `powerzoo collect` killed by SIGTERM removes its temporary file, and one killed
by SIGKILL leaves one that the next collection to the same path removes. A full disk is one
error naming the file, its temporary file removed; a Minari dataset id cannot name a folder
outside Minari's dataset root.
"""

import errno
import os
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest
from helpers import SAFETY_TIMEOUT_S, run_cli, wait_until

from powerzoo.benchmarks.offline import DatasetGenerator, DatasetLoader
from powerzoo.benchmarks.offline.writer import write_hdf5_atomically
from powerzoo.benchmarks.policies import RandomPolicy
from powerzoo.fileio import CorruptFileError, DiskFullError
from powerzoo.rl import make_env

TASK = "battery_arbitrage"


def collect(path, n_episodes):
    env = make_env(TASK, num_envs=16)
    DatasetGenerator(env).collect(RandomPolicy(env.action_space), n_episodes, path).close()
    return path


def damage_chunk(path, dataset, chunk):
    """Overwrite 64 bytes inside compressed chunk ``chunk`` of ``dataset``, as a bad disk would."""
    with h5py.File(path, "r") as f:
        info = f[dataset].id.get_chunk_info(chunk)
    assert info.size > 200
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(b"\0" * 64)


def hidden_tmp(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# ---- damaged files ------------------------------------------------------------------------------
def test_a_damaged_gzip_block_names_the_file_and_the_dataset(tmp_path):
    path = collect(tmp_path / "d.h5", 200)  # 9,600 rows: observations span two chunks
    with h5py.File(path, "r") as f:
        assert f["observations"].id.get_num_chunks() == 2
    damage_chunk(path, "observations", 0)
    with DatasetLoader(path) as dataset:  # the check at opening decodes the last chunks only
        with pytest.raises(CorruptFileError) as err:
            _ = dataset.observations
    assert err.value.path == path
    message = str(err.value)
    assert message.startswith(f"{path}: corrupt or unreadable (dataset 'observations' cannot be ")
    assert "\n" not in message
    with DatasetLoader(path) as dataset, pytest.raises(CorruptFileError, match="observations"):
        dataset.episode(0)

    damage_chunk(path, "observations", 1)  # the last chunk: refused when opened
    with pytest.raises(CorruptFileError, match=r"d\.h5: corrupt or unreadable \(dataset 'obs"):
        DatasetLoader(path)


def test_a_truncated_dataset_is_one_line_naming_the_file(tmp_path):
    path = collect(tmp_path / "d.h5", 20)
    path.write_bytes(path.read_bytes()[:30_000])
    with pytest.raises(CorruptFileError) as err:
        DatasetLoader(path)
    assert str(err.value).startswith(f"{path}: corrupt or unreadable (not a readable HDF5 file: ")
    assert "truncated file" in str(err.value) and "\n" not in str(err.value)


def test_a_nan_inside_a_dataset_is_refused_unless_asked_for(tmp_path):
    path = collect(tmp_path / "d.h5", 4)
    with h5py.File(path, "a") as f:
        f["rewards"][100] = np.nan
        f["observations"][7, 2] = np.inf
    with DatasetLoader(path) as dataset:
        assert dataset.actions.shape == (192, 1)  # clean datasets load
        with pytest.raises(ValueError) as err:
            _ = dataset.rewards
        assert str(err.value).startswith(
            f"{path}: dataset 'rewards' holds 1 non-finite value(s) (NaN or inf), the first in "
            "row 100;"
        )
        assert "check_finite=False" in str(err.value)
        with pytest.raises(ValueError, match="dataset 'observations' .* first in row 7;"):
            next(dataset.iter_minibatches(32))
        with pytest.raises(ValueError, match="dataset 'rewards' .* first in row 100;"):
            dataset.episode(2)  # rows 96..143
        assert dataset.episode(1)["rewards"].shape == (48,)  # rows 48..95 are clean
    with DatasetLoader(path, check_finite=False) as dataset:
        assert np.isnan(dataset.rewards[100]) and np.isinf(dataset.observations[7, 2])


# ---- killed collections -------------------------------------------------------------------------
def start_long_collect(path):
    """A real `powerzoo collect` far too long to finish; returns once its temporary file exists."""
    child = subprocess.Popen(
        [sys.executable, "-m", "powerzoo.cli.main", "collect", TASK, "--episodes", "1000000"]
        + ["-o", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )

    def rolling_out() -> bool:  # transitions written: the temporary file grows past its header
        sizes = []
        for name in hidden_tmp(path.parent):
            try:
                sizes.append((path.parent / name).stat().st_size)
            except FileNotFoundError:  # renamed or removed meanwhile
                pass
        return any(size > 100_000 for size in sizes)

    wait_until(rolling_out, "the collection wrote its first transitions", child)
    return child


def test_sigterm_on_collect_removes_its_temporary_file(tmp_path):
    path = tmp_path / "d.h5"
    child = start_long_collect(path)
    try:
        os.kill(child.pid, signal.SIGTERM)
        _, stderr = child.communicate(timeout=SAFETY_TIMEOUT_S)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
    assert child.returncode == -signal.SIGTERM, stderr.decode()  # ended by the signal itself
    assert hidden_tmp(tmp_path) == [] and not path.exists()


def test_the_next_collect_removes_what_a_sigkilled_one_left(tmp_path):
    path = tmp_path / "d.h5"
    child = start_long_collect(path)
    try:
        os.killpg(child.pid, signal.SIGKILL)
    finally:
        child.communicate()
    assert child.returncode == -signal.SIGKILL
    stale = hidden_tmp(tmp_path)
    assert len(stale) == 1 and stale[0].endswith(f".{child.pid}.tmp")
    # a live writer's temporary file (this test process) is never touched
    live = tmp_path / f".d-live.{stale[0].split('.')[-3]}.{os.getpid()}.tmp"
    live.touch()
    run = run_cli("collect", TASK, "--episodes", "2", "-o", str(path))
    assert run.returncode == 0, run.stderr
    assert hidden_tmp(tmp_path) == [live.name]
    assert DatasetLoader(path).n_episodes == 2


# ---- full disks and dataset ids -----------------------------------------------------------------
def test_a_full_disk_is_one_error_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "d.h5"

    def fill(h5file):
        h5file.create_dataset("x", data=np.zeros(10))
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(DiskFullError) as err:
        write_hdf5_atomically(path, fill)
    assert str(err.value) == (
        f"cannot write {path}: No space left on device (errno 28); the partial dataset was "
        f"removed and {path} left as it was"
    )
    assert err.value.errno == errno.ENOSPC and isinstance(err.value, OSError)
    assert hidden_tmp(tmp_path) == [] and not path.exists()


def test_a_dataset_id_cannot_leave_the_minari_root(tmp_path, monkeypatch):
    root = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    dataset = DatasetLoader(collect(tmp_path / "data" / "d.h5", 2))
    for bad in ("../../escape-v0", "/abs/x-v0", "ns/../../x-v0", "a//b-v0", "ns/.hidden-v0"):
        with pytest.raises(ValueError) as err:
            dataset.to_minari(bad)
        message = str(err.value)
        assert message.startswith(f"dataset id {bad!r}: part ") and "\n" not in message
        assert "is not allowed; use one plain folder name" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no folder anywhere
    dataset.close()
