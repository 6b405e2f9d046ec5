"""Calendar-indexed exogenous profiles: demand, price, PV, wind, outdoor temperature.

Every series is built once per process at 5-minute resolution for the calendar year of
:mod:`powerzoo.data.calendar`, deterministically (fixed generator seeds), and then averaged to
the step length a task asks for. The step path only slices the resulting numpy arrays.

How each series is made (provenance of the raw inputs in :mod:`powerzoo.data.sources`);
figures measured on the hourly averages of the base scenario (``tests/data`` checks them):

* ``temp_c``: TMY3 dry-bulb temperature, hourly values interpolated to 5 min.
* ``pv_cf``: capacity factor of a fixed PV plant from TMY3 GHI with a PVWatts-style model:
  ``cf = GHI / 1000 * 0.86 * (1 - 0.0035 * (T_cell - 25))``, ``T_cell = T_air + GHI * 25 / 800``
  (NOCT 45 deg C), clipped to [0, 1]. Annual mean 0.147 (horizontal irradiance, no tracking).
* ``wind_cf``: a good onshore plant at 100 m hub height. The TMY3 10 m airport speeds set only
  the timing: each hour's rank among the speeds of its hour of day is mapped onto the same
  quantile of a hub-height Weibull distribution, shape k = 2.0 and mean 7.5 m/s (k near 2 is
  the usual onshore default and the IEC 61400-1 design distribution; 7.5 m/s at 100 m is a good
  US onshore site, above the 6.5 m/s at 80 m that NREL's wind resource maps treat as suitable
  for development). Calm hours, tied at 0 m/s, are ranked by a fixed-seed AR(1). The speeds
  pass through a generic IEC class II 3 MW turbine (112 m rotor, power coefficient 0.42, cut-in
  3 m/s, rated at about 12 m/s through a smooth knee, cut-out 25 m/s), averaged over a 1 m/s
  spread of speeds across the plant's turbines (a plant curve), less 15 % plant losses (wake
  about 8 %, availability about 4 %, electrical about 3 %). Annual capacity factor 0.341,
  within the 0.30-0.45 of new US onshore plants (NREL Annual Technology Baseline); never
  exactly zero, below 1 % of capacity in 8 % of hours, at most 0.85. Monthly capacity factors
  Jan-Dec: 0.37 0.45 0.47 0.33 0.30 0.32 0.26 0.21 0.23 0.35 0.44 0.37 (windy winter and
  spring, calm late summer, as in the Southeast). Known limitation: the 10 m anemometer peaks in
  the afternoon (surface mixing) while 100 m winds in the region often peak at night; ranking
  within each hour of day removes the afternoon peak, so the series has no diurnal cycle in the
  mean (0.34 in every hour), neither the false afternoon one nor a nocturnal one.
* ``demand_pu``: a Southeast-US system load (the weather is Greensboro, NC). A base shape by
  hour of day and day type (weekday / Saturday / Sunday-holiday, :data:`LOAD_SHAPE`: night
  trough at 04:00, morning ramp, evening peak at 18:00-20:00) times a temperature response on
  the temperature smoothed with a 3 h time constant (building thermal lag): cooling +3.0 % of
  base load per K above 18 deg C, heating +1.2 %/K below 11 deg C; times AR(1) noise (sigma
  1.5 %); scaled so the base-scenario annual peak is 1.0. Measured: mean daily min/max 0.62
  (US system load 0.55-0.75); the summer (June-August) weekday peak falls in 15:00-19:00 on 97 %
  of days, mostly at 18:00; winter weekdays have a morning peak at 08:00 (0.70) and an evening
  one at 18:00-20:00 (0.73) over a 0.67 midday; the summer weekday daily peak rises 2.1 %/K
  of daily maximum temperature (least squares; the 3 %/K applies to the base load, the lag and
  the evening timing of the peak dilute it); monthly peaks Jan-Dec 0.81 0.82 0.83 0.87 0.90
  0.96 0.99 0.97 0.87 0.78 0.74 0.80, the annual peak on 13 July.
* ``price_per_mwh``: a merit-order model on net load ``nl = demand - 0.25 pv - 0.20 wind``
  (per unit of peak demand): ``fuel_index(day) * (5 + 64 nl + 1500 max(nl - 0.75, 0)^2)``
  with a daily fuel index (log AR(1), winter +10 %) and intra-day log-normal noise (5 %),
  floored at 5 $/MWh (prices are strictly positive; the lowest is 23 $/MWh). On the test split:
  mean 40.3 $/MWh, 5th and 95th percentiles 27.6 and 53.8, an evening peak of 54 $/MWh on
  average at 19:00, the day's highest price in 16:00-21:00 on 83 % of days.

Stress scenarios transform the inputs and re-derive what depends on them: ``heatwave``
(heat events in May-September, below), ``low_renewable`` (PV and wind x 0.4), ``load_stress``
(demand x 1.15), ``price_spike`` (two one-hour spikes of x3 to x6 in the 16:00-21:00 window
of every day).

``heatwave`` events: back-to-back events of 3-6 days (the last of a run cut at its end), each
with an afternoon peak anomaly drawn in 5-8 K (fixed seed), tile the test days of May-September
(7-20 May, 16-29 July, 24-30 September: nine events, 35 days). The anomaly peaks at 15:00 and
keeps 30 % of its peak at night, ramping in over the first morning and out over the last
evening of each run. The event adds cooling load (the heating term stays on the base
temperature, so demand never falls) and warms the PV cells; every series equals the base
scenario outside the event days. The ``heatwave`` split starts only on episodes inside those
days, whose mean demand is 9 % above the base scenario's.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from powerzoo.data import calendar
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


def _interp_hourly(hour_ending: np.ndarray) -> np.ndarray:
    """Hour-ending hourly values -> 5-minute values at interval mid-points (periodic)."""
    src_t = np.arange(hour_ending.size) + 0.5  # hour-ending value sits at the hour's centre
    dst_t = (np.arange(hour_ending.size * 12) + 0.5) / 12.0
    return np.interp(dst_t, src_t, hour_ending, period=hour_ending.size)


def _ar1(rng: np.random.Generator, n: int, rho: float, sigma: float) -> np.ndarray:
    """Stationary AR(1) series with marginal standard deviation ``sigma``.

    A plain recursion (about 20 ms per 100k values, run once per process); it avoids importing
    scipy.signal, which alone costs more than half a second.
    """
    eps = (rng.standard_normal(n) * (sigma * np.sqrt(1.0 - rho**2))).tolist()
    eps[0] = float(rng.standard_normal() * sigma)
    x = 0.0
    out = [0.0] * n
    for i, e in enumerate(eps):
        x = rho * x + e
        out[i] = x
    return np.asarray(out)


def _pv_capacity_factor(ghi: np.ndarray, temp_c: np.ndarray) -> np.ndarray:
    t_cell = temp_c + ghi * (45.0 - 20.0) / 800.0
    cf = ghi / 1000.0 * 0.86 * (1.0 - 0.0035 * (t_cell - 25.0))
    return np.clip(cf, 0.0, 1.0)


# ---- wind: a hub-height resource and a plant power curve ---------------------------------------
HUB_WEIBULL_SHAPE = 2.0  # k: a Rayleigh-like distribution, the usual onshore default
HUB_MEAN_SPEED = 7.5  # m/s at 100 m
TURBINE_RATED_MW = 3.0
TURBINE_ROTOR_M = 112.0  # IEC class II rotor for a 3 MW machine
TURBINE_CP = 0.42  # power coefficient of the whole drive train below rated
CUT_IN, CUT_OUT = 3.0, 25.0  # m/s
PLANT_SPEED_SPREAD = 1.0  # m/s, std of hourly hub speeds across the plant's turbines
PLANT_LOSSES = 0.15  # wake, availability and electrical losses


def _hub_speed(wind_10m: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Hub-height (100 m) speeds [m/s] from the 10 m speeds by quantile mapping.

    Each hour [8760] keeps its rank among the 10 m speeds of the same hour of day (ties, chiefly
    the calm hours, broken by a fixed-seed AR(1) so calm spells still vary smoothly) and takes
    the same quantile of a Weibull distribution with shape :data:`HUB_WEIBULL_SHAPE` and mean
    :data:`HUB_MEAN_SPEED`. Ranking within each hour of day removes the anemometer's afternoon
    maximum (surface mixing), which hub-height winds do not share.
    """
    tie_break = _ar1(rng, wind_10m.size, rho=0.9, sigma=1.0)
    by_hour = (wind_10m.reshape(-1, 24).T, tie_break.reshape(-1, 24).T)  # [24, N_DAYS] each
    quantile = np.empty((24, wind_10m.size // 24))
    for hour, (speeds, ties) in enumerate(zip(*by_hour, strict=True)):
        order = np.lexsort((ties, speeds))
        quantile[hour, order] = (np.arange(speeds.size) + 0.5) / speeds.size
    quantile = quantile.T.reshape(-1)
    k = HUB_WEIBULL_SHAPE
    scale = HUB_MEAN_SPEED / math.gamma(1.0 + 1.0 / k)
    return scale * (-np.log1p(-quantile)) ** (1.0 / k)


def _turbine_curve(speed: np.ndarray) -> np.ndarray:
    """Output of one generic 3 MW turbine as a fraction of rating at hub speed ``speed`` [m/s].

    Below rated the rotor converts ``TURBINE_CP`` of the wind power through its swept area (less
    the power at cut-in, so output starts at zero there); a smooth minimum (order 6) joins it to
    the rating, which it reaches at about 12 m/s (0.93 at 11 m/s, 0.98 at 12 m/s). No output
    below cut-in or from cut-out on.
    """
    area = math.pi * TURBINE_ROTOR_M**2 / 4.0

    def aero_mw(v: np.ndarray | float) -> np.ndarray:
        return 0.5 * 1.225 * area * TURBINE_CP * np.power(v, 3) / 1e6

    x = np.maximum(aero_mw(speed) - aero_mw(CUT_IN), 0.0) / TURBINE_RATED_MW
    fraction = x / (1.0 + x**6) ** (1.0 / 6.0)
    return np.where((speed >= CUT_IN) & (speed < CUT_OUT), fraction, 0.0)


@functools.lru_cache(maxsize=1)
def _plant_curve_table() -> tuple[np.ndarray, np.ndarray]:
    """Plant power curve on a speed grid: the turbine curve averaged over a Gaussian spread of
    hub speeds (std :data:`PLANT_SPEED_SPREAD`) across the turbines, times ``1 - PLANT_LOSSES``."""
    grid = np.arange(0.0, 35.0, 0.05)
    z = np.linspace(-3.0, 3.0, 61)
    weights = np.exp(-0.5 * z**2)
    weights /= weights.sum()
    speeds = np.maximum(grid[:, None] + PLANT_SPEED_SPREAD * z, 0.0)
    curve = (_turbine_curve(speeds) * weights).sum(axis=1) * (1.0 - PLANT_LOSSES)
    return grid, curve


def _wind_capacity_factor(hub_speed: np.ndarray) -> np.ndarray:
    """Wind plant capacity factor at hub speed ``hub_speed`` [m/s]."""
    grid, curve = _plant_curve_table()
    return np.interp(hub_speed, grid, curve)


# ---- demand: a US system-load model ------------------------------------------------------------
# Base shape by hour of day (value at the hour's centre, hour-beginning local standard time) and
# day type, before the temperature response: a night trough near 04:00, a morning ramp to a
# 08:00 shoulder, a flat working day and an evening peak at 18:00-20:00.
LOAD_SHAPE = np.array(
    [
        # weekday
        [0.66, 0.63, 0.61, 0.61, 0.63, 0.68, 0.77, 0.85, 0.87, 0.86, 0.86, 0.86]
        + [0.86, 0.86, 0.86, 0.87, 0.89, 0.92, 0.95, 0.95, 0.92, 0.86, 0.78, 0.71],
        # Saturday
        [0.68, 0.65, 0.63, 0.62, 0.62, 0.64, 0.68, 0.73, 0.78, 0.81, 0.83, 0.84]
        + [0.84, 0.83, 0.83, 0.83, 0.85, 0.88, 0.91, 0.91, 0.89, 0.84, 0.77, 0.71],
        # Sunday or holiday
        [0.67, 0.64, 0.62, 0.61, 0.61, 0.62, 0.65, 0.69, 0.74, 0.78, 0.80, 0.81]
        + [0.81, 0.81, 0.81, 0.81, 0.83, 0.87, 0.90, 0.91, 0.89, 0.83, 0.76, 0.70],
    ]
)
COOLING_PER_K, COOLING_BASE_C = 0.030, 18.0  # fraction of base load per K above
HEATING_PER_K, HEATING_BASE_C = 0.012, 11.0  # fraction of base load per K below
LOAD_TEMP_LAG_H = 3.0  # time constant of the building thermal lag, hours


def _load_shape() -> np.ndarray:
    """Base load shape at 5-minute resolution for every day of the year [N_DAYS * 288]."""
    hourly = LOAD_SHAPE[calendar.day_types()].reshape(-1)
    return _interp_hourly(hourly)


def _lagged(temp_c: np.ndarray) -> np.ndarray:
    """Exponentially smoothed temperature (time constant ``LOAD_TEMP_LAG_H``), periodic over
    the year (the filter is warmed up on the year's last two days)."""
    alpha = 1.0 - math.exp(-BASE_MINUTES / (60.0 * LOAD_TEMP_LAG_H))
    state = float(temp_c[-1])
    for value in temp_c[-2 * BASE_STEPS_PER_DAY :].tolist():
        state += alpha * (value - state)
    out = [0.0] * temp_c.size
    for i, value in enumerate(temp_c.tolist()):
        state += alpha * (value - state)
        out[i] = state
    return np.asarray(out)


# ---- heatwave events ---------------------------------------------------------------------------
HEAT_EVENT_DAYS = (3, 6)  # event length range, days (inclusive)
HEAT_EVENT_PEAK_K = (5.0, 8.0)  # afternoon peak anomaly range, K


def _heat_anomaly(rng: np.random.Generator) -> np.ndarray:
    """Temperature anomaly of the ``heatwave`` scenario at 5 minutes [N_DAYS * 288], K.

    Back-to-back events of 3-6 days (peak anomaly 5-8 K, drawn with a fixed seed) tile every
    run of test days in May-September, so every ``heatwave`` episode lies in an event. Within a
    day the anomaly peaks at 15:00 and falls to 30 % of the peak at 03:00; it ramps up over the
    first six hours of a run and down to zero from 15:00 to midnight of its last day. Zero on
    every other day.
    """
    months = calendar.DATES.astype("datetime64[M]").astype(np.int64) % 12 + 1
    hot = (calendar.base_split_of_days() == "test") & np.isin(months, calendar.HEATWAVE_MONTHS)
    peak_by_day = np.zeros(calendar.N_DAYS)
    run_first, run_last = np.zeros(calendar.N_DAYS, bool), np.zeros(calendar.N_DAYS, bool)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], hot.astype(np.int8), [0]])))
    for first, stop in zip(edges[::2], edges[1::2], strict=True):
        run_first[first], run_last[stop - 1] = True, True
        day = first
        while day < stop:
            length = int(rng.integers(HEAT_EVENT_DAYS[0], HEAT_EVENT_DAYS[1] + 1))
            peak_by_day[day : min(day + length, stop)] = rng.uniform(*HEAT_EVENT_PEAK_K)
            day += length
    hour = (np.arange(BASE_STEPS_PER_DAY) + 0.5) * BASE_MINUTES / 60.0
    diurnal = 0.65 + 0.35 * np.cos(2.0 * np.pi * (hour - 15.0) / 24.0)
    ramp_up = np.clip(hour / 6.0, 0.0, 1.0)
    ramp_down = np.clip((24.0 - hour) / 9.0, 0.0, 1.0)
    taper = np.ones((calendar.N_DAYS, BASE_STEPS_PER_DAY))
    taper[run_first] *= ramp_up
    taper[run_last] *= ramp_down
    return (peak_by_day[:, None] * diurnal * taper).reshape(-1)


