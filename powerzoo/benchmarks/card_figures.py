"""The task card's own figures: what each task's table rows show about its decision, and the
bounds a task's card must meet on them.

A **figure** is a function of a task's baseline rows on one split, ``{policy: row}``
(:mod:`powerzoo.benchmarks.baselines`), giving a number or ``None`` (not measured: a row it needs
is missing, or the task is not one the figure is about). :data:`FIGURES` names them all; the card
(:func:`powerzoo.benchmarks.card.task_card`) keeps those that are not ``None``. The dispatch
tasks' figures are in :mod:`powerzoo.benchmarks.dispatch_figures`.

:data:`FIGURE_MIN` and :data:`FIGURE_MAX` are the bounds per task: ``{task: {figure: bound}}``;
:func:`powerzoo.benchmarks.card.check_card` reports a figure outside its bound, or not measured,
as an unmet target.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from powerzoo.benchmarks.dispatch_figures import DISPATCH_FIGURES

__all__ = [
    "FIGURES",
    "FIGURE_LABELS",
    "FIGURE_MAX",
    "FIGURE_MIN",
    "N1_RESERVE_TASKS",
    "headroom_pct",
]


def headroom_pct(oracle: float | None, other: float | None) -> float | None:
    """The oracle's gain over another policy in % of that policy's return's magnitude:
    ``100 x (oracle - other) / |other|``; ``None`` where either is ``None`` or ``other`` is 0.

    Args:
        oracle: The oracle's mean return ($ per episode).
        other: The compared policy's mean return ($ per episode).

    Returns:
        The headroom in %, or ``None``.
    """
    if oracle is None or other is None or abs(other) < 1e-12:
        return None
    return 100.0 * (float(oracle) - float(other)) / abs(float(other))


N1_RESERVE_TASKS = frozenset({"tso"})
"""Tasks whose ``reserve_shortfall`` cost holds the N-1 row (every online unit's output covered
by the other online units' spinning reserve, :mod:`powerzoo.tasks.unit_commitment`); ``marl_uc``
carries 10 % of its load alone, no N-1 row."""


def _oracle_n1_shortfall_steps(rows: Mapping[str, Mapping[str, Any]]) -> float | None:
    """Steps of the oracle's table episodes short of reserve (``reserve_shortfall`` above
    :data:`~powerzoo.benchmarks.evaluation.COST_TOLERANCE` in a step), summed over the
    episodes; ``None`` off :data:`N1_RESERVE_TASKS` or where the row has no step counts."""
    oracle = rows.get("oracle")
    if oracle is None or oracle.get("task") not in N1_RESERVE_TASKS:
        return None
    steps = (oracle.get("episode_cost_steps") or {}).get("reserve_shortfall")
    return None if steps is None else float(sum(steps))


def _rule_reactive_excess_mvarh(rows: Mapping[str, Mapping[str, Any]]) -> float | None:
    """The rule's reactive output beyond the units' limits [Mvarh], its episode sums (row field
    ``episode_metrics``, step info ``reactive_excess_mvarh`` of the AC tasks) averaged over the
    table's episodes; ``None`` where the rule's row has none."""
    sums = ((rows.get("rule_based") or {}).get("episode_metrics") or {}).get(
        "reactive_excess_mvarh"
    )
    return float(np.mean(sums)) if sums else None


def _oracle_gain_over(policy: str) -> Callable[[Mapping[str, Any]], float | None]:
    """The figure ``100 x (R_oracle - R_policy) / |R_policy|`` (:func:`headroom_pct`) of a
    task's rows; ``None`` where either row is missing."""

    def figure(rows: Mapping[str, Any]) -> float | None:
        oracle, other = rows.get("oracle"), rows.get(policy)
        if oracle is None or other is None:
            return None
        return headroom_pct(float(oracle["mean"]), float(other["mean"]))

    return figure


