"""Weather-driven series: PV on a plane-of-array model, hub-height wind through a measured
turbine power curve, and the temperature anomalies of the ``heatwave`` and ``cold_snap``
scenarios.

Everything here is numpy on the hourly TMY3 weather of :mod:`powerzoo.data.sources`
(Greensboro, NC); :mod:`powerzoo.data.profiles` interpolates the results to 5 minutes. The
figures each model gives, and the measurements behind its constants, are in the module
docstring of :mod:`powerzoo.data.profiles`.

PV (``pv_cf``, per unit of the plant's AC rating)
    * Sun position (:func:`solar_position`): the NOAA solar-calculator equations (Meeus'
      low-precision solar coordinates: declination and equation of time from the Julian
      century) at the TMY3 station, 36.1 N, 79.95 W, UTC-5. Within 0.02 deg of pvlib's SPA
      in zenith over the year (``tests/data/test_weather.py``). Each hour-ending TMY3 row is
      placed at the mid-point of the part of its hour in which the sun is up (the whole-hour
      mid-point at night and in full daylight), as SAM and PVWatts do, so the sunrise and sunset
      hours get the low sun they had rather than a sun below the horizon.
    * Plane of array (:func:`plane_of_array`): beam ``DNI cos(AOI)``, sky diffuse by the
      Hay-Davies model (circumsolar share ``DNI / DNI_extra`` projected like the beam, the rest
      isotropic), ground-reflected ``GHI * albedo * (1 - cos tilt) / 2`` with albedo 0.2; a
      fixed array facing due south at :data:`PV_TILT_DEG` (30 deg: near the annual optimum at
      36 N, a few degrees flatter as row spacing favours). ``DNI_extra`` by Spencer's
      sun-earth distance series (1366.1 W/m^2), as pvlib's default.
    * Module (:func:`pv_capacity_factor`): cell temperature by Faiman's model
      ``T_cell = T_air + POA / (25 + 6.84 * wind_10m)`` (the coefficients pvlib and PVsyst use),
      power temperature coefficient -0.35 %/K, PVWatts' default system losses of 14.08 %
      (soiling, shading, mismatch, wiring, connections, light-induced degradation, nameplate,
      availability); a DC/AC ratio of 1.3 (US utility-scale plants are built at 1.2-1.4) into
      an inverter with PVWatts' part-load efficiency curve (nominal 96 %) that clips at its AC
      rating.

Wind (``wind_cf``, per unit of the plant's rating)
    * Hub-height speed (:func:`hub_speed`): each hour's 10 m TMY3 speed is ranked among the
      speeds of its hour of day (removing the anemometer's afternoon mixing peak; calm ties
      broken by a fixed-seed AR(1)) and turned into a normal score. A TMY3 hour is a single
      short observation and its months are spliced from different years, so the scores are
      noisy from hour to hour (lag-1 autocorrelation 0.75 against about 0.97-0.98 for hourly
      means at hub height); a centred Gaussian kernel of :data:`WIND_SMOOTHING_H` hours smooths
      them (no phase shift). The smoothed scores, ranked over the year, take the same quantile
      of a hub-height Weibull distribution, shape 2.0 and mean 7.5 m/s.
    * Turbine: the Enercon E-115 (3.0 MW, 116 m rotor, IEC class IIA), its measured power curve
      read from the turbine library that **windpowerlib** ships (``oedb/power_curves.csv`` and
      ``turbine_data.csv``, from the OpenEnergy Platform turbine library; MIT licence), read
      with the csv module (windpowerlib is not imported). It is the library's 3 MW onshore
      machine with a clean curve at its rating (the V112/3000 row climbs to 3,075 kW). Hub
      speeds are referred to standard air density (IEC 61400-12-1: ``v (rho / 1.225)^(1/3)``)
      with the standard-atmosphere density at the hub (273 m station + 100 m hub: 1.182 kg/m^3).
    * Plant: the turbine curve averaged over a Gaussian spread of 1 m/s of hub speeds across
      the plant's turbines, less 15 % losses (wake about 8 %, availability about 4 %,
      electrical about 3 %).

Temperature events (:func:`heat_anomaly`, :func:`cold_anomaly`)
    Back-to-back events of fixed-seed random length and depth tile every run of test days in
    the event months (:data:`powerzoo.data.calendar.HEATWAVE_MONTHS`,
    :data:`powerzoo.data.calendar.COLD_SNAP_MONTHS`), so every episode of the split lies in an
    event; zero on every other day.
"""

