"""The batched multi-agent core under the adapters of :mod:`powerzoo.envs.multi_agent`.

:class:`MultiAgentCore` turns per-agent action dicts into the task's joint action (agent-major,
checked and clipped once by the runner) and the task's per-agent observations
``[B, n_agents, obs_dim]`` into dicts.
"""

from __future__ import annotations

import operator
from typing import Any

import gymnasium as gym
import numpy as np

from powerzoo.envs.gym_env import scalar_info
from powerzoo.envs.metadata import TaskMetadata
from powerzoo.envs.pipeline import (
    ActionPipeline,
    ObservationPipeline,
    RewardSpec,
    apply_reward,
    compile_reward,
)
from powerzoo.envs.runner import (
    TaskRunner,
    conform_action,
    few_names,
    short_repr,
    squeezed_shape,
)
from powerzoo.tasks.base import Task

__all__ = ["MultiAgentCore"]

_NDARRAY = np.ndarray  # alias: saves an attribute lookup per agent in the action fast path
_DTYPE_KIND = operator.attrgetter("dtype.kind")  # of a numpy array or scalar
_ITEM = operator.methodcaller("item")  # a size-1 numpy array or scalar as a Python number
_NUMBER_KINDS = frozenset("fiu")  # the dtype kinds conform_action accepts


