"""Task cards: the numbers that show a task is a decision problem, from stored measurements.

A task's **card** (:func:`task_card`, ``powerzoo card TASK``) is read from the baselines table
(:mod:`powerzoo.benchmarks.baselines`) on one split (default ``test``); nothing is simulated, so
it prints at once. ``powerzoo card TASK --recompute`` (:func:`recompute_card`) measures the
task's rows again and writes them back first.

What the card shows
-------------------
* ``policies``: ``idle`` (where the task has an idle action), ``naive`` (the task's naive
  baseline, :data:`~powerzoo.benchmarks.naive.NAIVE_BASELINES`: idle on storage tasks, the
  network-blind equal-incremental-cost dispatch on dispatch tasks, no control on feeder tasks,
  the closest otherwise, named in ``naive``), ``rule_based`` and ``oracle``, each with its mean
  return over the split's table episodes ($ per episode, the system return of multi-agent tasks)
  and ``over_budget_share``, the share of episodes in which some selected cost is over its
  per-episode budget. A policy the task has but the table lacks is ``null`` and named in
  ``notes`` ("not measured: run powerzoo card TASK --recompute").
* ``headroom``: the oracle's gain over each of idle, naive and rule, in % of the compared
  return's magnitude: ``over_X_pct = 100 x (R_oracle - R_X) / |R_X|`` (``null`` where either
  return is missing or ``R_X`` is 0, e.g. a battery at rest earns exactly 0 $).
* ``benchmark`` (the packaged table only): the scale benchmark v2 scores the task on
  (:mod:`powerzoo.benchmarks.score_v2`): its ``anchor`` (the best non-learning baseline that
  keeps the budgets), ``headroom = R_oracle - R_anchor`` and ``headroom_pct`` (in % of the
  oracle's |mean return|), and ``learnable`` (``headroom_pct`` at least ``min_headroom_pct``;
  a task without it is left out of the benchmark's headline).
* ``storage`` (tasks with storage, :mod:`powerzoo.benchmarks.storage`):
  ``kw_year = (R_oracle - R_ref) / episode_days x 365 / (1000 x storage_power_mw)``, the
  oracle's gain per day over the storage-idle reference (``idle``; on a task without an idle
  action its ``naive`` policy, which holds the storage at 0 MW, so that gain also holds the
  oracle's other decisions: an upper bound of the storage's value) in $ per kW of storage power
  rating per year; ``trading_day_share``, the share of the split's days (every day of every
  episode) on which the oracle's storage throughput exceeds
  :data:`~powerzoo.benchmarks.storage.TRADING_DAY_CYCLE_SHARE` (5 %) of one full cycle
  (``2 x`` the energy capacity); ``rule_leaves_share = (R_oracle - R_rule) / (R_oracle -
  R_ref)``, the share of the oracle's gain the rule leaves on the table.
* ``prices`` (tasks that trade at the market price, :data:`MARKET_PRICE_TASKS`): statistics of
  the split's hourly prices (:func:`powerzoo.data.markets.price_statistics`): ``tb4_mean`` and
  ``tb4_median`` (per day: the mean of the 4 dearest hours less the mean of the 4 cheapest,
  $/MWh), ``negative_hour_share`` and ``hours_above_1000_per_year`` (hours above 1,000 $/MWh,
  scaled to 365 days).
* ``figures``: the task's own figures (:data:`FIGURES`).
* ``targets``: the task's targets (:data:`CARD_TARGETS`, with the bounds on its figures of
  :mod:`powerzoo.benchmarks.card_figures`), which :func:`check_card` checks.

:mod:`powerzoo.benchmarks.card_text` writes a card as text and as its task page's section.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.card_figures import (
    FIGURE_MAX,
    FIGURE_MIN,
    FIGURES,
    N1_RESERVE_TASKS,
    headroom_pct,
)
from powerzoo.benchmarks.naive import naive_baseline, table_baselines
from powerzoo.benchmarks.storage import has_storage, storage_power_mw, trading_day_threshold_mwh

__all__ = [
    "CARD_POLICIES",
    "CardTargets",
    "STORAGE_TARGETS",
    "CARD_TARGETS",
    "MARKET_PRICE_TASKS",
    "FIGURES",
    "N1_RESERVE_TASKS",
    "card_targets",
    "episode_days",
    "task_card",
    "check_card",
    "recompute_card",
    "headroom_pct",
]

CARD_POLICIES = ("idle", "naive", "rule_based", "oracle")
"""The policies a card shows, in its order (each where the task has it)."""


@dataclasses.dataclass(frozen=True)
class CardTargets:
    """What a task's card must show (:func:`check_card`); ``None`` switches a target off.

    Attributes:
        ordered: ``R_oracle >= R_rule >= R_naive`` and ``R_rule >= R_idle`` (mean returns, each
            pair where the task has both policies and the lower one keeps the budgets, over on at
            most :data:`WITHIN_BUDGET_SHARE` of the episodes).
        oracle_within_budget: the oracle is over budget on no episode.
        kw_year_min: ``storage.kw_year`` at least this ($/kW-year).
        trading_day_share_min: ``storage.trading_day_share`` at least this.
        rule_leaves_share_min: ``storage.rule_leaves_share`` at least this: the rule leaves that
            share of the oracle's gain over idle.
        figure_min: ``{figure: bound}``: each of the card's ``figures`` at least its bound
            (:data:`~powerzoo.benchmarks.card_figures.FIGURE_MIN` of the task).
        figure_max: ``{figure: bound}``: each at most its bound
            (:data:`~powerzoo.benchmarks.card_figures.FIGURE_MAX`).
    """

    ordered: bool = True
    oracle_within_budget: bool = True
    kw_year_min: float | None = None
    trading_day_share_min: float | None = None
    rule_leaves_share_min: float | None = None
    figure_min: Mapping[str, float] = dataclasses.field(default_factory=dict)
    figure_max: Mapping[str, float] = dataclasses.field(default_factory=dict)


STORAGE_TARGETS = CardTargets(
    kw_year_min=30.0, trading_day_share_min=0.5, rule_leaves_share_min=0.2
)
"""Targets of a task whose decision is a store of energy: its oracle earns at least 30 $ per kW
of storage power a year over idle, trades on at least half the days, and the rule leaves at
least 20 % of that gain."""

CARD_TARGETS: dict[str, CardTargets] = {
    # storage is the decision: the storage targets too
    "battery_arbitrage": STORAGE_TARGETS,
    "marl_der_arbitrage": STORAGE_TARGETS,
    "marl_ders_benchmark": STORAGE_TARGETS,
    "marl_ev_v2g": STORAGE_TARGETS,
    # storage beside other decisions (its value is not separable from the dispatch's): the card
    # shows the storage figures, the targets are those of every task
    "joint_trans_dist": CardTargets(),
    "joint_trans_dist_7d": CardTargets(),
    "joint_trans_dist_118": CardTargets(),
    "dc_microgrid": CardTargets(),
    "dc_microgrid_safe": CardTargets(),
    # every other task: the oracle tops the rule, the rule the naive policy (and idle), and the
    # oracle keeps the budgets; gencos_bidding (a game) has no oracle, so it checks rule >= naive
    "dso": CardTargets(),
    "dc_scheduling": CardTargets(),
    "gencos_bidding": CardTargets(),
    "marl_opf": CardTargets(),
    "opf": CardTargets(),
    "opf_118": CardTargets(),
    "opf_118_7d": CardTargets(),
    "acopf_118": CardTargets(),
    "voltage_control_118": CardTargets(),
    "marl_uc": CardTargets(),
    "tso": CardTargets(),
    "lv_unbalance": CardTargets(),
    "volt_var_123": CardTargets(),
}
"""Each built-in task's card targets (a task of your own gets ``CardTargets()``)."""

