"""The Lagrangian variants (``MAPPO-L``, ``IPPO-L``, ``PPO-L``): the constraint, the multipliers,
and how they mix advantages.

**The constraint** of selected cost ``j`` with per-episode budget ``d_j`` (``spec.cost_thresholds``,
the cost's physical unit per episode) is on its mean episode cost: ``E[C_j] <= d_j``. It is the
benchmark score's ``within_budget`` reading, with the same tolerance
(:data:`~powerzoo.benchmarks.evaluation.COST_TOLERANCE`): :func:`within_budgets`.

**The multipliers** (one ``lambda_j >= 0`` per selected cost) move once per iteration, before the
policy epochs, on the **normalised violation** of the iteration's mean episode cost ``J_c_j``:
``e_j = J_c_j / max(d_j, BUDGET_FLOOR) - 1`` (:func:`normalised_violation`; 0 on the budget, 1 at
twice it, -1 at no cost), so one setting serves budgets of 0.1 p.u. and of 50 MWh alike.
:class:`Multipliers` moves them with ``lambda_update``:

* ``"pid"`` (default): the PID Lagrangian of Stooke, Achiam and Abbeel (2020, "Responsive Safety
  in Reinforcement Learning by PID Lagrangian Methods"):
  ``I_j <- clip(I_j + K_i * min(e_j, 1), 0, lambda_max)`` and
  ``lambda_j = clip(K_p * e_j + I_j + K_d * max(0, e_j - e_j_prev), 0, lambda_max)``. The
  proportional term answers a violation at once and takes itself back as soon as it stops; the
  integral accumulates at most ``K_i`` per iteration, no faster than it falls when the cost drops
  to 0 (``e = -1``), so a stretch of violation unwinds in about as many iterations, less the
  ``K_p / K_i`` iterations the proportional term covers; and it holds while the multiplier is
  already at ``lambda_max`` on a violation (anti-windup), so a violation the bound already answers
  adds nothing to unwind. ``I_j`` starts at ``lambda_init``.
* ``"sgd"``: the raw-unit projected gradient step
  ``lambda_j <- clip(lambda_j + lambda_lr * (J_c_j - d_j), 0, lambda_max)`` (per unit of episode
  cost): its step scales with the cost's unit, and it falls by at most ``lambda_lr * d_j`` per
  iteration, so a long violation takes long to unwind. Kept as an explicit option.

**The mixing**: the policy follows ``(A_r - sum_j lambda_j A_c_j) / (1 + sum_j lambda_j)``
(:func:`mixed_advantages`), with the reward advantages ``A_r`` and each cost's advantages ``A_c_j``
standardised per iteration (``normalize_advantage``), so rewards and costs enter on one scale
whatever their units and the mixed advantage keeps the scale of one standardised advantage:
``lambda = 0`` is plain PPO, ``lambda = 1`` weighs reward and cost alike, large ``lambda`` follows
the cost alone. A cost critic with one output per selected cost gives ``A_c`` and trains alongside
the reward critic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from powerzoo.benchmarks.evaluation import COST_TOLERANCE
from powerzoo.rl.mappo.hparams import MULTIPLIER_UPDATES
from powerzoo.rl.mappo.ppo import standardise

__all__ = [
    "BUDGET_FLOOR",
    "MULTIPLIER_UPDATES",
    "Multipliers",
    "within_budgets",
    "normalised_violation",
    "step_multipliers",
    "mixed_advantages",
]

BUDGET_FLOOR = COST_TOLERANCE
"""The budget a zero budget is normalised by (each cost's unit per episode): the score's tolerance,
the most a mean cost may reach and still count as within a budget of zero."""


def within_budgets(episode_costs: np.ndarray, budgets: np.ndarray) -> bool:
    """Whether episode costs ``[episodes, k]`` (each selected cost's physical unit per episode)
    keep the budgets ``[k]`` as the -L learners constrain them: the mean over episodes of every
    cost at most its budget plus :data:`~powerzoo.benchmarks.evaluation.COST_TOLERANCE`
    (``E[C_j] <= d_j``, the score's ``within_budget``). No episodes: ``ValueError``."""
    d = np.asarray(budgets, np.float64).reshape(-1)
    c = np.asarray(episode_costs, np.float64).reshape(-1, d.size)
    if not len(c):
        raise ValueError("within_budgets needs at least one episode")
    return bool(np.all(c.mean(axis=0) <= d + COST_TOLERANCE))


def normalised_violation(mean_episode_costs: np.ndarray, budgets: np.ndarray) -> np.ndarray:
    """``J_c / max(d, BUDGET_FLOOR) - 1`` per selected cost (dimensionless: 0 on the budget, in
    budgets above it), from the mean episode costs and budgets ``[k]`` in the same unit."""
    d = np.maximum(np.asarray(budgets, np.float64), BUDGET_FLOOR)
    return np.asarray(mean_episode_costs, np.float64) / d - 1.0


def step_multipliers(
    multipliers: np.ndarray,
    mean_episode_costs: np.ndarray,
    thresholds: np.ndarray,
    lr: float,
    lambda_max: float | None,
) -> np.ndarray:
    """One raw-unit projected gradient step of every multiplier (``"sgd"``): ``lr`` per unit of
    mean episode cost over its budget, clipped to ``[0, lambda_max]``."""
    step = multipliers + lr * (np.asarray(mean_episode_costs, np.float64) - thresholds)
    return np.clip(step, 0.0, np.inf if lambda_max is None else lambda_max)


class Multipliers:
    """The multipliers of one run and the controller state that moves them (module docstring).

    Args:
        k: number of selected costs.
        params: the run's :class:`~powerzoo.rl.mappo.hparams.MAPPOParams` (``lambda_update``,
            ``lambda_kp``, ``lambda_ki``, ``lambda_kd``, ``lambda_lr``, ``lambda_init``,
            ``lambda_max``).
    """

    def __init__(self, k: int, params: Any) -> None:
        self.params = params
        self.values = np.full(k, params.lambda_init, np.float64)
        self.integral = np.full(k, params.lambda_init, np.float64)  # PID's I term (lambda units)
        self.previous = np.full(k, np.nan)  # last normalised violation (the D term)

    @property
    def upper(self) -> float:
        """The multipliers' upper bound (``inf`` without ``lambda_max``)."""
        return np.inf if self.params.lambda_max is None else float(self.params.lambda_max)

    def step(self, mean_episode_costs: np.ndarray, budgets: np.ndarray) -> np.ndarray:
        """Move every multiplier on this iteration's mean episode costs against ``budgets``
        (both ``[k]``, each cost's physical unit per episode); returns the multipliers (the
        array is updated in place)."""
        p = self.params
        if p.lambda_update == "sgd":
            self.values[:] = step_multipliers(
                self.values, mean_episode_costs, budgets, p.lambda_lr, p.lambda_max
            )
            return self.values
        e = normalised_violation(mean_episode_costs, budgets)
        rise = np.where(np.isnan(self.previous), 0.0, np.maximum(e - self.previous, 0.0))
        fast = p.lambda_kp * e + p.lambda_kd * rise  # the P and D terms
        saturated = (e > 0) & (fast + self.integral >= self.upper)  # anti-windup: hold I
        grown = np.clip(self.integral + p.lambda_ki * np.minimum(e, 1.0), 0.0, self.upper)
        self.integral = np.where(saturated, self.integral, grown)
        self.values[:] = np.clip(fast + self.integral, 0.0, self.upper)
        self.previous = e
        return self.values

    def state_dict(self) -> dict[str, np.ndarray]:
        """What a checkpoint keeps: the multipliers and the PID state."""
        return {
            "multipliers": self.values.copy(),
            "integral": self.integral.copy(),
            "previous_violation": self.previous.copy(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; a state with the multipliers alone (an older checkpoint)
        restarts the integral at them and forgets the last violation."""
        values = np.asarray(state["multipliers"], np.float64).reshape(self.values.shape)
        self.values[:] = values
        self.integral = np.asarray(state.get("integral", values), np.float64).copy()
        self.previous = np.asarray(
            state.get("previous_violation", np.full(values.shape, np.nan)), np.float64
        ).copy()


def mixed_advantages(
    adv: torch.Tensor,
    cost_adv: torch.Tensor | None,
    multipliers: np.ndarray,
    normalize: bool,
) -> torch.Tensor:
    """Reward advantages [R] (standardised if ``normalize``), mixed with the cost advantages
    [R, k] (each cost standardised if ``normalize``) through the multipliers [k] as
    ``(A_r - sum_j lambda_j A_c_j) / (1 + sum_j lambda_j)``; ``cost_adv=None``: the reward
    advantages alone."""
    a = standardise(adv) if normalize else adv
    if cost_adv is None:
        return a
    c = standardise(cost_adv) if normalize else cost_adv
    lam = torch.as_tensor(multipliers, dtype=a.dtype, device=a.device)
    return (a - (c * lam).sum(-1)) / (1.0 + lam.sum())
