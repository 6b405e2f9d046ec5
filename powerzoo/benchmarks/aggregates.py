"""Scores across tasks, as Agarwal et al. (2021, "Deep RL at the edge of the statistical
precipice", the ``rliable`` library) recommend: aggregate the per-run scores, give every
aggregate a stratified bootstrap interval, compare algorithms by the probability of improvement
and show whole score distributions as performance profiles.

Input: ``scores`` maps each task to the per-run scores of one algorithm (one number per seed, e.g.
``run_performance`` of :func:`~powerzoo.benchmarks.score_v2.score_runs`); tasks may have
different numbers of runs. The definitions follow ``rliable``'s:

* ``iqm``: the interquartile mean of all runs of all tasks pooled
  (:func:`~powerzoo.benchmarks.evaluation.interquartile_mean`: ``floor(n/4)`` cut from each end);
* ``mean`` / ``median``: the mean / median over tasks of each task's mean score;
* ``optimality_gap``: ``gamma - mean(min(score, gamma))`` over all runs (``gamma = 1``, the
  oracle): how far the runs fall short of the oracle, gains above it not counted;
* :func:`probability_of_improvement`: ``P(X > Y)`` averaged over tasks, each task's the
  Mann-Whitney ``U / (n m)`` (``[x > y] + 0.5 [x = y]`` over the run pairs);
* :func:`performance_profile`: for each threshold ``tau``, the share of runs scoring above it,
  averaged over tasks (each task counts the same).

Intervals: a **stratified bootstrap**: each resample draws each task's runs with replacement
within the task (the tasks themselves are kept), ``BOOTSTRAP_RESAMPLES`` resamples by
``numpy.random.default_rng(BOOTSTRAP_SEED)``, percentile intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from powerzoo.benchmarks.evaluation import interquartile_mean
from powerzoo.benchmarks.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    percentile_interval,
)
from powerzoo.fileio import atomic_save

__all__ = [
    "AGGREGATES",
    "aggregate_scores",
    "probability_of_improvement",
    "performance_profile",
    "plot_performance_profiles",
    "plot_profile_panels",
]

OPTIMALITY_GAMMA = 1.0
"""The score the optimality gap counts up to (1 = the oracle)."""

Scores = Mapping[str, Sequence[float] | np.ndarray]


def _task_arrays(scores: Scores) -> list[np.ndarray]:
    """Each task's runs as a float array; ``ValueError`` for no task, an empty task or a
    non-finite score."""
    if not scores:
        raise ValueError("no tasks to aggregate")
    out = []
    for task, values in scores.items():
        x = np.asarray(values, dtype=np.float64).ravel()
        if x.size == 0:
            raise ValueError(f"task {task!r} has no runs")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"task {task!r} has a score that is not finite: {x.tolist()}")
        out.append(x)
    return out


def _resampled(tasks: list[np.ndarray], n_resamples: int, seed: int) -> list[np.ndarray]:
    """Each task's runs drawn with replacement within the task: [R, n_task] per task."""
    rng = np.random.default_rng(seed)
    return [x[rng.integers(0, x.size, size=(n_resamples, x.size))] for x in tasks]


def _iqm(tasks: list[np.ndarray]) -> np.ndarray:
    return np.apply_along_axis(interquartile_mean, 1, np.concatenate(tasks, axis=1))


def _mean(tasks: list[np.ndarray]) -> np.ndarray:
    return np.stack([x.mean(axis=1) for x in tasks], axis=1).mean(axis=1)


def _median(tasks: list[np.ndarray]) -> np.ndarray:
    return np.median(np.stack([x.mean(axis=1) for x in tasks], axis=1), axis=1)


def _optimality_gap(tasks: list[np.ndarray]) -> np.ndarray:
    runs = np.concatenate(tasks, axis=1)
    return OPTIMALITY_GAMMA - np.minimum(runs, OPTIMALITY_GAMMA).mean(axis=1)


AGGREGATES: dict[str, Callable[[list[np.ndarray]], np.ndarray]] = {
    "iqm": _iqm,
    "mean": _mean,
    "median": _median,
    "optimality_gap": _optimality_gap,
}
"""The aggregates of :func:`aggregate_scores` (module docstring); each maps the tasks' runs,
``[R, n_task]`` per task, to one value per row [R]."""


