"""Data layer: offline, deterministic, calendar-indexed profiles and date splits."""

import subprocess
import sys

import numpy as np
import pytest

from powerzoo.data import BASE_SPLITS, STRESS_SPLITS, get_profiles, split_day_indices
from powerzoo.data.calendar import N_DAYS, base_split_of_days, day_types


def test_base_splits_are_disjoint_and_cover_the_year():
    days = {s: set(np.flatnonzero(base_split_of_days() == s).tolist()) for s in BASE_SPLITS}
    assert not days["train"] & days["val"]
    assert not days["train"] & days["test"]
    assert not days["val"] & days["test"]
    assert set().union(*days.values()) == set(range(N_DAYS))
    assert [len(days[s]) for s in BASE_SPLITS] == [225, 70, 70]


def test_every_split_spans_all_four_seasons():
    from powerzoo.data.calendar import DATES

    season = {12: 0, 1: 0, 2: 0, 3: 1, 4: 1, 5: 1, 6: 2, 7: 2, 8: 2, 9: 3, 10: 3, 11: 3}
    for split in BASE_SPLITS:
        months = DATES[split_day_indices(split)].astype("datetime64[M]").astype(int) % 12 + 1
        assert {season[m] for m in months.tolist()} == {0, 1, 2, 3}, split


def test_stress_splits_start_on_test_days():
    for split in STRESS_SPLITS:
        # subsets: the test starts inside the May-September heat events and the December-March
        # cold events
        if split in ("heatwave", "cold_snap"):
            assert set(split_day_indices(split)) < set(split_day_indices("test"))
        else:
            np.testing.assert_array_equal(split_day_indices(split), split_day_indices("test"))


def test_unknown_split_lists_valid_ones():
    with pytest.raises(ValueError, match="unknown split 'tets'; valid: train, val, test"):
        split_day_indices("tets")


def test_profiles_have_realistic_ranges():
    p = get_profiles("base", 30)
    s = p.series
    assert set(s) == {"demand_pu", "price_per_mwh", "pv_cf", "wind_cf", "temp_c"}
    assert all(v.size == (N_DAYS + 1) * 48 for v in s.values())
    # PV capacity factor is a real fraction, not stuck at 0 or 1 (a constant series would be a data
    # bug)
    assert 0.10 < s["pv_cf"].mean() < 0.25
    assert s["pv_cf"].min() == 0.0 and 0.6 < s["pv_cf"].max() <= 1.0
    noon = p.at("pv_cf", np.arange(N_DAYS), np.full(N_DAYS, 24))
    midnight = p.at("pv_cf", np.arange(N_DAYS), np.zeros(N_DAYS, dtype=int))
    assert noon.mean() > 0.3 and midnight.max() == 0.0
    assert s["demand_pu"].max() <= 1.0 + 1e-12 and s["demand_pu"].min() > 0.2
    # the default market (high_renewable) goes down to its offer floor; pjm_like stays positive
    assert s["price_per_mwh"].min() >= -50.0 and 30 < s["price_per_mwh"].mean() < 60
    pjm = get_profiles("base", 30, "pjm_like").series["price_per_mwh"]
    assert pjm.min() >= 5.0 and 30 < pjm.mean() < 60
    # Greensboro TMY: cold winters, hot summers
    temp_by_day = s["temp_c"][: N_DAYS * 48].reshape(N_DAYS, 48).mean(axis=1)
    assert temp_by_day[:31].mean() < 8 < 22 < temp_by_day[181:212].mean()


def test_daily_episodes_differ():
    p = get_profiles("base", 30)
    days = np.stack([p.day("price_per_mwh", d) for d in range(N_DAYS)])
    assert len({tuple(np.round(d, 6)) for d in days}) == N_DAYS


def test_weekends_have_lower_demand_than_weekdays():
    p = get_profiles("base", 30)
    daily = p.series["demand_pu"][: N_DAYS * 48].reshape(N_DAYS, 48).mean(axis=1)
    kinds = day_types()
    assert daily[kinds == 2].mean() < daily[kinds == 0].mean()


def test_stress_scenarios_shift_inputs_in_the_documented_direction():
    base, heat = get_profiles("base", 30).series, get_profiles("heatwave", 30).series
    assert np.all(heat["temp_c"] >= base["temp_c"])
    assert heat["demand_pu"].mean() > base["demand_pu"].mean()
    low = get_profiles("low_renewable", 30).series
    np.testing.assert_allclose(low["pv_cf"], 0.4 * base["pv_cf"])
    np.testing.assert_allclose(low["wind_cf"], 0.4 * base["wind_cf"])
    # pjm_like multiplies two evening hours a day (high_renewable: tests/data/test_markets.py)
    spike = get_profiles("price_spike", 30, "pjm_like").series["price_per_mwh"]
    assert spike.max() > 3 * get_profiles("base", 30, "pjm_like").series["price_per_mwh"].max()
    stress = get_profiles("load_stress", 30).series
    np.testing.assert_allclose(stress["demand_pu"], 1.15 * base["demand_pu"])


def test_step_length_averaging_preserves_means():
    fine, coarse = get_profiles("base", 5), get_profiles("base", 30)
    np.testing.assert_allclose(
        fine.series["price_per_mwh"].mean(), coarse.series["price_per_mwh"].mean(), rtol=1e-9
    )


def test_profiles_are_identical_across_processes():
    code = (
        "from powerzoo.data import get_profiles; import hashlib; "
        "print(hashlib.sha256(get_profiles('base', "
        "30).series['price_per_mwh'].tobytes()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(digests) == 1


def test_bad_scenario_and_step_length_raise():
    with pytest.raises(ValueError, match="unknown scenario"):
        get_profiles("monsoon", 30)
    with pytest.raises(ValueError, match="multiple of 5"):
        get_profiles("base", 7)


def test_trip_energy_is_drawn_at_the_battery_and_matches_an_epa_rating_at_the_wall():
    # KWH_PER_MILE is storage-side energy: the fleet takes it out of the battery as it is; EPA
    # ratings (0.25-0.35 kWh/mile) are at the wall, so the grid-side figure is the one to check
    import powerzoo.data.mobility as mobility
    from powerzoo.devices.ev_fleet import EVFleetParams, ev_fleet_step

    fleet = EVFleetParams()
    trips = mobility.sample_trips(np.random.default_rng(0), np.array([9]), 1, 64)  # a weekday
    drive = trips.energy_kwh[:, 0]
    assert trips.driven.any()
    np.testing.assert_allclose(drive, trips.miles[:, 0] * mobility.KWH_PER_MILE)
    energy = np.full((1, 64), 50.0)
    step = ev_fleet_step(
        fleet, energy, np.zeros((1, 64)), np.zeros((1, 64), dtype=bool), drive, 1.0
    )
    np.testing.assert_allclose(energy - step.energy_kwh, drive, rtol=1e-12)  # at the battery
    wall_kwh_per_mile = mobility.KWH_PER_MILE / fleet.charge_efficiency
    assert 0.25 <= wall_kwh_per_mile <= 0.35
    doc = mobility.__doc__
    assert "at the battery" in doc and "at the wall" in doc and "0.326" in doc
