"""Weather models: the sun and plane-of-array irradiance against pvlib, the PV plant, the
hub-height wind and its measured turbine curve (powerzoo.data.weather)."""

import subprocess
import sys

import numpy as np
import pytest

from powerzoo.data import get_profiles, weather
from powerzoo.data.calendar import DATES, N_DAYS
from powerzoo.data.sources import TMY3_FILE, package_data_file, read_tmy3_weather


def _hourly(scenario: str, name: str) -> np.ndarray:
    return get_profiles(scenario, 60).series[name][: N_DAYS * 24]


# ---- sun and plane of array ----------------------------------------------------------------


@pytest.fixture(scope="module")
def pvlib_sun():
    """pvlib's SPA sun at the sunlit mid-point of every TMY3 hour, and its times."""
    pd = pytest.importorskip("pandas")
    pvlib = pytest.importorskip("pvlib")
    hours = weather.sunlit_midpoints(8760)
    start = pd.Timestamp("2023-01-01 00:00", tz="Etc/GMT+5")  # UTC-5, local standard time
    times = pd.DatetimeIndex(start + pd.to_timedelta(hours * 3600.0, unit="s"))
    position = pvlib.solarposition.get_solarposition(
        times, weather.SITE_LATITUDE, weather.SITE_LONGITUDE, altitude=weather.SITE_ELEVATION_M
    )
    return hours, times, position["zenith"].to_numpy(), position["azimuth"].to_numpy()


def test_site_is_the_tmy3_station():
    with package_data_file("pvlib", "data", TMY3_FILE).open(encoding="latin-1") as fh:
        header = fh.readline().split(",")
    assert float(header[3]) == weather.SITE_UTC_OFFSET_H
    assert float(header[4]) == weather.SITE_LATITUDE
    assert float(header[5]) == weather.SITE_LONGITUDE
    assert float(header[6]) == weather.SITE_ELEVATION_M


def test_solar_position_matches_pvlib_spa(pvlib_sun):
    hours, _, zenith, azimuth = pvlib_sun
    ours_zenith, ours_azimuth = weather.solar_position(hours)
    # true (unrefracted) zenith: within 0.05 deg all year (measured 0.017)
    assert np.abs(ours_zenith - zenith).max() < 0.05
    up = zenith < 90.0
    azimuth_error = (ours_azimuth - azimuth + 180.0) % 360.0 - 180.0
    assert np.abs(azimuth_error[up]).max() < 0.1  # measured 0.023
    # the plain mid-points too (the sunlit ones differ only in the sunrise and sunset hours)
    moved = np.abs(hours - (np.arange(8760) + 0.5)) > 1e-9
    assert 600 < moved.sum() < 800  # about two rows a day
    assert (zenith[moved] > 80.0).all()


def test_sunlit_midpoints_sit_where_the_sun_is_up():
    hours = weather.sunlit_midpoints(8760)
    start = np.arange(8760)
    assert ((hours > start) & (hours < start + 1)).all()
    zenith, _ = weather.solar_position(hours)
    ghi = read_tmy3_weather()["ghi_w_per_m2"]
    # every hour with measured sunlight is placed at a sun above (or just at) the horizon
    assert zenith[ghi > 0].max() < 91.0


def test_plane_of_array_matches_pvlib_hay_davies(pvlib_sun):
    pvlib = pytest.importorskip("pvlib")
    hours, times, zenith, azimuth = pvlib_sun
    tmy = read_tmy3_weather()
    dni_extra = np.asarray(pvlib.irradiance.get_extra_radiation(times))
    # the same Spencer series; pvlib takes the day of year in UTC, we take the local day
    np.testing.assert_allclose(
        weather.extraterrestrial_dni(np.floor(hours / 24.0) + 1.0), dni_extra, rtol=1e-3
    )
    reference = pvlib.irradiance.get_total_irradiance(
        weather.PV_TILT_DEG,
        weather.PV_AZIMUTH_DEG,
        zenith,
        azimuth,
        tmy["dni_w_per_m2"],
        tmy["ghi_w_per_m2"],
        tmy["dhi_w_per_m2"],
        dni_extra=dni_extra,
        albedo=weather.GROUND_ALBEDO,
        model="haydavies",
    )
    reference = np.asarray(reference["poa_global"])
    # the transposition alone, on pvlib's sun: the same model
    same_sun = weather.plane_of_array(
        tmy["dni_w_per_m2"], tmy["dhi_w_per_m2"], tmy["ghi_w_per_m2"], zenith, azimuth, dni_extra
    )
    np.testing.assert_allclose(same_sun, reference, atol=1e-3)
    # the whole hourly model (our sun): within 1 W/m^2 every hour (measured 0.17) and 0.05 % a
    # year
    ours = weather.plane_of_array_hourly(tmy)
    assert np.abs(ours - reference).max() < 1.0
    assert abs(ours.sum() / reference.sum() - 1.0) < 5e-4
    # a tilted array collects more than the horizontal: 1,744 against 1,566 kWh/m^2 a year
    assert 1.08 < ours.sum() / tmy["ghi_w_per_m2"].sum() < 1.15


