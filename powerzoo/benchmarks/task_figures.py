"""The figure of a task page: one test day under the task's rule-based policy.

The episode runs on the task itself (no env wrappers): reset on day 0 of the test split, then
``observe -> rule_based_action -> step`` until the horizon. Panels, against the hour of the
episode: the applied actions (each entry for small tasks; for many agents the sum of each kind
of power entry, or the mean of the others), the task's key observed quantities (SOC, voltages,
prices, loads; grouped by unit), the reward per step and the selected constraint costs.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.plots import PNG_METADATA
from powerzoo.fileio import atomic_save
from powerzoo.tasks import make_task

__all__ = ["KEY_FIELDS", "rule_day", "plot_rule_day", "significant"]

KEY_FIELDS: dict[str, tuple[str, ...]] = {
    "battery_arbitrage": ("soc", "price_per_mwh"),
    "dc_microgrid": ("zone_temp_c", "soc", "price_per_mwh"),
    "dc_microgrid_safe": ("zone_temp_c", "soc", "price_per_mwh"),
    "dc_scheduling": ("v_min_pu", "dc_bus_v_pu", "dc_load_mw", "price_per_mwh"),
    "dso": ("v_min_pu", "v_max_pu", "p_loss_mw", "price_per_mwh"),
    "marl_der_arbitrage": ("own_soc", "v_min_pu", "v_max_pu", "price_per_mwh"),
    "marl_ders_benchmark": ("own_v_pu", "price_per_mwh"),
    "marl_ev_v2g": ("own_plugged_share", "v_min_pu", "price_per_mwh"),
    "marl_opf": ("system_load_mw", "prev_imbalance_mw"),
    "opf_118": ("system_load_mw", "prev_imbalance_mw"),
    "opf_118_7d": ("system_load_mw", "prev_imbalance_mw"),
    "opf": ("system_load_mw", "area_load_mw"),
    "acopf_118": ("prev_v_min_pu", "prev_v_max_pu", "prev_losses_mw"),
    "voltage_control_118": ("prev_v_min_pu", "prev_v_max_pu", "prev_losses_mw", "price_per_mwh"),
    "gencos_bidding": ("prev_mean_lmp_per_mwh", "system_load_mw", "wind_mw"),
    "marl_uc": ("system_load_mw", "committed_capacity_mw"),
    "tso": ("system_load_mw", "committed_capacity_mw"),
    "joint_trans_dist": ("price_per_mwh", "own_soc", "v_min_pu", "v_max_pu"),
    "joint_trans_dist_7d": ("price_per_mwh", "own_soc", "v_min_pu", "v_max_pu"),
    "joint_trans_dist_118": ("price_per_mwh", "own_v_min_pu", "own_v_max_pu"),
}
"""Observation fields each built-in task's figure shows (others: the first two non-time
fields)."""

_TIME = ("hour_sin", "hour_cos", "time_remaining")
MAX_LINES = 6  # action entries drawn one by one up to this many, else summarised by kind
CANDIDATE_DAYS = 8  # test days, spread over the split, that the figure chooses from
SUM_DIGITS = 4
"""Significant digits of the episode sum in the figure's title: the last bits of an AC rollout
differ between CPU kinds (SIMD and BLAS kernels), and a title printed to 0.1 $ would redraw the
committed figure on another machine (the task card has the exact returns)."""


def significant(value: float, digits: int) -> str:
    """``value`` rounded to ``digits`` significant digits, with thousands separators
    (``-2775552.1`` -> ``"-2,776,000"``, ``12.3456`` -> ``"12.35"``)."""
    rounded = float(f"{value:.{digits}g}")
    if rounded == int(rounded):
        return f"{int(rounded):,}"
    decimals = max(0, digits - 1 - int(np.floor(np.log10(abs(rounded)))))
    return f"{rounded:,.{decimals}f}".rstrip("0").rstrip(".")


def rule_day(name: str, day: int | None = None, split: str = "test") -> dict[str, Any]:
    """Run the rule-based policy of task ``name`` for one episode of ``split``.

    Args:
        name: a registered task.
        day: the split day to start on; ``None`` runs ``CANDIDATE_DAYS`` days spread over the
            split as one batch and keeps the one where the rule acts most (largest sum of
            |applied action|), so that the figure shows the policy at work, not an idle day.
        split: the data split.

    Returns:
        ``{"obs": [T+1, (agents,) dim], "actions": [T, act_dim], "rewards": [T],
        "costs": [T, n_costs], "task": task, "day": day}`` in physical units (reward: the
        task's objective, $ per step for the built-in tasks).
    """
    task = make_task(name, split)
    rng = np.random.default_rng(0)
    if day is None:  # spread over the split's seasons
        days = np.unique(np.linspace(0, task.n_days - 1, CANDIDATE_DAYS).round().astype(int))
    else:
        days = np.array([day])
    state = task.reset(rng, days)
    obs, actions, rewards, costs = [task.observe(state)], [], [], []
    for _ in range(task.spec.horizon):
        action = task.rule_based_action(task.observe(state))
        state, out = task.step(state, action, rng)
        obs.append(task.observe(state))
        actions.append(out.action_applied)
        rewards.append(out.reward)
        costs.append(out.constraint_costs)
    activity = np.abs(np.asarray(actions)).reshape(len(actions), days.size, -1).sum(axis=(0, 2))
    row = int(np.argmax(activity))  # the first of equally active days
    return {
        "obs": np.asarray(obs)[:, row],
        "actions": np.asarray(actions)[:, row],
        "rewards": np.asarray(rewards)[:, row],
        "costs": np.asarray(costs)[:, row],
        "task": task,
        "day": int(days[row]),
    }


def _action_lines(spec: Any, actions: np.ndarray) -> dict[tuple[str, str], np.ndarray]:
    """``{(label, unit): series}`` of the actions to draw."""
    names, units = spec.action.names, spec.action.units
    used = [i for i, n in enumerate(names) if ".unused_" not in n]
    if len(used) <= MAX_LINES:
        return {(names[i], units[i]): actions[:, i] for i in used}
    kinds: dict[tuple[str, str], list[int]] = {}
    for i in used:
        kinds.setdefault((names[i].rsplit(".", 1)[-1], units[i]), []).append(i)
    lines = {}
    for (entry, unit), idx in kinds.items():
        power = unit.split()[0] in ("MW", "kW", "Mvar") or unit == "-"
        how = "sum" if power else "mean"
        series = actions[:, idx].sum(axis=1) if power else actions[:, idx].mean(axis=1)
        lines[(f"{how} of {len(idx)} x {entry}", unit)] = series
    return lines


def _field_series(spec: Any, obs: np.ndarray, field: str) -> tuple[np.ndarray, str]:
    """The field over the episode (mean over agents when agents differ) and its label."""
    i = spec.observation.names.index(field)
    values = obs[..., i]
    if values.ndim == 1:
        return values, field
    if np.allclose(values, values[:, :1]):
        return values[:, 0], field
    return values.mean(axis=1), f"{field} (mean over agents)"


def plot_rule_day(name: str, path: str | Path, day: int | None = None) -> Path:
    """Draw one test day of task ``name`` under its rule-based policy to the PNG ``path``.

    Args:
        name: a registered task.
        path: the PNG file to write.
        day: the test day; ``None``: the most active of the first test days (see
            :func:`rule_day`).

    Returns:
        ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = rule_day(name, day)
    day = run["day"]
    spec = run["task"].spec
    hours = np.arange(1, spec.horizon + 1) * spec.dt_h
    hours_obs = np.arange(spec.horizon + 1) * spec.dt_h
    fields = KEY_FIELDS.get(name) or tuple(n for n in spec.observation.names if n not in _TIME)[:2]
    fields = tuple(f for f in fields if f in spec.observation.names)
    by_unit: dict[str, list[str]] = {}
    for f in fields:
        by_unit.setdefault(spec.observation.units[spec.observation.names.index(f)], []).append(f)
    n_panels = 3 + len(by_unit)
    fig, axes = plt.subplots(n_panels, 1, figsize=(9, 2.1 * n_panels), sharex=True)
    ax = axes[0]
    lines = _action_lines(spec, run["actions"])
    units = list(dict.fromkeys(unit for _, unit in lines))
    twin = ax.twinx() if len(units) == 2 else None  # two kinds of entry: one axis each
    handles = []
    for k, ((label, unit), series) in enumerate(lines.items()):
        target, style = (twin, "--") if twin and unit == units[1] else (ax, "-")
        handles += target.step(
            hours, series, style, where="post", color=f"C{k}", label=f"{label} [{unit}]"
        )
    ax.set_title("applied action (dashed: right axis)" if twin else "applied action", fontsize=9)
    ax.legend(handles=handles, fontsize=7, loc="upper left", ncol=2)
    for ax, (unit, names) in zip(axes[1:], by_unit.items(), strict=False):
        for f in names:
            series, label = _field_series(spec, run["obs"], f)
            ax.plot(hours_obs, series, label=label)
        ax.set_ylabel(unit, fontsize=8)
        ax.legend(fontsize=7, loc="upper left")
    ax = axes[-2]
    ax.step(hours, run["rewards"], where="post", color="k")
    total = significant(float(run["rewards"].sum()), SUM_DIGITS)
    ax.set_title(f"reward per step (episode sum {total})", fontsize=9)
    ax = axes[-1]
    selected = spec.selected_constraints or spec.constraint_names
    for c in selected:
        i = spec.constraint_names.index(c)
        unit = spec.constraint_units[i]
        ax.step(hours, run["costs"][:, i], where="post", label=f"{c} [{unit}]")
    ax.set_title("constraint costs per step", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_xlabel("hour of the episode")
    fig.suptitle(f"{name}: test day {day}, rule-based policy", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, metadata=PNG_METADATA)
    plt.close(fig)
    data = buffer.getvalue()
    # the same figure is not written again: `mkdocs serve` rebuilds on every write, and an
    # unchanged committed figure keeps its file untouched
    if not (path.is_file() and path.read_bytes() == data):
        atomic_save(path, lambda tmp: tmp.write_bytes(data))
    return path
