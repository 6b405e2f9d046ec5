"""Hyperparameters of the native multi-agent PPO family (MAPPO, IPPO and their Lagrangian variants).

This module imports nothing from the rest of the package, so the algorithm registry
(:mod:`powerzoo.rl.algorithms`) can name the algorithms and check ``algorithm_kwargs`` without
importing torch.

Names, in a run config (``algorithm: MAPPO`` and ``algorithm_kwargs: {...}``):

* ``MAPPO``: one actor per agent group, a centralised critic per group on the global state
  (every agent's observation) plus the agent's one-hot id within its group;
* ``IPPO``: the same actors, each group's critic on the agent's own observation (plus its id);
* ``MAPPO-L`` / ``IPPO-L``: the same, plus a cost critic on the task's selected costs and one
  Lagrange multiplier per selected cost, moved against the task's per-episode budgets (mean
  episode cost within budget, ``E[C] <= d``);
* ``PPO-L``: ``IPPO-L`` on a single-agent task, its one agent
  (:mod:`~powerzoo.rl.mappo.one_agent`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from powerzoo.rl.algorithms import NATIVE_MARL_ALGORITHMS, NATIVE_SINGLE_AGENT_ALGORITHMS

__all__ = ["NATIVE_MARL_ALGORITHMS", "MAPPOParams", "algorithm_flags", "check_params"]

LR_SCHEDULES: tuple[str, ...] = ("constant", "linear")
INIT_ACTIONS: tuple[str, ...] = ("center", "idle")
MULTIPLIER_UPDATES: tuple[str, ...] = ("pid", "sgd")


@dataclasses.dataclass
class MAPPOParams:
    """Hyperparameters (defaults follow published MAPPO practice: few epochs, one mini-batch,
    clip 0.2).

    Attributes:
        n_steps: env steps per env per iteration (the rollout length T); the batch of one
            iteration is ``n_steps * n_envs`` env steps.
        n_epochs: passes over the rollout per iteration.
        n_minibatches: mini-batches per epoch (per group).
        learning_rate: Adam step size of the actors.
        critic_learning_rate: Adam step size of the critics (reward and cost).
        lr_schedule: ``"constant"``, or ``"linear"``: both step sizes decay linearly to 0 over the
            run's budget (set before each iteration's update from the env steps done so far).
        gamma: discount (``None``: the task's, 0.999 on tasks of >= 168 steps).
        gae_lambda: GAE lambda.
        clip_range: PPO ratio clip.
        ent_coef: entropy bonus weight.
        max_grad_norm: gradient-norm clip of every network.
        hidden_sizes: widths of the tanh MLP layers of actors and critics.
        log_std_init: initial log standard deviation of the Gaussian actions (in [-1, 1] units).
        init_action: where the actors' mean actions start: ``"center"`` (the middle of each
            action's bounds), or ``"idle"``: the task's no-control action (``spec.idle_action``:
            cars charging on plug-in, PV not curtailed, loads served), so training starts from
            the operator who does nothing instead of, say, curtailing half of every load. Only
            on tasks with an idle action; the agents of a group share the actor, so their idle
            actions must agree.
        value_norm: normalise value targets with running statistics (critics predict the
            normalised target).
        normalize_advantage: standardise advantages per group and iteration.
        counterfactual_samples: ``K > 0`` (centralised critics only: MAPPO, MAPPO-L): each agent's
            reward advantage is its return minus a counterfactual baseline, the mean over ``K``
            draws of its own action of a Q-critic on (global state, team action, agent id)
            (:mod:`~powerzoo.rl.mappo.counterfactual`); removes the other agents' exploration
            noise from a shared reward. ``0`` (default): the state-value (GAE) advantage.
        joint_exploration: explore with one Gaussian over each group's group action (its agents'
            actions stacked), with a learned full covariance
            (:class:`~powerzoo.rl.mappo.networks.JointNoise`), instead of independent noise per
            agent; the means stay decentralised (each agent's own observation), the PPO ratio is
            the group's and its advantage the mean of its agents'. For groups whose agents share
            a coupling penalty (power balance): the noise learns to move them against each
            other. Not with ``counterfactual_samples`` or remote rollouts.
        counterfactual_learning_rate: Adam step size of the Q-critics (constant, no gradient
            clip; their targets are standardised by
            :class:`~powerzoo.rl.mappo.counterfactual.QNorm`).
        lambda_update: Lagrangian variants: how the multipliers move once per iteration
            (:mod:`~powerzoo.rl.mappo.lagrangian`): ``"pid"`` (default), a PID controller on the
            normalised violation ``J_c / d - 1`` (mean episode cost over budget, in budgets), one
            setting for every task; or ``"sgd"``, the raw-unit step ``lambda_lr * (J_c - d)``.
        lambda_kp: ``"pid"``: proportional gain (multiplier per budget of violation).
        lambda_ki: ``"pid"``: integral gain (multiplier added per iteration per budget of
            violation, the violation counted up to one budget); 0 with ``lambda_kp = 0`` keeps
            the multipliers at ``lambda_init``.
        lambda_kd: ``"pid"``: derivative gain, on the violation's rise since the last iteration.
        lambda_lr: ``"sgd"``: step size of the multipliers per unit of episode cost (the cost's
            physical unit) above the budget; 0 keeps them at ``lambda_init``.
        lambda_init: initial value of every multiplier (>= 0; with ``"pid"`` the integral's).
        lambda_max: upper bound of the multipliers and of the PID integral (``None``: none).
        cost_gamma: discount of the cost critic (``None``: ``gamma``).
        device: torch device (``"cpu"``; any device torch accepts).
        rollout_workers: 0 collects rollouts in-process; ``K > 0`` collects them on ``K`` Ray
            actors (:mod:`~powerzoo.rl.mappo.remote`, needs ``powerzoo[ray]``) that split the
            run's ``n_envs`` envs in contiguous blocks and return whole rollouts; same rollouts
            and weights as in-process for the same seed (``device="cpu"``, see ``rollout_exact``).
        rollout_exact: with remote rollouts, actors run the networks on the full ``n_envs`` batch
            shape with the learner's torch thread count, so rollouts equal in-process ones bit for
            bit (on the same CPU type); ``False``: block-sized batches on one thread (less network
            work per actor; equal to float32 rounding, reproducible for a fixed
            ``rollout_workers``).
        rollout_address: Ray cluster to join (``"auto"``, ``"ray://host:10001"``); ``None``: the
            running Ray session, else a new local one. Needs ``rollout_workers > 0``.
    """

    n_steps: int = 48
    n_epochs: int = 5
    n_minibatches: int = 1
    learning_rate: float = 1e-3
    critic_learning_rate: float = 1e-3
    lr_schedule: str = "constant"
    gamma: float | None = None
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.0
    max_grad_norm: float = 0.5
    hidden_sizes: tuple[int, ...] = (64, 64)
    log_std_init: float = -1.0
    init_action: str = "center"
    value_norm: bool = True
    normalize_advantage: bool = True
    counterfactual_samples: int = 0
    joint_exploration: bool = False
    counterfactual_learning_rate: float = 3e-3
    lambda_update: str = "pid"
    lambda_kp: float = 1.0
    lambda_ki: float = 0.1
    lambda_kd: float = 0.0
    lambda_lr: float = 0.05
    lambda_init: float = 0.0
    lambda_max: float | None = 100.0
    cost_gamma: float | None = None
    device: str = "cpu"
    rollout_workers: int = 0
    rollout_address: str | None = None
    rollout_exact: bool = True

    def __post_init__(self) -> None:
        self.hidden_sizes = tuple(int(h) for h in self.hidden_sizes)
        positive_int = ("n_steps", "n_epochs", "n_minibatches")
        for name in positive_int:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name in (
            "learning_rate",
            "critic_learning_rate",
            "counterfactual_learning_rate",
            "clip_range",
            "max_grad_norm",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("gamma", "cost_gamma"):
            value = getattr(self, name)
            if value is not None and not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        if self.init_action not in INIT_ACTIONS:
            raise ValueError(f"init_action must be one of {INIT_ACTIONS}, got {self.init_action!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if not 0.0 <= self.gae_lambda <= 1.0:
            raise ValueError(f"gae_lambda must be in [0, 1], got {self.gae_lambda!r}")
        for name in ("ent_coef", "lambda_lr", "lambda_init", "lambda_kp", "lambda_ki", "lambda_kd"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.lambda_update not in MULTIPLIER_UPDATES:
            raise ValueError(
                f"lambda_update must be one of {MULTIPLIER_UPDATES}, got {self.lambda_update!r}"
            )
        if self.lambda_max is not None and self.lambda_max < self.lambda_init:
            raise ValueError(
                f"lambda_max ({self.lambda_max}) must be >= lambda_init ({self.lambda_init})"
            )
        cf = self.counterfactual_samples
        if isinstance(cf, bool) or not isinstance(cf, int) or cf < 0:
            raise ValueError(f"counterfactual_samples must be an int >= 0 (0: off), got {cf!r}")
        if not isinstance(self.joint_exploration, bool):
            raise ValueError(f"joint_exploration must be a bool, got {self.joint_exploration!r}")
        if self.joint_exploration and cf:
            raise ValueError(
                "joint_exploration and counterfactual_samples > 0 do not combine: choose one"
            )
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            raise ValueError(f"hidden_sizes must be positive widths, got {self.hidden_sizes!r}")
        workers = self.rollout_workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise ValueError(
                f"rollout_workers must be an int >= 0 (0: in-process rollouts), got {workers!r}"
            )
        if self.joint_exploration and workers:
            raise ValueError(
                "joint_exploration runs with in-process rollouts only (rollout_workers = 0)"
            )
        if self.rollout_address is not None:
            if not isinstance(self.rollout_address, str) or not self.rollout_address.strip():
                raise ValueError(
                    "rollout_address must be a non-empty string or None, "
                    f"got {self.rollout_address!r}"
                )
            if workers == 0:
                raise ValueError(
                    "rollout_address needs rollout_workers > 0 (remote rollouts are off)"
                )
        if not isinstance(self.rollout_exact, bool):
            raise ValueError(f"rollout_exact must be a bool, got {self.rollout_exact!r}")

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["hidden_sizes"] = list(self.hidden_sizes)
        return out


def algorithm_flags(name: str) -> tuple[bool, bool]:
    """``(centralised_critic, lagrangian)`` of a native algorithm name.

    ``PPO-L`` (one agent) has a local critic: the global state would be its own observation.
    """
    upper = str(name).upper()
    native = NATIVE_MARL_ALGORITHMS + NATIVE_SINGLE_AGENT_ALGORITHMS
    if upper not in native:
        raise ValueError(f"unknown algorithm {name!r}; valid: {', '.join(native)}")
    return upper.startswith("MAPPO"), upper.endswith("-L")


def check_params(kwargs: dict[str, Any], where: str = "algorithm_kwargs") -> MAPPOParams:
    """:class:`MAPPOParams` from ``kwargs``; ``ValueError`` naming an unknown key or a bad value."""
    fields = [f.name for f in dataclasses.fields(MAPPOParams)]
    for key in kwargs:
        if key not in fields:
            raise ValueError(
                f"{where}.{key}: not a parameter of the native trainer (MAPPO, IPPO, PPO-L); "
                f"valid: {', '.join(fields)}"
            )
    try:
        return MAPPOParams(**kwargs)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None