def aggregate_scores(
    scores: Scores,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, dict[str, float]]:
    """IQM, mean, median and optimality gap of one algorithm's per-run scores across tasks
    (module docstring), each with its stratified bootstrap interval.

    Args:
        scores: ``{task: per-run scores}`` (score units: 0 = anchor, 1 = oracle).
        n_resamples: Bootstrap resamples.
        confidence: Level of the intervals.
        seed: Seed of the resamples.

    Returns:
        ``{aggregate: {"value", "ci_low", "ci_high"}}`` for each of :data:`AGGREGATES`.
    """
    tasks = _task_arrays(scores)
    point = [x[None, :] for x in tasks]
    resampled = _resampled(tasks, n_resamples, seed)
    out = {}
    for name, statistic in AGGREGATES.items():
        low, high = percentile_interval(statistic(resampled), confidence)
        out[name] = {"value": float(statistic(point)[0]), "ci_low": low, "ci_high": high}
    return out


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mann-Whitney ``U / (n m)`` of runs ``x`` [R, n] over ``y`` [R, m], per row [R]."""
    greater = (x[:, :, None] > y[:, None, :]).mean(axis=(1, 2))
    ties = (x[:, :, None] == y[:, None, :]).mean(axis=(1, 2))
    return greater + 0.5 * ties


def probability_of_improvement(
    scores_x: Scores,
    scores_y: Scores,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, float]:
    """``P(X > Y)``: the probability that a run of algorithm X scores above a run of Y on the
    same task, averaged over the tasks both have (module docstring), with its stratified
    bootstrap interval (X's and Y's runs drawn independently within each task).

    Args:
        scores_x: ``{task: per-run scores}`` of X.
        scores_y: ``{task: per-run scores}`` of Y (same tasks).
        n_resamples: Bootstrap resamples.
        confidence: Level of the interval.
        seed: Seed of the resamples.

    Returns:
        ``{"value", "ci_low", "ci_high"}`` (0.5: neither is better).
    """
    if set(scores_x) != set(scores_y):
        raise ValueError(
            f"X and Y must be scored on the same tasks; X only: "
            f"{sorted(set(scores_x) - set(scores_y))}, Y only: "
            f"{sorted(set(scores_y) - set(scores_x))}"
        )
    order = list(scores_x)
    xs = _task_arrays({t: scores_x[t] for t in order})
    ys = _task_arrays({t: scores_y[t] for t in order})
    point = np.mean([_improvement(x[None], y[None])[0] for x, y in zip(xs, ys, strict=True)])
    rx = _resampled(xs, n_resamples, seed)
    ry = _resampled(ys, n_resamples, seed + 1)
    stats = np.mean([_improvement(x, y) for x, y in zip(rx, ry, strict=True)], axis=0)
    low, high = percentile_interval(stats, confidence)
    return {"value": float(point), "ci_low": low, "ci_high": high}


def _profile(tasks: list[np.ndarray], taus: np.ndarray) -> np.ndarray:
    """Share of runs above each tau, averaged over tasks: [R, T] from [R, n_task] per task."""
    return np.mean([(x[:, :, None] > taus).mean(axis=1) for x in tasks], axis=0)


def performance_profile(
    scores: Scores,
    taus: Sequence[float] | np.ndarray,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, np.ndarray]:
    """Performance profile (run-score distribution) of one algorithm: for each threshold ``tau``
    (score units), the share of runs scoring above it, averaged over tasks, with a stratified
    bootstrap band.

    Args:
        scores: ``{task: per-run scores}``.
        taus: Thresholds.
        n_resamples: Bootstrap resamples.
        confidence: Level of the band.
        seed: Seed of the resamples.

    Returns:
        ``taus``, ``fraction`` (share above each tau) and its ``ci_low`` / ``ci_high``.
    """
    tasks = _task_arrays(scores)
    t = np.asarray(taus, dtype=np.float64).ravel()
    stats = _profile(_resampled(tasks, n_resamples, seed), t)
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(stats, [tail, 100.0 - tail], axis=0)
    return {
        "taus": t,
        "fraction": _profile([x[None, :] for x in tasks], t)[0],
        "ci_low": low,
        "ci_high": high,
    }


def plot_performance_profiles(
    profiles: Mapping[str, Mapping[str, np.ndarray]], path: str | Path, title: str = ""
) -> Path:
    """Draw the performance profiles of several algorithms (``{algorithm:``
    :func:`performance_profile` ``result}``) in one PNG at ``path``: the share of runs above
    each score, with its band.

    Args:
        profiles: Each algorithm's profile.
        path: PNG file to write (folders created, written atomically).
        title: Figure title.

    Returns:
        The path written.
    """
    return plot_profile_panels({title: profiles}, path)


def plot_profile_panels(
    panels: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]], path: str | Path
) -> Path:
    """Draw several sets of performance profiles side by side in one PNG at ``path``, one panel
    per ``{panel title: {algorithm:`` :func:`performance_profile` ``result}}`` entry, sharing
    the share axis (an algorithm keeps its colour across panels).

    Args:
        panels: Each panel's title and profiles (an empty title: none drawn).
        path: PNG file to write (folders created, written atomically).

    Returns:
        The path written.
    """
    from matplotlib.figure import Figure

    from powerzoo.benchmarks.plots import PNG_METADATA

    if not panels:
        raise ValueError("no panel to draw")
    fig = Figure(figsize=(6.4 * len(panels), 4.2))
    axes = np.atleast_1d(fig.subplots(1, len(panels), sharey=True))
    colours: dict[str, str] = {}
    for ax, (title, profiles) in zip(axes, panels.items(), strict=True):
        for name, profile in profiles.items():
            (line,) = ax.plot(
                profile["taus"], profile["fraction"], label=name, color=colours.get(name)
            )
            colours.setdefault(name, line.get_color())
            ax.fill_between(
                profile["taus"],
                profile["ci_low"],
                profile["ci_high"],
                color=colours[name],
                alpha=0.2,
            )
        ax.axvline(0.0, color="0.6", lw=0.8, ls=":")
        ax.axvline(1.0, color="0.6", lw=0.8, ls=":")
        ax.set_xlabel(r"score $\tau$ (0 = anchor, 1 = oracle)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        if title:
            ax.set_title(title)
    axes[0].set_ylabel(r"share of runs with score > $\tau$")
    fig.tight_layout()
    return atomic_save(
        path, lambda tmp: fig.savefig(tmp, format="png", dpi=110, metadata=PNG_METADATA)
    )
