"""Wholesale price models ("markets"): how ``price_per_mwh`` is made from the other series.

:func:`market_price` turns one scenario's 5-minute demand, PV and wind capacity factors and
temperature (:mod:`powerzoo.data.profiles`) and the fixed-seed random draws into a 5-minute price,
by one of two models chosen by name (:data:`MARKETS`; every task that reads the price takes it as
its ``market`` keyword, default :data:`DEFAULT_MARKET`). Both are deterministic (fixed seeds)
and take about 0.1 s for the year. All capacities are per unit of the base scenario's annual peak
demand (p.u.).

``high_renewable`` (the default): an energy-only market with a large solar and wind fleet and
scarcity pricing, in the manner of ERCOT.

* Fleet: PV :data:`HR_PV_SHARE` = 0.45 p.u. and wind :data:`HR_WIND_SHARE` = 0.30 p.u. (the
  ``pjm_like`` model's 0.25 and 0.20; ERCOT's 2024 fleet is about 0.3 p.u. of solar and 0.45 of
  wind), must-run plant (nuclear, run-of-river hydro, CHP) :data:`MUST_RUN_PU` = 0.10, and
  :data:`THERMAL_CAPACITY_PU` = 0.95 of dispatchable thermal plant (gas), which must produce
  ``need = demand - PV - wind - must-run``. Units committed for the day's peak cannot go below
  :data:`MIN_GEN_FRACTION` = 15 % of the day's largest ``need``, their minimum stable output.
* Thermal availability: forced outages of 50 equal units, each a two-state Markov chain by day
  with a forced outage rate of 7 % and outages of 4 days on average (fixed seed
  :data:`MARKET_SEED`; NERC GADS forced outage rates of gas and coal units are about 5-10 %);
  planned maintenance of up to 12 % of the fleet in the shoulder seasons (peaks in mid-April and
  mid-October, none in January and July); an ambient derating of 0.4 %/K above 15 deg C (gas
  turbines lose 0.3-0.7 %/K above their ISO rating); and cold-weather outages of 1.5 % of the
  fleet per K below -5 deg C (frozen instruments and gas supply, as in Winter Storms Uri and
  Elliott).
* Energy price, above the committed minimum: a gas-fired merit order,
  ``fuel_index(day) * 3.5 $/MMBtu * HR(u) + 3 $/MWh`` with the fleet's utilisation
  ``u = need / available`` and a gas-equivalent marginal heat rate
  ``HR(u) = 6.5 + 6 u + 30 u^6`` MMBtu/MWh (6.5 for the newest combined cycles, about 10 at half
  load, 13-22 for old steam and peakers at u = 0.7-0.9, 42 for oil-fired peakers at the top:
  26 to 150 $/MWh at the reference gas price, which sits between the 2.2-2.5 $/MMBtu Henry Hub
  averages of 2023-24 and 2022's 6.5). The daily fuel index is the data layer's (log AR(1),
  winter +10 %). Within :data:`MIN_GEN_BAND_PU` = 0.05 p.u. of the committed minimum the offers
  fall linearly to 0 (units bidding down to stay on).
* Below the committed minimum the surplus is curtailed from the renewable fleet, highest bid
  first: the price runs linearly from :data:`SOLAR_BID` = -5 $/MWh (solar with renewable
  certificates, first out) to :data:`WIND_PTC_BID` = -25 $/MWh (wind giving up the 2.75 c/kWh
  production tax credit) as the curtailed share of the renewable output goes from 0 to 1;
  beyond the whole renewable output the must-run plant backs down at the offer floor
  :data:`OFFER_FLOOR` = -50 $/MWh. So prices go negative at low net load: spring and autumn
  middays with a strong sun and a mild load (the duck curve's belly).
* The energy price carries the data layer's intra-day log-normal noise (AR(1), 5 %).
* Scarcity: an operating reserve demand curve (ORDC, Hogan 2013, "Electricity scarcity pricing
  through operating reserves", Economics of Energy & Environmental Policy 2(2); ERCOT since
  2014): ``price = energy + (VOLL - energy) * LOLP(R - X)`` on the reserve
  ``R = available - need``, with ``LOLP(r) = 1 - Phi(r / sigma)`` for ``r > 0`` and 1 below,
  value of lost load :data:`VOLL` = 5,000 $/MWh and minimum contingency level X = 0.035 p.u.
  (ERCOT's 2022 revision: 5,000 $/MWh and 3,000 MW, about 3.5 % of its peak), sigma = 0.02 p.u.
  (about 1,700 MW on ERCOT's peak). Price-responsive demand (large flexible loads, load
  resources, emergency response), :data:`DR_PU` = 6 % of peak, curtails linearly as the price
  rises from 300 to 2,000 $/MWh and adds to the reserve; the price is the fixed point of the two
  curves (bisection). Scarcity comes on summer evenings when the sun sets on a high load, on
  days with many units out.

Stress splits re-derived on this market: ``low_renewable`` (PV and wind x 0.4), ``load_stress``
(demand x 1.15), ``heatwave`` and ``cold_snap`` (their temperatures and demand) change only the
inputs; ``price_spike`` doubles the day's forced outages and trips a further 7.5-15 % of the
thermal fleet for one hour at each of the day's two evening spike times of the data layer
(16:00-21:00, size 2.5 % x its x3-x6 spike factor), so its spikes come from scarcity, most on
days whose reserve is already short, rather than as a multiple of every evening's price.

``pjm_like``: the calm day-ahead merit-order curve of earlier PowerZoo releases, on net load
``nl = demand - 0.25 pv - 0.20 wind``: ``fuel_index * (5 + 64 nl + 1500 max(nl - 0.75, 0)^2)``
times the same intra-day noise, floored at 5 $/MWh (strictly positive); ``price_spike``
multiplies two one-hour windows of each evening (16:00-21:00) by x3 to x6; the other stress
splits change only the inputs. Bit-identical to the former model on the same inputs.

Measured on the test split (the 70 test days, hourly averages; ``benchmarks/market_statistics.py``
prints them, with the ``battery_arbitrage`` oracle: a 25 MW / 100 MWh battery with perfect
foresight and 7.5 $/MWh wear per leg, on the task's 65 test episodes):

====================  =========  =========  ==========  ===========  ==========  ==========
market                TB4 mean   TB4 med.   neg. hours  h>1000 / yr  days>1000   oracle
====================  =========  =========  ==========  ===========  ==========  ==========
``high_renewable``    67.4       38.6       6.4 %       20.9         2           71.5
``pjm_like``          22.0       20.5       0 %         0            0           5.2
====================  =========  =========  ==========  ===========  ==========  ==========

(TB4: the day's mean of its 4 dearest hours less its 4 cheapest, $/MWh; h>1000 / yr: hours above
1,000 $/MWh times 365 / 70; oracle in $/kW-year.) ``high_renewable``: mean price 39.6 $/MWh,
hourly prices -13.5 to 1,805 $/MWh; negative hours 8.8 % of March-May test hours and 0.9 % of
July-August ones, 93 % of them between 09:00 and 16:00; the oracle trades on 83 % of the days.
Over the whole year: 19 hours above 1,000 $/MWh on 9 days (July and August evenings, 1 May and
26 December), negative prices in 6.7 % of hours. The scarcity hours of a 70-day split
are a small sample: with other seeds of the outage draws the year keeps 16-39 such hours, but
the test split's count (from one to three days) ranges from 0 to 47 a year, and the TB4 mean,
which a scarcity day moves by about 15 $/MWh, with it.
What the published record shows, for comparison: ERCOT's battery fleet earned 141, 192 and
55 $/kW-year in 2022, 2023 and 2024 (Modo Energy's ERCOT index), energy arbitrage making 11-58 %
of a month's revenue (the rest ancillary services, which PowerZoo does not sell); CAISO's monthly
TB4 spread was about 45-58 $/MWh at NP15 and 63-86 $/MWh at SP15 in 2024-25; real-time prices
were negative in about 4 % of US node-hours in 2020 (Seel et al., "Plentiful electricity turns
wholesale prices negative", Advances in Applied Energy, 2021).

:func:`price_statistics` computes these figures from any hourly price table (the task card and
the benchmark script use it).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np

from powerzoo.data import calendar

__all__ = [
    "MARKETS",
    "DEFAULT_MARKET",
    "check_market",
    "market_price",
    "price_statistics",
]

MARKETS = ("high_renewable", "pjm_like")
DEFAULT_MARKET = "high_renewable"

STEPS_PER_DAY = 24 * 12  # 5-minute steps
MARKET_SEED = 20230105  # fixed: the outage draws are the same on every machine and run


def check_market(market: str) -> str:
    """Return ``market`` if it is one of :data:`MARKETS`; else raise a ``ValueError`` listing
    them.

    Args:
        market: A market name.

    Returns:
        ``market``.
    """
    if not isinstance(market, str) or market not in MARKETS:
        raise ValueError(f"unknown market {market!r}; valid: {', '.join(MARKETS)}")
    return market


# ---- pjm_like: the calm day-ahead merit order --------------------------------------------------
# price = fuel_index * (PRICE_BASE + PRICE_SLOPE * nl + PRICE_PEAK * max(nl - PRICE_KNEE, 0)^2)
PRICE_BASE, PRICE_SLOPE, PRICE_PEAK, PRICE_KNEE = 5.0, 64.0, 1500.0, 0.75
PRICE_FLOOR = 5.0  # $/MWh
PV_SHARE, WIND_SHARE = 0.25, 0.20  # renewable fleet per unit of peak demand


def _pjm_like(
    scenario: str,
    demand_pu: np.ndarray,
    pv_cf: np.ndarray,
    wind_cf: np.ndarray,
    draws: Mapping[str, np.ndarray],
) -> np.ndarray:
    net_load = demand_pu - PV_SHARE * pv_cf - WIND_SHARE * wind_cf
    merit = (
        PRICE_BASE
        + PRICE_SLOPE * net_load
        + PRICE_PEAK * np.maximum(net_load - PRICE_KNEE, 0.0) ** 2
    )
    price = draws["fuel_index"] * merit * np.exp(draws["price_noise"])
    if scenario == "price_spike":
        per_day = price.reshape(calendar.N_DAYS, STEPS_PER_DAY)
        offsets = np.arange(12)  # one hour of 5-minute steps
        rows = np.arange(calendar.N_DAYS)[:, None, None]
        cols = draws["spike_starts"][:, :, None] + offsets
        per_day[rows, cols] *= draws["spike_factor"][:, :, None]
        price = per_day.reshape(-1)
    return np.maximum(price, PRICE_FLOOR)


# ---- high_renewable: renewables, a gas merit order and ORDC scarcity pricing -------------------
HR_PV_SHARE, HR_WIND_SHARE = 0.45, 0.30  # PV and wind capacity, p.u. of peak demand
MUST_RUN_PU = 0.10  # nuclear, run-of-river hydro, CHP: backed down only at the offer floor
THERMAL_CAPACITY_PU = 0.95  # installed dispatchable (gas) capacity
MIN_GEN_FRACTION = 0.15  # committed minimum: share of the day's largest thermal need
MIN_GEN_BAND_PU = 0.05  # above the minimum, offers rise from 0 to the merit order over this band
GAS_PRICE = 3.5  # $/MMBtu, times the daily fuel index
VOM_PER_MWH = 3.0  # variable operation and maintenance, $/MWh
# gas-equivalent marginal heat rate at utilisation u: MIN + SLOPE u + PEAK u^EXP, MMBtu/MWh
HEAT_RATE_MIN, HEAT_RATE_SLOPE, HEAT_RATE_PEAK, HEAT_RATE_EXP = 6.5, 6.0, 30.0, 6
SOLAR_BID, WIND_PTC_BID = -5.0, -25.0  # $/MWh: the first and the last renewable MW curtailed
OFFER_FLOOR = -50.0  # $/MWh: must-run plant backs down; the market's lowest price
VOLL = 5000.0  # $/MWh: value of lost load, the ORDC's (and the market's) cap
MIN_CONTINGENCY_PU, ORDC_SIGMA_PU = 0.035, 0.02  # ORDC: X and sigma of the reserve, p.u.
DR_PU, DR_LOW, DR_HIGH = 0.06, 300.0, 2000.0  # price-responsive demand: p.u., $/MWh range
FORCED_OUTAGE_RATE, OUTAGE_UNITS, OUTAGE_DAYS = 0.07, 50, 4.0  # units; mean outage length, days
MAINTENANCE_PEAK = 0.12  # planned outage share in mid-April and mid-October
DERATE_PER_K, DERATE_BASE_C = 0.004, 15.0  # ambient derating of the thermal fleet
COLD_OUTAGE_PER_K, COLD_OUTAGE_BASE_C = 0.015, -5.0  # cold-weather outages
SPIKE_OUTAGE_FACTOR, SPIKE_TRIP_PER_FACTOR = 2.0, 0.025  # price_spike: outages x2, hour trips


@functools.lru_cache(maxsize=1)
def _forced_outages() -> np.ndarray:
    """Forced-outage share of the thermal fleet on every day [N_DAYS] (read-only).

    :data:`OUTAGE_UNITS` equal units, each a two-state Markov chain by day: in service it fails
    with probability ``f``, out of service it returns with probability ``1 / OUTAGE_DAYS``, with
    ``f`` set so that the stationary share out is :data:`FORCED_OUTAGE_RATE`; the chains start
    from that stationary state (fixed seed :data:`MARKET_SEED`).
    """
    rng = np.random.default_rng(MARKET_SEED)
    repair = 1.0 / OUTAGE_DAYS
    fail = repair * FORCED_OUTAGE_RATE / (1.0 - FORCED_OUTAGE_RATE)
    out = rng.random(OUTAGE_UNITS) < FORCED_OUTAGE_RATE
    u = rng.random((calendar.N_DAYS, OUTAGE_UNITS))
    share = np.empty(calendar.N_DAYS)
    for day in range(calendar.N_DAYS):
        out = np.where(out, u[day] >= repair, u[day] < fail)
        share[day] = out.mean()
    share.setflags(write=False)
    return share


def _maintenance() -> np.ndarray:
    """Planned-outage share of the thermal fleet on every day [N_DAYS]: a cosine with peaks of
    :data:`MAINTENANCE_PEAK` in mid-April (day 105) and mid-October, zero from December to
    February and from June to August."""
    doy = np.arange(calendar.N_DAYS)
    return MAINTENANCE_PEAK * np.maximum(np.cos(2.0 * np.pi * (doy - 105.0) / 182.5), 0.0)


_ERFC = np.frompyfunc(math.erfc, 1, 1)


def _upper_tail(z: np.ndarray) -> np.ndarray:
    """``1 - Phi(z)`` of the standard normal, elementwise (``math.erfc``: numpy has none, and
    scipy.special alone takes 0.3 s to import)."""
    return 0.5 * _ERFC(np.asarray(z) / math.sqrt(2.0)).astype(np.float64)


def _ordc_price(energy: np.ndarray, reserve: np.ndarray) -> np.ndarray:
    """Price [n] ($/MWh) from the energy price and the reserve (p.u.) [n] under the ORDC, with
    the price-responsive demand's curtailment added to the reserve (module docstring).

    ``price = min(energy + (VOLL - energy) LOLP(R + dr(price) - X), VOLL)``; the right side falls
    as the price rises, so the fixed point is unique; it is found by bisection where the price
    without the demand response is above :data:`DR_LOW`.
    """

    def scarcity(e: np.ndarray, r: np.ndarray) -> np.ndarray:
        z = (r - MIN_CONTINGENCY_PU) / ORDC_SIGMA_PU
        lolp = np.where(z > 0.0, _upper_tail(np.maximum(z, 0.0)), 1.0)
        return np.minimum(e + np.maximum(VOLL - e, 0.0) * lolp, VOLL)

    price = scarcity(energy, reserve)
    tight = np.flatnonzero(price > DR_LOW)
    if tight.size:
        e, r = energy[tight], reserve[tight]
        lo, hi = np.full(tight.size, DR_LOW), price[tight]
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            dr = DR_PU * np.clip((mid - DR_LOW) / (DR_HIGH - DR_LOW), 0.0, 1.0)
            above = scarcity(e, r + dr) > mid
            lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        price[tight] = 0.5 * (lo + hi)
    return price


def _high_renewable(
    scenario: str,
    demand_pu: np.ndarray,
    pv_cf: np.ndarray,
    wind_cf: np.ndarray,
    temp_c: np.ndarray,
    draws: Mapping[str, np.ndarray],
) -> np.ndarray:
    n_days = calendar.N_DAYS
    renewable = HR_PV_SHARE * pv_cf + HR_WIND_SHARE * wind_cf
    need = demand_pu - renewable - MUST_RUN_PU  # what the thermal fleet must produce
    day_peak = need.reshape(n_days, STEPS_PER_DAY).max(axis=1)
    min_gen = np.repeat(MIN_GEN_FRACTION * np.maximum(day_peak, 0.0), STEPS_PER_DAY)

    # thermal plant available: forced and planned outages, cold outages, ambient derating
    forced = _forced_outages()
    if scenario == "price_spike":
        forced = SPIKE_OUTAGE_FACTOR * forced
    out_share = np.repeat(forced + _maintenance(), STEPS_PER_DAY)
    out_share = out_share + COLD_OUTAGE_PER_K * np.maximum(COLD_OUTAGE_BASE_C - temp_c, 0.0)
    if scenario == "price_spike":
        trips = np.zeros((n_days, STEPS_PER_DAY))
        rows = np.arange(n_days)[:, None, None]
        cols = draws["spike_starts"][:, :, None] + np.arange(12)  # one hour from each start
        trips[rows, cols] += SPIKE_TRIP_PER_FACTOR * draws["spike_factor"][:, :, None]
        out_share = out_share + trips.reshape(-1)
    derate = DERATE_PER_K * np.maximum(temp_c - DERATE_BASE_C, 0.0)
    available = THERMAL_CAPACITY_PU * np.clip(1.0 - out_share, 0.0, 1.0) * (1.0 - derate)

    # energy: the gas merit order above the committed minimum, curtailment bids below it
    u = np.clip(need / available, 0.0, 1.0)
    heat_rate = HEAT_RATE_MIN + HEAT_RATE_SLOPE * u + HEAT_RATE_PEAK * u**HEAT_RATE_EXP
    merit = GAS_PRICE * draws["fuel_index"] * heat_rate + VOM_PER_MWH
    ramp_in = np.clip((need - min_gen) / MIN_GEN_BAND_PU, 0.0, 1.0)
    surplus = np.maximum(min_gen - need, 0.0)
    curtailed = surplus / np.maximum(renewable, 1e-9)  # share of the renewable output
    curtail_bid = np.where(
        curtailed < 1.0,
        SOLAR_BID + (WIND_PTC_BID - SOLAR_BID) * np.minimum(curtailed, 1.0),
        OFFER_FLOOR,
    )
    energy = np.where(surplus > 0.0, curtail_bid, merit * ramp_in) * np.exp(draws["price_noise"])
    return np.maximum(_ordc_price(energy, available - need), OFFER_FLOOR)


def market_price(
    market: str,
    scenario: str,
    demand_pu: np.ndarray,
    pv_cf: np.ndarray,
    wind_cf: np.ndarray,
    temp_c: np.ndarray,
    draws: Mapping[str, np.ndarray],
) -> np.ndarray:
    """5-minute price ($/MWh) of ``market`` on one scenario's inputs (module docstring).

    Args:
        market: One of :data:`MARKETS` (``ValueError`` listing them otherwise).
        scenario: The profile scenario (``"base"`` or a stress split); only ``price_spike``
            changes the model itself, the others only its inputs.
        demand_pu: Demand, p.u. of the base scenario's annual peak [N_DAYS * 288].
        pv_cf: PV capacity factor [N_DAYS * 288].
        wind_cf: Wind capacity factor [N_DAYS * 288].
        temp_c: Outdoor temperature, deg C [N_DAYS * 288].
        draws: The data layer's fixed-seed draws: ``fuel_index`` and ``price_noise``
            [N_DAYS * 288], ``spike_starts`` (5-minute step of each day's two spike hours) and
            ``spike_factor`` (their x3-x6 factors) [N_DAYS, 2].

    Returns:
        Prices [N_DAYS * 288], $/MWh (a new array).
    """
    check_market(market)
    if market == "pjm_like":
        return _pjm_like(scenario, demand_pu, pv_cf, wind_cf, draws)
    return _high_renewable(scenario, demand_pu, pv_cf, wind_cf, temp_c, draws)


def price_statistics(prices_hourly: np.ndarray, days: np.ndarray | None = None) -> dict:
    """Statistics of an hourly price table: spreads, negative and scarcity hours.

    Args:
        prices_hourly: Hourly prices [n_days, 24], $/MWh (e.g. a 60-minute profile reshaped).
        days: Rows to use (e.g. a split's calendar days); all rows when ``None``.

    Returns:
        ``days`` (rows used), ``mean``, ``tb4_mean`` and ``tb4_median`` (over the days, of the
        mean of a day's 4 dearest hours less that of its 4 cheapest, $/MWh),
        ``negative_hour_share`` (hours below 0), ``hours_above_1000_per_year`` (hours above
        1,000 $/MWh x 365 / days), ``days_above_1000`` (days with such an hour) and
        ``days_above_1000_per_year`` (x 365 / days), ``min`` and ``max`` ($/MWh).
    """
    x = np.asarray(prices_hourly, dtype=np.float64)
    if days is not None:
        x = x[np.asarray(days)]
    if x.ndim != 2 or x.shape[1] != 24 or x.shape[0] == 0:
        raise ValueError(f"need hourly prices of shape [n_days >= 1, 24], got {x.shape}")
    n = x.shape[0]
    ordered = np.sort(x, axis=1)
    tb4 = ordered[:, -4:].mean(axis=1) - ordered[:, :4].mean(axis=1)
    above = x > 1000.0
    spike_days = int(above.any(axis=1).sum())
    return {
        "days": n,
        "mean": float(x.mean()),
        "tb4_mean": float(tb4.mean()),
        "tb4_median": float(np.median(tb4)),
        "negative_hour_share": float((x < 0.0).mean()),
        "hours_above_1000_per_year": float(above.sum() * 365.0 / n),
        "days_above_1000": spike_days,
        "days_above_1000_per_year": float(spike_days * 365.0 / n),
        "min": float(x.min()),
        "max": float(x.max()),
    }