MARKET_PRICE_TASKS = frozenset(
    {
        "battery_arbitrage",
        "dc_microgrid",
        "dc_microgrid_safe",
        "dc_scheduling",
        "dso",
        "marl_der_arbitrage",
        "marl_ders_benchmark",
        "marl_ev_v2g",
    }
)
"""Tasks that see the market price of the data layer (``price_per_mwh`` of
:mod:`powerzoo.data.profiles`); the others price energy from their own units' costs (dispatch,
the joint tasks' merit-order boundary price, voltage control's system lambda) or see no price."""

_NOT_MEASURED = "not measured: run powerzoo card {task} --recompute"
WITHIN_BUDGET_SHARE = 0.05
"""A baseline keeps the budgets when it is over one on at most this share of the episodes (one
in twenty, the results page's rule); the card orders returns only against such baselines: a
policy that breaks a budget has bought its return with the constraint, so it is no bar."""


def _within_budget(policy: Mapping[str, Any]) -> bool:
    share = policy.get("over_budget_share")
    return share is None or share <= WITHIN_BUDGET_SHARE


_RETURN_TOL = 1e-9  # relative: two returns of a card compare equal within this


def card_targets(task: str) -> CardTargets:
    """The card targets of ``task`` (:data:`CARD_TARGETS`; ``CardTargets()`` for another task).

    Args:
        task: A task name.

    Returns:
        Its targets.
    """
    return dataclasses.replace(
        CARD_TARGETS.get(task, CardTargets()),
        figure_min=dict(FIGURE_MIN.get(task, {})),
        figure_max=dict(FIGURE_MAX.get(task, {})),
    )


