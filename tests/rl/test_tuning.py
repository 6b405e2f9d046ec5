"""``powerzoo tune``: the published search spaces, the sampler, the refusal of the test split and
a tiny tuning run that picks the best configuration by validation return within the budgets."""

from __future__ import annotations

import csv
import math
import shutil

import pytest
import yaml

from powerzoo.cli.main import main
from powerzoo.rl.algorithms import ALL_ALGORITHMS
from powerzoo.rl.campaigns import tuning
from powerzoo.rl.campaigns.tuning import (
    BEST_CONFIG,
    TUNING_CSV,
    TUNING_JSON,
    load_search_space,
    sample_configurations,
    tune,
)
from powerzoo.rl.campaigns.tuning_report import read_tuning
from powerzoo.rl.config import TrainConfig

REFUSAL = "tuning on the 'test' split is refused: only train and val may be learnt or chosen on"


def test_tuner_refuses_the_test_split_in_one_line(tmp_path, capsys):
    with pytest.raises(ValueError, match=REFUSAL) as err:
        tune("battery_arbitrage", "PPO", 2, "test", tmp_path / "t", steps=64)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "t").exists()  # refused before anything is written
    code = main(["tune", "battery_arbitrage", "-a", "PPO", "--split", "test", "--steps", "64"])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"powerzoo: error: {REFUSAL}")


@pytest.mark.parametrize("algorithm", ALL_ALGORITHMS)
def test_every_algorithm_has_a_search_space_whose_samples_are_valid_configs(algorithm):
    space = load_search_space(algorithm)
    assert space, algorithm
    task = "marl_opf" if "MAPPO" in algorithm or "IPPO" in algorithm else "battery_arbitrage"
    for values in sample_configurations(space, 3, seed=1):
        kwargs = tuning._nested(values, {})
        TrainConfig.from_dict(
            {
                "task": task,
                "algorithm": algorithm,
                "n_envs": 4,
                "total_timesteps": 1024,
                "algorithm_kwargs": kwargs,
            },
            source=None,
        )


def test_sampler_is_seeded_and_stays_in_its_ranges(tmp_path):
    space = {
        "lr": {"log_uniform": [1e-5, 1e-2]},
        "x": {"uniform": [-3.0, 0.0]},
        "n": {"choice": [8, 16]},
        "policy_kwargs.log_std_init": {"uniform": [-1.0, 0.0]},
    }
    a, b = sample_configurations(space, 50, seed=7), sample_configurations(space, 50, seed=7)
    assert a == b and a != sample_configurations(space, 50, seed=8)
    assert all(1e-5 <= v["lr"] <= 1e-2 and -3 <= v["x"] <= 0 and v["n"] in (8, 16) for v in a)
    logs = [math.log10(v["lr"]) for v in a]
    assert min(logs) < -4 and max(logs) > -3  # spread over the decades, not the linear range
    assert tuning._nested(a[0], {"policy_kwargs": {"net_arch": [8]}})["policy_kwargs"] == {
        "net_arch": [8],
        "log_std_init": a[0]["policy_kwargs.log_std_init"],
    }
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump({"PPO": {"lr": {"normal": [0, 1]}}}))
    with pytest.raises(ValueError, match="give one of log_uniform, uniform, choice"):
        load_search_space("PPO", path)
    path.write_text(yaml.safe_dump({"PPO": {"same_as": "A2C"}, "A2C": {"same_as": "PPO"}}))
    with pytest.raises(ValueError, match="loops"):
        load_search_space("PPO", path)
    path.write_text("PPO:\n  lr: {log_uniform: [1e-5, 1e-2]\n  n: 3\n")  # an unclosed brace
    with pytest.raises(ValueError, match=r"space\.yaml: not valid YAML at line \d+, column \d+: "):
        load_search_space("PPO", path)


def test_an_interrupted_tuning_says_how_to_go_on(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tuning, "tune", interrupted)
    assert main(["tune", "battery_arbitrage", "-a", "PPO", "--steps", "64"]) == 130
    assert capsys.readouterr().err == (
        "powerzoo: interrupted (tune); run the same command again to go on: finished "
        "configurations are kept\n"
    )


