"""``powerzoo demo``: its table (profit, constraint cost, violation rate) and its agent, trained on
the penalised reward so that it keeps its requests inside the SOC bounds, scored on the task's
profit."""

from __future__ import annotations

import pytest

from powerzoo.benchmarks.baselines import select_days
from powerzoo.benchmarks.evaluation import evaluate_days
from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.cli.demo import run_demo, verdict
from powerzoo.envs import make_env
from powerzoo.rl import Trainer
from powerzoo.tasks import make_task, task_spec

BASELINES = ("random", "idle", "rule_based", "oracle")
SOC_THRESHOLD = task_spec("battery_arbitrage").cost_thresholds["soc_violation"]  # 1 MWh per day
PENALTY = task_spec("battery_arbitrage").reward_presets["penalized"]["soc_violation"]  # $ per MWh


def table_rows(stdout: str) -> dict[str, list[float]]:
    """The numeric columns of each policy row of the printed table."""
    rows = {}
    for line in stdout.splitlines():
        fields = line.split()
        if fields and (fields[0] in BASELINES or fields[0].startswith("ppo_")):
            rows[fields[0]] = [float(f.replace(",", "")) for f in fields[1:]]
    return rows


def test_demo_table_shows_return_and_constraint_columns_for_every_baseline(tmp_path, capsys):
    results = run_demo(tmp_path, episodes=3, timesteps=0, progress=False)
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("policy"))
    for column in ("return $/day", "std $/day", "soc_violation MWh/day", "violation rate"):
        assert column in header
    rows = table_rows(out)
    assert set(rows) == set(BASELINES) == set(results)
    for name, (episodes, mean_return, _std, violation, rate) in rows.items():
        assert episodes == 3
        assert mean_return == pytest.approx(results[name]["mean_return"], abs=0.05)
        assert violation == pytest.approx(results[name]["mean_costs"]["soc_violation"], abs=5e-4)
        assert rate == pytest.approx(results[name]["violation_rate"], abs=5e-3)
    assert rows["oracle"][1] >= rows["rule_based"][1] >= rows["random"][1]
    assert rows["idle"][1:] == [0.0, 0.0, 0.0, 0.0]  # at rest: no trade, no wear, no violation
    assert rows["oracle"][3] == rows["rule_based"][3] == 0.0  # both feasible by construction
    assert (tmp_path / "demo_episode.png").is_file()


@pytest.mark.slow
def test_penalised_demo_training_keeps_the_soc_bounds_and_is_scored_on_profit(tmp_path, capsys):
    budget, days = 8192, select_days(make_task("battery_arbitrage", "test").n_days, 11)
    profit_env = make_env("battery_arbitrage", "test", normalize=True)
    # the demo itself, on a short budget: trained on the penalty, reported on profit
    results = run_demo(tmp_path / "penalised", episodes=len(days), timesteps=budget, progress=False)
    row = table_rows(capsys.readouterr().out)["ppo_8k"]
    penalised = results["ppo_8k"]
    assert penalised["mean_costs"]["soc_violation"] < SOC_THRESHOLD
    assert row[3] < SOC_THRESHOLD

    # a policy that violates the SOC bounds: random actions, the same draws on every env
    def violating():
        return make_baseline_policy("random", profit_env, seed=0)

    # the table's return is the profit: the best model evaluated on an env without the override
    best = Trainer.load(tmp_path / "penalised" / "run", model="best")
    assert best.config.env.reward == "penalized"
    assert penalised["mean_return"] == pytest.approx(
        evaluate_days(best.policy(), profit_env, days)["mean_return"]
    )
    # the demo's scoring env of a penalised run pays the profit even to a violating policy, and the
    # penalised reward is that profit minus PENALTY $ per MWh of violation
    scoring_env = best.make_eval_env("test", objective=True)
    on_profit = evaluate_days(violating(), scoring_env, days)
    penalised_env = make_env(
        "battery_arbitrage", "test", normalize=True, reward=best.config.env.reward
    )
    on_penalty = evaluate_days(violating(), penalised_env, days)
    plain = evaluate_days(violating(), profit_env, days)  # the task's own reward
    assert on_penalty["mean_costs"]["soc_violation"] > SOC_THRESHOLD  # the penalty bites
    assert on_profit["mean_return"] == pytest.approx(plain["mean_return"])
    assert on_profit["mean_return"] == pytest.approx(
        on_penalty["mean_return"] + PENALTY * on_penalty["mean_costs"]["soc_violation"]
    )
    assert on_profit["mean_return"] > on_penalty["mean_return"]


def test_the_verdict_names_what_the_agent_beats_and_its_share_of_the_oracles_gain():
    results = {
        "idle": {"mean_return": 0.0},
        "rule_based": {"mean_return": 1_000.0},
        "oracle": {"mean_return": 4_000.0},
        "ppo_60k": {"mean_return": 2_000.0},
    }
    line = verdict(results, "ppo_60k")
    assert line.startswith("verdict: ppo_60k (2,000 $/day) beats idle (0 $/day), beats the rule")
    assert "takes 50% of the oracle's gain over idle (4,000 $/day)" in line
    results["ppo_60k"]["mean_return"] = -10.0
    line = verdict(results, "ppo_60k")
    assert "does not beat idle" in line and "does not beat the rule" in line
