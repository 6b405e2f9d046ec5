"""Statistics of a benchmark campaign: episode seeds, bootstrap intervals, pooled summaries, scores.

The protocol behind these numbers is described in :mod:`powerzoo.benchmarks.campaign`. In short:
episode ``i`` of campaign seed ``s`` resets the env with :func:`episode_seed` ``(s, i)``; every
statistic of one task x policy pools all its episodes, and its 95 % interval is a percentile
bootstrap over ``BOOTSTRAP_RESAMPLES`` resamples of those episodes drawn by
``numpy.random.default_rng(BOOTSTRAP_SEED)``, the same resamples for every statistic of the row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import (
    baseline_rows,
    evaluation_protocol,
    reference_policy,
    score_or_none,
)
from powerzoo.benchmarks.cmdp_score import budget_clipped_gains, cmdp_score_of_gains
from powerzoo.benchmarks.evaluation import budget_flags, interquartile_mean

__all__ = [
    "bootstrap_ci",
    "percentile_interval",
    "summarize_campaign_episodes",
    "episode_seed",
    "score_or_none",
    "score_columns",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "CONFIDENCE",
    "EPISODE_SEED_STRIDE",
]

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
EPISODE_SEED_STRIDE = (
    1_000_000  # more than any split has days: the seeds' env streams never overlap
)


def episode_seed(seed: int, episode: int) -> int:
    """``env.reset`` seed of episode ``episode`` of campaign seed ``seed`` (seed 0:
    ``episode``, the table's)."""
    return int(seed) * EPISODE_SEED_STRIDE + int(episode)


def _resample_indices(n: int, n_resamples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))


def _iqm_rows(samples: np.ndarray) -> np.ndarray:
    """IQM of each row of ``samples`` [B, n] (same cut as :func:`interquartile_mean`)."""
    x = np.sort(samples, axis=1)
    cut = x.shape[1] // 4
    return x[:, cut : x.shape[1] - cut].mean(axis=1)


_STATISTICS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mean": lambda s: s.mean(axis=1),
    "iqm": _iqm_rows,
}


