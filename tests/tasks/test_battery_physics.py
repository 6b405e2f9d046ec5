"""Battery device and battery_arbitrage task physics."""

import numpy as np
import pytest

from powerzoo.devices.battery import WEAR_COST_PER_MWH, BatteryParams, battery_step
from powerzoo.tasks import make_task

PARAMS = BatteryParams()


def test_soc_stays_within_bounds_under_extreme_actions():
    rng = np.random.default_rng(0)
    soc = rng.uniform(PARAMS.soc_min, PARAMS.soc_max, 4096)
    for _ in range(200):
        request = rng.choice([-1e3, -25.0, 0.0, 25.0, 1e3], size=soc.size) * rng.uniform(
            0, 1, soc.size
        )
        soc = battery_step(PARAMS, soc, request, 0.5).soc
        assert soc.min() >= PARAMS.soc_min and soc.max() <= PARAMS.soc_max


def test_energy_bookkeeping_through_efficiencies_is_exact():
    params = BatteryParams(charge_efficiency=0.9, discharge_efficiency=0.8)
    soc = np.array([0.5, 0.5, 0.5, 0.3])
    request = np.array([-10.0, 10.0, 0.0, 7.5])
    r = battery_step(params, soc, request, 0.5)
    stored_change = (r.soc - soc) * params.energy_capacity_mwh
    expected = 0.9 * r.charge_mwh - r.discharge_mwh / 0.8
    np.testing.assert_allclose(stored_change, expected, atol=1e-12)
    # charging 10 MW for 30 min stores 4.5 MWh; discharging 10 MW for 30 min takes 6.25 MWh
    np.testing.assert_allclose(stored_change[:2], [4.5, -6.25], atol=1e-12)
    np.testing.assert_array_equal(r.soc_violation_mwh, 0.0)


def test_request_beyond_soc_bounds_is_cut_and_costed():
    soc = np.array([0.11, 0.89])
    r = battery_step(PARAMS, soc, np.array([25.0, -25.0]), 0.5)
    # 1 MWh stored above soc_min -> at most 0.95 MWh delivered = 1.9 MW for 30 min
    np.testing.assert_allclose(r.p_mw, [1.9, -1.0 / 0.95 / 0.5], rtol=1e-12)
    np.testing.assert_allclose(r.soc, [0.1, 0.9], atol=1e-12)
    # storage-side energy asked beyond the bound:
    # (25 - 1.9) * 0.5 / 0.95 and (25 - 2.105..) * 0.5 * 0.95
    np.testing.assert_allclose(
        r.soc_violation_mwh, [(25 - 1.9) * 0.5 / 0.95, (25 - 1.0 / 0.95 / 0.5) * 0.5 * 0.95]
    )


def test_invalid_battery_parameters_raise():
    with pytest.raises(ValueError, match="soc_min"):
        BatteryParams(soc_min=0.9, soc_max=0.1)
    with pytest.raises(ValueError, match="charge_efficiency"):
        BatteryParams(charge_efficiency=1.5)


def test_task_reward_is_the_sum_of_its_terms_and_matches_price_times_energy():
    task = make_task("battery_arbitrage", "test")
    rng = np.random.default_rng(1)
    state = task.reset(rng, np.arange(8))
    settled = np.zeros(8)
    for _ in range(48):
        price = task.observe(state)[:, 1].astype(np.float64)
        action = rng.uniform(-25, 25, (8, 1))
        soc_before = state.soc
        state, out = task.step(state, action, rng)
        np.testing.assert_allclose(out.reward, out.reward_terms.sum(axis=1))
        net_mwh = out.info["discharge_mwh"] - out.info["charge_mwh"]
        throughput = out.info["discharge_mwh"] + out.info["charge_mwh"]
        # the settlement marked to market: the change of the settlement value this step
        settlement = task.settlement(state.day_id, state.soc) - task.settlement(
            state.day_id, soc_before
        )
        settled += out.reward_terms[:, 3]
        # the shared wear, WEAR_COST_PER_MWH (7.5 $/MWh) on each leg of grid-side throughput
        np.testing.assert_allclose(
            out.reward,
            price * net_mwh - WEAR_COST_PER_MWH * throughput + settlement,
            rtol=1e-5,
            atol=1e-5,
        )
        assert np.all(out.constraint_costs >= 0)
    # over the day the settlement terms add up to the settlement of the final SOC
    np.testing.assert_allclose(settled, task.settlement(state.day_id, state.soc), atol=1e-6)


def test_oracle_beats_rule_based_beats_random_on_the_test_split():
    from powerzoo.benchmarks.evaluation import evaluate_days
    from powerzoo.benchmarks.policies import OraclePolicy, RandomPolicy, RuleBasedPolicy
    from powerzoo.rl import make_env

    env = make_env("battery_arbitrage", split="test", seed=0)
    days = range(env.unwrapped.task.n_days)
    scores = {
        p.name: evaluate_days(p, env, days)["mean_return"]
        for p in (RandomPolicy(env.action_space, seed=0), RuleBasedPolicy(env), OraclePolicy(env))
    }
    assert scores["oracle"] >= scores["rule_based"] >= scores["random"], scores
    assert scores["rule_based"] > 0 > scores["random"]


def test_oracle_is_optimal_against_perturbed_schedules():
    task = make_task("battery_arbitrage", "test")
    rng = np.random.default_rng(3)
    state0 = task.reset(rng, np.array([5]))
    plan = task.oracle_plan(state0)[0]

    def episode_return(actions):
        state, total = task.reset(rng, np.array([5])), 0.0
        for a in actions:
            state, out = task.step(state, np.clip(a, -25, 25)[None, :], rng)
            total += out.reward[0]
        return total

    best = episode_return(plan)
    for _ in range(20):
        assert episode_return(plan + rng.normal(0, 2.0, plan.shape)) <= best + 1e-6


def test_unknown_task_parameter_raises():
    with pytest.raises(TypeError, match="unknown parameter"):
        make_task("battery_arbitrage", "train", capacity=3)
    with pytest.raises(ValueError, match="initial_soc"):
        make_task("battery_arbitrage", "train", initial_soc=0.95)


def test_the_rules_charge_when_buying_pays_not_only_to_get_back_to_the_start():
    """A cheap step with the whole day still ahead: the threshold rule and the time-of-use rule
    charge at full power (the end-of-day return to the start SOC must not veto a charge)."""
    from powerzoo.devices.inverter_battery import InverterBatteryParams
    from powerzoo.tasks.battery_arbitrage import rule_power_mw
    from powerzoo.tasks.tariffs import tou_battery_power_mw

    battery = BatteryParams()
    p = rule_power_mw(
        battery,
        soc=np.array([0.5]),
        price=np.array([-10.0]),
        reference_price=np.array([30.0]),
        steps_left=np.array([30.0]),
        dt_h=0.5,
        soc_start=0.5,
        band=0.0,
    )
    assert p[0] == pytest.approx(-battery.power_max_mw)
    feeder = InverterBatteryParams(energy_capacity_mwh=2.0, power_max_mw=0.5, n_units=1)
    p = tou_battery_power_mw(
        feeder,
        mode=np.array([-1]),
        soc=np.array([[0.5]]),
        dt_h=0.5,
        tou_steps=8,
        price_per_mwh=np.array([-10.0]),
        reference_price=30.0,
        steps_left=np.array([30.0]),
    )
    assert p[0, 0] < 0.0  # charges in its charge window when buying pays
