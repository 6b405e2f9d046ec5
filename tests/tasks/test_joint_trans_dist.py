"""The coupled transmission-distribution tasks: the boundary, the price rule, the settlement, the
adapters and the baselines."""

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from powerzoo.devices.battery import WEAR_COST_PER_MWH, settlement_value
from powerzoo.devices.inverter_battery import inverter_battery_step
from powerzoo.physics.dc_opf import solve_dc_opf
from powerzoo.physics.redispatch import merit_order_dispatch
from powerzoo.rl import make_env
from powerzoo.tasks import make_task, task_spec
from powerzoo.tasks.joint_trans_dist import merit_order_price


@pytest.fixture(scope="module")
def task():
    return make_task("joint_trans_dist", "test")


def _random_rollout(task, steps, seed):
    rng = np.random.default_rng(seed)
    lo, hi = task.spec.action.bounds()
    state = task.reset(rng, np.arange(6) % task.n_days)
    outs = []
    for _ in range(steps):
        action = rng.uniform(lo, hi, size=(6, lo.size))
        state, out = task.step(state, action, rng)
        outs.append(out)
    return outs


@pytest.mark.parametrize("name", ["joint_trans_dist", "joint_trans_dist_7d"])
def test_parallel_api_test_passes(name):
    parallel_api_test(make_env(name, framework="pettingzoo", seed=0), num_cycles=60)


def test_spec_groups_and_observation_modes():
    spec = task_spec("joint_trans_dist")
    assert [g.name for g in spec.groups] == ["transmission", "distribution"]
    assert spec.groups[0].agents == tuple(f"gen_{i}" for i in range(5))
    assert spec.groups[1].agents == ("battery_0", "battery_1", "battery_2")
    assert spec.constraint_names == (
        "thermal_overload",
        "power_imbalance",
        "voltage_violation",
        "feeder_thermal_overload",
        "soc_violation",
    )
    week = task_spec("joint_trans_dist_7d")
    assert week.horizon == 336
    assert week.cost_thresholds["voltage_violation"] == pytest.approx(7 * 0.2)
    env = make_env("joint_trans_dist", framework="pettingzoo", obs_mode="local_plus_forecast")
    obs, _ = env.reset(seed=1)
    assert {o.shape for o in obs.values()} == {(len(env.observation_fields("gen_0")),)}


def test_the_boundary_agrees_on_both_sides_every_step(task):
    """The head power of the feeders' exact AC flow (x their copies) is the load added at bus 3
    in the same step's DC flow, and the boundary is settled at bus 3's day-ahead LMP."""
    rng = np.random.default_rng(3)
    days = np.arange(6) % task.n_days
    state = task.reset(rng, days)
    lo, hi = task.spec.action.bounds()
    for t in range(12):
        state, out = task.step(state, rng.uniform(lo, hi, size=(6, lo.size)), rng)
        info = out.info
        np.testing.assert_allclose(info["boundary_load_mw"], info["feeder_p_mw"], atol=1e-9)
        flat = task.flat_index(days, np.full(6, t))
        lmp = solve_dc_opf(task.case, task.lmp.loads(flat), soft_line_penalty=2000.0)
        np.testing.assert_allclose(info["boundary_price_per_mwh"][:, 0], lmp.lmp_per_mwh[:, 3])
        np.testing.assert_allclose(
            info["imbalance_mw"], info["total_generation_mw"] - info["total_load_mw"], atol=1e-9
        )


def test_the_boundary_lmp_carries_the_congestion(task):
    """When branch 3-4 (240 MW) binds, bus 3's LMP is above the reference price by the
    congestion component and above bus 4's; when nothing binds every bus has one price."""
    steps = np.arange(task.lmp.steps * 6)
    loads = task.lmp.loads(steps)
    opf = solve_dc_opf(task.case, loads, soft_line_penalty=2000.0)
    lmp = task.lmp.at(steps)
    np.testing.assert_allclose(lmp, opf.lmp_per_mwh)
    binds = np.abs(opf.branch_mu_per_mwh).max(axis=1) > 1e-6
    assert binds.any() and (~binds).any()
    assert np.all(lmp[binds, 3] > lmp[binds, 4] + 1.0)
    np.testing.assert_allclose(lmp[~binds], lmp[~binds, :1] * np.ones((1, 5)))
    # more flexibility drawing at bus 3 at a congested step raises its LMP further
    k = np.flatnonzero(binds)[0]
    more = loads[k : k + 1].copy()
    more[0, 3] += 50.0
    assert task.lmp.solve(more)[0, 3] >= lmp[k, 3]


