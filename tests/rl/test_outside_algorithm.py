"""An algorithm PowerZoo does not ship, named by its entry point ``package.module:Class``.

The user's module is written into a temporary folder and put on ``PYTHONPATH``, as a researcher's
own package would be: ``Trainer`` and ``powerzoo train`` train it as they train SB3's own, a
campaign file takes it, and ``powerzoo submit`` takes it from nothing to a scored row in one
command, a row that ``powerzoo score`` re-derives to the last bit.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import REPO_ROOT, run_cli

from powerzoo.cli.main import main
from powerzoo.rl import Trainer
from powerzoo.rl.algorithms import (
    algorithm_label,
    canonical_algorithm,
    entry_point_class,
    is_entry_point,
    is_on_policy,
)
from powerzoo.rl.campaigns import CampaignError, parse_campaign
from powerzoo.rl.entry_points import module_digest

MODULE = "my_lab_algos"
ENTRY = f"{MODULE}:NarrowPPO"
SOURCE = textwrap.dedent(
    '''
    """A researcher's own algorithm: PPO whose Gaussian policy starts narrow."""
    from stable_baselines3 import PPO


    class NarrowPPO(PPO):
        built = 0  # how many models this class made

        def __init__(self, policy, env, **kwargs):
            kwargs.setdefault("policy_kwargs", {"log_std_init": -1.5})
            NarrowPPO.built += 1
            super().__init__(policy, env, **kwargs)


    class NotAnAlgorithm:
        pass
    '''
)


@pytest.fixture()
def user_module(tmp_path, monkeypatch) -> Path:
    """The user's module on ``sys.path`` (this process) and ``PYTHONPATH`` (children)."""
    folder = tmp_path / "user_code"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), str(REPO_ROOT)])))
    sys.modules.pop(MODULE, None)
    yield folder
    sys.modules.pop(MODULE, None)


def test_entry_point_names_are_told_from_registered_ones():
    assert is_entry_point("pkg.mod:Class") and is_entry_point("m:Outer.Inner")
    for name in ("PPO", "pkg.mod", "pkg.mod:", ":Class", "a:b:c", "pkg mod:C", "../x:C", 3):
        assert not is_entry_point(name), name
    assert algorithm_label("pkg.mod:Class") == "pkg.mod.Class"
    assert algorithm_label("PPO") == "PPO"
    assert canonical_algorithm("pkg.mod:Class") == "pkg.mod:Class"  # case kept: it is code
    with pytest.raises(ValueError, match="or an SB3 algorithm class from outside"):
        canonical_algorithm("PPOO")


def test_a_bad_entry_point_is_one_line_naming_it(user_module):
    with pytest.raises(ValueError, match="cannot import module 'no_such_lab'"):
        entry_point_class("no_such_lab:Algo")
    with pytest.raises(ValueError, match=f"module '{MODULE}' has no 'Missing'"):
        entry_point_class(f"{MODULE}:Missing")
    with pytest.raises(ValueError, match="is not a Stable-Baselines3 algorithm class"):
        entry_point_class(f"{MODULE}:NotAnAlgorithm")
    assert is_on_policy(ENTRY) and not is_on_policy("SAC") and is_on_policy("PPO")


def test_trainer_trains_and_reloads_an_outside_class(user_module, tmp_path):
    import my_lab_algos

    trainer = Trainer(
        "battery_arbitrage",
        algorithm=ENTRY,
        total_timesteps=256,
        output_dir=str(tmp_path / "runs"),
        evaluation=None,
        checkpoint=None,
        algorithm_kwargs={"n_steps": 128, "batch_size": 64},  # PPO's own, through **kwargs
        logging={"tensorboard": False},
    )
    result = trainer.train()
    assert result.num_timesteps == 256
    assert Path(result.run_dir).name.startswith(f"{MODULE}.NarrowPPO-battery_arbitrage-seed0-")
    assert isinstance(trainer.model, my_lab_algos.NarrowPPO)
    assert trainer.model.n_steps == 128
    log_std = trainer.model.policy.log_std.detach().numpy()
    assert abs(float(log_std.mean()) + 1.5) < 0.1  # the class's own default took effect
    loaded = Trainer.load(result.run_dir)
    assert loaded.algorithm == ENTRY
    assert type(loaded.model).__name__ == "NarrowPPO"
    with pytest.raises(Exception, match="n_stepz"):
        Trainer("battery_arbitrage", algorithm=ENTRY, algorithm_kwargs={"n_stepz": 8})


def test_the_command_line_and_a_campaign_file_take_an_entry_point(user_module, tmp_path, capsys):
    runs = tmp_path / "runs"
    args = ["train", "battery_arbitrage", "--algorithm", ENTRY, "--timesteps", "128"]
    args += ["--output-dir", str(runs)]
    code = main(args)
    assert code == 0, capsys.readouterr().err
    assert [p.name.split("-seed")[0] for p in runs.iterdir() if p.is_dir()] == [
        f"{MODULE}.NarrowPPO-battery_arbitrage"
    ]
    capsys.readouterr()
    elsewhere = tmp_path / "not_written"
    bad = ["train", "battery_arbitrage", "--algo", "no_such_lab:Algo", "--output-dir"]
    assert main([*bad, str(elsewhere)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("powerzoo: error: ") and "cannot import module 'no_such_lab'" in err
    assert len(err.splitlines()) == 1 and not elsewhere.exists()
    campaign = parse_campaign(
        {
            "tasks": ["battery_arbitrage"],
            "seeds": [0],
            "budget": {"total_timesteps": 128},
            "algorithms": {ENTRY: {}},
        }
    )
    assert [t.trial_id for t in campaign.trials] == [
        f"battery_arbitrage-{MODULE}.NarrowPPO-default-seed0"
    ]
    assert campaign.trials[0].config["algorithm"] == ENTRY
    with pytest.raises(CampaignError, match="is not a Stable-Baselines3 algorithm class"):
        parse_campaign(
            {
                "tasks": ["battery_arbitrage"],
                "seeds": [0],
                "budget": {"total_timesteps": 128},
                "algorithms": {f"{MODULE}:NotAnAlgorithm": {}},
            }
        )


@pytest.mark.slow
def test_an_outside_algorithm_goes_from_clone_to_a_scored_row_in_one_command(user_module, tmp_path):
    """``powerzoo submit`` on the benchmark v2 protocol (its track shortened to 2 CPU-seconds):
    train, select on val, test on the baselines' days and env seeds, write the submission folder,
    score it; ``powerzoo score`` on the folder gives the same row to the last bit."""
    out, table = tmp_path / "submission_run", tmp_path / "results.csv"
    command = ["submit", "battery_arbitrage", "--algo", ENTRY, "--out", str(out)]
    command += ["--seeds", "0", "--cpu-seconds", "2", "--no-progress", "--table", str(table)]
    command += ["--tuning-budget", '{"configurations": 1, "split": "val"}']
    run = run_cli(*command, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"battery_arbitrage / {ENTRY}/default (test; 1 seed(s) x 65 episodes" in run.stdout
    assert "paired on days and env seeds" in run.stdout
    assert f"added the row to {table}" in run.stdout
    folder = out / "submission"
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["algorithm"] == f"{ENTRY}/default"
    assert meta["tuning_budget"] == {"configurations": 1, "split": "val"}
    assert meta["env_seeds"] == "protocol"
    assert "track S: 2 CPU-s of one core, NOT the standard allowance" in meta["notes"]
    record = json.loads(next((out / "campaign" / "trials").glob("*/trial.json")).read_text())
    assert record["algorithm"] == ENTRY
    digest = module_digest(ENTRY)
    assert record["algorithm_code"] == digest
    assert digest["file"] == str((user_module / f"{MODULE}.py").resolve())
    assert meta["code_hash"].endswith(f" + module {MODULE} sha256 {digest['sha256'][:16]}")

    again = run_cli("score", str(folder), "--campaign", str(out / "campaign"), "--json")
    assert again.returncode == 0, again.stderr
    rescored = json.loads(again.stdout)
    submitted = run_cli(*command, "--json", cwd=REPO_ROOT)  # resumes: nothing trains again
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    row = json.loads(
        submitted.stdout[submitted.stdout.index("{") : submitted.stdout.rindex("}") + 1]
    )
    assert row == rescored
    assert "replaced the earlier row of this submission" in submitted.stdout
    assert len(table.read_text().splitlines()) == 2  # header and one row


def test_a_trial_whose_module_changed_since_it_trained_trains_again(user_module, tmp_path):
    """``powerzoo submit`` keeps finished trials, except those of an outside algorithm whose
    module's source is no longer the one they recorded."""
    from powerzoo.rl.campaigns.submit import _changed_code, submission_campaign
    from powerzoo.rl.campaigns.trial import trial_dir

    campaign = submission_campaign(
        "battery_arbitrage",
        ENTRY,
        campaign_file=REPO_ROOT / "campaigns" / "benchmark_v2.yaml",
        seeds=[0, 1],
    )
    digest = module_digest(ENTRY)["sha256"]
    for trial, sha in zip(campaign.trials, (digest, "0" * 64), strict=True):
        folder = trial_dir(tmp_path, trial)
        folder.mkdir(parents=True)
        (folder / "trial.json").write_text(json.dumps({"algorithm_code": {"sha256": sha}}))
    assert _changed_code(campaign, tmp_path) == [campaign.trials[1].trial_id]
    (user_module / f"{MODULE}.py").write_text(SOURCE + "\n# edited\n")
    assert _changed_code(campaign, tmp_path) == [t.trial_id for t in campaign.trials]


def test_a_tuning_of_the_outside_algorithm_sets_the_submissions_settings(user_module, tmp_path):
    """``powerzoo tune -a package.module:Class --space FILE`` tunes it (its entry kept as
    written, ``same_as`` a registered space); ``powerzoo submit --tuning DIR`` trains the
    chosen ``algorithm_kwargs`` under the campaign's protocol and states the tuning."""
    from powerzoo.rl.campaigns.submit import submission_campaign, tuning_budget_of
    from powerzoo.rl.campaigns.tuning_space import load_search_space

    space = tmp_path / "space.yaml"
    space.write_text(
        f'"{ENTRY}":\n  same_as: ppo\n  n_steps: {{choice: [64, 128]}}\n'
        "PPO:\n  learning_rate: {log_uniform: [1.0e-5, 3.0e-3]}\n"
    )
    assert sorted(load_search_space(ENTRY, space)) == ["learning_rate", "n_steps"]
    tuned = tmp_path / "tuning"
    tuned.mkdir()
    summary = {"task": "battery_arbitrage", "algorithm": ENTRY, "configurations": 8}
    summary |= {"split": "val", "track": "S", "search_space_sha256": "ab" * 32}
    (tuned / "tuning.json").write_text(json.dumps(summary))
    (tuned / "best_config.yaml").write_text(
        f"task: battery_arbitrage\nalgorithm: {ENTRY}\ntotal_timesteps: 128\nevaluation: null\n"
        "algorithm_kwargs: {learning_rate: 0.0002, n_steps: 64}\n"
    )
    campaign = submission_campaign(
        "battery_arbitrage",
        ENTRY,
        campaign_file=REPO_ROOT / "campaigns" / "benchmark_v2.yaml",
        seeds=[0],
        tuning_dir=tuned,
    )
    (trial,) = campaign.trials
    assert trial.setting == "tuned"
    assert trial.config["algorithm_kwargs"] == {"learning_rate": 0.0002, "n_steps": 64}
    assert trial.config["evaluation"]["split"] == "val"  # the protocol's selection, not tune's
    assert trial.track["name"] == "S" and trial.track["standard"]
    budget = tuning_budget_of(tuned)
    assert budget["tool"] == "powerzoo tune" and budget["configurations"] == 8
    assert budget["split"] == "val"
    with pytest.raises(ValueError, match="tuned my_lab_algos:NarrowPPO on battery_arbitrage, not"):
        submission_campaign(
            "dso",
            ENTRY,
            campaign_file=REPO_ROOT / "campaigns" / "benchmark_v2.yaml",
            tuning_dir=tuned,
        )


def test_a_config_for_submit_is_any_subset_of_run_config_fields(user_module, tmp_path):
    """``powerzoo submit --config``: the file's algorithm_kwargs are the outside class's (checked
    against it, not PPO), its n_envs is kept; a file naming another task or algorithm, or the
    fields submit sets itself, is refused in one line."""
    from powerzoo.rl.campaigns.submit import submission_campaign

    v2 = REPO_ROOT / "campaigns" / "benchmark_v2.yaml"
    config = tmp_path / "mine.yaml"
    config.write_text("n_envs: 4\nalgorithm_kwargs: {n_steps: 64, batch_size: 64}\n")
    (trial,) = submission_campaign(
        "battery_arbitrage", ENTRY, campaign_file=v2, seeds=[0], config=config
    ).trials
    assert trial.setting.startswith("config-") and trial.config["n_envs"] == 4
    assert trial.config["algorithm_kwargs"] == {"n_steps": 64, "batch_size": 64}
    assert trial.track["standard"]  # the track still sets the budget
    # a repository preset (seed, output_dir, name and a budget in it) trains as the campaign's
    (preset,) = submission_campaign(
        "battery_arbitrage",
        "PPO",
        campaign_file=v2,
        seeds=[3],
        config=REPO_ROOT / "configs" / "battery_arbitrage.yaml",
    ).trials
    assert preset.seed == 3 and preset.config["seed"] == 3
    for text, message in (
        ("algorithm: SAC\n", "names algorithm SAC, --algo my_lab_algos:NarrowPPO"),
        ("task: dso\n", "is a dso config, not battery_arbitrage"),
        ("init_model: x.zip\n", "init_model not for a submission"),
        ("algorithm_kwargs: {device: cuda}\n", "device is compute beyond the track's one core"),
        ("algorithm_kwargs: {n_stepz: 3}\n", "n_stepz: not an argument of my_lab_algos"),
    ):
        config.write_text(text)
        with pytest.raises(Exception, match=message):
            submission_campaign("battery_arbitrage", ENTRY, campaign_file=v2, config=config)


def test_a_run_config_is_checked_against_the_algorithm_given_beside_it(tmp_path):
    """``powerzoo train -c FILE --algo SAC``: the file's SAC arguments are SAC's, not those of
    the file's default algorithm (PPO)."""
    from powerzoo.rl.config import resolve_config

    path = tmp_path / "sac.yaml"
    path.write_text(
        "task: battery_arbitrage\ntotal_timesteps: 64\nalgorithm_kwargs: {buffer_size: 1000}\n"
    )
    assert resolve_config(path, {"algorithm": "SAC"}).algorithm_kwargs == {"buffer_size": 1000}
    with pytest.raises(Exception, match="buffer_size: not an argument of PPO"):
        resolve_config(path, {})


def test_finished_trials_of_other_seeds_or_settings_are_reported_as_set_aside(tmp_path):
    from powerzoo.rl.campaigns.submit import _set_aside, submission_campaign
    from powerzoo.rl.campaigns.trial import trial_dir

    v2 = REPO_ROOT / "campaigns" / "benchmark_v2.yaml"
    before = submission_campaign("battery_arbitrage", "PPO", campaign_file=v2, seeds=[0, 1])
    for trial in before.trials:
        trial_dir(tmp_path, trial).mkdir(parents=True)
        record = {"config_hash": trial.config_hash}
        (trial_dir(tmp_path, trial) / "trial.json").write_text(json.dumps(record))
    now = submission_campaign("battery_arbitrage", "PPO", campaign_file=v2, seeds=[0])
    assert _set_aside(now, tmp_path) == [before.trials[1].trial_id]
    other = submission_campaign("battery_arbitrage", "SAC", campaign_file=v2, seeds=[0, 1])
    assert _set_aside(other, tmp_path) == sorted(t.trial_id for t in before.trials)


def test_a_module_digest_is_its_files_sha256_wherever_it_lies(user_module, tmp_path):
    """The same code in another folder has the same digest (a moved clone does not retrain
    every seed), and it is what ``sha256sum`` prints for the module's file."""
    import hashlib
    import importlib

    here = module_digest(ENTRY)
    assert here["sha256"] == hashlib.sha256((user_module / f"{MODULE}.py").read_bytes()).hexdigest()
    elsewhere = tmp_path / "moved"
    elsewhere.mkdir()
    (elsewhere / f"{MODULE}.py").write_text(SOURCE)
    sys.modules.pop(MODULE, None)
    sys.path.insert(0, str(elsewhere))
    try:
        importlib.invalidate_caches()
        moved = module_digest(ENTRY)
    finally:
        sys.path.remove(str(elsewhere))
    assert moved["file"] == str((elsewhere / f"{MODULE}.py").resolve()) != here["file"]
    assert moved["sha256"] == here["sha256"]


def test_names_in_any_case_and_ppo_subclasses_get_the_multi_agent_defaults(user_module, tmp_path):
    """``--algo ppo`` with a config or tuning naming PPO is the same algorithm; an outside PPO
    subclass on a multi-agent task gets the rollout sizing PowerZoo gives PPO there."""
    import my_lab_algos

    from powerzoo.rl.campaigns.submit import submission_campaign
    from powerzoo.rl.sb3.marl.loops import _default_algo_kwargs

    config = tmp_path / "ppo.yaml"
    config.write_text("algorithm: PPO\nalgorithm_kwargs: {n_steps: 64}\n")
    v2 = REPO_ROOT / "campaigns" / "benchmark_v2.yaml"
    (trial,) = submission_campaign(
        "battery_arbitrage", "ppo", campaign_file=v2, seeds=[0], config=config
    ).trials
    assert trial.algorithm == "PPO"
    from stable_baselines3 import PPO

    sized = _default_algo_kwargs(my_lab_algos.NarrowPPO, None, 0.99, 64, None, -1.0)
    assert sized == _default_algo_kwargs(PPO, None, 0.99, 64, None, -1.0)
    assert sized["n_steps"] == 32 and sized["policy_kwargs"] == {"log_std_init": -1.0}
