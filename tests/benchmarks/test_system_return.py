"""The headline return of a shared-reward multi-agent task is the system's $ of the episode, not
``n_agents`` times it; the team sum is reported beside it, labelled."""

import numpy as np
import pytest

from powerzoo.benchmarks.evaluation import evaluate_days, return_unit, rollout
from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.rl import make_env
from powerzoo.tasks import task_spec


def test_marl_opf_headline_is_the_system_cost_of_the_episode():
    env = make_env("marl_opf", split="test", framework="auto", seed=0)
    system = []

    def on_step(obs, action, reward, next_obs, terminated, truncated, info):
        # the step's system cost: generation + imbalance + overload, as the reward terms say
        system.append(float(np.sum(info["reward_terms"])))

    policy = make_baseline_policy("rule_based", env, 0)
    record = rollout(env, policy, day_id=3, seed=0, on_step=on_step)
    episode_system = float(np.sum(system))
    assert episode_system < 0.0
    assert record["return"] == pytest.approx(episode_system, rel=1e-12)
    assert record["team_return"] == pytest.approx(5 * episode_system, rel=1e-12)
    summary = evaluate_days(policy, env, [3], seed=0)
    assert summary["mean_return"] == pytest.approx(episode_system, rel=1e-12)
    assert summary["mean_team_return"] == pytest.approx(5 * episode_system, rel=1e-12)


def test_return_unit_labels_the_team_sum():
    assert "team sum = 5 agents x this" in return_unit(task_spec("marl_opf"))
    assert return_unit(task_spec("opf_118")).startswith("$ of system cost per episode")
    assert "sum of the 5 agents' own returns" in return_unit(task_spec("gencos_bidding"))
    assert return_unit(task_spec("battery_arbitrage")) == "$ per episode"
    # dc_microgrid's reward weighs MWh, $ and tCO2: its return is not in dollars
    assert return_unit(task_spec("dc_microgrid_safe")) == "weighted units per episode"


def test_the_packaged_table_labels_each_row_with_its_task_return_unit():
    from powerzoo.benchmarks.baselines import load_baselines

    for row in load_baselines()["results"]:
        assert row["return_unit"] == return_unit(task_spec(row["task"])), row["task"]


def test_baseline_row_reports_the_system_return_and_the_team_sum():
    from powerzoo.benchmarks.baselines import evaluate_baseline

    row = evaluate_baseline("marl_opf", "rule_based", day_ids=[0])
    assert row["team_sum_mean"] == pytest.approx(5 * row["mean"], rel=1e-12)
    assert row["return_unit"] == return_unit(task_spec("marl_opf"))
