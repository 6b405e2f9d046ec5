"""``marl_ev_v2g``: client APIs, the EV fleet's energy accounting,
the feeder, the trip model, baselines, bad input."""

import numpy as np
import pytest
from helpers import random_parallel_rollout
from pettingzoo.test import parallel_api_test

from powerzoo.benchmarks.evaluation import evaluate_days
from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.data import calendar
from powerzoo.data.mobility import KWH_PER_MILE, LATEST_RETURN_H, MAX_MILES, sample_trips
from powerzoo.devices.ev_fleet import EVFleetParams, departure_goal_kwh, ev_fleet_step
from powerzoo.rl import make_env
from powerzoo.tasks import make_task, task_spec
from powerzoo.tasks.ev_v2g import site_buses

FLEET = EVFleetParams()


# ---- client APIs ------------------------------------------------------------------------------
@pytest.mark.parametrize("n_evs", [5, 20])
def test_parallel_api_test_passes_with_5_and_20_evs(n_evs):
    env = make_env("marl_ev_v2g", framework="pettingzoo", seed=0, n_evs=n_evs)
    assert len(env.possible_agents) == n_evs
    parallel_api_test(env, num_cycles=200 if n_evs == 5 else 30)
    parallel_api_test(
        make_env(
            "marl_ev_v2g", framework="pettingzoo", obs_mode="local_plus_forecast", n_evs=n_evs
        ),
        num_cycles=5,
    )


def test_random_pettingzoo_rollout_gives_each_site_its_own_bill():
    env = make_env("marl_ev_v2g", framework="pettingzoo", seed=0)
    # random rollout with per-agent reward accounting
    rollout = random_parallel_rollout(env, seed=0)
    steps, totals, info = rollout.steps, rollout.returns, rollout.infos
    assert steps == 168 and set(totals) == {f"site_{i}" for i in range(5)}
    assert len(set(totals.values())) == 5  # per-agent rewards: each site's own bill
    assert all(
        {"cost_departure_shortfall", "cost_voltage_violation", "v_min_pu"} <= set(i)
        for i in info.values()
    )


def test_spec_facts():
    spec = task_spec("marl_ev_v2g")
    assert spec.agents == tuple(f"site_{i}" for i in range(5)) and spec.shared_reward is False
    assert spec.horizon == 168 and spec.step_minutes == 60 and spec.gamma == 0.999
    assert spec.constraint_names == ("departure_shortfall", "voltage_violation", "thermal_overload")
    assert spec.agent_action_dim == 84 and spec.action.low[0] == -7.2 and spec.action.high[0] == 7.2
    assert spec.obs_modes == ("global", "local", "local_plus_forecast", "local_plus_voltage")
    assert set(spec.baselines) == {"random", "rule_based", "oracle", "idle"}
    big = task_spec("marl_ev_v2g", n_evs=20)
    assert len(big.agents) == 20 and big.agent_action_dim == 21  # the fleet stays 420 cars
    assert big.idle_action == (-7.2,) * 420  # uncontrolled charging of every car
    assert task_spec("marl_ev_v2g", n_evs=3, vehicles_per_site=7).agent_action_dim == 7


def test_sites_are_spread_over_the_feeder():
    assert site_buses(5).tolist() == [4, 10, 17, 23, 29]
    assert len(set(site_buses(20).tolist())) == 20 and set(site_buses(32).tolist()) == set(
        range(1, 33)
    )
    task = make_task(
        "marl_ev_v2g", "test", n_evs=40, vehicles_per_site=1
    )  # more sites than buses: shared
    state = task.reset(np.random.default_rng(0), np.array([0]))
    state, out = task.step(state, np.full((1, 40), -7.2), np.random.default_rng(0))
    assert out.info["pf_converged"].all() and out.reward.shape == (1, 40)