FIGURES: dict[str, Callable[[Mapping[str, Any]], float | None]] = {
    "idle_over_budget_share": lambda rows: (
        float(rows["idle"]["over_budget_rate"])
        if "idle" in rows and rows["idle"].get("over_budget_rate") is not None
        else None
    ),
    "oracle_n1_shortfall_steps": _oracle_n1_shortfall_steps,
    "rule_reactive_excess_mvarh": _rule_reactive_excess_mvarh,
    "joint_gain_pct": _oracle_gain_over("separate"),
    "distribution_effect_pct": _oracle_gain_over("flex_idle"),
    **DISPATCH_FIGURES,  # congestion_step_share, naive_gap_pct, week_vs_myopic_pct
}
"""The task's own figures of a card: name -> function of the task's table rows ``{policy: row}``
giving the value (``None``: not measured, left out). ``idle_over_budget_share``: the share of
episodes the idle policy is over budget. ``oracle_n1_shortfall_steps`` (``tso``,
:data:`N1_RESERVE_TASKS`): the oracle's steps short of spinning reserve by the N-1 row over the
table's episodes (row field ``episode_cost_steps``; 0 expected). ``rule_reactive_excess_mvarh``
(the AC tasks): the rule's reactive output beyond the units' limits per episode [Mvarh]
(0 expected). ``joint_gain_pct`` (the joint transmission-distribution tasks): the joint
oracle's gain over the separately optimised plans (row ``separate``: transmission first at the
expected boundary injections, then the feeders at the resulting LMPs), in % of the latter's
system cost; ``distribution_effect_pct``: the oracle's gain over the transmission optimum with
the distribution's flexibility idle (row ``flex_idle``), in %: how much the distribution
agents' decisions move the system cost."""


FIGURE_LABELS: dict[str, str] = {
    "idle_over_budget_share": "share of test episodes over a budget without control",
    "oracle_n1_shortfall_steps": "oracle steps short of the N-1 reserve",
    "rule_reactive_excess_mvarh": "rule's reactive output beyond the units' limits, Mvarh",
    "joint_gain_pct": "joint oracle's gain over separate plans, %",
    "distribution_effect_pct": "oracle's gain over idle distribution flexibility, %",
    "congestion_step_share": "share of the oracle's steps with a branch at its rating",
    "naive_gap_pct": "extra cost of the network-blind dispatch over the oracle, %",
    "week_vs_myopic_pct": "week oracle's gain over the step-by-step optimum, %",
}
"""What each of :data:`FIGURES` measures, in words, for the card's text (its name follows)."""


FEEDER_TASKS = (
    "dso",
    "marl_der_arbitrage",
    "marl_ders_benchmark",
    "marl_ev_v2g",
    "lv_unbalance",
    "volt_var_123",
)
"""The feeder tasks whose problem must bind with the operator's voltage devices in place."""

FIGURE_MIN: dict[str, dict[str, float]] = {
    # the problem binds without control: idle breaks a budget on >= 30 % of the episodes
    **{task: {"idle_over_budget_share": 0.30} for task in FEEDER_TASKS},
    # the network matters: congestion binds often and the network-blind dispatch costs >= 2 % more
    "opf_118": {"congestion_step_share": 0.30, "naive_gap_pct": 2.0},
    # the week is one problem: planning it whole beats step-by-step optima by >= 1 %
    "opf_118_7d": {"week_vs_myopic_pct": 1.0},
    # transmission and distribution are one problem: the joint optimum beats separate plans by
    # >= 1 % and the distribution agents move the system cost by >= 1 %
    **{
        task: {"joint_gain_pct": 1.0, "distribution_effect_pct": 1.0}
        for task in ("joint_trans_dist", "joint_trans_dist_7d", "joint_trans_dist_118")
    },
}
"""Lower bounds of figures, per task (module docstring)."""

FIGURE_MAX: dict[str, dict[str, float]] = {
    # the rule keeps the units inside their reactive limits (to the costs' tolerance, Mvarh)
    "acopf_118": {"rule_reactive_excess_mvarh": 1e-3},
    "voltage_control_118": {"rule_reactive_excess_mvarh": 1e-3},
    # the oracle is never short of spinning reserve by the N-1 row
    "tso": {"oracle_n1_shortfall_steps": 0.0},
}
"""Upper bounds of figures, per task (module docstring)."""
