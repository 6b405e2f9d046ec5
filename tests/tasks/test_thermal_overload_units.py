"""``thermal_overload`` is one quantity in one unit on every task: the overload energy above the
ratings summed over branches, ``sum_k max(|S_k| - S_rated_k, 0) x dt`` in MVAh (under DC power
flow ``|S| = |P|``, so MVAh = MWh)."""

import dataclasses

import numpy as np
import pytest

from powerzoo.physics.dc_power_flow import dc_power_flow
from powerzoo.physics.radial_pf import radial_power_flow
from powerzoo.tasks import list_tasks, make_task, task_spec


def test_every_task_reports_thermal_overload_in_mvah():
    units = {
        task: task_spec(task).constraint_units[task_spec(task).constraint_names.index(name)]
        for task in list_tasks()
        for name in task_spec(task).constraint_names
        if name == "thermal_overload"
    }
    assert len(units) >= 8
    assert all(unit.startswith("MVAh") for unit in units.values()), units


def test_dc_task_charges_x_mva_over_one_step_as_x_times_dt():
    """marl_opf: the branch 1-2 rated X = 30 MVA below its flow, every other branch unlimited."""
    task = make_task("marl_opf", "test")
    state = task.reset(np.random.default_rng(0), np.array([0]))
    dispatch = task.merit_order_dispatch(task.bus_load_mw(state).sum(axis=1))
    injection = -task.bus_load_mw(state)
    np.add.at(injection[0], task.case.gen_bus, dispatch[0])
    flow = dc_power_flow(task.case, injection)[0]
    x_mva = 30.0
    rating = np.full(task.case.n_branch, np.inf)
    rating[0] = abs(flow[0]) - x_mva
    task.case = dataclasses.replace(task.case, branch_rate_a_mw=rating)
    _, out = task.step(state, dispatch, None)
    assert task.spec.dt_h == 0.5
    assert out.constraint_costs[0, 0] == pytest.approx(x_mva * task.spec.dt_h)
    overload_cost = task.spec.reward_terms.index("overload_cost")
    assert -out.reward_terms[0, overload_cost] == pytest.approx(2000.0 * x_mva * task.spec.dt_h)


def test_feeder_task_charges_x_mva_over_one_step_as_x_times_dt():
    """dso at three times its default load: the flow's own overload X [MVA] comes back as X x dt."""
    task = make_task("dso", "test", load_scale=1.5)
    p, q = task.grid.bus_loads(np.array([1.0]))
    step = task.grid.solve(p, q)
    flow = radial_power_flow(task.grid.case, p, q, max_iter=30, tol_pu=1e-8)
    rating = task.grid.case.branch_rating_mva
    x_mva = float((np.maximum(flow.branch_loading - 1.0, 0.0) @ rating)[0])
    assert x_mva > 0.1 and task.spec.dt_h == 0.5
    assert step.costs[0, 1] == pytest.approx(x_mva * task.spec.dt_h, rel=1e-9)
