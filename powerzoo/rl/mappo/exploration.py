"""How an agent group explores: independent noise per agent, or joint exploration.

Two words are used in one sense each across :mod:`powerzoo.rl.mappo`:

* **group action**: the actions of one group's agents stacked agent-major, ``[n * act_dim]``;
* **joint exploration** (``joint_exploration: true``): the group's noise is one Gaussian over its
  group action with a learned full covariance
  (:class:`~powerzoo.rl.mappo.networks.JointNoise`); the means still come from each agent's own
  observation. Without it every agent adds its own independent (diagonal) Gaussian noise.

:class:`GroupPolicy` hides that choice from acting and from the PPO step. Under joint exploration
the PPO step also sees other rows: :func:`per_env_step_rows` turns per-agent rows into one row per
env step of the whole group (the group's log-probability, the mean of its agents' advantages).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import nn

from powerzoo.rl.mappo.networks import Actor, JointNoise
from powerzoo.rl.mappo.ppo import CriticFit, Rows

__all__ = ["GroupPolicy", "per_env_step_rows"]


class GroupPolicy:
    """One group's action distribution: its actor's means with independent or joint noise.

    Args:
        actor: the group's shared actor.
        noise: the group's :class:`JointNoise` under joint exploration, else ``None``.
        n_agents: agents in the group.
    """

    def __init__(self, actor: Actor, noise: JointNoise | None, n_agents: int) -> None:
        self.actor, self.noise, self.n_agents = actor, noise, int(n_agents)

    def parameters(self) -> list[nn.Parameter]:
        """What the actor's optimiser trains (under joint exploration the noise replaces the
        actor's own ``log_std``, frozen then)."""
        own = [q for q in self.actor.parameters() if q.requires_grad]
        return own + (list(self.noise.parameters()) if self.noise is not None else [])

    def distribution(self, x: torch.Tensor) -> torch.distributions.Distribution:
        """The distribution on actor inputs ``x`` [..., n, in].

        Independent noise: a Normal with batch shape [..., n, act_dim]; joint exploration: a
        MultivariateNormal over the group action [..., n * act_dim].
        """
        if self.noise is not None:
            return self.noise.distribution(self.actor.mean(x))
        return self.actor.distribution(x)

    def log_prob(
        self, dist: torch.distributions.Distribution, actions: torch.Tensor
    ) -> torch.Tensor:
        """Log-probability of ``actions`` [..., n, act_dim]: per agent [..., n] (independent
        noise), or of the whole group action [...] (joint exploration)."""
        if self.noise is not None:
            return dist.log_prob(actions.flatten(-2))
        return dist.log_prob(actions).sum(-1)

    def entropy_per_agent(self, dist: torch.distributions.Distribution) -> torch.Tensor:
        """Mean entropy per agent (nats); a joint Gaussian's entropy is shared evenly."""
        if self.noise is not None:
            return dist.entropy().mean() / self.n_agents
        return dist.entropy().sum(-1).mean()

    def log_std(self) -> torch.Tensor:
        """Log standard deviation of exploration ([-1, 1] units): [act_dim] shared by the agents,
        or under joint exploration each agent's marginal one [n, act_dim] (what one agent sees
        of the noise)."""
        if self.noise is not None:
            return self.noise.marginal_log_std()
        return self.actor.log_std

    def sample(self, x: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions [..., n, act_dim] (unclipped, [-1, 1] units) and per-agent log-probs [..., n].

        Under joint exploration the group's log-probability is split evenly over its agents
        (:func:`per_env_step_rows` sums it back).
        """
        dist = self.distribution(x)
        a = dist.mean if deterministic else dist.sample()
        if self.noise is None:
            return a, self.log_prob(dist, a)
        a = a.reshape(*a.shape[:-1], self.n_agents, -1)  # group action -> [..., n, act_dim]
        shared = (self.log_prob(dist, a) / self.n_agents).unsqueeze(-1)
        return a, shared.expand(*a.shape[:-1])


def per_env_step_rows(rows: Rows, n_agents: int) -> Rows:
    """Joint exploration's row shape: one row per env step of the whole group.

    ``rows`` holds one row per agent (agent-fastest, ``R = E * n_agents``); the result has ``E``
    rows whose inputs, actions and critic targets keep an agent axis [E, n, ...], whose old
    log-probability is the group's (the sum of its agents' even shares) and whose advantage is
    the mean of its agents' advantages.
    """
    n = int(n_agents)
    e = rows.advantages.shape[0] // n

    def by_step(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(e, n, -1)

    return Rows(
        actor_x=by_step(rows.actor_x),
        actions=by_step(rows.actions),
        old_log_probs=rows.old_log_probs.reshape(e, n).sum(-1),
        advantages=rows.advantages.reshape(e, n).mean(-1),
        value=_by_step_fit(rows.value, by_step),
        extra_fits=[_by_step_fit(f, by_step) for f in rows.extra_fits],
    )


def _by_step_fit(fit: CriticFit, by_step: Callable[[torch.Tensor], torch.Tensor]) -> CriticFit:
    if fit.agent_rows is not None:  # one global state per env step already: read once per row
        return dataclasses.replace(
            fit, targets=by_step(fit.targets), agent_rows=None, shared_agents=fit.agent_rows
        )
    return dataclasses.replace(fit, inputs=by_step(fit.inputs), targets=by_step(fit.targets))