def test_best_is_the_highest_return_within_the_budgets_else_the_nearest_them():
    rows = [
        {"val_return": 9.0, "within_budget": False, "max_budget_ratio": 1.5},
        {"val_return": 5.0, "within_budget": True, "max_budget_ratio": 0.9},
        {"val_return": 7.0, "within_budget": True, "max_budget_ratio": 1.0},
    ]
    assert tuning._best(rows) == 2
    over = [dict(r, within_budget=False) for r in rows]
    over[2]["max_budget_ratio"] = 1.2
    assert tuning._best(over) == 1  # nearest its budgets: ratio 0.9


def test_tiny_tuning_run_writes_its_table_and_the_best_config(tmp_path, monkeypatch, capsys):
    out = tmp_path / "tuning"
    kwargs = dict(steps=256, episodes=2, n_envs=2)
    record = tune("battery_arbitrage", "PPO", 2, "val", out, **kwargs)
    with open(out / TUNING_CSV, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["config"] for r in rows] == ["0", "1"]
    returns = [float(r["val_return"]) for r in rows]
    within = [r["within_budget"] == "True" for r in rows]
    candidates = [i for i in range(2) if within[i]] or [0, 1]
    best = max(candidates, key=lambda i: returns[i])
    assert record["best_index"] == best and [r["best"] for r in rows].count("True") == 1
    assert rows[best]["best"] == "True"
    assert all(int(r["env_steps"]) >= 256 and int(r["val_episodes"]) == 2 for r in rows)
    best_config = TrainConfig.from_file(out / BEST_CONFIG)
    sampled = record["best"]["values"]
    assert best_config.algorithm_kwargs["learning_rate"] == sampled["learning_rate"]
    assert best_config.algorithm_kwargs["policy_kwargs"]["log_std_init"] == pytest.approx(
        sampled["policy_kwargs.log_std_init"]
    )
    assert best_config.total_timesteps == 256 and best_config.seed == 0
    budget = yaml.safe_load((out / TUNING_JSON).read_text())
    assert (budget["split"], budget["configurations"], budget["steps_per_configuration"]) == (
        "val",
        2,
        256,
    )
    assert budget["hardware"]["cpu_model"] and budget["best"]["hardware"]["torch_threads"] == 1
    low, high = budget["env_steps_range"]
    assert low == min(int(r["env_steps"]) for r in rows) and high >= low >= 256
    # a second call finds both configurations finished and trains nothing, also in a copy of
    # the folder elsewhere, and says so
    monkeypatch.setattr(tuning, "_train_and_score", lambda *a, **k: pytest.fail("retrained"))
    again = tune("battery_arbitrage", "PPO", 2, "val", out, **kwargs)
    assert again["best"]["val_return"] == record["best"]["val_return"]
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    capsys.readouterr()
    tune("battery_arbitrage", "PPO", 2, "val", moved, progress=True, **kwargs)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "tuning PPO on battery_arbitrage: 2 configuration(s), 256 env steps each, chosen on "
        f"val; writing {moved}"
    )
    assert (
        all(
            line.startswith(f"config{i}: val return ") and line.endswith("kept from an earlier run")
            for i, line in enumerate(lines[1:])
        )
        and len(lines) == 3
    )
    # another tuning into the same folder is refused, not trained over it
    with pytest.raises(ValueError, match=r"holds another tuning \(config0 was trained with other"):
        tune("battery_arbitrage", "PPO", 2, "val", moved, sampler_seed=1, **kwargs)
    assert (moved / "runs" / "config0" / "result.json").is_file()


def _campaign_file(tmp_path, evaluation_split="val"):
    """A one-task campaign whose PPO setting trains 2 CPU seconds and evaluates on val every 64
    steps, testing its best model (the v2 campaign's protocol, shrunk)."""
    path = tmp_path / "campaign.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "tiny",
                "tasks": ["battery_arbitrage"],
                "seeds": [0],
                "track": {"name": "S", "wall_clock_s": 2, "clock": "cpu"},
                "budget": {"total_timesteps": 10_000_000, "n_envs": 2},
                "evaluation": {"split": "test", "episodes": 2, "model": "best"},
                "algorithms": {
                    "PPO": {
                        "settings": {
                            "small": {
                                "algorithm_kwargs": {"n_steps": 32, "batch_size": 32},
                                "overrides": {
                                    "evaluation": {
                                        "split": evaluation_split,
                                        "freq": 64,
                                        "episodes": 2,
                                    }
                                },
                            }
                        }
                    }
                },
            }
        )
    )
    return path