def episode_days(spec: Any) -> float:
    """Calendar days one episode of the task ``spec`` spans."""
    return spec.horizon * spec.step_minutes / (24 * 60)


@functools.lru_cache(maxsize=16)
def _price_statistics(split: str) -> dict[str, float]:
    """Statistics of the hourly market prices of ``split``'s days (module docstring)."""
    from powerzoo.data import calendar
    from powerzoo.data.markets import price_statistics
    from powerzoo.data.profiles import get_profiles

    scenario = calendar.scenario_of_split(split)
    try:
        days = calendar.split_day_indices(split)
    except ValueError:  # a task's own stress split, run on the test days
        days = calendar.split_day_indices("test")
    hourly = get_profiles(scenario, 60).series["price_per_mwh"][: calendar.N_DAYS * 24]
    stats = price_statistics(np.asarray(hourly).reshape(calendar.N_DAYS, 24), days)
    keys = ("tb4_mean", "tb4_median", "negative_hour_share", "hours_above_1000_per_year")
    return {k: float(stats[k]) for k in keys}


def _table_rows(task: str, split: str, table: str | Path | None) -> dict[str, dict[str, Any]]:
    from powerzoo.benchmarks.baselines import load_baselines

    try:
        rows = load_baselines(table)["results"]
    except FileNotFoundError:
        return {}
    return {r["policy"]: r for r in rows if r["task"] == task and r["split"] == split}


def _storage_block(
    task: str, spec: Any, rows: Mapping[str, Mapping[str, Any]], notes: list[str]
) -> dict[str, Any]:
    """The card's ``storage`` block (module docstring)."""
    reference = "idle" if "idle" in spec.baselines else "naive"
    oracle, ref, rule = rows.get("oracle"), rows.get(reference), rows.get("rule_based")
    power_mw = float((oracle or {}).get("storage_power_mw") or storage_power_mw(spec))
    block: dict[str, Any] = {
        "power_kw": power_mw * 1000.0,
        "energy_mwh": (oracle or {}).get("storage_energy_mwh"),
        "reference": reference,
        "kw_year": None,
        "trading_day_share": None,
        "trading_threshold_mwh": None,
        "rule_leaves_share": None,
    }
    if oracle is not None and ref is not None and power_mw > 0:
        gain = float(oracle["mean"]) - float(ref["mean"])
        if reference == "idle":  # else the gain holds the task's other decisions too
            block["kw_year"] = gain / episode_days(spec) * 365.0 / (power_mw * 1000.0)
        else:
            notes.append(
                f"no $/kW-year: without an idle policy the oracle's gain over {reference} holds "
                "the task's other decisions too, so it is not the storage's"
            )
        if rule is not None and abs(gain) > 1e-12:
            block["rule_leaves_share"] = (float(oracle["mean"]) - float(rule["mean"])) / gain
    throughput = (oracle or {}).get("storage_throughput_mwh")
    energy = block["energy_mwh"]
    if oracle is not None and throughput is not None and energy:
        threshold = trading_day_threshold_mwh(float(energy))
        days = np.asarray([x for episode in throughput for x in episode], dtype=np.float64)
        block["trading_threshold_mwh"] = threshold
        block["trading_day_share"] = float(np.mean(days > threshold)) if days.size else None
    elif oracle is not None:
        notes.append(
            "trading days not measured (the oracle row has no storage throughput): run "
            f"powerzoo card {task} --recompute"
        )
    return block