@functools.lru_cache(maxsize=8)
def _base_inputs() -> dict[str, np.ndarray]:
    """Scenario-independent raw inputs at 5 minutes, plus the fixed random draws."""
    weather = read_tmy3_weather()
    n = calendar.N_DAYS * BASE_STEPS_PER_DAY
    rng = np.random.default_rng(DATA_SEED)
    daily_fuel = np.exp(_ar1(rng, calendar.N_DAYS, rho=0.97, sigma=0.08))
    month = calendar.DATES.astype("datetime64[M]").astype(np.int64) % 12
    daily_fuel *= np.where(np.isin(month, (0, 1, 11)), 1.10, 1.0)
    spike_rng = np.random.default_rng(DATA_SEED + 1)
    spike_starts = spike_rng.integers(16 * 12, 20 * 12, size=(calendar.N_DAYS, 2))
    spike_factor = spike_rng.uniform(3.0, 6.0, size=(calendar.N_DAYS, 2))
    hub_speed = _hub_speed(weather["wind_speed_m_per_s"], np.random.default_rng(DATA_SEED + 2))
    temp_c = _interp_hourly(weather["temp_c"])
    return {
        "ghi": np.maximum(_interp_hourly(weather["ghi_w_per_m2"]), 0.0),
        "temp_c": temp_c,
        "lagged_temp_c": _lagged(temp_c),
        "hub_speed": np.maximum(_interp_hourly(hub_speed), 0.0),
        "load_shape": _load_shape(),
        "load_noise": _ar1(rng, n, rho=0.98, sigma=0.015),
        "price_noise": _ar1(rng, n, rho=0.95, sigma=0.05),
        "fuel_index": np.repeat(daily_fuel, BASE_STEPS_PER_DAY),
        "spike_starts": spike_starts,
        "spike_factor": spike_factor,
        "heat_anomaly": _heat_anomaly(np.random.default_rng(DATA_SEED + 3)),
    }


