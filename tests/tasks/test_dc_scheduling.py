"""``dc_scheduling``: the dc_microgrid data centre on the 33-bus feeder (client APIs,
invariants, sizing, baselines)."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from helpers import step_rule_based
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import powerzoo  # noqa: F401  (registers the Gymnasium ids)
from powerzoo.benchmarks.evaluation import evaluate_days
from powerzoo.benchmarks.policies import make_baseline_policy
from powerzoo.devices.cooling import cooling_cop
from powerzoo.devices.gpu_cluster import it_power_mw
from powerzoo.rl import make_env
from powerzoo.tasks import make_task, task_spec
from powerzoo.tasks.datacentre.site import DCMicrogridParams
from powerzoo.tasks.dc_microgrid.rule import rule_based_action as dc_microgrid_rule
from powerzoo.tasks.dc_scheduling import DC_BUS, SLA_PENALTY_PER_GPUH

GRID_KEYS = {
    "is_safe",
    "pf_converged",
    "p_loss_mw",
    "feeder_p_mw",
    "feeder_q_mvar",
    "v_min_pu",
    "v_max_pu",
}
H = 48


@pytest.fixture(scope="module")
def task():
    return make_task("dc_scheduling", "test")


# ---- client APIs ------------------------------------------------------------------------------
def test_gymnasium_and_sb3_env_checkers_pass():
    gym_check_env(make_env("dc_scheduling", seed=0).unwrapped, skip_render_check=True)
    sb3_check_env(make_env("dc_scheduling", seed=0))
    sb3_check_env(make_env("dc_scheduling", seed=0, normalize=True))
    env = gym.make("powerzoo/DCScheduling-v0", split="val")
    obs, info = env.reset(seed=1)
    assert obs.shape == (17,) and env.action_space.shape == (3,) and GRID_KEYS <= set(info)


def test_spec_facts():
    spec = task_spec("dc_scheduling")
    assert spec.horizon == H and spec.step_minutes == 30 and spec.agents == ("agent",)
    assert spec.action.names == ("training_share", "finetune_share", "cooling_setpoint_c")
    assert spec.constraint_names == (
        "voltage_violation",
        "thermal_overload",
        "sla_violation",
        "overtemperature",
    )
    assert (
        spec.reward_terms == ("energy_cost", "sla_penalty")
        and spec.gym_id == "powerzoo/DCScheduling-v0"
    )
    assert "workload_shock" in spec.splits and "load_stress" in spec.splits


# ---- invariants ---------------------------------------------------------------------------------
def test_jobs_conserved_feeder_balanced_costs_non_negative_every_step(task):
    rng = np.random.default_rng(3)
    days = np.arange(0, 65, 11)
    state = task.reset(rng, days)
    low, high = task.spec.action.bounds()
    sla = np.zeros(days.size)
    for t in range(H):
        action = rng.uniform(low, high, (days.size, 3))
        if t % 7 == 0:
            action[:, :2] = 0.9  # shares summing above 1 are scaled down
        price = task.grid.price_per_mwh[task.grid.flat_index(state.day_id, state.t)]
        state, out = task.step(state, action, rng)
        info = out.info
        assert np.all(out.constraint_costs >= 0.0) and info["pf_converged"].all()
        # jobs: arrived = served + queued + dropped, per class (GPU-h)
        np.testing.assert_allclose(
            info["arrived_gpuh"],
            info["served_gpuh"] + info["queued_gpuh"] + info["dropped_gpuh"],
            rtol=1e-9,
            atol=1e-6,
        )
        assert np.all(out.action_applied[:, :2].sum(axis=1) <= 1.0 + 1e-12)
        # the data centre is a load at its bus; head power = net load + losses
        np.testing.assert_allclose(info["dc_load_mw"], info["it_mw"] + info["cooling_mw"])
        np.testing.assert_allclose(
            info["feeder_p_mw"], info["net_load_mw"] + info["p_loss_mw"], atol=1e-6
        )
        base = task.grid.bus_loads(info["demand_pu"])[0].sum(axis=1)
        np.testing.assert_allclose(info["net_load_mw"], base + info["dc_load_mw"])
        # reward = -(price x facility MWh) - 10 $/GPU-h x SLA violation
        np.testing.assert_allclose(out.reward_terms[:, 0], -price * info["dc_load_mw"] * 0.5)
        np.testing.assert_allclose(
            out.reward_terms[:, 1], -SLA_PENALTY_PER_GPUH * out.constraint_costs[:, 2]
        )
        np.testing.assert_allclose(out.reward, out.reward_terms.sum(axis=1))
        sla += out.constraint_costs[:, 2]
    assert sla.max() > 0.0  # random shares drop work: measured, not hidden
    np.testing.assert_allclose(
        sla, state.dropped_gpuh.sum(axis=1) + out.info["behind_schedule_gpuh"].sum(axis=1)
    )


def test_data_centre_is_the_dc_microgrid_model(task):
    """Same IT power law and plant COP as dc_microgrid's devices,
    and the GPUs busy never exceed those allocated."""
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([5, 40]))
    state, out = task.step(state, np.array([[0.5, 0.2, 25.0], [0.1, 0.1, 30.0]]), rng)
    info, p = out.info, task.params
    busy = info["gpus_busy"]
    assert np.all(busy <= info["gpus_allocated"] + 1e-9)
    want = it_power_mw(p.cluster, info["gpus_allocated"].sum(axis=1), busy.sum(axis=1))
    np.testing.assert_allclose(info["it_mw"], want, rtol=1e-12)
    assert np.all(cooling_cop(p.cooling, info["temp_c"], np.array([25.0, 30.0])) > 1.0)


def test_rule_is_dc_microgrid_rule_for_compute_and_cooling(task):
    rng = np.random.default_rng(1)
    state = task.reset(rng, np.array([2, 30, 60]))
    for _ in range(9):
        state, _ = task.step(state, task.rule_based_action(task.observe(state)), rng)
    obs = task.observe(state)
    fields = dict(zip(task.spec.observation.names, obs.T.astype(np.float64), strict=True))
    n = len(fields["zone_temp_c"])
    fields.update(
        temp_c=fields["temp_c"],
        pv_cf=np.zeros(n),
        soc=np.full(n, 0.5),
        diesel_on=np.zeros(n),
        diesel_hold_h=np.zeros(n),
    )
    want = dc_microgrid_rule(DCMicrogridParams(), fields, 0.5)[:, :3]
    np.testing.assert_array_equal(task.rule_based_action(obs), want)


# ---- sizing: the data centre moves the feeder's voltages -----------------------------------------
def test_sizing_full_dc_at_peak_leaves_the_band_parked_dc_does_not(task):
    peak = np.array([0.99])
    parked, _ = task._flow(peak, np.array([0.1]), None)
    full, _ = task._flow(
        peak, np.array([task.params.cluster.p_max_mw * 1.25]), None
    )  # all busy + cooling
    assert parked.info["v_min_pu"][0] >= 0.95 and parked.costs[0].sum() == 0.0
    assert full.info["v_min_pu"][0] < 0.94 and full.costs[0, 0] > 0.1 and full.costs[0, 1] > 0.0
    assert full.vm_pu[0, DC_BUS] < parked.vm_pu[0, DC_BUS] - 0.02


# ---- baselines ----------------------------------------------------------------------------------
def test_oracle_beats_rule_beats_random_and_keeps_the_band_better():
    days = [26, 29, 32, 35]  # July test days: the feeder peaks
    res = {}
    for policy in ("random", "rule_based", "oracle"):
        env = make_env("dc_scheduling", split="test", seed=0)
        res[policy] = evaluate_days(make_baseline_policy(policy, env, seed=0), env, days, seed=0)
    assert (
        res["oracle"]["mean_return"]
        >= res["rule_based"]["mean_return"]
        > res["random"]["mean_return"]
    )
    rule, oracle = res["rule_based"]["mean_costs"], res["oracle"]["mean_costs"]
    assert (
        rule["sla_violation"] == 0.0
        and oracle["sla_violation"] < 1.0
        and oracle["overtemperature"] == 0.0
    )
    assert rule["voltage_violation"] > 0.1  # serving work as it comes leaves the band at the peaks
    assert oracle["voltage_violation"] < 0.25 * rule["voltage_violation"]
    assert res["random"]["mean_costs"]["sla_violation"] > 100.0


def test_oracle_plan_rows_before_the_current_step_are_nan(task):
    rng = np.random.default_rng(0)
    state = step_rule_based(task, task.reset(rng, np.array([7])), 40, rng)
    plan = task.oracle_plan(state)
    assert (
        plan.shape == (1, H, 3) and np.isnan(plan[0, :40]).all() and np.isfinite(plan[0, 40:]).all()
    )


# ---- splits, bad input, determinism -------------------------------------------------------------
def test_splits_are_honoured():
    shock, base = make_task("dc_scheduling", "workload_shock"), make_task("dc_scheduling", "test")
    assert shock.n_days == base.n_days
    assert shock.workload.arrival_gpuh.sum() == pytest.approx(
        2.0 * base.workload.arrival_gpuh.sum()
    )
    with pytest.raises(ValueError, match="out of range"):
        make_env("dc_scheduling", split="val", seed=0).reset(options={"day_id": 10_000})


def test_bad_input_gives_clear_errors():
    with pytest.raises(TypeError, match="unknown parameter"):
        make_task("dc_scheduling", "train", n_gpus=512)
    with pytest.raises(ValueError, match="dc_bus"):
        make_task("dc_scheduling", "train", dc_bus=0)
    with pytest.raises(ValueError, match="dc_bus"):
        make_task("dc_scheduling", "train", dc_bus=33)
    with pytest.raises(ValueError, match="load_scale"):
        make_task("dc_scheduling", "train", load_scale=-1.0)
    env = make_env("dc_scheduling", seed=0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="expected"):
        env.step(np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.array([0.5, np.nan, 25.0], np.float32))
    _, _, _, _, info = env.step(
        np.array([1.5, 0.0, 40.0], np.float32)
    )  # out of bounds: clipped, flagged
    assert info["action_clipped"] and info["action_applied"][2] == 32.0


def test_other_bus_and_penalized_preset():
    env = make_env("dc_scheduling", seed=0, reward="penalized", dc_bus=17)
    env.reset(seed=0, options={"day_id": 3})
    for _ in range(H):
        _, reward, _, trunc, info = env.step(np.array([1.0, 0.0, 26.0], np.float32))
        penalty = (
            1000.0 * info["cost_voltage_violation"]
            + 2000.0 * info["cost_thermal_overload"]  # $ per MVAh
            + 100.0 * info["cost_overtemperature"]
        )
        assert reward == pytest.approx(info["task_reward"] - penalty)
    assert (
        trunc and info["cost_voltage_violation"] > 0.0
    )  # the whole cluster at the trunk's end: far out of band


def test_same_seed_same_trajectory_and_vector_matches_single():
    def run():
        env = make_env("dc_scheduling", seed=5, normalize=True)
        env.reset(seed=5)
        rows = []
        for _ in range(H):
            obs, reward, *_ = env.step(env.action_space.sample())
            rows.append(np.append(obs, reward))
        return np.asarray(rows)

    np.testing.assert_array_equal(run(), run())
    vec = make_env("dc_scheduling", num_envs=3, normalize=True)
    vec.reset(seed=0, options={"day_id": [0, 7, 30]})
    singles = [make_env("dc_scheduling", normalize=True) for _ in range(3)]
    for k, (env, day) in enumerate(zip(singles, (0, 7, 30), strict=True)):
        env.reset(seed=k, options={"day_id": day})
    for a in np.random.default_rng(0).uniform(-1, 1, (H, 3, 3)).astype(np.float32):
        v_obs, v_r, *_ = vec.step(a)
        for k, env in enumerate(singles):
            s_obs, s_r, *_ = env.step(a[k])
            np.testing.assert_allclose(v_obs[k], s_obs, rtol=1e-6, atol=1e-6)
            assert v_r[k] == pytest.approx(s_r, rel=1e-9, abs=1e-9)
