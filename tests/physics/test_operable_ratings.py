"""Operable ratings: the case loader re-rates the branches no dispatch keeps within their ratings
between the trough and the peak of the dispatch tasks' load, and leaves every other case as it
is."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import powerzoo.physics.cases as cases_mod
from powerzoo.physics.cases import case_rerating, load_case
from powerzoo.physics.dc_opf import solve_dc_opf
from powerzoo.physics.line_ratings import voltage_class_ratings, with_voltage_class_ratings
from powerzoo.physics.network import NetworkCase
from powerzoo.physics.operable_ratings import (
    OVERLOAD_PRICE_PER_MWH,
    PEAK_LOAD_SCALE,
    RERATE_FACTOR,
    TROUGH_LOAD_SCALE,
    Rerating,
    apply_rerating,
    operable_rerating,
    rerating_of,
    with_operable_ratings,
    without_rerating,
)

LEVELS = (TROUGH_LOAD_SCALE, 0.75, PEAK_LOAD_SCALE)


def _four_bus(
    radial_rating: float = 50.0, meshed_rating: float = np.inf, pmin: float = 0.0
) -> NetworkCase:
    """Cheap unit at bus 0, dear unit at bus 1, 100 MW loads at buses 2 and 3; bus 3 hangs on
    branch 2-3 alone (rated ``radial_rating``: its load must flow through it)."""
    from_bus, to_bus = np.array([0, 1, 0, 2]), np.array([1, 2, 2, 3])
    return NetworkCase(
        name="four_bus",
        base_mva=100.0,
        bus_id=np.arange(4),
        slack_bus=0,
        bus_pd_mw=np.array([0.0, 0.0, 100.0, 100.0]),
        bus_vn_kv=np.full(4, 138.0),
        branch_from_bus=from_bus,
        branch_to_bus=to_bus,
        branch_x_pu=np.full(4, 0.1),
        branch_tap=np.ones(4),
        branch_rate_a_mw=np.array([np.inf, np.inf, meshed_rating, radial_rating]),
        branch_in_service=np.ones(4, dtype=bool),
        branch_is_trafo=np.zeros(4, dtype=bool),
        branch_element=np.arange(4),
        gen_bus=np.array([0, 1]),
        gen_pmin_mw=np.array([pmin, 0.0]),
        gen_pmax_mw=np.array([500.0, 500.0]),
        gen_c2_per_mw2h=np.zeros(2),
        gen_c1_per_mwh=np.array([10.0, 50.0]),
        gen_c0_per_h=np.zeros(2),
        gen_in_service=np.ones(2, dtype=bool),
        gen_element_type=np.array(["gen", "gen"]),
        gen_element=np.arange(2),
        load_bus=np.array([2, 3]),
        load_p_mw=np.array([100.0, 100.0]),
    )


def _hard_status(case: NetworkCase, scales=LEVELS) -> list[str]:
    loads = np.asarray(scales)[:, None] * case.bus_pd_mw
    return solve_dc_opf(case, loads).status.tolist()


def test_a_branch_its_load_must_flow_through_is_re_rated_to_its_flow_times_the_factor():
    case = _four_bus(radial_rating=50.0)
    assert _hard_status(case) == ["optimal", "infeasible", "infeasible"]
    record = operable_rerating(case)
    np.testing.assert_array_equal(record.branch, [3])
    np.testing.assert_array_equal(record.old_rating_mw, [50.0])
    np.testing.assert_allclose(record.flow_mw, [110.0])  # the peak load of bus 3
    assert record.new_rating_mw[0] == math.ceil(RERATE_FACTOR * 110.0 * 10.0) / 10.0 == 126.5
    np.testing.assert_allclose(record.overload_before_mw, [0.0, 60.0], atol=1e-6)
    assert record.operable and record.adequate.all()
    fixed = apply_rerating(case, record)
    np.testing.assert_array_equal(fixed.branch_rate_a_mw, [np.inf, np.inf, np.inf, 126.5])
    assert _hard_status(fixed) == ["optimal"] * 3  # feasible in between as well
    assert rerating_of(fixed) is record
    assert without_rerating(fixed).branch_rate_a_mw[3] == 50.0
    assert "1 branches re-rated" in record.summary() and "operable" in record.summary()


def test_a_branch_redispatch_can_relieve_binds_and_keeps_its_rating():
    case = _four_bus(radial_rating=np.inf, meshed_rating=80.0)  # 73.3 MW at least at the peak
    record = operable_rerating(case)
    assert record.n_rerated == 0 and record.operable
    assert with_operable_ratings(case) is case  # nothing to change: the same object
    peak = solve_dc_opf(case, PEAK_LOAD_SCALE * case.bus_pd_mw)  # hard limits
    assert abs(peak.branch_flow_mw[2]) == pytest.approx(80.0)  # it binds at the peak ...
    assert peak.branch_mu_per_mwh[2] != 0.0  # ... and prices congestion


def test_a_load_the_units_cannot_meet_is_checked_at_the_nearest_one_they_can():
    case = _four_bus(radial_rating=50.0, pmin=150.0)  # 150 MW must run, the trough is 90 MW
    record = operable_rerating(case)
    np.testing.assert_array_equal(record.adequate, [False, True])
    assert record.checked_scales[0] == pytest.approx(0.75)  # 150 MW of the 200 MW base load
    assert record.checked_scales[1] == PEAK_LOAD_SCALE
    np.testing.assert_allclose(record.overload_before_mw, [25.0, 60.0], atol=1e-3)
    assert record.operable and "cannot meet the load at x 0.45 (checked at x 0.75)" in (
        record.summary()
    )
    assert record.branch.tolist() == [3] and record.new_rating_mw[0] == 126.5
    fixed = apply_rerating(case, record)
    assert _hard_status(fixed, (0.75 * 1.000001, 0.9, PEAK_LOAD_SCALE)) == ["optimal"] * 3
    assert _hard_status(fixed, (0.7,)) == ["infeasible"]  # below sum Pmin: no rating helps


def test_islands_are_reported_and_left_alone():
    case = _four_bus()
    open_radial = case.branch_in_service.copy()
    open_radial[3] = False
    islanded = dataclasses.replace(case, branch_in_service=open_radial)
    record = operable_rerating(islanded)
    assert record.note and record.n_rerated == 0 and not record.operable
    assert "not checked" in record.summary()


def test_case1354pegase_is_re_rated_and_its_dc_opf_is_feasible_from_trough_to_peak():
    case = load_case("case1354pegase")
    record = case_rerating("case1354pegase")
    assert record is rerating_of(case) and record.basis == "case"
    published = without_rerating(case)
    assert "infeasible" in _hard_status(published, (PEAK_LOAD_SCALE,))
    assert record.n_rerated > 0 and record.operable
    assert record.overload_before_mw[-1] > 1000.0  # MW of priced overload before
    assert np.all(record.new_rating_mw > record.old_rating_mw)
    excess = record.new_rating_mw - RERATE_FACTOR * record.flow_mw
    assert np.all((excess >= 0.0) & (excess <= 0.1 + 1e-9))  # rounded up to 0.1 MW
    assert _hard_status(case) == ["optimal"] * 3
    soft = solve_dc_opf(
        case, PEAK_LOAD_SCALE * case.bus_pd_mw, soft_line_penalty=OVERLOAD_PRICE_PER_MWH
    )
    assert soft.line_slack_mw.sum() == pytest.approx(0.0, abs=1e-6)
    untouched = np.setdiff1d(np.arange(case.n_branch), record.branch)
    np.testing.assert_array_equal(
        case.branch_rate_a_mw[untouched], published.branch_rate_a_mw[untouched]
    )


@pytest.mark.parametrize("name", ["case5", "case30"])
def test_cases_whose_ratings_hold_keep_them(name):
    case = load_case(name)
    record = case_rerating(name)
    assert record.n_rerated == 0 and record.operable
    assert without_rerating(case) is case


def test_voltage_class_ratings_of_case118_are_unchanged_and_case300_is_re_rated():
    raw118 = load_case("case118")
    rated = with_voltage_class_ratings(raw118)
    np.testing.assert_array_equal(rated.branch_rate_a_mw, voltage_class_ratings(raw118))
    assert rerating_of(rated).basis == "voltage class" and rerating_of(rated).n_rerated == 0
    assert with_voltage_class_ratings(raw118) is rated
    raw300 = load_case("case300")
    rated300 = with_voltage_class_ratings(raw300)
    record = rerating_of(rated300)
    assert record.n_rerated > 0 and record.operable
    np.testing.assert_array_equal(
        record.old_rating_mw, voltage_class_ratings(raw300)[record.branch]
    )
    assert _hard_status(rated300) == ["optimal"] * 3


def test_the_check_is_deterministic():
    case = load_case("case1354pegase")
    cached = rerating_of(case)
    again = operable_rerating(without_rerating(case))
    for field in dataclasses.fields(Rerating):
        a, b = getattr(cached, field.name), getattr(again, field.name)
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg=field.name)
        else:
            assert a == b, field.name


def test_the_record_round_trips_through_the_case_cache_file(tmp_path):
    case = load_case("case1354pegase")
    raw, record = without_rerating(case), rerating_of(case)
    path = tmp_path / "case1354pegase.npz"
    cases_mod._write_cache(path, (raw, record))
    back, back_record = cases_mod._read_cache(path, "case1354pegase")
    np.testing.assert_array_equal(back.branch_rate_a_mw, raw.branch_rate_a_mw)
    np.testing.assert_array_equal(back_record.new_rating_mw, record.new_rating_mw)
    assert back_record.summary() == record.summary()
    arrays = dict(np.load(path))
    arrays["__rerating_branch"] = arrays["__rerating_branch"] + case.n_branch
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="re-rated branch"):
        cases_mod._read_cache(path, "case1354pegase")


def test_the_levels_cover_the_dispatch_tasks_load():
    from powerzoo.tasks.economic_dispatch.opf import Opf
    from powerzoo.tasks.transmission import BASE_LOAD_SCALE, congestion_ready_case
    from powerzoo.tasks.transmission import OVERLOAD_PRICE_PER_MWH as TASK_PRICE

    task = Opf(split="test", case="case5", n_areas=2)
    assert BASE_LOAD_SCALE * task._demand.max() <= PEAK_LOAD_SCALE
    assert BASE_LOAD_SCALE * task._demand.min() >= TROUGH_LOAD_SCALE
    assert OVERLOAD_PRICE_PER_MWH == TASK_PRICE
    # the dispatch tasks take the loader's re-rated case
    assert congestion_ready_case("case1354pegase") is load_case("case1354pegase")
