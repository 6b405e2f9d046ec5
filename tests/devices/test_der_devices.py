"""DER device fleets of the distribution-feeder tasks:
inverter battery, PV inverter, flexible load."""

import numpy as np
import pytest

from powerzoo.devices.battery import BatteryParams, battery_step
from powerzoo.devices.flexible_load import (
    FlexibleLoadParams,
    flexible_load_reset,
    flexible_load_step,
)
from powerzoo.devices.inverter_battery import (
    InverterBatteryParams,
    inverter_battery_reset,
    inverter_battery_step,
)
from powerzoo.devices.pv_inverter import PVInverterParams, pv_inverter_step

DT_H = 0.5
HORIZON = 48

# three different batteries: the per-unit arrays must not be mixed up
BATTERIES = InverterBatteryParams(
    energy_capacity_mwh=[2.0, 4.0, 1.0],
    power_max_mw=[1.0, 1.0, 0.5],
    s_rating_mva=[1.1, 1.25, 0.5],
    charge_efficiency=[0.95, 0.9, 0.97],
    discharge_efficiency=[0.95, 0.85, 0.97],
    soc_min=[0.1, 0.2, 0.05],
    soc_max=[0.9, 0.8, 0.95],
    soc_init=[0.5, 0.3, 0.9],
)
PV = PVInverterParams(capacity_mw=[1.0, 2.0, 0.5, 3.0])
LOADS = FlexibleLoadParams(
    curtail_max=[0.3, 0.5, 0.0], shift_max=[0.3, 0.2, 0.6], power_factor=[0.85, 0.95, 1.0]
)


def extreme(rng, shape, scale):
    """Finite actions from far outside the limits to well inside them,
    with exact zeros and bounds."""
    choice = rng.choice([-1e6, -10.0, -1.0, 0.0, 1.0, 10.0, 1e6], size=shape)
    return choice * rng.uniform(0.0, 1.0, shape) * scale


# ---- inverter battery ---------------------------------------------------------------------------
def test_battery_limits_hold_under_extreme_actions():
    rng = np.random.default_rng(0)
    soc = inverter_battery_reset(BATTERIES, 512)
    for _ in range(200):
        p_req, q_req = extreme(rng, soc.shape, 1.0), extreme(rng, soc.shape, 1.0)
        r = inverter_battery_step(BATTERIES, soc, p_req, q_req, DT_H)
        for field in (
            "soc",
            "p_mw",
            "q_mvar",
            "soc_violation_mwh",
            "q_cut_mvar",
            "p_rating_excess_mw",
        ):
            assert np.all(np.isfinite(getattr(r, field))), field
        assert np.all(r.soc >= BATTERIES.soc_min) and np.all(r.soc <= BATTERIES.soc_max)
        assert np.all(np.abs(r.p_mw) <= BATTERIES.power_max_mw)
        assert np.all(r.p_mw**2 + r.q_mvar**2 <= BATTERIES.s_rating_mva**2 * (1 + 1e-12))
        for field in (
            "soc_violation_mwh",
            "q_cut_mvar",
            "p_rating_excess_mw",
            "charge_mwh",
            "discharge_mwh",
        ):
            assert np.all(getattr(r, field) >= 0.0), field
        # what was cut is reported: request = delivered + cut (same sign)
        np.testing.assert_allclose(np.abs(q_req), np.abs(r.q_mvar) + r.q_cut_mvar, rtol=1e-12)
        soc = r.soc


def test_active_power_has_priority_over_reactive_power():
    soc = np.full((1, 3), 0.5)
    pmax, s = BATTERIES.power_max_mw, BATTERIES.s_rating_mva
    full_q = np.tile(s, (1, 1))
    r = inverter_battery_step(BATTERIES, soc, np.tile(pmax, (1, 1)), full_q, DT_H)
    np.testing.assert_array_equal(r.p_mw[0], pmax)  # P delivered in full, whatever Q asks
    np.testing.assert_allclose(r.q_mvar[0], np.sqrt(s**2 - pmax**2), rtol=1e-12)
    np.testing.assert_allclose(r.q_cut_mvar[0], s - np.sqrt(s**2 - pmax**2), rtol=1e-12)
    assert r.q_mvar[0, 2] == 0.0  # S == P max: no reactive capability left at full P
    # idle battery: the whole S rating is available for Q, absorption as well as injection
    r = inverter_battery_step(BATTERIES, soc, np.zeros((1, 3)), -full_q, DT_H)
    np.testing.assert_array_equal(r.q_mvar[0], -s)
    np.testing.assert_array_equal(r.q_cut_mvar[0], 0.0)
    # Q never changes P or SOC
    rng = np.random.default_rng(1)
    soc = rng.uniform(0.2, 0.8, (64, 3))
    p_req = rng.uniform(-1.0, 1.0, (64, 3))
    a = inverter_battery_step(BATTERIES, soc, p_req, np.zeros((64, 3)), DT_H)
    b = inverter_battery_step(BATTERIES, soc, p_req, rng.uniform(-5, 5, (64, 3)), DT_H)
    np.testing.assert_array_equal(a.p_mw, b.p_mw)
    np.testing.assert_array_equal(a.soc, b.soc)


