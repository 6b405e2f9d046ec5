"""dc_microgrid oracle: the perfect-foresight MILP plan, executed in the env."""

import numpy as np
import pytest
from helpers import run_python, step_rule_based

from powerzoo.benchmarks.evaluation import rollout
from powerzoo.benchmarks.policies import OraclePolicy, RandomPolicy, RuleBasedPolicy
from powerzoo.rl import make_env
from powerzoo.tasks.dc_microgrid import (
    HORIZON,
    PENALTIES,
    REWARD_WEIGHTS,
    SETPOINT_MIN_C,
    DCMicrogrid,
)
from powerzoo.tasks.dc_microgrid.oracle import ORACLE_SETPOINT_C, solve_day_plan


def play(task, state, actions, rng):
    """Step ``task`` from ``state`` through float32 ``actions`` [S,
    5]; return (return, costs, infos)."""
    ret, costs, infos = 0.0, np.zeros(3), []
    for action in actions.astype(np.float32).astype(np.float64):
        state, out = task.step(state, action[None], rng)
        ret += float(out.reward[0])
        costs += out.constraint_costs[0]
        infos.append(out.info)
    return ret, costs, infos


def plan_from(task, state):
    return task.oracle_day_plan(state, 0)


@pytest.fixture(scope="module")
def test_task():
    return DCMicrogrid("test")


@pytest.mark.parametrize(
    ("day", "task_kwargs"),
    [
        (61, {}),
        (0, {}),
        (4, {"grid_import_max_mw": 0.0}),
    ],  # 61: 12 December, the coldest test midnight (-2.6 deg C), and the diesel runs; islanded
    # on day 4 (its MILP solves in about 4 s; day 9's took 20 s)
)
def test_plan_forecasts_the_env_return_and_violates_nothing(day, task_kwargs):
    test_task = DCMicrogrid("test", **task_kwargs)
    rng = np.random.default_rng(0)
    state = test_task.reset(rng, np.array([day]))
    plan = plan_from(test_task, state)
    assert "Optimal" in plan.status
    ret, costs, infos = play(test_task, state, plan.actions, rng)
    # the MILP is the env's model: its objective is the return the env pays, to round-off
    assert ret == pytest.approx(plan.predicted_return, rel=1e-5)
    np.testing.assert_array_equal(costs, 0.0)
    zone = np.array([i["zone_temp_c"][0] for i in infos])
    # to a few uK: where the plant idles (cooling clipped at zero on a cold night with the
    # cluster parked) the zone drifts below the plan's trajectory by the envelope's losses
    np.testing.assert_allclose(zone, plan.predicted_zone_temp_c, atol=1e-5)
    # the env serves, earliest-deadline-first, the work the plan allocates GPUs for (up to the
    # plan's share margin of 0.001 GPUs a step, which, served over the hours a bucket waits,
    # runs its queue dry a little earlier)
    busy = np.array([i["gpus_busy"][0] for i in infos])
    gpus = plan.actions[:, :2] * test_task.params.cluster.n_gpus
    np.testing.assert_allclose(busy, gpus, atol=0.25)
    # the diesel (day 61 needs it) runs and rests an hour at least, with a start cost each time
    on = np.array([i["diesel_mw"][0] > 0 for i in infos])
    edges = np.flatnonzero(np.diff(on.astype(int))) + 1
    assert np.all(np.diff(edges) >= 12)  # inner runs and rests
    assert (day != 61 or on.any()) and sum(int(i["diesel_started"][0]) for i in infos) <= 12


def test_plan_actions_respect_device_limits(test_task):
    state = test_task.reset(np.random.default_rng(0), np.array([3]))
    actions = plan_from(test_task, state).actions
    p = test_task.params
    assert actions.shape == (HORIZON, 5)
    assert np.all(actions[:, :2] >= 0.0) and np.all(actions[:, :2].sum(axis=1) <= 1.0 + 1e-12)
    np.testing.assert_array_equal(actions[:, 2], ORACLE_SETPOINT_C)
    assert np.all(np.abs(actions[:, 3]) <= p.battery.power_max_mw + 1e-9)
    diesel = actions[:, 4]
    assert np.all(
        (diesel == 0.0) | ((diesel >= p.diesel.p_min_mw) & (diesel <= p.diesel.rated_mw + 1e-9))
    )


