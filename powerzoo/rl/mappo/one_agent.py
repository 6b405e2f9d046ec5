"""A single-agent task's vector env seen as a one-agent multi-agent vector env (``PPO-L``).

The native trainer (:mod:`powerzoo.rl.mappo`) steps a
:class:`~powerzoo.envs.multi_agent.PowerZooMultiAgentVectorEnv`. :class:`OneAgentVectorEnv` gives
a single-agent task's :class:`~powerzoo.envs.vector_env.PowerZooVectorEnv` the same face: its one
agent is the task's ``spec.agents[0]`` in one group, observations, rewards and flags are
``{agent: [N, ...]}`` views of the batched arrays (no per-env loop), and episodes reset in the
same step (``info["final_obs"]`` per agent and ``info["final_state"]``), as the multi-agent
vector env does. Observation normalisation, reward override and constraint costs are the vector
env's own; ``info`` is its batched ``info`` (``constraint_costs`` [N, n_costs],
``selected_constraint_costs`` [N, k]).

:func:`make_native_env` builds the env the native trainer trains on for any task.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from powerzoo.envs.make import make_env
from powerzoo.tasks import task_spec

__all__ = ["OneAgentVectorEnv", "make_native_env"]


class OneAgentVectorEnv:
    """``env`` (a single-agent vector env, ``autoreset_mode="same_step"``) as one agent.

    Args:
        env: a :class:`~powerzoo.envs.vector_env.PowerZooVectorEnv` built with
            ``autoreset_mode="same_step"``.
    """

    def __init__(self, env: Any) -> None:
        if getattr(env.autoreset_mode, "name", None) != "SAME_STEP":
            raise ValueError("OneAgentVectorEnv needs a vector env with autoreset_mode='same_step'")
        self.env = env  # read by powerzoo.envs.introspect (task, runner, scalers)
        self.task_spec = env.task_spec
        self.num_envs = int(env.num_envs)
        self.agent = self.task_spec.agents[0]
        self.possible_agents = [self.agent]
        self.agents = [self.agent]
        self.agent_groups = {self.task_spec.groups[0].name: [self.agent]}
        self._single_obs, self._single_act = env.single_observation_space, env.single_action_space
        dim = int(np.prod(self._single_obs.shape))
        self.single_state_space = gym.spaces.Box(-np.inf, np.inf, shape=(dim,), dtype=np.float32)
        self.state_space = batch_space(self.single_state_space, self.num_envs)
        self._obs: np.ndarray | None = None

    def single_observation_space(self, agent: str) -> gym.Space:
        """The agent's observation space (one env)."""
        self._check(agent)
        return self._single_obs

    def single_action_space(self, agent: str) -> gym.Space:
        """The agent's action space (one env, the vector env's units)."""
        self._check(agent)
        return self._single_act

    def observation_space(self, agent: str) -> gym.Space:
        self._check(agent)
        return self.env.observation_space

    def action_space(self, agent: str) -> gym.Space:
        self._check(agent)
        return self.env.action_space

    def _check(self, agent: str) -> None:
        if agent != self.agent:
            raise ValueError(f"unknown agent {agent!r}; this env's one agent is {self.agent!r}")

    def state(self) -> np.ndarray:
        """Global state [N, obs_dim]: the one agent's observation."""
        if self._obs is None:
            raise RuntimeError("call reset() first")
        return self._obs.reshape(self.num_envs, -1)

    def group_arrays(self, per_agent: dict[str, Any]) -> dict[str, np.ndarray]:
        """``{agent: [N, ...]}`` -> ``{group: [N, 1, ...]}``."""
        (group,) = self.agent_groups
        return {group: np.expand_dims(np.asarray(per_agent[self.agent]), 1)}

    def agent_arrays(self, per_group: dict[str, Any]) -> dict[str, np.ndarray]:
        """``{group: [N, 1, ...]}`` -> ``{agent: [N, ...]}``."""
        (group,) = self.agent_groups
        values = np.asarray(per_group[group])
        if values.ndim < 2 or values.shape[1] != 1:
            raise ValueError(f"group {group!r} needs an array [N, 1, ...], got {values.shape}")
        return {self.agent: values[:, 0]}

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset every row; ``options`` as the vector env's (``day_id``)."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._obs = obs
        return {self.agent: obs}, info

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """One batched step: ``{agent: actions[N, act_dim]}`` -> the multi-agent 5-tuple."""
        obs, reward, terminated, truncated, info = self.env.step(actions[self.agent])
        done = terminated | truncated
        if done.any():
            final = info["final_obs"]
            info["final_obs"] = {self.agent: final}
            info["final_state"] = np.asarray(final).reshape(self.num_envs, -1)
        self._obs = obs
        a = self.agent
        return {a: obs}, {a: reward}, {a: terminated}, {a: truncated}, info

    def close(self) -> None:
        self.env.close()


def make_native_env(task: str, split: str, num_envs: int, **env_kwargs: Any) -> Any:
    """The batched env of the native trainer: the multi-agent vector env of a multi-agent task,
    or a single-agent task's vector env as one agent (:class:`OneAgentVectorEnv`).

    ``env_kwargs``: ``make_env`` options and task parameters (``normalize``, ``reward``,
    ``obs_mode`` on multi-agent tasks, ``forecast_horizon`` on single-agent ones, ...).
    """
    options = ("normalize", "reward", "obs_mode", "forecast_horizon")
    task_kwargs = {k: v for k, v in env_kwargs.items() if k not in options}
    if task_spec(task, **task_kwargs).agent_mode == "multi":
        return make_env(task, split, framework="pettingzoo", num_envs=num_envs, **env_kwargs)
    env = make_env(task, split, num_envs=num_envs, autoreset_mode="same_step", **env_kwargs)
    return OneAgentVectorEnv(env)
