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

from powerzoo.envs.multi_agent_core import MultiAgentCore, _TaskMetadata
from powerzoo.envs.pipeline import RewardSpec
from powerzoo.envs.runner import start_day_option
from powerzoo.tasks.base import Task

__all__ = [
    "MultiAgentCore",
    "PowerZooParallelEnv",
    "PowerZooDictEnv",
    "PowerZooMultiAgentVectorEnv",
]


class PowerZooParallelEnv(_TaskMetadata, ParallelEnv):
    """A multi-agent task as a PettingZoo Parallel env (``while env.agents:`` idiom).

    Args:
        task: The task to run (one episode at a time).
        obs_mode: Observation mode of the task's spec (``None``: its default).
        normalize: Scale observations to [-1, 1] and actions from [-1, 1] by the nominal ranges.
        reward: Reward preset name, weights or callable (``None``: the task's reward, $ per step).
    """

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

    @property
    def np_random(self) -> np.random.Generator:
        """The env's random generator (start days and noise), seeded by ``reset(seed=...)``, as
        a Gymnasium env's ``np_random``: wrappers that draw from ``env.unwrapped.np_random``
        (SuperSuit's ``frame_skip_v0``) use it."""
        return self.core.runner.rng

    @np_random.setter
    def np_random(self, generator: np.random.Generator) -> None:
        self.core.runner.rng = generator

    def observation_space(self, agent: str) -> gym.Space:
        """Observation space of one agent.

        Args:
            agent: An agent name.

        Returns:
            Its Box space.
        """
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.Space:
        """Action space of one agent.

        Args:
            agent: An agent name.

        Returns:
            Its Box space.
        """
        return self.action_spaces[agent]

    def reset(
        self,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        day_id: int | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """Start an episode.

        Args:
            seed: Seed of the episode's random generator (start day and noise).
            options: ``{"day_id": k}`` starts on split day ``k``.
            day_id: Shortcut for ``options={"day_id": day_id}``.

        Returns:
            Per-agent observations and infos.
        """
        obs, info = self.core.reset(seed, start_day_option(options, day_id))
        self.agents = list(self.possible_agents)
        return {a: obs[0, i] for i, a in enumerate(self.possible_agents)}, self.core.agent_infos(
            info
        )

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Advance every agent one step.

        Args:
            actions: Per agent, its action (physical units, or [-1, 1] when normalised).

        Returns:
            Per-agent observations, rewards ($), terminations, truncations and infos.
        """
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
        """Global state: every agent's observation, agent-major.

        Returns:
            Array [n_agents * obs_dim].
        """
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
        """Every agent's observation space (a Dict, callable with an agent)."""
        return _SpaceView(self.observation_space_dict)

    @property
    def action_space(self) -> Any:  # type: ignore[override]
        """Every agent's action space (a Dict, callable with an agent)."""
        return _SpaceView(self.action_space_dict)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Advance every agent one step; done dicts carry ``"__all__"``.

        Args:
            actions: Per agent, its action.

        Returns:
            Per-agent observations, rewards ($), terminations, truncations and infos.
        """
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

    Args:
        task: The task to run.
        num_envs: Copies stepped at once (N).
        obs_mode: Observation mode of the task's spec (``None``: its default).
        normalize: Scale observations and actions by the nominal ranges.
        reward: Reward preset name, weights or callable (``None``: the task's reward).
    """

    metadata = {"render_modes": []}

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
        """Global state [N, n_agents * obs_dim]: every agent's observation, agent-major.

        Returns:
            Array [N, n_agents * obs_dim].
        """
        return self.core.global_state()

    def single_observation_space(self, agent: str) -> gym.Space:
        """Observation space of one agent in one copy.

        Args:
            agent: An agent name.

        Returns:
            Its Box space.
        """
        return self._single_obs[agent]

    def single_action_space(self, agent: str) -> gym.Space:
        """Action space of one agent in one copy.

        Args:
            agent: An agent name.

        Returns:
            Its Box space.
        """
        return self._single_act[agent]

    def observation_space(self, agent: str) -> gym.Space:
        """Batched observation space of one agent.

        Args:
            agent: An agent name.

        Returns:
            Its Box space [N, obs_dim].
        """
        return self._obs[agent]

    def action_space(self, agent: str) -> gym.Space:
        """Batched action space of one agent.

        Args:
            agent: An agent name.

        Returns:
            Its Box space [N, act_dim].
        """
        return self._act[agent]

    def group_arrays(self, per_agent: dict[str, Any]) -> dict[str, np.ndarray]:
        """``{agent: [N, ...]}`` -> ``{group: [N, n_group, ...]}`` (one network per group).

        Args:
            per_agent: Per agent, an array [N, ...].

        Returns:
            Per group, the arrays stacked on axis 1.
        """
        return {
            g: np.stack([np.asarray(per_agent[a]) for a in agents], axis=1)
            for g, agents in self.agent_groups.items()
        }

    def agent_arrays(self, per_group: dict[str, Any]) -> dict[str, np.ndarray]:
        """``{group: [N, n_group, ...]}`` -> ``{agent: [N, ...]}``, e.g. a group's actions for
        :meth:`step`.

        Args:
            per_group: Per group, an array [N, n_group, ...].

        Returns:
            Per agent, its array [N, ...].
        """
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
        """Reset every copy.

        Args:
            seed: Seed of the batch's random generator.
            options: ``{"day_id": k}`` (int or [N]) starts on those split days.

        Returns:
            Per-agent observations [N, obs_dim] and the batched info.
        """
        obs, info = self.core.reset(seed, start_day_option(options))
        return self._split(obs), info

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Advance every copy one step; finished copies reset in the same step.

        Args:
            actions: Per agent, its actions [N, act_dim].

        Returns:
            Per-agent observations, rewards [N] ($), terminations [N], truncations [N], and info.
        """
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