def test_a_second_task_gets_the_kept_lmps_of_the_same_loads_and_other_loads_are_solved(task):
    """A second task of the same configuration gets the first one's day-ahead LMPs without a
    DC-OPF (an SB3 vector env's sub-envs, a second env on the same days), equal to a fresh
    solve to the last bit; another penalty, case or load vector is solved, not looked up."""
    from powerzoo.tasks.joint_trans_dist import boundary

    other = make_task("joint_trans_dist", "test")
    np.testing.assert_array_equal(other.tou_plan, task.tou_plan)
    steps = np.arange(task.lmp.steps) + 3 * task.lmp.steps
    loads = task.lmp.loads(steps)
    penalty = task.params.overload_penalty_per_mwh
    kept = boundary.day_ahead_lmp(task.case, loads, penalty)
    assert boundary.day_ahead_lmp(other.case, loads.copy(), penalty) is kept
    assert not kept.flags.writeable
    fresh = solve_dc_opf(task.case, loads, soft_line_penalty=penalty).lmp_per_mwh
    assert fresh.tobytes() == kept.tobytes()
    assert boundary.day_ahead_lmp(task.case, loads, penalty + 1.0) is not kept
    nudged = loads.copy()
    nudged[0, 3] = np.nextafter(nudged[0, 3], np.inf)
    assert boundary.day_ahead_lmp(task.case, nudged, penalty) is not kept
    case_118 = make_task("joint_trans_dist_118", "test").case
    assert boundary._case_digest(case_118) != boundary._case_digest(task.case)


def test_a_days_lmps_do_not_depend_on_the_days_asked_for_with_it(monkeypatch):
    """Each calendar day is one DC-OPF call (its rows warm-start from each other, never from
    another day's), so a day asked for with others equals the day asked for alone, to the bit."""
    from powerzoo.tasks.joint_trans_dist import boundary

    monkeypatch.setattr(boundary, "_lmp_memo", type(boundary._lmp_memo)())
    together = make_task("joint_trans_dist", "test").lmp
    steps = together.steps
    together.ensure(np.array([5 * steps, 6 * steps + 7]))
    boundary._lmp_memo.clear()  # nothing kept: the day is solved again, alone
    alone = make_task("joint_trans_dist", "test").lmp
    alone.ensure(np.array([6 * steps]))
    assert sorted(together._days) == [5, 6] and sorted(alone._days) == [6]
    assert alone._days[6].tobytes() == together._days[6].tobytes()


def test_the_head_voltage_moves_with_the_transmission_state(task):
    """The head voltage falls with the system's load (the Thevenin equivalent at bus 3) and
    with the feeders' own draw; batteries discharging raise it."""
    model = task.boundary_model
    assert model.thevenin.short_circuit_mva[0] > 1000.0  # a strong 230 kV bus
    draw = np.full((3, 1), 2.0)
    low, mid, high = model.head_voltage_pu(np.array([0.45, 0.7, 0.95]), draw)[:, 0]
    assert low > mid + 0.005 and mid > high + 0.005
    more = model.head_voltage_pu(np.array([0.7]), np.array([[3.0]]))[0, 0]
    assert more < mid
    flat = task.flat_index(np.zeros(2, np.int64), np.array([0, 36]))  # night, evening peak
    heads = task.head_voltage_pu(flat, np.zeros((2, 3)))[:, 0]
    assert heads[0] > heads[1] + 0.01
    discharging = task.head_voltage_pu(flat[1:], np.full((1, 3), 0.5))[0, 0]
    assert discharging > heads[1]


def test_head_power_is_the_exact_flow_of_loads_less_batteries(task):
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([0, 1]))
    action = np.zeros((2, 8))
    action[:, :5] = task.case.gen_pmax_mw / 2
    action[:, 5:] = [[0.5, -0.5, 0.2], [-0.3, 0.0, 0.4]]
    _, out = task.step(state, action, rng)
    grid = task.grids[0]
    demand = task.demand.take(task.flat_index(state.day_id, state.t))
    p, q = grid.bus_loads(demand)
    p[:, [16, 23, 31]] -= out.info["battery_p_mw"]
    exact = grid.solve(p, q, head_vm_pu=out.info["head_vm_pu"][:, 0])
    copies = task.feeders[0].copies
    np.testing.assert_allclose(
        out.info["feeder_p_mw"][:, 0], copies * exact.info["feeder_p_mw"], atol=1e-9
    )
    assert np.all(out.info["feeder_p_mw"][:, 0] > copies * p.sum(axis=1))  # losses included
    assert np.all(out.info["head_vm_pu"] != 1.0)


def test_merit_order_price_rule():
    from powerzoo.tasks.transmission import congestion_ready_case, marginal_cost_per_mwh

    case = congestion_ready_case("case5")  # units 600 MW at 10, 40 at 14, 170 at 15, 520 at 30
    mc = marginal_cost_per_mwh(case)
    got = merit_order_price(case, mc, np.array([0.0, 600.0, 600.1, 800.0, 900.0, 1330.1, 2e3]), 1e3)
    np.testing.assert_array_equal(got, [10.0, 10.0, 14.0, 15.0, 30.0, 40.0, 1000.0])


def test_same_seed_same_trajectory():
    def run():
        env = make_env("joint_trans_dist", num_envs=3, seed=5)
        rng = np.random.default_rng(2)
        obs, _ = env.reset(seed=5)
        rows = []
        for _ in range(50):
            action = {
                a: rng.uniform(env.action_space(a).low, env.action_space(a).high, (3, 1))
                for a in env.possible_agents
            }
            obs, reward, *_ = env.step(action)
            rows.append(np.concatenate([np.ravel(obs[a]) for a in env.possible_agents]))
            rows.append(np.asarray([reward[a] for a in env.possible_agents]).ravel())
        return np.concatenate(rows)

    np.testing.assert_array_equal(run(), run())


