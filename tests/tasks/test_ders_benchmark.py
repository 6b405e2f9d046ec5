"""``marl_ders_benchmark``: 12 heterogeneous DERs in three agent groups on the 141-bus feeder."""

import numpy as np
import pytest
from helpers import random_parallel_rollout
from pettingzoo.test import parallel_api_test

from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.rl import make_env
from powerzoo.tasks import describe, task_spec
from powerzoo.tasks.ders_benchmark import MarlDersBenchmark
from powerzoo.tasks.ders_benchmark.oracle import DersOracle, payback_matrix

TASK = "marl_ders_benchmark"
GROUPS = {
    "batteries": ["battery_0", "battery_1", "battery_2", "battery_3"],
    "pv": ["pv_0", "pv_1", "pv_2", "pv_3"],
    "flexible_loads": ["load_0", "load_1", "load_2", "load_3"],
}


def _rollout(task, days, policy, seed=0):
    """Whole episodes of ``days`` under ``policy(task, state, rng) -> joint action``:
    return, costs [B, 4]."""
    rng = np.random.default_rng(seed)
    state = task.reset(rng, days)
    ret, costs = np.zeros(days.size), np.zeros((days.size, 4))
    for _ in range(task.spec.horizon):
        state, out = task.step(state, policy(task, state, rng), rng)
        ret += out.reward
        costs += out.constraint_costs
    return ret, costs


def _uncontrolled(task, state, rng):
    return np.zeros((state.t.size, task.spec.action.dim))


def _random(task, state, rng):
    lo, hi = task.spec.action.bounds()
    return rng.uniform(lo, hi, size=(state.t.size, lo.size))


def _rule(task, state, rng):
    return task.rule_based_action(task.observe(state))


def test_parallel_api_and_a_random_rollout_with_the_shared_team_reward():
    parallel_api_test(make_env(TASK, framework="pettingzoo"), num_cycles=5)
    env = make_env(TASK, framework="pettingzoo", seed=0)
    rollout = random_parallel_rollout(env, seed=0)
    assert all(len(set(rewards.values())) == 1 for rewards in rollout.rewards)  # shared team reward
    assert rollout.steps == 48 and all(rollout.truncations.values())


def test_three_agent_groups_with_their_own_action_bounds():
    env = make_env(TASK, framework="pettingzoo", seed=0)
    assert env.agent_groups == GROUPS
    assert (
        "agent groups: batteries (4: p_mw, q_mvar); "
        "pv (4: curtail, q_mvar); flexible_loads (4: curtail, shift)" in describe(TASK)
    )
    bat, pv, load = (env.action_space(a) for a in ("battery_0", "pv_2", "load_3"))
    np.testing.assert_allclose(bat.low, [-0.5, -0.55])
    np.testing.assert_allclose(bat.high, [0.5, 0.55])
    np.testing.assert_allclose(pv.low, [0.0, -1.43])
    np.testing.assert_allclose(pv.high, [1.0, 1.43])
    np.testing.assert_allclose(load.low, [0.0, 0.0])
    np.testing.assert_allclose(load.high, [0.3, 0.3])
    vec = make_env(TASK, num_envs=3, seed=0)
    obs, _ = vec.reset(seed=0)
    by_group = vec.group_arrays(obs)
    assert {g: a.shape for g, a in by_group.items()} == {g: (3, 4, 12) for g in GROUPS}