def test_plan_from_the_middle_of_an_episode(test_task):
    rng = np.random.default_rng(1)
    # day 3: the rest-of-day MILP solves in 0.5 s (day 10's took 8 s)
    state = step_rule_based(test_task, test_task.reset(rng, np.array([3])), 100, rng)
    plans = test_task.oracle_plan(state)
    assert plans.shape == (1, HORIZON, 5)
    assert np.isnan(plans[0, :100]).all() and np.isfinite(plans[0, 100:]).all()
    plan = plan_from(test_task, state)
    ret, costs, _ = play(test_task, state, plans[0, 100:], rng)
    assert ret == pytest.approx(plan.predicted_return, rel=1e-5)
    np.testing.assert_array_equal(costs, 0.0)


def test_plan_holds_a_diesel_started_before_it_for_its_minimum_run():
    task = DCMicrogrid("test")
    rng = np.random.default_rng(0)
    # a mild day that needs no diesel; it is started for 3 steps first, so the plan inherits a
    # running set that must run 9 more steps
    state = task.reset(rng, np.array([40]))
    for _ in range(3):
        state, _ = task.step(state, np.array([[0.3, 0.1, 26.0, 0.0, 1.0]]), rng)
    assert state.diesel_on[0] and state.diesel_steps[0] == 3
    plan = plan_from(task, state)
    ret, costs, infos = play(task, state, plan.actions, rng)
    assert ret == pytest.approx(plan.predicted_return, rel=1e-5)
    np.testing.assert_array_equal(costs, 0.0)
    on = np.array([i["diesel_mw"][0] > 0 for i in infos])
    assert on[:9].all() and not on[9:].any()  # held for its minimum run, then stopped


def test_plan_values_the_battery_energy_left_at_the_end():
    task = DCMicrogrid("test")
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([6]))
    plan = plan_from(task, state)
    ret, _, infos = play(task, state, plan.actions, rng)
    assert ret == pytest.approx(plan.predicted_return, rel=1e-5)
    assert all(i["storage_settlement"][0] == 0.0 for i in infos[:-1])
    # With the carbon weight, a MWh discharged also saves the grid's carbon (51 $/t x up to 0.45
    # t/MWh), which the settlement's buy-back does not charge: at 7.5 $/MWh wear that beats the
    # buy-back and the plan drains the battery (SOC 0.1 on test day 6). The settlement itself is
    # shown on cost alone (carbon weight 0): there the best sale of day 6, eta_d (40.4 - 7.5) =
    # 31.2 $ per MWh stored (its highest price 40.4 $/MWh), is below the buy-back at its mean
    # price 26.6, (26.6 + 7.5) / eta_c = 35.9 $/MWh: selling the 1.6 MWh the battery starts with
    # above its floor does not pay, and the plan keeps it.
    weights = np.array([*REWARD_WEIGHTS[:2], 0.0])
    state = task.reset(np.random.default_rng(0), np.array([6]))
    plan = solve_day_plan(
        task.params,
        task.day_foresight(state, 0),
        task.spec.dt_h,
        weights,
        PENALTIES,
        setpoint_min_c=SETPOINT_MIN_C,
    )
    _, costs, infos = play(task, state, plan.actions, rng)
    reward_vector = np.array([i["reward_vector"][0] for i in infos])
    ret = float((reward_vector @ weights).sum() - costs @ PENALTIES)
    assert ret == pytest.approx(plan.predicted_return, rel=1e-5)
    settlement = infos[-1]["storage_settlement"][0]
    assert infos[-1]["soc"][0] >= 0.5 - 1e-6 and settlement >= -1e-6


