"""Batched job queue of a data centre: work per job class, aggregated by deadline bucket.

State: ``cum[B, C, K]``, the GPU-hours of class ``c`` work due by the end of bucket ``k``
(cumulative over buckets, so non-decreasing in ``k``; ``cum[..., -1]`` is all queued work).
Bucket ``k`` is due at step ``due_step[k]`` of the episode (see :mod:`powerzoo.data.workload`).
Work is divisible (a job can use any number of GPUs), so the queue is a fluid model of the
jobs. It conserves work: ``arrived = served + queued + dropped`` (GPU-hours).

* Service is earliest-deadline-first within a class: the class's capacity (GPU-hours this
  step) drains bucket 0 first, then bucket 1, ... In cumulative form that is
  ``cum <- max(cum - capacity, 0)``.
* When the episode reaches a bucket's due step, the work still in it missed its deadline and is
  dropped (an SLA violation). Earlier buckets are empty by then, so that work is ``cum[k]``.
* The last bucket holds work due after the episode. At the episode's end, what it holds above a
  carry allowance (the work a uniform-progress schedule would still have left, see
  :mod:`powerzoo.data.workload`) is behind schedule: :func:`carry_excess` (an SLA violation,
  though the work stays queued).

The cumulative form makes every update a couple of element-wise operations over ``[B, C, K]``;
new work due by the end of bucket ``b`` adds ``gpuh * (k >= b)`` to ``cum`` (the workload
module prepares these increments, see ``Workload.arrival_cum_gpuh``).
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["serve_edf", "drop_due", "queue_outlook", "carry_excess", "per_bucket"]


def serve_edf(cum: np.ndarray, capacity_gpuh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Serve ``capacity_gpuh`` [B, C] earliest-deadline-first; return (new cum, served [B, C])."""
    served = np.minimum(capacity_gpuh, cum[:, :, -1])
    remaining = cum - capacity_gpuh[:, :, None]
    np.maximum(remaining, 0.0, out=remaining)
    return remaining, served


def drop_due(cum: np.ndarray, t: np.ndarray, steps_per_bucket: int) -> np.ndarray:
    """Drop, in place, the work of the bucket that falls due at step ``t`` [B]; return it [B, C].

    Bucket ``k`` (``k < K - 1``) is due at step ``(k + 1) * steps_per_bucket``; the last bucket
    (work due after the episode) never falls due.
    """
    n_rows, n_classes, n_buckets = cum.shape
    at_boundary = t % steps_per_bucket == 0
    if not at_boundary.any():  # most steps: no bucket boundary, nothing falls due
        return np.zeros((n_rows, n_classes))
    k = t // steps_per_bucket - 1
    due_now = at_boundary & (k >= 0) & (k < n_buckets - 1)
    if not due_now.any():
        return np.zeros((n_rows, n_classes))
    dropped = cum[np.arange(n_rows), :, np.clip(k, 0, n_buckets - 2)] * due_now[:, None]
    cum -= dropped[:, :, None]
    np.maximum(cum, 0.0, out=cum)  # buckets before k were empty: they stay at 0
    return dropped


def queue_outlook(
    cum: np.ndarray, inv_hours_left: np.ndarray, k_now: np.ndarray, carry_allowance: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Work due by the end of bucket ``k_now`` [B] and the required GPUs, each [B, C].

    ``inv_hours_left`` [B, K] is one over the time (h) until each bucket is due; for the last
    bucket that is the end of the episode, when only the work above ``carry_allowance`` [B, C]
    is due. Required GPUs is the least constant allocation that meets every deadline,
    ``max_k cum_k / hours_left_k``: serving at that rate earliest-deadline-first drops nothing
    (absent new arrivals).
    """
    due_soon = cum.take(_row_starts(*cum.shape) + k_now[:, None])
    rate = cum * inv_hours_left[:, None, :]
    last = cum[:, :, -1] - np.minimum(carry_allowance, cum[:, :, -1] - cum[:, :, -2])
    rate[:, :, -1] = last * inv_hours_left[:, -1:]
    return due_soon, np.maximum.reduce(rate, axis=2)  # rate.max(axis=2) without its Python wrapper


@functools.lru_cache(maxsize=16)
def _row_starts(n_rows: int, n_classes: int, n_buckets: int) -> np.ndarray:
    """C-order flat index [B, C] of bucket 0 of each (row, class) of a [B, C, K] queue (read-only)."""
    starts = (np.arange(n_rows * n_classes) * n_buckets).reshape(n_rows, n_classes)
    starts.setflags(write=False)
    return starts


def carry_excess(cum: np.ndarray, carry_allowance: np.ndarray) -> np.ndarray:
    """Work [B, C] in the last bucket above what may be carried past the episode's end."""
    return np.maximum(cum[:, :, -1] - cum[:, :, -2] - carry_allowance, 0.0)


def per_bucket(cum: np.ndarray) -> np.ndarray:
    """Work per bucket [B, C, K] (not cumulative) from the cumulative queue."""
    return np.diff(cum, axis=2, prepend=0.0)
