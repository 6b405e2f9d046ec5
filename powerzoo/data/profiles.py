"""Calendar-indexed exogenous profiles: demand, price, PV, wind, outdoor temperature.

Every series is built once per process at 5-minute resolution for the calendar year of
:mod:`powerzoo.data.calendar`, deterministically (fixed generator seed), and then averaged to
the step length a task asks for. The step path only slices the resulting numpy arrays.

How each series is made (provenance of the raw inputs in :mod:`powerzoo.data.sources`):

* ``temp_c``: TMY3 dry-bulb temperature, hourly values interpolated to 5 min.
* ``pv_cf``: capacity factor of a fixed PV plant from TMY3 GHI with a PVWatts-style model:
  ``cf = GHI / 1000 * 0.86 * (1 - 0.0035 * (T_cell - 25))``, ``T_cell = T_air + GHI * 25 / 800``
  (NOCT 45 deg C), clipped to [0, 1]. Annual mean about 0.17.
* ``wind_cf``: TMY3 10 m wind speed lifted to 100 m hub height (power law, exponent 1/7)
  through a generic turbine curve (cut-in 3 m/s, rated 12 m/s, cut-out 25 m/s).
* ``demand_pu``: a system load shape, 60 % BDEW H25 households + 40 % BDEW G25 commerce by
  month and day type (weekday / Saturday / Sunday-holiday), times a temperature response
  (+1.2 %/K above 20 deg C, +0.8 %/K below 12 deg C) and AR(1) noise (sigma 1.5 %); scaled so
  the annual peak is 1.0.
* ``price_per_mwh``: a merit-order model on net load ``nl = demand - 0.25 pv - 0.20 wind``
  (per unit of peak demand): ``fuel_index(day) * (15 + 40 nl + 1500 max(nl - 0.75, 0)^2)``
  with a daily fuel index (log AR(1), winter +10 %) and intra-day log-normal noise (5 %),
  floored at 5 $/MWh (prices are strictly positive).

Stress scenarios transform the inputs and re-derive what depends on them:
``heatwave`` (+7 deg C all year, so more demand and less PV), ``low_renewable`` (PV and wind
x 0.4), ``load_stress`` (demand x 1.15), ``price_spike`` (two one-hour spikes of x3 to x6 in
the 16:00-21:00 window of every day).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.sources import read_bdew_day_profiles, read_tmy3_weather

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
        """Flat index of step ``t`` of calendar day ``day`` (both int arrays, broadcast)."""
        return day * self.steps_per_day + t

    def at(self, name: str, day: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Value of series ``name`` at step ``t`` of calendar day ``day`` (batched)."""
        return self.series[name][self.index(day, t)]

    def window(self, name: str, day: np.ndarray, t: np.ndarray, length: int) -> np.ndarray:
        """Values of ``name`` for steps ``t .. t + length - 1`` of each row: [B, length]."""
        idx = self.index(day, t)[:, None] + np.arange(length)
        return self.series[name][idx]

    def day(self, name: str, day: int) -> np.ndarray:
        """One calendar day of series ``name`` [steps_per_day]."""
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


def _wind_capacity_factor(wind_10m: np.ndarray) -> np.ndarray:
    v = wind_10m * (100.0 / 10.0) ** (1.0 / 7.0)
    cut_in, rated, cut_out = 3.0, 12.0, 25.0
    ramp = (v**3 - cut_in**3) / (rated**3 - cut_in**3)
    cf = np.where(v < cut_in, 0.0, np.where(v < rated, ramp, np.where(v < cut_out, 1.0, 0.0)))
    return np.clip(cf, 0.0, 1.0)


def _load_shape() -> np.ndarray:
    """Mixed BDEW shape at 5-minute resolution for every day of the year [N_DAYS * 288]."""
    shape = 0.6 * read_bdew_day_profiles("h25") + 0.4 * read_bdew_day_profiles("g25")
    months = calendar.DATES.astype("datetime64[M]").astype(np.int64) % 12
    per_day = shape[months, calendar.day_types()]  # [N_DAYS, 96] quarter hours
    quarter = per_day.reshape(-1)
    src_t = np.arange(quarter.size) + 0.5
    dst_t = (np.arange(quarter.size * 3) + 0.5) / 3.0
    return np.interp(dst_t, src_t, quarter, period=quarter.size)


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
    return {
        "ghi": np.maximum(_interp_hourly(weather["ghi_w_per_m2"]), 0.0),
        "temp_c": _interp_hourly(weather["temp_c"]),
        "wind_10m": np.maximum(_interp_hourly(weather["wind_speed_m_per_s"]), 0.0),
        "load_shape": _load_shape(),
        "load_noise": _ar1(rng, n, rho=0.98, sigma=0.015),
        "price_noise": _ar1(rng, n, rho=0.95, sigma=0.05),
        "fuel_index": np.repeat(daily_fuel, BASE_STEPS_PER_DAY),
        "spike_starts": spike_starts,
        "spike_factor": spike_factor,
    }


def _build_5min(scenario: str) -> dict[str, np.ndarray]:
    raw = _base_inputs()
    temp_c = raw["temp_c"] + (7.0 if scenario == "heatwave" else 0.0)
    pv_cf = _pv_capacity_factor(raw["ghi"], temp_c)
    wind_cf = _wind_capacity_factor(raw["wind_10m"])
    if scenario == "low_renewable":
        pv_cf, wind_cf = 0.4 * pv_cf, 0.4 * wind_cf

    # demand: the base-scenario peak sets the per-unit base for every scenario
    def demand(t_c: np.ndarray) -> np.ndarray:
        response = 1.0 + 0.012 * np.maximum(t_c - 20.0, 0.0) + 0.008 * np.maximum(12.0 - t_c, 0.0)
        return raw["load_shape"] * response * (1.0 + raw["load_noise"])

    base_demand = demand(raw["temp_c"])
    demand_pu = demand(temp_c) / base_demand.max()
    if scenario == "load_stress":
        demand_pu = demand_pu * 1.15

    net_load = demand_pu - 0.25 * pv_cf - 0.20 * wind_cf
    merit = 15.0 + 40.0 * net_load + 1500.0 * np.maximum(net_load - 0.75, 0.0) ** 2
    price = raw["fuel_index"] * merit * np.exp(raw["price_noise"])
    if scenario == "price_spike":
        per_day = price.reshape(calendar.N_DAYS, BASE_STEPS_PER_DAY)
        offsets = np.arange(12)  # one hour of 5-minute steps
        rows = np.arange(calendar.N_DAYS)[:, None, None]
        cols = raw["spike_starts"][:, :, None] + offsets
        per_day[rows, cols] *= raw["spike_factor"][:, :, None]
        price = per_day.reshape(-1)
    price = np.maximum(price, 5.0)
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
