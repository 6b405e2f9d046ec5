"""benchmarks/mappo_throughput.py --time-to-rule: env steps and training seconds until a preset
reaches the rule's return within the task's budgets."""

import pytest
import yaml
from helpers import REPO_ROOT, load_script

SCRIPT = REPO_ROOT / "benchmarks" / "mappo_throughput.py"


@pytest.fixture(scope="module")
def script():
    return load_script(SCRIPT)


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny.yaml"
    run = {
        "task": "marl_opf",
        "algorithm": "MAPPO",
        "total_timesteps": 10_000,
        "n_envs": 4,
        "algorithm_kwargs": {"n_steps": 8, "n_epochs": 1, "hidden_sizes": [8]},
    }
    path.write_text(yaml.safe_dump(run))
    return path


def test_a_short_run_does_not_reach_the_rule_and_says_what_it_reached(script, tiny_config, capsys):
    out = script.measure_time_to_rule("marl_opf", tiny_config, 64, 32, 2)
    assert out["days"] == 2 and out["budgets"] == {"thermal_overload": 1.0, "power_imbalance": 1.0}
    assert not out["reached"] and out["env_steps"] == 64 and out["train_seconds"] > 0
    assert out["past_rule_env_steps"] is None  # 64 env steps of training stay far from the rule
    assert set(out["best_return_costs"]) == set(out["budgets"])
    script._print_time_to_rule(out)
    assert "not reached within 64 env steps" in capsys.readouterr().out


def test_the_first_evaluation_past_the_rule_is_reported(script, tiny_config, monkeypatch, capsys):
    from powerzoo.benchmarks import baselines

    real = baselines.evaluate_baseline

    def low_rule(task, policy, split="test", day_ids=None, **kwargs):
        row = dict(real(task, policy, split, day_ids, **kwargs))
        row["returns"] = [-1e12] * len(row["returns"])  # any policy passes this "rule"
        return row

    monkeypatch.setattr(baselines, "evaluate_baseline", low_rule)
    out = script.measure_time_to_rule("marl_opf", tiny_config, 64, 32, 2)
    assert out["rule_return"] == -1e12 and out["past_rule_env_steps"] == 32
    assert out["past_rule_seconds"] > 0
    within = all(out["past_rule_costs"][k] <= v for k, v in out["budgets"].items())
    assert out["reached"] == within  # reached = past the rule with every cost within its budget
    if out["reached"]:
        assert out["env_steps"] == 32 and out["train_seconds"] == out["past_rule_seconds"]
    script._print_time_to_rule(out)
    printed = capsys.readouterr().out
    assert ("32 env steps" in printed) and ("time to the rule's return" in printed)


def test_a_gap_to_the_rule_counts_as_reaching_it(script, tiny_config, capsys):
    """With --rule-gap the target is the rule's return less that percent of its magnitude: a
    wide enough gap is met at the first evaluation by any policy within the budgets."""
    out = script.measure_time_to_rule("marl_opf", tiny_config, 64, 32, 2, gap_percent=1e6)
    assert out["target_return"] == pytest.approx(out["rule_return"] * (1 + 1e4))
    assert out["past_rule_env_steps"] == 32  # far below the rule, but within the gap
    within = all(out["past_rule_costs"][k] <= v for k, v in out["budgets"].items())
    assert out["reached"] == within
    script._print_time_to_rule(out)
    assert "less 1e+06 %" in capsys.readouterr().out
