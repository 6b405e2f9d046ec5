"""Training budgets and whole rollouts: the one warning a trainer gives when it rounds one up.

On-policy trainers (SB3's PPO and A2C, the native MAPPO / IPPO / PPO-L) learn from whole
rollouts of ``n_steps`` steps of ``n_envs`` envs, and keep collecting rollouts while fewer env
steps than the budget have been run: a budget that is not a multiple of ``n_steps x n_envs``
trains up to the next multiple. SB3's off-policy algorithms (SAC, TD3) collect ``train_freq``
steps of every env between updates, so they round to ``train_freq x n_envs``.
:func:`warn_rounded_budget` says so, in one line, before training starts.
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["rounded_budget", "warn_rounded_budget", "sb3_rollout"]


def rounded_budget(budget: int, done: int, rollout: int) -> int:
    """The env steps a run has trained when it stops at ``budget``.

    Args:
        budget: the training budget (env steps, or agent-steps for a shared SB3 policy).
        done: the steps already trained (a resumed run), counted in the same unit.
        rollout: the steps of one whole rollout (``n_steps x n_envs``).

    Returns:
        ``done`` plus the whole rollouts needed to reach ``budget`` (``done`` when it is reached).
    """
    remaining = int(budget) - int(done)
    if remaining <= 0:
        return int(done)
    if rollout <= 1:
        return int(budget)
    return int(done) + -(-remaining // int(rollout)) * int(rollout)


def warn_rounded_budget(
    algorithm: str,
    budget: int,
    done: int,
    rollout: int,
    rollout_words: str,
    unit: str = "env steps",
    name: str = "total_timesteps",
) -> int:
    """Warn (``UserWarning``, one line) when ``budget`` is not a whole number of rollouts.

    Args:
        algorithm: the algorithm's name, as the message shows it (``"PPO"``, ``"MAPPO"``).
        budget: the requested budget (``total_timesteps``).
        done: steps already trained (a resumed run).
        rollout: the steps of one rollout.
        rollout_words: how the rollout is made, e.g. ``"n_steps x n_envs = 48 x 128"``.
        unit: what a step counts (``"env steps"``, ``"agent-steps"``).
        name: the budget's name in the message (``"steps_per_round"`` for independent learners).

    Returns:
        The steps the run will have trained (:func:`rounded_budget`).
    """
    actual = rounded_budget(budget, done, rollout)
    if actual > budget and int(done) < int(budget):
        warnings.warn(
            f"{algorithm}: {name}={int(budget):,} is rounded up to {actual:,} {unit}: "
            f"it trains whole rollouts of {rollout_words} = {int(rollout):,} {unit} (give a "
            f"multiple of {int(rollout):,} to train exactly the budget)",
            UserWarning,
            stacklevel=3,
        )
    return actual


def sb3_rollout(model: Any) -> tuple[int, str] | None:
    """``(steps, words)`` of one rollout of an SB3 model (``model.n_envs`` counted), or ``None``
    where the rollout has no fixed length (off-policy collection counted in episodes)."""
    n_envs = int(model.n_envs)
    n_steps = getattr(model, "n_steps", None)
    if n_steps is not None:  # on-policy: PPO, A2C
        return int(n_steps) * n_envs, f"n_steps x n_envs = {int(n_steps)} x {n_envs}"
    train_freq = getattr(model, "train_freq", None)
    unit = getattr(getattr(train_freq, "unit", None), "value", None)
    if train_freq is None or unit != "step":
        return None
    frequency = int(train_freq.frequency)
    return frequency * n_envs, f"train_freq x n_envs = {frequency} x {n_envs}"