def test_soc_violation_is_measured_on_the_request_before_the_soc_cut():
    # unit 0 at 0.11: 0.02 MWh above soc_min -> at most 0.019 MWh delivered = 0.038 MW for 30 min
    soc = np.array([[0.11, 0.79, 0.5]])
    r = inverter_battery_step(BATTERIES, soc, np.array([[1.0, -1.0, 0.5]]), np.zeros((1, 3)), DT_H)
    np.testing.assert_allclose(r.p_mw[0, 0], 0.02 * 0.95 / DT_H, rtol=1e-12)
    # unit 1 at 0.79 of 4 MWh: 0.04 MWh room / 0.9 -> 0.0889 MW of charging for 30 min
    np.testing.assert_allclose(r.p_mw[0, 1], -0.04 / 0.9 / DT_H, rtol=1e-12)
    np.testing.assert_allclose(r.soc[0, :2], [0.1, 0.8], atol=1e-12)
    expected = [(1.0 - 0.038) * DT_H / 0.95, (1.0 - 0.04 / 0.9 / DT_H) * DT_H * 0.9, 0.0]
    np.testing.assert_allclose(r.soc_violation_mwh[0], expected, rtol=1e-12)
    # a request beyond the power rating at a comfortable SOC is a rating cut, not an SOC violation
    r = inverter_battery_step(
        BATTERIES, np.full((1, 3), 0.5), np.array([[5.0, -3.0, 0.5]]), np.zeros((1, 3)), DT_H
    )
    np.testing.assert_array_equal(r.soc_violation_mwh, 0.0)
    np.testing.assert_allclose(r.p_rating_excess_mw[0], [4.0, 2.0, 0.0])
    np.testing.assert_array_equal(r.p_mw[0], [1.0, -1.0, 0.5])


def test_battery_energy_balance_through_efficiencies():
    rng = np.random.default_rng(2)
    soc = inverter_battery_reset(BATTERIES, 256)
    eta_c, eta_d, cap = (
        BATTERIES.charge_efficiency,
        BATTERIES.discharge_efficiency,
        BATTERIES.energy_capacity_mwh,
    )
    for _ in range(48):
        r = inverter_battery_step(
            BATTERIES, soc, rng.uniform(-2, 2, soc.shape), rng.uniform(-2, 2, soc.shape), DT_H
        )
        stored_change = (r.soc - soc) * cap
        np.testing.assert_allclose(
            stored_change, eta_c * r.charge_mwh - r.discharge_mwh / eta_d, atol=1e-12
        )
        np.testing.assert_allclose(r.p_mw * DT_H, r.discharge_mwh - r.charge_mwh, atol=1e-15)
        assert np.all((r.charge_mwh == 0) | (r.discharge_mwh == 0))
        soc = r.soc


def test_battery_p_and_soc_are_the_single_battery_model_unit_by_unit():
    rng = np.random.default_rng(3)
    soc = rng.uniform(0.0, 1.0, (100, 3)).clip(BATTERIES.soc_min, BATTERIES.soc_max)
    p_req = rng.uniform(-1.5, 1.5, (100, 3))
    r = inverter_battery_step(BATTERIES, soc, p_req, np.zeros_like(p_req), DT_H)
    for i in range(3):
        single = BatteryParams(
            energy_capacity_mwh=BATTERIES.energy_capacity_mwh[i],
            power_max_mw=BATTERIES.power_max_mw[i],
            charge_efficiency=BATTERIES.charge_efficiency[i],
            discharge_efficiency=BATTERIES.discharge_efficiency[i],
            soc_min=BATTERIES.soc_min[i],
            soc_max=BATTERIES.soc_max[i],
        )
        p_rated = p_req[:, i].clip(-single.power_max_mw, single.power_max_mw)
        ref = battery_step(single, soc[:, i], p_rated, DT_H)
        np.testing.assert_array_equal(r.soc[:, i], ref.soc)
        np.testing.assert_array_equal(r.p_mw[:, i], ref.p_mw)
        np.testing.assert_array_equal(r.soc_violation_mwh[:, i], ref.soc_violation_mwh)


