"""The idle baseline: the operator does nothing. Its action is "no control" on every task that
defines one (batteries stand still, loads are served, chargers charge on plug-in), the packaged
table has its rows for exactly those tasks, and asking it of a dispatch task is a clear error."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import numpy as np
import pytest
from helpers import REPO_ROOT

from powerzoo.benchmarks.baselines import (
    compute_baselines,
    evaluation_protocol,
    load_baselines,
    normalized_score,
)
from powerzoo.benchmarks.cmdp_score import cmdp_score
from powerzoo.benchmarks.policies import IdlePolicy, idle_tasks, make_baseline_policy
from powerzoo.envs.introspect import inspect_env
from powerzoo.rl import make_env
from powerzoo.tasks import list_tasks, task_spec

IDLE_TASKS = [
    "battery_arbitrage",
    "dso",
    "lv_unbalance",
    "marl_der_arbitrage",
    "marl_ders_benchmark",
    "marl_ev_v2g",
    "volt_var_123",
]
SCRIPT = REPO_ROOT / "benchmarks" / "compute_baselines.py"


def _idle_episode(task: str, **env_kwargs) -> tuple[list[dict], object, object]:
    """One test-day episode of the idle policy: each step's info (the first agent's on a
    multi-agent env), the task state at reset and at the end."""
    env = make_env(task, split="test", seed=0, **env_kwargs)
    policy = IdlePolicy(env)
    obs, info = env.reset(seed=0)
    runner = inspect_env(env).runner
    start = dataclasses.replace(runner.state)
    infos = []
    while True:
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        multi = isinstance(truncated, dict)
        infos.append(next(iter(info.values())) if multi else info)
        if (all(truncated.values()) or all(terminated.values())) if multi else truncated:
            return infos, start, runner.state


def test_exactly_the_storage_and_flexibility_tasks_define_an_idle_action():
    assert idle_tasks() == IDLE_TASKS
    for task in list_tasks():
        spec = task_spec(task)
        assert ("idle" in spec.baselines) == (spec.idle_action is not None) == bool(spec.idle_doc)


def test_a_battery_at_rest_keeps_its_soc_and_earns_nothing():
    infos, start, end = _idle_episode("battery_arbitrage")
    assert len(infos) == task_spec("battery_arbitrage").horizon
    np.testing.assert_array_equal(end.soc, start.soc)
    terms = np.asarray([i["reward_terms"] for i in infos])  # revenue, payment, wear, settlement
    assert not terms.any() and not any(i["cost_sum"] for i in infos)


def test_idle_batteries_on_the_feeder_keep_their_soc_and_trade_nothing():
    infos, start, end = _idle_episode("marl_der_arbitrage")
    np.testing.assert_array_equal(end.soc, start.soc)
    assert not np.any([i["battery_p_mw"] for i in infos])
    assert not np.any([i["agent_profit"] for i in infos])
    assert not np.any([i["reward_terms"] for i in infos])  # no wear, no settlement


def test_idle_ders_leave_every_device_alone():
    infos, start, end = _idle_episode("marl_ders_benchmark")
    np.testing.assert_array_equal(end.soc, start.soc)
    for key in ("pv_curtailed_mwh", "load_curtailed_mwh", "load_shifted_mwh", "action_applied"):
        assert not np.any([i[key] for i in infos]), key
    terms = np.asarray([i["reward_terms"] for i in infos])  # losses are the only cost
    assert not terms[:, 1:].any() and terms[:, 0].sum() < 0.0


def test_idle_dso_serves_every_flexible_load_and_breaks_the_voltage_budget():
    """Idle on dso is no control (every curtailment and shift fraction 0); the rule curtails
    where voltages sag, so it differs, and only idle is over the voltage budget in the table."""
    env = make_env("dso", split="test", seed=0)
    task = inspect_env(env).task
    obs = np.stack([env.reset(seed=s)[0] for s in range(3)]).astype(np.float64)
    assert not task.idle_action(obs).any()
    rows = {r["policy"]: r for r in load_baselines()["results"] if r["task"] == "dso"}
    assert rows["idle"]["over_budget_rate"] >= 0.3 and rows["rule_based"]["over_budget_rate"] == 0
    assert rows["idle"]["returns"] != rows["rule_based"]["returns"]


def test_idle_chargers_charge_every_car_at_full_power_until_it_is_full():
    """Uncontrolled charging: no V2G, every plugged car at the charger's rating unless full,
    every car leaving with its goal."""
    task = inspect_env(make_env("marl_ev_v2g", split="test")).task
    fleet = task.fleet
    infos, _, _ = _idle_episode("marl_ev_v2g")
    p = np.asarray([i["ev_p_kw"] for i in infos]).reshape(len(infos), -1)
    energy = np.asarray([i["ev_energy_kwh"] for i in infos]).reshape(p.shape)
    plugged = np.asarray([i["ev_plugged"] for i in infos]).reshape(p.shape) > 0.5
    assert p.max() <= 0.0  # never discharges
    full = energy >= fleet.max_kwh - 1e-6
    assert np.all(np.isclose(p, -fleet.charge_max_kw) | full | ~plugged)
    assert np.isclose(p, -fleet.charge_max_kw).any() and not any(
        i["cost_departure_shortfall"] for i in infos
    )


def test_the_idle_policy_converts_to_a_normalized_multi_agent_env():
    env = make_env("marl_ev_v2g", split="test", seed=0, normalize=True)
    obs, info = env.reset(seed=0)
    action = IdlePolicy(env).act(obs, info)
    assert set(action) == set(env.possible_agents)
    assert all(np.all(a == -1.0) for a in action.values())  # the lower bound, -7.2 kW


# ---- the table ------------------------------------------------------------------------------
def test_the_table_has_idle_rows_for_exactly_those_tasks_on_the_protocol():
    rows = [r for r in load_baselines()["results"] if r["policy"] == "idle"]
    assert sorted(r["task"] for r in rows) == IDLE_TASKS
    for row in rows:
        protocol = evaluation_protocol(row["task"])  # one protocol shared with the other rows
        assert row["day_ids"] == protocol["day_ids"] and row["seed"] == protocol["seed"]
        assert len(row["episode_costs"][task_spec(row["task"]).constraint_names[0]]) == len(
            row["returns"]
        )
    battery = next(r for r in rows if r["task"] == "battery_arbitrage")
    assert battery["mean"] == 0.0 and battery["over_budget_rate"] == 0.0
    # scores still run from random (0) to the oracle (1): the idle row is read, not a reference;
    # idle's score is -R_random / (R_oracle - R_random)
    rows_of = {
        r["policy"]: r["mean"]
        for r in load_baselines()["results"]
        if r["task"] == "battery_arbitrage"
    }
    expected = -rows_of["random"] / (rows_of["oracle"] - rows_of["random"])
    assert normalized_score("battery_arbitrage", 0.0) == pytest.approx(expected, abs=5e-4)
    assert cmdp_score(
        "battery_arbitrage", battery["returns"], battery["over_budget"]
    ) == pytest.approx(expected, abs=5e-4)


# ---- bad input ------------------------------------------------------------------------------
def test_idle_asked_of_a_dispatch_task_names_the_tasks_that_have_one():
    env = make_env("marl_opf", split="test")
    named = "tasks with an idle (no-control) action: " + ", ".join(IDLE_TASKS)
    for make in (lambda: IdlePolicy(env), lambda: make_baseline_policy("idle", env)):
        with pytest.raises(ValueError, match="marl_opf defines no idle baseline") as err:
            make()
        assert named in str(err.value)
    with pytest.raises(ValueError) as err:
        compute_baselines(["marl_opf"], policies=["idle"], progress=False)
    assert named in str(err.value)


def test_a_spec_with_a_bad_idle_action_is_refused():
    spec = task_spec("battery_arbitrage")
    cases = {
        "lists 'idle' in baselines": {"baselines": ("random", "rule_based", "oracle")},
        "needs an idle_action": {"idle_action": None},
        "has 2 entries": {"idle_action": (0.0, 0.0)},
        "outside the action bounds": {"idle_action": (30.0,)},
    }
    for message, change in cases.items():
        with pytest.raises(ValueError, match=message):
            dataclasses.replace(spec, **change)


# ---- computing only the idle rows -----------------------------------------------------------
def _script():
    spec = importlib.util.spec_from_file_location("compute_baselines", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_script_adds_idle_rows_on_the_tables_days_and_keeps_every_other_row(tmp_path, capsys):
    script = _script()
    out = tmp_path / "table.json"
    args = ["--tasks", "battery_arbitrage", "--output", str(out)]
    assert script.main([*args, "--max-episodes", "2", "--policies", "random", "oracle"]) == 0
    before = json.loads(out.read_text())
    assert [r["policy"] for r in before["results"]] == ["random", "oracle"]
    assert script.main([*args, "--policies", "idle"]) == 0  # no --max-episodes: the table's days
    after = json.loads(out.read_text())
    assert after["results"][:2] == before["results"]  # untouched, in place
    idle = after["results"][2]
    assert idle["policy"] == "idle" and idle["day_ids"] == before["results"][0]["day_ids"]
    assert idle["returns"] == [0.0, 0.0]
    assert after["generated_by"].startswith(before["generated_by"] + "; then ")
    assert script.main([*args, "--policies", "idle", "--seed", "3"]) == 2
    assert "rows use seed 0, not 3" in capsys.readouterr().err
    assert script.main(["--tasks", "marl_opf", "--policies", "idle", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "marl_opf defines no idle baseline" in err and "battery_arbitrage, dso" in err
    assert json.loads(out.read_text()) == after  # a refused run writes nothing