def test_campaign_protocol_scores_each_configuration_by_its_selected_model(tmp_path):
    campaign = _campaign_file(tmp_path)
    out = tmp_path / "tuned"
    record = tune("battery_arbitrage", "PPO", 2, "val", out, campaign=campaign, preset=True)
    assert record["model"] == "best" and record["campaign"]["setting"] == "small"
    assert record["track"]["clock"] == "cpu" and record["track"]["wall_clock_s"] == 2
    with open(out / TUNING_CSV, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["config"] for r in rows] == ["0", "1", "preset"]
    assert rows[2]["best"] == "False"  # the preset is reported, never chosen
    for name, row in zip(("config0", "config1", "preset"), rows, strict=True):
        log = out / "runs" / name / "evaluation" / "evaluation_metrics.csv"
        with open(log, newline="") as handle:
            evaluations = list(csv.DictReader(handle))
        assert len(evaluations) >= 2  # periodic evaluations on val, as the campaign trains
        kept = [e for e in evaluations if e["new_best"] == "True"][-1]
        assert float(row["val_return"]) == float(kept["mean_return"])
        assert int(row["selected_step"]) == int(kept["timestep"])
        assert int(row["val_episodes"]) == 2
    preset_config = yaml.safe_load((out / "runs" / "preset" / "config.yaml").read_text())
    assert preset_config["algorithm_kwargs"]["n_steps"] == 32  # the setting's own values
    assert record["gain_over_preset"] == pytest.approx(
        record["best"]["val_return"] - record["preset"]["val_return"]
    )
    tuned = TrainConfig.from_file(out / BEST_CONFIG)
    assert tuned.evaluation.split == "val" and tuned.n_envs == 2
    assert tuned.algorithm_kwargs["learning_rate"] == record["best"]["values"]["learning_rate"]

    # the report: one line per tuning folder, its numbers from tuning.json and tuning.csv
    report = tmp_path / "report"
    assert main(["tune-report", str(out), "--out", str(report)]) == 0
    line = (report / "tuning_report.md").read_text().splitlines()[2]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:3] == ["battery_arbitrage", "PPO/small", "2"]
    assert cells[3].startswith(f"{record['preset']['val_return']:,.2f}")
    assert cells[4].startswith(f"{record['best']['val_return']:,.2f}")
    assert cells[4].endswith(f"(config {record['best_index']})")
    assert cells[5] == f"{record['gain_over_preset']:+,.2f}"
    within = sum(r["within_budget"] == "True" for r in rows[:2])
    assert cells[6] == f"{within} of 2"
    assert (report / "tuning_report.png").stat().st_size > 10_000
    with pytest.raises(FileNotFoundError, match="has the tuning run finished"):
        read_tuning(tmp_path / "report")


def test_campaign_protocol_refuses_what_it_cannot_tune(tmp_path):
    campaign = _campaign_file(tmp_path)
    with pytest.raises(ValueError, match="has no SAC trial on battery_arbitrage; it runs PPO"):
        tune("battery_arbitrage", "SAC", 1, "val", tmp_path / "a", campaign=campaign)
    with pytest.raises(ValueError, match="no setting 'big'"):
        tune("battery_arbitrage", "PPO", 1, "val", tmp_path / "b", campaign=campaign, setting="big")
    with pytest.raises(ValueError, match="steps come from the campaign file"):
        tune("battery_arbitrage", "PPO", 1, "val", tmp_path / "c", campaign=campaign, steps=64)
    with pytest.raises(ValueError, match="give the campaign too"):
        tune("battery_arbitrage", "PPO", 1, "val", tmp_path / "d", steps=64, setting="small")
    (tmp_path / "t").mkdir()
    selecting_on_test = _campaign_file(tmp_path / "t", "test")
    with pytest.raises(ValueError, match="selection on the 'test' split is refused"):
        tune("battery_arbitrage", "PPO", 1, "val", tmp_path / "e", campaign=selecting_on_test)
    assert not any((tmp_path / n).exists() for n in "abcde")
