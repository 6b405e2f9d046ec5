"""Units with limits in the dispatch tasks: Pmin by technology, ramps enforced by the env, the
operator's SCED rule within them, and the time-coupled oracle of opf_118_7d."""

import numpy as np
import pytest

from powerzoo.benchmarks.dispatch_figures import (
    congestion_step_share,
    naive_gap_pct,
    week_vs_myopic_pct,
)
from powerzoo.benchmarks.naive import naive_action
from powerzoo.physics.multi_period_opf import solve_multi_period_dc_opf, solve_ramped_sequence
from powerzoo.tasks import make_task
from powerzoo.tasks.economic_dispatch.week import HYDRO_PMAX_MW, with_hydro


def test_case118_units_get_pmin_and_ramps_by_technology():
    task = make_task("opf_118", "test")
    lim, pmax = task.limits, task.case.gen_pmax_mw
    classes = np.array(lim.unit_class)
    assert lim.pmin_scale == 1.0  # the committed fleet fits under the year's lowest load
    np.testing.assert_allclose(lim.pmin_mw[classes == "base"], 0.4 * pmax[classes == "base"])
    np.testing.assert_allclose(lim.pmin_mw[classes == "mid"], 0.35 * pmax[classes == "mid"])
    assert np.all(lim.pmin_mw[classes == "peaking"] == 0.0)  # fast-start
    # 1 %/min of Pmax for base units: 30 % per half-hour step
    np.testing.assert_allclose(lim.ramp_up_mw[classes == "base"], 0.3 * pmax[classes == "base"])
    np.testing.assert_allclose(task.spec.action.low, lim.pmin_mw)
    # the starting dispatch is within every unit's limits and meets the load
    state = task.reset(np.random.default_rng(0), np.arange(5))
    assert np.all(state.prev_p_mw >= lim.pmin_mw - 1e-9)
    assert np.all(state.prev_p_mw <= pmax + 1e-9)


def test_the_env_clips_setpoints_into_the_step_range():
    task = make_task("opf_118", "test")
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([3, 9]))
    prev = state.prev_p_mw.copy()
    far = np.where(np.arange(task.case.n_gen) % 2 == 0, task.case.gen_pmax_mw, 0.0)
    far = np.broadcast_to(far, prev.shape).copy()
    state, out = task.step(state, far, rng)
    lim = task.limits
    lo = np.maximum(prev - lim.ramp_down_mw, lim.pmin_mw)
    hi = np.minimum(prev + lim.ramp_up_mw, lim.pmax_mw)
    np.testing.assert_allclose(out.action_applied, np.clip(far, lo, hi))
    np.testing.assert_allclose(state.prev_p_mw, out.action_applied)  # the next step's start
    moved = out.action_applied != far
    assert moved.any()
    np.testing.assert_array_equal(out.info["n_limited_units"], moved.sum(axis=1))
    np.testing.assert_allclose(
        out.info["dispatch_adjusted_mw"], np.abs(out.action_applied - far).sum(axis=1)
    )


@pytest.mark.parametrize("task_name", ["marl_opf", "opf_118"])
def test_the_sced_rule_keeps_the_limits_and_the_ratings(task_name):
    task = make_task(task_name, "test")
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.arange(0, task.n_days, 16))
    total = {"rule": 0.0, "naive": 0.0}
    for _ in range(task.spec.horizon):
        obs = task.observe(state)
        lo, hi = task.step_range(state)
        rule = task.rule_based_action(obs)
        naive = naive_action(task, obs)
        for action in (rule, naive):  # within the env's step range (a kW inside it)
            assert np.all(action >= lo - 1e-6) and np.all(action <= hi + 1e-6)
        _, naive_out = task.step(state, naive, rng)
        state, out = task.step(state, rule, rng)
        assert np.all(out.info["n_limited_units"] == 0)
        assert out.constraint_costs[:, 0].max() < 1e-3  # the redispatch clears every overload
        total["rule"] += out.reward.sum()
        total["naive"] += naive_out.reward.sum()
    assert total["rule"] > total["naive"]  # the network-blind dispatch pays its overloads


def _week_inputs(steps: int):
    task = make_task("opf_118_7d", "test")
    state = task.reset(np.random.default_rng(0), np.array([0]))
    loads = task.bus_loads_ahead(state, 0, steps)
    return task, loads, state.prev_p_mw[0]


