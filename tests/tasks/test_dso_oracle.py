"""The ``dso`` oracle: its day LP's voltage allowance, and the plan checked under the exact env
with the head's tap changer in the loop."""

import numpy as np

from powerzoo.tasks.dso import Dso
from powerzoo.tasks.dso_oracle import HORIZON, solve_day
from powerzoo.tasks.dso_plan import DayPlay, better, budget_excess, budgets_kept, play
from powerzoo.tasks.feeder import voltage_sq_sensitivity

DAY = 29  # a July test day: the evening peak takes the far ends below the band
START = 28  # the oracle plans the rest of the day from here (a fast test: 20 steps)


def _midday(task, days=(DAY,)):
    """The state at step START of ``days``, reached without control."""
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.asarray(days))
    for _ in range(START):
        state, _ = task.step(state, np.zeros((len(days), task.spec.action.dim)), rng)
    return state


def _uncontrolled_mw(task, state):
    """Each unit's demand without control from the state's step on [B, T, 6] (MW)."""
    steps = np.arange(int(state.t[0]), HORIZON)
    demand = task.grid.demand_pu.take(task.flat_index(state.day_id[:, None], steps))
    due = np.zeros((state.t.size, steps.size, 6))
    due[:, : task.params.payback_steps] = state.due_mwh / task.spec.dt_h
    return demand[:, :, None] * task.flex_peak_mw + due


def _rule_and_oracle(task, state):
    unc = _uncontrolled_mw(task, state)
    rule = play(task, state, lambda s, t: task.rule_based_action(task.observe(s)), unc)
    plan = task.oracle_plan(state)
    oracle = play(task, state, lambda s, t: plan[:, t], unc)
    return rule, oracle, plan


def test_the_oracle_with_the_tap_moving_keeps_the_budget_and_beats_the_rule():
    # line-drop compensation: the AVC follows the load, so the tap moves during the evening
    task = Dso("test", ltc_ldc_r_pu=0.02, ltc_ldc_x_pu=0.01)
    state = _midday(task)
    rule, oracle, plan = _rule_and_oracle(task, state)
    unc = _uncontrolled_mw(task, state)
    idle = play(task, state, lambda s, t: np.zeros((1, 12)), unc)
    assert idle.costs[0, 0] > task.spec.cost_thresholds["voltage_violation"]  # control needed
    heads = np.unique(np.sqrt(oracle.v2[0, :, 0]).round(6))
    assert heads.size > 1  # the tap moves during the oracle's day
    assert budgets_kept(task, oracle.costs).all() and budgets_kept(task, rule.costs).all()
    assert oracle.ret[0] > rule.ret[0] + 100.0  # $ over the rest of the day
    # the plan is what the env applies: the replay earns what the oracle's own check kept
    np.testing.assert_allclose(oracle.plan[0, START:], plan[0, START:], atol=1e-9)
    assert np.all(plan[0, :START] == 0.0) and plan.max() <= task.params.flex_max_fraction


def test_the_oracle_plans_the_rest_of_the_day_at_the_default_tap():
    task = Dso("test")
    rule, oracle, _ = _rule_and_oracle(task, _midday(task))
    assert budgets_kept(task, oracle.costs).all()
    assert oracle.ret[0] >= rule.ret[0]


def test_the_day_lp_spends_its_voltage_allowance_instead_of_lost_load():
    task = Dso("test")
    state = _midday(task)
    unc = _uncontrolled_mw(task, state)
    idle = play(task, state, lambda s, t: np.zeros((1, 12)), unc)
    sens = voltage_sq_sensitivity(task.grid.case, task.flex_buses, task.flex.tan_phi)
    assert not state.due_mwh.any()  # no shift so far: the demand without control is the base
    args = (task.params, unc[0], idle.v2[0], sens, START, task.spec.dt_h)
    curtail_held, _ = solve_day(*args)
    curtail_spent, _ = solve_day(*args, allowance_pu=0.3)
    assert curtail_held.sum() > curtail_spent.sum() > 0.0
    assert curtail_held.max() <= task.params.flex_max_fraction + 1e-9


def test_the_kept_plan_is_within_budget_then_earns_most_else_goes_least_past_it():
    task = Dso("test")

    def day(ret, violation):
        n = len(ret)
        costs = np.stack([violation, np.zeros(n)], axis=1)
        return DayPlay(np.zeros((n, HORIZON, 12)), np.array(ret), costs, None, None)

    # rows: both kept (more return wins); kept beats not kept whatever the return; neither
    # kept: the smaller violation wins, not the larger return (a day no plan can hold)
    old = day([-900.0, -900.0, -100.0, -5000.0], [0.1, 0.1, 9.0, 1.2])
    new = day([-800.0, -100.0, -5000.0, -100.0], [0.4, 0.7, 1.2, 9.0])
    np.testing.assert_array_equal(better(task, new, old), [True, False, True, False])
    np.testing.assert_allclose(budget_excess(task, new.costs), [0.0, 0.4, 1.4, 17.0])


def test_rescaled_allowances_spend_the_budget_the_linearisation_leaves_unused(monkeypatch):
    # LinDistFlow overstates the exact flow's violation, so the first passes leave part of the
    # budget unspent; the rescaled passes aim the exact day at TARGET_SHARE of it
    import powerzoo.tasks.dso_plan as dso_plan

    task = Dso("test")
    state = _midday(task)
    unc = _uncontrolled_mw(task, state)
    budget = task.spec.cost_thresholds["voltage_violation"]
    played = {}
    for passes in (0, dso_plan.RESCALE_PASSES):
        monkeypatch.setattr(dso_plan, "RESCALE_PASSES", passes)
        plan = task.oracle_plan(state)
        played[passes] = play(task, state, lambda s, t, p=plan: p[:, t], unc)
    before, after = played[0], played[dso_plan.RESCALE_PASSES]
    assert budgets_kept(task, after.costs).all()
    assert before.costs[0, 0] < 0.7 * budget < after.costs[0, 0]  # more of the budget spent
    assert after.ret[0] > before.ret[0] + 200.0  # $ over the rest of the day (less lost load)
