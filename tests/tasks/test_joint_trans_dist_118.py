"""``joint_trans_dist_118``: case118 by control-area agents, three feeders with one DSO agent
each; the boundary of every feeder, the padded actions, the adapters and the baselines."""

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
    dso = spec.agent_action_names("dso_0")
    assert dso[:4] == tuple(f"dso_0.battery_{k}.p_mw" for k in range(4))
    assert dso[4:] == tuple(f"dso_0.unused_{k}" for k in range(4, 10))
    lo, hi = spec.action.bounds()
    unused = [i for i, n in enumerate(spec.action.names) if ".unused_" in n]
    assert np.all(lo[unused] == 0.0) and np.all(hi[unused] == 1.0)
    assert [(f.case_name, f.boundary_bus) for f in task.feeders] == [
        ("case141", 59),
        ("case33bw", 77),
        ("case33bw", 10),
    ]


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
    step's DC flow (to 1e-9 MW), the boundary bus carries its own load less its feeders' base
    load (x their copies), and each feeder is paid its own boundary bus's day-ahead LMP."""
    base = task.case.bus_pd_mw * task.params.load_scale
    for step, (demand, out) in enumerate(_random_rollout(task, 20, seed=3)):
        info = out.info
        assert info["feeder_p_mw"].shape == info["boundary_load_mw"].shape == (4, 3)
        np.testing.assert_allclose(info["boundary_load_mw"], info["feeder_p_mw"], atol=1e-9)
        own = demand[:, None] * task.bus_load_scale[[59, 77, 10]]
        grid_base = np.array([g.bus_p_mw.sum() for g in task.grids]) * task.copies
        np.testing.assert_allclose(
            own, demand[:, None] * (base[[59, 77, 10]] - grid_base), rtol=1e-12
        )
        total = demand * task.bus_load_scale.sum() + info["feeder_p_mw"].sum(axis=1)
        np.testing.assert_allclose(info["total_load_mw"], total, rtol=1e-12)
        flat = task.flat_index(np.arange(4) % task.n_days, np.full(4, step))
        price = task.lmp.at(flat)[:, [59, 77, 10]]
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
    np.testing.assert_allclose(soc, out.info["soc"][0, [1, 5, 8]], rtol=1e-6)
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
