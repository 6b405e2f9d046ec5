"""Congestion-aware rule dispatch (``powerzoo/physics/redispatch.py``) on marl_opf and opf_118."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from powerzoo.physics.dc_opf import dispatch_cost, solve_dc_opf
from powerzoo.physics.redispatch import (
    congestion_aware_dispatch,
    merit_order_dispatch,
    redispatch,
    rule_dispatch_from_system_load,
)
from powerzoo.tasks.registry import make_task

TASKS = ("marl_opf", "opf_118")


@pytest.fixture(scope="module")
def tasks():
    return {name: make_task(name, "test") for name in TASKS}


def _loads(task, days: np.ndarray, steps) -> np.ndarray:
    """Bus loads [len(steps) * len(days), n_bus] of the test split, step-major."""
    state = task.reset(np.random.default_rng(0), days)
    out = []
    for t in steps:
        state.t[:] = t
        out.append(task.bus_load_mw(state))
    return np.concatenate(out)


def _episodes(
    task, days: np.ndarray, actions: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Roll ``actions`` [H, D, n_gen] through ``task.step``: per-day system return ($),
    thermal overload and power imbalance (MWh). Each step starts from its own dispatch, so the
    units' ramps (tests/tasks/test_dispatch_limits.py) never move it: only the network counts."""
    rng = np.random.default_rng(0)
    state = task.reset(rng, days)
    ret, overload, imbalance = np.zeros(days.size), np.zeros(days.size), np.zeros(days.size)
    for t in range(task.spec.horizon):
        state.prev_p_mw = np.array(actions[t], dtype=float)
        state, out = task.step(state, actions[t], rng)
        ret += out.reward
        overload += out.constraint_costs[:, 0]
        imbalance += out.constraint_costs[:, 1]
    return ret, overload, imbalance


@pytest.mark.parametrize("task_id", TASKS)
def test_merit_order_matches_the_task(tasks, task_id):
    task = tasks[task_id]
    total = _loads(task, np.array([0, 30, 60]), range(0, 48, 6)).sum(axis=1)
    np.testing.assert_array_equal(
        merit_order_dispatch(task.case, total, task.marginal_cost), task.merit_order_dispatch(total)
    )


@pytest.mark.parametrize("task_id", TASKS)
def test_balance_limits_monotone_and_deterministic(tasks, task_id):
    task = tasks[task_id]
    case = task.case
    load = _loads(task, np.array([0, 16, 32, 48, 64]), range(0, 48, 5))
    res = redispatch(case, load, task.marginal_cost)
    p = res.gen_p_mw
    assert p.shape == (load.shape[0], case.n_gen)
    np.testing.assert_allclose(p.sum(axis=1), load.sum(axis=1), atol=1e-6, rtol=0)
    assert np.all(p >= case.gen_pmin_mw - 1e-9) and np.all(p <= case.gen_pmax_mw + 1e-9)
    assert np.all(res.overload_mw <= res.merit_order_overload_mw + 1e-9)
    assert np.all(np.diff(res.overload_trace_mw, axis=0) <= 1e-9)  # non-increasing per iteration
    assert res.overload_trace_mw.shape[0] <= 1 + 32 + case.n_gen + case.n_branch  # bounded
    assert res.merit_order_overload_mw.max() > 1.0  # the merit order does congest these loads
    assert res.converged.all() and res.overload_mw.max() < 1e-4
    again = congestion_aware_dispatch(case, load, task.marginal_cost)
    np.testing.assert_array_equal(again, p)


@pytest.mark.parametrize(
    ("task_id", "days", "steps"),
    [
        ("marl_opf", np.array([0, 32, 64]), (0, 18, 36, 40)),
        ("opf_118", np.array([7, 55]), (12, 36)),
    ],
)
def test_zero_overload_when_the_hard_dc_opf_is_feasible(tasks, task_id, days, steps):
    task = tasks[task_id]
    case = task.case
    peak = case.bus_pd_mw * 1.1
    load = np.concatenate([_loads(task, days, steps), peak[None] * np.array([[1.0], [1.3]])])
    opf = solve_dc_opf(case, load)  # hard line limits
    assert np.all(opf.status == "optimal")
    res = redispatch(case, load, task.marginal_cost)
    assert res.converged.all()
    assert np.all(res.overload_mw < 1e-4)
    cost, best = dispatch_cost(case, res.gen_p_mw), opf.cost_per_h
    assert np.all(cost >= best * (1 - 1e-9))  # the DC-OPF is a lower bound ...
    if task_id == "marl_opf":  # ... that the rule reaches on case5 (one binding line, linear costs)
        np.testing.assert_allclose(cost, best, rtol=1e-9)
    else:
        assert np.mean(cost / best) > 1.001


def test_infeasible_load_keeps_balance_and_never_raises_overload(tasks):
    case = tasks["marl_opf"].case
    load = case.bus_pd_mw[None] * 1.1 * 1.35  # beyond what the 400 / 240 MW lines can carry
    assert solve_dc_opf(case, load).status[0] == "infeasible"
    res = redispatch(case, load, tasks["marl_opf"].marginal_cost)
    assert not res.converged[0] and 0.0 < res.overload_mw[0] < res.merit_order_overload_mw[0]
    np.testing.assert_allclose(res.gen_p_mw.sum(axis=1), load.sum(axis=1), atol=1e-6, rtol=0)
    assert np.all(np.diff(res.overload_trace_mw, axis=0) <= 1e-9)