def test_battery_parameters_are_checked_per_unit():
    params = InverterBatteryParams(n_units=4)
    assert params.n_units == 4 and params.s_rating_mva.shape == (4,)
    np.testing.assert_allclose(params.s_rating_mva, 1.1)  # default S = 1.1 x P max
    assert inverter_battery_reset(params, 2).shape == (2, 4)
    with pytest.raises(ValueError, match="unit 1: s_rating_mva"):
        InverterBatteryParams(power_max_mw=[1.0, 2.0], s_rating_mva=[1.1, 1.5])
    with pytest.raises(ValueError, match="unit 0: soc_init"):
        InverterBatteryParams(soc_init=0.95)
    with pytest.raises(ValueError, match="unit 2: charge_efficiency"):
        InverterBatteryParams(charge_efficiency=[0.9, 0.9, 1.2])
    with pytest.raises(ValueError, match="length n_units=3"):
        InverterBatteryParams(power_max_mw=[1.0, 1.0, 1.0], soc_min=[0.1, 0.2])
    with pytest.raises(ValueError, match="finite"):
        InverterBatteryParams(energy_capacity_mwh=np.nan)
    with pytest.raises(ValueError, match=r"\[B, n_units\]"):
        inverter_battery_step(BATTERIES, np.full((2, 3), 0.5), np.zeros(2), np.zeros((2, 3)), DT_H)


# ---- PV inverter ------------------------------------------------------------------------------
def test_pv_available_power_follows_the_irradiance_profile():
    from powerzoo.data.profiles import get_profiles

    profiles = get_profiles("base", 30)
    cf = profiles.day("pv_cf", 172)  # a June day: zero at night, a real midday peak
    r = pv_inverter_step(PV, cf[:, None], np.zeros((48, 4)), np.zeros((48, 4)), DT_H)
    np.testing.assert_allclose(r.available_mw, cf[:, None] * PV.capacity_mw)
    assert np.all(r.p_mw[:4] == 0.0)  # midnight to 2 am
    assert 0.3 < r.p_mw[:, 0].max() <= 1.0
    fractional = (cf > 0.05) & (cf < 0.95)
    assert fractional.sum() >= 10  # a capacity factor that is neither 0 nor 1 most of the day
    np.testing.assert_array_equal(r.curtailed_mwh, 0.0)


