"""Compute tracks: the wall-clock stop condition in both trainer families, the track in a
campaign file, and the compute fields of a trial record."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import small_native_trainer

from powerzoo.rl import Trainer
from powerzoo.rl.campaigns import CampaignError, parse_campaign, run_local
from powerzoo.rl.campaigns.spec import CampaignSpec
from powerzoo.rl.conditions import CpuTime, TrainingProgress, WallClock, condition_from_dict
from powerzoo.rl.tracks import L_ENV_STEPS, S_WALL_CLOCK_S, TRACKS, apply_track, resolve_track


class TickingClock:
    """A fake clock: every reading is ``tick`` seconds after the last one."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick, self.readings = 0.0, tick, 0

    def __call__(self) -> float:
        self.now += self.tick
        self.readings += 1
        return self.now


def test_wall_clock_counts_from_its_creation_on_its_own_clock():
    clock = TickingClock(1.0)
    condition = WallClock(3.0, clock=clock)  # started at 1
    progress = TrainingProgress(0)
    assert [condition(progress) for _ in range(4)] == [False, False, True, True]  # 2, 3, 4, 5 s
    assert condition.describe() == "wall_clock: spent the allowance of 3 s"
    assert condition_from_dict({"type": "wall_clock", "seconds": 300}).seconds == 300.0
    with pytest.raises(ValueError, match="positive number"):
        WallClock(0.0)
    with pytest.raises(ValueError, match="unknown field"):
        condition_from_dict({"type": "wall_clock", "seconds": 1, "clock": "time.time"})


def test_cpu_time_counts_this_process_cpu_not_the_wall_clock():
    import time

    clock = TickingClock(2.0)
    condition = CpuTime(5.0, clock=clock)  # started at 2
    progress = TrainingProgress(0)
    assert [condition(progress) for _ in range(3)] == [False, False, True]  # 4, 6, 8 s
    assert condition.describe() == "cpu_time: spent the allowance of 5 CPU s"
    built = condition_from_dict({"type": "cpu_time", "seconds": 300})
    assert isinstance(built, CpuTime) and built.clock is time.process_time
    # sleeping costs wall time, not CPU time: a 0.05 s CPU allowance survives a 0.2 s sleep
    sleeper = CpuTime(0.05)
    time.sleep(0.2)
    assert not sleeper(progress)
    with pytest.raises(ValueError, match="CpuTime.seconds must be a positive number"):
        CpuTime(-1.0)


@pytest.mark.parametrize("kind", ["sb3", "native"])
def test_wall_clock_stops_a_tiny_training_in_both_trainer_families(tmp_path, kind):
    # one clock second per reading: the allowance of 5 s is spent after a few checks, whatever
    # the machine's speed; the budget of 4,096 env steps is far from reached
    clock = TickingClock(1.0)
    stop = WallClock(5.0, clock=clock)
    if kind == "sb3":
        trainer = Trainer(
            "battery_arbitrage",
            algorithm="PPO",
            total_timesteps=4096,
            n_envs=2,
            evaluation=None,
            checkpoint=None,
            output_dir=str(tmp_path),
            logging={"tensorboard": False, "progress_bar": False},
            algorithm_kwargs={"n_steps": 16, "batch_size": 32},
        )
        per_check = 2  # SB3 asks after every env step of its 2 envs
    else:
        trainer = small_native_trainer(tmp_path, steps=4096)
        per_check = 8 * 4  # the native trainer asks after every rollout (n_steps x n_envs)
    result = trainer.train(stop_conditions=[stop])
    trainer.close()
    assert result.status == "stopped"
    assert result.stop_reason == "wall_clock: spent the allowance of 5 s"
    assert result.num_timesteps == 5 * per_check  # checked at readings 2..6 of the clock
    assert clock.readings == 6


