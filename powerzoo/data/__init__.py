"""Exogenous data: calendar, date splits and offline profiles (demand, price, PV, wind,
temperature)."""

from powerzoo.data.calendar import BASE_SPLITS, STRESS_SPLITS, check_split, split_day_indices
from powerzoo.data.profiles import SCENARIOS, SERIES, Profiles, get_profiles

__all__ = [
    "BASE_SPLITS",
    "STRESS_SPLITS",
    "SCENARIOS",
    "SERIES",
    "Profiles",
    "check_split",
    "get_profiles",
    "split_day_indices",
]
