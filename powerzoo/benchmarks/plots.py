"""Plots of one episode for any task: reward, applied actions, constraint costs per step."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["plot_episode_trace", "MAX_ACTION_LINES"]

MAX_ACTION_LINES = 8  # wider action vectors plot their first components only


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
    """Save a three-panel PNG of one episode and return its path.

    Args:
        rewards: reward per step [T] (task units, e.g. $ per step).
        actions: applied physical actions [T, n] (``info["action_applied"]``).
        costs: constraint costs per step [T, k] (``info["constraint_costs"]``).
        path: PNG file to write (folders are created).
        step_hours: step length in hours (x axis in hours).
        action_names / cost_names: legend labels.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
