"""The 55 homes of the European LV feeder: who has rooftop PV and a home charger, their household
load, the tariff, and each evening's charging session.

Everything here is fixed data (a fixed-seed draw) except the charging sessions, which are drawn
from the episode's generator at reset. Steps are half-hours counted from noon of the start day.

* **Who has what**: PV on ``round(0.6 x 55) = 33`` homes and a charger on
  ``round(0.4 x 55) = 22`` homes, drawn once (seed :data:`LAYOUT_SEED`) phase by phase:
  ``phase_shares`` (default 0.6 / 0.25 / 0.15) of each are on phases A / B / C (largest
  remainder: 20 / 8 / 5 PV systems, 13 / 6 / 3 chargers; a phase never gets more than its
  homes, 21 / 19 / 15 in the load file, the excess going to the others by their shares), each
  phase's drawn uniformly among its homes. Real LV feeders are unbalanced because adoption is
  not spread by phase: a street's homes are often served from one phase, neighbours copy each
  other's purchases, and installers connect a system to the phase its home is on without
  balancing the feeder. Spread evenly (the homes' shares of the phases), the devices left
  alone take the unbalance factor to about 2 % at most on the test days; clustered like this,
  to 3.3 %, past 2 % on 48 % of the days, during the evening's charging.
  Each PV system's AC rating is drawn uniform in [3.5, 6.5] kW: UK domestic rooftop systems are
  mostly 3-4 kWp with newer ones larger, and the upper part of the range is what makes the
  feeder's midday rise leave the band. The inverter's apparent rating is 1.1 x its active rating,
  so it can absorb or inject 44 % of its active rating at any output (IEEE 1547-2018's
  category B reactive capability).
* **Household load**: the feeder's own 100 one-minute daily profiles (``Daily_1min_100profiles``
  of the test case, 8.4 kWh a day on average) averaged to half-hours; home ``k`` on calendar day
  ``d`` reads profile ``perm_d[k]`` of a fixed-seed permutation per day (a different day of a
  different household every day), scaled by the day's mean ``demand_pu``
  (:mod:`powerzoo.data.profiles`) over its annual mean (the season's heating and cooling);
  power factor 0.95 lagging as in the feeder's load file.
* **PV output**: AC rating x the calendar's ``pv_cf`` (:mod:`powerzoo.data.weather`).
* **Held-out families**: on ``load_stress`` and ``heatwave`` (the test days, transformed) the
  homes read that scenario's ``demand_pu`` and ``pv_cf``, the load still scaled against the base
  year's mean: ``load_stress`` adds 15 % to every home's load, ``heatwave`` the cooling load of
  its heat events and the warmer cells' lower PV output.
* **Tariff** (US $, a time-of-use retail tariff with an export rate, in the range of UK and US
  residential offers): 0.15 $/kWh off-peak 00:00-07:00, 0.40 $/kWh on-peak 16:00-20:00,
  0.25 $/kWh otherwise; exported energy earns 0.05 $/kWh. Energy a car lacks of its goal when
  it leaves is settled at 0.60 $/kWh, a public rapid charger's price, above the dearest home
  rate after charging losses (0.40 / 0.92), so leaving a car short never pays.
* **Charging sessions** (:func:`charging_sessions`): each car's trips on the start day and the
  next come from :func:`powerzoo.data.mobility.sample_trips`. A car whose first-day trip ends
  by noon (or that does not drive) is plugged in from the start; one still out at noon, or
  leaving after it, is plugged in when it is back. It leaves at its next-day departure when
  that is before noon, else stays to the episode's end, which then counts as its departure. The
  state of charge the car left home with is drawn uniform in [0.3, 0.7] (the day's trip is
  taken off it, floored at 5 %); its goal is 80 % state of charge, or what charging at full
  power from arrival reaches if less (:func:`powerzoo.devices.ev_fleet.departure_goal_kwh`).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.mobility import sample_trips
from powerzoo.data.profiles import get_profiles
from powerzoo.devices.ev_fleet import EVFleetParams, departure_goal_kwh
from powerzoo.physics.unbalanced.feeder import FEEDERS_DIR

__all__ = [
    "LAYOUT_SEED",
    "HORIZON",
    "STEP_MINUTES",
    "START_HOUR",
    "Homes",
    "Sessions",
    "build_homes",
    "phase_counts",
    "charging_sessions",
    "tariff_per_kwh",
]

LAYOUT_SEED = 20240545  # fixed: the same homes have PV and chargers on every machine
PROFILE_SEED = 20240546  # fixed: the daily assignment of household profiles
HORIZON = 48
STEP_MINUTES = 30
START_HOUR = 12  # episodes run from noon to noon, so the evening's charging fits in one
STEPS_PER_DAY = 24 * 60 // STEP_MINUTES
N_PROFILES = 100
LOAD_POWER_FACTOR = 0.95
Q_CAPABILITY = 0.44  # reactive capability in units of the inverter's active rating
OFF_PEAK, SHOULDER, ON_PEAK = 0.15, 0.25, 0.40  # $/kWh
EXPORT_PER_KWH = 0.05
UNMET_PER_KWH = 0.60
MIN_ARRIVAL_SOC = 0.05


def tariff_per_kwh(hour: np.ndarray) -> np.ndarray:
    """Import tariff [$/kWh] at hour of day ``hour`` (float hours, 0-24)."""
    hour = np.asarray(hour, dtype=np.float64) % 24.0
    out = np.full(hour.shape, SHOULDER)
    out[hour < 7.0] = OFF_PEAK
    out[(hour >= 16.0) & (hour < 20.0)] = ON_PEAK
    return out


@functools.lru_cache(maxsize=1)
def _half_hour_profiles() -> np.ndarray:
    """The feeder's 100 daily household profiles as half-hour means [100, 48] (kW)."""
    folder = FEEDERS_DIR / "european_lv" / "Daily_1min_100profiles"
    minutes = np.stack(
        [np.loadtxt(folder / f"load_profile_{i}.txt") for i in range(1, N_PROFILES + 1)]
    )
    return minutes.reshape(N_PROFILES, STEPS_PER_DAY, -1).mean(axis=2)


