"""``marl_ders_benchmark``: 12 heterogeneous DERs in three agent groups on the 141-bus feeder."""

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.rl import make_env
from powerzoo.tasks import describe, task_spec
from powerzoo.tasks.ders_benchmark import MarlDersBenchmark

TASK = "marl_ders_benchmark"
GROUPS = {
    "batteries": ["battery_0", "battery_1", "battery_2", "battery_3"],
    "pv": ["pv_0", "pv_1", "pv_2", "pv_3"],
    "flexible_loads": ["load_0", "load_1", "load_2", "load_3"],
}


def _rollout(task, days, policy, seed=0):
    """Whole episodes of ``days`` under ``policy(task, state, rng) -> joint action``: return, costs [B, 3]."""
    rng = np.random.default_rng(seed)
    state = task.reset(rng, days)
    ret, costs = np.zeros(days.size), np.zeros((days.size, 3))
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


def test_parallel_api_and_seed_page_pattern_3_loop():
    parallel_api_test(make_env(TASK, framework="pettingzoo"), num_cycles=5)
    env = make_env(TASK, framework="pettingzoo", seed=0)
    observations, infos = env.reset(seed=0)
    steps = 0
    while env.agents:
        actions = {agent: env.action_space(agent).sample() for agent in env.agents}
        observations, rewards, terminations, truncations, infos = env.step(actions)
        steps += 1
        assert len(set(rewards.values())) == 1  # shared team reward
    assert steps == 48 and all(truncations.values())


def test_three_agent_groups_with_their_own_action_bounds():
    env = make_env(TASK, framework="pettingzoo", seed=0)
    assert env.agent_groups == GROUPS
    assert "agent groups: batteries (4: p_mw, q_mvar); pv (4: curtail, q_mvar); flexible_loads (4: curtail, shift)" in describe(TASK)
    bat, pv, load = (env.action_space(a) for a in ("battery_0", "pv_2", "load_3"))
    np.testing.assert_allclose(bat.low, [-0.5, -0.55])
    np.testing.assert_allclose(bat.high, [0.5, 0.55])
    np.testing.assert_allclose(pv.low, [0.0, -1.1])
    np.testing.assert_allclose(pv.high, [1.0, 1.1])
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
    assert obs["battery_1"][i["own_base_load_mw"]] == 0.0 and obs["load_1"][i["own_base_load_mw"]] > 0.0
    assert 0.9 < obs["pv_3"][i["own_v_pu"]] < 1.05
    if mode in ("ders_local", "global"):
        assert obs["pv_1"][[i["is_battery"], i["is_pv"], i["is_flexible_load"]]].tolist() == [0.0, 1.0, 0.0]
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
            info["feeder_p_mw"], info["served_load_mw"] - info["der_injection_mw"] + info["p_loss_mw"], atol=1e-6
        )
        b = task.battery
        assert np.all(state.soc >= b.soc_min - 1e-9) and np.all(state.soc <= b.soc_max + 1e-9)
        assert np.all(out.constraint_costs >= 0.0) and np.isfinite(out.reward).all()
        np.testing.assert_allclose(out.reward, out.reward_terms.sum(axis=1))
        shifted, paid = shifted + info["load_shifted_mwh"], paid + info["load_payback_mwh"]
    np.testing.assert_allclose(shifted, paid, atol=1e-9)  # shifted energy comes back within the day


def test_uncontrolled_feeder_violates_voltages_and_rule_based_beats_random():
    task = MarlDersBenchmark("test")
    days = np.arange(task.n_days)
    ret_none, costs_none = _rollout(task, days, _uncontrolled)
    assert (costs_none[:, 0] > 0).sum() >= task.n_days // 2  # controls must matter
    assert np.all(costs_none[:, 1:] == 0.0)
    few = days[:: max(1, task.n_days // 6)]
    ret_rule, costs_rule = _rollout(task, few, _rule)
    ret_rand, _ = _rollout(task, few, _random)
    assert np.all(ret_rule > ret_rand)
    assert costs_rule[:, 0].sum() < costs_none[few, 0].sum() and np.all(costs_rule[:, 2] < 1e-9)
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
    with pytest.raises(ValueError, match="no oracle baseline"):
        make_baseline_policy("oracle", env)


def test_splits_are_honoured():
    test, train, stress = MarlDersBenchmark("test"), MarlDersBenchmark("train"), MarlDersBenchmark("load_stress")
    assert set(test.split_days).isdisjoint(train.split_days)
    np.testing.assert_array_equal(stress.split_days, test.split_days)
    rng = np.random.default_rng(0)
    days = np.arange(3)
    _, base_out = test.step(test.reset(rng, days), _uncontrolled(test, test.reset(rng, days), rng), rng)
    _, stress_out = stress.step(stress.reset(rng, days), _uncontrolled(stress, stress.reset(rng, days), rng), rng)
    np.testing.assert_allclose(stress_out.info["demand_pu"], 1.15 * base_out.info["demand_pu"])
    low = MarlDersBenchmark("low_renewable")
    assert low.pv_cf.max() < 0.41 * test.pv_cf.max()
    assert set(task_spec(TASK).splits) >= {"train", "val", "test", "load_stress", "low_renewable", "price_spike"}
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
    with pytest.raises(TypeError, match="no task parameters"):
        task_spec(TASK, n_units=5)
