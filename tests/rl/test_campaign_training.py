"""Training campaigns (``powerzoo campaign``): campaign files, the local loop, the Ray Tune backend.

The local parts need no Ray. The Ray parts (``ray_cluster`` fixture) skip without the extra and
share one local Ray of 2 CPUs; they check that Tune gives the local backend's numbers for the
same seeds, also after the driver was killed and the experiment restored.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO_ROOT, run_python, wait_until

from powerzoo.rl.campaigns import CampaignError, load_campaign, parse_campaign, run_local
from powerzoo.rl.campaigns.trial import TRIAL_FILE, read_record

# 2 settings x 2 seeds of PPO on battery_arbitrage: 4 trials of 1,024 env steps, 3 test days each.
TINY = {
    "name": "tiny",
    "tasks": ["battery_arbitrage"],
    "seeds": [0, 1],
    "budget": {"total_timesteps": 1024, "n_envs": 4},
    "evaluation": {
        "split": "test",
        "episodes": 3,
        "baselines": ["random"],
        "model": "final",
        "plots": False,
    },
    "algorithms": {
        "PPO": {
            "settings": {
                "slow": {
                    "algorithm_kwargs": {"n_steps": 128, "batch_size": 128, "learning_rate": 1e-5},
                    "overrides": {"evaluation": None},
                },
                "fast": {
                    "algorithm_kwargs": {"n_steps": 128, "batch_size": 128, "learning_rate": 3e-3},
                    "overrides": {"evaluation": None},
                },
            }
        }
    },
}
TRIAL_IDS = [f"battery_arbitrage-PPO-{s}-seed{seed}" for s in ("slow", "fast") for seed in (0, 1)]
RUN_ORDER = [TRIAL_IDS[i] for i in (0, 2, 1, 3)]  # seed by seed: every setting of seed 0 first
TIME_COLUMNS = {"train_seconds"}  # the only columns allowed to differ between backends


def _write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _numbers(out: Path) -> tuple[list[dict[str, str]], list[dict[str, str]], list[dict[str, str]]]:
    """trials.csv (without timings), results.csv and episodes.csv of a campaign folder."""
    trials = [
        {k: v for k, v in r.items() if k not in TIME_COLUMNS} for r in _rows(out / "trials.csv")
    ]
    return trials, _rows(out / "results.csv"), _rows(out / "episodes.csv")


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory) -> Path:
    return _write(tmp_path_factory.mktemp("spec") / "tiny.yaml", TINY)


@pytest.fixture(scope="module")
def local_run(tiny_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "out"
    return out, run_local(tiny_file, out, progress=False)


# ---- campaign files ------------------------------------------------------------------------------
def test_spec_expands_every_task_algorithm_setting_seed_into_one_trial(tiny_file):
    spec = load_campaign(tiny_file)
    assert [t.trial_id for t in spec.trials] == RUN_ORDER
    assert load_campaign(tiny_file).fingerprint() == spec.fingerprint()  # stable ids and hashes
    slow0, fast0 = spec.trial(TRIAL_IDS[0]), spec.trial(TRIAL_IDS[2])
    assert slow0.config["algorithm_kwargs"]["learning_rate"] == 1e-5
    assert fast0.config["algorithm_kwargs"]["learning_rate"] == 3e-3
    assert slow0.config["total_timesteps"] == 1024 and slow0.config["n_envs"] == 4
    assert slow0.config["checkpoint"] is None and slow0.config["evaluation"] is None
    assert len({t.config_hash for t in spec.trials}) == 4  # seeds and settings change the config


def test_spec_takes_a_config_file_and_restricts_algorithms_to_tasks_they_fit(tmp_path):
    data = {
        "tasks": ["battery_arbitrage", "marl_opf"],
        "seeds": [3],
        "budget": {
            "total_timesteps": 100,
            "per_task": {"marl_opf": {"total_timesteps": 200, "n_envs": 2}},
        },
        "algorithms": {
            "mappo": {
                "settings": {
                    "base": {
                        "config": str(REPO_ROOT / "configs" / "marl_opf_mappo.yaml"),
                        "algorithm_kwargs": {"n_epochs": 2},
                    }
                }
            },
            "PPO": None,
        },
    }
    spec = parse_campaign(data)
    ids = [t.trial_id for t in spec.trials]
    assert ids == [
        "marl_opf-MAPPO-base-seed3",
        "battery_arbitrage-PPO-default-seed3",
        "marl_opf-PPO-default-seed3",
    ]
    mappo = spec.trials[0].config
    assert (
        mappo["algorithm_kwargs"]["n_epochs"] == 2 and mappo["algorithm_kwargs"]["gamma"] == 0.5
    )  # file kept
    assert mappo["total_timesteps"] == 200 and mappo["n_envs"] == 2
    assert any("battery_arbitrage: no MAPPO trials" in n for n in spec.notes)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(tasks=["no_such_task"]), "unknown task(s) 'no_such_task'"),
        (lambda d: d.update(seeds=[]), "'seeds' must be a non-empty list"),
        (lambda d: d.update(seeds=[0, 0]), "'seeds' must be distinct"),
        (lambda d: d.pop("algorithms"), "missing required key 'algorithms'"),
        (lambda d: d.update(budgett={}), "unknown key(s) '(top level).budgett'"),
        (lambda d: d["algorithms"].update(PPOO={}), "unknown algorithm 'PPOO'"),
        (
            lambda d: d["algorithms"]["PPO"]["settings"]["slow"].update(lr=1),
            "unknown key(s) 'algorithms.PPO.settings.slow.lr'",
        ),
        (
            lambda d: d["algorithms"]["PPO"]["settings"]["slow"]["algorithm_kwargs"].update(
                nsteps=3
            ),
            "nsteps: not an argument of PPO",
        ),
        (
            lambda d: d["algorithms"]["PPO"]["settings"]["slow"]["overrides"].update(seed=3),
            "seed set by the campaign",
        ),
        (
            lambda d: d["algorithms"]["PPO"]["settings"]["slow"]["overrides"].update(n_env=3),
            "unknown field 'n_env'",
        ),
        (
            lambda d: d["algorithms"].update(MAPPO={"tasks": ["battery_arbitrage"]}),
            "MAPPO cannot train battery_arbitrage",
        ),
        (
            lambda d: d["algorithms"]["PPO"]["settings"]["slow"].update(tasks=["marl_opf"]),
            "'algorithms.PPO.settings.slow.tasks' names task(s) the algorithm does not train: "
            "'marl_opf'",
        ),
        (lambda d: d["evaluation"].update(split="tset"), "unknown split 'tset'"),
        (
            lambda d: d["evaluation"].update(episodes={"tso": 4}),
            "'evaluation.episodes': tso not among the campaign's tasks",
        ),
        (
            lambda d: d["evaluation"].update(episodes={"battery_arbitrage": 0}),
            "'evaluation.episodes.battery_arbitrage' must be a positive integer",
        ),
        (lambda d: d["evaluation"].update(baselines=["orcale"]), "unknown baseline(s) 'orcale'"),
        (
            lambda d: d["budget"].update(total_timesteps=0),
            "'budget.total_timesteps' must be a positive integer",
        ),
        (
            lambda d: d["algorithms"].update(ppo=d["algorithms"]["PPO"]),
            "an algorithm is listed twice",
        ),
    ],
)
def test_bad_campaigns_fail_with_one_clear_error(change, message):
    data = copy.deepcopy(TINY)
    change(data)
    with pytest.raises(CampaignError) as err:
        parse_campaign(data, source="x.yaml")
    assert message in str(err.value) and str(err.value).startswith("campaign x.yaml:")


def test_a_setting_may_train_a_subset_of_its_algorithms_tasks():
    data = {
        "tasks": ["battery_arbitrage", "dso"],
        "seeds": [0],
        "budget": {"total_timesteps": 100},
        "algorithms": {
            "PPO": {
                "settings": {
                    "objective": {},
                    "penalized": {
                        "tasks": ["dso"],
                        "overrides": {"env": {"reward": "penalized"}},
                    },
                }
            }
        },
    }
    ids = [t.trial_id for t in parse_campaign(data).trials]
    assert sorted(ids) == [
        "battery_arbitrage-PPO-objective-seed0",
        "dso-PPO-objective-seed0",
        "dso-PPO-penalized-seed0",
    ]


def test_evaluation_episodes_may_be_set_per_task():
    data = copy.deepcopy(TINY)
    data["evaluation"]["episodes"] = {"battery_arbitrage": 4}
    assert parse_campaign(data).episodes == {"battery_arbitrage": 4}


def test_missing_campaign_file_and_rllib_on_the_local_backend(tmp_path):
    with pytest.raises(FileNotFoundError, match="campaign file"):
        load_campaign(tmp_path / "nope.yaml")
    spec = parse_campaign(
        {
            "tasks": ["marl_opf"],
            "seeds": [0],
            "budget": {"total_timesteps": 64},
            "algorithms": {"rllib_ppo": {"settings": {"s": {"sharing": "per_group"}}}},
        }
    )
    assert spec.trials[0].config["sharing"] == "per_group"
    with pytest.raises(ValueError, match="--backend ray"):
        run_local(spec, tmp_path / "out", progress=False)
    with pytest.raises(CampaignError, match="sharing must be one of"):
        parse_campaign(
            {
                "tasks": ["marl_opf"],
                "seeds": [0],
                "budget": {"total_timesteps": 64},
                "algorithms": {"rllib_ppo": {"settings": {"s": {"sharing": "everyone"}}}},
            }
        )


# ---- the local backend ---------------------------------------------------------------------------
@pytest.mark.slow
def test_local_campaign_gives_one_row_per_trial_and_a_pooled_row_per_setting(local_run):
    out, outcome = local_run
    assert not outcome.failed
    trials, results, episodes = _numbers(out)
    assert [r["trial_id"] for r in trials] == RUN_ORDER
    assert [r["policy"] for r in results] == ["random", "PPO/slow", "PPO/fast"]
    assert {r["episodes"] for r in trials} == {"3"} and all(r["episodes"] == "6" for r in results)
    returns = {r["trial_id"]: float(r["mean_return"]) for r in trials}
    assert len(set(returns.values())) == 4  # seeds and settings give distinct agents
    pooled = {r["policy"]: float(r["mean_return"]) for r in results}
    assert pooled["PPO/slow"] == pytest.approx((returns[TRIAL_IDS[0]] + returns[TRIAL_IDS[1]]) / 2)
    assert len(episodes) == 2 * 3 + 4 * 3  # random under both seeds, then every trial's test days
    for trial_id in TRIAL_IDS:
        assert (out / "trials" / trial_id / TRIAL_FILE).is_file()
        assert (out / "trials" / trial_id / "run" / "model.zip").is_file()


@pytest.mark.slow
def test_local_campaign_resumes_skipping_finished_trials_with_the_same_numbers(
    local_run, tiny_file, tmp_path, monkeypatch
):
    from powerzoo.rl.campaigns import local

    out, _ = local_run
    copy_dir = tmp_path / "out"
    shutil.copytree(out, copy_dir)
    (
        copy_dir / "trials" / TRIAL_IDS[3] / TRIAL_FILE
    ).unlink()  # interrupted: its folder is there, its record not
    ran: list[str] = []
    real = local.run_trial
    monkeypatch.setattr(local, "run_trial", lambda c, t, o: ran.append(t.trial_id) or real(c, t, o))
    run_local(tiny_file, copy_dir, progress=False)
    assert ran == [TRIAL_IDS[3]]
    assert _numbers(copy_dir) == _numbers(out)


@pytest.mark.slow
def test_a_changed_setting_under_the_same_out_folder_is_refused(local_run, tmp_path):
    out, _ = local_run
    data = copy.deepcopy(TINY)
    data["algorithms"]["PPO"]["settings"]["slow"]["algorithm_kwargs"]["learning_rate"] = 2e-5
    with pytest.raises(ValueError, match="holds another campaign"):
        run_local(parse_campaign(data), out, progress=False)


@pytest.mark.slow
def test_update_reruns_only_the_changed_setting_and_keeps_the_rest(
    local_run, tmp_path, monkeypatch
):
    from powerzoo.rl.campaigns import local

    out, _ = local_run
    copy_dir = tmp_path / "out"
    shutil.copytree(out, copy_dir)
    data = copy.deepcopy(TINY)
    data["algorithms"]["PPO"]["settings"]["slow"]["algorithm_kwargs"]["learning_rate"] = 2e-5
    campaign = parse_campaign(data)
    changed = sorted(t.trial_id for t in campaign.trials if "slow" in t.trial_id)
    ran: list[str] = []
    real = local.run_trial
    monkeypatch.setattr(local, "run_trial", lambda c, t, o: ran.append(t.trial_id) or real(c, t, o))
    run_local(campaign, copy_dir, progress=False, update=True)
    assert sorted(ran) == changed and changed
    superseded = sorted(p.name for p in (copy_dir / local.SUPERSEDED_DIR).iterdir())
    assert [name.rsplit("-", 1)[0] for name in superseded] == changed
    for trial in campaign.trials:  # every trial now holds a record of the current config
        assert read_record(copy_dir, trial) is not None
    run_local(campaign, copy_dir, progress=False)  # and the folder is this campaign's again


@pytest.mark.slow
def test_cli_campaign_prints_the_table_and_never_imports_ray(local_run, tiny_file):
    out, _ = local_run
    code = (
        "import sys; from powerzoo.cli.main import main\n"
        f"rc = main(['campaign', {str(tiny_file)!r}, '--out', {str(out)!r}, '--no-progress'])\n"
        "print('RAY', 'ray' in sys.modules, rc)"
    )
    run = run_python(code, check=True)
    assert "| PPO/fast |" in run.stdout and "4 of 4 trial(s) finished (local backend)" in run.stdout
    assert run.stdout.strip().splitlines()[-1] == "RAY False 0"


def test_cli_ray_backend_without_ray_is_one_line_with_the_pip_command(tiny_file):
    code = (
        "import sys; sys.modules['ray'] = None\nfrom powerzoo.cli.main import main\n"
        f"sys.exit(main(['campaign', {str(tiny_file)!r}, '--backend', 'ray']))"
    )
    run = run_python(code)
    assert run.returncode == 2
    assert (
        run.stderr.strip()
        == 'powerzoo: error: the Ray backend needs Ray Tune: pip install "powerzoo[ray]"'
    )


# ---- the Ray backend -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.tune")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_campaign_survives_a_killed_driver_and_gives_the_local_numbers(
    ray_cluster, local_run, tmp_path
):
    """A driver killed after its first trial; the campaign run again restores the Tune experiment,
    runs the rest, and gives the local backend's numbers; a third run keeps the folder's records
    (a record topped up since, e.g. with a new held-out family, is not overwritten)."""
    from powerzoo.integrations.tune import run_ray

    out, _ = local_run
    data = copy.deepcopy(TINY)
    data["ray"] = {"max_concurrent_trials": 1}  # one trial at a time: the kill lands between trials
    spec_file = _write(tmp_path / "tiny.yaml", data)
    ray_out = tmp_path / "ray"
    address = ray_cluster.get_runtime_context().gcs_address
    code = (
        "from powerzoo.integrations.tune import run_ray\n"
        f"run_ray({str(spec_file)!r}, {str(ray_out)!r}, address={address!r}, progress=False)"
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: bool(list((ray_out / "trials").glob(f"*/{TRIAL_FILE}"))),
            "a trial finished",
            driver,
            poll_s=0.2,
        )
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    done = list((ray_out / "trials").glob(f"*/{TRIAL_FILE}"))
    assert 1 <= len(done) < 4
    # the cluster ends the dead driver's trial actors: every CPU free again
    wait_until(
        lambda: (
            ray_cluster.available_resources().get("CPU", 0.0)
            == ray_cluster.cluster_resources().get("CPU", 0.0)
        ),
        "the dead driver's trial actors ended",
        poll_s=0.2,
    )
    from ray import tune

    assert tune.Tuner.can_restore(str(ray_out / "ray" / "campaign"))
    outcome = run_ray(spec_file, ray_out, progress=False)  # restores the Tune experiment
    assert not outcome.failed and [r["trial_id"] for r in outcome.trials] == RUN_ORDER
    assert _numbers(ray_out) == _numbers(out)
    assert (ray_out / "ray" / "campaign" / TRIAL_IDS[0]).is_dir()  # one Tune trial each
    path = ray_out / "trials" / TRIAL_IDS[0] / TRIAL_FILE
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "edited_since": True}))
    again = run_ray(spec_file, ray_out, progress=False)
    assert again.records[TRIAL_IDS[0]].get("edited_since") is True
    assert json.loads(path.read_text())["edited_since"] is True


@pytest.mark.slow
def test_an_rllib_ppo_trial_trains_on_tune_and_lands_in_the_table(ray_cluster, tmp_path):
    from powerzoo.integrations.tune import run_ray

    data = {
        "name": "rllib",
        "tasks": ["marl_opf"],
        "seeds": [0],
        "budget": {"total_timesteps": 192},
        "evaluation": {
            "split": "test",
            "episodes": 2,
            "baselines": ["random"],
            "model": "final",
            "plots": False,
        },
        "algorithms": {
            "rllib_ppo": {
                "settings": {
                    "shared": {
                        "sharing": "shared",
                        "training": {"train_batch_size_per_learner": 96, "minibatch_size": 48},
                    }
                }
            }
        },
    }
    out = tmp_path / "out"
    outcome = run_ray(_write(tmp_path / "rllib.yaml", data), out, progress=False)
    assert not outcome.failed
    record = outcome.records["marl_opf-rllib_ppo-shared-seed0"]
    assert (
        record["num_timesteps"] >= 192 and Path(record["run_dir"]).is_dir()
    )  # the RLlib checkpoint
    assert len(record["episodes"]) == 2
    (row,) = outcome.trials
    assert float(row["mean_return"]) < 0  # marl_opf's return is a cost: negative
    trials = _rows(out / "trials.csv")
    assert [r["trial_id"] for r in trials] == ["marl_opf-rllib_ppo-shared-seed0"]
    assert {r["policy"] for r in _rows(out / "results.csv")} >= {"random", "rllib_ppo/shared"}