def task_card(task: str, split: str = "test", table: str | Path | None = None) -> dict[str, Any]:
    """The card of ``task`` on ``split``, from the baselines table (module docstring).

    Args:
        task: A registered task name.
        split: The split of the table's rows (default ``test``).
        table: A baselines JSON file (``None``: the packaged one).

    Returns:
        The card: ``task``, ``split``, ``return_unit``, ``episodes``, ``naive`` (``{"kind",
        "doc"}``), ``policies`` (``{name: {"mean_return", "over_budget_share"}}``, values ``None``
        where not measured), ``headroom`` (``over_idle_pct``, ``over_naive_pct``,
        ``over_rule_pct``), ``benchmark`` (with the packaged table), ``storage`` (tasks with
        storage only), ``prices`` (tasks that see
        the market price only), ``figures``, ``targets`` (the :class:`CardTargets` as a dict)
        and ``notes`` (what is missing, in words).
    """
    from powerzoo.benchmarks.evaluation import return_unit
    from powerzoo.tasks import task_spec

    spec = task_spec(task)
    rows = _table_rows(task, split, table)
    defined = table_baselines(task)
    notes: list[str] = []
    policies: dict[str, dict[str, float | None]] = {}
    for name in CARD_POLICIES:
        if name not in defined:
            continue
        row = rows.get(name)
        if row is None:
            notes.append(f"{name}: " + _NOT_MEASURED.format(task=task))
            policies[name] = {"mean_return": None, "over_budget_share": None}
            continue
        rate = row.get("over_budget_rate")
        policies[name] = {
            "mean_return": float(row["mean"]),
            "over_budget_share": None if rate is None else float(rate),
        }

    def mean(name: str) -> float | None:
        return policies.get(name, {}).get("mean_return")

    naive = naive_baseline(task)
    card: dict[str, Any] = {
        "task": task,
        "split": split,
        "return_unit": return_unit(spec),
        "episodes": max((int(r["episodes"]) for r in rows.values()), default=0),
        "naive": None if naive is None else {"kind": naive.kind, "doc": naive.doc},
        "policies": policies,
        "headroom": {
            "over_idle_pct": headroom_pct(mean("oracle"), mean("idle")),
            "over_naive_pct": headroom_pct(mean("oracle"), mean("naive")),
            "over_rule_pct": headroom_pct(mean("oracle"), mean("rule_based")),
        },
    }
    if table is None:
        card["benchmark"] = _benchmark_headroom(task, split)
    if has_storage(spec):
        card["storage"] = _storage_block(task, spec, rows, notes)
    if task in MARKET_PRICE_TASKS:
        card["prices"] = dict(_price_statistics(split))
    figures = {name: fn(rows) for name, fn in FIGURES.items()}
    card["figures"] = {k: v for k, v in figures.items() if v is not None}
    card["targets"] = dataclasses.asdict(card_targets(task))
    card["notes"] = notes
    return card


def _benchmark_headroom(task: str, split: str) -> dict[str, Any] | None:
    """The benchmark v2 score's scale of ``task`` (:func:`~powerzoo.benchmarks.score_v2.
    task_reference`): its anchor, the oracle's lead over it ($ per episode and in % of the
    oracle's |mean return|) and whether that is learnable headroom; ``None`` when the table
    cannot anchor the task."""
    from powerzoo.benchmarks.score_v2 import MIN_HEADROOM_PCT, task_reference

    try:
        ref = task_reference(task, split)
    except ValueError:
        return None
    return {
        "anchor": ref.anchor,
        "anchor_within_budget": ref.anchor_within_budget,
        "headroom": ref.headroom,
        "headroom_pct": ref.headroom_pct,
        "learnable": ref.learnable_headroom,
        "min_headroom_pct": MIN_HEADROOM_PCT,
    }


def _below(a: float, b: float) -> bool:
    """``a < b`` beyond the returns' tolerance."""
    return a < b - _RETURN_TOL * max(1.0, abs(a), abs(b))


