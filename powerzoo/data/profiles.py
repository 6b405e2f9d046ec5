"""Calendar-indexed exogenous profiles: demand, price, PV, wind, outdoor temperature.

Every series is built once per process at 5-minute resolution for the calendar year of
:mod:`powerzoo.data.calendar`, deterministically (fixed generator seeds), and then averaged to
the step length a task asks for. The step path only slices the resulting numpy arrays.

How each series is made (provenance of the raw inputs in :mod:`powerzoo.data.sources`);
figures measured on the hourly averages of the base scenario (``tests/data`` checks them):

* ``temp_c``: TMY3 dry-bulb temperature, hourly values interpolated to 5 min.
* ``pv_cf``: AC output per unit of AC rating of a fixed-tilt PV plant (30 deg, facing south;
  :mod:`powerzoo.data.weather`): TMY3 DNI, DHI and GHI transposed onto the array by the
  Hay-Davies model (albedo 0.2) with the sun of each hour at the mid-point of its sunlit part
  (NOAA solar equations, within 0.02 deg of pvlib's SPA); 1,744 kWh/m^2 a year on the array
  against 1,566 on the horizontal. Faiman cell temperature, -0.35 %/K, 14.08 % system losses
  (PVWatts' default), DC/AC ratio 1.3 into an inverter with PVWatts' efficiency curve
  (nominal 96 %) that clips at its rating (within 1 % of it in 1 % of daylight hours). The
  hourly irradiance is interpolated to 5 min before the temperature and clipping are applied.
  Annual capacity factor 0.207, below the US utility-scale average of about 0.25 (EIA,
  2014-2017, led by Southwestern plants, many on trackers), as a fixed array under the
  Southeast's cloudier sky should be (the model on horizontal irradiance gave 0.147); monthly
  Jan-Dec 0.16 0.19 0.22 0.24 0.23 0.24 0.24 0.24 0.21 0.20 0.15 0.16.
* ``wind_cf``: a good onshore plant at 100 m hub height (:mod:`powerzoo.data.weather`). The
  TMY3 10 m airport speeds set only the timing: each hour's rank among the speeds of its hour
  of day (calm ties broken by a fixed-seed AR(1)) becomes a normal score; the scores are
  smoothed by a centred Gaussian kernel (std 1.5 h: a TMY3 hour is one short observation and
  its months come from different years, so the raw ranks jump from hour to hour) and their
  ranks over the year mapped onto a hub-height Weibull distribution, shape k = 2.0 and mean
  7.5 m/s (k near 2 is the usual onshore default and the IEC 61400-1 design distribution;
  7.5 m/s at 100 m is a good US onshore site, above the 6.5 m/s at 80 m that NREL's wind
  resource maps treat as suitable for development). The speeds pass through the measured power
  curve of an Enercon E-115 (3.0 MW, 116 m rotor, IEC IIA; from windpowerlib's turbine
  library, read as CSV) at the hub's air density (1.182 kg/m^3), averaged over a 1 m/s spread
  of speeds across the plant's turbines (a plant curve), less 15 % plant losses (wake about
  8 %, availability about 4 %, electrical about 3 %). Annual capacity factor 0.376, within the
  0.30-0.45 of new US onshore plants (NREL Annual Technology Baseline); never exactly zero,
  below 1 % of capacity in 7 % of hours, at most 0.85. Hour to hour: lag-1 autocorrelation
  0.974 and 99th percentile of ``|delta CF|`` 0.236, inside the 0.973-0.981 and 0.22-0.37 of
  measured SimBench plant profiles (the raw ranks gave 0.856 and 0.51). Monthly capacity
  factors Jan-Dec: 0.41 0.48 0.52 0.37 0.34 0.38 0.28 0.22 0.22 0.39 0.50 0.41 (windy winter
  and spring, calm late summer, as in the Southeast). Known limitation: the 10 m anemometer
  peaks in the afternoon (surface mixing) while 100 m winds in the region often peak at night;
  ranking within each hour of day removes the afternoon peak, so the series has no diurnal
  cycle in the mean (0.37-0.38 in every hour), neither the false afternoon one nor a nocturnal
  one.
* ``demand_pu``: a Southeast-US system load (the weather is Greensboro, NC;
  :mod:`powerzoo.data.load`). A base shape by hour of day and day type (weekday / Saturday /
  Sunday-holiday, :data:`powerzoo.data.load.LOAD_SHAPE`: night trough at 04:00, morning ramp,
  evening peak at 18:00-20:00) times a temperature response on the temperature smoothed with a
  3 h time constant (building thermal lag): cooling +3.0 % of base load per K above 18 deg C;
  heating +1.2 %/K below 11 deg C plus a further +2.0 %/K below 0 deg C (heat pumps below
  their balance point, resistance backup at a coefficient of performance of 1; the reasons and
  sources are in :mod:`powerzoo.data.load`); times AR(1) noise (sigma 1.5 %); scaled so the
  base-scenario annual peak is 1.0. Measured: mean daily min/max 0.62 (US system load
  0.55-0.75); the summer (June-August) weekday peak falls in 15:00-19:00 on 97 % of days,
  mostly at 18:00; winter weekdays have a morning peak at 08:00 (0.73) and an evening one at
  18:00-20:00 (0.74) over a 0.68 midday; the summer weekday daily peak rises 2.1 %/K of daily
  maximum temperature (least squares; the 3 %/K applies to the base load, the lag and the
  evening timing of the peak dilute it); monthly peaks Jan-Dec 0.93 0.92 0.83 0.87 0.90 0.96
  0.99 0.97 0.87 0.78 0.74 0.93, the annual peak on 13 July and the winter (December-February)
  peak 0.93 of the summer one, at 08:00 or 19:00 on the coldest days (a dual-peaking system,
  as many in the Southeast are; the heating term of 1.2 %/K alone gave January 0.81).
* ``price_per_mwh``: the price model of a market (:mod:`powerzoo.data.markets`, chosen by
  :func:`get_profiles`' ``market``, every other series is the same in every market) on this
  scenario's demand, PV, wind and temperature, with a daily fuel index (log AR(1), winter
  +10 %) and intra-day log-normal noise (AR(1), 5 %) drawn here. ``high_renewable`` (the
  default): a large solar and wind fleet, renewables bidding negative when they must be
  curtailed (offer floor -50 $/MWh), a gas merit order on the thermal fleet's utilisation after
  random forced outages, and ERCOT-style scarcity pricing (an operating reserve demand curve up
  to 5,000 $/MWh); on the test split a midday trough with negative prices in 6 % of hours (mostly
  spring middays), evening peaks and a few scarcity hours: the day's top-4 minus bottom-4 hour
  spread 67 $/MWh on average (median 39). ``pjm_like``: the calm merit-order curve of earlier
  releases on net load ``nl = demand - 0.25 pv - 0.20 wind``,
  ``fuel_index(day) * (5 + 64 nl + 1500 max(nl - 0.75, 0)^2)`` times the noise, floored at
  5 $/MWh (mean 39 $/MWh on the test split, spread 22 $/MWh).

Stress scenarios transform the inputs and re-derive what depends on them: ``heatwave``
(heat events in May-September, below), ``low_renewable`` (PV and wind x 0.4), ``load_stress``
(demand x 1.15), ``price_spike`` (two one-hour events in the 16:00-21:00 window of every day:
price spikes of x3 to x6 under ``pjm_like``, thermal unit trips on doubled forced outages under
``high_renewable``, :mod:`powerzoo.data.markets`), ``cold_snap`` (cold events in December-March,
below).

``heatwave`` events: back-to-back events of 3-6 days (the last of a run cut at its end), each
with an afternoon peak anomaly drawn in 5-8 K (fixed seed), tile the test days of May-September
(7-20 May, 16-29 July, 24-30 September: nine events, 35 days). The anomaly peaks at 15:00 and
keeps 30 % of its peak at night, ramping in over the first morning and out over the last
evening of each run. The event adds cooling load (the heating term stays on the base
temperature, so demand never falls) and warms the PV cells; every series equals the base
scenario outside the event days. The ``heatwave`` split starts only on episodes inside those
days, whose mean demand is 9 % above the base scenario's.

``cold_snap`` events: back-to-back arctic outbreaks of 2-5 days (the last of a run cut at its
end), each with a dawn peak anomaly drawn in -6 to -10 K (fixed seed), tile the test days of
December-March (26 February-11 March, 3-16 December: nine events, 28 days). The anomaly is
deepest at 06:00 and keeps 60 % of it at 18:00 (mean -6.5 K over the event days, whose mean
daily minimum falls from 2.8 to -5.1 deg C), ramping in over the first morning and out over the
last afternoon and evening of each run. The event adds heating load (the cooling term stays on
the base temperature, so demand never falls) and cools the PV cells; every series equals the
base scenario outside the event days (the daily peak of an event day is 9.5 % higher on
average). The ``cold_snap`` split starts only on episodes inside those days, whose mean demand
is 8.6 % above the base scenario's.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from powerzoo.data import calendar, load, weather
from powerzoo.data.markets import DEFAULT_MARKET, check_market, market_price
from powerzoo.data.sources import read_tmy3_weather

__all__ = ["Profiles", "SERIES", "SCENARIOS", "get_profiles"]

BASE_MINUTES = 5
BASE_STEPS_PER_DAY = 24 * 60 // BASE_MINUTES
SERIES = ("demand_pu", "price_per_mwh", "pv_cf", "wind_cf", "temp_c")
SCENARIOS = ("base",) + calendar.STRESS_SPLITS
DATA_SEED = 20230101  # fixed: the profiles are the same on every machine and run

# units of each series, for documentation and plots
SERIES_UNITS = {
    "demand_pu": "p.u. of annual peak",
    "price_per_mwh": "$/MWh",
    "pv_cf": "fraction of PV capacity",
    "wind_cf": "fraction of wind capacity",
    "temp_c": "deg C",
}


@dataclasses.dataclass(frozen=True)
class Profiles:
    """Exogenous series of one scenario at one step length.

    Each series is a flat float64 array of ``(N_DAYS + 1) * steps_per_day`` values: the year
    followed by one wrap-around day (1 January again), so a window that starts on 31 December
    and looks ahead never runs off the end.
    """

    scenario: str
    step_minutes: int
    steps_per_day: int
    dates: np.ndarray
    series: dict[str, np.ndarray]
    market: str = DEFAULT_MARKET  # the price model of ``price_per_mwh`` (powerzoo.data.markets)

    def index(self, day: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Flat index of step ``t`` of calendar day ``day`` (both int arrays, broadcast).

        Args:
            day: Day-of-year indices.
            t: Step indices within the day (may run past midnight into the next days).

        Returns:
            Flat indices into each series.
        """
        return day * self.steps_per_day + t

    def at(self, name: str, day: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Value of series ``name`` at step ``t`` of calendar day ``day`` (batched).

        Args:
            name: A series name of :data:`SERIES` (units in its name or the module docstring).
            day: Day-of-year indices [B].
            t: Step indices [B].

        Returns:
            Values [B] in the series' unit.
        """
        return self.series[name][self.index(day, t)]

    def window(self, name: str, day: np.ndarray, t: np.ndarray, length: int) -> np.ndarray:
        """Values of ``name`` for steps ``t .. t + length - 1`` of each row: [B, length].

        Args:
            name: A series name.
            day: Day-of-year indices [B].
            t: First step of each window [B].
            length: Steps per window.

        Returns:
            Values [B, length] in the series' unit.
        """
        idx = self.index(day, t)[:, None] + np.arange(length)
        return self.series[name][idx]

    def day(self, name: str, day: int) -> np.ndarray:
        """One calendar day of series ``name`` [steps_per_day].

        Args:
            name: A series name.
            day: Day-of-year index.

        Returns:
            Values [steps_per_day] in the series' unit.
        """
        start = day * self.steps_per_day
        return self.series[name][start : start + self.steps_per_day]


# shared helpers (the price code draws its noise with the same AR(1))
_interp_hourly = weather.interp_hourly
_ar1 = weather.ar1


@functools.lru_cache(maxsize=8)
def _base_inputs() -> dict[str, np.ndarray]:
    """Scenario-independent raw inputs at 5 minutes, plus the fixed random draws."""
    tmy = read_tmy3_weather()
    n = calendar.N_DAYS * BASE_STEPS_PER_DAY
    rng = np.random.default_rng(DATA_SEED)
    daily_fuel = np.exp(_ar1(rng, calendar.N_DAYS, rho=0.97, sigma=0.08))
    month = calendar.DATES.astype("datetime64[M]").astype(np.int64) % 12
    daily_fuel *= np.where(np.isin(month, (0, 1, 11)), 1.10, 1.0)
    spike_rng = np.random.default_rng(DATA_SEED + 1)
    spike_starts = spike_rng.integers(16 * 12, 20 * 12, size=(calendar.N_DAYS, 2))
    spike_factor = spike_rng.uniform(3.0, 6.0, size=(calendar.N_DAYS, 2))
    hub_speed = weather.hub_speed(tmy["wind_speed_m_per_s"], np.random.default_rng(DATA_SEED + 2))
    temp_c = _interp_hourly(tmy["temp_c"])
    return {
        "poa": np.maximum(_interp_hourly(weather.plane_of_array_hourly(tmy)), 0.0),
        "wind_10m": np.maximum(_interp_hourly(tmy["wind_speed_m_per_s"]), 0.0),
        "temp_c": temp_c,
        "lagged_temp_c": load.lagged(temp_c),
        "hub_speed": np.maximum(_interp_hourly(hub_speed), 0.0),
        "load_shape": load.load_shape(),
        "load_noise": _ar1(rng, n, rho=0.98, sigma=0.015),
        "price_noise": _ar1(rng, n, rho=0.95, sigma=0.05),
        "fuel_index": np.repeat(daily_fuel, BASE_STEPS_PER_DAY),
        "spike_starts": spike_starts,
        "spike_factor": spike_factor,
        "heat_anomaly": weather.heat_anomaly(np.random.default_rng(DATA_SEED + 3)),
        "cold_anomaly": weather.cold_anomaly(np.random.default_rng(DATA_SEED + 4)),
    }


def _build_5min(scenario: str, market: str = DEFAULT_MARKET) -> dict[str, np.ndarray]:
    raw = _base_inputs()
    anomaly = {"heatwave": raw["heat_anomaly"], "cold_snap": raw["cold_anomaly"]}.get(scenario)
    temp_c = raw["temp_c"] if anomaly is None else raw["temp_c"] + anomaly
    pv_cf = weather.pv_capacity_factor(raw["poa"], temp_c, raw["wind_10m"])
    wind_cf = weather.wind_capacity_factor(raw["hub_speed"])
    if scenario == "low_renewable":
        pv_cf, wind_cf = 0.4 * pv_cf, 0.4 * wind_cf

    # demand: the base-scenario peak sets the per-unit base for every scenario. A heat event
    # moves only the cooling term and a cold event only the heating term, so an event never
    # lowers demand (heat would shed a little heating on the coolest May and September nights).
    lagged = raw["lagged_temp_c"]
    base_demand = load.demand(raw["load_shape"], raw["load_noise"], lagged, lagged)
    if anomaly is not None:
        event_lagged = load.lagged(temp_c)
        cooling_c, heating_c = (
            (event_lagged, lagged) if scenario == "heatwave" else (lagged, event_lagged)
        )
        scenario_demand = load.demand(raw["load_shape"], raw["load_noise"], cooling_c, heating_c)
        on_event_day = np.repeat(
            (anomaly.reshape(calendar.N_DAYS, -1) != 0.0).any(axis=1), BASE_STEPS_PER_DAY
        )
        scenario_demand = np.where(on_event_day, scenario_demand, base_demand)
    else:
        scenario_demand = base_demand
    demand_pu = scenario_demand / base_demand.max()
    if scenario == "load_stress":
        demand_pu = demand_pu * 1.15

    # the price model of the market (powerzoo.data.markets) on this scenario's inputs
    price = market_price(market, scenario, demand_pu, pv_cf, wind_cf, temp_c, raw)
    return {
        "demand_pu": demand_pu,
        "price_per_mwh": price,
        "pv_cf": pv_cf,
        "wind_cf": wind_cf,
        "temp_c": temp_c,
    }


@functools.lru_cache(maxsize=32)
def get_profiles(
    scenario: str = "base", step_minutes: int = 30, market: str = DEFAULT_MARKET
) -> Profiles:
    """Profiles of ``scenario`` averaged to ``step_minutes`` (a multiple of 5 dividing a day),
    with the prices of ``market`` (one of :data:`powerzoo.data.markets.MARKETS`; the other
    series do not depend on it).

    Cached per process and per ``(scenario, step_minutes, market)``: every env of a process
    shares the same read-only arrays.
    """
    check_market(market)
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; valid: {', '.join(SCENARIOS)}")
    if step_minutes % BASE_MINUTES or (24 * 60) % step_minutes:
        raise ValueError(f"step_minutes must be a multiple of 5 dividing 1440, got {step_minutes}")
    factor = step_minutes // BASE_MINUTES
    steps_per_day = 24 * 60 // step_minutes
    series = {}
    for name, values in _build_5min(scenario, market).items():
        coarse = values.reshape(-1, factor).mean(axis=1)
        padded = np.concatenate([coarse, coarse[:steps_per_day]])  # wrap-around day
        padded.setflags(write=False)
        series[name] = padded
    return Profiles(
        scenario=scenario,
        step_minutes=step_minutes,
        steps_per_day=steps_per_day,
        dates=calendar.DATES,
        series=series,
        market=market,
    )
