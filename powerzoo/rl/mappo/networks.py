"""Networks of the multi-agent PPO family: Gaussian actor, (multi-output) critic, value normaliser.

One actor and one critic exist per agent group; the agents of a group share them and tell
themselves apart by a one-hot id appended to the input (:func:`with_agent_ids`). Actions live in
``[-1, 1]`` (the normalised action space of ``make_env(..., normalize=True)``); the actor's
Gaussian sample is stored unclipped (its log-probability stays exact) and clipped when sent.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["mlp", "Tanh", "Actor", "JointNoise", "Critic", "ValueNorm", "with_agent_ids"]


class _SigmoidTanh(torch.autograd.Function):
    """``tanh(x) = 2 sigmoid(2x) - 1`` forward, ``(1 - y^2) grad`` backward (torch's own tanh
    gradient, on the saved output ``y``)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(x * 2.0).mul_(2.0).sub_(1.0)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable  # no second derivative through the saved y
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


class Tanh(nn.Module):
    """The hyperbolic tangent of the MLPs, computed as ``2 sigmoid(2x) - 1``.

    The same function as :class:`torch.nn.Tanh` within 2e-7 (absolute; outputs in [-1, 1]) and
    with the same gradient formula, but about 2.5x faster on CPU: torch's float32 ``tanh`` kernel
    costs about six times its ``sigmoid``, and was the largest single cost of a PPO update of
    64-wide networks (and of acting). The numpy policy (:mod:`~powerzoo.rl.mappo.policy`) keeps
    ``np.tanh``; the two agree within float rounding.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and x.requires_grad:
            return _SigmoidTanh.apply(x)
        return torch.sigmoid(x * 2.0).mul_(2.0).sub_(1.0)


def mlp(n_in: int, hidden: Sequence[int], n_out: int, out_gain: float) -> nn.Sequential:
    """A tanh MLP (:class:`Tanh`) with orthogonal weights (gain sqrt(2) inside, ``out_gain`` on
    the last layer)."""
    layers: list[nn.Module] = []
    width = n_in
    for h in hidden:
        layer = nn.Linear(width, h)
        nn.init.orthogonal_(layer.weight, gain=float(np.sqrt(2.0)))
        nn.init.zeros_(layer.bias)
        layers += [layer, Tanh()]
        width = h
    last = nn.Linear(width, n_out)
    nn.init.orthogonal_(last.weight, gain=out_gain)
    nn.init.zeros_(last.bias)
    layers.append(last)
    return nn.Sequential(*layers)


def with_agent_ids(x: torch.Tensor, n_agents: int) -> torch.Tensor:
    """Append each agent's one-hot id: ``x`` [..., n_agents, d] -> [..., n_agents, d + n_agents].

    A group of one agent gets no id (nothing to tell apart).
    """
    if n_agents == 1:
        return x
    eye = torch.eye(n_agents, dtype=x.dtype, device=x.device)
    return torch.cat([x, eye.expand(*x.shape[:-1], n_agents)], dim=-1)


class Actor(nn.Module):
    """Diagonal Gaussian policy: mean from an MLP, state-independent log standard deviation."""

    def __init__(self, n_in: int, act_dim: int, hidden: Sequence[int], log_std_init: float) -> None:
        super().__init__()
        self.mean = mlp(n_in, hidden, act_dim, out_gain=0.01)
        self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std_init)))

    def distribution(self, x: torch.Tensor) -> torch.distributions.Normal:
        return torch.distributions.Normal(
            self.mean(x), self.log_std.exp().expand(*x.shape[:-1], -1), validate_args=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Deterministic action (the mean)."""
        return self.mean(x)


