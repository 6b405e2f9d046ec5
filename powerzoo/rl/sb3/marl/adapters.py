"""Multi-agent envs as SB3 sees them: one agent with the others frozen, or every agent as one env.

* :class:`SingleAgentView` shows one agent of a PettingZoo parallel env as a Gymnasium env; the
  other agents act with fixed policies (the independent learners' env).
* :class:`AgentsAsVecEnv` turns the native batched multi-agent vector env into an SB3 ``VecEnv``
  of ``N * n_agents`` single-agent envs with a one-hot agent id appended to each observation (the
  shared policy's env; :class:`~powerzoo.rl.sb3.policy.SharedPolicy` acts with the same layout).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from powerzoo.benchmarks.sb3_policy import predict_action
from powerzoo.rl.sb3.native_vec_env import BatchedVecEnv

if TYPE_CHECKING:
    from pettingzoo import ParallelEnv

    from powerzoo.envs.multi_agent import PowerZooMultiAgentVectorEnv

__all__ = ["SingleAgentView", "AgentsAsVecEnv"]


def _hold_action(space: gym.Space) -> Any:
    """Default action of an agent without a policy: mid-range of a Box (0 in normalised envs)."""
    if isinstance(space, gym.spaces.Box):
        low, high = space.low.astype(np.float64), space.high.astype(np.float64)
        bounded = np.isfinite(low) & np.isfinite(high)
        mid = np.where(bounded, (low + high) / 2.0, np.clip(0.0, low, high))
        return mid.astype(space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        return np.int64(space.start)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.asarray(space.start, dtype=space.dtype).copy()
    if isinstance(space, gym.spaces.MultiBinary):
        return np.zeros(space.shape, dtype=space.dtype)
    raise TypeError(
        f"no default action for a {type(space).__name__} space; give that agent a policy"
    )


def _check_other(agent: str, policy: Any) -> None:
    if policy is not None and not (callable(getattr(policy, "predict", None)) or callable(policy)):
        raise TypeError(
            f"policy of {agent!r} must have .predict(obs, deterministic=True) (an SB3 model), be a "
            "callable obs -> action, or be None (hold the default action); "
            f"got {type(policy).__name__}"
        )


class SingleAgentView(gym.Env):
    """One agent of a PettingZoo parallel env as a Gymnasium env; the other agents act by
    ``others``.

    Args:
        env: a PettingZoo ``ParallelEnv`` (``make_env(task, framework="pettingzoo")``).
        agent: the agent this view exposes (its spaces, reward, termination and info).
        others: ``{agent: policy}`` for the other agents. A policy is an object with
            ``predict(obs, deterministic=True) -> (action, state)`` (an SB3 model), a callable
            ``obs -> action``, or ``None``: the agent holds a fixed default action, the middle of
            its Box (0 in a ``normalize=True`` env; 0 clipped into range where a bound is
            infinite; the lowest value of a discrete space). Agents left out are ``None``.

    The other policies are called on the observation each agent received at the previous step,
    deterministically. Update them with :meth:`set_others` (SB3 models passed here are held by
    reference, so a model that keeps training is seen at its current weights).
    """

    metadata = {"render_modes": []}

    def __init__(
        self, env: ParallelEnv, agent: str, others: Mapping[str, Any] | None = None
    ) -> None:
        agents = list(env.possible_agents)
        if agent not in agents:
            raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(agents)}")
        self.env, self.agent, self.possible_agents = env, agent, agents
        self.observation_space = env.observation_space(agent)
        self.action_space = env.action_space(agent)
        self._defaults = {a: _hold_action(env.action_space(a)) for a in agents if a != agent}
        self.others: dict[str, Any] = {}
        self._last_obs: dict[str, Any] | None = None
        self.set_others(others)

    def set_others(self, others: Mapping[str, Any] | None) -> None:
        """Replace the other agents' policies (``None`` or a missing agent: hold the default
        action)."""
        others = dict(others or {})
        if self.agent in others:
            raise ValueError(f"others must not include the view's own agent {self.agent!r}")
        unknown = set(others) - set(self.possible_agents)
        if unknown:
            raise ValueError(
                f"unknown agent(s) {sorted(unknown)} in others; "
                f"agents: {', '.join(self.possible_agents)}"
            )
        for a, policy in others.items():
            _check_other(a, policy)
        self.others = {a: others.get(a) for a in self._defaults}

    def _other_action(self, agent: str, obs: Any) -> Any:
        policy = self.others.get(agent)
        if policy is None:
            return self._defaults[agent]
        if callable(getattr(policy, "predict", None)):
            action = predict_action(policy, obs, deterministic=True)
        else:
            action = policy(obs)
        return action

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        obs, infos = self.env.reset(seed=seed, options=options)
        self._last_obs = obs
        return obs[self.agent], infos.get(self.agent, {})

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._last_obs is None or self.agent not in self.env.agents:
            raise RuntimeError("episode is over (or not started); call reset()")
        actions = {
            a: self._other_action(a, self._last_obs[a]) for a in self.env.agents if a != self.agent
        }
        actions[self.agent] = action
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        self._last_obs = obs
        a = self.agent
        return obs[a], float(rewards[a]), bool(terms[a]), bool(truncs[a]), infos.get(a, {})

    def close(self) -> None:
        self.env.close()


class AgentsAsVecEnv(BatchedVecEnv):
    """SB3 ``VecEnv`` of ``N * n_agents`` single-agent envs over a native multi-agent vector env.

    Env ``k`` is agent ``k % n_agents`` in copy ``k // n_agents`` of ``env``
    (:class:`~powerzoo.envs.multi_agent.PowerZooMultiAgentVectorEnv`, ``make_env(task,
    num_envs=N)``). Its observation is the agent's observation followed by the one-hot id of the
    agent (``n_agents`` entries); its reward is the agent's reward. One SB3 step is one batched
    native step of all agents in all copies. Episodes auto-reset in that step, as SB3 expects:
    ``dones[k]`` is set, the returned observation is the new episode's first one, and
    ``infos[k]["terminal_observation"]`` holds the last one; ``infos[k]["TimeLimit.truncated"]`` is
    true when the episode was cut by the time limit rather than terminated.

    All agents need the same action space (``normalize=True`` makes them [-1, 1]) and
    observations of equal size; the observation space's bounds are the union of the agents'.
    The copies share one random stream, so ``seed()`` / ``reset()`` seed the whole batch with
    env 0's seed.
    """

    def __init__(self, env: PowerZooMultiAgentVectorEnv) -> None:
        self.env = env
        self.agents = list(env.possible_agents)
        self.n_agents, self.n_copies = len(self.agents), int(env.num_envs)
        obs_spaces = [env.single_observation_space(a) for a in self.agents]
        act_spaces = [env.single_action_space(a) for a in self.agents]
        if not all(isinstance(s, gym.spaces.Box) for s in obs_spaces + act_spaces):
            raise ValueError("AgentsAsVecEnv needs Box observation and action spaces")
        shapes = {s.shape for s in obs_spaces}
        if len(shapes) != 1 or len(obs_spaces[0].shape) != 1:
            raise ValueError(
                "a shared policy needs 1-D observations of equal size for all agents, "
                f"got {sorted(shapes)}; "
                "use an obs_mode with equal sizes or train_independent_learners"
            )
        first = act_spaces[0]
        if not all(
            s.shape == first.shape
            and np.array_equal(s.low, first.low)
            and np.array_equal(s.high, first.high)
            for s in act_spaces
        ):
            raise ValueError(
                "a shared policy needs the same action space for every agent; build the env with "
                "normalize=True (all actions in [-1, 1]) or use train_independent_learners"
            )
        eye = np.eye(self.n_agents, dtype=np.float32)
        low = np.concatenate([np.min([s.low for s in obs_spaces], axis=0), np.zeros(self.n_agents)])
        high = np.concatenate(
            [np.max([s.high for s in obs_spaces], axis=0), np.ones(self.n_agents)]
        )
        observation_space = gym.spaces.Box(
            low.astype(np.float32), high.astype(np.float32), dtype=np.float32
        )
        self._ids = np.broadcast_to(eye, (self.n_copies, self.n_agents, self.n_agents))
        self._actions: np.ndarray | None = None
        super().__init__(self.n_copies * self.n_agents, observation_space, first)

    def _flat_obs(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """``{agent: [N, d]}`` -> ``[N * n_agents, d + n_agents]`` with the one-hot ids appended."""
        stacked = np.stack([np.asarray(obs[a], dtype=np.float32) for a in self.agents], axis=1)
        return np.concatenate([stacked, self._ids], axis=2).reshape(self.num_envs, -1)

    def _per_env(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """``{agent: [N]}`` -> ``[N * n_agents]`` in env order."""
        return np.stack([np.asarray(values[a]) for a in self.agents], axis=1).reshape(-1)

    def reset(self) -> np.ndarray:
        seed = self._seeds[0]
        options = self._options[0] or None
        obs, _ = self.env.reset(seed=seed, options=options)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return self._flat_obs(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_async must be called before step_wait")
        shape = (self.n_copies, self.n_agents, *self.action_space.shape)
        actions = self._actions.reshape(shape)
        self._actions = None
        obs, rewards, terms, truncs, info = self.env.step(
            {a: actions[:, i] for i, a in enumerate(self.agents)}
        )
        terminated, truncated = (
            self._per_env(terms).astype(bool),
            self._per_env(truncs).astype(bool),
        )
        dones = terminated | truncated
        timeout = truncated & ~terminated
        infos: list[dict[str, Any]] = [{"TimeLimit.truncated": bool(t)} for t in timeout]
        if dones.any():
            final = self._flat_obs(info["final_obs"])
            for k in np.flatnonzero(dones):
                infos[k]["terminal_observation"] = final[k]
        return self._flat_obs(obs), self._per_env(rewards).astype(np.float32), dones, infos