def test_pv_curtailment_and_the_s_circle():
    rng = np.random.default_rng(4)
    cf = rng.uniform(0.0, 1.0, (256, 4))
    curtail, q_req = extreme(rng, (256, 4), 1.0), extreme(rng, (256, 4), 1.0)
    r = pv_inverter_step(PV, cf, curtail, q_req, DT_H)
    applied = curtail.clip(0.0, 1.0)
    np.testing.assert_array_equal(r.curtail_fraction, applied)
    np.testing.assert_allclose(r.p_mw, PV.capacity_mw * cf * (1.0 - applied), rtol=1e-15)
    np.testing.assert_allclose(
        r.curtailed_mwh, PV.capacity_mw * cf * applied * DT_H, rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(r.p_mw * DT_H + r.curtailed_mwh, r.available_mw * DT_H, rtol=1e-15)
    assert (
        np.all(r.curtailed_mwh >= 0.0)
        and np.all(r.p_mw >= 0.0)
        and np.all(r.p_mw <= r.available_mw)
    )
    assert np.all(r.p_mw**2 + r.q_mvar**2 <= PV.s_rating_mva**2 * (1 + 1e-12))
    np.testing.assert_allclose(np.abs(q_req), np.abs(r.q_mvar) + r.q_cut_mvar, rtol=1e-12)
    # P priority: at full output the Q request gets sqrt(S^2 - P^2) and P is untouched
    full = pv_inverter_step(PV, np.ones((1, 4)), np.zeros((1, 4)), np.full((1, 4), 10.0), DT_H)
    np.testing.assert_array_equal(full.p_mw[0], PV.capacity_mw)
    np.testing.assert_allclose(full.q_mvar[0], np.sqrt(1.1**2 - 1.0) * PV.capacity_mw, rtol=1e-12)
    # curtailing frees reactive capability
    curtailed = pv_inverter_step(
        PV, np.ones((1, 4)), np.full((1, 4), 0.5), np.full((1, 4), 10.0), DT_H
    )
    assert np.all(curtailed.q_mvar > full.q_mvar)


def test_pv_reactive_power_without_sun_is_an_option_off_by_default():
    # IEEE 1547-2018: reactive capability is required while the DER produces active power;
    # "Q at night" is optional, so a unit with no available power gives no Q unless asked to
    cf = np.array([[0.0, 0.0, 0.3, 0.3]])  # units 0, 1 without sun
    curtail = np.array([[0.0, 0.0, 0.0, 1.0]])  # unit 3 has sun but curtails all of it
    q_req = np.array([[0.7, -5.0, 0.2, -0.4]])
    off = pv_inverter_step(PV, cf, curtail, q_req, DT_H)
    assert PV.q_at_night is False
    np.testing.assert_array_equal(off.q_mvar[0, :2], 0.0)
    np.testing.assert_array_equal(off.q_limit_mvar[0, :2], 0.0)
    np.testing.assert_array_equal(off.q_cut_mvar[0, :2], [0.7, 5.0])
    np.testing.assert_allclose(off.q_mvar[0, 2:], [0.2, -0.4])  # the inverter is on: Q as asked
    on = pv_inverter_step(
        PVInverterParams(PV.capacity_mw, q_at_night=True), cf, curtail, q_req, DT_H
    )
    np.testing.assert_allclose(on.q_mvar[0], [0.7, -2.2, 0.2, -0.4])  # the whole S rating at night
    np.testing.assert_allclose(on.q_limit_mvar[0, :2], PV.s_rating_mva[:2])
    np.testing.assert_allclose(on.q_cut_mvar[0], [0.0, 2.8, 0.0, 0.0], atol=1e-15)
    for r in (off, on):
        np.testing.assert_array_equal(r.p_mw, cf * PV.capacity_mw * (1.0 - curtail))


def test_pv_parameters_and_shapes_are_checked():
    np.testing.assert_allclose(PV.s_rating_mva, 1.1 * PV.capacity_mw)
    with pytest.raises(ValueError, match="unit 1: s_rating_mva"):
        PVInverterParams(capacity_mw=[1.0, 2.0], s_rating_mva=[1.0, 1.9])
    with pytest.raises(ValueError, match="capacity_mw must be non-negative"):
        PVInverterParams(capacity_mw=-1.0)
    with pytest.raises(ValueError, match="capacity_factor"):
        pv_inverter_step(PV, np.ones((2, 3)), np.zeros((2, 4)), np.zeros((2, 4)), DT_H)
    with pytest.raises(ValueError, match="n_units=4"):
        pv_inverter_step(PV, np.ones((2, 1)), np.zeros((2, 3)), np.zeros((2, 3)), DT_H)


# ---- flexible load ----------------------------------------------------------------------------
def run_load_episode(params, p_base, curtail, shift, steps_remaining):
    """Step a whole episode; returns the per-step results (arrays [T, B, n])."""
    state = flexible_load_reset(params, p_base.shape[1])
    out = []
    for t in range(p_base.shape[0]):
        r = flexible_load_step(
            params, state, p_base[t], curtail[t], shift[t], DT_H, steps_remaining[t]
        )
        out.append(r)
        state = r.state
    return out, state


def test_flexible_load_curtailment_is_bounded_by_the_load_and_takes_q_with_p():
    rng = np.random.default_rng(5)
    p_base = rng.uniform(0.0, 2.0, (HORIZON, 128, 3))
    curtail, shift = extreme(rng, p_base.shape, 1.0), extreme(rng, p_base.shape, 1.0)
    steps = [HORIZON - 1 - t for t in range(HORIZON)]
    results, _ = run_load_episode(LOADS, p_base, curtail, shift, steps)
    for t, r in enumerate(results):
        assert np.all(r.curtail_fraction >= 0.0) and np.all(r.curtail_fraction <= LOADS.curtail_max)
        assert np.all(r.shift_fraction >= 0.0) and np.all(r.shift_fraction <= LOADS.shift_max)
        assert np.all(r.curtailed_mwh <= LOADS.curtail_max * p_base[t] * DT_H + 1e-15)
        assert np.all(r.curtailed_mwh + r.shifted_mwh <= p_base[t] * DT_H * (1 + 1e-12))
        assert np.all(r.p_mw >= -1e-15)
        # Q follows P at the unit's power factor: curtailed load takes its reactive power with it
        np.testing.assert_allclose(
            r.q_mvar, r.p_mw * np.tan(np.arccos(LOADS.power_factor)), rtol=1e-12, atol=1e-15
        )
        for field in ("curtailed_mwh", "shifted_mwh", "payback_mwh", "shift_refused_mwh"):
            assert np.all(getattr(r, field) >= 0.0) and np.all(np.isfinite(getattr(r, field))), (
                field
            )
    # unit 2 cannot curtail at all (curtail_max = 0), and is at unity power factor
    assert all(
        np.all(r.curtailed_mwh[:, 2] == 0.0) and np.all(r.q_mvar[:, 2] == 0.0) for r in results
    )


def test_curtailing_a_third_of_the_load_cuts_p_and_q_by_a_third():
    params = FlexibleLoadParams(curtail_max=0.5, shift_max=0.5, power_factor=0.8, n_units=2)
    state = flexible_load_reset(params, 1)
    base = np.array([[3.0, 1.5]])
    none = flexible_load_step(params, state, base, np.zeros((1, 2)), np.zeros((1, 2)), DT_H, 10)
    third = flexible_load_step(
        params, state, base, np.full((1, 2), 1 / 3), np.zeros((1, 2)), DT_H, 10
    )
    np.testing.assert_allclose(none.q_mvar, base * 0.75)  # tan(acos(0.8)) = 0.75
    np.testing.assert_allclose(third.p_mw, base * 2 / 3, rtol=1e-12)
    np.testing.assert_allclose(third.q_mvar, none.q_mvar * 2 / 3, rtol=1e-12)
    np.testing.assert_allclose(third.curtailed_mwh, base / 3 * DT_H, rtol=1e-12)
    np.testing.assert_array_equal(third.state.backlog_mwh, 0.0)  # curtailed energy is not owed back


def test_shifted_energy_is_paid_back_evenly_within_the_window_and_before_the_end():
    params = FlexibleLoadParams(shift_max=0.5, payback_steps=4, n_units=1)
    p_base = np.ones((HORIZON, 1, 1))
    shift = np.zeros_like(p_base)
    shift[0] = 0.4  # 0.2 MWh deferred at step 0: 0.05 MWh back at steps 1..4
    shift[HORIZON - 3] = 0.4  # two steps left: paid back over those two
    shift[HORIZON - 1] = 0.4  # last step: refused
    results, state = run_load_episode(
        params, p_base, np.zeros_like(p_base), shift, [HORIZON - 1 - t for t in range(HORIZON)]
    )
    payback = np.array([r.payback_mwh[0, 0] for r in results])
    np.testing.assert_allclose(payback[1:5], 0.05, rtol=1e-15)
    assert np.all(payback[5 : HORIZON - 2] == 0.0)
    np.testing.assert_allclose(payback[HORIZON - 2 :], 0.1, rtol=1e-15)
    np.testing.assert_allclose(results[1].p_mw, 1.0 + 0.05 / DT_H)
    assert results[HORIZON - 1].shifted_mwh[0, 0] == 0.0
    np.testing.assert_allclose(results[HORIZON - 1].shift_refused_mwh, 0.2)
    np.testing.assert_allclose(results[0].state.backlog_mwh, 0.2)
    np.testing.assert_array_equal(state.due_mwh, 0.0)


def test_shifted_energy_is_conserved_over_an_episode_with_staggered_envs():
    rng = np.random.default_rng(6)
    params = FlexibleLoadParams(curtail_max=0.2, shift_max=0.6, payback_steps=6, n_units=3)
    batch = 64
    p_base = rng.uniform(0.0, 2.0, (HORIZON, batch, 3))
    curtail = rng.uniform(-0.5, 1.5, p_base.shape)
    shift = rng.uniform(-0.5, 1.5, p_base.shape)
    # autoreset-style staggering: env b runs one episode over steps [0, start_b) and the next
    # over [start_b, HORIZON); steps_remaining counts down to 0 at the end of each
    start = rng.integers(0, HORIZON, batch)
    steps_remaining = [np.where(t < start, start - 1 - t, HORIZON - 1 - t) for t in range(HORIZON)]
    results, state = run_load_episode(params, p_base, curtail, shift, steps_remaining)
    shifted = sum(r.shifted_mwh for r in results)
    paid = sum(r.payback_mwh for r in results)
    assert shifted.sum() > 10.0  # the test shifts a real amount of energy
    np.testing.assert_allclose(paid, shifted, rtol=1e-12)
    np.testing.assert_allclose(state.backlog_mwh, 0.0, atol=1e-15)
    # nothing is carried over an episode boundary either:
    # the backlog is empty after each first episode
    for b in np.flatnonzero(start > 0):
        np.testing.assert_allclose(results[start[b] - 1].state.backlog_mwh[b], 0.0, atol=1e-15)
    # energy balance of the whole day: served + curtailed == base demand
    served = sum(r.p_mw * DT_H for r in results)
    curtailed = sum(r.curtailed_mwh for r in results)
    np.testing.assert_allclose(served + curtailed, p_base.sum(axis=0) * DT_H, rtol=1e-12)


def test_flexible_load_state_resets_row_by_row_and_parameters_are_checked():
    from powerzoo.tasks.base import merge_state

    state = flexible_load_reset(LOADS, 4)
    assert state.due_mwh.shape == (4, 4, 3) and state.backlog_mwh.shape == (4, 3)
    r = flexible_load_step(
        LOADS, state, np.ones((4, 3)), np.zeros((4, 3)), np.full((4, 3), 0.2), DT_H, 10
    )
    fresh = merge_state(
        r.state, np.array([True, False, True, False]), flexible_load_reset(LOADS, 4)
    )
    np.testing.assert_array_equal(fresh.backlog_mwh[[0, 2]], 0.0)
    np.testing.assert_array_equal(fresh.due_mwh[[1, 3]], r.state.due_mwh[[1, 3]])
    with pytest.raises(ValueError, match="curtail_max \\+ shift_max"):
        FlexibleLoadParams(curtail_max=0.6, shift_max=0.5)
    with pytest.raises(ValueError, match="power_factor"):
        FlexibleLoadParams(power_factor=[0.9, 0.0])
    with pytest.raises(ValueError, match="payback_steps"):
        FlexibleLoadParams(payback_steps=0)
    with pytest.raises(ValueError, match="state's shape"):
        flexible_load_step(
            LOADS, state, np.ones((4, 2)), np.zeros((4, 2)), np.zeros((4, 2)), DT_H, 10
        )
    with pytest.raises(ValueError, match="steps_remaining"):
        flexible_load_step(
            LOADS, state, np.ones((4, 3)), np.zeros((4, 3)), np.zeros((4, 3)), DT_H, np.ones(3, int)
        )


# ---- batching ---------------------------------------------------------------------------------
def test_one_env_equals_a_row_of_a_batch_of_64():
    rng = np.random.default_rng(7)
    b, row = 64, 17
    p_req, q_req = rng.uniform(-2, 2, (HORIZON, b, 3)), rng.uniform(-2, 2, (HORIZON, b, 3))
    cf, curtail, q_pv = (
        rng.uniform(0, 1, (HORIZON, b, 4)),
        rng.uniform(-0.2, 1.2, (HORIZON, b, 4)),
        rng.uniform(-3, 3, (HORIZON, b, 4)),
    )
    base, c, s = (
        rng.uniform(0, 2, (HORIZON, b, 3)),
        rng.uniform(-0.2, 0.8, (HORIZON, b, 3)),
        rng.uniform(-0.2, 0.8, (HORIZON, b, 3)),
    )

    def rollout(rows):
        soc, load = (
            inverter_battery_reset(BATTERIES, len(rows)),
            flexible_load_reset(LOADS, len(rows)),
        )
        trace = []
        for t in range(HORIZON):
            bat = inverter_battery_step(BATTERIES, soc, p_req[t, rows], q_req[t, rows], DT_H)
            pv = pv_inverter_step(PV, cf[t, rows], curtail[t, rows], q_pv[t, rows], DT_H)
            fl = flexible_load_step(
                LOADS, load, base[t, rows], c[t, rows], s[t, rows], DT_H, HORIZON - 1 - t
            )
            soc, load = bat.soc, fl.state
            trace.append(
                np.concatenate(
                    [
                        bat.soc,
                        bat.p_mw,
                        bat.q_mvar,
                        bat.soc_violation_mwh,
                        pv.p_mw,
                        pv.q_mvar,
                        pv.curtailed_mwh,
                        fl.p_mw,
                        fl.q_mvar,
                        fl.state.backlog_mwh,
                    ],
                    axis=1,
                )
            )
        return np.stack(trace)

    batched, single = rollout(np.arange(b)), rollout(np.array([row]))
    assert batched.dtype == np.float64
    np.testing.assert_array_equal(single[:, 0], batched[:, row])
