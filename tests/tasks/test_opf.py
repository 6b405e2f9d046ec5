"""The ``opf`` task: economic dispatch of any case by area or unit agents."""

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

import powerzoo.tasks.economic_dispatch.model as dispatch_model
from powerzoo.physics.multi_period_opf import solve_ramped_sequence
from powerzoo.physics.operable_ratings import rerating_of
from powerzoo.rl import make_env
from powerzoo.tasks.economic_dispatch import Opf, Opf118


@pytest.mark.parametrize("kwargs", [{}, {"agents": "unit"}, {"case": "case5", "n_areas": 2}])
def test_parallel_api_test_passes(kwargs: dict) -> None:
    parallel_api_test(make_env("opf", **kwargs), num_cycles=60)


def test_area_agents_dispatch_every_unit_once() -> None:
    task = Opf(split="test", n_areas=6)
    assert task.spec.agents == tuple(f"area_{a}" for a in range(6))
    units = np.concatenate(task.groups.units)
    assert np.array_equal(np.sort(units), np.arange(task.case.n_gen))  # case118: all dispatchable
    rng = np.random.default_rng(0)
    gen_p = rng.uniform(task.case.gen_pmin_mw, task.case.gen_pmax_mw, size=(3, task.case.n_gen))
    joint = task.joint_action(gen_p)
    assert joint.shape == (3, task.spec.action.dim)
    assert np.array_equal(task.unit_dispatch(joint), gen_p)
    names = task.spec.agent_action_names("area_0")
    assert len(names) == task.n_slots and names[0].startswith("area_0.gen_")


def test_unused_entries_are_ignored_and_reported_as_zero() -> None:
    task = Opf(split="test", n_areas=8)
    assert task._unused.size > 0  # case118's eight areas differ in size
    state = task.reset(np.random.default_rng(0), np.array([0, 0]))
    plan = task.joint_action(np.tile(task.case.gen_pmin_mw, (2, 1)))
    noisy = plan.copy()
    noisy[1, task._unused] = 1.0
    _, out = task.step(state, plan, np.random.default_rng(0))
    _, out_noisy = task.step(state, noisy, np.random.default_rng(0))
    assert np.array_equal(out.reward, out_noisy.reward)
    assert np.all(out_noisy.action_applied[:, task._unused] == 0.0)


def test_unit_agents_on_case118_score_as_opf_118() -> None:
    """One agent per unit on case118 is opf_118's model: the same dispatch, the same reward."""
    opf = Opf(split="test", agents="unit", load_scale=Opf118.Params.load_scale)
    preset = Opf118(split="test")
    rng = np.random.default_rng(1)
    day = np.array([0, 3, 7])
    s_opf, s_preset = opf.reset(rng, day), preset.reset(rng, day)
    for _ in range(5):
        gen_p = rng.uniform(preset.case.gen_pmin_mw, preset.case.gen_pmax_mw, size=(3, 54))
        s_opf, out = opf.step(s_opf, opf.joint_action(gen_p), rng)
        s_preset, ref = preset.step(s_preset, gen_p, rng)
        np.testing.assert_array_equal(out.reward, ref.reward)
        np.testing.assert_array_equal(out.constraint_costs, ref.constraint_costs)


def test_sparse_flow_path_matches_the_dense_one(monkeypatch: pytest.MonkeyPatch) -> None:
    dense = Opf(split="test")
    monkeypatch.setattr(dispatch_model, "DENSE_FLOW_MAX_BUSES", 0)
    sparse = Opf(split="test")
    assert dense._gsf is not None and sparse._gsf is None
    rng = np.random.default_rng(2)
    action = rng.uniform(
        dense.spec.action.low, dense.spec.action.high, size=(4, dense.spec.action.dim)
    )
    day = np.arange(4)
    _, a = dense.step(dense.reset(rng, day), action, rng)
    _, b = sparse.step(sparse.reset(rng, day), action, rng)
    np.testing.assert_allclose(a.reward, b.reward, rtol=1e-9)
    np.testing.assert_allclose(a.constraint_costs, b.constraint_costs, rtol=1e-9, atol=1e-9)


def test_observation_fields() -> None:
    task = Opf(split="test", n_areas=4)
    state = task.reset(np.random.default_rng(0), np.array([0]))
    obs = task.observe(state)
    spec = task.spec.observation
    assert obs.shape == (1, 4, spec.dim)
    area_load = obs[0, :, spec.names.index("area_load_mw")]
    system_load = obs[0, 0, spec.names.index("system_load_mw")]
    assert area_load.sum() == pytest.approx(system_load, rel=1e-5)
    pmax = obs[0, :, spec.names.index("area_pmax_mw")]
    assert pmax.sum() == pytest.approx(task.case.gen_pmax_mw.sum(), rel=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"agents": "zone"}, "agents must be one of"), ({"n_areas": 0}, "n_areas must be >= 1")],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_env("opf", **kwargs)


