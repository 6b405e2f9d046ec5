"""Distribution-feeder tasks ``dso`` and ``marl_der_arbitrage``: client APIs, physics invariants,
baselines."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from helpers import random_parallel_rollout
from pettingzoo.test import parallel_api_test
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import powerzoo  # noqa: F401  (registers the Gymnasium ids)
from powerzoo.benchmarks.cmdp_score import budget_clipped_gains
from powerzoo.benchmarks.evaluation import evaluate_days
from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.rl import make_env
from powerzoo.tasks import make_task, task_spec
from powerzoo.tasks.der_arbitrage import BATTERY_BUSES, tou_schedule
from powerzoo.tasks.dso import FLEX_BUSES, DsoParams

FLEX_MAX_FRACTION = DsoParams.flex_max_fraction
VOLL_PER_MWH = DsoParams.voll_per_mwh

GRID_KEYS = {
    "is_safe",
    "pf_converged",
    "p_loss_mw",
    "feeder_p_mw",
    "feeder_q_mvar",
    "v_min_pu",
    "v_max_pu",
}


# ---- client APIs ------------------------------------------------------------------------------
def test_dso_passes_gymnasium_and_sb3_env_checkers():
    gym_check_env(make_env("dso", seed=0).unwrapped, skip_render_check=True)
    sb3_check_env(make_env("dso", seed=0))
    sb3_check_env(make_env("dso", seed=0, normalize=True))
    env = gym.make("powerzoo/DSO-v0", split="val")
    obs, info = env.reset(seed=1)
    assert obs.shape == (34,) and env.action_space.shape == (12,) and GRID_KEYS <= set(info)


def test_marl_der_arbitrage_passes_the_parallel_api_test():
    parallel_api_test(make_env("marl_der_arbitrage", framework="pettingzoo", seed=0), num_cycles=60)
    parallel_api_test(
        make_env("marl_der_arbitrage", framework="pettingzoo", obs_mode="local_plus_voltage"),
        num_cycles=5,
    )


def test_the_pettingzoo_env_runs_a_random_loop_with_per_agent_rewards():
    env = make_env("marl_der_arbitrage", framework="pettingzoo", seed=0)
    rollout = random_parallel_rollout(env, seed=0)
    totals = rollout.returns
    assert rollout.steps == 48 and set(totals) == {"battery_0", "battery_1", "battery_2"}
    assert len(set(totals.values())) == 3  # per-agent rewards: each battery's own profit
    assert all(GRID_KEYS | {"cost_soc_violation"} <= set(i) for i in rollout.infos.values())


def test_a_parallel_api_consumer_takes_the_env():
    from pettingzoo.test import api_test
    from pettingzoo.utils.conversions import parallel_to_aec

    api_test(
        parallel_to_aec(make_env("marl_der_arbitrage", framework="pettingzoo", seed=0)),
        num_cycles=20,
    )


def test_spec_facts():
    dso, der = task_spec("dso"), task_spec("marl_der_arbitrage")
    assert (
        dso.gym_id == "powerzoo/DSO-v0"
        and dso.action.dim == 12
        and dso.horizon == 48
        and dso.step_minutes == 30
    )
    assert (
        dso.constraint_names
        == dso.selected_constraints
        == ("voltage_violation", "thermal_overload")
    )
    assert der.shared_reward is False and der.agents == ("battery_0", "battery_1", "battery_2")
    assert der.constraint_names == ("voltage_violation", "thermal_overload", "soc_violation")
    assert der.obs_modes == ("global", "local", "local_plus_forecast", "local_plus_voltage")
    assert set(dso.baselines) == set(der.baselines) == {"random", "rule_based", "oracle", "idle"}
    assert der.agent_action_dim == 1  # battery active power only


def test_observation_modes_and_neighbour_voltages():
    dims = {"global": 15, "local": 8, "local_plus_forecast": 12, "local_plus_voltage": 10}
    for mode, dim in dims.items():
        env = make_env("marl_der_arbitrage", framework="pettingzoo", obs_mode=mode, seed=0)
        obs, _ = env.reset(seed=0)
        assert len(env.observation_fields("battery_2")) == dim == obs["battery_2"].shape[0]
    task = make_task("marl_der_arbitrage", "test")
    rng = np.random.default_rng(0)
    state, _ = task.step(task.reset(rng, np.array([2])), np.array([[0.3, -0.4, 0.1]]), rng)
    fields = task.spec.observation_spec("local_plus_voltage").names
    obs = task.observe(state, "local_plus_voltage")[0]
    parent = task.grid.case.bus_parent
    for i, bus in enumerate(BATTERY_BUSES):
        row = dict(zip(fields, obs[i], strict=True))
        child = int(np.flatnonzero(parent == bus)[0])
        assert row["own_v_pu"] == pytest.approx(state.vm_pu[0, bus], abs=1e-6)
        assert row["upstream_v_pu"] == pytest.approx(state.vm_pu[0, parent[bus]], abs=1e-6)
        assert row["downstream_v_pu"] == pytest.approx(state.vm_pu[0, child], abs=1e-6)
    forecast = task.observe(state, "local_plus_forecast")[0, 0, -4:]
    flat = task.grid.flat_index(state.day_id, state.t)[0]
    np.testing.assert_allclose(forecast, task.grid.price_per_mwh[flat + 1 : flat + 5], rtol=1e-6)


# ---- physics invariants every step ----------------------------------------------------------
def _check_grid_step(out, tol=1e-6):
    info = out.info
    assert np.all(out.constraint_costs >= 0.0) and info["pf_converged"].all()
    # feeder-head power = net load (loads - DER injections) + losses
    np.testing.assert_allclose(
        info["feeder_p_mw"], info["net_load_mw"] + info["p_loss_mw"], atol=tol
    )
    assert np.all(info["p_loss_mw"] > 0.0) and np.all(info["v_min_pu"] <= info["v_max_pu"])


def test_dso_invariants_every_step_and_shifted_energy_conserved():
    task = make_task("dso", "test")
    rng = np.random.default_rng(1)
    days = np.arange(0, 65, 11)
    state = task.reset(rng, days)
    shifted = np.zeros((days.size, len(FLEX_BUSES)))
    paid_back = np.zeros_like(shifted)
    for t in range(task.spec.horizon):
        action = rng.uniform(0.0, FLEX_MAX_FRACTION, (days.size, 12))
        demand = task.grid.demand_pu[task.grid.flat_index(state.day_id, state.t)]
        base_mw = demand[:, None] * task.flex_peak_mw
        state, out = task.step(state, action, rng)
        _check_grid_step(out)
        info = out.info
        # curtailment never exceeds the load actually there, and is priced at the VOLL
        assert np.all(info["flex_curtailed_mwh"] <= base_mw * FLEX_MAX_FRACTION * 0.5 + 1e-12)
        np.testing.assert_allclose(
            -out.reward_terms[:, 1], VOLL_PER_MWH * info["flex_curtailed_mwh"].sum(axis=1)
        )
        np.testing.assert_allclose(out.reward, out.reward_terms.sum(axis=1))
        shifted += info["flex_shifted_mwh"]
        paid_back += info["flex_payback_mwh"]
        if t == task.spec.horizon - 1:  # nothing can be shifted on the last step
            assert np.all(out.action_applied[:, 1::2] == 0.0)
    assert shifted.min() > 0.1
    np.testing.assert_allclose(paid_back, shifted, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state.backlog_mwh, 0.0, atol=1e-12)


def test_der_arbitrage_invariants_every_step():
    task = make_task("marl_der_arbitrage", "test")
    rng = np.random.default_rng(2)
    days = np.arange(0, 65, 11)
    state = task.reset(rng, days)
    bat = task.battery
    soc_violation = np.zeros(days.size)
    for _ in range(task.spec.horizon):
        soc_before = state.soc
        state, out = task.step(state, rng.uniform(-0.5, 0.5, (days.size, 3)), rng)
        _check_grid_step(out)
        info = out.info
        assert np.all(state.soc >= bat.soc_min - 1e-12) and np.all(state.soc <= bat.soc_max + 1e-12)
        # energy through the efficiencies: stored change = eta_c charged - discharged / eta_d
        p = info["battery_p_mw"]
        stored = np.where(p < 0, -p * 0.5 * 0.95, -p * 0.5 / 0.95)
        np.testing.assert_allclose(
            (state.soc - soc_before) * bat.energy_capacity_mwh, stored, atol=1e-9
        )
        # per-agent rewards add up to the team's reward terms
        np.testing.assert_allclose(out.reward.sum(axis=1), out.reward_terms.sum(axis=1))
        assert out.reward.shape == (days.size, 3)
        soc_violation += out.constraint_costs[:, 2]
    assert (
        soc_violation.max() > 0.0
    )  # random requests run into the SOC bounds: measured, not hidden


def test_nonconvergence_is_reported_with_its_documented_cost_not_raised():
    task = make_task("dso", "test")
    p, q = task.grid.bus_loads(np.array([1.0, 20.0]))
    flow = task.grid.solve(p, q)
    assert flow.info["pf_converged"].tolist() == [True, False]
    assert flow.costs[1].tolist() == [pytest.approx(0.1 * 32), 0.0] and flow.p_loss_mw[1] == 0.0
    assert np.all(np.isfinite(flow.info["v_min_pu"]))


def test_thermal_overload_fires_in_mva_above_the_rating():
    task = make_task("marl_der_arbitrage", "test")
    p, q = task.grid.bus_loads(np.array([1.0, 1.0]))
    p[1, list(BATTERY_BUSES)] += 0.5  # all three batteries charging at full power at the peak
    flow = task.grid.solve(p, q)
    assert flow.costs[0, 1] == 0.0 and flow.info["max_branch_loading"][0] < 1.0
    loading = flow.info["max_branch_loading"][1]
    assert loading > 1.0 and flow.costs[1, 1] > 0.0
    # MVA above the rating: (I / I_rated - 1) x S_rated, summed over branches
    assert (
        flow.costs[1, 1] <= (loading - 1.0) * task.grid.rating_mva.max() * task.grid.case.n_branch
    )


# ---- controls matter, baselines ---------------------------------------------------------------
def test_uncontrolled_dso_violates_voltage_and_the_oracle_has_less():
    task = make_task("dso", "test")
    rng = np.random.default_rng(0)
    days = np.array([3, 30, 60])
    totals = {}
    for policy in ("none", "oracle"):
        state = task.reset(rng, days)
        plan = task.oracle_plan(state) if policy == "oracle" else np.zeros((days.size, 48, 12))
        violation = np.zeros(days.size)
        for t in range(48):
            state, out = task.step(state, plan[:, t], rng)
            violation += out.constraint_costs[:, 0]
        totals[policy] = violation
    assert np.all(totals["none"] > 0.0)
    assert totals["oracle"].sum() < 0.25 * totals["none"].sum()


def test_dso_oracle_plans_fractions_up_to_the_action_bound_its_docstring_states():
    from powerzoo.tasks.dso_oracle import solve_day as _solve_day

    assert "flex_max_fraction" in _solve_day.__doc__ and "0.4" not in _solve_day.__doc__
    for fraction in (FLEX_MAX_FRACTION, 0.2):
        task = make_task("dso", "test", flex_max_fraction=fraction)
        plan = task.oracle_plan(task.reset(np.random.default_rng(0), np.array([3, 30])))
        assert plan.max() == pytest.approx(fraction)  # the LP uses the env's whole range
        assert np.all(plan <= task.spec.action.high[0] + 1e-9)


def _returns(task, days, policies=("random", "rule_based")):
    out = {}
    for policy in policies:
        env = make_env(task, split="test", seed=0)
        out[policy] = evaluate_days(make_baseline_policy(policy, env, seed=0), env, days, seed=0)
    return out


def test_dso_rule_based_beats_random_on_return():
    res = _returns("dso", [0, 25, 50, 64])
    assert res["rule_based"]["mean_return"] > res["random"]["mean_return"] + 500.0
    assert res["rule_based"]["mean_costs"]["voltage_violation"] > 0.0


def test_der_arbitrage_oracle_beats_rule_based_beats_random_within_the_budget():
    days = [26, 29, 32, 35]  # July test days: the peaks sag the trunk's far end
    res = _returns("marl_der_arbitrage", days, ("random", "rule_based", "oracle"))
    oracle, rule, random = (res[p] for p in ("oracle", "rule_based", "random"))
    assert rule["mean_return"] > random["mean_return"] and 0.0 > random["mean_return"]
    assert rule["mean_costs"]["soc_violation"] == 0.0
    # both hold the band within the budget every day; the oracle earns more
    assert oracle["over_budget_rate"] == 0.0 == rule["over_budget_rate"]
    assert oracle["mean_return"] > rule["mean_return"]
    # on the CMDP reading (an over-budget day keeps at most a loss over random) it is ahead
    gains = {
        p: budget_clipped_gains(res[p]["returns"], random["returns"], res[p]["over_budget"])
        for p in ("oracle", "rule_based")
    }
    assert gains["oracle"].mean() > gains["rule_based"].mean() > 0.0


def test_tou_schedule_charges_in_the_cheapest_hours_and_discharges_in_the_evening_peak():
    # high_renewable (the default market): the average train day is a duck curve, its trough at
    # midday (19-23 $/MWh from 10:00 to 14:00, against 32 at 03:00), its peak in the evening
    # (174 $/MWh at 18:30) and a smaller one in the morning (53 at 07:00)
    plan = tou_schedule(48)
    assert (plan == -1).sum() == (plan == 1).sum() == 8
    charge, discharge = np.flatnonzero(plan == -1), np.flatnonzero(plan == 1)
    assert np.all((charge >= 18) & (charge < 32))  # in the midday trough, 09:00-16:00
    assert np.sum(discharge >= 34) >= 7  # the evening peak, from 17:00 (the 8th: 07:00)
    # the former calm market, its cheapest hours at night: charge at night, discharge from 10:00
    plan = tou_schedule(48, market="pjm_like")
    assert (plan == -1).sum() == (plan == 1).sum() == 8
    assert np.all(np.flatnonzero(plan == -1) < 16)  # before 08:00
    assert np.all(np.flatnonzero(plan == 1) >= 20)  # from 10:00


# ---- splits, bad input ------------------------------------------------------------------------
def test_splits_are_honoured():
    test, stress, spike = (make_task("dso", s) for s in ("test", "load_stress", "price_spike"))
    day = np.array([5])
    flat = test.grid.flat_index(day, np.array([36]))
    # the same calendar day: the same loads on test and price_spike, 15 % more under load_stress
    assert spike.grid.demand_pu[flat] == test.grid.demand_pu[flat]
    assert stress.grid.demand_pu[flat] == pytest.approx(1.15 * test.grid.demand_pu[flat])
    assert (
        spike.grid.price_per_mwh[test.grid.flat_index(day, np.arange(48))].max()
        > test.grid.price_per_mwh[test.grid.flat_index(day, np.arange(48))].max()
    )
    train = make_task("marl_der_arbitrage", "train")
    assert not set(train.split_days) & set(make_task("marl_der_arbitrage", "test").split_days)
    env = make_env("dso", split="val", seed=0)
    _, info = env.reset(seed=0, options={"day_id": 3})
    assert str(env.unwrapped.current_date()) == "2023-01-18"
    with pytest.raises(ValueError, match="unknown split 'workload_shock'"):
        make_env("dso", split="workload_shock")
    with pytest.raises(ValueError, match="out of range"):
        env.reset(options={"day_id": 65})


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match="unknown obs_mode 'ders_local'"):
        make_env("marl_der_arbitrage", framework="pettingzoo", obs_mode="ders_local")
    with pytest.raises(ValueError, match="multi-agent task"):
        make_env("marl_der_arbitrage", framework="gymnasium")
    env = make_env("dso", seed=0)
    with pytest.raises(ValueError, match="expected"):
        env.step(np.zeros(6, np.float32))
    bad = np.zeros(12, np.float32)
    bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        env.step(bad)
    penv = make_env("marl_der_arbitrage", framework="pettingzoo", seed=0)
    penv.reset(seed=0)
    with pytest.raises(ValueError, match="NaN"):
        penv.step(
            {"battery_0": np.array([np.nan]), "battery_1": np.zeros(1), "battery_2": np.zeros(1)}
        )
    with pytest.raises(ValueError, match="missing"):
        penv.step({"battery_0": np.zeros(1)})
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) \['flex_peak'\].*flex_peak_mw"):
        make_task("dso", "train", flex_peak=1.0)


def test_out_of_range_action_is_clipped_and_flagged():
    env = make_env("dso", seed=0)
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.full(12, 0.9, np.float32))
    assert info["action_clipped"] and np.all(info["action_applied"][::2] == FLEX_MAX_FRACTION)


# ---- vectorised envs, presets, determinism ----------------------------------------------------
def test_native_vector_envs_step_batches():
    env = make_env("dso", num_envs=8, seed=0)
    obs, info = env.reset(seed=0)
    assert obs.shape == (8, 34) and GRID_KEYS <= set(info)
    for _ in range(3):
        obs, reward, term, trunc, info = env.step(env.action_space.sample())
    assert reward.shape == (8,) and info["v_min_pu"].shape == (8,)
    menv = make_env("marl_der_arbitrage", num_envs=8, seed=0, obs_mode="local")
    obs, _ = menv.reset(seed=0)
    assert obs["battery_1"].shape == (8, 8)
    for _ in range(48):
        obs, rewards, terms, truncs, info = menv.step(
            {a: menv.action_space(a).sample() for a in menv.possible_agents}
        )
    assert truncs["battery_0"].all() and rewards["battery_2"].shape == (8,)
    assert menv.group_arrays(obs)["agents"].shape == (8, 3, 8)


def test_penalized_preset_subtracts_the_costs():
    env = make_env("dso", seed=0, reward="penalized")
    env.reset(seed=0, options={"day_id": 10})
    for _ in range(40):
        _, reward, _, _, info = env.step(np.zeros(12, np.float32))
        penalty = 1000.0 * (info["cost_voltage_violation"] + info["cost_thermal_overload"])
        assert reward == pytest.approx(info["task_reward"] - penalty)
    # a preset on the per-agent task gives every agent the team value (documented in the spec)
    menv = make_env("marl_der_arbitrage", framework="pettingzoo", seed=0, reward="profit")
    menv.reset(seed=0)
    _, rewards, _, _, infos = menv.step({a: np.array([0.4], np.float32) for a in menv.agents})
    team = float(np.sum(infos["battery_0"]["reward_terms"]))
    assert all(r == pytest.approx(team) for r in rewards.values()) and team > 0.0


def test_same_seed_same_trajectory():
    def run():
        env = make_env("marl_der_arbitrage", framework="pettingzoo", seed=5, normalize=True)
        rollout = random_parallel_rollout(env, seed=5)
        return np.asarray(
            [
                np.concatenate([obs[a] for a in sorted(obs)] + [list(rewards.values())])
                for obs, rewards in zip(rollout.observations, rollout.rewards, strict=True)
            ]
        )

    np.testing.assert_array_equal(run(), run())
