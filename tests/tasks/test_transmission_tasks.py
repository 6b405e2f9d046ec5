"""Multi-agent dispatch tasks on DC networks: adapters, physics invariants, baselines."""

import numpy as np
import pytest
from helpers import random_parallel_rollout
from pettingzoo.test import parallel_api_test

from powerzoo.rl import make_env
from powerzoo.tasks import make_task


@pytest.mark.parametrize("task", ["marl_opf", "opf_118", "opf_118_7d"])
def test_parallel_api_test_passes(task):
    parallel_api_test(make_env(task, framework="pettingzoo", seed=0), num_cycles=60)


def test_random_pettingzoo_rollout_accumulates_the_shared_reward():
    env = make_env("marl_opf", framework="pettingzoo", seed=0)
    rollout = random_parallel_rollout(env, seed=0)
    steps, totals = rollout.steps, rollout.returns
    assert steps == 48 and len(set(totals.values())) == 1  # shared reward
    assert all(v < 0 for v in totals.values())


def test_auto_dict_env_ends_on_all_flag_and_infos_carry_cmdp_keys():
    env = make_env("marl_opf", framework="auto", seed=0)
    obs, infos = env.reset(seed=0)
    assert set(obs) == {f"gen_{i}" for i in range(5)}
    steps = 0
    while True:
        obs, rewards, terms, truncs, infos = env.step(env.action_space.sample())
        steps += 1
        if truncs["__all__"] or terms["__all__"]:
            break
    assert steps == 48 and not terms["__all__"]
    for info in infos.values():
        assert {
            "constraint_costs",
            "cost_sum",
            "selected_constraint_costs",
            "is_safe",
            "pf_converged",
        } <= set(info)
        assert info["action_applied"].shape == (1,)


def test_observation_modes_and_fields():
    for mode, dim in (("global", 10), ("local", 8), ("local_plus_forecast", 12)):
        env = make_env("marl_opf", framework="pettingzoo", obs_mode=mode, seed=0)
        obs, _ = env.reset(seed=0)
        assert len(env.observation_fields("gen_0")) == dim == obs["gen_0"].shape[0]
    with pytest.raises(ValueError, match="unknown obs_mode 'everything'"):
        make_env("marl_opf", framework="pettingzoo", obs_mode="everything")
    with pytest.raises(ValueError, match="multi-agent task; use framework='pettingzoo' or 'auto'"):
        make_env("marl_opf", framework="gymnasium")


def test_power_balance_costs_and_all_units_at_pmax():
    task = make_task("marl_opf", "test")
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([0]))
    load = task.bus_load_mw(state).sum()
    prev = state.prev_p_mw[0].copy()
    state, out = task.step(state, task.case.gen_pmax_mw[None, :].copy(), rng)
    # Pmax asked of every unit; each rises by at most its ramp per step from its last output
    applied = np.minimum(task.case.gen_pmax_mw, prev + task.limits.ramp_up_mw)
    np.testing.assert_allclose(out.action_applied[0], applied)
    assert out.info["n_limited_units"][0] == np.sum(applied < task.case.gen_pmax_mw)
    surplus = applied.sum() - load
    assert out.info["imbalance_mw"][0] == pytest.approx(surplus)
    # balance: generation + slack = load
    assert out.info["total_generation_mw"][0] + out.info["slack_p_mw"][0] == pytest.approx(load)
    # the regulation band (1 % of the year's peak load) absorbs 10.95 MW of it at 80 $/MWh; the
    # rest is the power_imbalance cost (MWh over 30 min), settled at 1,000 $/MWh
    band = task.regulation.band_mw
    assert band == pytest.approx(10.9477, abs=1e-4)
    assert out.constraint_costs[0, 1] == pytest.approx((surplus - band) * 0.5)
    assert -out.reward_terms[0, 1] == pytest.approx((surplus - band) * 0.5 * 1000.0)
    assert -out.reward_terms[0, 2] == pytest.approx(band * 0.5 * 80.0)
    # generation cost of the applied outputs: sum c1 * p (case5 costs are linear) for 30 min
    assert -out.reward_terms[0, 0] == pytest.approx(
        (np.array([14, 15, 30, 40, 10]) * applied).sum() * 0.5
    )
    assert np.all(out.constraint_costs >= 0)


