"""``joint_trans_dist_118``: case118 by control-area agents, three feeder areas in its load
pockets with one DSO agent each; the boundary of every feeder (congested LMPs, tap-changer head
voltages), the padded actions, the adapters and the baselines."""

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from powerzoo.physics.areas import control_areas
from powerzoo.rl import make_env
from powerzoo.tasks import make_task, task_spec

TASK = "joint_trans_dist_118"


@pytest.fixture(scope="module")
def task():
    return make_task(TASK, "test")


def _random_rollout(task, steps, seed, batch=4):
    rng = np.random.default_rng(seed)
    lo, hi = task.spec.action.bounds()
    state = task.reset(rng, np.arange(batch) % task.n_days)
    for _ in range(steps):
        action = rng.uniform(lo, hi, size=(batch, lo.size))
        demand = task.demand.take(task.flat_index(state.day_id, state.t))
        state, out = task.step(state, action, rng)
        yield demand, out


def test_parallel_api_test_passes():
    parallel_api_test(make_env(TASK, framework="pettingzoo", seed=0), num_cycles=50)


def test_agents_are_control_areas_and_feeders_with_padded_actions(task):
    spec = task_spec(TASK)
    areas = control_areas(task.case, 6)
    assert [g.name for g in spec.groups] == ["transmission", "distribution"]
    assert spec.groups[0].agents == tuple(f"area_{a}" for a in range(6))
    assert spec.groups[1].agents == ("dso_0", "dso_1", "dso_2")
    assert spec.agent_action_dim == areas.max_units == 10
    assert sorted(np.concatenate(areas.units).tolist()) == list(range(54))
    assert spec.agent_action_names("area_0")[: areas.units[0].size] == tuple(
        f"area_0.gen_{g}.p_mw" for g in areas.units[0]
    )
    dso = spec.agent_action_names("dso_1")
    assert dso[:3] == tuple(f"dso_1.battery_{k}.p_mw" for k in range(3, 6))
    assert dso[3:] == tuple(f"dso_1.unused_{k}" for k in range(3, 10))
    lo, hi = spec.action.bounds()
    unused = [i for i, n in enumerate(spec.action.names) if ".unused_" in n]
    assert np.all(lo[unused] == 0.0) and np.all(hi[unused] == 1.0)
    assert [(f.case_name, f.boundary_bus, f.copies) for f in task.feeders] == [
        ("case33bw", 59, 123),
        ("case33bw", 77, 105),
        ("case33bw", 3, 129),
    ]


def test_each_pocket_has_50_to_200_mw_of_batteries_behind_it(task):
    """Three batteries of 0.5 MW / 2 MWh in each copy: 184.5, 157.5 and 193.5 MW (4 h) behind
    buses 59, 77 and 3, the feeders 2.79 MW a copy at ``demand_pu = 1`` (995 MW in all)."""
    power = np.array([len(f.battery_buses) * f.copies for f in task.feeders]) * 0.5
    np.testing.assert_allclose(power, [184.5, 157.5, 193.5])
    np.testing.assert_array_equal(task.battery.energy_capacity_mwh, 4.0 * task.battery.power_max_mw)
    load = np.array([g.bus_p_mw.sum() for g in task.grids]) * task.copies
    np.testing.assert_allclose(load, [342.7, 292.6, 359.4], atol=0.05)
    assert not task.net_feeder_load and task.head_ltc


def test_the_boundary_buses_sit_in_congested_pockets(task):
    """On a high-load test day (27, peak 0.95 of the year's) every boundary bus's day-ahead LMP
    rises past 1,000 $/MWh (its import overloaded with the batteries idle) while the median
    bus stays near the units' costs, and 100 MW less drawn there brings it back under 60
    $/MWh; on a median day (43) lines 3-4 and 59-60 and the 345/138 kV transformer 8-5 bind
    and bus 59's LMP peaks at 80-100 $/MWh."""
    from powerzoo.physics.dc_opf import solve_dc_opf

    others = np.setdiff1d(np.arange(task.case.n_bus), task.boundary)
    flat = task.flat_index(np.full(48, 27), np.arange(48))
    lmp = task.lmp.at(flat)
    assert np.all(lmp[:, task.boundary].max(axis=0) > 1000.0)
    assert np.all(lmp[:, task.boundary].min(axis=0) < 36.0)
    loads = task.lmp.loads(flat)
    for b in task.boundary:
        k = int(np.argmax(lmp[:, b]))
        assert np.median(lmp[k, others]) < 50.0
        relieved = loads[k : k + 1].copy()
        relieved[0, b] -= 100.0
        assert task.lmp.solve(relieved)[0, b] < 60.0
    median_day = task.flat_index(np.full(48, 43), np.arange(48))
    assert 80.0 < task.lmp.at(median_day)[:, 59].max() < 100.0
    flows = solve_dc_opf(task.case, task.lmp.loads(median_day), soft_line_penalty=2000.0)
    binding = np.flatnonzero(np.abs(flows.branch_mu_per_mwh).max(axis=0) > 1e-6)
    assert binding.tolist() == [2, 85, 173]
    ends = [(task.case.branch_from_bus[k], task.case.branch_to_bus[k]) for k in binding]
    assert ends == [(3, 4), (59, 60), (7, 4)]