def test_tracks_resolve_and_replace_the_step_budget():
    assert resolve_track("s") is TRACKS["S"]
    assert (TRACKS["S"].wall_clock_s, TRACKS["S"].max_env_steps) == (S_WALL_CLOCK_S, L_ENV_STEPS)
    smoke = resolve_track({"name": "S", "wall_clock_s": 2})
    assert (smoke.wall_clock_s, smoke.standard) == (2.0, False)
    with pytest.raises(ValueError, match="another track"):
        resolve_track({"name": "S", "wall_clock_s": 600})
    with pytest.raises(ValueError, match="unknown track"):
        resolve_track("M")
    cpu = resolve_track({"name": "S", "clock": "cpu"})
    assert (cpu.wall_clock_s, cpu.standard, cpu.clock) == (S_WALL_CLOCK_S, True, "cpu")
    with pytest.raises(ValueError, match="clock must be one of wall, cpu"):
        resolve_track({"name": "S", "clock": "gpu"})
    config = {
        "task": "battery_arbitrage",
        "algorithm": "PPO",
        "total_timesteps": None,
        "episodes": 20,
        "stop_conditions": [
            {"type": "no_improvement", "evaluations": 3},
            {"type": "wall_clock", "seconds": 9.0},
        ],
    }
    out = apply_track(config, TRACKS["S"])
    assert (out["total_timesteps"], out["episodes"]) == (L_ENV_STEPS, None)
    assert out["stop_conditions"] == [
        {"type": "no_improvement", "evaluations": 3},
        {"type": "wall_clock", "seconds": 300.0},
    ]
    # counted in CPU time: the timer is replaced, not doubled
    on_cpu = apply_track(out, cpu)["stop_conditions"]
    assert on_cpu == [
        {"type": "no_improvement", "evaluations": 3},
        {"type": "cpu_time", "seconds": 300.0},
    ]


def _campaign(**extra):
    return {
        "name": "tracks",
        "tasks": ["battery_arbitrage"],
        "seeds": [0],
        "budget": {"total_timesteps": 256, "n_envs": 2},
        "evaluation": {
            "split": "test",
            "episodes": 2,
            "baselines": [],
            "model": "final",
            "plots": False,
        },
        "algorithms": {
            "PPO": {
                "settings": {
                    "steps": {
                        "algorithm_kwargs": {"n_steps": 64, "batch_size": 64},
                        "overrides": {"evaluation": None},
                        "track": None,
                    },
                    "smoke": {
                        "algorithm_kwargs": {"n_steps": 64, "batch_size": 64},
                        "overrides": {"evaluation": None},
                    },
                }
            }
        },
        **extra,
    }


def test_campaign_track_field_and_per_setting_override():
    campaign = parse_campaign(_campaign(track={"name": "S", "wall_clock_s": 1}))
    by_setting = {t.setting: t for t in campaign.trials}
    assert by_setting["steps"].track is None
    assert by_setting["steps"].config["total_timesteps"] == 256
    smoke = by_setting["smoke"]
    assert smoke.track == {
        "name": "S",
        "wall_clock_s": 1.0,
        "max_env_steps": L_ENV_STEPS,
        "standard": False,
        "clock": "wall",
    }
    assert smoke.config["total_timesteps"] == L_ENV_STEPS
    assert {"type": "wall_clock", "seconds": 1.0} in smoke.config["stop_conditions"]
    assert CampaignSpec.from_dict(campaign.to_dict()) == campaign
    old = campaign.to_dict()
    for trial in old["trials"]:
        del trial["track"]  # a campaign.json written before tracks existed still reads
    assert CampaignSpec.from_dict(old).trials[0].track is None
    with pytest.raises(CampaignError, match="unknown track"):
        parse_campaign(_campaign(track="XL"))


