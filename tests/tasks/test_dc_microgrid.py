"""dc_microgrid / dc_microgrid_safe: API, multi-objective reward,
physical invariants, baselines, data."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import powerzoo  # noqa: F401  (registers the Gymnasium ids)
from powerzoo.data import split_day_indices
from powerzoo.data.calendar import DATES, N_DAYS, base_split_of_days, day_types
from powerzoo.data.workload import JOB_CLASSES, N_BUCKETS, get_workload
from powerzoo.devices.battery import WEAR_COST_PER_MWH
from powerzoo.devices.cooling import CoolingParams, cooling_cop
from powerzoo.devices.diesel import DieselParams, diesel_output_mw
from powerzoo.devices.job_queue import drop_due, per_bucket, queue_outlook, serve_edf
from powerzoo.devices.thermal_zone import ZoneParams, zone_step
from powerzoo.rl import make_env
from powerzoo.tasks import info as task_info
from powerzoo.tasks.dc_microgrid import PENALTIES, REWARD_WEIGHTS, THRESHOLDS

TASKS = ("dc_microgrid", "dc_microgrid_safe")
H = 288


def check_step_invariants(info, obs, space):
    """Physical invariants of one (batched) step; ``info`` arrays have a leading batch axis."""
    supply = (
        info["pv_mw"]
        + info["diesel_mw"]
        + info["battery_p_mw"]
        + info["grid_import_mw"]
        - info["spill_mw"]
    )
    # what the site draws is what it is supplied: a deficit is demand left unserved, not drawn
    np.testing.assert_allclose(supply, info["it_mw"] + info["cooling_mw"], atol=1e-9)
    assert (
        np.all(info["grid_import_mw"] >= 0)
        and np.all(info["deficit_mw"] >= 0)
        and np.all(info["spill_mw"] >= 0)
    )
    assert np.all(info["pv_curtailed_mw"] <= info["pv_mw"] + 1e-12)
    # zone temperature finite and bounded: the plant (sized above the peak IT heat) keeps it at or
    # below max(start, 32 deg C); with no cooling it settles at T_out + P_it / UA (above -30 deg C)
    temp = info["zone_temp_c"]
    assert np.all(np.isfinite(temp)) and np.all((temp > -30.0) & (temp <= 32.0 + 1e-9))
    assert np.all((info["soc"] >= 0.1 - 1e-12) & (info["soc"] <= 0.9 + 1e-12))
    # jobs conserved: arrived = served + queued + dropped (GPU-h, per class)
    np.testing.assert_allclose(
        info["arrived_gpuh"],
        info["served_gpuh"] + info["queued_gpuh"] + info["dropped_gpuh"],
        rtol=1e-9,
        atol=1e-6,
    )
    assert np.all(info["constraint_costs"] >= 0)
    assert np.all(info["reward_vector"][..., [0, 2]] <= 0)
    # the cost term less the last step's settlement of the battery's energy: the grid energy at
    # the market price, whose sign follows the price (a payment at a positive price, an income at
    # a negative one: the grid pays the site to take power), and the diesel fuel, the diesel
    # starts and the battery wear, which only ever cost (<= 0)
    cost_less_settlement = info["reward_vector"][..., 1] - info["storage_settlement"]
    grid_energy = -info["grid_import_mw"] * info["price_per_mwh"] / 12.0  # 5-min steps
    assert np.all(cost_less_settlement - grid_energy <= 1e-9)
    assert np.all(np.where(info["price_per_mwh"] >= 0, cost_less_settlement, 0.0) <= 1e-9)
    assert np.all(np.isfinite(obs)) and space.contains(obs)


# ---- API -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("normalize", [False, True])
def test_gymnasium_and_sb3_checkers_pass(task, normalize):
    env = make_env(task, normalize=normalize, seed=0)
    gym_check_env(env, skip_render_check=True)
    sb3_check_env(env, warn=False)


def test_multi_objective_loop_over_the_reward_vector(capsys):
    import numpy as np

    from powerzoo.rl import make_env

    env = make_env("dc_microgrid", normalize=True, seed=0)
    weights = np.array([1.0, 0.5, 25.5])  # energy, cost, carbon
    obs, info = env.reset(seed=0)
    total_vec = np.zeros(3)
    done = False
    while not done:
        action = env.action_space.sample()  # replace with your policy
        obs, scalar_r, terminated, truncated, info = env.step(action)
        rv = np.asarray(info["reward_vector"])
        total_vec += rv
        weighted = float(weights @ rv)  # your scalarisation
        done = terminated or truncated
    print("episode reward vector:", total_vec)

    assert "episode reward vector:" in capsys.readouterr().out
    assert info["step"] == H and truncated and not terminated
    assert np.all(total_vec[[0, 2]] < 0) and np.isfinite(weighted)


def test_gymnasium_ids_and_spec():
    for task, env_id in (
        ("dc_microgrid", "powerzoo/DCMicrogrid-v0"),
        ("dc_microgrid_safe", "powerzoo/DCMicrogridSafe-v0"),
    ):
        env = gym.make(env_id, split="val")
        obs, info = env.reset(seed=1)
        date = np.datetime64(env.unwrapped.current_date())
        assert env.observation_space.contains(obs)
        assert base_split_of_days()[DATES == date] == "val"
        d = task_info(task)
        assert d["horizon"] == H and d["step_minutes"] == 5 and d["agent_mode"] == "single"
        assert d["reward"]["terms"] == ["energy", "cost", "carbon"]
        assert d["constraint_names"] == ["sla_violation", "overtemperature", "power_deficit"]
        assert (
            d["selected_constraints"] == d["constraint_names"]
            and d["cost_thresholds"] == THRESHOLDS
        )
        assert set(d["baselines"]) == {"random", "rule_based", "oracle"}
        assert d["gamma"] == 0.999  # a long horizon: the one discount every trainer reads
        assert {"heatwave", "low_renewable", "workload_shock"} <= set(d["splits"])
        assert [a["name"] for a in d["action_space"]] == [
            "training_share",
            "finetune_share",
            "cooling_setpoint_c",
            "battery_p_mw",
            "diesel_p_mw",
        ]


def test_forecast_wrapper_appends_weather_and_price():
    env = make_env("dc_microgrid_safe", forecast_horizon=3, seed=0)
    obs, _ = env.reset(seed=0, options={"day_id": 100})
    assert obs.shape == (17 + 3 * 3,)
    temps = [env.step(np.array([0.3, 0.1, 25.0, 0.0, 0.0]))[4]["temp_c"] for _ in range(4)]
    np.testing.assert_allclose(
        obs[17 + 6 : 17 + 9], temps[1:4], rtol=1e-6
    )  # temp_c block, steps 1..3
    gym_check_env(
        make_env("dc_microgrid", forecast_horizon=2, normalize=True, seed=0), skip_render_check=True
    )


# ---- reward -------------------------------------------------------------------------------------
def test_safe_reward_is_exactly_the_weighted_reward_vector():
    env = make_env("dc_microgrid_safe", normalize=True, seed=3)
    env.reset(seed=3)
    weights = np.array([1.0, 0.5, 0.5 * 51.0])  # carbon at 51 $/tCO2, in the cost's weight
    np.testing.assert_array_equal(REWARD_WEIGHTS, weights)
    for _ in range(H):
        _, reward, _, truncated, info = env.step(env.action_space.sample())
        rv = np.asarray(info["reward_vector"])
        assert reward == weights @ rv  # exact, not approximate
        np.testing.assert_array_equal(rv, info["reward_terms"])
    assert truncated


def test_mdp_reward_folds_in_penalties_and_presets_match():
    actions = np.random.default_rng(0).uniform(-1, 1, (H, 5)).astype(np.float32)
    envs = {
        "mdp": make_env("dc_microgrid", normalize=True),
        "safe": make_env("dc_microgrid_safe", normalize=True),
        "safe_penalized": make_env("dc_microgrid_safe", normalize=True, reward="penalized"),
        "mdp_objective": make_env("dc_microgrid", normalize=True, reward="objective"),
    }
    for env in envs.values():
        env.reset(seed=0, options={"day_id": 5})
    penalized = 0
    for a in actions:
        out = {k: env.step(a) for k, env in envs.items()}
        info = out["mdp"][4]
        expected = REWARD_WEIGHTS @ info["reward_vector"] - PENALTIES @ info["constraint_costs"]
        assert out["mdp"][1] == pytest.approx(expected, rel=1e-12, abs=1e-9)
        assert out["safe_penalized"][1] == pytest.approx(out["mdp"][1], rel=1e-9, abs=1e-9)
        assert out["mdp_objective"][1] == pytest.approx(out["safe"][1], rel=1e-9, abs=1e-9)
        penalized += info["cost_sum"] > 0
    assert penalized > 0  # random actions do violate constraints


# ---- invariants --------------------------------------------------------------------------------
def extreme_actions(n_envs, rng):
    """Corners of the action box, mixed across rows and steps (physical units)."""
    low = np.array([0.0, 0.0, 18.0, -2.0, 0.0])
    high = np.array([1.0, 1.0, 32.0, 2.0, 2.5])
    corner = rng.integers(0, 2, (n_envs, 5)).astype(bool)
    return np.where(corner, high, low)


@pytest.mark.parametrize("mode", ["random", "extreme", "out_of_range"])
def test_invariants_hold_every_step(mode):
    n = 32
    env = make_env(
        "dc_microgrid", split="train", num_envs=n, seed=1, autoreset_mode="same_step"
    )  # every row steps
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(1)
    low, high = env.single_action_space.low, env.single_action_space.high
    for t in range(H + 20):  # crosses an episode boundary (autoreset)
        if mode == "random":
            action = rng.uniform(low, high, (n, 5))
        elif mode == "extreme":
            action = extreme_actions(n, rng)
        else:
            action = rng.uniform(low - 5.0, high + 5.0, (n, 5))
        obs, reward, terminated, truncated, info = env.step(action)
        check_step_invariants(info, obs, env.observation_space)
        assert np.all(np.isfinite(reward)) and not terminated.any()
        assert truncated.all() == (t == H - 1)
        shares = info["action_applied"][:, :2]
        assert np.all(shares >= 0) and np.all(shares.sum(axis=1) <= 1 + 1e-12)
        if mode == "out_of_range":
            assert info["action_clipped"].any()


def test_single_env_invariants_and_idle_cluster_overheats_nothing():
    env = make_env("dc_microgrid_safe", split="test", seed=0)
    obs, _ = env.reset(seed=0, options={"day_id": 40})  # a summer day
    # hot setpoint: the zone drifts to 32 deg C and overtemperature is charged
    for _ in range(36):
        obs, _, _, _, info = env.step(np.array([1.0, 0.0, 32.0, 0.0, 0.0]))
        check_step_invariants(
            {
                k: np.atleast_1d(v)
                for k, v in info.items()
                if k not in ("selected_constraint_names",)
            },
            obs,
            env.observation_space,
        )
    assert info["zone_temp_c"] == pytest.approx(32.0, abs=0.05)
    assert info["cost_overtemperature"] == pytest.approx(5.0 / 12.0, rel=0.02)
    # deep cooling then a cold setpoint: cooling power rises, zone goes to 18 deg C
    for _ in range(36):
        obs, _, _, _, info = env.step(np.array([0.0, 0.0, 18.0, 0.0, 0.0]))
    assert (
        info["zone_temp_c"] == pytest.approx(18.0, abs=0.05) and info["cost_overtemperature"] == 0.0
    )


def test_deficit_and_diesel_minimum_output():
    env = make_env("dc_microgrid_safe", grid_import_max_mw=0.0, seed=0)  # islanded
    env.reset(seed=0, options={"day_id": 0})
    _, _, _, _, info = env.step(
        np.array([1.0, 0.0, 26.0, 0.0, 0.2])
    )  # 0.2 MW < half the 0.75 MW minimum
    assert info["diesel_mw"] == 0.0 and info["grid_import_mw"] == 0.0
    assert info["deficit_mw"] > 1.0 and info["cost_power_deficit"] == pytest.approx(
        info["deficit_mw"] / 12
    )
    assert info["action_applied"][4] == 0.0 and info["is_safe"] is False
    _, _, _, _, info = env.step(
        np.array([0.0, 0.0, 26.0, 0.0, 0.5])
    )  # rounds up to the minimum output
    assert info["diesel_mw"] == pytest.approx(0.75)


def run_lengths(on):
    """Lengths of the runs of equal values in ``on`` [T], the first and last run left out (they
    may continue before the episode or after it)."""
    edges = np.flatnonzero(np.diff(on.astype(int))) + 1
    return np.diff(edges)


def step_cost(info, dt_h=1 / 12):
    """The cost term of a step without the settlement: grid import at the market price (an
    income at a negative price) and diesel fuel, battery wear at the shared WEAR_COST_PER_MWH
    (7.5 $/MWh) of throughput, 50 $ per diesel start ($)."""
    throughput = abs(info["battery_p_mw"]) * dt_h
    return (
        -(info["grid_import_mw"] * info["price_per_mwh"] + info["diesel_mw"] * 300.0) * dt_h
        - WEAR_COST_PER_MWH * throughput
        - 50.0 * info["diesel_started"]
    )


def test_battery_wear_is_the_shared_wear_cost_per_mwh_of_throughput():
    from powerzoo.devices.battery import BatteryParams

    env = make_env("dc_microgrid_safe", split="test", seed=0)
    env.reset(seed=0, options={"day_id": 3})
    assert BatteryParams().degradation_cost_per_mwh == WEAR_COST_PER_MWH
    assert env.unwrapped.task.params.battery.degradation_cost_per_mwh == WEAR_COST_PER_MWH
    _, _, _, _, info = env.step(np.array([0.2, 0.1, 26.0, 1.0, 0.0]))  # discharge 1 MW
    assert info["battery_p_mw"] == pytest.approx(1.0)
    assert info["reward_vector"][1] == pytest.approx(step_cost(info), rel=1e-12)


def test_last_step_settles_the_battery_energy_at_the_days_mean_price():
    # drained to its floor, then charged to its ceiling: a deficit bought back at
    # (mean price + wear) / eta_c, a surplus sold at eta_d (mean price - wear), per MWh
    for battery_mw, soc_end in ((2.0, 0.1), (-2.0, 0.9)):
        env = make_env("dc_microgrid_safe", split="test", seed=0)
        env.reset(seed=0, options={"day_id": 5})
        prices = []
        for t in range(H):
            _, _, _, truncated, info = env.step(np.array([0.1, 0.05, 26.0, battery_mw, 0.0]))
            prices.append(info["price_per_mwh"])
            assert (info["storage_settlement"] == 0.0) == (t < H - 1)
        assert truncated and info["soc"] == pytest.approx(soc_end)
        change_mwh, mean_price = (soc_end - 0.5) * 4.0, np.mean(prices)
        want = (
            change_mwh * 0.95 * (mean_price - WEAR_COST_PER_MWH)
            if change_mwh > 0
            else change_mwh / 0.95 * (mean_price + WEAR_COST_PER_MWH)
        )
        assert info["storage_settlement"] == pytest.approx(want, rel=1e-9)
        assert info["reward_vector"][1] == pytest.approx(step_cost(info) + want, rel=1e-9)


def test_power_deficit_throttles_the_gpus():
    action = np.array([1.0, 0.0, 26.0, 1.0, 0.0])  # every GPU on training, 1 MW from the battery
    outcome = {}
    for grid_mw in (0.0, 10.0):  # islanded at night (no PV): 1 MW for a ~3 MW demand; ample
        env = make_env("dc_microgrid_safe", grid_import_max_mw=grid_mw, seed=0)
        env.reset(seed=0, options={"day_id": 0})
        outcome[grid_mw] = [env.step(action)[4] for _ in range(12)]
    short, ample = outcome[0.0], outcome[10.0]
    for info in short:
        # the site draws what it is supplied, no more; the rest of the demand is the deficit
        supply = info["pv_mw"] + info["battery_p_mw"] + info["diesel_mw"]
        assert info["grid_import_mw"] == 0.0 and info["deficit_mw"] > 1.0
        assert info["it_mw"] + info["cooling_mw"] == pytest.approx(supply, abs=1e-9)
        assert info["cost_power_deficit"] == pytest.approx(info["deficit_mw"] / 12)
    for info in ample:
        assert info["deficit_mw"] == 0.0
    # the GPUs were throttled: less work served, less heat, more work left queued
    busy = [sum(i["gpus_busy"].sum() for i in run) for run in (short, ample)]
    served = [run[-1]["served_gpuh"].sum() for run in (short, ample)]
    queued = [run[-1]["queued_gpuh"].sum() for run in (short, ample)]
    assert busy[0] < 0.6 * busy[1] and served[0] < 0.6 * served[1] and queued[0] > queued[1]
    assert sum(i["it_mw"] for i in short) < 0.6 * sum(i["it_mw"] for i in ample)


def test_diesel_keeps_its_minimum_run_and_down_times_and_pays_each_start():
    env = make_env("dc_microgrid_safe", split="test", seed=0)
    env.reset(seed=0, options={"day_id": 2})
    # asked on for one step then off: it runs for an hour (12 steps) at its minimum output
    requests = [1.0] + [0.0] * 13 + [1.0] * 14
    infos = [env.step(np.array([0.3, 0.1, 26.0, 0.0, r]))[4] for r in requests]
    on = np.array([i["diesel_mw"] > 0 for i in infos])
    started = np.array([i["diesel_started"] for i in infos])
    np.testing.assert_array_equal(on[:12], True)
    np.testing.assert_allclose([i["diesel_mw"] for i in infos[1:12]], 0.75)
    # stopped at step 12, it may not start again for an hour although asked from step 14 on
    np.testing.assert_array_equal(on[12:24], False)
    np.testing.assert_array_equal(on[24:], True)
    assert np.flatnonzero(started).tolist() == [0, 24]
    for info in infos:  # 50 $ per start in the cost term
        assert info["reward_vector"][1] == pytest.approx(step_cost(info), rel=1e-12)
    obs = env.step(np.array([0.3, 0.1, 26.0, 0.0, 0.0]))[0]
    names = env.unwrapped.task.spec.observation.names
    # running for 5 steps of its 12: 35 min until it may stop
    assert obs[names.index("diesel_on")] == 1.0
    assert obs[names.index("diesel_hold_h")] == pytest.approx(35 / 60, rel=1e-6)


def test_rule_runs_the_diesel_an_hour_at_least_and_serves_the_load():
    days = [1, 2, 12, 25, 36, 49, 57, 63]  # test days on which the rule runs the diesel
    env = make_env("dc_microgrid", split="test", num_envs=len(days))
    task = env.task
    obs, _ = env.reset(seed=0, options={"day_id": days})
    on, deficit = [], []
    for _ in range(H):
        obs, _, _, _, info = env.step(task.rule_based_action(obs.astype(np.float64)))
        on.append(info["diesel_mw"] > 0)
        deficit.append(info["deficit_mw"])
    on = np.array(on).T
    assert on.any(axis=1).sum() >= 6
    for row in on:
        assert np.all(run_lengths(row) >= 12) and np.sum(np.diff(row.astype(int)) == 1) <= 12
    assert np.sum(deficit) / 12 <= 0.25 * len(days)  # within the CMDP budget on average


# ---- baselines ----------------------------------------------------------------------------------
def test_rule_based_beats_random_on_every_term_and_meets_thresholds_on_val():
    days = [0, 5, 10, 17, 22, 29, 36, 43]
    n = len(days)
    task = make_env("dc_microgrid_safe", split="val").unwrapped.task
    totals = {}
    for policy in ("rule_based", "random"):
        env = make_env("dc_microgrid_safe", split="val", num_envs=n)
        obs, _ = env.reset(seed=0, options={"day_id": days})
        rng = np.random.default_rng(0)
        vec, costs = np.zeros((n, 3)), np.zeros((n, 3))
        for _ in range(H):
            if policy == "rule_based":
                action = task.rule_based_action(obs.astype(np.float64))
            else:
                action = rng.uniform(
                    env.single_action_space.low, env.single_action_space.high, (n, 5)
                )
            obs, _, _, _, info = env.step(action)
            vec += info["reward_vector"]
            costs += info["constraint_costs"]
        totals[policy] = (vec, costs)
    rule_vec, rule_costs = totals["rule_based"]
    rand_vec, rand_costs = totals["random"]
    assert np.all(rule_vec.mean(axis=0) > rand_vec.mean(axis=0))  # energy, cost and carbon
    thresholds = np.array(
        [THRESHOLDS[k] for k in ("sla_violation", "overtemperature", "power_deficit")]
    )
    assert np.all(rule_costs <= thresholds), rule_costs  # every episode within every budget
    assert np.all(rand_costs.mean(axis=0) > thresholds)


def test_rule_based_policy_object_works_on_normalized_env():
    from powerzoo.benchmarks.evaluation import rollout
    from powerzoo.benchmarks.policies import RuleBasedPolicy

    env = make_env("dc_microgrid_safe", split="val", normalize=True)
    record = rollout(env, RuleBasedPolicy(env), day_id=3, seed=0, trace_keys=("reward_vector",))
    assert record["length"] == H and np.all(record["costs"] == 0.0)
    assert record["return"] == pytest.approx(
        (record["trace"]["reward_vector"] @ REWARD_WEIGHTS).sum()
    )


# ---- splits and stress tests -------------------------------------------------------------------
@pytest.mark.parametrize(
    "split", ["train", "val", "test", "heatwave", "low_renewable", "workload_shock"]
)
def test_splits_are_honoured(split):
    env = make_env("dc_microgrid", split=split, seed=0)
    allowed = {str(d) for d in DATES[split_day_indices(split)]}
    seen = {env.reset() and env.unwrapped.current_date() for _ in range(20)}
    assert seen <= allowed


def test_stress_splits_shift_their_inputs():
    def day_info(split, day_id):
        env = make_env("dc_microgrid_safe", split=split)
        env.reset(seed=0, options={"day_id": day_id})
        return [env.step(np.array([0.5, 0.2, 25.0, 0.0, 0.0]))[4] for _ in range(H)]

    # heatwave day 0 is test day 13 (7 May), the first day of a heat event
    assert split_day_indices("heatwave")[0] == split_day_indices("test")[13]
    base, low, shock = (day_info(s, 13) for s in ("test", "low_renewable", "workload_shock"))
    heat = day_info("heatwave", 0)
    assert all(h["temp_c"] >= b["temp_c"] for b, h in zip(base, heat, strict=True))
    assert max(h["temp_c"] - b["temp_c"] for b, h in zip(base, heat, strict=True)) > 4.0
    assert sum(h["cooling_mw"] for h in heat) > sum(
        b["cooling_mw"] for b in base
    )  # COP falls in the heat
    assert all(
        lo["pv_mw"] == pytest.approx(0.4 * b["pv_mw"]) for b, lo in zip(base, low, strict=True)
    )
    assert sum(b["pv_mw"] for b in base) > 0
    arrived_base = base[-1]["arrived_gpuh"] - base[0]["arrived_gpuh"]
    arrived_shock = shock[-1]["arrived_gpuh"] - shock[0]["arrived_gpuh"]
    np.testing.assert_allclose(arrived_shock, 2.0 * arrived_base)
    assert [b["temp_c"] for b in base] == [
        s["temp_c"] for s in shock
    ]  # weather as in the test split


# ---- bad input and determinism -------------------------------------------------------------------
def test_bad_input_raises_clear_errors():
    env = make_env("dc_microgrid", seed=0)
    with pytest.raises(
        ValueError, match=r"shape \(4,\), expected \(5,\) \(training_share, finetune_share"
    ):
        env.step(np.zeros(4))
    with pytest.raises(ValueError, match="NaN or inf"):
        env.step(np.array([0.5, 0.5, 25.0, np.nan, 0.0]))
    with pytest.raises(ValueError, match="NaN or inf"):
        make_env("dc_microgrid", normalize=True, seed=0).step(
            np.array([0, 0, 0, np.inf, 0], np.float32)
        )
    with pytest.raises(ValueError, match=r"day_id \[65\] out of range .* valid 0..64"):
        make_env("dc_microgrid", split="val").reset(options={"day_id": 65})
    with pytest.raises(
        ValueError, match="unknown split 'stress'; valid: train, val, test, heatwave"
    ):
        make_env("dc_microgrid", split="stress")
    with pytest.raises(TypeError, match="unknown parameter.*valid: .*grid_import_max_mw"):
        make_env("dc_microgrid", grid_import_mw=2.0)
    with pytest.raises(ValueError, match="initial_soc"):
        make_env("dc_microgrid", initial_soc=0.95)
    vec = make_env("dc_microgrid_safe", num_envs=4, seed=0)
    with pytest.raises(ValueError, match=r"shape \(4, 4\), expected \(4, 5\)"):
        vec.step(np.zeros((4, 4)))


def test_same_seed_same_trajectory_and_vector_matches_single():
    def run(seed):
        env = make_env("dc_microgrid", normalize=True, seed=seed)
        out = [env.reset(seed=seed)[0]]
        for _ in range(50):
            obs, r, *_ = env.step(env.action_space.sample())
            out.append(np.append(obs, r))
        return np.concatenate(out)

    np.testing.assert_array_equal(run(4), run(4))
    assert not np.array_equal(run(4), run(5))

    vec = make_env("dc_microgrid_safe", num_envs=3, normalize=True)
    vec.reset(seed=0, options={"day_id": [0, 7, 30]})
    singles = [make_env("dc_microgrid_safe", normalize=True) for _ in range(3)]
    for k, (env, day) in enumerate(zip(singles, (0, 7, 30), strict=True)):
        env.reset(seed=k, options={"day_id": day})
    actions = np.random.default_rng(0).uniform(-1, 1, (40, 3, 5)).astype(np.float32)
    for a in actions:
        v_obs, v_r, _, _, v_info = vec.step(a)
        for k, env in enumerate(singles):
            s_obs, s_r, _, _, _ = env.step(a[k])
            np.testing.assert_allclose(v_obs[k], s_obs, rtol=1e-6)
            assert v_r[k] == pytest.approx(s_r, rel=1e-12)


def test_env_pickles_without_the_task_step_tables_and_steps_identically():
    env = make_env("dc_microgrid", seed=0)
    env.reset(seed=0, options={"day_id": 3})
    env.step(env.action_space.sample())
    blob = pickle.dumps(env)
    # the task's step tables (several are views of the shared workload) are rebuilt on load,
    # not pickled
    assert len(blob) < 25e6
    clone = pickle.loads(blob)
    actions = np.random.default_rng(0).uniform(
        env.action_space.low, env.action_space.high, (H - 1, 5)
    )
    for action in actions.astype(np.float32):  # across every hour boundary and the end of the day
        first, second = env.step(action), clone.step(action)
        np.testing.assert_array_equal(first[0], second[0])
        assert first[1:4] == second[1:4]
        assert first[4].keys() == second[4].keys()
        for key, value in first[4].items():
            np.testing.assert_array_equal(value, second[4][key], err_msg=key)
    assert first[3]  # truncated at the horizon


# ---- workload data and device models -------------------------------------------------------------
def test_workload_is_deterministic_shaped_and_consistent():
    w = get_workload("base", 5)
    assert w is get_workload("base", 5)  # prepared once per process
    per_day = w.arrival_gpuh[: N_DAYS * H].reshape(N_DAYS, H, len(JOB_CLASSES)).sum(axis=(1, 2))
    kinds = day_types()
    assert per_day[kinds == 0].mean() > per_day[kinds == 1].mean() > per_day[kinds == 2].mean()
    utilisation = per_day[kinds == 0].mean() / (2048 * 24)
    assert 0.5 < utilisation < 0.7
    by_hour = w.arrival_gpuh[: N_DAYS * H].sum(axis=1).reshape(N_DAYS, 24, 12).sum(axis=(0, 2))
    assert by_hour[12:17].mean() > 1.3 * by_hour[0:5].mean()  # afternoon peak
    # deadlines: fine-tuning 1-4 h after arrival, never before the current hour's bucket
    t = np.tile(np.arange(H), N_DAYS)
    arrived = w.arrival_gpuh[: N_DAYS * H] > 0
    assert np.all(w.arrival_bucket[: N_DAYS * H][arrived[:, 1], 1] >= t[arrived[:, 1]] // 12)
    np.testing.assert_array_equal(w.arrival_cum_gpuh[:, :, -1].astype(np.float64), w.arrival_gpuh)
    assert w.arrival_cum_gpuh[-1].sum() == 0.0 and w.initial_queue_gpuh.shape == (
        N_DAYS + 1,
        2,
        N_BUCKETS,
    )
    shock = get_workload("workload_shock", 5)
    np.testing.assert_array_equal(shock.arrival_gpuh, 2.0 * w.arrival_gpuh)
    with pytest.raises(ValueError, match="unknown workload scenario"):
        get_workload("monsoon", 5)


def test_job_queue_is_earliest_deadline_first_and_conserves_work():
    q = np.array([[[2.0, 0.0, 3.0, 5.0]]])  # per bucket, one env, one class
    cum = np.cumsum(q, axis=2)
    cum2, served = serve_edf(cum, np.array([[4.0]]))
    assert served.tolist() == [[4.0]]
    np.testing.assert_allclose(per_bucket(cum2), [[[0.0, 0.0, 1.0, 5.0]]])
    dropped = drop_due(cum2, np.array([36]), 12)  # bucket 2 falls due at step 36
    np.testing.assert_allclose(dropped, [[1.0]])
    np.testing.assert_allclose(per_bucket(cum2), [[[0.0, 0.0, 0.0, 5.0]]])
    assert drop_due(cum2, np.array([37]), 12).tolist() == [[0.0]]
    due, required = queue_outlook(
        np.cumsum(q, axis=2),
        1.0 / np.array([[1.0, 2.0, 3.0, 4.0]]),
        np.array([1]),
        np.array([[5.0]]),
    )
    assert due.tolist() == [[2.0]] and required.tolist() == [[max(2.0, 2.0 / 2, 5.0 / 3, 5.0 / 4)]]


def test_cooling_and_zone_models():
    c = CoolingParams()
    cop = cooling_cop(c, np.array([10.0, 25.0, 35.0, 42.0]), np.full(4, 25.0))
    assert cop[0] == c.cop_max and np.all(np.diff(cop) < 0) and 3.0 < cop[-1] < 4.0
    assert (
        cooling_cop(c, np.array([35.0]), np.array([27.0]))[0]
        > cooling_cop(c, np.array([35.0]), np.array([20.0]))[0]
    )
    z = ZoneParams()
    # unsaturated plant: the zone relaxes to the setpoint with the controller's time constant
    temp, q = zone_step(
        z, np.array([26.0]), np.array([30.0]), np.array([24.0]), np.array([2.0]), 3.5, 5 / 60
    )
    assert temp[0] == pytest.approx(24.0 + 2.0 * np.exp(-0.5)) and q[0] > 2.0
    # undersized plant: the zone heats up at (heat - capacity) / C
    temp, q = zone_step(
        z, np.array([26.0]), np.array([26.0]), np.array([24.0]), np.array([2.0]), 1.0, 5 / 60
    )
    assert q[0] == 1.0 and temp[0] == pytest.approx(26.0 + 1.0 * (5 / 60) / 0.05)
    d = DieselParams()
    np.testing.assert_allclose(
        diesel_output_mw(d, np.array([0.0, 0.3, 0.4, 1.0, 2.5])), [0.0, 0.0, 0.75, 1.0, 2.5]
    )