class MultiAgentCore:
    """Batched multi-agent view of a task: dict actions in, per-agent arrays out."""

    def __init__(
        self,
        task: Task,
        num_envs: int = 1,
        obs_mode: str | None = None,
        normalize: bool = False,
        reward: RewardSpec = None,
    ) -> None:
        spec = task.spec
        if spec.agent_mode != "multi":
            raise ValueError(f"{spec.task_id} is a single-agent task; use framework='gymnasium'")
        self.task, self.spec = task, spec
        self.observations = ObservationPipeline(task, obs_mode=obs_mode, normalize=normalize)
        self.actions = ActionPipeline(spec, normalize=normalize, num_envs=num_envs)
        self.obs_mode, self.obs_spec = self.observations.obs_mode, self.observations.layout
        self.obs_scaler, self.action_scaler = self.observations.scaler, self.actions.scaler
        self.runner = TaskRunner(task, num_envs)
        self.reward_fn = compile_reward(spec, reward)  # None: the task's own (team) reward
        self.agents = spec.agents
        self._agent_set = frozenset(spec.agents)
        self.n_agents, self.act_dim = len(spec.agents), spec.agent_action_dim
        # one agent's action: [act_dim] in a single env, [B, act_dim] in a batch
        batch = self.runner.num_envs
        self._agent_shape = (self.act_dim,) if batch == 1 else (batch, self.act_dim)
        self._agent_core = squeezed_shape(self._agent_shape)
        low, high = (
            b.reshape(self.n_agents, self.act_dim) for b in (self.actions.low, self.actions.high)
        )
        space = self.observations.space
        self.observation_spaces = {
            a: gym.spaces.Box(space.low, space.high, dtype=np.float32) for a in self.agents
        }
        self.action_spaces = {
            a: gym.spaces.Box(low[i], high[i], dtype=np.float32) for i, a in enumerate(self.agents)
        }

    def observe(self) -> np.ndarray:
        """Per-agent observations [B, n_agents, obs_dim] (normalised if requested)."""
        return self.observations.observe(self.runner.state)

    def joint_action(self, actions: Any) -> np.ndarray:
        """Dict ``{agent: [B, act_dim]}`` -> physical joint action [B, n_agents * act_dim]."""
        if not isinstance(actions, dict):
            raise ValueError(
                f"{self.spec.task_id}: actions must be a dict keyed by agent, "
                f"got {type(actions).__name__}"
            )
        if actions.keys() != self._agent_set:
            missing = [a for a in self.agents if a not in actions]
            unknown = sorted(map(str, set(actions) - self._agent_set))
            raise ValueError(
                f"{self.spec.task_id}: actions need exactly the {self.n_agents} agents "
                f"({few_names(self.agents)}); missing {len(missing)}"
                + (f" ({few_names(missing)})" if missing else "")
                + f", unknown {len(unknown)}"
                + (f" ({few_names([short_repr(k, 40) for k in unknown])})" if unknown else "")
            )
        joint = self._stacked_action(actions)
        if joint is None:
            joint = self._joint_action_checked(actions)
        return self.actions.to_physical(joint)

    def _stacked_action(self, actions: dict[str, Any]) -> np.ndarray | None:
        """Fast path of a single env (B = 1): every agent's action converted in one call.

        Taken when every action is a Python float or int, a flat list of them, or a numeric
        numpy array or scalar, and all have one shape that
        :func:`~powerzoo.envs.runner.conform_action` accepts (stacking would turn a bool among
        floats into a number, so other types are not stacked). ``None`` (convert agent by agent,
        see :meth:`_joint_action_checked`) for batched envs, where the per-agent arrays are large
        and concatenating them is cheaper, and for any other input (the checked path then
        converts it or reports the bad one).
        """
        if self.runner.num_envs != 1:
            return None
        values = list(map(actions.__getitem__, self.agents))
        if self.act_dim == 1:  # one number per agent: read each as a Python number, in C
            try:
                if set(map(_DTYPE_KIND, values)) <= _NUMBER_KINDS:
                    stacked = np.fromiter(map(_ITEM, values), np.float64, self.n_agents)
                    return stacked.reshape(1, self.n_agents)
            except (AttributeError, TypeError, ValueError):
                pass  # a Python number, a list, or an array of another size: the loop below
        for value in values:
            kind = type(value)
            if kind is _NDARRAY:
                if value.dtype.kind not in "fiu":
                    return None
            elif kind is list:  # a flat list of Python numbers ([0.5]); nested: checked path
                for entry in value:
                    if type(entry) is not float and type(entry) is not int:
                        return None
            elif kind is not float and kind is not int:
                if not isinstance(value, np.generic) or value.dtype.kind not in "fiu":
                    return None
        try:
            stacked = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):  # shapes differ
            return None
        if squeezed_shape(stacked.shape[1:]) != self._agent_core:
            return None
        return stacked.reshape(1, self.n_agents * self.act_dim)

    def _joint_action_checked(self, actions: dict[str, Any]) -> np.ndarray:
        """Agent-by-agent conversion (:func:`~powerzoo.envs.runner.conform_action`) with a
        precise error for the first bad action."""
        b, task_id, names = self.runner.num_envs, self.spec.task_id, self.spec.action.names
        parts = []
        for i, agent in enumerate(self.agents):
            own = names[i * self.act_dim : (i + 1) * self.act_dim]
            a = conform_action(
                actions[agent], self._agent_shape, f"{task_id}: action of {agent}", own
            )
            parts.append(a.reshape(b, self.act_dim))
        return np.concatenate(parts, axis=1)

    def reset(self, seed: Any = None, day_id: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start every episode (``seed``: re-seed first; ``day_id``: the start day or days)."""
        if seed is not None or self.runner.state is None:
            self.runner.seed(seed)
        self.runner.reset(day_id)
        info = self.runner.reset_info()
        if self.reward_fn is not None:
            info["task_reward"] = np.zeros(self.runner.num_envs)
        return self.observe(), info

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Batched step: obs [B, n, d], rewards [B, n], terminated [B], truncated [B], info."""
        _, reward, terminated, truncated, info = self.runner.step(
            self.joint_action(actions), observe=False
        )
        if self.reward_fn is not None:  # the team reward [B]
            reward = np.asarray(
                apply_reward(self.reward_fn, reward, info), dtype=np.float64
            ).reshape(-1)
        rewards = reward if reward.ndim == 2 else reward[:, None].repeat(self.n_agents, axis=1)
        return self.observe(), rewards, terminated, truncated, info

    def agent_infos(self, info: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Per-agent info dicts of env row 0: the shared keys plus the agent's own applied action.

        The shared row is converted once; each agent gets a shallow copy with its own
        ``action_applied`` (a view of its slice of the joint action).
        """
        shared = scalar_info(info)
        applied = shared.get("action_applied")
        if applied is None:
            return {agent: shared.copy() for agent in self.agents}
        own = applied.reshape(self.n_agents, self.act_dim)  # row i: agent i's slice, a view
        infos = {}
        for agent, row in zip(self.agents, own, strict=True):
            infos[agent] = agent_info = shared.copy()  # a dict's copy: one C call, no re-hashing
            agent_info["action_applied"] = row
        return infos

    def observation_fields(self, agent: str) -> tuple[str, ...]:
        if agent not in self.agents:
            raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(self.agents)}")
        return self.obs_spec.names

    def global_state(self) -> np.ndarray:
        """Global state [B, n_agents * obs_dim] for centralised critics: every agent's
        observation."""
        return self.observe().reshape(self.runner.num_envs, -1)


class _TaskMetadata(TaskMetadata):
    """Task facts shared by the multi-agent adapters (they hold ``core`` and ``task_spec``)."""

    core: MultiAgentCore
    task_spec: Any

    def observation_fields(self, agent: str) -> tuple[str, ...]:
        """Names of ``agent``'s observation entries, in order."""
        return self.core.observation_fields(agent)

    @property
    def agent_groups(self) -> dict[str, list[str]]:
        """Agents of each kind, ``{group: [agent, ...]}`` (one group ``"agents"`` if all are
        alike)."""
        return {g.name: list(g.agents) for g in self.task_spec.groups}

    def current_date(self) -> str:
        """Calendar date of the running episode (``YYYY-MM-DD``; the first env's for a batch)."""
        return str(self.core.runner.current_dates()[0])

    def close(self) -> None:
        return None