@pytest.mark.parametrize("task_id", TASKS)
def test_rule_from_system_load_scales_the_bus_loads(tasks, task_id):
    task = tasks[task_id]
    case = task.case
    load = _loads(task, np.array([3, 44]), (10, 30))
    expected = redispatch(case, load, task.marginal_cost)
    got = rule_dispatch_from_system_load(case, load.sum(axis=1), task.marginal_cost)
    one = rule_dispatch_from_system_load(case, float(load[0].sum()), task.marginal_cost)
    assert got.shape == expected.gen_p_mw.shape and one.shape == (1, case.n_gen)
    if task_id == "marl_opf":  # unique redispatch: the same dispatch
        np.testing.assert_allclose(got, expected.gen_p_mw, atol=1e-6, rtol=0)
        np.testing.assert_allclose(one[0], expected.gen_p_mw[0], atol=1e-6, rtol=0)
    else:  # round-off in the scaled loads may flip a near-tie: an equally good redispatch
        np.testing.assert_allclose(
            dispatch_cost(case, got), dispatch_cost(case, expected.gen_p_mw), rtol=1e-3
        )
    # from the agents' global observation (float32), as a task policy would
    state = task.reset(np.random.default_rng(0), np.array([3, 44]))
    state.t[:] = 30
    obs = task.observe(state)
    system_load = obs[:, 0, task.spec.observation.names.index("system_load_mw")].astype(np.float64)
    p = rule_dispatch_from_system_load(case, system_load, task.marginal_cost)
    np.testing.assert_allclose(p.sum(axis=1), system_load, atol=1e-6, rtol=0)
    state.prev_p_mw = p.copy()  # within the step's ramps (the tasks' rule keeps them)
    _, out = task.step(state, p, np.random.default_rng(0))
    assert np.all(out.constraint_costs[:, 0] < 1e-3)  # no overload on the true bus loads
    np.testing.assert_allclose(out.info["imbalance_mw"], 0.0, atol=1e-3)  # float32 load only


def test_unlimited_network_keeps_the_merit_order(tasks):
    task = tasks["marl_opf"]
    case = dataclasses.replace(task.case, branch_rate_a_mw=np.full(task.case.n_branch, np.inf))
    load = _loads(task, np.array([0, 1]), (20, 40))
    res = redispatch(case, load, task.marginal_cost)
    np.testing.assert_array_equal(res.gen_p_mw, task.merit_order_dispatch(load.sum(axis=1)))
    assert res.converged.all() and res.overload_trace_mw.shape == (1, load.shape[0])


def test_rejects_bad_shapes(tasks):
    task = tasks["marl_opf"]
    with pytest.raises(ValueError, match="bus_load_mw"):
        redispatch(task.case, np.zeros((2, 3)), task.marginal_cost)
    with pytest.raises(ValueError, match="marginal_cost"):
        redispatch(task.case, task.case.bus_pd_mw, task.marginal_cost[:3])
    with pytest.raises(ValueError, match="ptdf"):
        redispatch(task.case, task.case.bus_pd_mw, task.marginal_cost, ptdf=np.zeros((2, 2)))


@pytest.mark.parametrize(
    ("task_id", "days"),
    [
        ("marl_opf", None),  # the full test split: 65 days x 48 steps
        ("opf_118", np.array([0, 25, 50, 64])),
    ],
)
def test_default_return_between_random_and_oracle(tasks, task_id, days):
    """System return per test day under the default reward (generation + imbalance + overload
    cost): random <= rule <= oracle, with no line overload under the rule, while the
    network-blind merit order overloads lines and, its overloads priced, scores below the
    oracle."""
    task = tasks[task_id]
    case = task.case
    days = np.arange(task.n_days) if days is None else days
    horizon = task.spec.horizon
    load = _loads(task, days, range(horizon))  # [H * D, n_bus], exogenous
    rule = redispatch(case, load, task.marginal_cost).gen_p_mw.reshape(
        horizon, days.size, case.n_gen
    )
    merit = task.merit_order_dispatch(load.sum(axis=1)).reshape(horizon, days.size, case.n_gen)
    rng = np.random.default_rng(0)
    noise = rng.uniform(case.gen_pmin_mw, case.gen_pmax_mw, (horizon, days.size, case.n_gen))
    plan = task.oracle_plan(task.reset(rng, days)).transpose(1, 0, 2)  # [H, D, n_gen]
    rule_ret, rule_over, rule_imb = _episodes(task, days, rule)
    merit_ret, merit_over, _ = _episodes(task, days, merit)
    random, _, _ = _episodes(task, days, noise)
    oracle, oracle_over, _ = _episodes(task, days, plan)

    assert np.all(rule_ret >= random)
    # on case5 the rule reproduces the DC-OPF up to HiGHS tolerances; the oracle keeps the
    # units' ramps, which this rule (no ramps) ignores: 4e-5 of a day's cost on one test day
    assert np.all(rule_ret <= oracle + 1e-4 * np.abs(oracle))
    assert rule_over.max() < 1e-3 and rule_imb.max() < 1e-6  # MVAh, MWh per day
    assert oracle_over.max() < 1e-3
    assert merit_over.mean() > 1.0  # the merit order overloads lines (MVAh per day)
    assert merit_ret.mean() < oracle.mean()  # and pays for it in the default reward
    if task_id == "opf_118":
        assert rule_ret.mean() < oracle.mean() * (1 + 0.03)  # at least 3 % below the oracle
