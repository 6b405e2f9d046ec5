"""The calendar every profile is indexed by, and the train / val / test split by date.

PowerZoo's exogenous data cover one calendar year, 2023 (365 days, 1 January a Sunday).
Splits are by day of month, so that every split sees every season:

* ``train``: days 1-20 of each month (240 days)
* ``val``: days 21-24 (48 days)
* ``test``: days 25 to month end (77 days)

Stress splits (``heatwave``, ``low_renewable``, ``load_stress``, ``price_spike``) start on the
test days but read transformed profiles (see :mod:`powerzoo.data.profiles`). Workload stress
splits (``workload_shock``) also start on the test days; they read the base profiles and a
transformed compute workload (see :mod:`powerzoo.data.workload`), so only tasks with a job queue
list them.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "YEAR",
    "N_DAYS",
    "DATES",
    "BASE_SPLITS",
    "STRESS_SPLITS",
    "WORKLOAD_STRESS_SPLITS",
    "split_day_indices",
    "scenario_of_split",
    "check_split",
    "day_types",
]

YEAR = 2023
DATES: np.ndarray = np.arange(f"{YEAR}-01-01", f"{YEAR + 1}-01-01", dtype="datetime64[D]")
N_DAYS = int(DATES.size)

BASE_SPLITS = ("train", "val", "test")
STRESS_SPLITS = ("heatwave", "low_renewable", "load_stress", "price_spike")
WORKLOAD_STRESS_SPLITS = ("workload_shock",)  # base profiles, transformed compute workload

# day-of-month ranges (inclusive) of the base splits
_SPLIT_DAYS_OF_MONTH = {"train": (1, 20), "val": (21, 24), "test": (25, 31)}

# US federal holidays of 2023 (observed dates); treated like Sundays in the load shape
_HOLIDAYS = np.array(
    [
        "2023-01-02",
        "2023-01-16",
        "2023-02-20",
        "2023-05-29",
        "2023-06-19",
        "2023-07-04",
        "2023-09-04",
        "2023-10-09",
        "2023-11-10",
        "2023-11-23",
        "2023-12-25",
    ],
    dtype="datetime64[D]",
)


def _day_of_month() -> np.ndarray:
    months = DATES.astype("datetime64[M]")
    return (DATES - months).astype(np.int64) + 1


def check_split(
    split: str, valid: tuple[str, ...] = BASE_SPLITS + STRESS_SPLITS + WORKLOAD_STRESS_SPLITS
) -> str:
    """Return ``split`` if it is one of ``valid``; otherwise raise a ``ValueError`` listing them."""
    if split not in valid:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(valid)}")
    return split


def scenario_of_split(split: str) -> str:
    """Profile scenario a split reads: ``"base"`` for train/val/test and workload stress splits,
    else the stress name."""
    check_split(split)
    return "base" if split in BASE_SPLITS + WORKLOAD_STRESS_SPLITS else split


def split_day_indices(split: str) -> np.ndarray:
    """Day-of-year indices (0 = 1 January) on which episodes of ``split`` may start."""
    check_split(split)
    lo, hi = _SPLIT_DAYS_OF_MONTH[split if split in BASE_SPLITS else "test"]
    dom = _day_of_month()
    return np.flatnonzero((dom >= lo) & (dom <= hi))


def day_types() -> np.ndarray:
    """Per-day type index [N_DAYS]: 0 weekday, 1 Saturday, 2 Sunday or holiday."""
    weekday = (DATES.astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
    out = np.zeros(N_DAYS, dtype=np.int64)
    out[weekday == 5] = 1
    out[weekday == 6] = 2
    out[np.isin(DATES, _HOLIDAYS)] = 2
    return out
