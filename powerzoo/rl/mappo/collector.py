"""Rollout collection on the native multi-agent vector env: one batched env call per step.

Each step: the group observations ``{group: [N, n, d]}`` (``env.group_arrays``) and the global
state [N, n_agents * d] (every agent's observation, agent-major: what ``env.state()`` returns)
go through the critics and the actors of every group at once; the actions go back through
``env.agent_arrays`` into one ``env.step``. Rows that end auto-reset inside that step; rows
truncated at the horizon get the value of their final observation
(``info["final_obs"]`` / ``info["final_state"]``) for the GAE bootstrap.

The collector also keeps the running episodes' returns and costs, so every finished episode's
team return (sum over agents, as :func:`powerzoo.benchmarks.evaluation.rollout`), per-agent
returns and summed costs are reported. :meth:`Collector.state` / :meth:`Collector.set_state`
capture everything needed to continue a rollout stream exactly (checkpoints).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np

from powerzoo.envs.introspect import inspect_env
from powerzoo.rl.mappo.algorithm import MultiAgentPPO
from powerzoo.rl.mappo.buffer import GroupRollout, Rollout

__all__ = ["CollectResult", "Collector", "EpisodeBatch", "require_reset"]


@dataclasses.dataclass
class EpisodeBatch:
    """Episodes finished during one rollout (E of them) and the rollout's mean step costs."""

    returns: np.ndarray  # [E] team return (sum over agents)
    agent_returns: np.ndarray  # [E, n_agents]
    costs: np.ndarray  # [E, n_constraints] summed over each episode
    selected_costs: np.ndarray  # [E, k]
    lengths: np.ndarray  # [E]
    mean_step_selected_costs: np.ndarray  # [k] over every step of the rollout

    @classmethod
    def empty(
        cls, n_agents: int, n_constraints: int, mean_step_selected_costs: np.ndarray
    ) -> EpisodeBatch:
        """No finished episode (E = 0), only the rollout's mean step costs ``[k]``."""
        k = mean_step_selected_costs.shape[-1]
        return cls(
            np.zeros(0),
            np.zeros((0, n_agents)),
            np.zeros((0, n_constraints)),
            np.zeros((0, k)),
            np.zeros(0, np.int64),
            mean_step_selected_costs,
        )

    def mean_episode_selected_costs(self, horizon: int) -> np.ndarray:
        """Mean episode cost per selected constraint: over finished episodes, else step rate x
        horizon."""
        if len(self.returns):
            return self.selected_costs.mean(axis=0)
        return self.mean_step_selected_costs * horizon


CollectResult = tuple[Rollout, EpisodeBatch, dict[str, np.ndarray], dict[str, np.ndarray] | None]
"""What a collector's ``collect`` returns: the rollout, the finished episodes, and the values
and cost values (``None`` without cost critics) of every group after the last step."""


def require_reset(obs: Any) -> Any:
    """``obs`` of a collector, or ``RuntimeError`` when it was never reset (``None``)."""
    if obs is None:
        raise RuntimeError("call reset() before collect()")
    return obs