from __future__ import annotations

import csv
import functools
import math
from statistics import NormalDist

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.sources import package_data_file

__all__ = [
    "SITE_LATITUDE",
    "SITE_LONGITUDE",
    "SITE_UTC_OFFSET_H",
    "WIND_TURBINE",
    "ar1",
    "interp_hourly",
    "solar_position",
    "sunlit_midpoints",
    "extraterrestrial_dni",
    "plane_of_array",
    "plane_of_array_hourly",
    "pv_capacity_factor",
    "turbine_power_curve",
    "hub_speed",
    "wind_capacity_factor",
    "heat_anomaly",
    "cold_anomaly",
]

STEPS_PER_HOUR = 12  # 5-minute steps
STEPS_PER_DAY = 24 * STEPS_PER_HOUR


def interp_hourly(hour_ending: np.ndarray) -> np.ndarray:
    """Hour-ending hourly values -> 5-minute values at interval mid-points (periodic)."""
    src_t = np.arange(hour_ending.size) + 0.5  # hour-ending value sits at the hour's centre
    dst_t = (np.arange(hour_ending.size * STEPS_PER_HOUR) + 0.5) / STEPS_PER_HOUR
    return np.interp(dst_t, src_t, hour_ending, period=hour_ending.size)


def ar1(rng: np.random.Generator, n: int, rho: float, sigma: float) -> np.ndarray:
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


# ---- sun position ------------------------------------------------------------------------------
SITE_LATITUDE = 36.1  # deg N, TMY3 station 723170 (header line of the file)
SITE_LONGITUDE = -79.95  # deg E
SITE_UTC_OFFSET_H = -5.0  # local standard time
SITE_ELEVATION_M = 273.0
_J2000 = np.datetime64("2000-01-01T12:00")  # Julian day 2451545.0