def percentile_interval(stats: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of bootstrap
    ``stats`` (a statistic over resamples, in its own unit): the percentile interval."""
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(stats, [tail, 100.0 - tail])
    return float(low), float(high)


_interval = percentile_interval


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    statistic: str = "mean",
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of ``statistic`` (``"mean"`` or ``"iqm"``) of
    ``values``.

    ``n_resamples`` resamples of ``values`` with replacement, drawn by
    ``np.random.default_rng(seed)``; returns the ``(1 - confidence) / 2`` and
    ``(1 + confidence) / 2`` quantiles of the statistic over them. Same inputs, same interval.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    if statistic not in _STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; valid: {', '.join(_STATISTICS)}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    samples = x[_resample_indices(x.size, n_resamples, seed)]
    return _interval(_STATISTICS[statistic](samples), confidence)


def summarize_campaign_episodes(
    records: Sequence[dict[str, Any]],
    cost_names: Sequence[str],
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
    spec: Any = None,
) -> dict[str, Any]:
    """Pooled statistics of episode rows (``episodes.csv`` rows: ``return``, ``length``,
    ``cost_<name>``).

    Returns the statistic columns of ``results.csv`` (:mod:`powerzoo.benchmarks.campaign`), the
    normalised score aside: returns in $ per episode, costs per episode in physical units;
    ``violation_rate`` and ``over_budget_rate`` as
    :func:`~powerzoo.benchmarks.evaluation.budget_flags` counts them against the task's ``spec``
    (without one: every cost counts, no budget is known).
    """
    if not records:
        raise ValueError("no episodes to summarise")
    returns = np.asarray([r["return"] for r in records], dtype=np.float64)
    costs = np.asarray(
        [[r[f"cost_{name}"] for name in cost_names] for r in records], dtype=np.float64
    )
    costs = costs.reshape(len(records), len(cost_names))
    total = costs.sum(axis=1)
    idx = _resample_indices(
        returns.size, n_resamples, seed
    )  # one set of resamples for every statistic

    def ci(values: np.ndarray, statistic: str = "mean") -> tuple[float, float]:
        return _interval(_STATISTICS[statistic](values[idx]), confidence)

    out: dict[str, Any] = {"episodes": int(returns.size), "mean_return": float(returns.mean())}
    out["mean_return_ci_low"], out["mean_return_ci_high"] = ci(returns)
    out["iqm_return"] = interquartile_mean(returns)
    out["iqm_return_ci_low"], out["iqm_return_ci_high"] = ci(returns, "iqm")
    out["std_return"] = float(returns.std())
    out["total_cost_mean"] = float(total.mean())
    out["total_cost_ci_low"], out["total_cost_ci_high"] = ci(total)
    flags = budget_flags(costs, cost_names, spec)
    out["violation_rate"] = flags["violation_rate"]
    out["over_budget_rate"] = flags["over_budget_rate"]
    out["mean_length"] = float(np.mean([r["length"] for r in records]))
    for j, name in enumerate(cost_names):
        out[f"cost_{name}_mean"] = float(costs[:, j].mean())
        out[f"cost_{name}_ci_low"], out[f"cost_{name}_ci_high"] = ci(costs[:, j])
    return out


def score_columns(
    task: str, split: str, days: Sequence[int], row: dict[str, Any]
) -> dict[str, float | None]:
    """Normalised score of ``row``'s mean return and its interval; ``None`` off the table's
    protocol.

    The score is only comparable when ``days`` are the days the baselines table was computed on
    (:func:`~powerzoo.benchmarks.baselines.evaluation_protocol`).
    """
    blank: dict[str, float | None] = {
        "normalized_score": None,
        "normalized_score_ci_low": None,
        "normalized_score_ci_high": None,
    }
    try:
        if list(evaluation_protocol(task, split)["day_ids"]) != list(days):
            return blank
    except (ValueError, KeyError, FileNotFoundError):
        return blank
    score = score_or_none(task, row["mean_return"], split)
    low = score_or_none(task, row["mean_return_ci_low"], split)
    high = score_or_none(task, row["mean_return_ci_high"], split)
    if score is None or low is None or high is None:
        return blank
    return {
        "normalized_score": score,
        "normalized_score_ci_low": min(low, high),
        "normalized_score_ci_high": max(low, high),
    }


def cmdp_score_columns(
    task: str,
    split: str,
    days: Sequence[int],
    records: Sequence[dict[str, Any]],
    cost_names: Sequence[str],
    spec: Any,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, float | None]:
    """Budget-aware score (:mod:`powerzoo.benchmarks.cmdp_score`) of episode rows and its
    bootstrap interval; ``None`` off the table's protocol or without budget flags in the table.

    Each episode (any seed) is compared with the table's random return on its own ``day_id``;
    an episode over the task's budgets keeps at most a loss; the reference is the table's
    oracle (or best baseline) with the same clipping.
    """
    blank: dict[str, float | None] = {
        "cmdp_score": None,
        "cmdp_score_ci_low": None,
        "cmdp_score_ci_high": None,
    }
    try:
        protocol = [int(d) for d in evaluation_protocol(task, split)["day_ids"]]
        if protocol != [int(d) for d in days] or spec is None:
            return blank
        rows = baseline_rows(task, split)
        random_returns = np.asarray(rows["random"]["returns"], dtype=np.float64)
        reference = rows[reference_policy(rows)]
        if reference.get("over_budget") is None:
            return blank
    except (ValueError, KeyError, FileNotFoundError):
        return blank
    position = {d: i for i, d in enumerate(protocol)}
    base = random_returns[[position[int(r["day_id"])] for r in records]]
    returns = np.asarray([r["return"] for r in records], dtype=np.float64)
    costs = np.asarray(
        [[r[f"cost_{name}"] for name in cost_names] for r in records], dtype=np.float64
    ).reshape(len(records), len(cost_names))
    over = budget_flags(costs, cost_names, spec)["over_budget"]
    gains = budget_clipped_gains(returns, base, over)
    ref_gains = budget_clipped_gains(reference["returns"], random_returns, reference["over_budget"])
    try:
        score = cmdp_score_of_gains(gains, ref_gains)
    except ValueError:
        return blank
    low, high = bootstrap_ci(gains, n_resamples=n_resamples, confidence=confidence, seed=seed)
    ref = float(np.mean(ref_gains))
    return {"cmdp_score": score, "cmdp_score_ci_low": low / ref, "cmdp_score_ci_high": high / ref}
