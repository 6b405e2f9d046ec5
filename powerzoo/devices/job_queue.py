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

__all__ = ["serve_edf", "drop_due", "queue_outlook", "QueueOutlook", "carry_excess", "per_bucket"]

_ZERO = np.zeros(())  # 0-d: numpy converts a Python float operand on every call
_ZERO.setflags(write=False)


def serve_edf(cum: np.ndarray, capacity_gpuh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Serve ``capacity_gpuh`` [B, C] earliest-deadline-first; return (new cum, served [B, C])."""
    served = np.minimum(
        capacity_gpuh, cum.take(cum.shape[2] - 1, axis=2)
    )  # a contiguous copy of cum[:, :, -1]
    remaining = cum - capacity_gpuh[:, :, None]
    np.maximum(remaining, _ZERO, out=remaining)
    return remaining, served


def drop_due(cum: np.ndarray, t: np.ndarray, steps_per_bucket: int) -> np.ndarray:
    """Drop, in place, the work of the bucket that falls due at step ``t`` [B]; return it [B, C].

    Bucket ``k`` (``k < K - 1``) is due at step ``(k + 1) * steps_per_bucket``; the last bucket
    (work due after the episode) never falls due.
    """
    n_rows, n_classes, n_buckets = cum.shape
    k, phase = np.divmod(t, steps_per_bucket)
    k -= 1
    due_now = (phase == 0) & (k >= 0) & (k < n_buckets - 1)
    if not np.count_nonzero(due_now):  # most steps: no bucket falls due
        return np.zeros((n_rows, n_classes))
    # cum[b, :, k_b] for every row (k clipped into range where nothing is due), as one flat gather
    dropped = cum.take(
        _row_starts(n_rows, n_classes, n_buckets)
        + np.minimum(np.maximum(k, 0), n_buckets - 2)[:, None]
    )
    dropped *= due_now[:, None]
    cum -= dropped[:, :, None]
    np.maximum(cum, _ZERO, out=cum)  # buckets before k were empty: they stay at 0
    return dropped


def queue_outlook(
    cum: np.ndarray, inv_hours_left: np.ndarray, k_now: np.ndarray, carry_allowance: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Work due by the end of bucket ``k_now`` [B] and the required GPUs, each [B, C].

    ``inv_hours_left`` [B, K] (finite, > 0) is one over the time (h) until each bucket is due;
    for the last bucket that is the end of the episode, when only the work above
    ``carry_allowance`` [B, C] is due. Required GPUs is the least constant allocation that
    meets every deadline, ``max_k cum_k / hours_left_k``: serving at that rate
    earliest-deadline-first drops nothing (absent new arrivals). A task that asks every step
    builds a :class:`QueueOutlook` of its steps once instead.
    """
    return QueueOutlook(inv_hours_left, k_now, cum.shape[1])(
        cum, np.arange(cum.shape[0]), carry_allowance
    )


class QueueOutlook:
    """The queue's outlook at steps given as rows of fixed tables, built once: the one
    implementation behind :func:`queue_outlook`.

    ``inv_hours_left`` [T, K] (finite, > 0) and ``k_now`` [T] are tabulated by row (for example
    by step of the day); :meth:`__call__` takes ``rows`` [B] instead of the per-step arrays. On
    small batches numpy's cost is per call, and a call on a strided or broadcast operand costs
    about three times one on contiguous, equal-shape operands, so the tables are repeated per
    job class and the three buckets read per class (the current one, the last two) come out of
    the queue as contiguous [B, C] blocks of one ``take``. The required GPUs are the larger of
    the first K - 1 buckets' largest rate (the last bucket's rate is 0 in the table) and the
    last bucket's rate: with rates >= 0 that is the largest rate, and the largest element is
    found with ``argmax`` (one C loop) instead of a ``maximum.reduce``. The tables keep their
    dtype (float64 for a task; a float32 table and queue give float32 results).
    """

    def __init__(self, inv_hours_left: np.ndarray, k_now: np.ndarray, n_classes: int) -> None:
        inv = np.repeat(np.asarray(inv_hours_left)[:, None, :], n_classes, axis=1)  # [T, C, K]
        if not np.all(np.isfinite(inv) & (inv > 0.0)):
            raise ValueError(
                "inv_hours_left must be finite and positive: one over the hours (> 0) until each "
                "bucket is due"
            )
        n_buckets = inv.shape[2]
        self._inv_last = inv[:, :, -1].copy()  # [T, C]
        inv[:, :, -1] = 0.0
        self._inv_head = inv
        # bucket read per row and class: [current bucket, second to last, last] x [T, C]
        buckets = np.stack(
            [
                np.asarray(k_now),
                np.full(len(k_now), n_buckets - 2),
                np.full(len(k_now), n_buckets - 1),
            ]
        )
        self._buckets = np.repeat(buckets[:, :, None], n_classes, axis=2)  # [3, T, C]

    def __call__(
        self, cum: np.ndarray, rows: np.ndarray, carry_allowance: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(work due by the end of the current bucket, required GPUs) [B, C] of queue ``cum`` [B, C,
        K]
        (GPU-h, >= 0) at table rows ``rows`` [B]."""
        n_rows, n_classes, n_buckets = cum.shape
        due_soon, before_last, queued = cum.take(
            _row_starts_3(n_rows, n_classes, n_buckets) + self._buckets.take(rows, axis=1)
        )
        rate = cum * self._inv_head.take(rows, axis=0)
        last = queued - np.minimum(
            carry_allowance, queued - before_last
        )  # due by the end: above the allowance
        last_rate = last * self._inv_last.take(rows, axis=0)
        return due_soon, np.maximum(
            rate.take(_row_starts(n_rows, n_classes, n_buckets) + rate.argmax(axis=2)), last_rate
        )


@functools.lru_cache(maxsize=16)
def _row_starts(n_rows: int, n_classes: int, n_buckets: int) -> np.ndarray:
    """C-order flat index [B, C] of bucket 0 of each (row, class) of a [B, C, K] queue
    (read-only)."""
    starts = (np.arange(n_rows * n_classes) * n_buckets).reshape(n_rows, n_classes)
    starts.setflags(write=False)
    return starts


@functools.lru_cache(maxsize=16)
def _row_starts_3(n_rows: int, n_classes: int, n_buckets: int) -> np.ndarray:
    """:func:`_row_starts` repeated three times, [3, B, C] (read-only)."""
    starts = np.repeat(_row_starts(n_rows, n_classes, n_buckets)[None], 3, axis=0)
    starts.setflags(write=False)
    return starts


def carry_excess(cum: np.ndarray, carry_allowance: np.ndarray) -> np.ndarray:
    """Work [B, C] in the last bucket above what may be carried past the episode's end."""
    return np.maximum(cum[:, :, -1] - cum[:, :, -2] - carry_allowance, 0.0)


def per_bucket(cum: np.ndarray) -> np.ndarray:
    """Work per bucket [B, C, K] (not cumulative) from the cumulative queue."""
    return np.diff(cum, axis=2, prepend=0.0)
