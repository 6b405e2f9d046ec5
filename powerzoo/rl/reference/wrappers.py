"""Envs with a reference layer (:mod:`.layers`) between the learner and the task.

The learner of a wrapped env acts in [-1, 1] (every action component, every agent); the layer
turns its action into the env's (the rule plus a residual, or a projection onto the step's
bounds) from the observation the env gave last. Rewards, costs, observations and infos are the
env's own (``info["action_applied"]`` is the physical action the task applied). Every wrapper
keeps the wrapped env as ``env``, so :func:`powerzoo.envs.introspect.inspect_env` sees through
it.

- :class:`LayerEnv`: a single-agent Gymnasium env (one episode at a time);
- :class:`LayerDictEnv`: a multi-agent dict env (``framework="auto"``), ``{agent: array}``;
- :class:`LayerAgentVecEnv`: the multi-agent vector env (``num_envs=N``), ``{agent: [N, ...]}``.

The SB3 vector env's wrapper is in :mod:`.sb3_trainer` (it subclasses SB3's ``VecEnvWrapper``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from powerzoo.envs.introspect import inspect_env
from powerzoo.rl.reference.layers import (
    DEFAULT_RESIDUAL_SCALE,
    ActionView,
    ResidualLayer,
    SafetyLayer,
)

__all__ = [
    "LAYERS",
    "make_layer",
    "LayerEnv",
    "LayerDictEnv",
    "LayerAgentVecEnv",
    "wrap_env",
    "unit_box",
]

LAYERS = ("residual", "safe")
"""The layers a reference baseline can put before the env."""


def make_layer(kind: str, env: Any, residual_scale: float = DEFAULT_RESIDUAL_SCALE) -> Any:
    """The layer ``kind`` (``"residual"`` or ``"safe"``) for ``env`` (any PowerZoo env, or one
    with the same options).

    Args:
        kind: ``"residual"`` (rule plus residual) or ``"safe"`` (projection onto the step's
            bounds).
        env: The env whose task, scalers and agents the layer reads.
        residual_scale: The residual's largest move, a fraction of half the action range.

    Returns:
        A :class:`~.layers.ResidualLayer` or :class:`~.layers.SafetyLayer`.
    """
    facts = inspect_env(env)
    if facts is None:
        raise TypeError(f"a {kind} layer needs a PowerZoo env, got {env!r}")
    view = ActionView(facts)
    if kind == "residual":
        if "rule_based" not in facts.spec.baselines:
            raise ValueError(
                f"{facts.task_id} has no rule-based policy for a residual to start from "
                f"(its baselines: {', '.join(facts.spec.baselines)})"
            )
        return ResidualLayer(view, residual_scale)
    if kind == "safe":
        return SafetyLayer(view)
    raise ValueError(f"unknown layer {kind!r}; valid: {', '.join(LAYERS)}")


def unit_box(dim: int) -> gym.spaces.Box:
    """The learner's action space: [-1, 1] in each of ``dim`` components (float32)."""
    return gym.spaces.Box(-1.0, 1.0, shape=(dim,), dtype=np.float32)


class _AgentJoints:
    """``{agent: [..., d]}`` <-> joint ``[..., n_agents(, d)]`` in the task's agent order."""

    def __init__(self, agents: list[str], act_dim: int) -> None:
        self.agents, self.act_dim = agents, act_dim

    def obs(self, obs: dict[str, Any], batched: bool) -> np.ndarray:
        """``[B, n_agents, obs_dim]`` (``B = 1`` for one episode)."""
        joint = np.stack([np.asarray(obs[a]) for a in self.agents], axis=-2)
        return joint if batched else joint[None]

    def action(self, actions: dict[str, Any], batched: bool) -> np.ndarray:
        """``[B, n_agents * act_dim]`` agent-major."""
        joint = np.concatenate(
            [np.asarray(actions[a], np.float64).reshape(-1, self.act_dim) for a in self.agents],
            axis=1,
        )
        return joint if batched else joint[:1]

    def split(self, joint: np.ndarray, batched: bool) -> dict[str, np.ndarray]:
        """Joint ``[B, n_agents * act_dim]`` -> ``{agent: [B, act_dim]}`` (``[act_dim]``)."""
        parts = joint.reshape(joint.shape[0], len(self.agents), self.act_dim)
        parts = parts.astype(np.float32)
        return {a: parts[:, i] if batched else parts[0, i] for i, a in enumerate(self.agents)}


