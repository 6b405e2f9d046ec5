"""Seed x test block bootstrap and paired differences."""

from __future__ import annotations

import numpy as np
import pytest

from powerzoo.benchmarks.resampling import (
    SAME_RETURN,
    SeedBlockResamples,
    episode_blocks,
    paired_difference,
)
from powerzoo.benchmarks.stats import bootstrap_ci, percentile_interval

TEST_BLOCKS = [4, 9, 14, 19, 24]
BLOCKS = np.repeat(TEST_BLOCKS, 13)


def test_episode_blocks_are_the_two_week_test_blocks():
    one_day = episode_blocks("battery_arbitrage", "test", range(65))
    assert one_day.tolist() == BLOCKS.tolist()
    seven_days = episode_blocks("marl_ev_v2g", "test", range(35))
    assert seven_days.tolist() == np.repeat(TEST_BLOCKS, 7).tolist()
    with pytest.raises(ValueError, match="start days"):
        episode_blocks("battery_arbitrage", "test", [65])


def test_resamples_draw_whole_seeds_and_whole_blocks():
    rs = SeedBlockResamples.draw(5, BLOCKS, n_resamples=50, seed=3)
    assert rs.seed_weights.shape == (50, 5) and rs.day_weights.shape == (50, 65)
    assert np.all(rs.seed_weights.sum(axis=1) == 5)
    per_block = rs.day_weights.reshape(50, 5, 13)
    assert np.all(per_block == per_block[:, :, :1])  # every day of a block drawn together
    assert np.all(per_block[:, :, 0].sum(axis=1) == 5)
    again = SeedBlockResamples.draw(5, BLOCKS, n_resamples=50, seed=3)
    assert np.array_equal(again.day_weights, rs.day_weights)
    x = np.arange(5 * 65, dtype=float).reshape(5, 65)
    s, d = rs.seed_weights[0], rs.day_weights[0]
    assert rs.mean(x)[0] == pytest.approx((s[:, None] * d[None, :] * x).sum() / (s.sum() * d.sum()))
    assert np.allclose(rs.mean(np.full((5, 65), 7.0)), 7.0)


def test_seed_block_interval_covers_where_the_pooled_one_does_not():
    """Days share a block effect and runs a seed effect: the pooled-episode interval (v1)
    covers the true mean on few replications; the seed x block one on most."""
    rng = np.random.default_rng(1)
    covered = pooled_covered = 0
    n_reps = 100
    for rep in range(n_reps):
        block_effect = np.repeat(rng.normal(0.0, 1.0, 5), 13)
        seed_effect = rng.normal(0.0, 0.5, (5, 1))
        x = 10.0 + block_effect + seed_effect + rng.normal(0.0, 0.5, (5, 65))
        low, high = percentile_interval(
            SeedBlockResamples.draw(5, BLOCKS, n_resamples=300, seed=rep).mean(x)
        )
        covered += low <= 10.0 <= high
        low, high = bootstrap_ci(x.ravel(), n_resamples=300, seed=rep)
        pooled_covered += low <= 10.0 <= high
    assert covered / n_reps >= 0.8
    assert pooled_covered / n_reps <= 0.3


def test_paired_difference_of_a_constant_gain():
    base = np.linspace(-200.0, -100.0, 65)
    runs = np.stack([base + 10.0, base + 10.0, base - 5.0])
    rs = SeedBlockResamples.draw(3, BLOCKS, n_resamples=200)
    out = paired_difference(runs, base, rs)
    assert out["diff"] == pytest.approx(5.0)
    assert out["seeds_better"] == 2 and out["n_seeds"] == 3
    assert out["pct"] == pytest.approx(100 * 5.0 / 150.0)
    assert -5.0 - 1e-9 <= out["ci_low"] <= 5.0 <= out["ci_high"] <= 10.0 + 1e-9
    same = paired_difference(np.stack([base + 3.0]), base, SeedBlockResamples.draw(1, BLOCKS))
    assert same["ci_low"] == pytest.approx(3.0) and same["ci_high"] == pytest.approx(3.0)


def test_a_float_noise_difference_is_no_seed_better():
    """A run that took the baseline's actions (a residual that kept the rule) differs from it by
    rounding only: no seed counts as better; a real gain of 1e-6 of the return still does."""
    base = np.linspace(-2000.0, -1000.0, 65)
    noise = base + np.abs(base) * 1e-12  # the same returns to the last digits, slightly higher
    gain = base + 1e-6 * 1500.0 * 10  # above SAME_RETURN of the |mean return|
    rs = SeedBlockResamples.draw(2, BLOCKS, n_resamples=50)
    assert (noise > base).all()
    assert paired_difference(np.stack([noise, noise]), base, rs)["seeds_better"] == 0
    assert paired_difference(np.stack([noise, gain]), base, rs)["seeds_better"] == 1
    assert SAME_RETURN == 1e-8


def test_pairing_removes_what_the_days_share():
    rng = np.random.default_rng(0)
    day_effect = rng.normal(0.0, 100.0, 65)
    base = -1000.0 + day_effect
    runs = base[None, :] + 2.0 + rng.normal(0.0, 1.0, (5, 65))
    rs = SeedBlockResamples.draw(5, BLOCKS, n_resamples=500)
    paired = paired_difference(runs, base, rs)
    assert 0.0 < paired["ci_low"] < 2.0 < paired["ci_high"]
    low, high = percentile_interval(rs.mean(runs))  # the run's own mean return: day effects
    assert paired["ci_high"] - paired["ci_low"] < 0.1 * (high - low)