def test_trial_record_logs_track_steps_times_and_hardware(tmp_path):
    # a 1-second allowance (real clock) against a 10M-step cap: the wall clock ends training
    campaign = parse_campaign(_campaign(track={"name": "S", "wall_clock_s": 1}))
    out = run_local(campaign, tmp_path / "out", progress=False, gather_results=False)
    records = {r["setting"]: r for r in out.values()}
    smoke, steps = records["smoke"], records["steps"]
    assert smoke["track"] == "S" and smoke["track_budget"]["wall_clock_s"] == 1.0
    assert smoke["stop_reason"] == "wall_clock: spent the allowance of 1 s"
    assert 0 < smoke["env_steps"] == smoke["num_timesteps"] < L_ENV_STEPS
    assert smoke["wall_seconds"] >= 1.0 and smoke["cpu_seconds"] > 0
    assert steps["track"] is None and steps["track_budget"] is None
    assert steps["env_steps"] == 256 and steps["stop_reason"] is None
    hardware = smoke["hardware"]
    assert hardware["cpu_model"] and hardware["cpu_count"] >= 1
    assert hardware["torch_device"] == "cpu" and hardware["torch_threads"] == 1
    assert all(n == 1 for n in hardware["blas_threads"].values())  # one_thread() in the trial


def test_an_sb3_algorithm_on_a_multi_agent_task_stops_on_the_tracks_clock(tmp_path):
    """The SB3 multi-agent trainer's shared-policy loop honours the stop conditions, so a track
    bounds an SB3 algorithm (PowerZoo's or one from outside) on a multi-agent task too."""
    data = _campaign(track={"name": "S", "wall_clock_s": 1, "clock": "cpu"})
    data["tasks"] = ["marl_opf"]
    trial = next(t for t in parse_campaign(data).trials if t.setting == "smoke")
    assert trial.track["name"] == "S" and trial.config["algorithm"] == "PPO"
    config = {**trial.config, "output_dir": str(tmp_path), "evaluation": None}
    result = Trainer(config).train()
    assert result.status == "stopped"
    assert result.stop_reason == "cpu_time: spent the allowance of 1 CPU s"
    assert 0 < result.num_timesteps < L_ENV_STEPS
    # num_timesteps counts a sample per agent; a record's env steps are the env's
    assert result.agents_per_step == 5 and result.env_steps == result.num_timesteps // 5
    # independent learners train their rounds to the budget: a stop condition is refused, not
    # ignored, before any folder is written
    with pytest.raises(ValueError, match="independent learners train their rounds"):
        Trainer({**config, "output_dir": str(tmp_path / "il")}).train_il()
    assert not (tmp_path / "il").exists()


def test_the_shared_policy_takes_train_stop_conditions_counted_in_env_steps(tmp_path):
    """``train(stop_conditions=...)`` is honoured, not dropped, and a step limit counts env
    steps (SB3 counts a sample per agent); ``steps_per_eval`` is refused: no periodic
    evaluation in this loop."""
    from powerzoo.rl.conditions import MaxSteps

    def trainer(name):
        return Trainer(
            "marl_opf",
            algorithm="PPO",
            total_timesteps=20 * 48 * 10,
            n_envs=4,
            n_steps=8,
            batch_size=160,
            n_epochs=1,
            output_dir=str(tmp_path),
            name=name,
            evaluation=None,
            logging={"tensorboard": False, "progress_bar": False},
        )

    result = trainer("limit").train(stop_conditions=[MaxSteps(96)])
    assert result.status == "stopped"
    assert result.stop_reason == "max_steps: reached 96 env steps"
    # one rollout is 8 steps of 4 envs of 5 agents: 32 env steps, 160 agent-steps
    assert result.env_steps == 96 and result.num_timesteps == 96 * 5
    with pytest.raises(ValueError, match="steps_per_eval: PPO on a multi-agent task evaluates"):
        trainer("eval").train(steps_per_eval=100)