def _episode_scores(task_name, n_days):
    task = make_task(task_name, "test")
    rng = np.random.default_rng(0)
    out = {}
    for policy in ("random", "rule_based", "oracle"):
        state = task.reset(rng, np.arange(n_days))
        plan = task.oracle_plan(state) if policy == "oracle" else None
        ret = np.zeros(n_days)
        overload = np.zeros(n_days)
        for t in range(task.spec.horizon):
            if policy == "random":
                a = rng.uniform(
                    task.case.gen_pmin_mw, task.case.gen_pmax_mw, (n_days, task.case.n_gen)
                )
            elif policy == "rule_based":
                a = task.rule_based_action(task.observe(state).astype(np.float64))
            else:
                a = plan[:, t]
            state, step = task.step(state, a, rng)
            ret += step.reward
            overload += step.constraint_costs[:, 0]
            assert np.all(step.constraint_costs >= 0)
        out[policy] = (ret.mean(), overload.mean())
    return out


def test_case5_oracle_beats_rule_beats_random_on_the_default_return():
    s = _episode_scores("marl_opf", 10)
    # the congestion-aware rule finds the DC-OPF dispatch on case5 (one binding line, linear
    # costs) up to float32 rounding of the observed load, so it ties the oracle from below
    ret = {k: v[0] for k, v in s.items()}
    assert ret["oracle"] + 1e-6 * abs(ret["oracle"]) >= ret["rule_based"] > ret["random"], s
    assert s["oracle"][1] == pytest.approx(0.0, abs=1e-4) and s["rule_based"][1] == pytest.approx(
        0.0, abs=1e-4
    )


@pytest.mark.parametrize("task_name", ["marl_opf", "opf_118"])
def test_the_default_reward_prices_line_overloads(task_name):
    """The reward is -(generation + imbalance + regulation + overload cost), the overload at 2,000
    $ per MVAh (= MWh under DC power flow) of flow above the ratings: the network-blind merit
    order, which overloads lines, earns less than its generation cost alone would say."""
    from powerzoo.tasks.transmission import OVERLOAD_PRICE_PER_MWH

    task = make_task(task_name, "load_stress")
    assert task.spec.reward_terms == (
        "generation_cost",
        "imbalance_cost",
        "regulation_cost",
        "overload_cost",
    )
    state = task.reset(np.random.default_rng(0), np.arange(4))
    priced = 0.0
    for _ in range(task.spec.horizon):
        dispatch = task.merit_order_dispatch(task.bus_load_mw(state).sum(axis=1))
        state, out = task.step(state, dispatch, None)
        overload_mvah = out.constraint_costs[:, 0]
        np.testing.assert_allclose(-out.reward_terms[:, 3], OVERLOAD_PRICE_PER_MWH * overload_mvah)
        np.testing.assert_allclose(out.reward, out.reward_terms.sum(axis=1))
        priced += -out.reward_terms[:, 3].sum()
    assert priced > 0.0


def test_case5_network_blind_dispatch_overloads_lines():
    from powerzoo.tasks.economic_dispatch.sced import lambda_dispatch

    task = make_task("marl_opf", "test")
    state = task.reset(np.random.default_rng(0), np.arange(0, task.n_days, 13))  # 5 days
    overload = 0.0
    for _ in range(task.spec.horizon):
        lo, hi = task.step_range(state)
        load = task.bus_load_mw(state).sum(axis=1)
        state, step = task.step(state, lambda_dispatch(task.case, load, lo, hi), None)
        overload += step.constraint_costs[:, 0].sum()
        assert np.all(step.info["n_limited_units"] == 0)  # within the step ranges
    assert overload > 10.0  # the network-blind dispatch is why the rule redispatches


