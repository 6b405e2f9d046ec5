"""Plots of benchmark results: one episode of any task, and return against constraint cost.

:func:`record_episode` is the one way to record an episode for a plot: it runs
:func:`~powerzoo.benchmarks.evaluation.rollout` and keeps the reward, applied action and
constraint costs of every step, for single-agent and multi-agent envs alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.evaluation import EpisodeRecord, rollout
from powerzoo.benchmarks.policies import Policy
from powerzoo.envs.introspect import agents_of
from powerzoo.fileio import atomic_save
from powerzoo.tasks import task_spec

__all__ = [
    "plot_episode_trace",
    "plot_recorded_episode",
    "plot_return_vs_cost",
    "plot_return_vs_costs",
    "plot_learning_curves",
    "LearningCurve",
    "record_episode",
    "EpisodeTrace",
    "MAX_ACTION_LINES",
    "PNG_METADATA",
]

MAX_ACTION_LINES = 8  # wider action vectors plot their first components only
PNG_METADATA: dict[str, str | None] = {"Software": None}
"""``savefig(..., metadata=PNG_METADATA)``: no ``Software`` entry (Matplotlib writes its own
version there by default), so a figure's bytes depend on what it shows, not on the Matplotlib
release that drew it: a committed figure redrawn with the same numbers is the same file."""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path) -> Path:
    """Save ``fig`` as a PNG atomically (folders created), close it, return the path."""
    try:
        return atomic_save(path, lambda p: fig.savefig(p, dpi=110, metadata=PNG_METADATA))
    finally:
        _pyplot().close(fig)


# ---- recording -----------------------------------------------------------------------------------
class _StepRecorder:
    """``env`` with every ``step`` result's reward and info kept (the whole per-agent info dict in a
    multi-agent env, so each agent's applied action is there)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.infos: list[Any] = []
        self.rewards: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        self.infos, self.rewards = [], []
        return self.env.reset(*args, **kwargs)

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        reward, info = out[1], out[-1]
        self.rewards.append(
            float(sum(reward.values())) if isinstance(reward, dict) else float(reward)
        )
        self.infos.append(info)
        return out


@dataclasses.dataclass
class EpisodeTrace:
    """One recorded episode.

    Attributes:
        rewards: reward per step [T] (task units, e.g. $ per step; the team reward, summed over
            agents, in a multi-agent env).
        actions: applied physical action per step [T, n] (``info["action_applied"]``; agents
            concatenated agent-major in a multi-agent env).
        costs: constraint costs per step [T, k] (``info["constraint_costs"]``, physical units).
        agents: agent names of a multi-agent env, ``None`` for a single-agent env.
        record: the episode's :class:`~powerzoo.benchmarks.evaluation.EpisodeRecord` (return,
            summed costs, day, ``trace`` of the requested info keys).
    """

    rewards: np.ndarray
    actions: np.ndarray
    costs: np.ndarray
    agents: list[str] | None
    record: EpisodeRecord


def record_episode(
    env: Any,
    policy: Policy,
    *,
    day_id: int | None = None,
    seed: int | None = None,
    trace_keys: Iterable[str] = (),
) -> EpisodeTrace:
    """Run one episode of ``policy`` in ``env`` (:func:`~powerzoo.benchmarks.evaluation.rollout`,
    same arguments) and keep what :func:`plot_recorded_episode` draws.

    The episode is exactly the one ``rollout`` would run: recording only reads the step results.
    """
    recorder = _StepRecorder(env)
    record = rollout(recorder, policy, day_id=day_id, seed=seed, trace_keys=trace_keys)
    agents = agents_of(env)
    if agents is None:
        actions = [np.ravel(info["action_applied"]) for info in recorder.infos]
        costs = [np.ravel(info["constraint_costs"]) for info in recorder.infos]
    else:
        actions = [
            np.concatenate([np.ravel(info[a]["action_applied"]) for a in agents])
            for info in recorder.infos
        ]
        costs = [np.ravel(info[agents[0]]["constraint_costs"]) for info in recorder.infos]
    return EpisodeTrace(
        np.asarray(recorder.rewards), np.stack(actions), np.stack(costs), agents, record
    )


