"""Per-agent counterfactual baseline for MAPPO (``algorithm_kwargs: {counterfactual_samples: K}``).

With a shared (team) reward every agent's advantage carries the noise of every other agent's
exploration; on ``marl_opf`` the 1,000 $/MWh imbalance penalty that the other four generators'
noise causes drowns the 10-40 $/MWh cost difference one generator's own action makes. A
COMA-style baseline removes that noise (continuous actions, Monte-Carlo over the agent's own
policy):

* a **Q-critic** per agent group, ``Q_g(s, a, id_i)`` on the global state, the **team action**
  ``a`` (every agent's action of every group, clipped to [-1, 1], agent-major over the groups:
  :func:`team_actions`) and the agent's one-hot id, regressed on the same return targets as the
  state-value critic (standardised by :class:`QNorm`);
* agent ``i``'s baseline ``b_i = E_{a_i' ~ pi_i(.|o_i)} Q(s, a_i', a_-i, id_i)``, estimated with
  ``K`` samples of ``a_i'`` from the behaviour policy (the actor before the update);
* advantage ``A_i = G_i - b_i``, with ``G_i`` the (GAE) return target. ``b_i`` does not depend on
  ``a_i`` (agents sample independently given the state), so this is an unbiased baseline for any
  Q-critic; the better Q fits, the more of the other agents' noise it cancels.

The baseline is computed with the Q-critic before it is trained on the current rollout (it never
sees the returns it is subtracted from), then the Q-critic trains with the value critic
(:func:`q_critic_rows`, :func:`counterfactual_baseline` and :func:`counterfactual_advantages`
prepare both, in that order, before the PPO epochs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from powerzoo.rl.mappo.networks import Actor, Critic

__all__ = [
    "QNorm",
    "team_actions",
    "own_slot_placement",
    "counterfactual_baseline",
    "counterfactual_advantages",
    "q_critic_rows",
]


class QNorm(nn.Module):
    """Target statistics of a Q-critic that follow the current returns, outputs preserved (PopArt).

    :class:`~powerzoo.rl.mappo.networks.ValueNorm` keeps exact statistics over every target ever
    seen, so after the first, very poor, iterations its scale is many times the spread of today's
    returns and the small action-dependent part that the baseline needs is lost in the fit. Here
    mean and second moment are exponential averages over iterations (weight ``1 - beta`` on the
    newest batch); whenever they move, the last layer of the Q-critic is rescaled so that its
    predictions in task units are unchanged (van Hasselt et al.'s "preserving outputs").
    """

    def __init__(self, beta: float = 0.9) -> None:
        super().__init__()
        self.beta = float(beta)
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("sq", torch.ones((), dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def std(self) -> torch.Tensor:
        return torch.sqrt((self.sq - self.mean.pow(2)).clamp_min(1e-8))

    @torch.no_grad()
    def update(self, targets: torch.Tensor, last: nn.Linear) -> None:
        """Fold a batch of targets (task units) into the statistics; rescale ``last`` to match."""
        x = targets.detach().reshape(-1).to(torch.float64)
        if x.numel() == 0:
            return
        old_mean, old_std = self.mean.clone(), self.std()
        w = 1.0 if self.count == 0 else 1.0 - self.beta
        self.mean.copy_((1 - w) * self.mean + w * x.mean())
        self.sq.copy_((1 - w) * self.sq + w * x.pow(2).mean())
        self.count.add_(1)
        new_std = self.std()
        last.weight.mul_((old_std / new_std).to(last.weight.dtype))
        last.bias.copy_(
            ((old_std * last.bias.to(torch.float64) + old_mean - self.mean) / new_std).to(
                last.bias.dtype
            )
        )

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return ((x.to(torch.float64) - self.mean) / self.std()).to(x.dtype)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x.to(torch.float64) * self.std() + self.mean).to(x.dtype)


def team_actions(actions: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Every group's actions ``[..., n_g, d_g]`` -> the team action ``[..., sum_g n_g d_g]``.

    Groups in mapping order, agents in group order (agent-major), clipped to [-1, 1] as the env
    receives them.
    """
    parts = [
        a.clamp(-1.0, 1.0).reshape(*a.shape[:-2], a.shape[-2] * a.shape[-1])
        for a in actions.values()
    ]
    return torch.cat(parts, dim=-1)


def own_slot_placement(sizes: Sequence[tuple[int, int]], group: int) -> torch.Tensor:
    """``[n, d, J]`` 0/1 map from agent ``i`` of group number ``group``'s own action (d values) to
    its slot in the team action of length ``J`` (``sizes``: ``(n_g, d_g)`` per group, in order)."""
    offset = sum(n * d for n, d in sizes[:group])
    total = sum(n * d for n, d in sizes)
    n, d = sizes[group]
    place = torch.zeros(n, d, total)
    for i in range(n):
        for k in range(d):
            place[i, k, offset + i * d + k] = 1.0
    return place


@torch.no_grad()
def counterfactual_baseline(
    q_critic: nn.Module,
    actor: Actor,
    actor_x: torch.Tensor,
    critic_x: torch.Tensor,
    team: torch.Tensor,
    place: torch.Tensor,
    samples: int,
    chunk: int = 65_536,
) -> torch.Tensor:
    """``b_i`` (the Q-critic's normalised units) for every row of one group.

    Args:
        q_critic: maps ``[critic input, team action]`` rows to one (normalised) value.
        actor: the group's actor (the behaviour policy: call before the update).
        actor_x: actor inputs ``[M, n, obs (+ ids)]``.
        critic_x: critic inputs ``[M, n, state (+ ids)]``.
        team: team actions ``[M, J]`` (:func:`team_actions`).
        place: :func:`own_slot_placement` of the group ``[n, d, J]``.
        samples: ``K`` draws of each agent's own action.
        chunk: rows per Q-critic call (memory bound).

    Returns:
        ``[M, n]``: the mean over ``K`` draws ``a_i' ~ pi_i`` of ``Q(s, a_i', a_-i, id_i)``.
    """
    m, n = actor_x.shape[0], actor_x.shape[1]
    place = place.to(team.dtype)
    dist = actor.distribution(actor_x)  # [M, n, d]
    draws = dist.sample((samples,)).clamp(-1.0, 1.0)  # [K, M, n, d]
    own = place.sum(1)  # [n, J]: 1 on each agent's own slot
    others = team.unsqueeze(1) * (1.0 - own)  # [M, n, J] with the agent's own slot zeroed
    swapped = others.unsqueeze(0) + torch.einsum("kmnd,ndj->kmnj", draws, place)  # [K, M, n, J]
    rows = torch.cat([critic_x.unsqueeze(0).expand(samples, -1, -1, -1), swapped], dim=-1)
    flat = rows.reshape(samples * m * n, -1)
    q = torch.cat([q_critic(flat[s : s + chunk]) for s in range(0, flat.shape[0], chunk)])
    return q.reshape(samples, m, n).mean(0)


def q_critic_rows(
    q_critic: Critic,
    q_norm: QNorm,
    critic_x: torch.Tensor,
    team: torch.Tensor,
    returns: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The Q-critic's training rows of one group (one per agent and env step).

    Folds ``returns`` into ``q_norm`` first, which rescales the Q-critic so its outputs in task
    units are preserved; :func:`counterfactual_baseline` runs after this, on the rescaled critic.

    Args:
        q_critic, q_norm: the group's Q-critic and its target statistics.
        critic_x: critic inputs ``[E, n, state (+ ids)]``, one row per env step.
        team: team actions ``[E, J]`` (:func:`team_actions`).
        returns: return targets ``[E * n, 1]`` (task units, float64; agent fastest).

    Returns:
        Q-critic inputs ``[E * n, state (+ ids) + J]`` and targets ``[E * n, 1]`` (normalised,
        float32).
    """
    e, n = critic_x.shape[0], critic_x.shape[1]
    q_inputs = torch.cat([critic_x, team.unsqueeze(1).expand(e, n, team.shape[-1])], -1)
    q_norm.update(returns, q_critic.net[-1])
    return q_inputs.reshape(e * n, -1), q_norm.normalize(returns).float()


def counterfactual_advantages(
    q_norm: QNorm, returns: torch.Tensor, baseline: torch.Tensor
) -> torch.Tensor:
    """``A_i = G_i - b_i``, float32 ``[E * n]``: ``returns`` ``[E * n, 1]`` (task units, float64)
    less the :func:`counterfactual_baseline` ``[E, n]`` (normalised units, after
    :func:`q_critic_rows`) in task units."""
    return (returns.reshape(-1) - q_norm.denormalize(baseline.double()).reshape(-1)).float()
