"""The price models of powerzoo.data.markets against their target statistics on the test split."""

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from powerzoo.data import calendar, markets, profiles
from powerzoo.data.markets import DEFAULT_MARKET, MARKETS, market_price, price_statistics
from powerzoo.data.profiles import get_profiles

N = calendar.N_DAYS
TEST_DAYS = np.flatnonzero(calendar.base_split_of_days() == "test")  # the 70 test days
MONTH = calendar.DATES.astype("datetime64[M]").astype(int) % 12 + 1


def _hourly(scenario: str, market: str) -> np.ndarray:
    return get_profiles(scenario, 60, market).series["price_per_mwh"][: N * 24].reshape(N, 24)


def _inputs(scenario: str) -> tuple[dict, dict]:
    """A scenario's 5-minute series and the data layer's draws."""
    series = get_profiles(scenario, 5, "pjm_like").series
    return {k: v[: N * 288] for k, v in series.items()}, profiles._base_inputs()


def test_the_markets_and_the_default():
    assert MARKETS == ("high_renewable", "pjm_like") and DEFAULT_MARKET == "high_renewable"
    assert get_profiles("base", 30).market == "high_renewable"
    np.testing.assert_array_equal(
        get_profiles("base", 30).series["price_per_mwh"],
        get_profiles("base", 30, "high_renewable").series["price_per_mwh"],
    )
    # the market changes the price only
    hr, pjm = get_profiles("base", 30).series, get_profiles("base", 30, "pjm_like").series
    for name in ("demand_pu", "pv_cf", "wind_cf", "temp_c"):
        np.testing.assert_array_equal(hr[name], pjm[name])


def test_an_unknown_market_lists_the_valid_ones():
    message = r"unknown market 'ercot'; valid: high_renewable, pjm_like"
    with pytest.raises(ValueError, match=message):
        get_profiles("base", 30, "ercot")
    with pytest.raises(ValueError, match=message):
        markets.check_market("ercot")
    from powerzoo.tasks import make_task, task_spec

    for task in ("battery_arbitrage", "dso", "marl_der_arbitrage", "dc_microgrid"):
        with pytest.raises(ValueError, match=message):
            task_spec(task, market="ercot")
    assert make_task("battery_arbitrage", "test", market="pjm_like").profiles.market == "pjm_like"


@pytest.mark.parametrize("scenario", ["base", "price_spike", "load_stress"])
def test_pjm_like_is_the_former_formula_bit_for_bit(scenario):
    s, raw = _inputs(scenario)
    net_load = s["demand_pu"] - 0.25 * s["pv_cf"] - 0.20 * s["wind_cf"]
    merit = 5.0 + 64.0 * net_load + 1500.0 * np.maximum(net_load - 0.75, 0.0) ** 2
    price = raw["fuel_index"] * merit * np.exp(raw["price_noise"])
    if scenario == "price_spike":
        per_day = price.reshape(N, 288)
        cols = raw["spike_starts"][:, :, None] + np.arange(12)
        per_day[np.arange(N)[:, None, None], cols] *= raw["spike_factor"][:, :, None]
        price = per_day.reshape(-1)
    price = np.maximum(price, 5.0)
    assert np.array_equal(s["price_per_mwh"], price)


def test_high_renewable_meets_its_targets_on_the_test_split():
    stats = price_statistics(_hourly("base", "high_renewable"), TEST_DAYS)
    assert stats["days"] == 70
    assert 40.0 <= stats["tb4_mean"] <= 80.0
    assert 30.0 <= stats["tb4_median"] <= 50.0
    assert 0.03 <= stats["negative_hour_share"] <= 0.08
    assert 10.0 <= stats["hours_above_1000_per_year"] <= 40.0
    assert stats["days_above_1000_per_year"] <= 15.0
    assert markets.OFFER_FLOOR <= stats["min"] < 0.0 and stats["max"] <= markets.VOLL
    # the test split's scarcity hours come from two days; the whole year has the same rate
    year = price_statistics(_hourly("base", "high_renewable"))
    assert 10.0 <= year["hours_above_1000_per_year"] <= 40.0 and year["days_above_1000"] <= 15


def test_negative_prices_are_mostly_spring_middays():
    price = _hourly("base", "high_renewable")[TEST_DAYS]
    month = MONTH[TEST_DAYS]
    negative = price < 0.0
    spring = negative[np.isin(month, (3, 4, 5))].mean()
    summer = negative[np.isin(month, (7, 8))].mean()
    assert spring > 2.0 * summer
    assert negative[:, 9:16].sum() >= 0.7 * negative.sum()  # 09:00-16:00