def test_baselines_keep_the_order_on_test_days() -> None:
    """Oracle >= rule >= random on a few test days (case5, two areas)."""
    from powerzoo.benchmarks.baselines import evaluate_baseline

    task = {"task": "opf", "task_kwargs": {"case": "case5", "n_areas": 2}}
    returns = {
        policy: evaluate_baseline(task, policy, day_ids=[0, 1, 2])["mean"]
        for policy in ("random", "rule_based", "oracle")
    }
    assert returns["oracle"] >= returns["rule_based"] - 1e-6 >= returns["random"]


def test_builds_on_a_case_published_without_ratings() -> None:
    """case300 has no ratings: its branches are rated by voltage class, so it congests."""
    task = Opf(split="test", case="case300")
    assert np.isfinite(task.case.branch_rate_a_mw).sum() > 300
    state = task.reset(np.random.default_rng(0), np.array([0]))
    rule = task.rule_based_action(task.observe(state))
    _, out = task.step(state, rule, np.random.default_rng(0))
    assert np.all(np.isfinite(out.reward)) and out.constraint_costs.shape == (1, 2)


def _oracle_episode(task: Opf, day: int, t0: int) -> tuple[np.ndarray, np.ndarray]:
    """The oracle's plan from step ``t0`` of test day ``day`` stepped through the task: the
    overload [MVAh] of every step, and the plan's own overload [MVAh] of those steps."""
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([day]))
    for _ in range(t0):  # reach step t0 on the rule's dispatch
        state, _ = task.step(state, task.rule_based_action(task.observe(state)), rng)
    plan = task.oracle_plan(state)
    assert plan.shape == (1, task.spec.horizon, task.spec.action.dim)
    assert np.all(np.isfinite(plan)) and np.all(plan[0, :t0] == 0.0)
    own = solve_ramped_sequence(  # the plan and its overload as its solver measures them
        task.case,
        task.bus_loads_ahead(state, 0, task.spec.horizon - t0),
        state.prev_p_mw[0],
        task.limits.ramp_up_mw,
        task.limits.ramp_down_mw,
        task.spec.dt_h,
        task.params.overload_penalty_per_mwh,
    )
    np.testing.assert_allclose(plan[0, t0:], task.joint_action(own.gen_p_mw))
    overload = []
    for t in range(t0, task.spec.horizon):
        state, out = task.step(state, plan[:, t], rng)
        np.testing.assert_allclose(state.prev_p_mw[0], own.gen_p_mw[t - t0], atol=1e-6)
        overload.append(out.constraint_costs[0, 0])
    return np.array(overload), own.overload_mw * task.spec.dt_h


def test_the_oracle_keeps_the_overload_budget_on_case300() -> None:
    """With Pmin by technology, the loader's ratings of case300 (checked with the case's own Pmin
    of 0) leave 520-580 MW of overload in every DC-OPF; the task checks them again with its
    units, so its oracle keeps the 1 MVAh/day budget and the env measures the plan's flows."""
    task = Opf(split="test", case="case300")
    record = rerating_of(task.case)
    assert record is not None and record.basis == "dispatch units" and record.n_rerated > 0
    assert record.overload_before_mw.min() > 100.0 and record.operable
    overload, own = _oracle_episode(task, day=0, t0=0)
    assert overload.sum() <= 1.0
    np.testing.assert_allclose(overload, own, atol=1e-6)


def test_the_ramped_oracle_runs_on_a_case_above_1000_buses() -> None:
    """case1354pegase has no dense shift factors: the oracle's flows are the sparse ones."""
    task = Opf(split="test", case="case1354pegase")
    assert task.case.n_bus > 1000 and task._gsf is None
    overload, own = _oracle_episode(task, day=32, t0=45)
    assert overload.size == 3 and overload.sum() <= 1.0
    np.testing.assert_allclose(overload, own, atol=1e-6)


def test_padded_action_fills_every_agent_to_the_slot_count() -> None:
    from powerzoo.tasks.spec import padded_action

    spec = padded_action(
        {"a": [("a.x", "MW", 0.0, 5.0)], "b": [("b.x", "MW", 1.0, 2.0), ("b.y", "MW", 0, 3)]}, 2
    )
    assert spec.names == ("a.x", "a.unused_1", "b.x", "b.y")
    assert spec.units == ("MW", "-", "MW", "MW")
    assert spec.low == (0.0, 0.0, 1.0, 0.0) and spec.high == (5.0, 1.0, 2.0, 3.0)
    with pytest.raises(ValueError, match="more than 1"):
        padded_action({"b": [("b.x", "MW", 1.0, 2.0), ("b.y", "MW", 0, 3)]}, 1)