@pytest.mark.parametrize("mode", ["ders_local", "global", "local", "local_plus_voltage"])
def test_observation_modes_are_uniform_named_and_zero_filled(mode):
    env = make_env(TASK, framework="pettingzoo", obs_mode=mode, seed=0)
    obs, _ = env.reset(seed=0, options={"day_id": 3})
    fields = env.observation_fields("battery_0")
    assert all(env.observation_fields(a) == fields for a in env.agents)
    assert {obs[a].shape for a in env.agents} == {(len(fields),)}
    i = {name: k for k, name in enumerate(fields)}
    assert obs["pv_0"][i["own_soc"]] == 0.0 and obs["load_0"][i["own_soc"]] == 0.0
    assert obs["battery_0"][i["own_soc"]] == pytest.approx(0.5)
    assert (
        obs["battery_1"][i["own_base_load_mw"]] == 0.0
        and obs["load_1"][i["own_base_load_mw"]] > 0.0
    )
    assert 0.9 < obs["pv_3"][i["own_v_pu"]] < 1.05
    if mode in ("ders_local", "global"):
        assert obs["pv_1"][[i["is_battery"], i["is_pv"], i["is_flexible_load"]]].tolist() == [
            0.0,
            1.0,
            0.0,
        ]
    if mode == "local_plus_voltage":  # the parent bus sits upstream: higher voltage under load
        assert obs["pv_0"][i["upstream_v_pu"]] >= obs["pv_0"][i["own_v_pu"]]
    assert env.observation_space("load_2").contains(obs["load_2"])


def test_invariants_every_step():
    task = MarlDersBenchmark("test")
    rng = np.random.default_rng(1)
    state = task.reset(rng, np.arange(6))
    shifted = paid = np.zeros(6)
    for _ in range(task.spec.horizon):
        state, out = task.step(state, _random(task, state, rng), rng)
        info = out.info
        assert info["pf_converged"].all()
        # feeder-head power = loads served - DER injections + losses
        np.testing.assert_allclose(
            info["feeder_p_mw"],
            info["served_load_mw"] - info["der_injection_mw"] + info["p_loss_mw"],
            atol=1e-6,
        )
        b = task.battery
        assert np.all(state.soc >= b.soc_min - 1e-9) and np.all(state.soc <= b.soc_max + 1e-9)
        assert np.all(out.constraint_costs >= 0.0) and np.isfinite(out.reward).all()
        np.testing.assert_allclose(out.reward, out.reward_terms.sum(axis=1))
        shifted, paid = shifted + info["load_shifted_mwh"], paid + info["load_payback_mwh"]
    np.testing.assert_allclose(shifted, paid, atol=1e-9)  # shifted energy comes back within the day