# ---- the fleet's physics, every step --------------------------------------------------------
def test_energy_conserved_no_power_while_away_and_feeder_balance_every_step():
    task = make_task("marl_ev_v2g", "test", fleet_vehicles=100)
    rng = np.random.default_rng(3)
    days = np.array([0, 17, 34])
    state = task.reset(rng, days)
    # trip energy the week's tables ask for (trips fully inside the week)
    away_steps = np.where(state.leave < 10_000, state.back.astype(float) - state.leave, 0.0)
    asked = (state.drive_kwh * away_steps).sum(axis=(1, 2))
    drawn = np.zeros(days.size)
    for _ in range(task.spec.horizon):
        before = state.energy_kwh.astype(np.float64)
        load_mw = task.grid.bus_loads(task.grid.demand_pu[task.flat_index(state.day_id, state.t)])[
            0
        ].sum(axis=1)
        action = rng.uniform(-7.2, 7.2, (days.size, 100))
        state, out = task.step(state, action, rng)
        info = out.info
        p, plugged = info["ev_p_kw"].astype(np.float64), info["ev_plugged"]
        assert np.all(p[~plugged] == 0.0)  # an away car exchanges no power, whatever was asked
        assert np.all(np.abs(p) <= 7.2 + 1e-5) and np.all(info["ev_drive_kwh"][plugged] == 0.0)
        charged, discharged = np.maximum(-p, 0.0), np.maximum(p, 0.0)
        expected = (
            before
            + 0.92 * charged
            - discharged / 0.92
            - info["ev_drive_kwh"]
            + info["ev_unserved_drive_kwh"]
        )
        np.testing.assert_allclose(state.energy_kwh, expected, atol=2e-4)
        # V2G stops at soc_min, charging at soc_max
        assert np.all(state.energy_kwh[plugged & (p > 0)] >= FLEET.min_kwh - 1e-4)
        assert np.all(state.energy_kwh <= FLEET.max_kwh + 1e-4) and np.all(state.energy_kwh >= 0.0)
        drawn += info["ev_drive_kwh"].sum(axis=1)
        # feeder head = loads - the sites' injections + losses
        np.testing.assert_allclose(
            info["net_load_mw"], load_mw - info["site_p_mw"].sum(axis=1), atol=1e-9
        )
        np.testing.assert_allclose(
            info["feeder_p_mw"], info["net_load_mw"] + info["p_loss_mw"], atol=1e-6
        )
        np.testing.assert_allclose(
            info["site_p_mw"], p.reshape(days.size, 5, 20).sum(axis=2) / 1e3, rtol=1e-5, atol=1e-9
        )
        # per-agent rewards add up to the team's reward terms; costs are >= 0
        np.testing.assert_allclose(
            out.reward.sum(axis=1), out.reward_terms.sum(axis=1), rtol=1e-9, atol=1e-9
        )
        assert np.all(out.constraint_costs >= 0.0) and info["pf_converged"].all()
    np.testing.assert_allclose(drawn, asked, rtol=1e-5)  # every trip's energy was drawn while away


def test_the_fleet_device_on_hand_computed_numbers():
    energy = np.array([[30.0, 53.5, 12.5, 30.0]])
    plugged = np.array([[True, True, True, False]])
    step = ev_fleet_step(
        FLEET, energy, np.array([[-7.2, -7.2, 7.2, 7.2]]), plugged, np.array([[0, 0, 0, 9.0]]), 1.0
    )
    # room below 54 kWh is 0.5 kWh -> 0.5 / 0.92 kW;
    # 0.5 kWh above the 12 kWh floor -> 0.46 kW delivered
    np.testing.assert_allclose(step.p_kw, [[-7.2, -0.5 / 0.92, 0.5 * 0.92, 0.0]], rtol=1e-12)
    np.testing.assert_allclose(step.energy_kwh, [[30.0 + 0.92 * 7.2, 54.0, 12.0, 21.0]], rtol=1e-12)
    np.testing.assert_allclose(step.drive_kwh, [[0, 0, 0, 9.0]])
    empty = ev_fleet_step(
        FLEET, np.array([[2.0]]), np.array([[0.0]]), np.array([[False]]), np.array([[5.0]]), 1.0
    )
    assert empty.energy_kwh[0, 0] == 0.0 and empty.unserved_drive_kwh[0, 0] == 3.0
    # the goal is the target, or what full-power charging reaches if that is less
    goal = departure_goal_kwh(FLEET, np.array([20.0, 20.0, 50.0]), np.array([10.0, 2.0, 1.0]), 1.0)
    np.testing.assert_allclose(goal, [48.0, 20.0 + 2 * 0.92 * 7.2, 48.0])


def test_a_fleet_of_cars_moves_the_lowest_voltage_by_more_than_0_01_pu():
    for n in (5, 20):
        task = make_task("marl_ev_v2g", "test", n_evs=n)
        grid = task.grid
        demand = (
            grid.demand_pu[: calendar.N_DAYS * 24].reshape(-1, 24)[task.split_days[::7]].ravel()
        )
        p, q = grid.bus_loads(demand)
        site_mw = np.full(n, task.per_site * 7.2e-3)
        idle = grid.solve(p, q).info["v_min_pu"]
        charging = grid.solve(p + site_mw @ task.incidence, q).info["v_min_pu"]
        discharging = grid.solve(p - site_mw @ task.incidence, q).info["v_min_pu"]
        assert (idle - charging).min() > 0.015 and (discharging - idle).min() > 0.01
        one_car = np.zeros(n)
        one_car[np.argmax(task.buses)] = 7.2e-3
        assert (idle - grid.solve(p + one_car @ task.incidence, q).info["v_min_pu"]).max() < 0.001


