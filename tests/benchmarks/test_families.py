"""Scenario families: the rule's and the oracle's drop from the test split to each held-out
family, paired by calendar day and env seed; the tasks short of test episodes."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from powerzoo.benchmarks.families import (
    count_test_episodes,
    evaluate_families,
    paired_days,
    scenario_families,
    write_families,
)
from powerzoo.cli.main import main
from powerzoo.data.calendar import STRESS_SPLITS
from powerzoo.tasks import make_task

TASK = "battery_arbitrage"


def _csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_families_are_the_splits_beyond_train_val_test():
    assert scenario_families(TASK) == STRESS_SPLITS
    assert "line_tightening" in scenario_families("tso")
    assert scenario_families("lv_unbalance") == ("load_stress", "heatwave")


def test_every_task_has_at_least_two_held_out_families():
    from powerzoo.tasks import list_tasks

    short = {t: scenario_families(t) for t in list_tasks() if len(scenario_families(t)) < 2}
    assert short == {}


def test_a_family_reaches_the_lv_homes_load_and_pv():
    test, stress, heat = (make_task("lv_unbalance", s) for s in ("test", "load_stress", "heatwave"))
    day = test.calendar_day(np.arange(test.n_days))
    assert np.array_equal(stress.calendar_day(np.arange(stress.n_days)), day)
    t = np.arange(48)
    load_test = test.exogenous(np.zeros(48, np.int64), t)[0]
    load_stress = stress.exogenous(np.zeros(48, np.int64), t)[0]
    assert np.allclose(load_stress, 1.15 * load_test, rtol=0.02)  # demand x 1.15
    hot = heat.exogenous(np.zeros(48, np.int64), t)
    same_day = int(np.flatnonzero(day == heat.calendar_day(np.zeros(1, np.int64))[0])[0])
    cool = test.exogenous(np.full(48, same_day), t)
    assert hot[0].sum() > cool[0].sum()  # the heat event's cooling load


def test_family_days_pair_with_test_days_of_the_same_calendar_day():
    test_calendar = make_task(TASK, "test").split_days
    heat = make_task(TASK, "heatwave")
    pairs = paired_days(TASK, "heatwave")
    assert len(pairs) == heat.n_days > 0
    for family_day, test_day in pairs:
        assert heat.split_days[family_day] == test_calendar[test_day]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    result = evaluate_families(TASK, max_episodes=4)
    return result, write_families(result, tmp_path_factory.mktemp("families"))


def test_families_table_has_test_and_stress_rows_with_the_drop_from_its_rows(table):
    result, files = table
    rows = _csv(files["csv"])
    assert [(r["policy"], r["split"]) for r in rows] == [
        (p, s) for p in ("rule_based", "oracle") for s in ("test", *STRESS_SPLITS)
    ]
    episodes = _csv(files["episodes"])
    for row in rows:
        mine = [e for e in episodes if (e["policy"], e["split"]) == (row["policy"], row["split"])]
        assert len(mine) == int(row["episodes"]) > 0
        family = np.mean([float(e["return"]) for e in mine])
        test = np.mean([float(e["test_return"]) for e in mine])
        assert float(row["mean_return"]) == pytest.approx(family, rel=1e-12)
        assert float(row["test_mean_return"]) == pytest.approx(test, rel=1e-12)
        assert float(row["drop"]) == pytest.approx(test - family, rel=1e-9, abs=1e-9)
        assert float(row["drop_pct"]) == pytest.approx(100 * (test - family) / abs(test))
        if row["split"] == "test":
            assert float(row["drop"]) == 0.0
    # each family episode's test twin is the test episode of that day, run with the same env seed
    test_eps = {(e["policy"], int(e["day_id"])): e for e in episodes if e["split"] == "test"}
    test_calendar = make_task(TASK, "test").split_days
    for e in episodes:
        assert int(e["calendar_day"]) == test_calendar[int(e["test_day_id"])]
        assert int(e["env_seed"]) == int(e["test_day_id"])  # seed 0 + test day
        twin = test_eps.get((e["policy"], int(e["test_day_id"])))
        if twin is not None:
            assert e["test_return"] == twin["return"]
    # a stress family changes the episodes: not every family return equals its test twin
    stressed = [e for e in episodes if e["split"] != "test"]
    assert any(e["return"] != e["test_return"] for e in stressed)
    text = files["md"].read_text()
    assert "| heatwave |" in text and "rule below oracle %" in text
    assert result.cost_names == ("soc_violation",)


def test_families_refuse_an_unknown_family_and_note_a_missing_baseline():
    with pytest.raises(ValueError, match="has no family line_tightening"):
        evaluate_families(TASK, families=["line_tightening"])
    result = evaluate_families(
        TASK, policies=["rule_based", "truthful"], families=["cold_snap"], max_episodes=2
    )
    assert [r["split"] for r in result.rows] == ["test", "cold_snap"]
    assert any("no truthful baseline" in n for n in result.notes)


def test_count_test_episodes_flags_short_tasks_with_an_estimate(tmp_path):
    def row(task, policy, episodes, seconds):
        return {
            "task": task,
            "split": "test",
            "policy": policy,
            "episodes": episodes,
            "seconds": seconds,
        }

    path = tmp_path / "baselines.json"
    rows = [row("opf", "rule_based", 4, 2.0), row("opf", "oracle", 4, 10.0)]
    rows += [row(TASK, "rule_based", 65, 0.65)]
    path.write_text(json.dumps({"generated_by": "test", "results": rows}))
    counts = {c["task"]: c for c in count_test_episodes(16, path)}
    assert counts["opf"]["short"] and not counts[TASK]["short"]
    assert counts["opf"]["per_episode_s"] == {"rule_based": 0.5, "oracle": 2.5}
    assert counts["opf"]["seconds_for_min"] == pytest.approx(16 * 3.0)
    assert counts[TASK]["test_days"] == 65


def test_episode_counts_of_one_task_or_every_task(capsys):
    assert main(["families", "--episode-counts"]) == 0
    every = capsys.readouterr().out.splitlines()
    assert main(["families", TASK, "--episode-counts"]) == 0
    one = capsys.readouterr().out.splitlines()
    assert len(one) == 3 and one[1].split()[0] == TASK and len(every) > len(one)
    assert one[1] in every
    assert main(["families", "nosuch", "--episode-counts"]) == 2
    assert "nosuch: no test rows in the baselines table" in capsys.readouterr().err


def test_families_command_writes_its_table(tmp_path, capsys):
    out = tmp_path / "fam"
    args = ["families", TASK, "--families", "price_spike", "--episodes", "2", "--out", str(out)]
    assert main(args) == 0
    assert {p.name for p in out.iterdir()} == {
        "families.csv",
        "families.md",
        "family_episodes.csv",
    }
    assert "| price_spike | 2 |" in capsys.readouterr().out


def test_protocol_days_are_the_baselines_table_days_and_their_family_twins(
    monkeypatch, tmp_path, capsys
):
    from powerzoo.benchmarks import baselines

    protocol = {"day_ids": [3, 40, 61], "seed": 0}
    monkeypatch.setattr(baselines, "evaluation_protocol", lambda task: protocol)
    result = evaluate_families(
        TASK, policies=["rule_based"], families=["heatwave"], protocol_days=True
    )
    by_split = {}
    for e in result.episodes:
        by_split.setdefault(e["split"], []).append(e)
    assert [e["day_id"] for e in by_split["test"]] == protocol["day_ids"]
    twins = [t for _, t in paired_days(TASK, "heatwave") if t in protocol["day_ids"]]
    assert twins and [e["test_day_id"] for e in by_split["heatwave"]] == twins
    assert all(e["env_seed"] == e["test_day_id"] for e in result.episodes)
    with pytest.raises(ValueError, match="leave max_episodes unset"):
        evaluate_families(TASK, max_episodes=4, protocol_days=True)
    out = tmp_path / "fam"
    args = ["families", TASK, "--policies", "rule_based", "--families", "heatwave"]
    assert main([*args, "--protocol-days", "--out", str(out)]) == 0
    assert f"| test | {len(protocol['day_ids'])} |" in capsys.readouterr().out
    assert main([*args, "--protocol-days", "--episodes", "2", "--out", str(out)]) == 2
    assert "leave max_episodes unset" in capsys.readouterr().err


def _family_pairs():
    from powerzoo.tasks import list_tasks

    return [(t, f) for t in list_tasks() for f in scenario_families(t)]


def _rule_rewards(task: str, split: str, day: int, seed: int):
    """The rule's reward at each step of one episode (summed over agents), lazily."""
    from powerzoo.benchmarks.policies import make_baseline_policy
    from powerzoo.envs.introspect import agents_of
    from powerzoo.envs.make import make_env

    env = make_env(task, split=split, seed=0)
    policy = make_baseline_policy("rule_based", env, 0)
    agents = agents_of(env)
    obs, info = env.reset(seed=seed, options={"day_id": day})
    policy.reset()
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        if agents is not None:
            reward = sum(float(reward[a]) for a in agents)
            terminated, truncated = any(terminated.values()), any(truncated.values())
        done = bool(terminated or truncated)
        yield float(reward)


@pytest.mark.parametrize(("task", "family"), _family_pairs())
def test_every_family_changes_what_the_rule_meets(task, family):
    """A held-out family must not be a copy of the test split: the rule's rewards on the first
    family day differ from its rewards on the same calendar day of the test split, with the
    same env seed (a stress split whose inputs the task never reads would score as test). The
    two episodes run side by side, up to the first step that differs."""
    family_day, test_day = paired_days(task, family)[0]
    steps = zip(
        _rule_rewards(task, family, family_day, test_day),
        _rule_rewards(task, "test", test_day, test_day),
        strict=True,
    )
    assert any(on_family != on_test for on_family, on_test in steps), (
        f"{task}/{family} day {family_day} equals test day {test_day}"
    )