def test_protocol_env_seeds_test_every_trial_on_the_baselines_episodes(tmp_path):
    """``env_seeds: protocol``: whatever its training seed, a trial is tested on the baselines
    table's days and env seeds, so its submission is paired with the baselines on both."""
    from powerzoo.benchmarks.baselines import evaluation_protocol
    from powerzoo.benchmarks.submission import read_submission
    from powerzoo.benchmarks.submission_score import score_submission
    from powerzoo.benchmarks.trial_submission import submission_from_trials
    from powerzoo.rl.campaigns.trial import record_problem

    data = _campaign(seeds=[3], track={"name": "S", "wall_clock_s": 1, "clock": "cpu"})
    data["evaluation"] = {"split": "test", "env_seeds": "protocol", "baselines": [], "plots": False}
    del data["algorithms"]["PPO"]["settings"]["steps"]
    campaign = parse_campaign(data)
    assert campaign.env_seeds == "protocol" and campaign.episodes == {"battery_arbitrage": None}
    (trial,) = campaign.trials
    assert trial.track["clock"] == "cpu"
    assert {"type": "cpu_time", "seconds": 1.0} in trial.config["stop_conditions"]
    # the trial-seed campaign of the same trials has another fingerprint (no silent mixing)
    trial_seeded = {**data, "evaluation": {**data["evaluation"], "env_seeds": "trial"}}
    assert parse_campaign(trial_seeded).fingerprint() != campaign.fingerprint()
    assert CampaignSpec.from_dict(campaign.to_dict()) == campaign

    out = run_local(campaign, tmp_path / "out", progress=False, gather_results=False)
    (record,) = out.values()
    protocol = evaluation_protocol("battery_arbitrage", "test")
    assert record["env_seeds"] == "protocol"
    assert record["stop_reason"] == "cpu_time: spent the allowance of 1 CPU s"
    assert [e["day_id"] for e in record["episodes"]] == protocol["day_ids"]
    assert [e["env_seed"] for e in record["episodes"]] == [
        protocol["seed"] + i for i in range(len(protocol["day_ids"]))
    ]
    assert {e["seed"] for e in record["episodes"]} == {3}  # the rows still name the trial
    assert record_problem(record, trial, campaign) is None
    shifted = {
        **record,
        "episodes": [{**e, "env_seed": e["env_seed"] + 1} for e in record["episodes"]],
    }
    assert "env seed" in record_problem(shifted, trial, campaign)

    folder = submission_from_trials([tmp_path / "out" / "trials" / trial.trial_id], tmp_path / "s")
    row = score_submission(read_submission(folder))
    assert row["env_seeds"] == "protocol" and row["paired_on"] == "days and env seeds"


def test_protocol_env_seeds_refuse_their_own_episodes_and_unknown_schemes():
    data = _campaign()
    data["evaluation"] = {**data["evaluation"], "env_seeds": "protocol"}  # episodes: 2 as well
    with pytest.raises(CampaignError, match="leave episodes out"):
        parse_campaign(data)
    data["evaluation"] = {"split": "test", "env_seeds": "seed0"}
    with pytest.raises(CampaignError, match="env_seeds' must be one of trial, protocol"):
        parse_campaign(data)


def test_hardware_names_the_numeric_kernels_that_fix_speed_and_last_bits():
    from powerzoo.benchmarks.trial_submission import kernels_text
    from powerzoo.rl.tracks import hardware_info, numeric_kernels

    kernels = numeric_kernels()
    assert kernels["numpy"] == np.__version__
    assert kernels["blas_kernels"] and all(":" in k for k in kernels["blas_kernels"])
    assert hardware_info().items() >= kernels.items()
    skylake = {"simd": ["AVX", "AVX2", "AVX512F", "FMA3"], "blas_kernels": ["openblas:SkylakeX"]}
    assert kernels_text(skylake) == ", AVX512F, openblas:SkylakeX"
    assert kernels_text({"simd": ["AVX", "AVX2"], "blas_kernels": []}) == ", AVX2"
    assert kernels_text({"cpu_model": "a record written before kernels were"}) == ""
