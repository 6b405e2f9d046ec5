"""Generic multi-agent adapters: PettingZoo Parallel, the ``"auto"`` dict env, and a native
vector env.

All three sit on :class:`MultiAgentCore`, which turns per-agent action dicts into the task's joint
action (agent-major, checked and clipped once by the runner) and the task's per-agent
observations ``[B, n_agents, obs_dim]`` into dicts. Rewards are per agent: a shared-reward task
gives every agent the team reward. Every agent's info carries the shared CMDP keys
(``constraint_costs``, ``cost_sum``, ...) plus its own ``action_applied``.

Each agent's action (``[act_dim]``, or ``[N, act_dim]`` in the batched env) follows the rule of
every PowerZoo env, :func:`~powerzoo.envs.runner.conform_action`: numbers only (bool, complex and
string actions raise), and axes of length 1 may be added or dropped, nothing else. ``reset``
takes ``options`` as a dict of known keys (``{"day_id": k}``); any other key raises.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

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
    squeezed_shape,
    start_day_option,
)
from powerzoo.tasks.base import Task

__all__ = [
    "MultiAgentCore",
    "PowerZooParallelEnv",
    "PowerZooDictEnv",
    "PowerZooMultiAgentVectorEnv",
]

_NDARRAY = np.ndarray  # alias: saves an attribute lookup per agent in the action fast path


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
            missing, unknown = set(self.agents) - set(actions), set(actions) - set(self.agents)
            raise ValueError(
                f"{self.spec.task_id}: actions need exactly the agents {list(self.agents)}; "
                f"missing {sorted(missing)}, unknown {sorted(unknown)}"
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
        values = [actions[agent] for agent in self.agents]
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
        rewards = reward if reward.ndim == 2 else np.repeat(reward[:, None], self.n_agents, axis=1)
        return self.observe(), rewards, terminated, truncated, info

    def agent_infos(self, info: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Per-agent info dicts of env row 0: the shared keys plus the agent's own applied action.

        The shared row is converted once; each agent gets a shallow copy with its own
        ``action_applied`` (a view of its slice of the joint action).
        """
        shared = scalar_info(info)
        applied = shared.get("action_applied")
        if applied is None:
            return {agent: dict(shared) for agent in self.agents}
        own = applied.reshape(self.n_agents, self.act_dim)  # row i: agent i's slice, a view
        return {
            agent: {**shared, "action_applied": row}
            for agent, row in zip(self.agents, own, strict=True)
        }

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


