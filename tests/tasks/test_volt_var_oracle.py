"""volt_var_123's oracle: the whole-day MILP's wear, the day plan against the step-by-step plan
under the task's own step, on the evening of a test day."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from powerzoo.tasks.volt_var import VoltVar123
from powerzoo.tasks.volt_var import oracle as oracle_module
from powerzoo.tasks.volt_var.oracle_day import Q_REACH, plan_wear, solve_day_milp
from powerzoo.tasks.volt_var.oracle_linear import linearise, outranks
from powerzoo.tasks.volt_var.spec import CAPACITORS, REGULATORS

NR, NC = len(REGULATORS), len(CAPACITORS)
HEAVY_DAY = 1  # a test day whose evening sags below the band without control
T0 = 34  # 17:00: the plan covers the evening peak


@pytest.fixture(scope="module")
def task():
    return VoltVar123("test")


@pytest.fixture(scope="module")
def evening(task):
    """The state at ``T0`` (idle until then), the oracle's plan from it, and what the oracle
    was given and found (the step-by-step reference and every plan it checked)."""
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([HEAVY_DAY]))
    for _ in range(T0):
        state, _ = task.step(state, task.idle_action(task.observe(state)), rng)
    seen = {}
    real = oracle_module.improve_day

    def spy(model, day, start, wear, reference, **kw):
        best, checked = real(model, day, start, wear, reference, **kw)
        seen.update(model=model, day=day, start=start, wear=wear, best=best, checked=checked)
        return best, checked

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(oracle_module, "improve_day", spy)
        plan = task.oracle_plan(state)
    return state, plan, seen


def _rollout(task, state, actions: np.ndarray) -> tuple[float, float, float]:
    """Return, voltage violation (p.u.-h) and tap operations of ``actions`` [T, 43] from
    ``state`` to the end of the day."""
    rng = np.random.default_rng(0)
    state = copy.deepcopy(state)
    ret = cost = ops = 0.0
    for action in actions:
        state, out = task.step(state, action[None], rng)
        ret += float(out.reward[0])
        cost += float(out.constraint_costs[0, 0])
        ops += float(out.info["tap_operations"][0])
    return ret, cost, ops


def test_day_milp_wear_equals_the_operations_of_its_plan(evening):
    """Around a plan that holds the settings in force (the evening then sags below the band),
    the MILP must move taps; its up/down columns charge exactly the moves of its plan."""
    _, _, seen = evening
    day, start, wear = seen["day"], seen["start"], seen["wear"]
    n_t = day.pv_kw.shape[0]
    hold = (np.tile(start[0], (n_t, 1)), np.tile(start[1], (n_t, 1)), np.zeros_like(day.pv_kw))
    lin = linearise(seen["model"], day, *hold, q_move=Q_REACH)
    assert lin.violation_pu.sum() > 0.1
    milp = solve_day_milp(lin, day, np.concatenate(hold, axis=1), start, wear)
    assert milp is not None
    tap_ops = np.abs(np.diff(milp.taps, axis=0, prepend=start[0][None])).sum()
    cap_ops = np.abs(np.diff(milp.caps, axis=0, prepend=start[1][None])).sum()
    assert tap_ops > 0
    assert milp.wear == pytest.approx(wear[0] * tap_ops + wear[1] * cap_ops, abs=1e-9)
    assert milp.wear == pytest.approx(plan_wear(milp.taps, milp.caps, start, wear), abs=1e-9)
    assert milp.n_int == n_t * 3 * (NR + NC)  # settings, up and down moves
    assert np.all(np.abs(milp.taps) <= 16) and set(np.unique(milp.caps)) <= {0.0, 1.0}


def test_day_plan_is_never_worse_than_the_step_plan_under_the_task(task, evening):
    state, plan, seen = evening
    best, checked = seen["best"], seen["checked"]
    step = checked[0]  # the step-by-step plan, the day passes' reference
    assert outranks((best.violation_pu, best.cost), (step.violation_pu, step.cost)) or (
        best is step
    )
    assert best.violation_pu <= step.violation_pu + 1e-9
    # the figures the oracle ranks by are the task's own: return = -cost, violation x dt
    dt = task.spec.dt_h
    ret, cost, _ = _rollout(task, state, plan[0, T0:])
    assert ret == pytest.approx(-best.cost, rel=1e-9, abs=1e-9)
    assert cost == pytest.approx(best.violation_pu * dt, abs=1e-9)
    q_limit = seen["day"].q_limit_kvar
    q_frac = np.clip(step.q_kvar / np.where(q_limit > 0, q_limit, 1.0), -1.0, 1.0)
    step_ret, step_cost, _ = _rollout(task, state, np.hstack([step.taps, step.caps, q_frac]))
    assert step_ret == pytest.approx(-step.cost, rel=1e-9, abs=1e-9)
    assert cost <= step_cost + 1e-9
    assert ret >= step_ret - 1e-9 or cost < step_cost - 1e-9


def test_the_oracle_keeps_the_band_on_the_evening_idle_breaks(task, evening):
    state, plan, _ = evening
    _, cost, ops = _rollout(task, state, plan[0, T0:])
    idle = np.tile(np.asarray(task.spec.idle_action, dtype=float), (plan.shape[1] - T0, 1))
    _, idle_cost, _ = _rollout(task, state, idle)
    assert idle_cost > 0.1
    assert cost < 1e-3
    assert ops > 0


def test_plans_rank_by_violation_then_cost():
    assert outranks((0.0, 5.0), None)
    assert outranks((0.0, 5.0), (0.0, 6.0))  # as little violation, cheaper
    assert not outranks((0.0, 6.0), (0.0, 5.0))
    assert not outranks((0.0, 5.0), (0.0, 5.0))
    assert outranks((1e-12, 1.0), (0.0, 2.0))  # violations within the tolerance are equal
    assert not outranks((0.1, 0.0), (0.0, 100.0))  # less violation first
    assert outranks((0.0, 100.0), (0.1, 0.0))