def _sun(hours: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Declination [rad] and equation of time [min] at ``hours`` (local standard time, hours
    since 1 January 00:00 of :data:`calendar.YEAR`): the NOAA solar-calculator equations."""
    year_start_utc = np.datetime64(f"{calendar.YEAR}-01-01T00:00") - np.timedelta64(
        int(SITE_UTC_OFFSET_H * 60), "m"
    )
    days_j2000 = (year_start_utc - _J2000) / np.timedelta64(1, "D") + np.asarray(hours) / 24.0
    t = days_j2000 / 36525.0  # Julian centuries since J2000.0
    mean_long = np.radians((280.46646 + t * (36000.76983 + 0.0003032 * t)) % 360.0)
    anomaly = np.radians(357.52911 + t * (35999.05029 - 0.0001537 * t))
    ecc = 0.016708634 - t * (0.000042037 + 0.0000001267 * t)
    centre = (
        np.sin(anomaly) * (1.914602 - t * (0.004817 + 0.000014 * t))
        + np.sin(2.0 * anomaly) * (0.019993 - 0.000101 * t)
        + np.sin(3.0 * anomaly) * 0.000289
    )
    omega = np.radians(125.04 - 1934.136 * t)
    apparent_long = np.radians(np.degrees(mean_long) + centre - 0.00569 - 0.00478 * np.sin(omega))
    obliquity = np.radians(
        23.0
        + (26.0 + (21.448 - t * (46.815 + t * (0.00059 - t * 0.001813))) / 60.0) / 60.0
        + 0.00256 * np.cos(omega)
    )
    declination = np.arcsin(np.sin(obliquity) * np.sin(apparent_long))
    y = np.tan(obliquity / 2.0) ** 2
    eot_min = 4.0 * np.degrees(
        y * np.sin(2.0 * mean_long)
        - 2.0 * ecc * np.sin(anomaly)
        + 4.0 * ecc * y * np.sin(anomaly) * np.cos(2.0 * mean_long)
        - 0.5 * y**2 * np.sin(4.0 * mean_long)
        - 1.25 * ecc**2 * np.sin(2.0 * anomaly)
    )
    return declination, eot_min


def _solar_noon_offset_h(eot_min: np.ndarray) -> np.ndarray:
    """True solar time minus local standard time, hours."""
    return (eot_min + 4.0 * SITE_LONGITUDE - 60.0 * SITE_UTC_OFFSET_H) / 60.0


def solar_position(hours: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """True (unrefracted) solar zenith and azimuth at the TMY3 station, degrees.

    Args:
        hours: Local standard time as hours since 1 January 00:00 of :data:`calendar.YEAR`.

    Returns:
        Zenith and azimuth (clockwise from north), each shaped like ``hours``.
    """
    hours = np.asarray(hours, dtype=np.float64)
    declination, eot_min = _sun(hours)
    solar_time_h = hours % 24.0 + _solar_noon_offset_h(eot_min)
    hour_angle = np.radians(15.0 * (solar_time_h - 12.0))
    lat = math.radians(SITE_LATITUDE)
    cos_zenith = math.sin(lat) * np.sin(declination)
    cos_zenith = cos_zenith + math.cos(lat) * np.cos(declination) * np.cos(hour_angle)
    zenith = np.degrees(np.arccos(np.clip(cos_zenith, -1.0, 1.0)))
    azimuth = np.degrees(
        np.arctan2(
            np.sin(hour_angle),
            np.cos(hour_angle) * math.sin(lat) - np.tan(declination) * math.cos(lat),
        )
    )
    return zenith, (azimuth + 180.0) % 360.0


def sunlit_midpoints(n_hours: int) -> np.ndarray:
    """Time [h since 1 January 00:00] to place each hour-ending row at: the mid-point of the
    part of hour ``[i, i + 1)`` in which the sun's upper limb is above the horizon (refracted
    sunrise and sunset, zenith 90.833 deg), or ``i + 0.5`` when the sun is down all hour.

    Args:
        n_hours: Number of hourly rows.

    Returns:
        Times [n_hours].
    """
    start = np.arange(n_hours, dtype=np.float64)
    day_start = np.floor(start / 24.0) * 24.0
    declination, eot_min = _sun(day_start + 12.0)
    lat = math.radians(SITE_LATITUDE)
    cos_half_day = (math.cos(math.radians(90.833)) - math.sin(lat) * np.sin(declination)) / (
        math.cos(lat) * np.cos(declination)
    )
    half_day_h = np.degrees(np.arccos(np.clip(cos_half_day, -1.0, 1.0))) / 15.0
    noon = day_start + 12.0 - _solar_noon_offset_h(eot_min)
    lit_from = np.maximum(start, noon - half_day_h)
    lit_to = np.minimum(start + 1.0, noon + half_day_h)
    return np.where(lit_to > lit_from, 0.5 * (lit_from + lit_to), start + 0.5)


# ---- plane-of-array irradiance and the PV plant ------------------------------------------------
PV_TILT_DEG = 30.0  # fixed tilt, facing due south
PV_AZIMUTH_DEG = 180.0
GROUND_ALBEDO = 0.2
FAIMAN_U0, FAIMAN_U1 = 25.0, 6.84  # W/m^2/K and W s/m^3/K
PV_GAMMA_PER_K = -0.0035  # power temperature coefficient
PV_SYSTEM_LOSSES = 0.1408  # PVWatts default
PV_DC_AC_RATIO = 1.3
INVERTER_EFFICIENCY = 0.96  # PVWatts nominal
_INVERTER_EFF_REF = 0.9637  # PVWatts part-load curve reference efficiency


def extraterrestrial_dni(day_of_year: np.ndarray) -> np.ndarray:
    """Extraterrestrial normal irradiance [W/m^2] on ``day_of_year`` (1-365): Spencer's
    sun-earth distance series times a solar constant of 1366.1 W/m^2."""
    b = 2.0 * np.pi * (np.asarray(day_of_year, dtype=np.float64) - 1.0) / 365.0
    return 1366.1 * (
        1.00011
        + 0.034221 * np.cos(b)
        + 0.00128 * np.sin(b)
        + 0.000719 * np.cos(2.0 * b)
        + 0.000077 * np.sin(2.0 * b)
    )


def plane_of_array(
    dni: np.ndarray,
    dhi: np.ndarray,
    ghi: np.ndarray,
    zenith: np.ndarray,
    azimuth: np.ndarray,
    dni_extra: np.ndarray,
    tilt: float = PV_TILT_DEG,
    surface_azimuth: float = PV_AZIMUTH_DEG,
    albedo: float = GROUND_ALBEDO,
) -> np.ndarray:
    """Global irradiance on a tilted plane [W/m^2]: beam, Hay-Davies sky diffuse, ground.

    Args:
        dni, dhi, ghi: Direct normal, diffuse horizontal and global horizontal irradiance.
        zenith, azimuth: Solar zenith and azimuth (clockwise from north), degrees.
        dni_extra: Extraterrestrial normal irradiance.
        tilt, surface_azimuth: Plane orientation, degrees.
        albedo: Ground reflectance.

    Returns:
        Plane-of-array global irradiance, shaped like the inputs.
    """
    z = np.radians(zenith)
    b = math.radians(tilt)
    cos_aoi = np.cos(z) * math.cos(b) + np.sin(z) * math.sin(b) * np.cos(
        np.radians(np.asarray(azimuth) - surface_azimuth)
    )
    cos_aoi = np.maximum(cos_aoi, 0.0)
    beam = np.maximum(dni * cos_aoi, 0.0)
    anisotropy = dni / dni_extra
    ratio = cos_aoi / np.maximum(np.cos(z), 0.01745)  # beam projection ratio, low sun capped
    isotropic = np.maximum(dhi * (1.0 - anisotropy) * 0.5 * (1.0 + math.cos(b)), 0.0)
    circumsolar = np.maximum(dhi * anisotropy * ratio, 0.0)
    ground = ghi * albedo * 0.5 * (1.0 - math.cos(b))
    return beam + isotropic + circumsolar + ground


def plane_of_array_hourly(weather: dict[str, np.ndarray]) -> np.ndarray:
    """Hourly plane-of-array irradiance [8760] of the PV array from the TMY3 rows, each row's
    sun placed at :func:`sunlit_midpoints`."""
    n = weather["ghi_w_per_m2"].size
    when = sunlit_midpoints(n)
    zenith, azimuth = solar_position(when)
    poa = plane_of_array(
        weather["dni_w_per_m2"],
        weather["dhi_w_per_m2"],
        weather["ghi_w_per_m2"],
        zenith,
        azimuth,
        extraterrestrial_dni(np.floor(when / 24.0) + 1.0),
    )
    return np.maximum(poa, 0.0)


def pv_capacity_factor(poa: np.ndarray, temp_c: np.ndarray, wind_speed: np.ndarray) -> np.ndarray:
    """AC output of the PV plant per unit of its AC rating.

    Args:
        poa: Plane-of-array irradiance [W/m^2].
        temp_c: Air temperature [deg C].
        wind_speed: 10 m wind speed [m/s] (cools the modules).

    Returns:
        Capacity factor in [0, 1].
    """
    t_cell = temp_c + poa / (FAIMAN_U0 + FAIMAN_U1 * wind_speed)
    dc = poa / 1000.0 * (1.0 + PV_GAMMA_PER_K * (t_cell - 25.0)) * (1.0 - PV_SYSTEM_LOSSES)
    dc = np.maximum(dc * PV_DC_AC_RATIO, 0.0)  # per unit of the AC rating
    zeta = np.maximum(dc * INVERTER_EFFICIENCY, 1e-9)  # of the inverter's DC rating
    efficiency = INVERTER_EFFICIENCY / _INVERTER_EFF_REF * (-0.0162 * zeta - 0.0059 / zeta + 0.9858)
    return np.clip(efficiency * dc, 0.0, 1.0)


# ---- wind: a hub-height resource and a plant power curve ---------------------------------------
HUB_WEIBULL_SHAPE = 2.0  # k: a Rayleigh-like distribution, the usual onshore default
HUB_MEAN_SPEED = 7.5  # m/s at 100 m
HUB_HEIGHT_M = 100.0
WIND_SMOOTHING_H = 1.5  # std of the Gaussian kernel on the hourly normal scores, hours
WIND_TURBINE = "E-115/3000"  # windpowerlib turbine_type
STANDARD_AIR_DENSITY = 1.225  # kg/m^3
PLANT_SPEED_SPREAD = 1.0  # m/s, std of hourly hub speeds across the plant's turbines
PLANT_LOSSES = 0.15  # wake, availability and electrical losses


def hub_speed(wind_10m: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Hourly hub-height (100 m) speeds [m/s] from the hourly 10 m speeds [8760].

    Ranks within each hour of day -> normal scores -> centred Gaussian smoothing
    (:data:`WIND_SMOOTHING_H`, periodic over the year) -> ranks over the year -> the same
    quantiles of a Weibull distribution with shape :data:`HUB_WEIBULL_SHAPE` and mean
    :data:`HUB_MEAN_SPEED`.
    """
    tie_break = ar1(rng, wind_10m.size, rho=0.9, sigma=1.0)
    n_days = wind_10m.size // 24
    by_hour = (wind_10m.reshape(-1, 24).T, tie_break.reshape(-1, 24).T)  # [24, n_days] each
    rank = np.empty((24, n_days), dtype=np.int64)
    for hour, (speeds, ties) in enumerate(zip(*by_hour, strict=True)):
        rank[hour, np.lexsort((ties, speeds))] = np.arange(n_days)
    normal = NormalDist()
    scores = np.array([normal.inv_cdf((k + 0.5) / n_days) for k in range(n_days)])
    z = scores[rank.T.reshape(-1)]
    half = int(math.ceil(4.0 * WIND_SMOOTHING_H))
    lags = np.arange(-half, half + 1)
    kernel = np.exp(-0.5 * (lags / WIND_SMOOTHING_H) ** 2)
    kernel /= kernel.sum()
    padded = np.concatenate([z[-half:], z, z[:half]])  # periodic
    smooth = np.convolve(padded, kernel, mode="valid")
    quantile = (np.argsort(np.argsort(smooth, kind="stable"), kind="stable") + 0.5) / smooth.size
    k = HUB_WEIBULL_SHAPE
    scale = HUB_MEAN_SPEED / math.gamma(1.0 + 1.0 / k)
    return scale * (-np.log1p(-quantile)) ** (1.0 / k)


