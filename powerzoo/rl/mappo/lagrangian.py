"""The Lagrangian variants (``MAPPO-L``, ``IPPO-L``): multipliers, and how they mix advantages.

One multiplier ``lambda_j >= 0`` per selected cost ``j`` with a per-episode threshold ``d_j``:

* once per iteration, before the policy epochs, a projected gradient step
  ``lambda_j <- clip(lambda_j + lr * (J_c_j - d_j), 0, lambda_max)`` where ``J_c_j`` is the
  mean episode cost (:func:`step_multipliers`);
* the policy then follows ``(A_r - sum_j lambda_j A_c_j) / (1 + sum_j lambda_j)`` of the
  (standardised) reward and cost advantages (:func:`mixed_advantages`); a cost critic with one
  output per selected cost gives ``A_c`` and trains alongside the reward critic.
"""

from __future__ import annotations

import numpy as np
import torch

from powerzoo.rl.mappo.ppo import standardise

__all__ = ["step_multipliers", "mixed_advantages"]


def step_multipliers(
    multipliers: np.ndarray,
    mean_episode_costs: np.ndarray,
    thresholds: np.ndarray,
    lr: float,
    lambda_max: float | None,
) -> np.ndarray:
    """One projected gradient step of every multiplier (per unit of episode cost over budget)."""
    step = multipliers + lr * (np.asarray(mean_episode_costs, np.float64) - thresholds)
    return np.clip(step, 0.0, np.inf if lambda_max is None else lambda_max)


def mixed_advantages(
    adv: torch.Tensor,
    cost_adv: torch.Tensor | None,
    multipliers: np.ndarray,
    normalize: bool,
) -> torch.Tensor:
    """Reward advantages [R] (standardised if ``normalize``), mixed with the cost advantages
    [R, k] through the multipliers [k]; ``cost_adv=None``: the reward advantages alone."""
    a = standardise(adv) if normalize else adv
    if cost_adv is None:
        return a
    c = standardise(cost_adv) if normalize else cost_adv
    lam = torch.as_tensor(multipliers, dtype=a.dtype, device=a.device)
    return (a - (c * lam).sum(-1)) / (1.0 + lam.sum())
