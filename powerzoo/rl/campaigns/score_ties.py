"""Ties between runs on a campaign's benchmark v2 page: how many runs share one performance value,
and how many of them are the anchor's own policy rather than a tie the score made.

A residual learner whose validation selection kept its untrained policy acts as the rule; where
the rule is the task's anchor, that run's performance is 0 up to float noise. Such runs tie
because they are one policy, not because the score has a floor (as benchmark v1's did), so the
page counts them apart and gives the largest tie without them too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from powerzoo.benchmarks.resampling import SAME_RETURN
from powerzoo.benchmarks.score_v2 import RULE_POLICY
from powerzoo.rl.campaigns.page_text import unsigned_zero

__all__ = ["AT_ANCHOR", "TIE_TOLERANCE", "largest_tie", "ties_text"]

TIE_TOLERANCE = 1e-9
"""Two runs whose performances differ by at most this (score units) are tied."""
AT_ANCHOR = SAME_RETURN
"""A return within this share of the anchor's |mean return| (and 1e-8 $) is the anchor's own
return: float noise of the same actions (a residual that kept its untrained policy, the rule),
neither above nor below it."""


def largest_tie(values: Sequence[float], tolerance: float = TIE_TOLERANCE) -> tuple[int, float]:
    """``(runs, value)``: the most runs of ``values`` (performances, score units) at one value,
    within ``tolerance`` of the smallest of them, and that value; ``(0, nan)`` for no runs."""
    ordered = sorted(values)
    best, at, start = 0, float("nan"), 0
    for end, value in enumerate(ordered):
        while value - ordered[start] > tolerance:
            start += 1
        if end - start + 1 > best:
            best, at = end - start + 1, ordered[start]
    return best, at


def _is_anchor_policy(row: Mapping[str, Any], mean_return: float | None) -> bool:
    """Whether a run of ``row`` whose mean test return is ``mean_return`` is its anchor's own
    policy: a residual learner on a task whose anchor is the rule, at the rule's return (within
    :data:`AT_ANCHOR`)."""
    anchor = row.get("anchor_return")
    if row.get("family") != "residual" or row.get("anchor") != RULE_POLICY or anchor is None:
        return False
    return mean_return is not None and abs(mean_return - anchor) <= AT_ANCHOR * max(
        abs(anchor), 1.0
    )


def _value(performance: float) -> str:
    return unsigned_zero(f"{performance:.3f}")


def _share(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%"


def ties_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """The page's line on ties among the per-run performances of ``rows`` (results rows on the
    oracle scale, with ``run_performance``, ``run_mean_return``, ``family``, ``anchor`` and
    ``anchor_return``; ``learnable_headroom`` where some tasks have none, whose runs the headline
    leaves out: their largest tie is then given apart); empty without runs."""
    runs = [
        (x, row, _is_anchor_policy(row, r))
        for row in rows
        if row["scale"] == "oracle"
        for x, r in zip(row["run_performance"], row["run_mean_return"], strict=True)
        if x is not None
    ]
    if not runs:
        return ""
    tied, value = largest_tie([x for x, _, _ in runs])
    head = f"- Ties (performances within {TIE_TOLERANCE:g}): "
    if tied == 1:
        return head + f"no two of the {len(runs)} runs tie."
    text = (
        head + f"the most runs at one performance value are {tied} of {len(runs)} "
        f"({_share(tied, len(runs))}; every task's runs, those without learnable headroom "
        f"included), at {_value(value)}."
    )
    headline = [x for x, row, _ in runs if row.get("learnable_headroom", True)]
    if 1 < len(headline) < len(runs):
        most, most_value = largest_tie(headline)
        text += " On the tasks with learnable headroom (the headline's) " + (
            f"the most are {most} of {len(headline)} ({_share(most, len(headline))}), "
            f"at {_value(most_value)}."
            if most > 1
            else f"no two of the {len(headline)} runs tie."
        )
    own = [x for x, _, anchor_policy in runs if anchor_policy]
    if own:
        others = [x for x, _, anchor_policy in runs if not anchor_policy]
        rest, rest_value = largest_tie(others)
        at_value = sum(abs(x - value) <= TIE_TOLERANCE for x in own)
        noise = (
            f" ({at_value} of them in that tie, the others float noise away from it)"
            if 0 < at_value < len(own)
            else ""
        )
        text += (
            f" {len(own)} runs are residual learners that kept their untrained policy, the rule, "
            f"which is their task's anchor{noise}: one policy, not a floor of the score. "
            "Without them "
            + (
                f"the most runs at one value are {rest} of {len(others)} "
                f"({_share(rest, len(others))}), at {_value(rest_value)}."
                if rest > 1
                else f"no two of the {len(others)} runs tie."
            )
        )
    return text
