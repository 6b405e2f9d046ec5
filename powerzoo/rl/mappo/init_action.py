"""Where the native trainers' actors start (``MAPPOParams.init_action``).

``"center"`` keeps the networks as built: the output bias is 0, so every mean action starts in
the middle of its bounds. ``"idle"`` moves each actor's output bias to the task's no-control
action (``spec.idle_action``: cars charging on plug-in, PV not curtailed, loads served), so
training starts from the operator who does nothing; the output weights start near zero
(orthogonal, gain 0.01), so the mean is that bias up to about 1 %.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["idle_actions", "start_actors_at"]


def idle_actions(spec: Any, env: Any, layouts: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Each group's no-control action in the learner's [-1, 1] units [n, act_dim].

    Args:
        spec: the task's :class:`~powerzoo.tasks.spec.TaskSpec` (its ``idle_action``, physical
            units, agent-major).
        env: the training env (its action normalisation, if any).
        layouts: ``{group: GroupLayout}`` of the learner (agents and env-unit bounds).

    ``ValueError`` naming the tasks that have an idle action when ``spec`` has none.
    """
    from powerzoo.envs.introspect import inspect_env
    from powerzoo.tasks import list_tasks, task_spec

    if spec.idle_action is None:
        with_idle = [t for t in list_tasks() if task_spec(t).idle_action is not None]
        raise ValueError(
            f"init_action='idle': task {spec.task_id!r} has no idle (no-control) action; "
            f"tasks with one: {', '.join(with_idle)}"
        )
    env_units = np.asarray(spec.idle_action, np.float64)
    scaler = inspect_env(env).action_scaler
    if scaler is not None:  # a normalised env: its actions are the scaler's unit values
        env_units = scaler.to_unit(env_units).astype(np.float64)
    index = {a: i for i, a in enumerate(spec.agents)}
    env_units = env_units.reshape(len(index), spec.agent_action_dim)
    out = {}
    for name, g in layouts.items():
        a = env_units[[index[agent] for agent in g.agents]]
        out[name] = 2.0 * (a - g.low) / (g.high - g.low) - 1.0
    return out


@torch.no_grad()
def start_actors_at(learner: Any, actions: Mapping[str, np.ndarray]) -> None:
    """Set each group's initial mean action to ``actions[group]`` [n, act_dim] ([-1, 1] units)
    through its actor's output bias (a :class:`~powerzoo.rl.mappo.algorithm.MultiAgentPPO`).

    ``ValueError`` when an action is outside [-1, 1] or the agents of a group (one shared
    actor) ask different ones.
    """
    for name, layout in learner.layouts.items():
        a = np.asarray(actions[name], np.float64).reshape(layout.n, layout.act_dim)
        if not np.all(np.abs(a) <= 1.0 + 1e-9):
            raise ValueError(f"group {name!r}: initial actions must lie in [-1, 1]")
        if np.ptp(a, axis=0).max() > 1e-6:
            raise ValueError(
                f"group {name!r}: its agents share one actor but start at different actions"
            )
        learner.actors[name].mean[-1].bias.copy_(torch.as_tensor(a[0], dtype=torch.float32))