# ---- trips ------------------------------------------------------------------------------------
def test_trip_model_weekdays_and_weekends():
    rng = np.random.default_rng(0)
    tuesday, saturday = (
        2,
        6,
    )  # 3 and 7 January 2023 (1 January, a Sunday, is day 0; 2 January a holiday)
    assert calendar.day_types()[[tuesday, saturday]].tolist() == [0, 1]
    trips = sample_trips(rng, np.array([tuesday, saturday]), 1, 20_000)
    wd, we = (slice(0, 1), slice(1, 2))
    assert trips.driven[wd].mean() == pytest.approx(0.95, abs=0.01) and trips.driven[
        we
    ].mean() == pytest.approx(0.75, abs=0.01)
    miles_wd = trips.miles[wd][trips.driven[wd]]
    assert miles_wd.mean() == pytest.approx(30.0, rel=0.03)  # 2017 NHTS: about 30 miles a day
    assert trips.miles[we][trips.driven[we]].mean() < miles_wd.mean()
    leave = trips.leave_h[wd][trips.driven[wd]]
    share = np.mean((leave >= 6.5) & (leave < 8.5))
    assert share == pytest.approx(0.53, abs=0.03)  # Census 2000: 53 % leave between 6:30 and 8:29
    assert trips.leave_h[we].mean() > leave.mean() + 2.0
    assert np.all(trips.return_h > trips.leave_h) and np.all(trips.return_h <= LATEST_RETURN_H)
    assert trips.energy_kwh.max() <= MAX_MILES * KWH_PER_MILE == 36.0
    assert np.all(trips.miles[~trips.driven] == 0.0)
    # wrap-around: a week starting on 31 December reads January's day types
    late = sample_trips(rng, np.array([364]), 7, 3)
    assert late.driven.shape == (1, 7, 3)


def test_trips_are_drawn_per_episode_from_the_env_rng():
    task = make_task("marl_ev_v2g", "test", fleet_vehicles=100)
    a = task.reset(np.random.default_rng(1), np.array([4, 4]))
    b = task.reset(np.random.default_rng(1), np.array([4, 4]))
    np.testing.assert_array_equal(a.leave, b.leave)
    np.testing.assert_array_equal(a.energy_kwh, b.energy_kwh)
    assert not np.array_equal(a.leave[0], a.leave[1])  # two episodes of one day differ
    assert np.all(a.plugged) and a.plugged.shape == (2, 100)  # everyone is home at midnight


# ---- observations ------------------------------------------------------------------------------
def test_observation_shows_time_to_departure_and_energy_needed():
    task = make_task("marl_ev_v2g", "test", fleet_vehicles=100)
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([10]))
    for _ in range(20):  # 20:00 on the first day
        state, _ = task.step(state, np.zeros((1, 100)), rng)
    fields = task.spec.observation_spec("global").names
    obs = task.observe(state)
    plugged = state.plugged[0]
    for site in (0, 3):
        row = dict(zip(fields, obs[0, site], strict=True))
        for j in range(20):
            car = site * 20 + j
            assert row[f"plugged_{j}"] == float(plugged[car])
            expected_h = (state.departure[0, car] - 20) if plugged[car] else 0.0
            assert row[f"hours_to_departure_{j}"] == expected_h
            need = (state.goal_kwh[0, car] - state.energy_kwh[0, car]) if plugged[car] else 0.0
            assert row[f"energy_needed_kwh_{j}"] == pytest.approx(need, abs=1e-4)
            assert row[f"soc_{j}"] == pytest.approx(state.energy_kwh[0, car] / 60.0, abs=1e-6)
        assert row["own_plugged_share"] == pytest.approx(plugged[site * 20 : site * 20 + 20].mean())
    assert plugged.mean() > 0.5 and (state.departure[0][plugged] > 20).all()
    forecast = task.observe(state, "local_plus_forecast")[0, 0, -6:]
    flat = task.flat_index(state.day_id, state.t)[0]
    np.testing.assert_allclose(forecast, task.grid.price_per_mwh[flat + 1 : flat + 7], rtol=1e-6)
    dims = {
        "global": 4 + 4 + 10 + 4 + 80,
        "local": 4 + 4 + 80,
        "local_plus_forecast": 94,
        "local_plus_voltage": 90,
    }
    for mode, dim in dims.items():
        assert task.observe(state, mode).shape == (1, 5, dim)


