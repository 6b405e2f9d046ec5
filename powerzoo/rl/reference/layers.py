"""What the reference baselines put between a learner and the env: the rule's residual and the
safety layer's projection, both on batches of joint actions in the env's own units.

A learner of a reference baseline acts in [-1, 1] (per action component, per agent); the layer
turns that into the action the env takes:

- **residual on the rule** (:class:`ResidualLayer`): ``clip(rule(s) + scale * half * u, low,
  high)``, with ``rule(s)`` the task's rule-based action (``task.rule_based_action``, the
  controller of :class:`~powerzoo.benchmarks.policies.RuleBasedPolicy`), ``half`` half the
  width of the action box and ``[low, high]`` the box (env units). ``u = 0`` is the rule
  itself; ``scale = 0.25`` lets the learner move each component by at most a quarter of its
  half-range (an eighth of the range) away from the rule.
- **safety layer** (:class:`SafetyLayer`): ``u`` mapped onto the box, then projected onto the
  bounds the task declares for the step (:func:`step_bounds`), i.e. clipped componentwise to
  them.

Both read the observation the env gave (``obs`` in the env's units, normalised or not) and
convert it to the physical, default-mode observation the task's controllers read
(:class:`ActionView`), exactly as :class:`~powerzoo.benchmarks.policies.RuleBasedPolicy`
does; for a multi-agent env in another observation mode they read the runner's state instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.devices.battery import BatteryParams, feasible_power_mw

__all__ = [
    "DEFAULT_RESIDUAL_SCALE",
    "ActionView",
    "ResidualLayer",
    "SafetyLayer",
    "step_bounds",
    "bounds_kind",
]

DEFAULT_RESIDUAL_SCALE = 0.25
"""Largest move of the residual away from the rule, as a fraction of half the action range."""


class ActionView:
    """The task behind an env, seen as its controllers see it, for batches of rows.

    Args:
        facts: :func:`~powerzoo.envs.introspect.inspect_env` of an env built with the options of
            the env the layer acts on (its task, scalers, agents and observation mode).
    """

    def __init__(self, facts: Any) -> None:
        self.facts, self.task = facts, facts.task
        spec = self.task.spec
        self.agents = None if facts.agents is None else list(facts.agents)
        self.own_obs = self.agents is None or facts.obs_mode in (None, spec.default_obs_mode)
        self.obs_dim, self.act_dim = spec.observation.dim, spec.action.dim
        low = np.asarray(spec.action.low, np.float64)
        high = np.asarray(spec.action.high, np.float64)
        scaler = facts.action_scaler
        if scaler is not None:
            low, high = (np.asarray(b, np.float64) for b in scaler.unit_bounds(low, high))
        self.low, self.high = low, high  # the action box in the env's units, joint [act_dim]
        self.mid, self.half = (high + low) / 2.0, (high - low) / 2.0

    def physical_obs(self, obs: np.ndarray, runner: Any = None) -> np.ndarray:
        """Default-mode observations in physical units, ``[B, obs_dim]`` or
        ``[B, n_agents, obs_dim]``, from the env's observations ``obs`` (``[B, ...]``, agent axis
        second on a multi-agent env); forecast entries dropped.

        Args:
            obs: The env's observations (its units), batched.
            runner: The env's runner; its state is read instead of ``obs`` when the env
                observes in another mode than the task's default.

        Returns:
            float64 observations.
        """
        if not self.own_obs:
            state = (runner if runner is not None else self.facts.runner).state
            return np.asarray(self.task.observe(state), dtype=np.float64)
        obs = np.asarray(obs, dtype=np.float64)
        scaler = self.facts.obs_scaler
        if scaler is not None:
            obs = scaler.from_unit(obs)
        return obs if self.agents is not None else obs[:, : self.obs_dim]

    def to_env(self, physical: np.ndarray) -> np.ndarray:
        """Physical joint actions ``[B, act_dim]`` -> the env's units (float64)."""
        scaler = self.facts.action_scaler
        physical = np.asarray(physical, np.float64)
        return physical if scaler is None else (physical - scaler.mid) / scaler.half

    def from_unit(self, unit: np.ndarray) -> np.ndarray:
        """Learner actions in [-1, 1] ``[B, act_dim]`` (clipped) -> the env's box."""
        return self.mid + self.half * np.clip(np.asarray(unit, np.float64), -1.0, 1.0)


