"""Intervals that resample what is independent in a run's test episodes: seeds and test blocks.

The test days are not independent draws. They come in blocks of consecutive days (the two-week
blocks of :mod:`powerzoo.data.calendar`; the test split holds five), neighbouring days share
weather, prices and load, and every seed of a run is tested on the same days. Resampling the
pooled episodes as if they were independent gives intervals that are too narrow. Here an
interval is a **stratified bootstrap over seeds x test blocks**: each resample draws the run's
seeds with replacement and, independently, the test blocks with replacement, and keeps every
episode of a drawn seed on a drawn block, as many times as both were drawn. A statistic that is
a mean over episodes becomes a weighted mean with weight ``n_seed[s] * n_block[block(d)]`` on the
episode of seed ``s`` on day ``d``; a baseline (one seed, the same days) gets the day weights.

Every statistic of one run is computed on the same resamples (:class:`SeedBlockResamples`), drawn
by ``numpy.random.default_rng(seed)``; the interval is the percentile interval
(:func:`~powerzoo.benchmarks.stats.percentile_interval`). Same inputs, same interval.

Claims against a baseline are **paired**: :func:`paired_difference` takes the difference of the
run's and the baseline's return on the same day (and, under the protocol, the same env seed), so
what the days have in common cancels before it is resampled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from powerzoo.benchmarks.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    percentile_interval,
)
from powerzoo.data import calendar
from powerzoo.tasks import make_task

__all__ = [
    "episode_blocks",
    "SeedBlockResamples",
    "paired_difference",
]


def episode_blocks(task: str, split: str, day_ids: Sequence[int]) -> np.ndarray:
    """Two-week block (0..25, :func:`~powerzoo.data.calendar.split_blocks`) of the start day of
    each episode: ``day_ids`` are split day indices of ``task`` on ``split`` (as in the baselines
    table), mapped to days of the year by the task's own start days.

    Args:
        task: A registered task name.
        split: The split the days index.
        day_ids: Split day index of each episode.

    Returns:
        Block index of each episode, int64 [len(day_ids)].
    """
    starts = make_task(task, split).split_days
    days = np.asarray(day_ids, dtype=np.int64)
    if days.size and (days.min() < 0 or days.max() >= starts.size):
        raise ValueError(f"{task} on {split!r} has {starts.size} start days; got day ids {days}")
    return calendar.split_blocks()[starts[days]].astype(np.int64)


def _counts(draws: np.ndarray, n: int) -> np.ndarray:
    """How often each of ``0..n-1`` appears in each row of ``draws`` [R, k]: float [R, n]."""
    return (draws[:, :, None] == np.arange(n)).sum(axis=1).astype(np.float64)


@dataclasses.dataclass(frozen=True)
class SeedBlockResamples:
    """One set of seed x block resamples (module docstring) for every statistic of a run.

    Attributes:
        seed_weights: times each seed is drawn in each resample [R, S].
        day_weights: times each day's block is drawn in each resample [R, D].
    """

    seed_weights: np.ndarray
    day_weights: np.ndarray

    @classmethod
    def draw(
        cls,
        n_seeds: int,
        blocks: Sequence[int] | np.ndarray,
        n_resamples: int = BOOTSTRAP_RESAMPLES,
        seed: int = BOOTSTRAP_SEED,
    ) -> SeedBlockResamples:
        """Draw ``n_resamples`` resamples of ``n_seeds`` seeds and of the distinct blocks of
        ``blocks`` (block of each day), both with replacement, by
        ``numpy.random.default_rng(seed)``.

        Args:
            n_seeds: Seeds of the run (each tested on every day).
            blocks: Block label of each day [D] (:func:`episode_blocks`).
            n_resamples: Resamples to draw.
            seed: Seed of the generator.

        Returns:
            The resamples.
        """
        if n_seeds < 1:
            raise ValueError(f"n_seeds must be >= 1, got {n_seeds}")
        if n_resamples < 1:
            raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
        labels, day_block = np.unique(np.asarray(blocks), return_inverse=True)
        if labels.size == 0:
            raise ValueError("no days to resample")
        rng = np.random.default_rng(seed)
        seed_draws = rng.integers(0, n_seeds, size=(n_resamples, n_seeds))
        block_draws = rng.integers(0, labels.size, size=(n_resamples, labels.size))
        block_weights = _counts(block_draws, labels.size)
        return cls(_counts(seed_draws, n_seeds), block_weights[:, day_block.ravel()])

    @property
    def n_resamples(self) -> int:
        """Number of resamples R."""
        return int(self.seed_weights.shape[0])

    def mean(self, values: np.ndarray) -> np.ndarray:
        """Weighted mean of a run's per-episode ``values`` [S, D] (any unit) in each resample
        [R]."""
        x = np.asarray(values, dtype=np.float64)
        if x.shape != (self.seed_weights.shape[1], self.day_weights.shape[1]):
            raise ValueError(
                f"values have shape {x.shape}, expected "
                f"{(self.seed_weights.shape[1], self.day_weights.shape[1])} (seeds, days)"
            )
        total = np.einsum("rs,sd,rd->r", self.seed_weights, x, self.day_weights)
        return total / (self.seed_weights.sum(axis=1) * self.day_weights.sum(axis=1))

    def day_mean(self, values: np.ndarray) -> np.ndarray:
        """Weighted mean of one value per day ``values`` [D] (a baseline's returns, any unit) in
        each resample [R]."""
        x = np.asarray(values, dtype=np.float64)
        if x.shape != (self.day_weights.shape[1],):
            raise ValueError(
                f"values have shape {x.shape}, expected ({self.day_weights.shape[1]},)"
            )
        return self.day_weights @ x / self.day_weights.sum(axis=1)


SAME_RETURN = 1e-8
"""A mean return difference within this share of the baseline's |mean return| (and of 1 $) is
float noise of the same actions, e.g. a residual learner that kept its untrained policy, the
rule, against the rule: such a seed is not counted better."""


def paired_difference(
    returns: np.ndarray,
    baseline_returns: np.ndarray,
    resamples: SeedBlockResamples,
    confidence: float = CONFIDENCE,
) -> dict[str, Any]:
    """Paired per-day difference of a run's returns [S, D] and a baseline's on the same days
    [D] ($ per episode), with its seed x block bootstrap interval.

    Args:
        returns: The run's return of each seed on each day ($ per episode).
        baseline_returns: The baseline's return on each day ($ per episode).
        resamples: The run's resamples (:meth:`SeedBlockResamples.draw`).
        confidence: Level of the interval.

    Returns:
        ``diff`` (mean of ``returns - baseline``, $ per episode; > 0: the run earns more),
        ``ci_low`` / ``ci_high`` (its interval), ``pct`` (``diff`` in % of the baseline's mean
        |return|; ``None`` when that is 0), ``seeds_better`` (seeds whose mean difference is
        above :data:`SAME_RETURN` of the baseline's |mean return|, at least 1e-8 $) and
        ``n_seeds``.
    """
    r = np.asarray(returns, dtype=np.float64)
    base = np.asarray(baseline_returns, dtype=np.float64)
    diffs = r - base[None, :]
    low, high = percentile_interval(resamples.mean(diffs), confidence)
    diff = float(diffs.mean())
    scale = abs(float(base.mean()))
    return {
        "diff": diff,
        "ci_low": low,
        "ci_high": high,
        "pct": 100.0 * diff / scale if scale > 0.0 else None,
        "seeds_better": int(np.sum(diffs.mean(axis=1) > SAME_RETURN * max(scale, 1.0))),
        "n_seeds": int(r.shape[0]),
    }