def test_the_multi_period_oracle_keeps_ramps_and_the_energy_budget_and_beats_myopic():
    task, loads, p0 = _week_inputs(48)
    case, lim = task.case, task.limits
    hydro = task.hydro
    energy = {hydro: 0.25 * HYDRO_PMAX_MW * 24.0}
    args = (case, loads, p0, lim.ramp_up_mw, lim.ramp_down_mw, 0.5, 2000.0)
    week = solve_multi_period_dc_opf(*args, energy_mwh=energy)
    myopic = solve_ramped_sequence(*args, energy_mwh=energy)
    for r in (week, myopic):
        assert r.status == "optimal"
        p = r.gen_p_mw
        np.testing.assert_allclose(p.sum(axis=1), loads.sum(axis=1), atol=1e-5)  # balance
        assert np.all(p >= case.gen_pmin_mw - 1e-6) and np.all(p <= case.gen_pmax_mw + 1e-6)
        steps = np.diff(np.vstack([p0, p]), axis=0)
        assert np.all(steps <= lim.ramp_up_mw + 1e-6)
        assert np.all(-steps <= lim.ramp_down_mw + 1e-6)
        assert p[:, hydro].sum() * 0.5 <= energy[hydro] + 1e-3
        assert r.overload_mw.max() < 1e-3
    # the myopic optimum spends the free energy first; the week's plan keeps it for the peak
    assert myopic.gen_p_mw[:12, hydro].sum() > week.gen_p_mw[:12, hydro].sum()
    assert week.cost < myopic.cost * (1.0 - 1e-3)


def test_the_week_task_clips_the_hydro_plant_to_its_energy_left():
    task = make_task("opf_118_7d", "test")
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([0]))
    assert state.energy_left_mwh[0] == pytest.approx(task.energy_budget_mwh)
    state.energy_left_mwh[:] = 100.0  # MWh: 200 MW for a half-hour
    action = state.prev_p_mw.copy()
    action[:, task.hydro] = HYDRO_PMAX_MW
    state, out = task.step(state, action, rng)
    assert out.action_applied[0, task.hydro] == pytest.approx(200.0)
    assert state.energy_left_mwh[0] == pytest.approx(0.0)
    obs = task.observe(state)
    assert obs[0, 0, task.spec.observation.slot("energy_left_mwh")] == pytest.approx(0.0)


def test_the_dispatch_figures():
    rows = {
        "oracle": {
            "task": "opf_118",
            "mean": -100.0,
            "mean_length": 48,
            "episode_metrics": {"congested": [24, 12]},
        },
        "naive": {"mean": -110.0},
        "myopic": {"mean": -102.0},
    }
    assert congestion_step_share(rows) == pytest.approx(36 / 96)
    assert naive_gap_pct(rows) == pytest.approx(10.0)
    feeder = {**rows, "oracle": {**rows["oracle"], "task": "dso"}}
    assert naive_gap_pct(feeder) is None  # the naive policy of a feeder task is no dispatch
    assert week_vs_myopic_pct(rows) == pytest.approx(100 * 2.0 / 102.0)
    assert week_vs_myopic_pct({"oracle": rows["oracle"]}) is None
    assert congestion_step_share({"oracle": {"mean": -1.0}}) is None


def test_the_hydro_plant_is_one_more_unit():
    case, lim = with_hydro("case118", 1.4)
    assert case.n_gen == 55 and lim.unit_class[-1] == "hydro"
    assert case.gen_c1_per_mwh[-1] == 0.0 and case.gen_pmax_mw[-1] == HYDRO_PMAX_MW


def test_the_multi_period_solvers_run_on_a_case_above_1000_buses():
    """case1354pegase at its published ratings (congested): both solvers take their flows and
    the LP its flow rows from the sparse DC power flow (no dense PTDF above 1,000 buses)."""
    from powerzoo.physics.cases import load_case
    from powerzoo.physics.dc_opf import solve_dc_opf
    from powerzoo.physics.operable_ratings import without_rerating

    case = without_rerating(load_case("case1354pegase"))
    assert case.n_bus > 1000
    loads = np.array([1.0, 1.05, 1.1])[:, None] * case.bus_pd_mw
    p0 = solve_dc_opf(case, loads[0], soft_line_penalty=2000.0).gen_p_mw
    pmin, pmax = case.gen_limits_mw
    room = np.where(case.gen_in_service, p0 - pmin, 0.0)
    unit = int(np.argmax(room))
    energy = {unit: float(pmin[unit] + 0.5 * room[unit]) * 1.5}  # below p0 for 1.5 h
    ramp = 0.3 * (pmax - pmin)
    args = (case, loads, p0, ramp, ramp, 0.5, 2000.0)
    week = solve_multi_period_dc_opf(*args, energy_mwh=energy)
    myopic = solve_ramped_sequence(*args, energy_mwh=energy)
    assert week.status == myopic.status == "optimal"
    assert week.rounds >= 2  # flow rows were added lazily
    assert week.overload_mw.min() > 100.0  # the published ratings stay congested
    for r in (week, myopic):
        np.testing.assert_allclose(r.gen_p_mw.sum(axis=1), loads.sum(axis=1), atol=1e-4)
        assert r.gen_p_mw[:, unit].sum() * 0.5 <= energy[unit] + 1e-3
    assert week.cost <= myopic.cost * (1.0 + 1e-6)