# ---- PV plant ------------------------------------------------------------------------------


def test_pv_plant_capacity_factor_and_clipping():
    pv = _hourly("base", "pv_cf")
    assert 0.19 <= pv.mean() <= 0.24  # was 0.147 from horizontal irradiance
    assert pv.max() == 1.0  # the DC/AC ratio of 1.3 clips at the inverter's rating
    by_hour = pv.reshape(N_DAYS, 24)
    assert by_hour[:, [0, 1, 2, 3, 22, 23]].max() == 0.0
    month = DATES.astype("datetime64[M]").astype(int) % 12 + 1
    # a 30 deg tilt flattens the seasons: December still yields two thirds of June
    assert by_hour[month == 12].mean() > 0.6 * by_hour[month == 6].mean()


def test_pv_cells_lose_output_when_hot():
    poa = np.full(3, 900.0)
    cf = weather.pv_capacity_factor(poa, np.array([0.0, 25.0, 40.0]), np.full(3, 2.0))
    assert cf[0] > cf[1] > cf[2]
    # no light, no output; the inverter never exceeds its rating
    assert weather.pv_capacity_factor(np.zeros(1), np.zeros(1), np.zeros(1))[0] == 0.0
    assert weather.pv_capacity_factor(np.array([1200.0]), np.array([-10.0]), np.ones(1)) == 1.0


# ---- wind ----------------------------------------------------------------------------------


def test_turbine_curve_is_windpowerlibs_enercon_e115():
    assert weather.WIND_TURBINE == "E-115/3000"
    speeds, power, nominal_w = weather.turbine_power_curve()
    assert nominal_w == 3_000_000.0 and power.max() == nominal_w
    np.testing.assert_allclose(np.interp([8.0, 12.0], speeds, power), [1_549_000.0, 3_000_000.0])
    assert (np.diff(speeds) > 0).all() and (np.diff(power) >= 0).all()
    with pytest.raises(ValueError, match="not in windpowerlib's turbine library"):
        weather.turbine_power_curve("X-999/1")


def test_profiles_import_neither_windpowerlib_nor_pvlib():
    code = (
        "import sys; from powerzoo.data import get_profiles; get_profiles('base', 60); "
        "print('windpowerlib' in sys.modules, 'pvlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_wind_is_persistent_hour_to_hour():
    wind = _hourly("base", "wind_cf")
    lag1 = np.corrcoef(wind[:-1], wind[1:])[0, 1]
    ramp_p99 = np.percentile(np.abs(np.diff(wind)), 99)
    # measured SimBench plant profiles: 0.973-0.981 and 0.22-0.37 (the raw TMY3 ranks gave
    # 0.856 and 0.51)
    assert lag1 >= 0.95
    assert 0.15 <= ramp_p99 <= 0.35  # persistent, yet not smoothed flat
    assert 0.30 <= wind.mean() <= 0.45


def test_hub_speeds_keep_the_weibull_resource():
    speeds = weather.hub_speed(
        read_tmy3_weather()["wind_speed_m_per_s"], np.random.default_rng(20230103)
    )
    assert abs(speeds.mean() - weather.HUB_MEAN_SPEED) < 0.05
    assert abs(np.median(speeds) / speeds.mean() - 0.939) < 0.01  # Weibull k = 2: sqrt(ln 2 * 4/pi)


def test_weather_series_are_identical_across_processes():
    code = (
        "from powerzoo.data import get_profiles; import hashlib; "
        "p = get_profiles('cold_snap', 30).series; "
        "print(hashlib.sha256(b''.join(p[k].tobytes() for k in "
        "('demand_pu', 'pv_cf', 'wind_cf', 'temp_c'))).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(digests) == 1
