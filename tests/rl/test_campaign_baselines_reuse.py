"""A finished campaign run again evaluates nothing: its trials are skipped (their records are
there) and the baselines' evaluation is read back from ``baselines_record.json`` when nothing it
depends on changed (tasks, baselines, seeds, protocol, the package's files, numeric libraries)."""

from __future__ import annotations

import importlib
import json

import pytest
import yaml

from powerzoo.rl.campaigns import load_campaign, run_local
from powerzoo.rl.campaigns.gather import BASELINES_FILE

# the module (the package's ``gather`` attribute is the function of the same name)
gather_module = importlib.import_module("powerzoo.rl.campaigns.gather")

CAMPAIGN = {
    "name": "reuse",
    "tasks": ["battery_arbitrage"],
    "seeds": [0],
    "budget": {"total_timesteps": 64, "n_envs": 1},
    "evaluation": {
        "split": "test",
        "episodes": 2,
        "baselines": ["random", "rule_based"],
        "model": "final",
        "plots": True,
    },
    "algorithms": {
        "PPO": {
            "settings": {
                "tiny": {
                    "algorithm_kwargs": {"n_steps": 32, "batch_size": 32, "n_epochs": 1},
                    "overrides": {"evaluation": None, "checkpoint": None},
                }
            }
        }
    },
}


@pytest.fixture
def counted(monkeypatch):
    """How many times the baselines were evaluated (``run_campaign`` called by the gathering)."""
    calls = []
    real = gather_module.run_campaign

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(gather_module, "run_campaign", counting)
    return calls


def test_a_second_run_of_a_finished_campaign_evaluates_nothing(tmp_path, counted, monkeypatch):
    spec = tmp_path / "reuse.yaml"
    spec.write_text(yaml.safe_dump(CAMPAIGN, sort_keys=False))
    out = tmp_path / "out"
    first = run_local(load_campaign(spec), out, progress=False)
    assert len(counted) == 1 and not first.failed
    tables = {name: (out / name).read_bytes() for name in ("results.csv", "episodes.csv")}
    record = (out / BASELINES_FILE).read_bytes()

    from powerzoo.rl.campaigns import local

    def no_training(*args, **kwargs):
        raise AssertionError("a finished trial was trained again")

    monkeypatch.setattr(local, "run_trial", no_training)
    second = run_local(load_campaign(spec), out, progress=False)
    assert len(counted) == 1  # the baselines were not evaluated again
    assert not second.failed
    assert {name: (out / name).read_bytes() for name in tables} == tables
    assert (out / BASELINES_FILE).read_bytes() == record
    assert [p.name for p in second.result.plots] == [p.name for p in first.result.plots]
    # the folder keeps the baseline table it was first scored against
    from powerzoo.benchmarks.baselines import BASELINES_FILE as PACKAGED
    from powerzoo.rl.campaigns.gather import BASELINE_TABLE_FILE

    assert (out / BASELINE_TABLE_FILE).read_bytes() == PACKAGED.read_bytes()


def test_a_changed_dependency_evaluates_the_baselines_again(tmp_path, counted):
    spec = tmp_path / "reuse.yaml"
    spec.write_text(yaml.safe_dump(CAMPAIGN, sort_keys=False))  # gathered with no trial record
    out = tmp_path / "out"
    gather_module.gather(load_campaign(spec), {}, out, progress=False)
    assert len(counted) == 1
    record = json.loads((out / BASELINES_FILE).read_text())
    record["key"]["package"] = "0" * 16  # as if PowerZoo's code or packaged files had changed
    (out / BASELINES_FILE).write_text(json.dumps(record))
    gather_module.gather(load_campaign(spec), {}, out, progress=False)
    assert len(counted) == 2
    (out / next(iter(json.loads((out / BASELINES_FILE).read_text())["plots"]))).unlink()
    gather_module.gather(load_campaign(spec), {}, out, progress=False)
    assert len(counted) == 3  # a plot gone: evaluated (and drawn) again