class Collector:
    """Steps ``env`` (a :class:`~powerzoo.envs.multi_agent.PowerZooMultiAgentVectorEnv`) with a
    learner."""

    def __init__(self, env: Any, learner: MultiAgentPPO) -> None:
        self.env, self.learner = env, learner
        self.agents = list(env.possible_agents)
        self.n_envs = int(env.num_envs)
        self.n_constraints = len(env.task_spec.constraint_names)
        self.n_selected = len(env.task_spec.selected_constraints)
        self.obs: dict[str, np.ndarray] | None = None
        self._zero_episodes()

    def _zero_episodes(self) -> None:
        self.ep_agent_returns = np.zeros((self.n_envs, len(self.agents)))
        self.ep_costs = np.zeros((self.n_envs, self.n_constraints))
        self.ep_selected = np.zeros((self.n_envs, self.n_selected))
        self.ep_lengths = np.zeros(self.n_envs, np.int64)

    def reset(self, seed: int | None) -> None:
        """Start every env (seeded) and zero the running episodes."""
        self.obs, _ = self.env.reset(seed=seed)
        self._zero_episodes()

    def global_state(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """[N, n_agents * d]: every agent's observation, agent-major (equals ``env.state()``)."""
        return np.concatenate([np.asarray(obs[a], np.float32) for a in self.agents], axis=1)

    def collect(self, n_steps: int) -> CollectResult:
        """``n_steps`` batched steps: the rollout, the finished episodes, and the values after the
        last step."""
        learner, env = self.learner, self.env
        obs = require_reset(self.obs)
        centralised, k = learner.centralised, len(learner.cost_names)
        groups = {
            name: GroupRollout.empty(n_steps, self.n_envs, g.n, g.obs_dim, g.act_dim, k)
            for name, g in learner.layouts.items()
        }
        states = (
            np.zeros((n_steps, self.n_envs, self._state_dim()), np.float32) if centralised else None
        )
        costs = np.zeros((n_steps, self.n_envs, self.n_selected))
        terminated = np.zeros((n_steps, self.n_envs), bool)
        truncated = np.zeros((n_steps, self.n_envs), bool)
        finished: list[tuple[np.ndarray, ...]] = []
        for t in range(n_steps):
            obs_g = env.group_arrays(obs)
            state = self.global_state(obs) if centralised else None
            values, cost_values = learner.values(obs_g, state)
            actions, log_probs = learner.act(obs_g)
            next_obs, rewards, terms, truncs, info = env.step(
                env.agent_arrays(learner.env_actions(actions))
            )
            term, trunc = np.asarray(terms[self.agents[0]]), np.asarray(truncs[self.agents[0]])
            rewards_g = env.group_arrays(rewards)
            if trunc.any():  # bootstrap values of the final observations (before the auto-reset)
                final_v, final_cv = learner.values(
                    env.group_arrays(info["final_obs"]),
                    info["final_state"] if centralised else None,
                )
            for name, g in groups.items():
                g.obs[t], g.actions[t], g.log_probs[t] = obs_g[name], actions[name], log_probs[name]
                g.values[t], g.rewards[t] = values[name], rewards_g[name]
                if cost_values is not None:
                    g.cost_values[t] = cost_values[name]
                if trunc.any():
                    g.final_values[t] = final_v[name]
                    if final_cv is not None:
                        g.final_cost_values[t] = final_cv[name]
            if states is not None:
                states[t] = state
            selected = np.asarray(info["selected_constraint_costs"], np.float64).reshape(
                self.n_envs, self.n_selected
            )
            costs[t], terminated[t], truncated[t] = selected, term, trunc
            finished += self._track(rewards, info, selected, term | trunc)
            obs = next_obs
        self.obs = obs
        last_v, last_cv = learner.values(
            env.group_arrays(obs), self.global_state(obs) if centralised else None
        )
        rollout = Rollout(groups, states, costs if k else None, terminated, truncated)
        return rollout, self._episodes(finished, costs), last_v, last_cv

    def _state_dim(self) -> int:
        return int(self.env.single_state_space.shape[0])

    def _track(
        self,
        rewards: dict[str, np.ndarray],
        info: dict[str, Any],
        selected: np.ndarray,
        done: np.ndarray,
    ) -> list[tuple[np.ndarray, ...]]:
        """Add one step to the running episodes; return and zero the rows that ended."""
        self.ep_agent_returns += np.stack(
            [np.asarray(rewards[a], np.float64) for a in self.agents], axis=1
        )
        self.ep_costs += np.asarray(info["constraint_costs"], np.float64).reshape(
            self.n_envs, self.n_constraints
        )
        self.ep_selected += selected
        self.ep_lengths += 1
        if not done.any():
            return []
        rows = np.flatnonzero(done)
        out = [
            (
                self.ep_agent_returns[rows].copy(),
                self.ep_costs[rows].copy(),
                self.ep_selected[rows].copy(),
                self.ep_lengths[rows].copy(),
            )
        ]
        for arr in (self.ep_agent_returns, self.ep_costs, self.ep_selected, self.ep_lengths):
            arr[rows] = 0
        return out

    def _episodes(self, finished: list[tuple[np.ndarray, ...]], costs: np.ndarray) -> EpisodeBatch:
        # mean cost per step of each selected constraint (none selected: an empty vector)
        step_costs = (
            costs.reshape(-1, self.n_selected).mean(axis=0) if self.n_selected else np.zeros(0)
        )
        if not finished:
            return EpisodeBatch.empty(len(self.agents), self.n_constraints, step_costs)
        agent_returns, ep_costs, ep_selected, lengths = (
            np.concatenate(x) for x in zip(*finished, strict=True)
        )
        return EpisodeBatch(
            agent_returns.sum(axis=1), agent_returns, ep_costs, ep_selected, lengths, step_costs
        )

    # ---- exact continuation ---------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The env's episodes and random stream, the current observations and the running
        episode sums."""
        runner = inspect_env(self.env).runner
        return {
            "runner_state": copy.deepcopy(runner.state),
            "runner_rng": copy.deepcopy(runner.rng.bit_generator.state),
            "obs": copy.deepcopy(self.obs),
            "ep_agent_returns": self.ep_agent_returns.copy(),
            "ep_costs": self.ep_costs.copy(),
            "ep_selected": self.ep_selected.copy(),
            "ep_lengths": self.ep_lengths.copy(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue exactly where :meth:`state` was taken (same env configuration)."""
        runner = inspect_env(self.env).runner
        runner.state = copy.deepcopy(state["runner_state"])
        runner.rng.bit_generator.state = state["runner_rng"]
        self.obs = copy.deepcopy(state["obs"])
        for key in ("ep_agent_returns", "ep_costs", "ep_selected", "ep_lengths"):
            setattr(self, key, np.asarray(state[key]).copy())
