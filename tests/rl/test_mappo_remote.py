"""Remote rollouts of the native multi-agent trainer (powerzoo.rl.mappo.remote): equal to
in-process ones."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from helpers import SAFETY_TIMEOUT_S, run_python  # noqa: E402

from powerzoo.fileio import atomic_write_text, write_json  # noqa: E402
from powerzoo.rl import Trainer  # noqa: E402
from powerzoo.rl.mappo.collector import Collector  # noqa: E402
from powerzoo.rl.mappo.hparams import MAPPOParams  # noqa: E402
from powerzoo.rl.mappo.remote import (  # noqa: E402
    RemoteCollector,
    RolloutWorker,
    RowSlicedGenerator,
    import_ray,
    split_rows,
)
from powerzoo.rl.mappo.trainer import MAPPOTrainer  # noqa: E402

SMALL = {"n_steps": 24, "n_epochs": 2, "hidden_sizes": [16, 16]}


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def trainer(
    tmp_path: Path, name: str, algorithm: str = "MAPPO", workers: int = 0, **kw
) -> MAPPOTrainer:
    options = {
        "n_envs": 5,
        "evaluation": None,
        "checkpoint": None,
        "output_dir": str(tmp_path),
        "name": name,
        "logging": {"tensorboard": False, "progress_bar": False},
        "algorithm_kwargs": {**SMALL, "rollout_workers": workers},
        **kw,
    }
    return Trainer("marl_opf", algorithm=algorithm, total_timesteps=240, seed=3, **options)


def record_iterations(t: MAPPOTrainer) -> list[dict[str, float]]:
    """The scalars of every iteration (timings dropped)."""
    rows, step = [], t._iteration

    def wrapped() -> dict[str, float]:
        out = step()
        rows.append({k: v for k, v in out.items() if not k.startswith("time/")})
        return out

    t._iteration = wrapped
    return rows


def assert_same_weights(a: MAPPOTrainer, b: MAPPOTrainer) -> None:
    sa, sb = a.learner.state_dict(), b.learner.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key
    np.testing.assert_array_equal(a.learner.multipliers, b.learner.multipliers)


# ---- pieces without actors ---------------------------------------------------------------------
def test_params_and_bad_input():
    assert MAPPOParams().rollout_workers == 0 and MAPPOParams().rollout_address is None
    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="rollout_workers"):
            MAPPOParams(rollout_workers=bad)
    with pytest.raises(ValueError, match="needs rollout_workers > 0"):
        MAPPOParams(rollout_address="auto")
    with pytest.raises(ValueError, match="rollout_address"):
        MAPPOParams(rollout_workers=2, rollout_address=" ")
    with pytest.raises(ValueError, match="rollout_exact"):
        MAPPOParams(rollout_workers=2, rollout_exact=1)
    with pytest.raises(ValueError, match=r"rollout_workers \(6\) must be <= n_envs \(5\)"):
        trainer(Path("/tmp"), "never", workers=6)
    assert split_rows(5, 2) == [(0, 3), (3, 5)] and split_rows(4, 4) == [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 4),
    ]
    with pytest.raises(ValueError, match="rollout_workers"):
        split_rows(3, 4)


def test_missing_ray_gives_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r'pip install "powerzoo\[ray\]"'):
        import_ray()


def test_row_sliced_generator_draws_the_full_batch_rows():
    full = np.random.default_rng(7)
    blocks = [
        RowSlicedGenerator(np.random.default_rng(7), 5, lo, hi - lo) for lo, hi in split_rows(5, 2)
    ]
    for draw in (
        lambda g, n: g.integers(0, 90, size=n),
        lambda g, n: g.random((n, 3, 2)),
        lambda g, n: g.standard_normal((n, 4)),
        lambda g, n: g.uniform(0.2, 0.9, size=(n, 3)),
    ):
        expected = draw(full, 5)
        got = np.concatenate([draw(b, b.n) for b in blocks])
        np.testing.assert_array_equal(got, expected)
    assert all(b.bit_generator.state == full.bit_generator.state for b in blocks)
    assert (
        full.standard_normal() == blocks[1].standard_normal()
    )  # draws without a batch axis pass through


def test_blocks_without_padding_match_to_float32_rounding(tmp_path):
    """``rollout_exact=False`` (block-sized network batches), workers run in this process: same
    rollout to ~1e-6."""
    t = trainer(tmp_path, "blocks", algorithm_kwargs={**SMALL, "rollout_exact": False})
    learner = t._ensure_learner()
    local = Collector(t.get_env(), learner)
    local.reset(3)
    params = learner.params.to_dict()
    workers = [
        RolloutWorker(
            t.task,
            t.config.env.split,
            t._env_kwargs(),
            5,
            lo,
            hi - lo,
            learner.layouts,
            params,
            learner.centralised,
            (),
            [],
            torch.get_num_threads(),
        )
        for lo, hi in split_rows(5, 2)
    ]
    for w in workers:
        w.reset(3)
    torch.manual_seed(5)
    a = local.collect(8)
    torch.manual_seed(5)
    noise = torch.stack(
        [torch.randn((5, 5, 1)) for _ in range(8)]
    ).numpy()  # the in-process draws, step by step
    weights, bounds = learner.state_dict(), split_rows(5, 2)
    parts = [
        w.collect(weights, {"agents": noise[:, lo:hi]}, 8)
        for w, (lo, hi) in zip(workers, bounds, strict=True)
    ]
    for f in ("obs", "actions", "log_probs", "values", "rewards"):
        joined = np.concatenate([getattr(p["rollout"].groups["agents"], f) for p in parts], axis=1)
        np.testing.assert_allclose(
            joined, getattr(a[0].groups["agents"], f), rtol=1e-5, atol=1e-5, err_msg=f
        )


# ---- actors ------------------------------------------------------------------------------------
def test_two_actors_collect_the_in_process_rollouts(ray_session, tmp_path):
    """MAPPO-L (costs, cost critics), 5 envs on 2 actors (3 + 2): two rollouts crossing the
    horizon."""
    t = trainer(tmp_path, "collect", "MAPPO-L")
    learner = t._ensure_learner()
    local = Collector(t.get_env(), learner)
    remote = RemoteCollector(learner, t.task, t.config.env.split, t._env_kwargs(), 5, 2)
    try:
        local.reset(3)
        remote.reset(3)
        for it in range(2):  # 2 x 32 steps: every env truncates at step 48
            torch.manual_seed(10 + it)
            a = local.collect(32)
            rng_local = torch.get_rng_state()
            torch.manual_seed(10 + it)
            b = remote.collect(32)
            assert torch.equal(
                rng_local, torch.get_rng_state()
            )  # the learner's stream is left alike
            for name, ga in a[0].groups.items():
                for f in dataclasses.fields(ga):
                    x, y = getattr(ga, f.name), getattr(b[0].groups[name], f.name)
                    assert (x is None and y is None) or np.array_equal(x, y), f.name
            for f in ("states", "costs", "terminated", "truncated"):
                assert np.array_equal(getattr(a[0], f), getattr(b[0], f)), f
            for f in dataclasses.fields(a[1]):
                assert np.array_equal(getattr(a[1], f.name), getattr(b[1], f.name)), f.name
            for x, y in ((a[2], b[2]), (a[3], b[3])):
                assert all(np.array_equal(x[k], y[k]) for k in x)
        assert (
            a[0].truncated.sum() == 5 and len(b[1].returns) == 5
        )  # the episodes ended and were reported
        assert (
            len(set(a[0].groups["agents"].rewards[0, :, 0].tolist())) > 1
        )  # envs run different days
        sa, sb = local.state(), remote.state()
        assert sa["runner_rng"] == sb["runner_rng"]
        for key in ("ep_agent_returns", "ep_costs", "ep_selected", "ep_lengths"):
            np.testing.assert_array_equal(sa[key], sb[key])
        for f in dataclasses.fields(sa["runner_state"]):
            np.testing.assert_array_equal(
                getattr(sa["runner_state"], f.name), getattr(sb["runner_state"], f.name)
            )
    finally:
        remote.close()


@pytest.mark.slow
def test_remote_training_equals_local_and_resumes_both_ways(ray_session, tmp_path):
    """Two MAPPO iterations: same scalars and weights; a remote checkpoint resumes remotely and
    in-process."""
    local = trainer(tmp_path, "local")
    local_rows = record_iterations(local)
    local.train()
    remote = trainer(tmp_path, "remote", workers=2, checkpoint={"freq": 120, "keep": 5})
    remote_rows = record_iterations(remote)
    run = remote.train().run_dir
    remote.close()
    assert remote.num_timesteps == local.num_timesteps == 240
    assert remote_rows == local_rows and "rollout/ep_return_mean" in remote_rows[-1]
    assert_same_weights(local, remote)
    # "killed" after the checkpoint at step 120
    killed = tmp_path / "killed"
    shutil.copytree(run, killed)
    shutil.rmtree(killed / "checkpoints" / "step_000000000240")
    atomic_write_text(killed / "checkpoints" / "latest", "step_000000000120")
    write_json(killed / "run_state.json", {"status": "running"})
    in_process = tmp_path / "in_process"
    shutil.copytree(killed, in_process)
    resumed = Trainer.resume(killed)  # its config still asks for 2 workers
    resumed.close()
    assert resumed.num_timesteps == 240 and resumed.params.rollout_workers == 2
    assert_same_weights(local, resumed)
    config = remote.config.model_copy(deep=True)
    config.algorithm_kwargs["rollout_workers"] = 0
    resumed_local = MAPPOTrainer(config).resume(in_process)
    assert resumed_local.num_timesteps == 240 and resumed_local.params.rollout_workers == 0
    assert_same_weights(local, resumed_local)


def test_more_workers_than_a_local_ray_session_has_cpus_is_refused(tmp_path):
    """A Ray session the trainer starts itself never grows: surplus actors would wait forever."""
    code = f"""
import os
from powerzoo.rl import Trainer
workers = (os.cpu_count() or 1) + 1
trainer = Trainer("marl_opf", algorithm="MAPPO", total_timesteps=240, n_envs=workers,
                  output_dir={str(tmp_path)!r}, evaluation=None, checkpoint=None,
                  logging={{"tensorboard": False, "progress_bar": False}},
                  algorithm_kwargs={{"n_steps": 8, "rollout_workers": workers}})
try:
    trainer.train()
except ValueError as err:
    print(err)
"""
    result = run_python(code, timeout=SAFETY_TIMEOUT_S)  # a guard against a hang only
    assert result.returncode == 0, result.stderr
    assert "rollout workers" not in result.stdout  # the error, not the old warning
    assert "needs" in result.stdout and "use rollout_workers <=" in result.stdout
