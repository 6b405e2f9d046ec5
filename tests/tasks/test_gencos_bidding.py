"""``gencos_bidding``: PettingZoo contract, profits,
truthful clearing = DC-OPF, splits, baselines, bad input."""

import pickle

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.physics.dc_opf import solve_dc_opf
from powerzoo.rl import make_env
from powerzoo.tasks import describe, info, make_task
from powerzoo.tasks.gencos_bidding import BR_GRID, N_BLOCKS, SHOCK_STEPS, WIND_BUS, _shock_mask

TASK = "gencos_bidding"
AGENTS = [f"genco_{i}" for i in range(5)]


def test_parallel_api_test_passes():
    parallel_api_test(make_env(TASK, framework="pettingzoo", seed=0), num_cycles=60)
    parallel_api_test(
        make_env(TASK, framework="pettingzoo", obs_mode="local", normalize=True, seed=1),
        num_cycles=5,
    )


def test_spec_and_observation_modes():
    d = info(TASK)
    assert (
        d["agent_mode"] == "multi"
        and d["agents"] == AGENTS
        and d["horizon"] == 48
        and d["step_minutes"] == 30
    )
    assert {"demand_shift", "renewable_shock"} <= set(d["splits"]) and d["constraint_names"] == [
        "thermal_overload"
    ]
    assert "gencos_bidding" in describe(TASK)
    for mode, dim in (("global", 10 + 5 * N_BLOCKS), ("local", 9 + N_BLOCKS)):
        env = make_env(TASK, framework="pettingzoo", obs_mode=mode, seed=0)
        obs, _ = env.reset(seed=0)
        assert len(env.observation_fields("genco_0")) == dim == obs["genco_0"].shape[0]
        assert env.action_space("genco_2").shape == (N_BLOCKS,)


def _episode(env, actions):
    """Step a whole day of a pettingzoo env with ``actions(t) -> {agent: markups}``;
    per-step records."""
    rows = []
    t = 0
    while env.agents:
        _, rewards, _, _, infos = env.step(actions(t))
        rows.append((rewards, infos))
        t += 1
    return rows


