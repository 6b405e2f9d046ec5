"""The calendar every profile is indexed by, and the train / val / test split by date.

PowerZoo's exogenous data cover one calendar year, 2023 (365 days, 1 January a Sunday).
The year is cut into 26 contiguous two-week blocks: day of year ``d`` (0 = 1 January) lies in
block ``min(d // 14, 25)`` (31 December joins the last block, which has 15 days). The blocks
repeat the pattern train, val, train, train, test by block index modulo 5, so every split sees
every season and no split's days sit next to another's within a week:

* ``train``: blocks 0, 2, 3, 5, 7, 8, ... (225 days)
* ``val``: blocks 1, 6, 11, 16, 21 (70 days): 15-28 January, 26 March-8 April, 4-17 June,
  13-26 August, 22 October-4 November
* ``test``: blocks 4, 9, 14, 19, 24 (70 days): 26 February-11 March, 7-20 May, 16-29 July,
  24 September-7 October, 3-16 December

Episode starts follow one rule for every horizon (:func:`split_day_indices`): an episode of
``n`` days may start on day ``d`` when days ``d .. d + n`` (the episode and one buffer day after
it, which look-ahead forecasts may peek into) all belong to the split. No episode of any split
touches another split's days. A one-day task has 12 or 13 starts per two-week block, a seven-day
task 7 (35 test starts).

Stress splits (``low_renewable``, ``load_stress``, ``price_spike``) start on the test days under
the same rule but read transformed profiles (see :mod:`powerzoo.data.profiles`). ``heatwave``
starts only on those test starts whose episode lies in May-September, the season of its heat
events (May, July and late September test days); ``cold_snap`` only on those whose episode lies
in December-March, the season of its cold events (the test days 26 February-11 March and
3-16 December). Workload stress splits (``workload_shock``)
also start on the test days; they read the base profiles and a transformed compute workload
(see :mod:`powerzoo.data.workload`), so only tasks with a job queue list them.
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
    "split_blocks",
    "base_split_of_days",
    "scenario_of_split",
    "check_split",
    "day_types",
]

YEAR = 2023
DATES: np.ndarray = np.arange(f"{YEAR}-01-01", f"{YEAR + 1}-01-01", dtype="datetime64[D]")
N_DAYS = int(DATES.size)

BASE_SPLITS = ("train", "val", "test")
STRESS_SPLITS = ("heatwave", "low_renewable", "load_stress", "price_spike", "cold_snap")
WORKLOAD_STRESS_SPLITS = ("workload_shock",)  # base profiles, transformed compute workload

BLOCK_DAYS = 14  # length of a split block
N_BLOCKS = N_DAYS // BLOCK_DAYS  # 26; the last block also takes 31 December
_BLOCK_PATTERN = ("train", "val", "train", "train", "test")  # by block index modulo 5
HEATWAVE_MONTHS = (5, 6, 7, 8, 9)  # May-September: the months of the heatwave events
COLD_SNAP_MONTHS = (12, 1, 2, 3)  # December-March: the months of the cold_snap events
# stress splits whose starts are limited to their event months
_EVENT_MONTHS = {"heatwave": HEATWAVE_MONTHS, "cold_snap": COLD_SNAP_MONTHS}

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


def _month() -> np.ndarray:
    """Month (1-12) of every day [N_DAYS]."""
    return DATES.astype("datetime64[M]").astype(np.int64) % 12 + 1


def split_blocks() -> np.ndarray:
    """Two-week block index of every day of the year [N_DAYS] (0..25)."""
    return np.minimum(np.arange(N_DAYS) // BLOCK_DAYS, N_BLOCKS - 1)


def base_split_of_days() -> np.ndarray:
    """Base split (``"train"``, ``"val"`` or ``"test"``) of every day of the year [N_DAYS]."""
    return np.asarray(_BLOCK_PATTERN)[split_blocks() % len(_BLOCK_PATTERN)]


def check_split(
    split: str, valid: tuple[str, ...] = BASE_SPLITS + STRESS_SPLITS + WORKLOAD_STRESS_SPLITS
) -> str:
    """Return ``split`` if it is one of ``valid``; otherwise raise a ``ValueError`` listing them.

    Args:
        split: A split name.
        valid: The accepted names.

    Returns:
        ``split``.
    """
    if split not in valid:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(valid)}")
    return split


def scenario_of_split(split: str) -> str:
    """Profile scenario a split reads: ``"base"`` for train/val/test and workload stress splits,
    else the stress name."""
    check_split(split)
    return "base" if split in BASE_SPLITS + WORKLOAD_STRESS_SPLITS else split


def split_day_indices(split: str, episode_days: int = 1) -> np.ndarray:
    """Day-of-year indices (0 = 1 January) on which episodes of ``split`` may start.

    An episode of ``episode_days`` days may start on day ``d`` when days ``d .. d + episode_days``
    (the episode plus one buffer day for look-ahead forecasts) all belong to the split's days:
    its own for ``train`` / ``val`` / ``test``, the test days for the stress splits. ``heatwave``
    keeps only the starts whose episode days lie in May-September, ``cold_snap`` those in
    December-March. Raises ``ValueError`` for an
    unknown split, a bad ``episode_days`` or an episode length no start of the split can hold.

    Args:
        split: A split name (base or stress).
        episode_days: Calendar days an episode spans.

    Returns:
        Start days, int64, ascending.
    """
    check_split(split)
    if isinstance(episode_days, bool) or not isinstance(episode_days, (int, np.integer)):
        raise ValueError(f"episode_days must be a positive integer, got {episode_days!r}")
    if episode_days < 1:
        raise ValueError(f"episode_days must be a positive integer, got {episode_days}")
    member = base_split_of_days() == (split if split in BASE_SPLITS else "test")
    span = int(episode_days) + 1  # the episode and its buffer day
    if span > N_DAYS:
        starts = np.zeros(0, dtype=np.int64)
    else:
        windows = np.lib.stride_tricks.sliding_window_view(member, span)
        starts = np.flatnonzero(windows.all(axis=1))
    if split in _EVENT_MONTHS:
        season = np.isin(_month(), _EVENT_MONTHS[split])
        keep = [bool(season[d : d + episode_days].all()) for d in starts]
        starts = starts[np.asarray(keep, dtype=bool)]
    if starts.size == 0:
        raise ValueError(
            f"split {split!r} has no start day for an episode of {episode_days} day(s) plus a "
            f"buffer day: its days come in runs of {BLOCK_DAYS} (the two-week blocks of "
            "powerzoo.data.calendar); use a shorter horizon"
        )
    return starts.astype(np.int64)


def day_types() -> np.ndarray:
    """Per-day type index [N_DAYS]: 0 weekday, 1 Saturday, 2 Sunday or holiday."""
    weekday = (DATES.astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
    out = np.zeros(N_DAYS, dtype=np.int64)
    out[weekday == 5] = 1
    out[weekday == 6] = 2
    out[np.isin(DATES, _HOLIDAYS)] = 2
    return out
