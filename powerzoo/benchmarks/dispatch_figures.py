"""The dispatch tasks' card figures (:data:`~powerzoo.benchmarks.card.FIGURES`).

* ``congestion_step_share``: the share of the oracle's steps with a branch at its rating (the
  step info ``congested``, 1.0 or 0.0, summed per episode in the row's ``episode_metrics``),
  over the table's episodes.
* ``naive_gap_pct`` (:data:`NETWORK_DISPATCH_TASKS`): how much more the network-blind naive
  dispatch costs than the oracle, in % of the oracle's cost,
  ``100 x (R_oracle - R_naive) / |R_oracle|`` (returns are minus the cost, overload priced in).
* ``week_vs_myopic_pct`` (``opf_118_7d``): the week's oracle's gain over the step-by-step myopic
  optimum, in % of the myopic cost, ``100 x (R_oracle - R_myopic) / |R_myopic|``.

Each is ``None`` (left off the card) where a row it needs is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["DISPATCH_FIGURES", "NETWORK_DISPATCH_TASKS"]

NETWORK_DISPATCH_TASKS = frozenset(
    {
        "marl_opf",
        "opf",
        "opf_118",
        "opf_118_7d",
        "acopf_118",
        "voltage_control_118",
        "marl_uc",
        "tso",
        "joint_trans_dist",
        "joint_trans_dist_7d",
        "joint_trans_dist_118",
    }
)
"""Tasks that dispatch units over a transmission network, whose naive baseline is the
network-blind equal-incremental-cost dispatch: ``naive_gap_pct`` is theirs (on the others the
naive policy is idle or a device rule, and the gap says nothing about the network)."""


def _mean(rows: Mapping[str, Any], policy: str) -> float | None:
    row = rows.get(policy)
    return None if row is None else float(row["mean"])


def congestion_step_share(rows: Mapping[str, Any]) -> float | None:
    """The oracle's share of steps with a branch at its rating (module docstring).

    Args:
        rows: The task's table rows ``{policy: row}``.

    Returns:
        The share in [0, 1], or ``None``.
    """
    oracle = rows.get("oracle") or {}
    sums = (oracle.get("episode_metrics") or {}).get("congested")
    length = oracle.get("mean_length")
    if not sums or not length:
        return None
    return float(np.sum(sums) / (len(sums) * float(length)))


def naive_gap_pct(rows: Mapping[str, Any]) -> float | None:
    """The naive dispatch's cost above the oracle's, % of the oracle's (module docstring).

    Args:
        rows: The task's table rows ``{policy: row}``.

    Returns:
        The gap in %, or ``None``.
    """
    if (rows.get("oracle") or {}).get("task") not in NETWORK_DISPATCH_TASKS:
        return None
    oracle, naive = _mean(rows, "oracle"), _mean(rows, "naive")
    if oracle is None or naive is None or oracle == 0.0:
        return None
    return 100.0 * (oracle - naive) / abs(oracle)


def week_vs_myopic_pct(rows: Mapping[str, Any]) -> float | None:
    """The week's oracle's gain over the myopic optimum, % of the myopic cost (module docstring).

    Args:
        rows: The task's table rows ``{policy: row}``.

    Returns:
        The gain in %, or ``None``.
    """
    oracle, myopic = _mean(rows, "oracle"), _mean(rows, "myopic")
    if oracle is None or myopic is None or myopic == 0.0:
        return None
    return 100.0 * (oracle - myopic) / abs(myopic)


DISPATCH_FIGURES: dict[str, Callable[[Mapping[str, Any]], float | None]] = {
    "congestion_step_share": congestion_step_share,
    "naive_gap_pct": naive_gap_pct,
    "week_vs_myopic_pct": week_vs_myopic_pct,
}
"""The dispatch tasks' figures by name (module docstring)."""