def test_overloaded_cluster_drops_the_work_the_plan_gives_up():
    task = DCMicrogrid("workload_shock")  # about 120 % utilisation: not every deadline can be met
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([1]))  # a Monday
    plan = plan_from(task, state)
    ret, costs, _ = play(task, state, plan.actions, rng)
    assert costs[0] > 1000.0  # GPU-h dropped
    assert ret == pytest.approx(plan.predicted_return, rel=1e-5)


def test_hot_zone_is_cooled_down_as_fast_as_the_plant_allows():
    task = DCMicrogrid("test", initial_zone_temp_c=35.0)
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([0]))
    plan = plan_from(task, state)
    setpoint, zone = plan.actions[:, 2], plan.predicted_zone_temp_c
    n_hot = int(np.sum(zone > ORACLE_SETPOINT_C + 1e-9))  # steps ending above the oracle's setpoint
    assert 0 < n_hot < 6
    assert np.all(np.diff(zone[: n_hot + 1]) < 0.0) and np.all(setpoint <= ORACLE_SETPOINT_C)
    assert (
        setpoint[n_hot] < ORACLE_SETPOINT_C - 0.5
    )  # the step that lands on it needs a lower setpoint
    np.testing.assert_allclose(setpoint[n_hot + 1 :], ORACLE_SETPOINT_C, atol=1e-9)
    np.testing.assert_allclose(zone[n_hot:], ORACLE_SETPOINT_C, atol=1e-6)
    ret, costs, infos = play(task, state, plan.actions, rng)
    assert ret == pytest.approx(plan.predicted_return, rel=1e-5)
    # the plant kept up (to the share margin's extra heat while it runs at capacity)
    np.testing.assert_allclose([i["zone_temp_c"][0] for i in infos], zone, atol=1e-4)
    # K h above 27 deg C while cooling down: holding 26.9 deg C from the start gives 0.95
    assert 0.0 < costs[1] < 0.8


def test_undersized_cooling_plant_still_gets_a_plan():
    task = DCMicrogrid("test", cooling_capacity_mw=0.5)
    state = task.reset(np.random.default_rng(0), np.array([0]))
    actions = plan_from(task, state).actions
    assert np.isfinite(actions).all()


@pytest.mark.parametrize(
    ("task", "normalize"), [("dc_microgrid", False), ("dc_microgrid_safe", True)]
)
def test_oracle_beats_rule_beats_random(task, normalize):
    env = make_env(task, split="test", normalize=normalize)
    policies = {
        "random": RandomPolicy(env.action_space, seed=0),
        "rule_based": RuleBasedPolicy(env),
        "oracle": OraclePolicy(env),
    }
    for day in (1, 40):
        rec = {name: rollout(env, pol, day_id=day, seed=0) for name, pol in policies.items()}
        assert rec["oracle"]["return"] > rec["rule_based"]["return"] > rec["random"]["return"]
        np.testing.assert_array_equal(rec["oracle"]["costs"], 0.0)
        assert policies["oracle"].fallback_steps == 0


def test_building_and_stepping_the_env_does_not_import_the_solver():
    # scipy.optimize adds ~0.3 s and ~40 MB to make_env; only a plan needs it
    code = (
        "import sys; from powerzoo.rl import make_env; "
        "env = make_env('dc_microgrid'); env.reset(seed=0); "
        "env.step(env.action_space.sample()); print('scipy.optimize' in sys.modules)"
    )
    out = run_python(code, check=True)
    assert out.stdout.strip() == "False"


def test_setpoint_reaching_lands_the_zone_on_its_target():
    from powerzoo.devices.thermal_zone import ZoneParams, setpoint_reaching, zone_step

    zone, dt_h = ZoneParams(), 5.0 / 60.0
    temp = np.array([24.0, 27.5, 31.0])
    setpoint = setpoint_reaching(zone, temp, 26.0, dt_h)
    new_temp, q = zone_step(zone, temp, np.full(3, 30.0), setpoint, np.full(3, 2.5), np.inf, dt_h)
    np.testing.assert_allclose(new_temp, 26.0, atol=1e-12)
    assert np.all(q > 0.0)  # the plant was not clipped at zero, so the landing is exact
