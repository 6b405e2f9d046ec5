"""Rollout storage and generalised advantage estimation (GAE) over ``[T, N, ...]`` arrays.

Time ``T`` is the rollout length, ``N`` the number of parallel envs; trailing axes are agents
(and selected costs for the cost critic). Every env is its own sequence: GAE runs backwards in
time, vectorised over envs and agents, and an episode boundary inside the rollout cuts it.

Bootstrapping at episode ends (the env auto-resets in the same step):

* **truncated** at the horizon: the episode did not really end, so the target uses the value of
  the final observation (``info["final_obs"]`` / ``info["final_state"]``, not the reset one);
* **terminated**: a real terminal state, value 0.

    delta_t = r_t + gamma * (1 - terminated_t) * V(next_t) - V(s_t)
    A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
    return_t = A_t + V(s_t)

where ``V(next_t)`` is ``V(s_{t+1})`` inside an episode and ``V(final_obs_t)`` where it was
truncated at step ``t``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["compute_gae", "next_values", "GroupRollout", "Rollout"]


def _expand(flags: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Flags [T, N] broadcast against ``like`` [T, N, ...]."""
    return flags.reshape(flags.shape + (1,) * (like.ndim - flags.ndim)).astype(like.dtype)


def next_values(
    values: np.ndarray, last_values: np.ndarray, final_values: np.ndarray, truncated: np.ndarray
) -> np.ndarray:
    """``V(next_t)`` [T, N, ...]: ``values[t + 1]`` (``last_values`` after the rollout), or the
    value of the final observation (``final_values[t]``) where the episode was truncated at
    ``t``."""
    shifted = np.concatenate([values[1:], last_values[None]], axis=0)
    return np.where(_expand(truncated, values) > 0, final_values, shifted)


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_vals: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns (module docstring), both shaped like ``rewards`` [T, N, ...].

    ``terminated`` / ``truncated`` are [T, N] flags of the step's outcome; ``next_vals`` from
    :func:`next_values`.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    next_vals = np.asarray(next_vals, dtype=np.float64)
    alive = 1.0 - _expand(np.asarray(terminated), rewards)
    cont = 1.0 - _expand(np.asarray(terminated) | np.asarray(truncated), rewards)
    deltas = rewards + gamma * alive * next_vals - values
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = deltas[t] + gamma * gae_lambda * cont[t] * running
        advantages[t] = running
    return advantages, advantages + values


@dataclasses.dataclass
class GroupRollout:
    """One agent group's side of a rollout: [T, N, n_agents, ...] arrays (float32 / float64)."""

    obs: np.ndarray  # [T, N, n, obs_dim] actor inputs (no ids)
    actions: np.ndarray  # [T, N, n, act_dim] unclipped Gaussian samples
    log_probs: np.ndarray  # [T, N, n]
    values: np.ndarray  # [T, N, n] task units
    final_values: np.ndarray  # [T, N, n] value of the final observation where truncated
    rewards: np.ndarray  # [T, N, n]
    cost_values: np.ndarray | None = None  # [T, N, n, k]
    final_cost_values: np.ndarray | None = None  # [T, N, n, k]
    advantages: np.ndarray | None = None
    returns: np.ndarray | None = None
    cost_advantages: np.ndarray | None = None
    cost_returns: np.ndarray | None = None

    @classmethod
    def empty(
        cls, t: int, n_envs: int, n_agents: int, obs_dim: int, act_dim: int, n_costs: int
    ) -> GroupRollout:
        shape = (t, n_envs, n_agents)
        costs = n_costs > 0
        return cls(
            obs=np.zeros((*shape, obs_dim), np.float32),
            actions=np.zeros((*shape, act_dim), np.float32),
            log_probs=np.zeros(shape, np.float32),
            values=np.zeros(shape, np.float64),
            final_values=np.zeros(shape, np.float64),
            rewards=np.zeros(shape, np.float64),
            cost_values=np.zeros((*shape, n_costs), np.float64) if costs else None,
            final_cost_values=np.zeros((*shape, n_costs), np.float64) if costs else None,
        )


@dataclasses.dataclass
class Rollout:
    """A whole rollout: each group's arrays plus what all agents share (states, costs, flags)."""

    groups: dict[str, GroupRollout]
    states: np.ndarray | None  # [T, N, state_dim] (centralised critics only)
    costs: np.ndarray | None  # [T, N, k] selected costs of each step
    terminated: np.ndarray  # [T, N] bool
    truncated: np.ndarray  # [T, N] bool

    def finish(
        self,
        last_values: dict[str, np.ndarray],
        last_cost_values: dict[str, np.ndarray] | None,
        gamma: float,
        gae_lambda: float,
        cost_gamma: float,
    ) -> None:
        """Fill every group's advantages / returns (and cost ones) from the values after the
        rollout."""
        for name, g in self.groups.items():
            nv = next_values(g.values, last_values[name], g.final_values, self.truncated)
            g.advantages, g.returns = compute_gae(
                g.rewards, g.values, nv, self.terminated, self.truncated, gamma, gae_lambda
            )
            if (
                g.cost_values is not None
                and last_cost_values is not None
                and self.costs is not None
            ):
                costs = np.broadcast_to(self.costs[:, :, None, :], g.cost_values.shape)
                ncv = next_values(
                    g.cost_values, last_cost_values[name], g.final_cost_values, self.truncated
                )
                g.cost_advantages, g.cost_returns = compute_gae(
                    costs,
                    g.cost_values,
                    ncv,
                    self.terminated,
                    self.truncated,
                    cost_gamma,
                    gae_lambda,
                )