class PowerZooParallelEnv(_TaskMetadata, ParallelEnv):
    """A multi-agent task as a PettingZoo Parallel env (``while env.agents:`` idiom)."""

    metadata = {"render_modes": [], "name": "powerzoo_parallel_v0", "is_parallelizable": True}

    def __init__(
        self,
        task: Task,
        obs_mode: str | None = None,
        normalize: bool = False,
        reward: RewardSpec = None,
    ) -> None:
        self.core = MultiAgentCore(task, 1, obs_mode, normalize, reward)
        self.task_spec = task.spec
        self.render_mode: str | None = (
            None  # no render modes (SuperSuit and TorchRL read the attribute)
        )
        self.possible_agents = list(self.core.agents)
        self.agents: list[str] = []
        self.observation_spaces = self.core.observation_spaces
        self.action_spaces = self.core.action_spaces
        n_state = self.core.n_agents * self.core.obs_spec.dim
        self.state_space = gym.spaces.Box(-np.inf, np.inf, shape=(n_state,), dtype=np.float32)

    def observation_space(self, agent: str) -> gym.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.Space:
        return self.action_spaces[agent]

    def reset(
        self,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        day_id: int | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        obs, info = self.core.reset(seed, start_day_option(options, day_id))
        self.agents = list(self.possible_agents)
        return {a: obs[0, i] for i, a in enumerate(self.possible_agents)}, self.core.agent_infos(
            info
        )

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("episode is over; call reset()")
        obs, rewards, terminated, truncated, info = self.core.step(actions)
        term, trunc = bool(terminated.item(0)), bool(truncated.item(0))
        agents = self.possible_agents
        out = (
            dict(zip(agents, obs[0], strict=True)),  # row views obs[0, i]
            dict(zip(agents, rewards[0].tolist(), strict=True)),  # Python floats
            dict.fromkeys(agents, term),
            dict.fromkeys(agents, trunc),
            self.core.agent_infos(info),
        )
        if term or trunc:
            self.agents = []
        return out

    def state(self) -> np.ndarray:
        return self.core.global_state()[0]


class PowerZooDictEnv(PowerZooParallelEnv):
    """``framework="auto"`` for multi-agent tasks: a Parallel env whose done dicts add
    ``"__all__"``.

    ``"__all__"`` follows RLlib's multi-agent convention, but this is not an RLlib
    ``MultiAgentEnv`` (RLlib refuses it): use it for PowerZoo's own loops and evaluation.

    ``observation_space`` / ``action_space`` are also available as ``gymnasium.spaces.Dict``
    through :attr:`observation_space_dict` / :attr:`action_space_dict`; calling
    ``env.action_space`` without an agent gives the Dict space (so
    ``RandomPolicy(env.action_space)`` samples a joint action).
    """

    @functools.cached_property
    def observation_space_dict(self) -> gym.spaces.Dict:
        """Every agent's observation space as one ``Dict`` space (built on first use, kept)."""
        return gym.spaces.Dict(self.observation_spaces)

    @functools.cached_property
    def action_space_dict(self) -> gym.spaces.Dict:
        """Every agent's action space as one ``Dict`` space (built on first use, kept)."""
        return gym.spaces.Dict(self.action_spaces)

    @property
    def observation_space(self) -> Any:  # type: ignore[override]
        return _SpaceView(self.observation_space_dict)

    @property
    def action_space(self) -> Any:  # type: ignore[override]
        return _SpaceView(self.action_space_dict)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terms, truncs, infos = super().step(actions)
        terms["__all__"] = any(terms.values())
        truncs["__all__"] = any(truncs.values())
        return obs, rewards, terms, truncs, infos


class _SpaceView(gym.spaces.Dict):
    """A Dict space that can also be called with an agent name: ``space(agent)``."""

    def __init__(self, space: gym.spaces.Dict) -> None:
        super().__init__(space.spaces)

    def __call__(self, agent: str) -> gym.Space:
        return self.spaces[agent]


class PowerZooMultiAgentVectorEnv(_TaskMetadata):
    """``num_envs`` copies of a multi-agent task stepped at once (the batched dict API).

    ``step({agent: actions[N, act_dim]})`` returns ``({agent: obs[N, d]}, {agent: rewards[N]},
    {agent: terminations[N]}, {agent: truncations[N]}, info)`` where ``info`` holds batched shared
    keys. Episodes auto-reset in the same step (``info["final_obs"]`` per agent, ``"_final_obs"``,
    and the global state before the reset, ``info["final_state"]`` [N, state_dim]).
    :meth:`state` is the global state [N, state_dim] of centralised critics (every agent's
    observation, agent-major), described by ``single_state_space`` / ``state_space``.
    """

    def __init__(
        self,
        task: Task,
        num_envs: int,
        obs_mode: str | None = None,
        normalize: bool = False,
        reward: RewardSpec = None,
    ) -> None:
        self.core = MultiAgentCore(task, num_envs, obs_mode, normalize, reward)
        self.task_spec = task.spec
        self.render_mode: str | None = None
        self.num_envs = self.core.runner.num_envs
        self.possible_agents = list(self.core.agents)
        self.agents = list(self.core.agents)
        from gymnasium.vector.utils import batch_space

        self._single_obs, self._single_act = self.core.observation_spaces, self.core.action_spaces
        self._obs = {a: batch_space(s, self.num_envs) for a, s in self._single_obs.items()}
        self._act = {a: batch_space(s, self.num_envs) for a, s in self._single_act.items()}
        n_state = self.core.n_agents * self.core.obs_spec.dim
        self.single_state_space = gym.spaces.Box(
            -np.inf, np.inf, shape=(n_state,), dtype=np.float32
        )
        self.state_space = batch_space(self.single_state_space, self.num_envs)

    def state(self) -> np.ndarray:
        """Global state [N, n_agents * obs_dim]: every agent's observation, agent-major."""
        return self.core.global_state()

    def single_observation_space(self, agent: str) -> gym.Space:
        return self._single_obs[agent]

    def single_action_space(self, agent: str) -> gym.Space:
        return self._single_act[agent]

    def observation_space(self, agent: str) -> gym.Space:
        return self._obs[agent]

    def action_space(self, agent: str) -> gym.Space:
        return self._act[agent]

    def group_arrays(self, per_agent: dict[str, Any]) -> dict[str, np.ndarray]:
        """``{agent: [N, ...]}`` -> ``{group: [N, n_group, ...]}`` (one network per group)."""
        return {
            g: np.stack([np.asarray(per_agent[a]) for a in agents], axis=1)
            for g, agents in self.agent_groups.items()
        }

    def agent_arrays(self, per_group: dict[str, Any]) -> dict[str, np.ndarray]:
        """``{group: [N, n_group, ...]}`` -> ``{agent: [N, ...]}``, e.g. a group's actions for
        :meth:`step`."""
        out: dict[str, np.ndarray] = {}
        for g, agents in self.agent_groups.items():
            values = np.asarray(per_group[g])
            if values.ndim < 2 or values.shape[1] != len(agents):
                raise ValueError(
                    f"group {g!r} needs an array [N, {len(agents)}, ...], got shape {values.shape}"
                )
            out.update({a: values[:, i] for i, a in enumerate(agents)})
        return out

    def _split(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        return {a: obs[:, i] for i, a in enumerate(self.possible_agents)}

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict, dict]:
        obs, info = self.core.reset(seed, start_day_option(options))
        return self._split(obs), info

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terminated, truncated, info = self.core.step(actions)
        done = terminated | truncated
        if done.any():
            info["final_obs"] = self._split(obs)
            info["_final_obs"] = done
            info["final_state"] = obs.reshape(self.num_envs, -1)
            self.core.runner.reset_done(done)
            obs = self.core.observe()
        agents = self.possible_agents
        return (
            self._split(obs),
            {a: rewards[:, i] for i, a in enumerate(agents)},
            dict.fromkeys(agents, terminated),
            dict.fromkeys(agents, truncated),
            info,
        )