# ---- baselines --------------------------------------------------------------------------------
def test_rule_meets_every_goal_the_oracle_earns_more_and_random_falls_short():
    env = make_env("marl_ev_v2g", split="test")
    # a July test week (22 July): the feeder is loaded (measured: oracle 19,539 $, rule 9,595,
    # random -5,653 with 71,729 kWh short; the week of 16 July orders them alike, its LP is slower)
    days = [20]
    res = {
        p: evaluate_days(make_baseline_policy(p, env, seed=0), env, days, seed=0)
        for p in ("random", "rule_based", "oracle")
    }
    assert res["rule_based"]["mean_costs"]["departure_shortfall"] == 0.0
    assert res["oracle"]["mean_costs"]["departure_shortfall"] == 0.0
    assert res["random"]["mean_costs"]["departure_shortfall"] > 100.0
    # the oracle earns more than the rule (it also beats random, which spends less only because it
    # sends the cars off empty: hence its shortfall)
    assert res["oracle"]["mean_return"] > res["rule_based"]["mean_return"]
    assert res["oracle"]["mean_return"] > res["random"]["mean_return"]
    # both keep the feeder's budgets: the rule by valley filling
    assert res["oracle"]["over_budget_rate"] == 0.0 == res["rule_based"]["over_budget_rate"]


def test_rule_meets_goals_on_other_fleet_sizes():
    task = make_task("marl_ev_v2g", "test", n_evs=20, vehicles_per_site=3)
    rng = np.random.default_rng(7)
    state = task.reset(rng, np.array([5, 20]))
    shortfall = 0.0
    for _ in range(task.spec.horizon):
        state, out = task.step(state, task.rule_based_action(task.observe(state)), rng)
        shortfall += out.constraint_costs[:, 0].sum()
    assert shortfall == 0.0 and state.t[0] == 168


# ---- determinism and bad input ----------------------------------------------------------------
def test_same_seed_same_trajectory_and_another_seed_differs():
    def run(seed):
        env = make_env(
            "marl_ev_v2g",
            framework="pettingzoo",
            seed=seed,
            normalize=True,
            n_evs=4,
            vehicles_per_site=3,
        )
        env.reset(seed=seed)
        rows = []
        for _ in range(30):
            obs, rewards, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
            rows.append(np.concatenate([obs[a] for a in sorted(obs)] + [list(rewards.values())]))
        return np.asarray(rows)

    np.testing.assert_array_equal(run(5), run(5))
    assert not np.array_equal(run(5), run(6))


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match=r"n_evs must lie in \[1, 64\], got 0"):
        task_spec("marl_ev_v2g", n_evs=0)
    with pytest.raises(TypeError, match="n_evs must be an integer"):
        task_spec("marl_ev_v2g", n_evs=2.5)
    with pytest.raises(TypeError, match="n_evs must be an integer"):
        make_env("marl_ev_v2g", framework="pettingzoo", n_evs=True)
    with pytest.raises(ValueError, match="vehicles_per_site must lie in"):
        make_task("marl_ev_v2g", "test", vehicles_per_site=0)
    with pytest.raises(TypeError, match="unknown parameter"):
        make_task("marl_ev_v2g", "test", n_cars=5)
    with pytest.raises(ValueError, match="unknown obs_mode 'ders_local'"):
        make_env("marl_ev_v2g", framework="pettingzoo", obs_mode="ders_local")
    env = make_env("marl_ev_v2g", framework="pettingzoo", seed=0, fleet_vehicles=100)
    env.reset(seed=0)
    bad = {a: np.zeros(20, np.float32) for a in env.agents}
    bad["site_2"][4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        env.step(bad)
    with pytest.raises(ValueError, match="out of range"):
        env.reset(options={"day_id": 240})  # the train split has 148 start weeks
    with pytest.raises(ValueError, match="p_request_kw has shape"):
        ev_fleet_step(
            FLEET, np.zeros((1, 3)), np.zeros((1, 2)), np.ones((1, 3), bool), np.zeros((1, 3)), 1.0
        )
    with pytest.raises(ValueError, match="soc_min <= target_soc"):
        EVFleetParams(target_soc=0.95)


def test_the_test_weeks_are_seven_overlapping_starts_in_each_of_five_blocks():
    # what the task page says of its 35 test episodes: neighbouring weeks share 6 days
    starts = calendar.split_day_indices("test", 7)
    blocks = np.split(starts, np.flatnonzero(np.diff(starts) > 1) + 1)
    assert len(starts) == 35 and [len(b) for b in blocks] == [7] * 5
    assert all(np.all(np.diff(b) == 1) for b in blocks)
    assert make_task("marl_ev_v2g", "test").n_days == 35