def test_bad_input_gives_clear_errors(task):
    with pytest.raises(TypeError, match="unknown parameter"):
        make_task("joint_trans_dist", "test", feeder_buses=3)
    with pytest.raises(ValueError, match="power_mw must be > 0"):
        make_task("joint_trans_dist", "test", power_mw=0.0)
    with pytest.raises(ValueError, match="out of range"):
        task.reset(np.random.default_rng(0), np.array([10_000]))
    with pytest.raises(ValueError, match="unknown obs_mode"):
        task.observe(task.reset(np.random.default_rng(0), np.array([0])), "nonsense")


def _team_return(task, day, battery_plan):
    """Team return of one episode with the generators balancing the exact load by merit order
    (no imbalance) and the batteries requesting ``battery_plan`` [H, 3]."""
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([day]))
    total, terms = 0.0, 0.0
    for t in range(task.horizon):
        flat = task.flat_index(state.day_id, state.t)
        demand = task.demand.take(flat)
        bat = battery_plan[t][None, :]
        # what the batteries will deliver, then the exact head power they cause
        applied = inverter_battery_step(task.battery, state.soc, bat, np.zeros((1, 3)), 0.5).p_mw
        flows, _ = task.feeder_flows(flat, applied, state.v_complex_pu)
        heads = np.stack([f.info["feeder_p_mw"] for f in flows], axis=1) * task.copies
        load = task.transmission_loads(demand, heads).sum(axis=1)
        gen = merit_order_dispatch(task.case, load, task.marginal_cost)
        state, out = task.step(state, np.concatenate([gen, bat], axis=1), rng)
        assert abs(out.info["imbalance_mw"][0]) < 1e-6
        total += float(out.reward[0])
        terms = out.reward_terms[0]
    return total, terms


def test_selling_the_initial_energy_is_not_a_free_lunch(task):
    """Emptying the batteries into the grid saves generation at the price of the hour, but the
    settlement buys the energy back at the day's mean price plus wear and losses."""
    idle = np.zeros((task.horizon, 3))
    dump = idle.copy()
    dump[:4] = 0.5  # four half-hours at full power: 1 MWh asked of each 0.8 MWh surplus
    idle_return, idle_terms = _team_return(task, 0, idle)
    dump_return, dump_terms = _team_return(task, 0, dump)
    settle = task.spec.reward_terms.index("battery_settlement")
    assert idle_terms[settle] == 0.0  # idle batteries settle nothing
    assert dump_terms[settle] < 0.0  # the emptied batteries pay for their deficit
    m = float(task.settlement_price(np.array([0]))[0, 0])
    stored = (0.1 - 0.5) * task.params.energy_mwh  # each battery ends at its floor
    one = settlement_value(np.array([stored]), m, 0.95, 0.95, WEAR_COST_PER_MWH)[0]
    expected = 3 * task.feeders[0].copies * one
    assert dump_terms[settle] == pytest.approx(expected)
    assert dump_return < idle_return


def test_baselines_keep_their_order_on_a_test_day():
    from powerzoo.benchmarks.evaluation import evaluate_days
    from powerzoo.benchmarks.policies import make_baseline_policy

    env = make_env("joint_trans_dist", split="test", seed=0)
    returns, costs = {}, {}
    for name in ("random", "rule_based", "oracle"):
        result = evaluate_days(make_baseline_policy(name, env), env, day_ids=[1, 5], seed=0)
        returns[name] = result["mean_return"]
        costs[name] = result["mean_costs"]
    assert returns["random"] < returns["rule_based"] - 1e5
    # the oracle holds the feeder's voltage band (a few $ of wear) where the rule does not
    assert returns["oracle"] >= returns["rule_based"] - 20.0
    assert costs["oracle"]["voltage_violation"] <= 0.2
    assert costs["oracle"]["power_imbalance"] < 1e-2


def test_the_joint_oracle_beats_the_separate_plans_and_idle_flexibility():
    """Transmission first then the feeders at its LMPs (price takers moving 180 MW) costs more
    than the joint plan by over 1 % of the system's cost, and the flexibility's use by the
    joint plan saves over 0.5 % against leaving it idle."""
    from powerzoo.benchmarks.evaluation import evaluate_days
    from powerzoo.benchmarks.policies import make_baseline_policy

    env = make_env("joint_trans_dist", split="test", seed=0)
    returns = {}
    for name in ("oracle", "separate", "flex_idle"):
        result = evaluate_days(make_baseline_policy(name, env), env, day_ids=[8], seed=0)
        returns[name] = result["mean_return"]
        assert result["mean_costs"]["voltage_violation"] <= 0.2 or name == "flex_idle"
    oracle = returns["oracle"]
    assert oracle - returns["separate"] > 0.01 * abs(returns["separate"])
    assert oracle - returns["flex_idle"] > 0.005 * abs(returns["flex_idle"])