def test_uncontrolled_feeder_overloads_under_midday_pv_and_rule_based_beats_random():
    task = MarlDersBenchmark("test")
    days = np.arange(task.n_days)
    ret_none, costs_none = _rollout(task, days, _uncontrolled)
    budget = task.spec.cost_thresholds
    # controls must matter: with the LTC holding the head at 1.019 p.u. the voltages stay in
    # band, but the uncurtailed PV's midday reverse flow overloads the PV lateral beyond the
    # 0.25 MVAh budget on 24 of the 65 test days (37 %)
    assert np.all(costs_none[:, 0] == 0.0)
    assert (costs_none[:, 1] > budget["thermal_overload"]).sum() >= 0.3 * task.n_days
    assert np.all(costs_none[:, 2:] == 0.0)
    # without the tap changer (the head at 1.00 p.u.) the lateral also sags out of the band
    _, costs_fixed = _rollout(MarlDersBenchmark("test", ltc=False), days, _uncontrolled)
    assert (costs_fixed[:, 0] > budget["voltage_violation"]).sum() >= 0.2 * task.n_days
    few = days[:: max(1, task.n_days // 6)]
    ret_rule, costs_rule = _rollout(task, few, _rule)
    ret_rand, _ = _rollout(task, few, _random)
    assert np.all(ret_rule > ret_rand)
    assert costs_rule[:, 0].sum() <= costs_none[few, 0].sum() and np.all(costs_rule[:, 2:] < 1e-9)
    assert ret_rule.mean() > ret_none[few].mean()  # arbitrage pays, voltages are kept by Q


def test_rule_based_policy_runs_through_the_env():
    env = make_env(TASK, framework="pettingzoo", seed=0)
    policy = make_baseline_policy("rule_based", env)
    obs, info = env.reset(seed=0, options={"day_id": 0})
    total = 0.0
    while env.agents:
        obs, rewards, _, _, info = env.step(policy.act(obs, info))
        total += rewards["pv_0"]
    assert np.isfinite(total)


def test_splits_are_honoured():
    test, train, stress = (
        MarlDersBenchmark("test"),
        MarlDersBenchmark("train"),
        MarlDersBenchmark("load_stress"),
    )
    assert set(test.split_days).isdisjoint(train.split_days)
    np.testing.assert_array_equal(stress.split_days, test.split_days)
    rng = np.random.default_rng(0)
    days = np.arange(3)
    _, base_out = test.step(
        test.reset(rng, days), _uncontrolled(test, test.reset(rng, days), rng), rng
    )
    _, stress_out = stress.step(
        stress.reset(rng, days), _uncontrolled(stress, stress.reset(rng, days), rng), rng
    )
    np.testing.assert_allclose(stress_out.info["demand_pu"], 1.15 * base_out.info["demand_pu"])
    low = MarlDersBenchmark("low_renewable")
    assert low.pv_cf.max() < 0.41 * test.pv_cf.max()
    assert set(task_spec(TASK).splits) >= {
        "train",
        "val",
        "test",
        "load_stress",
        "low_renewable",
        "price_spike",
    }
    env = make_env(TASK, framework="pettingzoo", split="val", seed=0)
    with pytest.raises(ValueError, match="out of range"):
        env.reset(seed=0, options={"day_id": 10_000})


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match="unknown obs_mode 'nope'"):
        make_env(TASK, framework="pettingzoo", obs_mode="nope")
    env = make_env(TASK, framework="pettingzoo", seed=0)
    env.reset(seed=0)
    actions = {a: env.action_space(a).sample() for a in env.agents}
    with pytest.raises(ValueError, match="shape"):
        env.step({**actions, "pv_1": np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match="(?i)nan"):
        env.step({**actions, "load_0": np.array([np.nan, 0.0], np.float32)})
    with pytest.raises(TypeError, match=r"unknown parameter\(s\)"):
        task_spec(TASK, n_units=5)


# ---- oracle -----------------------------------------------------------------------------------
ORACLE_DAYS = np.array(
    [30, 21, 44]
)  # a July day the uncontrolled feeder sags far below the band, and two others


@pytest.fixture(scope="module")
def oracle_run():
    """The oracle's plans of ``ORACLE_DAYS`` on the test split and what the task makes of them."""
    task = MarlDersBenchmark("test")
    rng = np.random.default_rng(0)
    state = task.reset(rng, ORACLE_DAYS)
    plan = task.oracle_plan(state)
    steps = []
    for t in range(task.spec.horizon):
        state, out = task.step(state, plan[:, t], rng)
        steps.append(out)
    return task, plan, steps


def test_oracle_plan_is_feasible_for_the_devices(oracle_run):
    task, plan, steps = oracle_run
    assert plan.shape == (ORACLE_DAYS.size, task.spec.horizon, 24)
    lo, hi = task.spec.action.bounds()
    assert np.all(plan >= lo - 1e-12) and np.all(plan <= hi + 1e-12)
    shifted = paid = 0.0
    for t, out in enumerate(steps):
        # the devices apply the plan as it is: nothing cut, no SOC, S-limit or payback violation
        np.testing.assert_allclose(out.action_applied, plan[:, t], atol=1e-12)
        assert np.all(out.constraint_costs[:, 2:] == 0.0)  # device_violation, reactive_cut
        act = plan[:, t].reshape(-1, 12, 2)
        p_bat, q_bat = act[:, :4, 0], act[:, :4, 1]
        assert np.all(np.hypot(p_bat, q_bat) <= task.battery.s_rating_mva)
        pv_p = out.info["pv_available_mw"] * (1.0 - act[:, 4:8, 0])
        assert np.all(np.hypot(pv_p, act[:, 4:8, 1]) <= task.pv.s_rating_mva)
        assert np.all(out.info["soc"] >= task.battery.soc_min) and np.all(
            out.info["soc"] <= task.battery.soc_max
        )
        shifted, paid = shifted + out.info["load_shifted_mwh"], paid + out.info["load_payback_mwh"]
    assert np.all(plan[:, -1, 17::2] == 0.0)  # no shift on the last step
    np.testing.assert_allclose(shifted, paid, atol=1e-9)
    np.testing.assert_allclose(steps[-1].info["load_backlog_mwh"], 0.0, atol=1e-9)


def test_oracle_beats_the_rule_on_return_without_overload(oracle_run):
    task, _, steps = oracle_run
    ret = sum(out.reward for out in steps)
    costs = sum(out.constraint_costs for out in steps)
    ret_rule, costs_rule = _rollout(task, ORACLE_DAYS, _rule)
    ret_none, costs_none = _rollout(task, ORACLE_DAYS, _uncontrolled)
    assert np.all(ret > ret_rule) and np.all(ret > ret_none)
    # test day 44: the PV lateral overloads beyond the budget uncontrolled; the rule's export
    # limit keeps it within
    over = task.spec.cost_thresholds["thermal_overload"]
    assert costs_none[2, 1] > over >= costs_rule[2, 1]
    assert np.all(costs[:, :2] < 1e-9)  # the oracle: in band, no overload
    # the reward is bought where it is cheap: no load curtailed at 1,000 $/MWh on these days
    assert sum(out.info["load_curtailed_mwh"] for out in steps).max() < 1e-6


def test_oracle_plans_voltages_on_lindistflow_close_to_the_exact_flow():
    task = MarlDersBenchmark("test")
    oracle = DersOracle(task, 1000.0)
    state = task.reset(np.random.default_rng(0), np.array([0]))
    day = oracle.plan_day(0, 0, state.soc[0], state.due_mwh[0], task.head_vm_pu(state, 0))
    cols, rows, nnz = day.lp_size
    assert day.actions.shape == (48, 24) and cols > 10_000 and rows > cols and nnz > rows
    # the LP's linearised voltages and losses against the exact AC flow of the same plan
    assert np.abs(day.predicted_vm_pu - day.exact_vm_pu).max() < 2e-3
    np.testing.assert_allclose(day.predicted_loss_mw.sum(), day.exact_loss_mw.sum(), rtol=0.03)
    assert day.exact_vm_pu.min() >= 0.95 and day.exact_vm_pu.max() <= 1.05
    # and that exact flow is what the task computes step by step
    rng = np.random.default_rng(0)
    for t in range(48):
        state, out = task.step(state, day.actions[t][None], rng)
        np.testing.assert_allclose(state.vm_pu[0], day.exact_vm_pu[t], atol=1e-7)
        np.testing.assert_allclose(out.info["p_loss_mw"][0], day.exact_loss_mw[t], atol=1e-7)


def test_payback_matrix_pays_every_shift_back_within_its_window():
    w = payback_matrix(40, 48, 4)  # 8 steps left
    np.testing.assert_allclose(
        w.sum(axis=0)[:-1], 1.0
    )  # every step but the last pays back all it shifts
    assert w[:, -1].sum() == 0.0 and np.all(np.triu(w) == 0.0)
    np.testing.assert_allclose(w[1:5, 0], 0.25)
    np.testing.assert_allclose(w[6:8, 5], 0.5)  # two steps left after step 45


def test_oracle_policy_runs_through_the_normalised_env():
    env = make_env(TASK, framework="pettingzoo", split="test", normalize=True, seed=0)
    policy = make_baseline_policy("oracle", env)
    obs, info = env.reset(seed=0, options={"day_id": 21})
    policy.reset()
    total, violation = 0.0, 0.0
    while env.agents:
        obs, rewards, _, _, info = env.step(policy.act(obs, info))
        total += sum(rewards.values())
        violation += (
            info["battery_0"]["cost_voltage_violation"]
            + info["battery_0"]["cost_device_violation"]
            + info["battery_0"]["cost_reactive_cut"]
        )
    task = MarlDersBenchmark("test")
    plan = task.oracle_plan(task.reset(np.random.default_rng(0), np.array([21])))
    ret, _ = _rollout(task, np.array([21]), lambda tk, st, rng: plan[:, int(st.t[0])])
    assert (
        total == pytest.approx(12 * ret[0], rel=1e-5) and violation == 0.0
    )  # team return = 12 x shared reward


# ---- PV reactive power without sun; device costs in their own units ----------------------------
def _night_step(task, q_pv):
    """One step at 01:00 of test day 3 (no sun) with every DER idle but the PV inverters asked for
    ``q_pv`` Mvar each: the step's output and the state after it."""
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([3]))
    state.t[:] = 2  # 01:00-01:30
    assert task.pv_cf.take(task.flat_index(state.day_id, state.t))[0] == 0.0
    act = np.zeros((1, 12, 2))
    act[:, 4:8, 1] = q_pv
    return task.step(state, act.reshape(1, 24), rng)


def test_pv_inverters_give_no_reactive_power_at_night_unless_the_option_is_on():
    # IEEE 1547-2018 leaves reactive support at zero active power optional: off by default
    task = MarlDersBenchmark("test")
    assert task.params.pv_q_at_night is False and task.pv.q_at_night is False
    (idle_state, idle), (state, out) = _night_step(task, 0.0), _night_step(task, 0.8)
    np.testing.assert_array_equal(out.action_applied.reshape(12, 2)[4:8, 1], 0.0)
    np.testing.assert_array_equal(state.vm_pu, idle_state.vm_pu)  # the Q action has no effect
    np.testing.assert_array_equal(out.info["feeder_q_mvar"], idle.info["feeder_q_mvar"])
    np.testing.assert_allclose(out.constraint_costs[0, 3], 4 * 0.8 * 0.5)  # asked, cut: Mvarh
    # the rule does not ask for Q it cannot have
    obs = task.observe(task.reset(np.random.default_rng(0), np.array([3])))
    assert np.all(obs[0, 4:8, task._rule_dev + 2] == 0.0)  # no sun at midnight
    assert np.all(task.rule_based_action(obs).reshape(12, 2)[4:8, 1] == 0.0)
    on = MarlDersBenchmark("test", pv_q_at_night=True)
    (idle_state, idle), (state, out) = _night_step(on, 0.0), _night_step(on, 0.8)
    np.testing.assert_allclose(out.action_applied.reshape(12, 2)[4:8, 1], 0.8)
    assert np.all(state.vm_pu[:, list(on.pv_buses)] > idle_state.vm_pu[:, list(on.pv_buses)])
    assert out.info["feeder_q_mvar"][0] < idle.info["feeder_q_mvar"][0] - 3.0
    assert out.constraint_costs[0, 3] == 0.0


def test_device_costs_have_one_unit_each():
    # an active violation of X MW for dt and a reactive one of Y Mvar land in their own costs
    task = MarlDersBenchmark("test")
    assert task.spec.constraint_names == (
        "voltage_violation",
        "thermal_overload",
        "device_violation",
        "reactive_cut",
    )
    units = dict(zip(task.spec.constraint_names, task.spec.constraint_units, strict=True))
    assert units["device_violation"].startswith("MWh") and units["reactive_cut"].startswith("Mvarh")
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([3]))
    state.soc[0, 0] = task.battery.soc_min[0]  # an empty battery asked to discharge X MW
    x_mw, y_mvar, dt = 0.4, 0.3, task.spec.dt_h
    act = np.zeros((1, 12, 2))
    act[0, 0, 0] = x_mw
    act[0, 1, 0], act[0, 1, 1] = 0.5, 0.55  # Q beyond sqrt(S^2 - P^2) at full P
    act[0, 5, 1] = y_mvar  # PV without sun (01:00)
    state.t[:] = 2
    _, out = task.step(state, act.reshape(1, 24), rng)
    eta_d = task.battery.discharge_efficiency[0]
    np.testing.assert_allclose(out.constraint_costs[0, 2], x_mw * dt / eta_d, rtol=1e-12)  # MWh
    bat_cut = 0.55 - np.sqrt(0.55**2 - 0.5**2)
    np.testing.assert_allclose(out.constraint_costs[0, 3], (bat_cut + y_mvar) * dt, rtol=1e-12)
