"""A task card (:mod:`powerzoo.benchmarks.card`) as text: the terminal's (``powerzoo card
TASK``) and the "Task card" section of the task's documentation page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from powerzoo.benchmarks.card import check_card, episode_days, task_card
from powerzoo.benchmarks.card_figures import FIGURE_LABELS
from powerzoo.benchmarks.storage import TRADING_DAY_CYCLE_SHARE

__all__ = ["render_card", "card_markdown"]


def _money(value: float | None) -> str:
    return "not measured" if value is None else f"{value:,.2f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100.0 * value:.1f} %"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+,.1f} %"


def _policy_rows(card: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    naive_kind = (card.get("naive") or {}).get("kind")
    for name, p in card["policies"].items():
        label = f"naive ({naive_kind})" if name == "naive" and naive_kind else name
        rows.append([label, _money(p["mean_return"]), _share(p["over_budget_share"])])
    return rows


def _detail_lines(card: Mapping[str, Any]) -> list[str]:
    """The card's lines below the policy table, plain sentences (shared by text and Markdown)."""
    lines = []
    if card.get("naive"):
        lines.append(f"naive policy: {card['naive']['doc']}.")
    h = card["headroom"]
    lines.append(
        "oracle headroom, 100 x (oracle - X) / |X|: "
        f"over idle {_pct(h['over_idle_pct'])}, over naive {_pct(h['over_naive_pct'])}, "
        f"over rule {_pct(h['over_rule_pct'])}."
    )
    b = card.get("benchmark")
    if b is not None and (b["headroom"] is None or b["headroom"] <= 0):
        lines.append(
            f"benchmark v2 scale: no oracle above the anchor ({b['anchor']}): runs are read on "
            "their gain over it."
        )
    elif b is not None:
        anchor = b["anchor"] + ("" if b["anchor_within_budget"] else ", over budget: none keeps it")
        pct = (
            ""
            if b["headroom_pct"] is None
            else f", {b['headroom_pct']:.1f} % of the oracle's |mean return|"
        )
        verdict = (
            "learnable headroom"
            if b["learnable"]
            else f"under {b['min_headroom_pct']:g} %: no learnable headroom, out of the headline"
        )
        lines.append(
            f"benchmark v2 scale: the oracle is {b['headroom']:+,.2f} above the anchor "
            f"({anchor}){pct}: {verdict}."
        )
    s = card.get("storage")
    if s is not None:
        energy = "" if s["energy_mwh"] is None else f", {s['energy_mwh']:,.4g} MWh"
        kw_year = (
            f"{s['kw_year']:,.2f} $/kW-year"
            if s["kw_year"] is not None
            else ("not measured" if s["reference"] == "idle" else "n/a (no idle policy)")
        )
        trading = (
            "not measured"
            if s["trading_day_share"] is None
            else f"{_share(s['trading_day_share'])} of the days (throughput above "
            f"{s['trading_threshold_mwh']:,.4g} MWh, "
            f"{100 * TRADING_DAY_CYCLE_SHARE:g} % of a full cycle)"
        )
        leaves = "n/a" if s["rule_leaves_share"] is None else _share(s["rule_leaves_share"])
        lines.append(
            f"storage: {s['power_kw']:,.0f} kW{energy}; oracle gain over {s['reference']}: "
            f"{kw_year}; oracle trading days: {trading}; the rule leaves {leaves} of the gain."
        )
    p = card.get("prices")
    if p is not None:
        lines.append(
            f"prices ({card['split']} split, hourly): TB4 mean {p['tb4_mean']:,.1f} $/MWh, "
            f"median {p['tb4_median']:,.1f} $/MWh; negative hours "
            f"{_share(p['negative_hour_share'])}; hours above 1,000 $/MWh "
            f"{p['hours_above_1000_per_year']:,.1f} a year."
        )
    targets = card.get("targets") or {}
    low, high = targets.get("figure_min") or {}, targets.get("figure_max") or {}
    for name, value in card.get("figures", {}).items():
        bound = (
            f" (target >= {low[name]:g})"
            if name in low
            else f" (target <= {high[name]:g})"
            if name in high
            else ""
        )
        label = FIGURE_LABELS.get(name, name)
        lines.append(f"{label} ({name}): {value:.4g}{bound}")
    return lines


def render_card(card: Mapping[str, Any], unmet: list[str] | None = None) -> str:
    """The card as plain text for a terminal (``powerzoo card TASK``).

    Args:
        card: A card (:func:`task_card`).
        unmet: Its unmet targets (default: :func:`check_card`).

    Returns:
        The text.
    """
    unmet = check_card(card) if unmet is None else unmet
    head = (
        f"{card['task']}: task card ({card['split']} split, {card['episodes']} episodes; "
        f"returns in {card['return_unit']})"
    )
    table = [["policy", "mean return", "over budget"], *_policy_rows(card)]
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    lines = [head]
    for r in table:
        lines.append(f"  {r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}")
    lines += _detail_lines(card)
    lines += card.get("notes", [])
    if unmet:
        lines.append(f"unmet targets ({len(unmet)}):")
        lines += [f"  - {u}" for u in unmet]
    else:
        lines.append("every target met")
    return "\n".join(lines)


def _episode_word(task: str) -> str:
    """What the task's episodes are, for "... over budget": days, or weeks on week-long tasks."""
    from powerzoo.tasks import task_spec

    return {1.0: "days", 7.0: "weeks"}.get(episode_days(task_spec(task)), "episodes")


def card_markdown(task: str, split: str = "test") -> list[Any]:
    """The blocks of a task page's "Task card" section: paragraphs (str) and one
    ``(header, rows)`` table, from the packaged table (:func:`task_card`).

    Args:
        task: A registered task name.
        split: The split of the table's rows.

    Returns:
        The section's blocks.
    """
    card = task_card(task, split)
    unmet = check_card(card)
    blocks: list[Any] = [
        f"Measured on the `{split}` split ({card['episodes']} episodes of the packaged baselines "
        f"table; returns in {card['return_unit']}). `powerzoo card {task}` prints it, "
        f"`--json` as JSON; the formulas are in [Concepts](../concepts.md#task-cards).",
        (["policy", "mean return", f"{_episode_word(task)} over budget"], _policy_rows(card)),
        "\n".join(f"- {line}" for line in [*_detail_lines(card), *card.get("notes", [])]),
    ]
    if unmet:
        blocks.append(
            "Unmet targets (`powerzoo card --check`):\n"
            + "\n".join(f"- {u.removeprefix(f'{task}: ')}" for u in unmet)
        )
    else:
        blocks.append("Every target of the card is met.")
    return blocks