def test_the_tap_changers_hold_every_head_near_the_band_centre(task):
    """With the batteries idle on every test step, each LTC's tap follows the Thevenin voltage of
    its boundary bus (higher at the peak than at night) and holds its head within half a tap step
    of 1.025 p.u. wherever the tap is inside its +-16 steps (87 % of the steps: at the peaks the
    taps reach +16); the heads stay in [0.99, 1.03]."""
    model = task.boundary_model
    flat = task.day_start.repeat(48) + np.tile(np.arange(48), task.n_days)
    demand, idle = task.demand.take(flat), task.idle_head.take(flat, axis=0)
    tap = model.head_tap(demand, idle)
    head = model.head_voltage_pu(demand, idle)
    np.testing.assert_array_equal(head, task.head_voltage_pu(flat, np.zeros((flat.size, 9))))
    inside = np.abs(tap) < 16
    assert inside.mean() > 0.85
    assert np.all(np.abs(head[inside] - 1.025) <= 0.5 * 0.00625 + 1e-12)
    assert np.all((head >= 0.99) & (head <= 1.03))
    night, peak = np.argmin(demand), np.argmax(demand)
    assert np.all(tap[peak] > tap[night] + 3)
    np.testing.assert_array_equal(model.head_sensitivity_pu_per_mw(), 0.0)


def test_the_case5_task_keeps_its_fixed_tap():
    fixed = make_task("joint_trans_dist", "test")
    assert not fixed.head_ltc and fixed.boundary_model.ltc is None
    with pytest.raises(ValueError, match="fixed substation taps"):
        fixed.boundary_model.head_tap(np.array([0.7]), np.array([[2.0]]))


def test_unused_entries_are_ignored_and_reported_as_zero(task):
    rng = np.random.default_rng(0)
    lo, hi = task.spec.action.bounds()
    action = rng.uniform(lo, hi, size=(2, lo.size))
    unused = [i for i, n in enumerate(task.spec.action.names) if ".unused_" in n]
    other = action.copy()
    other[:, unused] = 1.0 - action[:, unused]
    state = task.reset(rng, np.array([0, 1]))
    _, a = task.step(state, action, rng)
    _, b = task.step(state, other, rng)
    np.testing.assert_array_equal(a.reward, b.reward)
    np.testing.assert_array_equal(a.action_applied, b.action_applied)
    assert np.all(a.action_applied[:, unused] == 0.0)


def test_every_feeder_boundary_agrees_on_both_sides_every_step(task):
    """Each feeder's exact AC head power is the load it adds at its boundary bus in the same
    step's DC flow (to 1e-9 MW), on top of the bus's own case load (the feeders are load grown
    behind it), and each feeder is paid its own boundary bus's day-ahead LMP."""
    base = task.case.bus_pd_mw * task.params.load_scale
    np.testing.assert_array_equal(task.bus_load_scale, base)
    for step, (demand, out) in enumerate(_random_rollout(task, 20, seed=3)):
        info = out.info
        assert info["feeder_p_mw"].shape == info["boundary_load_mw"].shape == (4, 3)
        np.testing.assert_allclose(info["boundary_load_mw"], info["feeder_p_mw"], atol=1e-9)
        total = demand * base.sum() + info["feeder_p_mw"].sum(axis=1)
        np.testing.assert_allclose(info["total_load_mw"], total, rtol=1e-12)
        flat = task.flat_index(np.arange(4) % task.n_days, np.full(4, step))
        price = task.lmp.at(flat)[:, [59, 77, 3]]
        np.testing.assert_array_equal(info["boundary_price_per_mwh"], price)
        assert info["pf_converged"].all()


def test_each_head_power_is_its_feeders_exact_flow(task):
    rng = np.random.default_rng(1)
    state = task.reset(rng, np.array([2, 4]))
    lo, hi = task.spec.action.bounds()
    action = rng.uniform(lo, hi, size=(2, lo.size))
    _, out = task.step(state, action, rng)
    demand = task.demand.take(task.flat_index(state.day_id, state.t))
    delivered = out.info["battery_p_mw"]
    for i, (grid, f, bats) in enumerate(
        zip(task.grids, task.feeders, task.bat_slices, strict=True)
    ):
        p, q = grid.bus_loads(demand)
        p[:, list(f.battery_buses)] -= delivered[:, bats]
        exact = grid.solve(p, q, head_vm_pu=out.info["head_vm_pu"][:, i])
        np.testing.assert_allclose(
            out.info["feeder_p_mw"][:, i], f.copies * exact.info["feeder_p_mw"], atol=1e-9
        )