@dataclasses.dataclass(frozen=True)
class Homes:
    """The fixed part: devices, ratings, and year-long series on the half-hour grid.

    Series are flat over ``(N_DAYS + 1) * 48`` half-hours from midnight of 1 January (the last
    day repeats 1 January), so step ``t`` of an episode starting on day ``d`` is
    ``d * 48 + 24 + t``.
    """

    n_homes: int
    pv_homes: np.ndarray  # [n_pv] home index of each PV system (ascending)
    pv_kw: np.ndarray  # [n_pv] AC rating [kW]
    ev_homes: np.ndarray  # [n_ev] home index of each charger (ascending)
    load_kw: np.ndarray  # [(N_DAYS + 1) * 48, n_homes] household active power [kW]
    pv_cf: np.ndarray  # [(N_DAYS + 1) * 48] PV output per unit of AC rating
    tariff: np.ndarray  # [48] import tariff of each step of the day from noon [$/kWh]

    @property
    def n_pv(self) -> int:
        """Number of PV systems."""
        return int(self.pv_homes.size)

    @property
    def n_ev(self) -> int:
        """Number of home chargers."""
        return int(self.ev_homes.size)

    @property
    def q_max_kvar(self) -> np.ndarray:
        """[n_pv] reactive capability of each inverter [kvar]."""
        return Q_CAPABILITY * self.pv_kw

    def flat(self, day: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Half-hour index into the series of step ``t`` of episodes starting on calendar
        ``day``."""
        return np.asarray(day) * STEPS_PER_DAY + START_HOUR * 2 + np.asarray(t)


def phase_counts(total: int, shares: tuple[float, ...], capacity: np.ndarray) -> np.ndarray:
    """Devices per phase [3]: ``total`` split by ``shares`` (largest remainder), no phase given
    more than its ``capacity`` (homes on it), the excess moved to the phases with room in
    proportion to their shares."""
    shares_ = np.asarray(shares, dtype=np.float64)
    capacity = np.asarray(capacity, dtype=np.int64)
    if total > capacity.sum():
        raise ValueError(f"{total} devices do not fit on {int(capacity.sum())} homes")
    counts = np.zeros(3, dtype=np.int64)
    room = capacity > 0
    while counts.sum() < total:
        left = total - counts.sum()
        weight = np.where(room, shares_, 0.0)
        if weight.sum() <= 0.0:  # only phases of zero share have room left
            weight = room.astype(np.float64)
        exact = left * weight / weight.sum()
        add = np.floor(exact).astype(np.int64)
        order = np.argsort(-(exact - add), kind="stable")
        add[order[: left - add.sum()]] += 1
        counts = np.minimum(counts + add, capacity)
        room = counts < capacity
    return counts


def _draw_by_phase(
    rng: np.random.Generator, home_phase: np.ndarray, total: int, shares: tuple[float, ...]
) -> np.ndarray:
    """``total`` distinct homes, :func:`phase_counts` of them on each phase, drawn uniformly
    among that phase's homes (ascending)."""
    counts = phase_counts(total, shares, np.bincount(home_phase, minlength=3))
    picked = [
        rng.choice(np.flatnonzero(home_phase == phase), int(k), replace=False)
        for phase, k in enumerate(counts)
    ]
    return np.sort(np.concatenate(picked))


@functools.lru_cache(maxsize=4)
def build_homes(
    home_phase: tuple[int, ...],
    pv_share: float,
    ev_share: float,
    phase_shares: tuple[float, float, float],
    pv_kw_low: float,
    pv_kw_high: float,
    scenario: str = "base",
) -> Homes:
    """The homes of the feeder (module docstring) for the phase (0, 1, 2) of each home in the
    load file, the penetrations, their split over the phases and the PV sizes, with the household
    load and PV output of profile scenario ``scenario`` (:mod:`powerzoo.data.profiles`: a stress
    family's demand and PV; the load is scaled against the base scenario's annual mean, so a
    family's extra demand reaches the homes)."""
    phases = np.asarray(home_phase, dtype=np.int64)
    n_homes = phases.size
    rng = np.random.default_rng(LAYOUT_SEED)
    n_pv, n_ev = round(pv_share * n_homes), round(ev_share * n_homes)
    pv_homes = _draw_by_phase(rng, phases, n_pv, phase_shares)
    ev_homes = _draw_by_phase(rng, phases, n_ev, phase_shares)
    pv_kw = np.round(rng.uniform(pv_kw_low, pv_kw_high, n_pv), 1)
    profiles = get_profiles(scenario, STEP_MINUTES)
    daily = profiles.series["demand_pu"].reshape(-1, STEPS_PER_DAY).mean(axis=1)
    base = get_profiles("base", STEP_MINUTES).series["demand_pu"]
    base_mean = base.reshape(-1, STEPS_PER_DAY).mean(axis=1)[: calendar.N_DAYS].mean()
    scale = daily / base_mean  # [N_DAYS + 1]
    pick = np.random.default_rng(PROFILE_SEED)
    shapes = _half_hour_profiles()
    days = scale.size
    index = np.stack([pick.permutation(N_PROFILES)[:n_homes] for _ in range(days)])
    load = shapes[index] * scale[:, None, None]  # [days, n_homes, 48]
    hours = START_HOUR + (np.arange(HORIZON) + 0.5) * STEP_MINUTES / 60.0
    return Homes(
        n_homes=n_homes,
        pv_homes=pv_homes,
        pv_kw=pv_kw,
        ev_homes=ev_homes,
        load_kw=np.ascontiguousarray(load.transpose(0, 2, 1).reshape(-1, n_homes)),
        pv_cf=np.asarray(profiles.series["pv_cf"], dtype=np.float64),
        tariff=tariff_per_kwh(hours),
    )


@dataclasses.dataclass(frozen=True)
class Sessions:
    """Each car's charging session of an episode; arrays ``[B, n_ev]``."""

    arrive: np.ndarray  # first step plugged in
    depart: np.ndarray  # step it leaves (HORIZON: stays to the end)
    energy_kwh: np.ndarray  # battery energy on arrival
    goal_kwh: np.ndarray  # energy it should leave with


def charging_sessions(
    rng: np.random.Generator,
    first_day: np.ndarray,
    n_ev: int,
    fleet: EVFleetParams,
    soc_low: float,
    soc_high: float,
) -> Sessions:
    """Draw every car's session for episodes starting at noon of calendar days ``first_day``
    [B] (module docstring)."""
    trips = sample_trips(rng, first_day, 2, n_ev)
    soc = rng.uniform(soc_low, soc_high, (first_day.size, n_ev))
    per_step = 60.0 / STEP_MINUTES
    first_done = ~trips.driven[:, 0] | (trips.return_h[:, 0] <= START_HOUR)
    back = np.ceil((trips.return_h[:, 0] - START_HOUR) * per_step).astype(np.int64)
    arrive = np.where(first_done, 0, back)
    leave_next = trips.driven[:, 1] & (trips.leave_h[:, 1] < START_HOUR)
    out = np.floor((trips.leave_h[:, 1] + 24 - START_HOUR) * per_step).astype(np.int64)
    depart = np.where(leave_next, np.maximum(out, arrive + 1), HORIZON)
    energy = np.maximum(
        soc * fleet.battery_kwh - trips.energy_kwh[:, 0], MIN_ARRIVAL_SOC * fleet.battery_kwh
    )
    goal = departure_goal_kwh(fleet, energy, depart - arrive, STEP_MINUTES / 60.0)
    return Sessions(arrive, depart, energy, goal)