# merit-order price: fuel_index * (PRICE_BASE + PRICE_SLOPE * nl + PRICE_PEAK * max(nl - knee, 0)^2)
PRICE_BASE, PRICE_SLOPE, PRICE_PEAK, PRICE_KNEE = 5.0, 64.0, 1500.0, 0.75
PRICE_FLOOR = 5.0  # $/MWh
PV_SHARE, WIND_SHARE = 0.25, 0.20  # renewable fleet per unit of peak demand


def _build_5min(scenario: str) -> dict[str, np.ndarray]:
    raw = _base_inputs()
    anomaly = raw["heat_anomaly"] if scenario == "heatwave" else 0.0
    temp_c = raw["temp_c"] + anomaly
    pv_cf = _pv_capacity_factor(raw["ghi"], temp_c)
    wind_cf = _wind_capacity_factor(raw["hub_speed"])
    if scenario == "low_renewable":
        pv_cf, wind_cf = 0.4 * pv_cf, 0.4 * wind_cf

    # demand: the base-scenario peak sets the per-unit base for every scenario. A heat event
    # adds cooling load; the heating term stays on the base temperature, so an event never
    # lowers demand (it would shed a little heating on the coolest May and September nights).
    lagged = raw["lagged_temp_c"]
    heating = HEATING_PER_K * np.maximum(HEATING_BASE_C - lagged, 0.0)

    def demand(lagged_c: np.ndarray) -> np.ndarray:
        response = 1.0 + COOLING_PER_K * np.maximum(lagged_c - COOLING_BASE_C, 0.0) + heating
        return raw["load_shape"] * response * (1.0 + raw["load_noise"])

    base_demand = demand(lagged)
    if scenario == "heatwave":
        scenario_demand = demand(_lagged(temp_c))
        on_event_day = np.repeat(
            (raw["heat_anomaly"].reshape(calendar.N_DAYS, -1) > 0.0).any(axis=1),
            BASE_STEPS_PER_DAY,
        )
        scenario_demand = np.where(on_event_day, scenario_demand, base_demand)
    else:
        scenario_demand = base_demand
    demand_pu = scenario_demand / base_demand.max()
    if scenario == "load_stress":
        demand_pu = demand_pu * 1.15

    net_load = demand_pu - PV_SHARE * pv_cf - WIND_SHARE * wind_cf
    merit = (
        PRICE_BASE
        + PRICE_SLOPE * net_load
        + PRICE_PEAK * np.maximum(net_load - PRICE_KNEE, 0.0) ** 2
    )
    price = raw["fuel_index"] * merit * np.exp(raw["price_noise"])
    if scenario == "price_spike":
        per_day = price.reshape(calendar.N_DAYS, BASE_STEPS_PER_DAY)
        offsets = np.arange(12)  # one hour of 5-minute steps
        rows = np.arange(calendar.N_DAYS)[:, None, None]
        cols = raw["spike_starts"][:, :, None] + offsets
        per_day[rows, cols] *= raw["spike_factor"][:, :, None]
        price = per_day.reshape(-1)
    price = np.maximum(price, PRICE_FLOOR)
    return {
        "demand_pu": demand_pu,
        "price_per_mwh": price,
        "pv_cf": pv_cf,
        "wind_cf": wind_cf,
        "temp_c": temp_c,
    }


@functools.lru_cache(maxsize=16)
def get_profiles(scenario: str = "base", step_minutes: int = 30) -> Profiles:
    """Profiles of ``scenario`` averaged to ``step_minutes`` (a multiple of 5 dividing a day).

    Cached per process: every env of a process shares the same read-only arrays.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; valid: {', '.join(SCENARIOS)}")
    if step_minutes % BASE_MINUTES or (24 * 60) % step_minutes:
        raise ValueError(f"step_minutes must be a multiple of 5 dividing 1440, got {step_minutes}")
    factor = step_minutes // BASE_MINUTES
    steps_per_day = 24 * 60 // step_minutes
    series = {}
    for name, values in _build_5min(scenario).items():
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
    )