def test_same_seed_same_trajectory():
    def run():
        env = make_env(TASK, num_envs=3, seed=5)
        rng = np.random.default_rng(2)
        env.reset(seed=5)
        rows = []
        for _ in range(50):
            action = {
                a: rng.uniform(env.action_space(a).low, env.action_space(a).high, (3, 10))
                for a in env.possible_agents
            }
            obs, reward, *_ = env.step(action)
            rows.append(np.concatenate([np.ravel(obs[a]) for a in env.possible_agents]))
            rows.append(np.asarray([reward[a] for a in env.possible_agents]).ravel())
        return np.concatenate(rows)

    np.testing.assert_array_equal(run(), run())


def test_bad_input_gives_clear_errors(task):
    with pytest.raises(TypeError, match="unknown parameter"):
        make_task(TASK, "test", feeders=3)
    with pytest.raises(ValueError, match="n_areas must be >= 1"):
        make_task(TASK, "test", n_areas=0)
    with pytest.raises(ValueError, match="power_mw must be > 0"):
        make_task(TASK, "test", power_mw=-1.0)
    with pytest.raises(ValueError, match="out of range"):
        task.reset(np.random.default_rng(0), np.array([10_000]))
    with pytest.raises(ValueError, match="unknown obs_mode"):
        task.observe(task.reset(np.random.default_rng(0), np.array([0])), "nonsense")


def test_observation_modes_and_slots(task):
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([0]))
    lo, hi = task.spec.action.bounds()
    state, out = task.step(state, rng.uniform(lo, hi, size=(1, lo.size)), rng)
    names = task.spec.observation.names
    obs = task.observe(state)[0]
    prev = obs[:, names.index("slot_0_prev_p_mw")]
    np.testing.assert_allclose(prev, out.action_applied[0].reshape(9, 10)[:, 0], rtol=1e-6)
    soc = obs[6:, names.index("slot_1_soc")]
    np.testing.assert_allclose(soc, out.info["soc"][0, [1, 4, 7]], rtol=1e-6)
    for mode in task.spec.obs_modes:
        o = task.observe(state, mode)
        assert o.shape == (1, 9, task.spec.observation_spec(mode).dim)
        assert np.isfinite(o).all()


@pytest.mark.slow  # about 10 s idle, 25 s on a busy machine (the oracle's episode LP)
def test_baselines_keep_their_order_on_a_test_day():
    from powerzoo.benchmarks.evaluation import evaluate_days
    from powerzoo.benchmarks.policies import make_baseline_policy

    env = make_env(TASK, split="test", seed=0)
    returns, costs = {}, {}
    for name in ("random", "rule_based", "oracle"):
        result = evaluate_days(make_baseline_policy(name, env), env, day_ids=[3], seed=0)
        returns[name] = result["mean_return"]
        costs[name] = result["mean_costs"]
    assert returns["random"] < returns["rule_based"] - 1e6
    assert returns["oracle"] >= returns["rule_based"]
    assert costs["oracle"]["power_imbalance"] < 1e-2


@pytest.mark.slow  # about 15 s idle (the oracle's episode LP and two more plans)
def test_the_joint_oracle_beats_separate_plans_and_idle_flexibility_on_a_peak_day():
    """Test day 27 (peak 0.95 of the year's): the batteries idle leave the pockets overloaded
    (178 MVAh); the joint oracle keeps every budget and costs 17.7 % less, and 39.7 % less than
    the separately optimised plans, whose price-taking batteries charge into the congestion."""
    from powerzoo.benchmarks.evaluation import evaluate_days
    from powerzoo.benchmarks.policies import make_baseline_policy

    env = make_env(TASK, split="test", seed=0)
    res = {
        name: evaluate_days(make_baseline_policy(name, env), env, day_ids=[27], seed=0)
        for name in ("oracle", "separate", "flex_idle")
    }
    ret = {name: r["mean_return"] for name, r in res.items()}
    budgets = task_spec(TASK).cost_thresholds
    assert all(res["oracle"]["mean_costs"][c] <= b for c, b in budgets.items())
    assert res["flex_idle"]["mean_costs"]["thermal_overload"] > 100.0
    effect = 100.0 * (ret["oracle"] - ret["flex_idle"]) / abs(ret["flex_idle"])
    gain = 100.0 * (ret["oracle"] - ret["separate"]) / abs(ret["separate"])
    assert effect == pytest.approx(17.71, abs=0.5)
    assert gain == pytest.approx(39.71, abs=1.5)