def check_card(card: Mapping[str, Any]) -> list[str]:
    """The targets a card misses, one readable line each (empty: every target met).

    The targets are the card's own ``targets`` (else :func:`card_targets` of its task). A
    policy the task has but the card lacks (``mean_return`` ``None``) and a storage figure that
    was not measured count as unmet.

    Args:
        card: A card (:func:`task_card`, or one of the same shape).

    Returns:
        The unmet targets, as sentences naming the task.
    """
    task = card["task"]
    targets = card.get("targets")
    t = CardTargets(**targets) if targets is not None else card_targets(task)
    policies = card.get("policies", {})
    out = [
        f"{task}: {name} " + _NOT_MEASURED.format(task=task)
        for name, p in policies.items()
        if p.get("mean_return") is None
    ]

    def mean(name: str) -> float | None:
        return policies.get(name, {}).get("mean_return")

    if t.ordered:
        naive_kind = (card.get("naive") or {}).get("kind")
        pairs = [("oracle", "rule_based"), ("rule_based", "idle")]
        if naive_kind != "idle" or mean("idle") is None:  # else the idle check says it
            pairs.append(("rule_based", "naive"))
        for high, low in pairs:
            a, b = mean(high), mean(low)
            if not _within_budget(policies.get(low, {})):
                continue  # a return over the budgets is no bar to clear
            if a is not None and b is not None and _below(a, b):
                out.append(f"{task}: {high} ({a:,.2f}) is below {low} ({b:,.2f}) in mean return")
    if t.oracle_within_budget and "oracle" in policies:
        share = policies["oracle"].get("over_budget_share")
        if share is not None and share > 0.0:
            out.append(f"{task}: the oracle is over budget on {100 * share:.1f} % of the episodes")
    storage = card.get("storage")
    checks = (
        ("kw_year", t.kw_year_min, "{:.2f} $/kW-year", "oracle's gain over idle"),
        ("trading_day_share", t.trading_day_share_min, "{:.3f}", "trading-day share"),
        (
            "rule_leaves_share",
            t.rule_leaves_share_min,
            "{:.3f}",
            "share of the gain the rule leaves",
        ),
    )
    for key, minimum, fmt, what in checks:
        if minimum is None:
            continue
        value = None if storage is None else storage.get(key)
        if value is None:
            out.append(f"{task}: {what} ({key}) not measured, target >= {minimum:g}")
        elif value < minimum:
            out.append(f"{task}: {what} {fmt.format(value)} < {minimum:g} ({key})")
    figures = card.get("figures", {})
    for bounds, sign, word in ((t.figure_min, 1.0, ">="), (t.figure_max, -1.0, "<=")):
        for name, bound in bounds.items():
            value = figures.get(name)
            if value is None:
                out.append(f"{task}: figure {name} not measured, target {word} {bound:g}")
            elif sign * (value - bound) < 0.0:
                out.append(f"{task}: figure {name} = {value:.4g}, target {word} {bound:g}")
    return out


def recompute_card(
    task: str,
    split: str = "test",
    max_episodes: int | None = None,
    table: str | Path | None = None,
    progress: bool | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Measure every table row of ``task`` on ``split`` again
    (:func:`~powerzoo.benchmarks.baselines.compute_baselines`, all of
    :func:`~powerzoo.benchmarks.naive.table_baselines`, so the rows share their days), write
    them into the table and return the new card.

    Args:
        task: A registered task name.
        split: The split.
        max_episodes: Days to evaluate, evenly spread over the split
            (:func:`~powerzoo.benchmarks.baselines.select_days`; ``None``: every day).
        table: The baselines JSON file to update (``None``: the packaged one).
        progress: Progress bars (``None``: when stderr is a terminal).
        seed: Reset seeds ``seed + i`` and the random policy's seed.

    Returns:
        The card of the updated table (:func:`task_card`).
    """
    from powerzoo.benchmarks.baselines import BASELINES_FILE, compute_baselines
    from powerzoo.benchmarks.table_writing import write_table

    path = Path(BASELINES_FILE if table is None else table)
    rows = compute_baselines([task], split, seed, max_episodes, progress=progress)
    command = f"powerzoo card {task} --split {split} --recompute" + (
        f" --max-episodes {max_episodes}" if max_episodes is not None else ""
    )
    write_table(path, rows, command)
    return task_card(task, split, path)