class LayerEnv(gym.Wrapper):
    """A single-agent Gymnasium env behind a layer: ``step(u)`` with ``u`` in [-1, 1].

    Args:
        env: A PowerZoo single-agent env (``make_env(task)``).
        layer: ``make_layer(kind, env)``, or a layer kind.
        residual_scale: With a layer kind ``"residual"``, its scale.
    """

    def __init__(
        self, env: gym.Env, layer: Any, residual_scale: float = DEFAULT_RESIDUAL_SCALE
    ) -> None:
        super().__init__(env)
        self.layer = make_layer(layer, env, residual_scale) if isinstance(layer, str) else layer
        self.action_space = unit_box(self.layer.view.act_dim)
        self._runner = inspect_env(env).runner
        self._obs: Any = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._obs = obs
        return obs, info

    def env_action(self, unit: Any) -> np.ndarray:
        """The env's action (float32) for the learner's action ``unit``."""
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        obs = np.asarray(self._obs)[None]
        unit = np.asarray(unit, np.float64).reshape(1, -1)
        return self.layer(obs, unit, self._runner)[0].astype(np.float32)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(self.env_action(action))
        self._obs = obs
        return obs, reward, terminated, truncated, info


class _Delegating:
    """Everything not overridden is the wrapped env's (``self.env``)."""

    env: Any

    def __getattr__(self, name: str) -> Any:
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


class LayerDictEnv(_Delegating):
    """A multi-agent dict env (``make_env(task, framework="auto")``) behind a layer: every
    agent's action in [-1, 1].

    Args:
        env: The dict env.
        layer: ``make_layer(kind, env)``, or a layer kind.
        residual_scale: With a layer kind ``"residual"``, its scale.
    """

    def __init__(self, env: Any, layer: Any, residual_scale: float = DEFAULT_RESIDUAL_SCALE):
        self.env = env
        self.layer = make_layer(layer, env, residual_scale) if isinstance(layer, str) else layer
        view = self.layer.view
        self._joints = _AgentJoints(view.agents, view.task.spec.agent_action_dim)
        self.action_space = gym.spaces.Dict(
            {a: unit_box(self._joints.act_dim) for a in view.agents}
        )
        self._runner = inspect_env(env).runner
        self._obs: Any = None

    def reset(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        obs, info = self.env.reset(*args, **kwargs)
        self._obs = obs
        return obs, info

    def step(self, actions: dict[str, Any]) -> tuple[Any, ...]:
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        joint = self.layer(
            self._joints.obs(self._obs, False),
            self._joints.action(actions, False),
            self._runner,
        )
        out = self.env.step(self._joints.split(joint, False))
        self._obs = out[0]
        return out


class LayerAgentVecEnv(_Delegating):
    """The multi-agent vector env (``num_envs=N``) behind a layer, for the native trainer:
    ``single_action_space(agent)`` is [-1, 1]; ``step({agent: [N, d]})``.

    Args:
        env: The multi-agent vector env (or a single-agent task's one-agent view of its vector
            env).
        layer: ``make_layer(kind, env)``, or a layer kind.
        residual_scale: With a layer kind ``"residual"``, its scale.
    """

    def __init__(self, env: Any, layer: Any, residual_scale: float = DEFAULT_RESIDUAL_SCALE):
        self.env = env
        self.layer = make_layer(layer, env, residual_scale) if isinstance(layer, str) else layer
        view = self.layer.view
        agents = view.agents or list(env.possible_agents)
        self._single = view.agents is None  # a single-agent task as one agent
        self._joints = _AgentJoints(agents, view.task.spec.agent_action_dim)
        self._runner = inspect_env(env).runner
        self.last_obs: dict[str, np.ndarray] | None = None

    def single_action_space(self, agent: str) -> gym.spaces.Box:
        """Every agent acts in [-1, 1]."""
        self.env.single_action_space(agent)  # unknown agents raise there
        return unit_box(self._joints.act_dim)

    def reset(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        obs, info = self.env.reset(*args, **kwargs)
        self.last_obs = obs
        return obs, info

    def step(self, actions: dict[str, Any]) -> tuple[Any, ...]:
        if self.last_obs is None:
            raise RuntimeError("call reset() before step()")
        obs = self._joints.obs(self.last_obs, True)
        joint = self.layer(
            obs[:, 0] if self._single else obs, self._joints.action(actions, True), self._runner
        )
        out = self.env.step(self._joints.split(joint, True))
        self.last_obs = out[0]
        return out


def wrap_env(env: Any, layer: str, residual_scale: float = DEFAULT_RESIDUAL_SCALE) -> Any:
    """``env`` behind layer ``layer``: the wrapper of its kind (single-agent Gymnasium env,
    multi-agent dict env or multi-agent vector env).

    Args:
        env: A PowerZoo env from ``make_env`` (not an SB3 vector env).
        layer: ``"residual"`` or ``"safe"``.
        residual_scale: The residual's largest move, a fraction of half the action range.

    Returns:
        The wrapped env.
    """
    wrapper: Callable[..., Any]
    if callable(getattr(env, "single_action_space", None)):
        wrapper = LayerAgentVecEnv
    elif inspect_env(env) is not None and inspect_env(env).agents is not None:
        wrapper = LayerDictEnv
    else:
        wrapper = LayerEnv
    return wrapper(env, layer, residual_scale)