class ResidualLayer:
    """``clip(rule(s) + scale * half * u, low, high)`` in the env's units (module docstring).

    Args:
        view: The env's :class:`ActionView`.
        scale: Largest move away from the rule, as a fraction of half the action range.
    """

    name = "residual"

    def __init__(self, view: ActionView, scale: float = DEFAULT_RESIDUAL_SCALE) -> None:
        if not 0.0 < float(scale) <= 2.0:
            raise ValueError(f"residual_scale must be in (0, 2], got {scale!r}")
        self.view, self.scale = view, float(scale)

    def rule(self, obs: np.ndarray, runner: Any = None) -> np.ndarray:
        """The rule's joint actions ``[B, act_dim]`` in the env's units (float32 values, as
        :class:`~powerzoo.benchmarks.policies.RuleBasedPolicy` passes them)."""
        view = self.view
        physical = view.task.rule_based_action(view.physical_obs(obs, runner))
        return view.to_env(physical).astype(np.float32).astype(np.float64)

    def __call__(self, obs: np.ndarray, unit: np.ndarray, runner: Any = None) -> np.ndarray:
        """The env's joint actions ``[B, act_dim]`` for learner actions ``unit`` ([-1, 1])."""
        view = self.view
        residual = self.scale * view.half * np.clip(np.asarray(unit, np.float64), -1.0, 1.0)
        return np.clip(self.rule(obs, runner) + residual, view.low, view.high)


def bounds_kind(task: Any) -> str:
    """Which bounds :func:`step_bounds` projects ``task``'s actions onto: ``"step_range"``
    (dispatch tasks: every unit's Pmin / Pmax and ramp range from its last output),
    ``"battery_soc"`` (one battery's grid power: the charge and discharge the SOC bounds and
    the rating allow over the step) or ``"box"`` (the action space's bounds only)."""
    if callable(getattr(task, "step_range_from_obs", None)):
        return "step_range"
    spec = task.spec
    if (
        isinstance(getattr(task, "battery", None), BatteryParams)
        and tuple(spec.action.names) == ("p_mw",)
        and "soc" in spec.observation.names
    ):
        return "battery_soc"
    return "box"


def step_bounds(task: Any, physical_obs: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The physical joint action bounds ``(lo, hi)`` [B, act_dim] the task declares for the
    step, from default-mode physical observations; ``None`` where it declares none beyond its
    action box (:func:`bounds_kind`).

    Args:
        task: The task.
        physical_obs: ``[B, obs_dim]`` or ``[B, n_agents, obs_dim]``, physical units.

    Returns:
        ``(lo, hi)`` in the action's units (MW for both kinds), or ``None``.
    """
    kind = bounds_kind(task)
    spec = task.spec
    if kind == "step_range":
        lo, hi = task.step_range_from_obs(physical_obs)  # [B, n_gen] MW
        joint = getattr(task, "joint_action", None)
        if joint is None:  # one action entry per unit
            return lo, hi
        # units mapped to their action entries; entries that dispatch no unit keep the box
        used = joint(np.ones(lo.shape[-1])) != 0.0
        box_lo = np.broadcast_to(np.asarray(spec.action.low, np.float64), (lo.shape[0], used.size))
        box_hi = np.broadcast_to(np.asarray(spec.action.high, np.float64), box_lo.shape)
        return np.where(used, joint(lo), box_lo), np.where(used, joint(hi), box_hi)
    if kind == "battery_soc":
        soc = physical_obs[:, spec.observation.names.index("soc")]
        charge_mw, discharge_mw = feasible_power_mw(task.battery, soc, spec.dt_h)
        return -charge_mw[:, None], discharge_mw[:, None]  # + discharge
    return None


class SafetyLayer:
    """The learner's action mapped onto the box, then clipped to the task's declared step
    bounds (:func:`step_bounds`; the box alone where the task declares none).

    Args:
        view: The env's :class:`ActionView`.
    """

    name = "safe"

    def __init__(self, view: ActionView) -> None:
        self.view = view
        self.kind = bounds_kind(view.task)

    def bounds(self, obs: np.ndarray, runner: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """The step's bounds ``(lo, hi)`` [B, act_dim] in the env's units, within the box."""
        view = self.view
        declared = step_bounds(view.task, view.physical_obs(obs, runner))
        if declared is None:
            shape = (np.asarray(obs).shape[0], view.low.size)
            return np.broadcast_to(view.low, shape), np.broadcast_to(view.high, shape)
        lo = np.clip(view.to_env(declared[0]), view.low, view.high)
        return lo, np.clip(view.to_env(declared[1]), lo, view.high)

    def __call__(self, obs: np.ndarray, unit: np.ndarray, runner: Any = None) -> np.ndarray:
        """The env's joint actions ``[B, act_dim]`` for learner actions ``unit`` ([-1, 1])."""
        lo, hi = self.bounds(obs, runner)
        return np.minimum(np.maximum(self.view.from_unit(unit), lo), hi)
