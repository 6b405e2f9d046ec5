"""Date splits: two-week blocks, and no episode of any task touching another split's days."""

import math

import numpy as np
import pytest

from powerzoo.data import BASE_SPLITS, split_day_indices
from powerzoo.data.calendar import DATES, base_split_of_days, split_blocks
from powerzoo.tasks.registry import list_tasks, make_task, task_spec

SPLIT_DAYS = {s: set(np.flatnonzero(base_split_of_days() == s).tolist()) for s in BASE_SPLITS}


def _episode_days(name: str) -> int:
    spec = task_spec(name)
    return math.ceil(spec.horizon * spec.step_minutes / 1440)


def test_blocks_are_two_weeks_and_follow_the_pattern():
    blocks = split_blocks()
    assert blocks.max() == 25 and np.bincount(blocks).tolist() == [14] * 25 + [15]
    pattern = ["train", "val", "train", "train", "test"]
    assert [base_split_of_days()[blocks == b][0] for b in range(26)] == [
        pattern[b % 5] for b in range(26)
    ]
    assert str(DATES[min(SPLIT_DAYS["test"])]) == "2023-02-26"
    assert DATES[max(SPLIT_DAYS["val"])].astype(str) == "2023-11-04"


def test_the_builtin_tasks_include_the_seven_day_ones():
    names = set(list_tasks())
    assert len(names) >= 14
    assert _episode_days("opf_118_7d") == 7 and _episode_days("marl_ev_v2g") == 7


@pytest.mark.parametrize("name", sorted(list_tasks()))
def test_no_episode_of_any_task_touches_another_split(name):
    spec = task_spec(name)
    episode_days = _episode_days(name)
    for split in spec.splits:
        task = make_task(name, split)
        assert task.episode_days == episode_days
        own = "test" if split not in BASE_SPLITS else split
        days = SPLIT_DAYS[own]
        assert task.n_days >= 1, (name, split)
        for start in task.split_days.tolist():
            # the episode and its buffer day lie in the split's days
            assert set(range(start, start + episode_days + 1)) <= days, (name, split, start)


def test_seven_day_episodes_no_longer_cross_the_splits():
    # the day-of-month split let 46 % of test-episode days of the 7-day tasks fall on train days
    for split, other in (("test", "train"), ("val", "test"), ("train", "val")):
        starts = split_day_indices(split, episode_days=7)
        days = np.concatenate([np.arange(d, d + 8) for d in starts])
        assert not np.isin(days, list(SPLIT_DAYS[other])).any()
        assert starts.size == (35 if split != "train" else 148)


def test_every_split_holds_the_longest_horizon():
    longest = max(_episode_days(name) for name in list_tasks())
    for split in ("train", "val", "test", "heatwave", "cold_snap", "low_renewable", "load_stress"):
        assert split_day_indices(split, episode_days=longest).size >= 1


def test_one_day_starts_leave_the_buffer_day_in_the_split():
    starts = split_day_indices("test")
    assert starts.size == 65  # 14 days a block less the last one, whose next day is train
    assert all(d + 1 in SPLIT_DAYS["test"] for d in starts.tolist())


def test_bad_episode_lengths_raise():
    with pytest.raises(ValueError, match="episode_days must be a positive integer, got 0"):
        split_day_indices("test", episode_days=0)
    with pytest.raises(ValueError, match="episode_days must be a positive integer, got 1.5"):
        split_day_indices("test", episode_days=1.5)
    with pytest.raises(ValueError, match="no start day for an episode of 14 day"):
        split_day_indices("val", episode_days=14)


def test_a_task_whose_horizon_fits_no_start_names_itself():
    import dataclasses

    from powerzoo.tasks.base import Task
    from powerzoo.tasks.battery_arbitrage import BatteryArbitrage

    long_spec = dataclasses.replace(BatteryArbitrage.make_spec(), horizon=20 * 48)
    with pytest.raises(ValueError, match=r"battery_arbitrage, split 'test': .* 20 day\(s\)"):
        Task.__init__(object.__new__(BatteryArbitrage), long_spec, "test")


def test_the_train_mean_price_day_still_works():
    from powerzoo.tasks.tariffs import reference_price_per_mwh

    assert 30.0 < reference_price_per_mwh(48, 30) < 50.0
