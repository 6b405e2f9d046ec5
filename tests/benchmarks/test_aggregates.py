"""Aggregates across tasks (IQM, mean, median, optimality gap), probability of improvement and
performance profiles, on inputs whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from powerzoo.benchmarks.aggregates import (
    aggregate_scores,
    performance_profile,
    plot_performance_profiles,
    plot_profile_panels,
    probability_of_improvement,
)


def test_aggregates_of_known_scores():
    scores = {"a": [0.0, 1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0, 7.0], "c": [0.2, 0.2, 0.2, 0.2]}
    out = aggregate_scores(scores, n_resamples=200)
    # 12 runs pooled (0 0.2 0.2 0.2 0.2 1 2 3 4 5 6 7), 3 cut from each end
    assert out["iqm"]["value"] == pytest.approx(np.mean([0.2, 0.2, 1.0, 2.0, 3.0, 4.0]))
    assert out["mean"]["value"] == pytest.approx(np.mean([1.5, 5.5, 0.2]))
    assert out["median"]["value"] == pytest.approx(1.5)
    # optimality gap: 1 - mean(min(score, 1)) over the 12 runs
    capped = [0.0, 1, 1, 1, 1, 1, 1, 1, 0.2, 0.2, 0.2, 0.2]
    assert out["optimality_gap"]["value"] == pytest.approx(1.0 - np.mean(capped))
    for result in out.values():
        assert result["ci_low"] <= result["value"] <= result["ci_high"]


def test_stratified_bootstrap_keeps_every_task():
    """Runs are resampled within each task: tasks whose runs agree give a zero-width interval
    however different the tasks are."""
    out = aggregate_scores({"a": [0.0, 0.0, 0.0], "b": [1.0, 1.0, 1.0]}, n_resamples=300)
    assert out["mean"]["ci_low"] == out["mean"]["ci_high"] == pytest.approx(0.5)
    spread = aggregate_scores({"a": [0.0, 1.0, 2.0], "b": [1.0, 1.0, 1.0]}, n_resamples=300)
    assert spread["mean"]["ci_low"] < spread["mean"]["value"] < spread["mean"]["ci_high"]


def test_probability_of_improvement_is_mann_whitney_per_task():
    assert probability_of_improvement({"t": [2.0, 3.0]}, {"t": [0.0, 1.0]})["value"] == 1.0
    assert probability_of_improvement({"t": [1.0, 2.0]}, {"t": [1.0, 2.0]})["value"] == 0.5
    # x = [1, 3], y = [2, 2]: 2 of 4 pairs above; x = [1, 2], y = [2]: one tie of 2 pairs
    two = probability_of_improvement(
        {"a": [1.0, 3.0], "b": [1.0, 2.0]}, {"a": [2.0, 2.0], "b": [2.0]}
    )
    assert two["value"] == pytest.approx(np.mean([0.5, 0.25]))
    assert two["ci_low"] <= two["value"] <= two["ci_high"]
    with pytest.raises(ValueError, match="same tasks"):
        probability_of_improvement({"a": [1.0]}, {"b": [1.0]})


def test_performance_profile_and_its_plot(tmp_path):
    scores = {"a": [0.0, 0.5, 1.0, 1.5], "b": [0.9, 0.9]}
    profile = performance_profile(scores, [-1.0, 0.25, 0.95, 2.0], n_resamples=200)
    # task a: 4/4, 3/4, 2/4, 0/4 above; task b: 1, 1, 0, 0; averaged over the two tasks
    assert profile["fraction"] == pytest.approx([1.0, 0.875, 0.25, 0.0])
    assert np.all(profile["ci_low"] <= profile["fraction"] + 1e-12)
    assert np.all(profile["fraction"] <= profile["ci_high"] + 1e-12)
    other = performance_profile({"a": [0.1] * 4, "b": [0.2] * 2}, profile["taus"], n_resamples=50)
    path = plot_performance_profiles({"X": profile, "Y": other}, tmp_path / "p" / "profile.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    # two panels side by side: one figure twice as wide, the same height
    from matplotlib.image import imread

    both = plot_profile_panels({"all": {"X": profile}, "kept": {"X": other}}, tmp_path / "two.png")
    one, two = imread(path).shape, imread(both).shape
    assert two[0] == one[0] and two[1] == 2 * one[1]
    with pytest.raises(ValueError, match="no panel"):
        plot_profile_panels({}, tmp_path / "none.png")


def test_bad_scores_are_refused():
    with pytest.raises(ValueError, match="no tasks"):
        aggregate_scores({})
    with pytest.raises(ValueError, match="no runs"):
        aggregate_scores({"a": []})
    with pytest.raises(ValueError, match="not finite"):
        aggregate_scores({"a": [0.1, float("nan")]})