@functools.lru_cache(maxsize=4)
def turbine_power_curve(turbine_type: str = WIND_TURBINE) -> tuple[np.ndarray, np.ndarray, float]:
    """Power curve of ``turbine_type`` from windpowerlib's turbine library (read, not imported).

    Args:
        turbine_type: A ``turbine_type`` of windpowerlib's ``oedb/turbine_data.csv``.

    Returns:
        Wind speeds [m/s], power [W] at those speeds (standard air density), nominal power [W].
    """
    with package_data_file("windpowerlib", "oedb", "turbine_data.csv").open(newline="") as fh:
        rows = {row["turbine_type"]: row for row in csv.DictReader(fh)}
    if turbine_type not in rows:
        raise ValueError(f"turbine {turbine_type!r} is not in windpowerlib's turbine library")
    nominal_w = float(rows[turbine_type]["nominal_power"])
    with package_data_file("windpowerlib", "oedb", "power_curves.csv").open(newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        row = next(r for r in reader if r[0] == turbine_type)
    points = [(float(v), float(p)) for v, p in zip(header[1:], row[1:], strict=True) if p != ""]
    speeds, power = np.asarray(points).T
    return speeds, power, nominal_w


def _air_density_at_hub() -> float:
    """Standard-atmosphere air density at the hub (station elevation plus hub height)."""
    height = SITE_ELEVATION_M + HUB_HEIGHT_M
    return STANDARD_AIR_DENSITY * (1.0 - 2.25577e-5 * height) ** 4.2559


@functools.lru_cache(maxsize=1)
def _plant_curve_table() -> tuple[np.ndarray, np.ndarray]:
    """Plant power curve on a hub-speed grid: the turbine curve (outside its table: zero) at
    density-adjusted speeds, averaged over a Gaussian spread of hub speeds (std
    :data:`PLANT_SPEED_SPREAD`) across the turbines, times ``1 - PLANT_LOSSES``."""
    speeds, power, nominal_w = turbine_power_curve()
    grid = np.arange(0.0, 35.0, 0.05)
    z = np.linspace(-3.0, 3.0, 61)
    weights = np.exp(-0.5 * z**2)
    weights /= weights.sum()
    hub = np.maximum(grid[:, None] + PLANT_SPEED_SPREAD * z, 0.0)
    standard = hub * (_air_density_at_hub() / STANDARD_AIR_DENSITY) ** (1.0 / 3.0)
    turbine = np.interp(standard, speeds, power / nominal_w, left=0.0, right=0.0)
    curve = (turbine * weights).sum(axis=1) * (1.0 - PLANT_LOSSES)
    return grid, curve


def wind_capacity_factor(hub_speed_m_per_s: np.ndarray) -> np.ndarray:
    """Wind plant capacity factor at hub speed ``hub_speed_m_per_s`` [m/s]."""
    grid, curve = _plant_curve_table()
    return np.interp(hub_speed_m_per_s, grid, curve)


# ---- temperature events of the stress scenarios ------------------------------------------------
HEAT_EVENT_DAYS = (3, 6)  # event length range, days (inclusive)
HEAT_EVENT_PEAK_K = (5.0, 8.0)  # afternoon peak anomaly range, K
COLD_EVENT_DAYS = (2, 5)  # event length range, days (inclusive)
COLD_EVENT_PEAK_K = (6.0, 10.0)  # dawn peak cold anomaly range, K (the anomaly is negative)


def _event_days(
    rng: np.random.Generator,
    months: tuple[int, ...],
    lengths: tuple[int, int],
    peaks: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-day peak anomaly of back-to-back events tiling the test days of ``months``, and the
    first and last day of each run of such days."""
    month = calendar.DATES.astype("datetime64[M]").astype(np.int64) % 12 + 1
    member = (calendar.base_split_of_days() == "test") & np.isin(month, months)
    peak_by_day = np.zeros(calendar.N_DAYS)
    run_first, run_last = np.zeros(calendar.N_DAYS, bool), np.zeros(calendar.N_DAYS, bool)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], member.astype(np.int8), [0]])))
    for first, stop in zip(edges[::2], edges[1::2], strict=True):
        run_first[first], run_last[stop - 1] = True, True
        day = first
        while day < stop:
            length = int(rng.integers(lengths[0], lengths[1] + 1))
            peak_by_day[day : min(day + length, stop)] = rng.uniform(*peaks)
            day += length
    return peak_by_day, run_first, run_last


def heat_anomaly(rng: np.random.Generator) -> np.ndarray:
    """Temperature anomaly of the ``heatwave`` scenario at 5 minutes [N_DAYS * 288], K (>= 0).

    Back-to-back events of 3-6 days (peak anomaly 5-8 K, drawn with a fixed seed) tile every
    run of test days in May-September, so every ``heatwave`` episode lies in an event. Within a
    day the anomaly peaks at 15:00 and falls to 30 % of the peak at 03:00; it ramps up over the
    first six hours of a run and down to zero from 15:00 to midnight of its last day. Zero on
    every other day.
    """
    peak_by_day, run_first, run_last = _event_days(
        rng, calendar.HEATWAVE_MONTHS, HEAT_EVENT_DAYS, HEAT_EVENT_PEAK_K
    )
    hour = (np.arange(STEPS_PER_DAY) + 0.5) / STEPS_PER_HOUR
    diurnal = 0.65 + 0.35 * np.cos(2.0 * np.pi * (hour - 15.0) / 24.0)
    ramp_up = np.clip(hour / 6.0, 0.0, 1.0)
    ramp_down = np.clip((24.0 - hour) / 9.0, 0.0, 1.0)
    taper = np.ones((calendar.N_DAYS, STEPS_PER_DAY))
    taper[run_first] *= ramp_up
    taper[run_last] *= ramp_down
    return (peak_by_day[:, None] * diurnal * taper).reshape(-1)


def cold_anomaly(rng: np.random.Generator) -> np.ndarray:
    """Temperature anomaly of the ``cold_snap`` scenario at 5 minutes [N_DAYS * 288], K (<= 0).

    Back-to-back arctic outbreaks of 2-5 days (peak anomaly -6 to -10 K, drawn with a fixed
    seed) tile every run of test days in December-March (26 February-11 March and 3-16
    December), so every ``cold_snap`` episode lies in an event. Within a day the anomaly is
    deepest at 06:00 (clear, calm nights behind a cold front) and keeps 60 % of its depth at
    18:00; it ramps in over the first six hours of a run and out from 12:00 to midnight of its
    last day. Zero on every other day.
    """
    peak_by_day, run_first, run_last = _event_days(
        rng, calendar.COLD_SNAP_MONTHS, COLD_EVENT_DAYS, COLD_EVENT_PEAK_K
    )
    hour = (np.arange(STEPS_PER_DAY) + 0.5) / STEPS_PER_HOUR
    diurnal = 0.8 + 0.2 * np.cos(2.0 * np.pi * (hour - 6.0) / 24.0)
    ramp_up = np.clip(hour / 6.0, 0.0, 1.0)
    ramp_down = np.clip((24.0 - hour) / 12.0, 0.0, 1.0)
    taper = np.ones((calendar.N_DAYS, STEPS_PER_DAY))
    taper[run_first] *= ramp_up
    taper[run_last] *= ramp_down
    return -(peak_by_day[:, None] * diurnal * taper).reshape(-1)