def test_each_company_is_paid_lmp_times_dispatch_minus_its_cost():
    env = make_env(TASK, split="test", framework="pettingzoo", seed=0)
    env.reset(seed=0, options={"day_id": 5})
    rng = np.random.default_rng(0)
    case = make_task(TASK).case
    for rewards, infos in _episode(
        env, lambda t: {a: rng.uniform(0, 1, N_BLOCKS).astype(np.float32) for a in AGENTS}
    ):
        i0 = infos["genco_0"]
        p, lmp = i0["gen_p_mw"], i0["lmp_per_mwh"][case.gen_bus]
        expected = (
            lmp * p - case.gen_c1_per_mwh * p - case.gen_c2_per_mw2h * p * p - case.gen_c0_per_h
        ) * 0.5
        np.testing.assert_allclose([rewards[a] for a in AGENTS], expected, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(i0["agent_profit"], expected, rtol=1e-12, atol=1e-9)
        assert sum(rewards.values()) == pytest.approx(float(np.sum(i0["reward_terms"])))
        assert p.sum() == pytest.approx(i0["total_load_mw"] - i0["wind_mw"])  # the market balances
        assert (
            i0["pf_converged"] and i0["cost_thermal_overload"] == 0.0 and i0["unserved_mw"] == 0.0
        )
        assert 0.0 <= i0["lerner_index"] < 1.0 and i0["price_cost_ratio"] >= 1.0 - 1e-12


def test_truthful_bidding_dispatches_the_dc_opf_of_the_true_costs():
    task = make_task(TASK, "test")
    state = task.reset(np.random.default_rng(0), np.arange(4))
    zero = np.zeros((4, 5 * N_BLOCKS))
    for _ in range(48):
        load = task.bus_load_mw(task._load_wind(state.day_id, state.t))
        state, out = task.step(state, zero, np.random.default_rng(0))
        opf = solve_dc_opf(task.case, load)
        np.testing.assert_allclose(out.info["gen_p_mw"], opf.gen_p_mw, atol=1e-6)
        np.testing.assert_allclose(out.info["lmp_per_mwh"], opf.lmp_per_mwh, atol=1e-7)
        np.testing.assert_allclose(out.info["production_cost"], opf.cost_per_h * 0.5, rtol=1e-9)
        np.testing.assert_allclose(out.info["as_bid_cost"], out.info["production_cost"], rtol=1e-9)


def test_same_seed_same_trajectory_and_vector_env_agrees():
    def run(seed):
        env = make_env(TASK, framework="pettingzoo", seed=seed, normalize=True)
        return [
            np.array([r[a] for a in AGENTS])
            for r, _ in _episode(
                env, lambda t: {a: env.action_space(a).sample() for a in env.agents}
            )
        ]

    first, second = run(3), run(3)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    vec = make_env(TASK, split="test", num_envs=4, seed=0)
    vec.reset(seed=0)
    rng = np.random.default_rng(1)
    for _ in range(48):
        actions = {a: rng.uniform(0, 1, (4, N_BLOCKS)).astype(np.float32) for a in AGENTS}
        _, rewards, _, truncs, infos = vec.step(actions)
        assert rewards["genco_0"].shape == (4,) and np.isfinite(rewards["genco_4"]).all()
    assert truncs["genco_0"].all()
    copy = pickle.loads(
        pickle.dumps(make_env(TASK, framework="pettingzoo", seed=0))
    )  # picklable (HiGHS rebuilt)
    copy.reset(seed=0)
    copy.step({a: np.zeros(N_BLOCKS, np.float32) for a in AGENTS})


def test_stress_splits_shift_demand_and_trip_the_wind():
    base, shift, shock = (make_task(TASK, s) for s in ("test", "demand_shift", "renewable_shock"))
    assert np.array_equal(shift.split_days, base.split_days) and np.array_equal(
        shock.split_days, base.split_days
    )
    days = np.arange(base.n_days)
    steps = np.arange(48)
    lw = {
        name: np.stack([t._load_wind(days, np.full(days.size, k)) for k in steps], axis=1)
        for name, t in (("base", base), ("shift", shift), ("shock", shock))
    }  # [day, step, 2]
    np.testing.assert_allclose(lw["shift"][..., 0], 1.10 * lw["base"][..., 0])
    load = shift.bus_load_mw(lw["shift"][:, 20])
    assert np.allclose(load[:, 3] / lw["shift"][:, 20, 0], 0.5)  # half the demand at bus 4
    lost = lw["shock"][..., 1] == 0.0
    assert (lw["base"][..., 1][~lost] == lw["shock"][..., 1][~lost]).all()
    differs = lw["shock"][..., 1] != lw["base"][..., 1]
    assert (lw["shock"][..., 1][differs] == 0.0).all() and differs.any(axis=1).mean() > 0.9
    assert (
        not differs[:, :24].any() and not differs[:, 24 + 12 + SHOCK_STEPS :].any()
    )  # 12:00 to 22:00 only
    mask = _shock_mask(48, 365 * 48).reshape(365, 48)
    assert (mask.sum(axis=1) == 48 - SHOCK_STEPS).all()
    starts = np.argmin(mask, axis=1)
    assert (
        starts.min() >= 24
        and starts.max() <= 35
        and (mask[np.arange(365)[:, None], starts[:, None] + np.arange(SHOCK_STEPS)] == 0).all()
    )
    wind_bus = shock.bus_load_mw(lw["shock"][:, 30])[:, WIND_BUS]
    np.testing.assert_allclose(
        wind_bus, lw["shock"][:, 30, 0] * 0.3 - lw["shock"][:, 30, 1]
    )  # wind is a negative load


def test_best_response_rule_beats_every_grid_deviation():
    env = make_env(TASK, split="test", framework="pettingzoo", seed=0)
    obs, infos = env.reset(seed=0, options={"day_id": 2})
    rule = make_baseline_policy("rule_based", env)
    task = make_task(TASK, "test")
    for _ in range(6):  # a few steps so the others' last offers are not all truthful
        obs, _, _, _, infos = env.step(rule.act(obs, infos))
    physical = np.stack([obs[a] for a in AGENTS])[None].astype(np.float64)
    chosen = task.rule_based_action(physical)[0].reshape(5, N_BLOCKS)
    last = physical[0, 0, task._rule_markups].reshape(5, N_BLOCKS)
    load = task.bus_load_mw(physical[:, 0, task._rule_load])
    gen_bus = task.case.gen_bus

    def profit(company, markups):
        res = task.market.clear(load, markups[None])
        p, lmp = res.gen_p_mw[0, company], res.lmp_per_mwh[0, gen_bus[company]]
        return lmp * p - task.case.gen_c1_per_mwh[company] * p

    for company in range(5):
        trial = last.copy()
        trial[company] = chosen[company]
        best = profit(company, trial)
        for m in BR_GRID:
            trial[company] = m
            assert profit(company, trial) <= best + 1e-6


def test_baselines_order_the_market_power():
    env = make_env(TASK, split="test", framework="auto", seed=0)
    results = {}
    for name in ("random", "rule_based", "truthful"):
        policy = make_baseline_policy(name, env, seed=0)
        obs, infos = env.reset(seed=0, options={"day_id": 10})
        total, lerner = 0.0, []
        while True:
            obs, rewards, terms, truncs, infos = env.step(policy.act(obs, infos))
            total += sum(rewards.values())
            lerner.append(infos["genco_0"]["lerner_index"])
            if truncs["__all__"]:
                break
        results[name] = (total, float(np.mean(lerner)))
    assert results["truthful"][0] < results["random"][0] < results["rule_based"][0]
    assert results["truthful"][1] < 0.1 < results["random"][1]
    with pytest.raises(ValueError, match="no oracle baseline"):
        make_baseline_policy("oracle", env)


def test_bad_input_raises():
    env = make_env(TASK, framework="pettingzoo", seed=0)
    with pytest.raises(ValueError, match="NaN"):
        env.step({a: np.full(N_BLOCKS, np.nan) for a in AGENTS})
    with pytest.raises(ValueError, match="shape"):
        env.step({a: np.zeros(N_BLOCKS + 1) for a in AGENTS})
    with pytest.raises(ValueError, match="unknown split 'summer'"):
        make_env(TASK, split="summer")
    with pytest.raises(ValueError, match="out of range"):
        env.reset(seed=0, options={"day_id": 10_000})
    with pytest.raises(TypeError, match=r"unknown parameter\(s\)"):
        make_task(TASK, "train", n_blocks=2)
    with pytest.raises(ValueError, match="unknown obs_mode"):
        make_env(TASK, framework="pettingzoo", obs_mode="everything")
    _, _, _, _, infos = env.step(
        {a: np.full(N_BLOCKS, 5.0, np.float32) for a in AGENTS}
    )  # above the bound
    assert infos["genco_0"]["action_clipped"] and (infos["genco_0"]["action_applied"] == 1.0).all()


def test_random_actions_always_give_non_decreasing_offer_curves():
    # ISO offer rules accept only non-decreasing offer curves: a company's markups are offered
    # in increasing order, in the env and in what it publishes
    task = make_task(TASK, "test")
    rng = np.random.default_rng(3)
    state = task.reset(rng, np.arange(16))
    lo, hi = task.spec.action.bounds()
    mc = task.market.block_marginal_cost
    for _ in range(6):
        action = rng.uniform(lo, hi, size=(16, lo.size))
        load = task.bus_load_mw(task._load_wind(state.day_id, state.t))
        state, out = task.step(state, action, rng)
        offered = out.action_applied.reshape(16, 5, N_BLOCKS)
        assert np.all(np.diff((1.0 + offered) * mc, axis=2) >= 0.0)
        np.testing.assert_array_equal(offered, np.sort(action.reshape(16, 5, N_BLOCKS), axis=2))
        np.testing.assert_array_equal(state.prev_markup, offered)
        cleared = task.market.clear(load, action.reshape(16, 5, N_BLOCKS))
        assert np.all(np.diff(cleared.offer_price_per_mwh, axis=2) >= 0.0)
        np.testing.assert_allclose(cleared.gen_p_mw, out.info["gen_p_mw"], atol=1e-9)