# ---- plots ---------------------------------------------------------------------------------------
def plot_episode_trace(
    rewards: np.ndarray,
    actions: np.ndarray,
    costs: np.ndarray,
    path: str | Path,
    *,
    title: str = "",
    step_hours: float = 1.0,
    action_names: Sequence[str] = (),
    cost_names: Sequence[str] = (),
    reward_unit: str = "$",
) -> Path:
    """Save a three-panel PNG of one episode (atomically) and return its path.

    Args:
        rewards: reward per step [T] (task units, e.g. $ per step).
        actions: applied physical actions [T, n] (``info["action_applied"]``).
        costs: constraint costs per step [T, k] (``info["constraint_costs"]``).
        path: PNG file to write (folders are created).
        step_hours: step length in hours (x axis in hours).
        action_names / cost_names: legend labels.
    """
    plt = _pyplot()
    rewards = np.asarray(rewards, dtype=float)
    actions = np.asarray(actions, dtype=float).reshape(rewards.size, -1)
    costs = np.asarray(costs, dtype=float).reshape(rewards.size, -1)
    hours = np.arange(rewards.size) * step_hours
    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    axes[0].step(hours, rewards, where="post", label="reward per step")
    twin = axes[0].twinx()
    twin.plot(hours, np.cumsum(rewards), color="black", lw=1, label="cumulative return")
    axes[0].set_ylabel(f"reward ({reward_unit})")
    twin.set_ylabel(f"return ({reward_unit})")
    axes[0].set_title(title)
    for j in range(min(actions.shape[1], MAX_ACTION_LINES)):
        label = action_names[j] if j < len(action_names) else f"action {j}"
        axes[1].step(hours, actions[:, j], where="post", label=label)
    axes[1].set_ylabel("applied action (physical)")
    axes[1].legend(loc="upper left", fontsize="small", ncol=2)
    for j in range(costs.shape[1]):
        label = cost_names[j] if j < len(cost_names) else f"cost {j}"
        axes[2].step(hours, costs[:, j], where="post", label=label)
    axes[2].set_ylabel("constraint cost per step")
    axes[2].set_xlabel("hours into the episode")
    if costs.shape[1]:
        axes[2].legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    return _save(fig, path)


def plot_recorded_episode(
    trace: EpisodeTrace, spec: Any, path: str | Path, *, title: str = ""
) -> Path:
    """:func:`plot_episode_trace` of a recorded episode of a task with spec ``spec`` (a
    ``TaskSpec``).

    Actions are labelled with the spec's action names when their number matches; rewards are in
    the spec's ``reward_unit`` ($ on most tasks; the team's in a multi-agent env).
    """
    names = tuple(spec.action.names) if len(spec.action.names) == trace.actions.shape[1] else ()
    return plot_episode_trace(
        trace.rewards,
        trace.actions,
        trace.costs,
        path,
        title=title,
        step_hours=spec.step_minutes / 60.0,
        action_names=names,
        cost_names=spec.constraint_names,
        reward_unit=f"{spec.reward_unit}, team" if trace.agents else spec.reward_unit,
    )


def _return_cost_panel(
    ax: Any, rows: Sequence[dict[str, Any]], column: str, budget: float | None = None
) -> str:
    """Draw mean return against the ``<column>_mean`` cost of each row on ``ax`` (one labelled
    point per policy, 95 % intervals as error bars, the budget as a dashed line); returns the
    x-axis scale note (``", symlog scale"`` when the costs span more than three orders of
    magnitude, else ``""``)."""
    for r in rows:
        x, y = r[f"{column}_mean"], r["mean_return"]
        xerr = [[x - r[f"{column}_ci_low"]], [r[f"{column}_ci_high"] - x]]
        yerr = [[y - r["mean_return_ci_low"]], [r["mean_return_ci_high"] - y]]
        ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="o", capsize=4, label=r["policy"])
        ax.annotate(
            r["policy"], (x, y), textcoords="offset points", xytext=(6, 6), fontsize="small"
        )
    if budget is not None and np.isfinite(budget):
        ax.axvline(budget, color="red", ls="--", lw=1, label=f"budget {budget:g}")
    costs = [r[f"{column}_ci_high"] for r in rows if r[f"{column}_ci_high"] > 0]
    positive = [r[f"{column}_mean"] for r in rows if r[f"{column}_mean"] > 0]
    ax.grid(alpha=0.3)
    if positive and max(costs) / min(positive) > 1e3:  # costs over several orders of magnitude
        ax.set_xscale("symlog", linthresh=min(positive))
        return ", symlog scale"
    return ""


