"""The wind, load and heatwave series against the figures an engineer would check."""

import numpy as np

from powerzoo.data import get_profiles, split_day_indices
from powerzoo.data.calendar import DATES, N_DAYS, day_types

MONTH = DATES.astype("datetime64[M]").astype(int) % 12 + 1


def _hourly(scenario: str, name: str) -> np.ndarray:
    return get_profiles(scenario, 60).series[name][: N_DAYS * 24].reshape(N_DAYS, 24)


def test_wind_is_a_plausible_onshore_plant():
    wind = _hourly("base", "wind_cf")
    # the 10 m anemometer with a 1/7 power law gave 0.080 and zero output in 23 % of hours
    assert 0.25 <= wind.mean() <= 0.45
    assert (wind <= 0.0).mean() < 0.10 and (wind < 0.01).mean() < 0.10
    assert wind.max() <= 0.85 + 1e-9  # plant losses: never the full nameplate
    # no false afternoon maximum from the 10 m anemometer
    by_hour = wind.mean(axis=0)
    assert by_hour.max() - by_hour.min() < 0.02
    # windy winter and spring, calm late summer
    assert wind[MONTH == 3].mean() > wind[MONTH == 8].mean() + 0.1


def test_low_renewable_removes_a_real_amount_of_wind():
    base, low = _hourly("base", "wind_cf"), _hourly("low_renewable", "wind_cf")
    test = split_day_indices("test")
    assert 200 * (base[test].mean() - low[test].mean()) > 25.0  # MW of a 200 MW farm


def test_load_has_a_us_system_shape():
    demand = _hourly("base", "demand_pu")
    kinds = day_types()
    ratio = (demand.min(axis=1) / demand.max(axis=1)).mean()
    assert 0.55 <= ratio <= 0.75  # the German household/commerce mix gave 0.39
    summer_weekdays = np.isin(MONTH, (6, 7, 8)) & (kinds == 0)
    peak_hour = demand[summer_weekdays].argmax(axis=1)
    assert np.isin(peak_hour, range(15, 20)).mean() > 0.8  # was 11:00 on 277 days of the year
    winter = demand[np.isin(MONTH, (12, 1, 2)) & (kinds == 0)].mean(axis=0)
    assert winter[7:10].max() > winter[11:15].min() < winter[17:21].max()
    assert MONTH[demand.max(axis=1).argmax()] in (6, 7, 8)
    assert get_profiles("base", 5).series["demand_pu"].max() == 1.0


def test_summer_peak_rises_two_to_three_percent_per_kelvin():
    demand, temp = _hourly("base", "demand_pu"), _hourly("base", "temp_c")
    days = np.isin(MONTH, (6, 7, 8)) & (day_types() == 0)
    peak = demand.max(axis=1)[days]
    slope = np.polyfit(temp.max(axis=1)[days], peak, 1)[0]
    assert 0.02 <= slope / peak.mean() <= 0.03


def test_heatwave_events_only_raise_demand_in_may_to_september():
    base, heat = get_profiles("base", 5).series, get_profiles("heatwave", 5).series
    n = N_DAYS * 288
    assert np.all(heat["demand_pu"] >= base["demand_pu"])
    outside = ~np.isin(np.repeat(MONTH, 288), (5, 6, 7, 8, 9))
    for name in ("demand_pu", "temp_c", "pv_cf", "price_per_mwh"):
        np.testing.assert_array_equal(heat[name][:n][outside], base[name][:n][outside])
    # January is no longer warmed (it was +7 K all year, which lowered winter demand)
    assert np.array_equal(heat["demand_pu"][: 31 * 288], base["demand_pu"][: 31 * 288])


def test_heatwave_split_episodes_see_the_heat():
    base, heat = _hourly("base", "demand_pu"), _hourly("heatwave", "demand_pu")
    for episode_days in (1, 7):
        starts = split_day_indices("heatwave", episode_days=episode_days)
        assert starts.size >= 1
        days = np.concatenate([np.arange(d, d + episode_days) for d in starts])
        assert np.isin(MONTH[days], (5, 6, 7, 8, 9)).all()
        assert heat[days].mean() > 1.05 * base[days].mean()


def test_pjm_like_prices_stay_positive_with_an_evening_peak():
    # the calm market; the default high_renewable one: tests/data/test_markets.py
    price = get_profiles("base", 60, "pjm_like").series["price_per_mwh"][: N_DAYS * 24]
    price = price.reshape(N_DAYS, 24)[split_day_indices("test")]
    assert price.min() > 5.0
    assert 35.0 < price.mean() < 45.0
    assert np.isin(price.argmax(axis=1), range(16, 21)).mean() > 0.7


def test_winter_peak_comes_within_ten_percent_of_the_summer_peak():
    # heat pumps with resistance backup: the Southeast's systems peak in winter as often as in
    # summer (the heating term alone gave January 0.81 against July 0.99)
    peak = _hourly("base", "demand_pu").max(axis=1)
    winter, summer = peak[np.isin(MONTH, (12, 1, 2))].max(), peak[np.isin(MONTH, (6, 7, 8))].max()
    assert 0.9 <= winter / summer < 1.0
    # the extra heating load is steeper below freezing than above it
    from powerzoo.data import load

    heating = load.heating_response(np.array([10.0, 5.0, 0.0, -5.0]))
    assert np.diff(heating)[2] > 2.0 * np.diff(heating)[0] > 0.0


def test_cold_snap_events_only_raise_demand_in_december_to_march():
    base, cold = get_profiles("base", 5).series, get_profiles("cold_snap", 5).series
    n = N_DAYS * 288
    assert np.all(cold["demand_pu"] >= base["demand_pu"])
    assert np.all(cold["temp_c"] <= base["temp_c"])
    outside = ~np.isin(np.repeat(MONTH, 288), (12, 1, 2, 3))
    for name in ("demand_pu", "temp_c", "pv_cf", "wind_cf"):
        np.testing.assert_array_equal(cold[name][:n][outside], base[name][:n][outside])
    colder = (cold["temp_c"][:n] < base["temp_c"][:n]).reshape(N_DAYS, 288).any(axis=1)
    # the events tile the test days of 26 February-11 March and 3-16 December
    assert colder.sum() == 28 and np.isin(MONTH[colder], (2, 3, 12)).all()
    anomaly = (cold["temp_c"][:n] - base["temp_c"][:n]).reshape(N_DAYS, 288)[colder]
    assert -10.0 <= anomaly.min() < -6.0 * 0.99


def test_cold_snap_split_episodes_see_the_cold():
    base, cold = _hourly("base", "demand_pu"), _hourly("cold_snap", "demand_pu")
    temp_base, temp_cold = _hourly("base", "temp_c"), _hourly("cold_snap", "temp_c")
    for episode_days in (1, 7):
        starts = split_day_indices("cold_snap", episode_days=episode_days)
        assert starts.size == (26 if episode_days == 1 else 14)
        assert set(starts) < set(split_day_indices("test", episode_days=episode_days))
        days = np.concatenate([np.arange(d, d + episode_days) for d in starts])
        assert np.isin(MONTH[days], (12, 1, 2, 3)).all()
        # every episode day lies in an event
        assert (temp_cold[days] < temp_base[days]).any(axis=1).all()
        assert cold[days].mean() > 1.05 * base[days].mean()