def test_the_battery_oracle_earns_40_to_100_dollars_per_kw_year(monkeypatch):
    """The ``battery_arbitrage`` oracle (perfect-foresight LP per day) on the task's test
    episodes at 7.5 $/MWh wear per leg; its LP never charges and discharges in the same step (so
    the net power the task applies is the LP's plan)."""
    import powerzoo.tasks.battery_arbitrage as module
    from powerzoo.tasks import make_task

    solved = []
    real = module.new_highs

    def recording(*args, **kwargs):
        solved.append(real(*args, **kwargs))
        return solved[-1]

    monkeypatch.setattr(module, "new_highs", recording)
    task = make_task("battery_arbitrage", "test", degradation_cost_per_mwh=7.5)
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.arange(task.n_days))
    plan = task.oracle_plan(state)
    total = np.zeros(task.n_days)
    for t in range(plan.shape[1]):
        state, out = task.step(state, plan[:, t, :], rng)
        total += out.reward
    kw_year = total.mean() * 365.0 / (task.battery.power_max_mw * 1000.0)
    assert 40.0 <= kw_year <= 100.0
    assert np.mean(np.abs(plan).max(axis=(1, 2)) > 1e-6) > 0.5  # it trades on most days
    h = plan.shape[1]
    assert len(solved) == task.n_days
    for highs in solved:
        col = np.asarray(highs.getSolution().col_value)
        assert not np.any((col[:h] > 1e-6) & (col[h : 2 * h] > 1e-6))


def test_stress_splits_reuse_the_model_and_price_spike_adds_scarcity():
    s, raw = _inputs("load_stress")
    args = (s["demand_pu"], s["pv_cf"], s["wind_cf"], s["temp_c"], raw)
    # only price_spike changes the model; the other stress splits change only its inputs
    for scenario in ("low_renewable", "load_stress", "heatwave", "cold_snap"):
        np.testing.assert_array_equal(
            market_price("high_renewable", scenario, *args),
            market_price("high_renewable", "base", *args),
        )
    base = price_statistics(_hourly("base", "high_renewable"), TEST_DAYS)
    spike = price_statistics(_hourly("price_spike", "high_renewable"), TEST_DAYS)
    assert spike["hours_above_1000_per_year"] > 2.0 * base["hours_above_1000_per_year"]
    # scarcity, not a multiple of every evening: the calm evenings keep their price
    ratio = _hourly("price_spike", "high_renewable")[TEST_DAYS, 16:21] / np.maximum(
        _hourly("base", "high_renewable")[TEST_DAYS, 16:21], 1.0
    )
    assert np.median(ratio) < 1.5
    for scenario in profiles.SCENARIOS:
        price = get_profiles(scenario, 5, "high_renewable").series["price_per_mwh"]
        assert markets.OFFER_FLOOR <= price.min() and price.max() <= markets.VOLL


def test_the_prices_are_deterministic():
    s, raw = _inputs("base")
    args = (s["demand_pu"], s["pv_cf"], s["wind_cf"], s["temp_c"], raw)
    first = market_price("high_renewable", "base", *args)
    markets._forced_outages.cache_clear()
    assert np.array_equal(first, market_price("high_renewable", "base", *args))
    code = (
        "from powerzoo.data import get_profiles; import hashlib; print(hashlib.sha256(get_profiles("
        "'base', 30, 'high_renewable').series['price_per_mwh'].tobytes()).hexdigest())"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    here = get_profiles("base", 30, "high_renewable").series["price_per_mwh"].tobytes()
    assert other.stdout.strip() == hashlib.sha256(here).hexdigest()


def test_price_statistics_on_a_hand_made_table():
    day = np.arange(24, dtype=float)  # TB4: (20+21+22+23)/4 - (0+1+2+3)/4 = 20
    spiky = day.copy()
    spiky[18], spiky[3] = 2000.0, -10.0
    stats = price_statistics(np.stack([day, spiky]))
    assert stats["days"] == 2 and stats["tb4_median"] == stats["tb4_mean"]
    assert stats["hours_above_1000_per_year"] == 365.0 / 2 and stats["days_above_1000"] == 1
    assert stats["negative_hour_share"] == 1 / 48 and stats["min"] == -10.0
    assert stats["max"] == 2000.0
    assert price_statistics(np.stack([day, spiky]), [0])["tb4_mean"] == 20.0
    with pytest.raises(ValueError, match="hourly prices"):
        price_statistics(np.zeros((3, 48)))
