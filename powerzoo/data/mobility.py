"""Home-based trips of a fleet of private cars: when each car leaves home, when it is back, how far
it went.

A documented stochastic commuting model (no survey file is read). Each car makes at most one
round trip a day, leaving home and coming back the same day; on a day without a trip it stays
plugged in at home. What a day looks like depends on its type in
:func:`powerzoo.data.calendar.day_types`
(weekday; Saturday; Sunday or a US federal holiday), so an episode that starts on a split day
sees that calendar's own weekends and holidays.

Published figures the model is fitted to (facts; the source is named with each):

* Daily distance on a driving day: 30 miles on average. 2017 NHTS (US National Household
  Travel Survey): "in a one-vehicle household the average daily mileage is about 30 miles"
  (US DOE Vehicle Technologies Office, Fact of the Week #1047, 17 September 2018).
* Leaving home for work: in the Census 2000 "Journey to Work" report, 53 % of workers left home
  between 6:30 and 8:29 a.m. and 20 % between midnight and 6:29 a.m. A normal law with mean
  7.5 h and standard deviation 1.4 h puts 52 % and 24 % in those windows.
* Mean one-way commute in the 2017 American Community Survey: 26.9 minutes.

Modelling choices (assumptions, not survey figures):

* Weekday: a car is driven with probability 0.95 (days off, illness); it leaves at
  N(7.5 h, 1.4 h) clipped to [5, 11] h and is away N(9.5 h, 1.5 h) (an 8-hour working day,
  two commutes of about half an hour, about half an hour of errands), at least 1 h, back by
  23 h.
* Saturday / Sunday-holiday: driven with probability 0.75 / 0.6; leaves at N(11 h, 2 h)
  clipped to [7, 18] h, away N(4 h, 2 h), at least 1 h, back by 23 h.
* Distance: log-normal with the day type's mean (30 miles on weekdays, 24 miles at weekends,
  80 % of the weekday figure) and log-standard deviation 0.7, clipped to [2, 120] miles.
* Energy drawn by the car: ``KWH_PER_MILE = 0.30`` kWh per mile **at the battery** (what
  :func:`powerzoo.devices.ev_fleet.ev_fleet_step` takes out of the stored energy while the car
  is away), so a trip draws about 9 kWh on a weekday driving day (8.9 kWh measured, the
  clipping of the distance included) and at most 36 kWh. EPA consumption ratings are measured
  at the wall (AC energy to recharge the car, charging losses included) and lie at about 0.25
  to 0.35 kWh/mile for battery-electric cars; putting 0.30 kWh back through the fleet's
  92 %-efficient charger (:class:`powerzoo.devices.ev_fleet.EVFleetParams`) takes 0.326 kWh
  from the grid, a mid-size car's rating within that range.

Everything is drawn from the generator the caller passes (the env's episode RNG), so an
episode's trips are reproducible from its reset seed and differ between episodes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from powerzoo.data import calendar

__all__ = [
    "DayTypeTrips",
    "TRIP_LAWS",
    "KWH_PER_MILE",
    "MAX_MILES",
    "LATEST_RETURN_H",
    "Trips",
    "sample_trips",
]

KWH_PER_MILE = 0.30
MIN_MILES, MAX_MILES = 2.0, 120.0
MIN_AWAY_H = 1.0
LATEST_RETURN_H = 23.0  # every trip ends the day it starts, so a night is always spent at home


@dataclasses.dataclass(frozen=True)
class DayTypeTrips:
    """Trip law of one day type (hours of the day, miles)."""

    p_drive: float  # probability that a car makes its round trip that day
    leave_mean_h: float
    leave_sd_h: float
    leave_min_h: float
    leave_max_h: float
    away_mean_h: float
    away_sd_h: float
    miles_mean: float  # mean of the log-normal daily distance
    miles_sigma_log: float = 0.7

    def __post_init__(self) -> None:
        if not 0.0 <= self.p_drive <= 1.0:
            raise ValueError(f"p_drive must lie in [0, 1], got {self.p_drive}")
        if not 0.0 <= self.leave_min_h <= self.leave_max_h <= LATEST_RETURN_H - MIN_AWAY_H:
            raise ValueError(
                f"need 0 <= leave_min_h <= leave_max_h <= {LATEST_RETURN_H - MIN_AWAY_H} h"
            )
        if (
            min(self.leave_sd_h, self.away_sd_h, self.miles_sigma_log) < 0.0
            or self.miles_mean <= 0.0
        ):
            raise ValueError("spreads must be >= 0 and miles_mean > 0")


# by calendar.day_types(): 0 weekday, 1 Saturday, 2 Sunday or holiday; each row holds the fields
# of DayTypeTrips in order: p_drive, leave mean / sd / min / max (h), away mean / sd (h), miles_mean
TRIP_LAWS = tuple(
    DayTypeTrips(*fields)
    for fields in (
        (0.95, 7.5, 1.4, 5.0, 11.0, 9.5, 1.5, 30.0),
        (0.75, 11.0, 2.0, 7.0, 18.0, 4.0, 2.0, 24.0),
        (0.60, 11.0, 2.0, 7.0, 18.0, 4.0, 2.0, 24.0),
    )
)


@dataclasses.dataclass(frozen=True)
class Trips:
    """One round trip per car and day; arrays ``[B, n_days, n_vehicles]``."""

    driven: np.ndarray  # bool: the car makes its trip that day
    leave_h: np.ndarray  # hour of the day the car leaves home (float)
    return_h: np.ndarray  # hour of the day it is back (> leave_h, <= LATEST_RETURN_H)
    miles: np.ndarray  # distance driven (0 on a day without a trip)

    @property
    def energy_kwh(self) -> np.ndarray:
        """Battery energy each trip draws (kWh, storage side: ``miles x KWH_PER_MILE``)."""
        return self.miles * KWH_PER_MILE


def sample_trips(
    rng: np.random.Generator, first_day: np.ndarray, n_days: int, n_vehicles: int
) -> Trips:
    """Trips of ``n_vehicles`` cars on ``n_days`` consecutive calendar days from each ``first_day``
    [B].

    ``first_day`` are day-of-year indices (0 = 1 January); days past 31 December wrap to the start
    of the year, as the profiles do. Draws come from ``rng`` in a fixed order, so a seeded
    generator gives the same trips.
    """
    first_day = np.asarray(first_day, dtype=np.int64)
    if first_day.ndim != 1:
        raise ValueError(
            f"first_day must be a 1-D array of day indices, got shape {first_day.shape}"
        )
    if n_days < 1 or n_vehicles < 1:
        raise ValueError(f"need n_days >= 1 and n_vehicles >= 1, got {n_days}, {n_vehicles}")
    days = (first_day[:, None] + np.arange(n_days)) % calendar.N_DAYS  # [B, D]
    kind = calendar.day_types()[days]  # [B, D]
    law = {
        f.name: np.array([getattr(t, f.name) for t in TRIP_LAWS])[kind][:, :, None]
        for f in dataclasses.fields(DayTypeTrips)
    }  # each [B, D, 1]
    shape = (first_day.size, n_days, n_vehicles)
    driven = rng.random(shape) < law["p_drive"]
    leave = np.clip(
        law["leave_mean_h"] + law["leave_sd_h"] * rng.standard_normal(shape),
        law["leave_min_h"],
        law["leave_max_h"],
    )
    away = np.maximum(
        law["away_mean_h"] + law["away_sd_h"] * rng.standard_normal(shape), MIN_AWAY_H
    )
    back = np.minimum(leave + away, LATEST_RETURN_H)
    sigma = law["miles_sigma_log"]
    mu = np.log(law["miles_mean"]) - 0.5 * sigma**2  # so that the mean is miles_mean
    miles = np.clip(np.exp(mu + sigma * rng.standard_normal(shape)), MIN_MILES, MAX_MILES)
    return Trips(driven, leave, back, np.where(driven, miles, 0.0))
