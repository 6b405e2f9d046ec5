"""Branch ratings by voltage class (``powerzoo/physics/line_ratings.py``) on case118."""

import dataclasses
import math

import numpy as np
import pytest

from powerzoo.physics.cases import load_case
from powerzoo.physics.line_ratings import (
    CONDUCTORS,
    st_clair_sil_multiple,
    voltage_class_ratings,
    with_voltage_class_ratings,
)


@pytest.fixture(scope="module")
def case118():
    return load_case("case118")


def test_conductor_data_give_the_documented_thermal_ratings_and_sil():
    assert CONDUCTORS[138.0].thermal_mva(138.0) == pytest.approx(216.8, abs=0.05)  # Drake 907 A
    assert CONDUCTORS[345.0].thermal_mva(345.0) == pytest.approx(1207.1, abs=0.05)  # 2 x Cardinal
    assert CONDUCTORS[138.0].sil_mw(138.0) == pytest.approx(50.1, abs=0.1)
    assert CONDUCTORS[345.0].sil_mw(345.0) == pytest.approx(396.8, abs=0.1)


def test_st_clair_fit_passes_near_the_published_points():
    miles = np.array([50.0, 100.0, 200.0, 300.0, 400.0, 600.0])
    published = np.array([3.0, 2.0, 1.3, 1.0, 0.8, 0.6])
    fit = st_clair_sil_multiple(miles * 1.609344)
    np.testing.assert_allclose(fit, published, rtol=0.08)


def test_case118_ratings_by_voltage_class(case118):
    rate = voltage_class_ratings(case118)
    kv = case118.bus_vn_kv[case118.branch_from_bus]
    line = ~case118.branch_is_trafo
    hv138, hv345 = line & (kv == 138.0), line & (kv == 345.0)
    assert hv138.sum() == 165 and hv345.sum() == 8
    # no floor: the former rule put 152 of the 186 branches at exactly 100 MW
    assert np.sum(rate == 100.0) == 0
    assert rate[hv138].max() == pytest.approx(216.8) and rate[hv138].min() > 100.0
    assert np.sum(rate[hv138] == rate[hv138].max()) > 90  # most 138 kV lines are short
    assert 500.0 < rate[hv345].min() and rate[hv345].max() == pytest.approx(1207.1)
    kv_to = case118.bus_vn_kv[case118.branch_to_bus]
    auto = case118.branch_is_trafo & (np.maximum(kv, kv_to) == 345.0)
    assert auto.sum() == 11 and np.all(rate[auto] == 300.0)
    # a 138 kV line's rating falls with its length (series reactance) past the thermal limit
    longest = np.argmax(np.where(hv138, case118.branch_x_pu, 0.0))
    miles = case118.branch_x_pu[longest] * 138.0**2 / 100.0 / 0.50 / 1.609344
    expected = 36.4 * miles**-0.63 * 138.0**2 / 380.0
    assert rate[longest] == pytest.approx(expected, abs=0.05) and expected < 216.8


def test_published_ratings_are_kept_and_other_classes_take_their_band(case118):
    case5 = load_case("case5")
    assert with_voltage_class_ratings(case5) is case5
    assert with_voltage_class_ratings(case118).branch_rate_a_mw.max() < 9000.0
    odd = dataclasses.replace(case118, bus_vn_kv=np.where(case118.bus_vn_kv == 138.0, 69.0, 345.0))
    rate = voltage_class_ratings(odd)
    lines_69 = ~odd.branch_is_trafo & (odd.bus_vn_kv[odd.branch_from_bus] == 69.0)
    # 69 kV lines: one Hawk conductor, 659 A -> 78.8 MVA thermal, less on long lines
    assert rate[lines_69].max() == pytest.approx(np.sqrt(3) * 69.0 * 0.659, abs=0.05)
    assert math.isfinite(float(voltage_class_ratings(case118).sum()))


def test_cases_without_ratings_are_rated_by_band_and_low_voltage_branches_stay_unlimited():
    case300 = load_case("case300")
    rate = voltage_class_ratings(case300)
    kv_from = case300.bus_vn_kv[case300.branch_from_bus]
    kv_to = case300.bus_vn_kv[case300.branch_to_bus]
    low = np.maximum(kv_from, kv_to) < 35.0
    assert low.any() and np.all(np.isinf(rate[low]))
    assert np.all(np.isfinite(rate[~low]))
    lines_230 = ~case300.branch_is_trafo & (kv_from == 230.0) & (kv_to == 230.0)
    # 230 kV: the two-conductor Cardinal bundle, 2,020 A -> 804.7 MVA thermal at most
    assert rate[lines_230].max() <= np.sqrt(3) * 230.0 * 2.020 + 0.05
