"""The feeder tasks' rule-based controllers keep the constraint budgets on test days where a
rule blind to the feeder broke them, and their building blocks (powerzoo.tasks.feeder_rules)."""

import numpy as np
import pytest

from powerzoo.devices.inverter_battery import InverterBatteryParams
from powerzoo.tasks import make_task
from powerzoo.tasks.feeder_rules import (
    ABSORB_V_SET_PU,
    absorb_charge_mw,
    export_limit_curtailment,
    load_relief_fraction,
    solar_soak_power_mw,
    sun_steps,
)


def _episodes(task, policy, days):
    """Return [B] (summed over agents) and cost sums [B, n_costs] of ``policy(obs)`` over whole
    episodes starting on the test ``days``, batched."""
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.asarray(days))
    ret, costs = 0.0, 0.0
    for _ in range(task.spec.horizon):
        state, out = task.step(state, policy(task.observe(state)), rng)
        reward = np.asarray(out.reward)
        ret = ret + (reward if reward.ndim == 1 else reward.sum(axis=1))
        costs = costs + out.constraint_costs
    return ret, costs


def _budgets(task):
    spec = task.spec
    return np.array([spec.cost_thresholds[name] for name in spec.constraint_names])


def _idle(task):
    """The task's idle joint action (``spec.idle_action``) for every row."""
    idle = np.asarray(task.spec.idle_action, dtype=np.float64)
    return lambda obs: np.broadcast_to(idle, (obs.shape[0], idle.size)).copy()


# test days on which the earlier rules (no control in dso, a time-of-use schedule blind to the
# voltage in the battery tasks, full-power charging on arrival in marl_ev_v2g) were over budget
CASES = {
    "dso": [29, 31, 36, 37],
    "marl_der_arbitrage": [1, 2, 8, 12, 16],
    "marl_ders_benchmark": [0, 1, 13, 44],
    "marl_ev_v2g": [14, 19, 20],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_rule_keeps_the_budgets_where_idle_breaks_them(name):
    task = make_task(name, split="test")
    days = CASES[name]
    rule_ret, rule_costs = _episodes(task, task.rule_based_action, days)
    idle_ret, idle_costs = _episodes(task, _idle(task), days)
    budgets = _budgets(task)
    assert np.all(np.any(idle_costs > budgets, axis=1))  # the days are hard ones
    assert np.all(rule_costs <= budgets), rule_costs
    if name == "dso":  # holding the voltage takes lost load: the rule pays for it
        assert np.all(rule_ret < idle_ret) and np.all(rule_ret > -20_000.0)
    else:  # the batteries, PV and EV rules still earn more than doing nothing
        assert rule_ret.mean() > idle_ret.mean() and np.mean(rule_ret > idle_ret) >= 0.75


def test_absorb_charge_integrates_above_the_set_point_with_the_volt_watt_floor():
    p_max = 0.5
    v = np.array([1.00, 1.04, ABSORB_V_SET_PU, 1.06, 1.10])
    none = absorb_charge_mw(v, np.zeros(5), p_max)
    assert none[0] == 0.0 and none[-1] == p_max  # below the droop: 0; far above: the rating
    assert 0.0 < none[1] < none[2] < none[3]  # the volt-watt droop acts with no history
    held = absorb_charge_mw(np.full(3, ABSORB_V_SET_PU), np.array([0.0, 0.4, 0.45]), p_max)
    np.testing.assert_allclose(held[1:], [0.4, 0.45])  # at the set point the charge is kept
    assert 0.0 < held[0] < 0.4  # ... or rises to the volt-watt droop
    low = absorb_charge_mw(np.full(1, 1.035), np.array([0.45]), p_max)
    assert low[0] < 0.45  # below the set point it steps down


def test_solar_soak_empties_before_the_sun_and_holds_room_for_the_surplus():
    battery = InverterBatteryParams(n_units=1)
    sun = sun_steps(48)
    first = int(np.flatnonzero(sun)[0])
    assert 10 <= first <= 20 and sun[24] and not sun[0] and not sun[44]  # a day's sunny hours
    soc = np.array([[0.5], [0.5], [0.5]])
    p_max = float(np.max(battery.power_max_mw))
    schedule = -0.9 * p_max
    tou = np.array([[0.0], [schedule], [schedule]])  # idle; the schedule charging twice
    v = np.array([[1.0], [1.036], [1.0]])
    step = np.array([first - 2, first + 6, first + 6])
    p = solar_soak_power_mw(battery, tou, soc, v, np.zeros((3, 1)), step, sun, 0.5)
    assert p[0, 0] > 0.0  # before the sun: it discharges
    # a surplus on the feeder: the schedule's charge gives way to the voltage-triggered one
    absorb = absorb_charge_mw(np.array([1.036]), np.zeros(1), p_max)[0]
    assert 0.0 < absorb < -schedule and p[1, 0] == pytest.approx(-absorb)
    assert p[2, 0] == pytest.approx(schedule)  # no surplus: the schedule charges


def test_load_relief_and_export_limit():
    relief = load_relief_fraction(
        np.array([0.5, 0.7, 1.0]), np.array([[0.94, 0.96]] * 3), 0.6, 0.9, 0.955
    )
    np.testing.assert_allclose(relief[:, 0], [0.0, 1.0 / 3.0, 1.0])
    np.testing.assert_allclose(relief[:, 1], 0.0)  # a unit whose bus holds the band is served
    cut = export_limit_curtailment(np.array([0.0, 0.8, 1.3]), 1.0)
    np.testing.assert_allclose(cut, [0.0, 0.0, 0.3 / 1.3])
    np.testing.assert_allclose(1.3 * (1.0 - cut[2]), 1.0)