class JointNoise(nn.Module):
    """Joint exploration of a whole agent group: one Gaussian over its group action (the agents'
    actions stacked agent-major).

    The means still come from each agent's own observation (decentralised execution); only the
    exploration noise is joint, with covariance ``L L^T`` learned through a Cholesky factor ``L``
    [D, D], ``D = n_agents * act_dim`` (agent-major): a positive diagonal ``exp(log_diag)`` and a
    free strictly-lower part (zero at the start, so training starts from independent noise).
    PPO's gradient shrinks the noise along the directions that cost reward (for a shared
    power-balance penalty, the group's total output) and keeps it along the others, which an
    independent (diagonal) Gaussian cannot do.
    """

    def __init__(self, n_agents: int, act_dim: int, log_std_init: float) -> None:
        super().__init__()
        self.n_agents, self.act_dim = int(n_agents), int(act_dim)
        dim = self.n_agents * self.act_dim
        self.log_diag = nn.Parameter(torch.full((dim,), float(log_std_init)))
        self.lower = nn.Parameter(torch.zeros(dim, dim))

    def scale_tril(self) -> torch.Tensor:
        """The Cholesky factor ``L`` [D, D] of the noise covariance."""
        return torch.tril(self.lower, diagonal=-1) + torch.diag(self.log_diag.exp())

    def distribution(self, mean: torch.Tensor) -> torch.distributions.MultivariateNormal:
        """The joint Gaussian around per-agent means [..., n, act_dim] (its samples: [..., D])."""
        return torch.distributions.MultivariateNormal(
            mean.flatten(-2), scale_tril=self.scale_tril(), validate_args=False
        )

    def marginal_log_std(self) -> torch.Tensor:
        """Each agent's own log standard deviation [n, act_dim] (what one agent sees of the
        noise)."""
        std = self.scale_tril().pow(2).sum(-1).sqrt()
        return std.log().reshape(self.n_agents, self.act_dim)


class Critic(nn.Module):
    """Value head(s): ``n_out`` values per input (1 for rewards, one per selected cost)."""

    def __init__(self, n_in: int, hidden: Sequence[int], n_out: int = 1) -> None:
        super().__init__()
        self.net = mlp(n_in, hidden, n_out, out_gain=1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def forward_shared(self, shared: torch.Tensor, n_agents: int) -> torch.Tensor:
        """Values [..., n_agents, n_out] of every agent of a group on one shared input
        [..., d] (the global state): ``forward(with_agent_ids(shared, n_agents))`` with
        ``shared`` repeated per agent, equal up to float rounding, without building the repeated
        rows: the first layer applies once to ``shared`` and adds each agent's id column."""
        first, d = self.net[0], shared.shape[-1]
        h = F.linear(shared, first.weight[:, :d], first.bias).unsqueeze(-2)
        if n_agents > 1:  # one-hot id i adds column d + i of the first layer's weight
            h = h + first.weight[:, d:].T
        for layer in self.net[1:]:
            h = layer(h)
        return h

    def forward_rows(self, shared: torch.Tensor, rows: torch.Tensor, n_agents: int) -> torch.Tensor:
        """Values [B, n_out] of agent-fastest rows ``rows`` [B] (row ``r``: agent ``r %
        n_agents`` at env step ``r // n_agents``) on the global states ``shared`` [E, d]:
        ``forward(with_agent_ids(...))`` of those rows up to float rounding, with the first
        layer applied once per env step instead of once per agent."""
        first, d = self.net[0], shared.shape[-1]
        h = F.linear(shared, first.weight[:, :d])[rows // n_agents] + first.bias
        if n_agents > 1:
            h = h + first.weight[:, d:].T[rows % n_agents]
        for layer in self.net[1:]:
            h = layer(h)
        return h


class ValueNorm(nn.Module):
    """Running mean / variance of value targets (one per output), exact over every target seen.

    Critics predict ``normalize(target)``; :meth:`denormalize` turns predictions back into task
    units for GAE. The statistics are buffers, so they travel with ``state_dict`` (checkpoints).
    """

    def __init__(self, n_out: int = 1, epsilon: float = 1e-5) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(n_out, dtype=torch.float64))
        self.register_buffer("var", torch.ones(n_out, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.epsilon = epsilon

    @torch.no_grad()
    def update(self, targets: torch.Tensor) -> None:
        """Fold ``targets`` [..., n_out] into the statistics (Chan et al.'s parallel update)."""
        x = targets.detach().reshape(-1, self.mean.shape[0]).to(torch.float64)
        n = float(x.shape[0])
        if n == 0:
            return
        batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total
        self.mean.copy_(self.mean + delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def std(self) -> torch.Tensor:
        return torch.sqrt(self.var.clamp_min(self.epsilon))

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return ((x.to(torch.float64) - self.mean) / self.std()).to(x.dtype)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x.to(torch.float64) * self.std() + self.mean).to(x.dtype)
