"""Trainer edge cases: ``load`` on an instance, the end-of-training evaluation, whole-config
checks."""

from __future__ import annotations

import csv
import inspect
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import run_cli

from powerzoo.rl import ConfigError, SB3Trainer, Trainer, TrainerProtocol
from powerzoo.rl.config import TrainConfig
from powerzoo.rl.run_dir import CONFIG_FILE

TINY_PPO = {
    "n_steps": 64,
    "batch_size": 64,
    "n_epochs": 1,
}  # 2 envs x 64 steps = 128 env steps per rollout
QUIET = {"logging": {"progress_bar": False, "tensorboard": False}}


def _tiny(tmp_path: Path, name: str, **overrides) -> Trainer:
    options = {
        "total_timesteps": 256,
        "n_envs": 2,
        "seed": 0,
        "output_dir": str(tmp_path),
        "name": name,
        "algorithm_kwargs": TINY_PPO,
        **QUIET,
        **overrides,
    }
    return Trainer("battery_arbitrage", **options)


def _csv_steps(run: Path) -> list[int]:
    with (run / "evaluation" / "evaluation_metrics.csv").open() as handle:
        return [int(row["timestep"]) for row in csv.DictReader(handle)]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A finished 384-step PPO run on battery_arbitrage:
    evaluated at 256 and at the end, checkpointed every 128."""
    out = tmp_path_factory.mktemp("runs")
    trainer = _tiny(
        out,
        "tiny",
        total_timesteps=384,
        evaluation={"freq": 256, "episodes": 2},
        checkpoint={"freq": 128},
    )
    trainer.train()
    trainer.close()
    return trainer.run_dir


# ---- trainer.load(path) on an instance -----------------------------------------------------------
def test_load_on_an_instance_loads_into_it(tiny_run):
    fresh = Trainer.load(tiny_run)  # the classmethod form still builds a new trainer
    assert (
        isinstance(fresh, TrainerProtocol)
        and isinstance(fresh, SB3Trainer)
        and fresh.model.num_timesteps == 384
        and fresh.run_dir == tiny_run
    )

    trainer = Trainer("battery_arbitrage", total_timesteps=10, algorithm="SAC")
    returned = trainer.load(tiny_run)
    assert returned is trainer
    assert (
        trainer.algorithm == "PPO" and trainer.config.total_timesteps == 384
    )  # the saved run's config
    assert trainer.model is not None and trainer.model.num_timesteps == 384
    assert trainer.run_dir == tiny_run
    stats, expected = trainer.policy().obs_stats, fresh.policy().obs_stats
    assert stats is not None and np.array_equal(
        stats["mean"], expected["mean"]
    )  # normalisation statistics
    a = trainer.evaluate(split="val", n_episodes=2)
    b = fresh.evaluate(split="val", n_episodes=2)
    assert a["mean_return"] == b["mean_return"]


def test_load_on_an_instance_replaces_a_trained_model_and_picks_the_model(tiny_run):
    trainer = Trainer.load(tiny_run, model="latest")
    first = trainer.model
    trainer.load(tiny_run, model="best")
    assert trainer.model is not first
    best = json.loads((tiny_run / "evaluation" / "best_model.json").read_text())
    from powerzoo.benchmarks.evaluation import evaluate_days

    again = evaluate_days(
        trainer.policy(), trainer.make_eval_env("val"), best["day_ids"], seed=best["seed"]
    )
    assert again["mean_return"] == pytest.approx(best["mean_return"], rel=1e-9)


def test_load_on_an_instance_of_another_task_is_refused_and_changes_nothing(tiny_run):
    trainer = Trainer("dc_microgrid", total_timesteps=10)
    with pytest.raises(
        ValueError, match=r"holds a battery_arbitrage model but this trainer is for dc_microgrid"
    ):
        trainer.load(tiny_run)
    assert trainer.task == "dc_microgrid" and trainer.model is None and trainer.run_dir is None
    with pytest.raises(FileNotFoundError, match="no config.yaml"):
        trainer.load(tiny_run / "evaluation")


def test_load_documents_both_forms():
    both = ["path", "model", "trust_pickle"]
    assert list(inspect.signature(Trainer.load).parameters) == both
    assert list(inspect.signature(Trainer("battery_arbitrage").load).parameters) == both
    assert (
        "trainer.load(path)" in Trainer.load.__doc__
        and "Trainer.load(path)" in Trainer.load.__doc__
    )


# ---- evaluate once more when training ends -------------------------------------------------------
def test_a_run_shorter_than_the_evaluation_period_is_still_evaluated(tmp_path):
    trainer = _tiny(tmp_path, "short", evaluation={"freq": 10_000, "episodes": 2}, checkpoint=None)
    result = trainer.train()
    run = result.run_dir
    assert _csv_steps(run) == [256]
    assert (
        len(result.evaluations) == 1
        and result.best_mean_return == result.evaluations[0]["mean_return"]
    )
    assert (run / "evaluation" / "best_model.zip").is_file()
    assert json.loads((run / "evaluation" / "best_model.json").read_text())["timestep"] == 256
    assert Trainer.load(run, model="best").model.num_timesteps == 256


def test_the_final_evaluation_follows_the_periodic_ones(tiny_run):
    assert _csv_steps(tiny_run) == [
        256,
        384,
    ]  # (a run ending on an evaluation step: test_training's short_run)


def test_resume_does_not_duplicate_the_final_evaluation(tiny_run, tmp_path):
    # finished run: resuming changes nothing
    run = tmp_path / "finished"
    shutil.copytree(tiny_run, run)
    Trainer.resume(run).close()
    assert _csv_steps(run) == [256, 384]
    # killed after the final evaluation was written,
    # before the final checkpoint: resume from step 256
    run = tmp_path / "killed"
    shutil.copytree(tiny_run, run)
    checkpoints = run / "checkpoints"
    shutil.rmtree(checkpoints / "step_000000000384")
    (checkpoints / "latest").write_text("step_000000000256")
    (run / "model.zip").unlink()
    state = json.loads((run / "run_state.json").read_text())
    (run / "run_state.json").write_text(
        json.dumps({**state, "status": "running", "num_timesteps": 256})
    )
    resumed = Trainer.resume(run)
    resumed.close()
    assert resumed.result.num_timesteps == 384 and _csv_steps(run) == [256, 384]
    assert [row["timestep"] for row in resumed.result.evaluations] == [256, 384]


# ---- the whole config is checked before the run folder exists -----------------------------------
def _config_file(tmp_path: Path, env: dict | None = None, **fields) -> Path:
    cfg = {
        "task": "battery_arbitrage",
        "total_timesteps": 256,
        "n_envs": 2,
        "output_dir": str(tmp_path / "runs"),
        "algorithm_kwargs": TINY_PPO,
        **QUIET,
        **({"env": env} if env is not None else {}),
        **fields,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"env": {"split": "tran"}},
            "field 'env.split': unknown split 'tran' for battery_arbitrage; valid: train, val",
        ),
        (
            {"evaluation": {"split": "validation"}},
            "field 'evaluation.split': unknown split 'validation'",
        ),
        (
            {"env": {"task_kwargs": {"energy_capacity": 200}}},
            "field 'env.task_kwargs': battery_arbitrage got unknown "
            "parameter(s) ['energy_capacity']",
        ),
        (
            {"env": {"task_kwargs": {"energy_capacity_mwh": -1}}},
            "field 'env.task_kwargs': energy_capacity_mwh must be",
        ),
        ({"env": {"obs_mode": "local"}}, "field 'env.obs_mode': battery_arbitrage is single-agent"),
        (
            {"env": {"forecast_horizon": 100}},
            "field 'env.forecast_horizon': forecast_horizon 100 exceeds",
        ),
        ({"env": {"reward": "greedy"}}, "field 'env.reward': unknown reward preset 'greedy'"),
        (
            {"task": "marl_opf", "env": {"obs_mode": "everything"}},
            "field 'env.obs_mode': unknown obs_mode 'everything'",
        ),
        (
            {"task": "marl_opf", "env": {"forecast_horizon": 4}},
            "field 'env.forecast_horizon': forecast_horizon is for single-agent tasks",
        ),
    ],
)
def test_fields_the_task_rejects_fail_before_any_folder(tmp_path, fields, message):
    path = _config_file(tmp_path, **fields)
    with pytest.raises(ConfigError) as err:
        Trainer(path)
    assert message in str(err.value) and str(path) in str(err.value)
    assert not (tmp_path / "runs").exists()


def test_every_bad_field_is_reported_at_once(tmp_path):
    path = _config_file(
        tmp_path, env={"split": "tran", "reward": "greedy"}, evaluation={"split": "nope"}
    )
    with pytest.raises(ConfigError) as err:
        Trainer(path)
    assert all(
        f"field '{f}'" in str(err.value) for f in ("env.split", "evaluation.split", "env.reward")
    )


def test_bad_split_from_the_command_line_leaves_no_folder(tmp_path):
    path = _config_file(tmp_path, env={"split": "tran"})
    result = run_cli("train", "-c", str(path))
    assert result.returncode == 2
    assert f"config {path}: field 'env.split': unknown split 'tran'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"policy": "MlpPolicyy"}, ValueError),
        ({"init_model": "missing/model.zip"}, FileNotFoundError),
    ],
)
def test_a_model_that_cannot_be_built_leaves_no_folder(tmp_path, fields, error):
    trainer = Trainer(_config_file(tmp_path, **fields))
    with pytest.raises(error):
        trainer.train()
    assert not (tmp_path / "runs").exists()


def test_a_section_given_as_keyword_updates_the_files_section(tmp_path):
    path = _config_file(tmp_path, evaluation={"split": "val", "episodes": 3, "freq": 1000})
    trainer = Trainer(
        path, evaluation={"freq": 128}
    )  # what `powerzoo train -c FILE --eval-freq 128` does
    assert trainer.config.evaluation.model_dump() == {
        "split": "val",
        "freq": 128,
        "episodes": 3,
        "deterministic": True,
    }
    assert Trainer(path, evaluation=None).config.evaluation is None


def test_evaluation_scores_the_task_objective_not_the_training_penalty():
    from powerzoo.envs.wrappers import RewardOverrideWrapper
    from powerzoo.rl import Trainer

    def wrappers(env):
        chain = [env]
        while hasattr(chain[-1], "env"):
            chain.append(chain[-1].env)
        return {type(e) for e in chain}

    trainer = Trainer("battery_arbitrage", reward="penalized", total_timesteps=64)
    assert RewardOverrideWrapper in wrappers(
        trainer.make_eval_env("val")
    )  # model selection: training reward
    objective = trainer.make_eval_env("test", objective=True)
    assert RewardOverrideWrapper not in wrappers(objective)
    objective.reset(seed=0)
    *_, info = objective.step(
        objective.action_space.high
    )  # ask for more than the SOC allows all day
    assert "task_reward" not in info


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path):
    from powerzoo.rl.run_dir import free_run_name, run_name

    when = 1_800_000_000.0
    first = free_run_name(tmp_path, "PPO", "dso", 0, when)
    assert first == run_name("PPO", "dso", 0, when)
    (tmp_path / first).mkdir()
    second = free_run_name(tmp_path, "PPO", "dso", 0, when)
    assert second == f"{first}-2"
    (tmp_path / second).mkdir()
    assert free_run_name(tmp_path, "PPO", "dso", 0, when) == f"{first}-3"
    # two trainers built back to back (same second) plan different folders
    options = {"output_dir": str(tmp_path), "evaluation": None, "checkpoint": None}
    a = Trainer("battery_arbitrage", algorithm="PPO", total_timesteps=64, seed=0, **options)
    a._ensure_run_dir()
    b = Trainer("battery_arbitrage", algorithm="PPO", total_timesteps=64, seed=0, **options)
    assert b._planned_run_dir() != a.run_dir


def test_a2c_with_policy_kwargs_trains_and_saves_the_config_as_written(tmp_path):
    """SB3's A2C writes its optimizer class into the policy_kwargs it is given: the config's own
    dict must not receive it (a class cannot be saved in the run folder's config)."""
    kwargs = {"n_steps": 8, "policy_kwargs": {"log_std_init": -1.0}}
    trainer = Trainer(
        "battery_arbitrage",
        algorithm="A2C",
        total_timesteps=16,
        n_envs=2,
        algorithm_kwargs=kwargs,
        evaluation=None,
        checkpoint=None,
        output_dir=str(tmp_path),
        logging={"tensorboard": False, "progress_bar": False},
    )
    result = trainer.train()
    assert result.status == "finished" and result.num_timesteps == 16
    assert trainer.config.algorithm_kwargs["policy_kwargs"] == {"log_std_init": -1.0}
    saved = TrainConfig.from_file(result.run_dir / CONFIG_FILE).algorithm_kwargs
    assert saved["policy_kwargs"] == {"log_std_init": -1.0}
    assert kwargs == {"n_steps": 8, "policy_kwargs": {"log_std_init": -1.0}}
