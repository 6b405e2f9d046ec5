"""The PPO update of one agent group: epochs of mini-batches, and the step on each mini-batch.

:func:`ppo_step` is the plain PPO step: probability ratio, clipped surrogate, entropy bonus, one
actor optimiser step with a gradient-norm clip; then the value loss (and any other critic's)
with one step of each critic optimiser. No MAPPO variant changes it. A variant only changes what
the step is fed, prepared once per iteration, before the epochs
(:meth:`~powerzoo.rl.mappo.algorithm.MultiAgentPPO.update`), as a :class:`Rows`:

* ``advantages``: the GAE advantages, or the counterfactual ones
  (:mod:`~powerzoo.rl.mappo.counterfactual`); standardised, and with ``-L`` mixed with the cost
  advantages through the Lagrange multipliers (:mod:`~powerzoo.rl.mappo.lagrangian`);
* the row shape: one row per agent, or under joint exploration one row per env step of the whole
  group (:func:`~powerzoo.rl.mappo.exploration.per_env_step_rows`);
* ``extra_fits``: critics regressed alongside the reward critic: the cost critic (``-L``), the
  Q-critic of the counterfactual baseline.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import torch
from torch import nn

from powerzoo.rl.mappo.hparams import MAPPOParams

__all__ = ["CriticFit", "Rows", "standardise", "ppo_step", "ppo_epochs"]


@dataclasses.dataclass
class CriticFit:
    """A critic regressed on fixed targets during the epochs (half mean squared error).

    Attributes:
        stat: name of its mean loss in the update's statistics.
        net: the critic.
        inputs: its inputs, one per row [R, ...].
        targets: its targets (normalised units), one per row [R, ..., n_out].
        optim: its optimiser (the reward and the cost critic of a group share one).
        max_grad_norm: gradient-norm clip of ``net`` (``None``: no clip).
        shared_agents: ``n`` when each row's inputs are one input shared by the ``n`` agents of
            the row (the global state [R, d], targets [R, n, n_out]): ``net`` is a
            :class:`~powerzoo.rl.mappo.networks.Critic` and predicts through
            ``forward_shared``; ``None``: ``net(inputs)``.
        agent_rows: ``n`` when the rows are agent-fastest (row ``r``: agent ``r % n`` at env
            step ``r // n``, targets [R, n_out]) and ``inputs`` holds one global state per env
            step [R / n, d]: ``net`` predicts through ``forward_rows`` (a centralised critic
            without the state repeated per agent); ``None``: one input per row.
    """

    stat: str
    net: nn.Module
    inputs: torch.Tensor
    targets: torch.Tensor
    optim: torch.optim.Optimizer
    max_grad_norm: float | None
    shared_agents: int | None = None
    agent_rows: int | None = None

    def loss(self, idx: torch.Tensor) -> torch.Tensor:
        """The half mean squared error on rows ``idx``."""
        if self.agent_rows is not None:
            pred = self.net.forward_rows(self.inputs, idx, self.agent_rows)
        elif self.shared_agents is not None:
            pred = self.net.forward_shared(self.inputs[idx], self.shared_agents)
        else:
            pred = self.net(self.inputs[idx])
        return 0.5 * (pred - self.targets[idx]).pow(2).mean()


@dataclasses.dataclass
class Rows:
    """What the PPO epochs of one group train on; row ``r`` of every tensor is one sample.

    Attributes:
        actor_x: actor inputs [R, in], or [R, n, in] with one row per env step.
        actions: the sampled actions [R, act_dim] or [R, n, act_dim].
        old_log_probs: their log-probabilities under the behaviour policy [R].
        advantages: the advantages the surrogate weighs the ratios with [R].
        value: the reward critic's regression (its ``stat``: ``"value_loss"``).
        extra_fits: other critics trained in the same steps (cost critic, Q-critic).
    """

    actor_x: torch.Tensor
    actions: torch.Tensor
    old_log_probs: torch.Tensor
    advantages: torch.Tensor
    value: CriticFit
    extra_fits: list[CriticFit] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return int(self.advantages.shape[0])


class Policy(Protocol):
    """What the step needs of a group's policy (:class:`~.exploration.GroupPolicy`)."""

    def parameters(self) -> list[nn.Parameter]: ...

    def distribution(self, x: torch.Tensor) -> torch.distributions.Distribution: ...

    def log_prob(
        self, dist: torch.distributions.Distribution, actions: torch.Tensor
    ) -> torch.Tensor: ...

    def entropy_per_agent(self, dist: torch.distributions.Distribution) -> torch.Tensor: ...


def standardise(x: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit std over the batch axis (0); per column when ``x`` has two axes."""
    return (x - x.mean(0)) / (x.std(0) + 1e-8) if x.shape[0] > 1 else x - x.mean(0)


def ppo_step(
    policy: Policy,
    actor_optim: torch.optim.Optimizer,
    rows: Rows,
    idx: torch.Tensor,
    p: MAPPOParams,
) -> dict[str, float]:
    """One PPO step on the mini-batch ``idx`` of ``rows``; returns its losses and diagnostics."""
    # policy: clipped surrogate objective with an entropy bonus
    dist = policy.distribution(rows.actor_x[idx])
    log_ratio = policy.log_prob(dist, rows.actions[idx]) - rows.old_log_probs[idx]
    ratio = log_ratio.exp()
    adv = rows.advantages[idx]
    clipped = ratio.clamp(1 - p.clip_range, 1 + p.clip_range)
    policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
    entropy = policy.entropy_per_agent(dist)
    actor_optim.zero_grad()
    (policy_loss - p.ent_coef * entropy).backward()
    nn.utils.clip_grad_norm_(policy.parameters(), p.max_grad_norm)
    actor_optim.step()

    # critics: the value loss, and the extra critics' losses (cost critic, Q-critic)
    fits = [rows.value, *rows.extra_fits]
    losses = {fit.stat: fit.loss(idx) for fit in fits}
    optims = {id(fit.optim): fit.optim for fit in fits}.values()  # each once (some are shared)
    for optim in optims:
        optim.zero_grad()
    for loss in losses.values():  # separate graphs: the gradients of one summed loss
        loss.backward()
    for fit in fits:
        if fit.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(fit.net.parameters(), fit.max_grad_norm)
    for optim in optims:
        optim.step()

    with torch.no_grad():
        stats = {
            "policy_loss": policy_loss.item(),
            "value_loss": losses["value_loss"].item(),
            "entropy": entropy.item(),
            "approx_kl": ((ratio - 1) - log_ratio).mean().item(),
            "clip_fraction": ((ratio - 1).abs() > p.clip_range).float().mean().item(),
        }
        stats.update({stat: loss.item() for stat, loss in losses.items()})  # extra critics'
    return stats


def ppo_epochs(
    policy: Policy, actor_optim: torch.optim.Optimizer, rows: Rows, p: MAPPOParams
) -> dict[str, float]:
    """``n_epochs`` passes over ``rows`` in ``n_minibatches`` random mini-batches each; returns
    the mean of every statistic of :func:`ppo_step` over all steps."""
    size = max(1, len(rows) // p.n_minibatches)
    sums: dict[str, float] = {}
    count = 0
    for _ in range(p.n_epochs):
        order = torch.randperm(len(rows), device=rows.advantages.device)
        for start in range(0, size * p.n_minibatches, size):
            batch = ppo_step(policy, actor_optim, rows, order[start : start + size], p)
            for key, value in batch.items():
                sums[key] = sums.get(key, 0.0) + value
            count += 1
    return {key: value / max(count, 1) for key, value in sums.items()}