def test_case118_limits_bind_under_the_oracle():
    task = make_task("opf_118", "test")
    state = task.reset(np.random.default_rng(0), np.arange(26, 29))  # July test days
    plan = task.oracle_plan(state)
    congested = []
    for t in range(48):
        state, out = task.step(state, plan[:, t], np.random.default_rng(0))
        congested.append(out.info["congested"])
        assert out.constraint_costs[:, 0].max() < 1e-3
        assert np.all(out.info["n_limited_units"] == 0)  # the plan keeps every step range
    assert np.mean(congested) > 0.3


def test_native_multi_agent_vector_env():
    env = make_env("opf_118", num_envs=64, seed=0)
    obs, info = env.reset(seed=0)
    assert obs["gen_0"].shape == (64, 10) and env.single_action_space("gen_3").shape == (1,)
    for _ in range(48):
        obs, rewards, terms, truncs, info = env.step(
            {a: env.action_space(a).sample() for a in env.possible_agents}
        )
        assert rewards["gen_0"].shape == (64,)
    assert truncs["gen_0"].all() and info["_final_obs"].all()
    with pytest.raises(ValueError, match="missing"):
        env.step({"gen_0": np.zeros((64, 1))})


def test_multi_agent_determinism_and_bad_actions():
    def run():
        env = make_env("marl_opf", framework="pettingzoo", seed=3, normalize=True)
        return [r["gen_0"] for r in random_parallel_rollout(env, seed=None).rewards]

    assert run() == run()
    env = make_env("marl_opf", framework="pettingzoo", seed=0)
    with pytest.raises(ValueError, match="NaN"):
        env.step({a: np.array([np.nan]) for a in env.agents})


def test_multi_agent_reward_override_prices_overloads_in_every_adapter():
    from powerzoo.rl import make_env

    actions = {f"gen_{i}": np.array([1.0], np.float32) for i in range(5)}  # every unit at Pmax
    plain = make_env("marl_opf", split="test", framework="auto", normalize=True, seed=0)
    priced = make_env(
        "marl_opf", split="test", framework="auto", normalize=True, seed=0, reward="penalized"
    )
    custom = make_env(
        "marl_opf",
        split="test",
        framework="pettingzoo",
        normalize=True,
        seed=0,
        reward=lambda info: -np.asarray(info["constraint_costs"]).sum(axis=-1),
    )
    for env in (plain, priced, custom):
        env.reset(seed=0, options={"day_id": 0})
    _, r_plain, _, _, info = plain.step(actions)
    _, r_priced, _, _, _ = priced.step(actions)
    _, r_custom, _, _, _ = custom.step(actions)
    costs = np.asarray(info["gen_0"]["constraint_costs"])
    weights = plain.task_spec.reward_presets["penalized"]
    expected = r_plain["gen_0"] - sum(
        weights.get(n, 0.0) * c for n, c in zip(plain.constraint_names(), costs, strict=True)
    )
    assert costs.sum() > 0 and r_priced["gen_0"] == pytest.approx(expected)
    assert all(r == pytest.approx(-costs.sum()) for r in r_custom.values())
    vec = make_env("marl_opf", split="test", num_envs=3, normalize=True, seed=0, reward="penalized")
    vec.reset(seed=0)
    _, rewards, _, _, _ = vec.step({a: np.ones((3, 1), np.float32) for a in vec.possible_agents})
    assert rewards["gen_0"].shape == (3,)
    with pytest.raises(ValueError, match="unknown reward"):
        make_env("marl_opf", framework="auto", reward="nope")
    with pytest.raises(ValueError, match="local_plus_forecast"):
        make_env("marl_opf", framework="auto", forecast_horizon=4)
    with pytest.raises(ValueError, match="selected_cost_sum"):
        make_env("marl_opf", framework="auto", safe_rl=True)