def _return_label(task: str) -> str:
    unit = "system return, $" if task_spec(task).agent_mode == "multi" else "$"
    return f"mean return per episode ({unit})"


def plot_return_vs_cost(
    rows: Sequence[dict[str, Any]], task: str, split: str, path: str | Path
) -> Path:
    """Mean return against mean total constraint cost per episode, one labelled point per policy.

    ``rows`` are campaign summary rows (:data:`~powerzoo.benchmarks.report.SUMMARY_COLUMNS`) of
    ``task``; their 95 % intervals are drawn as error bars. Costs spanning more than three orders of
    magnitude get a symlog x axis.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    scale = _return_cost_panel(ax, rows, "total_cost")
    ax.set_xlabel(f"mean total constraint cost per episode (sum over constraints{scale})")
    ax.set_ylabel(_return_label(task))
    ax.set_title(f"{task} ({split}): return vs constraint cost, 95% bootstrap CI")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return _save(fig, path)


def plot_return_vs_costs(
    rows: Sequence[dict[str, Any]],
    task: str,
    split: str,
    path: str | Path,
    budgets: dict[str, float],
) -> Path:
    """Mean return against each constraint's mean cost per episode, one panel per constraint in
    ``budgets`` (``{name: per-episode budget}``, physical units; ``inf`` for none), the budget as
    a dashed line: costs of different units are never added.

    ``rows`` are campaign summary rows of ``task`` with ``cost_<name>_mean`` / ``_ci_low`` /
    ``_ci_high`` columns; intervals are their 95 % bootstrap intervals.
    """
    plt = _pyplot()
    names = list(budgets)
    fig, axes = plt.subplots(
        1, max(len(names), 1), figsize=(5.5 * max(len(names), 1), 5), squeeze=False
    )
    for ax, name in zip(axes[0], names, strict=False):
        scale = _return_cost_panel(ax, rows, f"cost_{name}", budgets[name])
        ax.set_xlabel(f"{name} per episode{scale}")
    axes[0][0].set_ylabel(_return_label(task))
    axes[0][0].legend(fontsize="small")
    # two lines: one 5.5-inch panel is narrower than the whole title on one line
    fig.suptitle(f"{task} ({split})\nreturn vs each constraint cost, 95% bootstrap CI")
    fig.tight_layout()
    return _save(fig, path)


@dataclasses.dataclass
class LearningCurve:
    """Validation return of one algorithm/setting against env steps, over its seeds.

    Attributes:
        label: the curve's name (``<algorithm>/<setting>``).
        timesteps: env steps trained at each evaluation [T].
        mean: mean over seeds of the validation mean return [T] ($ per episode).
        low / high: its 95 % bootstrap interval over seeds [T].
        n_seeds: seeds evaluated at each step [T].
    """

    label: str
    timesteps: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_seeds: np.ndarray


def plot_learning_curves(
    curves: Sequence[LearningCurve], task: str, path: str | Path, *, title: str = ""
) -> Path:
    """Validation return against env steps, one line per curve and its interval as a band."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for c in curves:
        (line,) = ax.plot(c.timesteps, c.mean, marker=".", label=f"{c.label} ({c.n_seeds.max()})")
        ax.fill_between(c.timesteps, c.low, c.high, color=line.get_color(), alpha=0.2)
    ax.set_xlabel("env steps trained")
    ax.set_ylabel(f"validation {_return_label(task)}")
    ax.set_title(title or f"{task}: learning curves (mean over seeds, 95% bootstrap CI)")
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize="small", title="algorithm/setting (seeds)")
    fig.tight_layout()
    return _save(fig, path)
