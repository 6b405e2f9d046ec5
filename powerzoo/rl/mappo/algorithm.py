"""The learner of MAPPO / IPPO (and their Lagrangian variants): networks per group, acting, PPO update.

Read top to bottom:

1. **Networks** (one set per agent group; agents of a group share them, with a one-hot id):
   an actor on the agent's observation; a reward critic on the global state (MAPPO) or on the
   agent's observation (IPPO); with ``-L`` a cost critic with one output per selected cost.
2. **Acting**: :meth:`MultiAgentPPO.act` samples Gaussian actions for a whole batch of envs,
   :meth:`MultiAgentPPO.values` evaluates the critics (task units, de-normalised).
3. **Multipliers** (``-L``): :meth:`MultiAgentPPO.update_multipliers`, once per iteration before
   the policy epochs, ``lambda_j <- clip(lambda_j + lr * (J_c_j - d_j), 0, lambda_max)`` where
   ``J_c_j`` is the mean episode cost and ``d_j`` the task's per-episode threshold.
4. **Update**: :meth:`MultiAgentPPO.update`: per group, standardised advantages (reward, and cost
   ones combined as ``(A_r - sum_j lambda_j A_c_j) / (1 + sum_j lambda_j)``), ``n_epochs`` passes
   of ``n_minibatches`` mini-batches of the PPO clipped objective and an MSE value loss on
   value-normalised targets. With ``counterfactual_samples > 0`` (MAPPO only) the reward
   advantage is the return minus a per-agent counterfactual baseline from a Q-critic
   (:mod:`~powerzoo.rl.mappo.counterfactual`), which trains alongside the value critic.
   With ``joint_exploration`` each group explores with one Gaussian over its joint action
   (:class:`~powerzoo.rl.mappo.networks.JointNoise`, a learned full covariance around the
   agents' own means): a rollout row is then one env step of the whole group, its PPO ratio the
   joint one and its advantage the mean of the agents' advantages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from powerzoo.rl.mappo.buffer import Rollout
from powerzoo.rl.mappo.counterfactual import (
    QNorm,
    counterfactual_baseline,
    joint_actions,
    own_slot_placement,
)
from powerzoo.rl.mappo.hparams import MAPPOParams
from powerzoo.rl.mappo.networks import Actor, Critic, JointNoise, ValueNorm, with_agent_ids
from powerzoo.rl.mappo.policy import GroupActor, MAPPOPolicy

__all__ = ["GroupLayout", "MultiAgentPPO"]


class GroupLayout:
    """What the learner needs to know about one agent group: agents, sizes, action bounds [n, act_dim]."""

    def __init__(
        self, agents: Sequence[str], obs_dim: int, act_dim: int, low: np.ndarray, high: np.ndarray
    ) -> None:
        self.agents, self.n = list(agents), len(agents)
        self.obs_dim, self.act_dim = int(obs_dim), int(act_dim)
        self.low = np.asarray(low, np.float32).reshape(self.n, self.act_dim)
        self.high = np.asarray(high, np.float32).reshape(self.n, self.act_dim)


class MultiAgentPPO(nn.Module):
    """Actors, critics, value normalisers, optimisers and Lagrange multipliers of one run.

    Args:
        groups: ``{group: GroupLayout}`` in the env's agent order.
        state_dim: length of the global state (used by centralised critics).
        params: hyperparameters.
        centralised: critics on the global state (MAPPO) instead of the agent's observation (IPPO).
        cost_names: the selected costs (empty: no cost critic, no multipliers).
        thresholds: per-episode budget of each selected cost (same order, physical units).
    """

    def __init__(
        self,
        groups: Mapping[str, GroupLayout],
        state_dim: int,
        params: MAPPOParams,
        centralised: bool,
        cost_names: Sequence[str] = (),
        thresholds: Sequence[float] = (),
    ) -> None:
        super().__init__()
        self.layouts = dict(groups)
        self.params, self.centralised = params, bool(centralised)
        self.cost_names = tuple(cost_names)
        self.thresholds = np.asarray(thresholds, np.float64).reshape(len(self.cost_names))
        self.device = torch.device(params.device)
        k, hidden = len(self.cost_names), params.hidden_sizes
        self.actors, self.critics = nn.ModuleDict(), nn.ModuleDict()
        self.cost_critics, self.value_norms, self.cost_norms = (
            nn.ModuleDict(),
            nn.ModuleDict(),
            nn.ModuleDict(),
        )
        for name, g in self.layouts.items():
            ids = g.n if g.n > 1 else 0
            self.actors[name] = Actor(g.obs_dim + ids, g.act_dim, hidden, params.log_std_init)
            critic_in = (state_dim if self.centralised else g.obs_dim) + ids
            self.critics[name] = Critic(critic_in, hidden, 1)
            self.value_norms[name] = ValueNorm(1)
        if k:  # drawn from a side stream: actors, critics and sampling match the plain variant's
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(torch.initial_seed() + 7919)
                for name, g in self.layouts.items():
                    ids = g.n if g.n > 1 else 0
                    critic_in = (state_dim if self.centralised else g.obs_dim) + ids
                    self.cost_critics[name] = Critic(critic_in, hidden, k)
                    self.cost_norms[name] = ValueNorm(k)
        self.q_critics, self.q_norms = (
            nn.ModuleDict(),
            nn.ModuleDict(),
        )  # counterfactual baseline only
        self.counterfactual = params.counterfactual_samples > 0
        if self.counterfactual:
            if not self.centralised:
                raise ValueError(
                    "counterfactual_samples needs a centralised critic (MAPPO or MAPPO-L), not IPPO"
                )
            sizes = [(g.n, g.act_dim) for g in self.layouts.values()]
            with torch.random.fork_rng(devices=[]):  # a side stream, as the cost critics
                torch.manual_seed(torch.initial_seed() + 104729)
                for name, g in self.layouts.items():
                    ids = g.n if g.n > 1 else 0
                    self.q_critics[name] = Critic(
                        state_dim + ids + sum(n * d for n, d in sizes), hidden, 1
                    )
                    self.q_norms[name] = QNorm()
            self._places = {
                name: own_slot_placement(sizes, i).to(self.device)
                for i, name in enumerate(self.layouts)
            }
        self.joint_noise = (
            nn.ModuleDict()
        )  # joint_exploration only: one correlated Gaussian per group
        if params.joint_exploration:
            for name, g in self.layouts.items():
                self.joint_noise[name] = JointNoise(g.n, g.act_dim, params.log_std_init)
                self.actors[name].log_std.requires_grad_(False)  # the joint noise replaces it
        self.to(self.device)
        self.actor_optims = {
            n: torch.optim.Adam(self._actor_parameters(n), lr=params.learning_rate, eps=1e-5)
            for n in self.layouts
        }
        self.critic_optims = {
            n: torch.optim.Adam(
                list(self.critics[n].parameters())
                + (list(self.cost_critics[n].parameters()) if k else []),
                lr=params.critic_learning_rate,
                eps=1e-5,
            )
            for n in self.layouts
        }
        self.q_optims = {
            n: torch.optim.Adam(
                self.q_critics[n].parameters(), lr=params.counterfactual_learning_rate, eps=1e-5
            )
            for n in self.q_critics
        }
        self.multipliers = np.full(k, params.lambda_init, np.float64)

    @property
    def lagrangian(self) -> bool:
        return bool(self.cost_names)

    @property
    def joint(self) -> bool:
        """Whether each group explores with one joint Gaussian (``joint_exploration``)."""
        return len(self.joint_noise) > 0

    def _actor_parameters(self, name: str) -> list[nn.Parameter]:
        params = [q for q in self.actors[name].parameters() if q.requires_grad]
        return params + (
            list(self.joint_noise[name].parameters()) if name in self.joint_noise else []
        )

    def policy_distribution(self, name: str, x: torch.Tensor) -> torch.distributions.Distribution:
        """Group ``name``'s action distribution on actor inputs ``x`` [..., n, in].

        Independent noise: a Normal with batch shape [..., n, act_dim]; joint exploration: a
        MultivariateNormal over the group's flattened joint action [..., n * act_dim].
        """
        if name in self.joint_noise:
            return self.joint_noise[name].distribution(self.actors[name].mean(x))
        return self.actors[name].distribution(x)

    def group_log_prob(
        self, name: str, dist: torch.distributions.Distribution, actions: torch.Tensor
    ) -> torch.Tensor:
        """Log-probability of ``actions`` [..., n, act_dim]: per agent [..., n], or the joint one [...]."""
        if name in self.joint_noise:
            return dist.log_prob(actions.flatten(-2))
        return dist.log_prob(actions).sum(-1)

    def action_std(self, name: str) -> torch.Tensor:
        """Each agent's standard deviation of exploration [n or 1, act_dim] ([-1, 1] units)."""
        if name in self.joint_noise:
            return self.joint_noise[name].marginal_log_std().exp()
        return self.actors[name].log_std.exp().unsqueeze(0)

    # ---- inputs ----------------------------------------------------------------------------------
    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x, np.float32), device=self.device)

    def actor_input(self, name: str, obs: torch.Tensor) -> torch.Tensor:
        """[..., n, obs_dim] -> [..., n, obs_dim (+ n ids)]."""
        return with_agent_ids(obs, self.layouts[name].n)

    def critic_input(
        self, name: str, obs: torch.Tensor, state: torch.Tensor | None
    ) -> torch.Tensor:
        """Global state (MAPPO, broadcast to every agent) or own observation (IPPO), plus the agent id."""
        n = self.layouts[name].n
        if self.centralised:
            if state is None:
                raise ValueError("a centralised critic needs the global state")
            x = state.unsqueeze(-2).expand(*state.shape[:-1], n, state.shape[-1])
        else:
            x = obs
        return with_agent_ids(x, n)

    # ---- acting ----------------------------------------------------------------------------------
    @torch.no_grad()
    def act(
        self, obs: Mapping[str, np.ndarray], deterministic: bool = False
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Actions ``{group: [N, n, act_dim]}`` (unclipped samples, [-1, 1] units) and their log-probabilities."""
        actions, log_probs = {}, {}
        for name, g in self.layouts.items():
            x = self.actor_input(name, self._tensor(obs[name]))
            dist = self.policy_distribution(name, x)
            a = dist.mean if deterministic else dist.sample()
            if name in self.joint_noise:  # [N, n * act_dim] -> [N, n, act_dim]; the joint log-prob
                a = a.reshape(*a.shape[:-1], g.n, g.act_dim)  # is split evenly over the agents
                logp = (
                    (self.group_log_prob(name, dist, a) / g.n).unsqueeze(-1).expand(*a.shape[:-1])
                )
            else:
                logp = self.group_log_prob(name, dist, a)
            actions[name] = a.cpu().numpy()
            log_probs[name] = logp.cpu().numpy()
        return actions, log_probs

    def env_actions(self, actions: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Samples -> actions the env takes: clipped to [-1, 1], mapped onto each agent's bounds."""
        out = {}
        for name, g in self.layouts.items():
            unit = np.clip(actions[name], -1.0, 1.0)
            out[name] = g.low + 0.5 * (unit + 1.0) * (g.high - g.low)
        return out

    @torch.no_grad()
    def values(
        self, obs: Mapping[str, np.ndarray], state: np.ndarray | None
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
        """Reward values ``{group: [N, n]}`` and cost values ``{group: [N, n, k]}`` (task units)."""
        st = None if state is None or not self.centralised else self._tensor(state)
        values, costs = {}, ({} if self.lagrangian else None)
        for name in self.layouts:
            x = self.critic_input(name, self._tensor(obs[name]), st)
            values[name] = (
                self.value_norms[name]
                .denormalize(self.critics[name](x))
                .squeeze(-1)
                .double()
                .cpu()
                .numpy()
            )
            if costs is not None:
                costs[name] = (
                    self.cost_norms[name]
                    .denormalize(self.cost_critics[name](x))
                    .double()
                    .cpu()
                    .numpy()
                )
        return values, costs

    # ---- multipliers -----------------------------------------------------------------------------
    def update_multipliers(self, mean_episode_costs: np.ndarray | None) -> np.ndarray:
        """One projected gradient step per selected cost against its threshold; returns the multipliers.

        ``None`` (no cost estimate this iteration) leaves them unchanged.
        """
        if not self.lagrangian or mean_episode_costs is None:
            return self.multipliers.copy()
        p = self.params
        step = self.multipliers + p.lambda_lr * (
            np.asarray(mean_episode_costs, np.float64) - self.thresholds
        )
        self.multipliers = np.clip(step, 0.0, np.inf if p.lambda_max is None else p.lambda_max)
        return self.multipliers.copy()

    def set_progress(self, done_fraction: float) -> None:
        """Apply the learning-rate schedule at ``done_fraction`` (in [0, 1]) of the run's budget."""
        p = self.params
        scale = 1.0 if p.lr_schedule == "constant" else max(1.0 - float(done_fraction), 0.0)
        for optims, lr in (
            (self.actor_optims, p.learning_rate),
            (self.critic_optims, p.critic_learning_rate),
        ):
            for optim in optims.values():
                for group in optim.param_groups:
                    group["lr"] = lr * scale

    # ---- update ----------------------------------------------------------------------------------
    @staticmethod
    def _standardise(x: torch.Tensor) -> torch.Tensor:
        """Zero mean, unit std over the batch axis (0); per column when ``x`` has two axes."""
        return (x - x.mean(0)) / (x.std(0) + 1e-8) if x.shape[0] > 1 else x - x.mean(0)

    def combined_advantages(self, adv: torch.Tensor, cost_adv: torch.Tensor | None) -> torch.Tensor:
        """Standardised reward advantages, with ``-L`` combined with the cost ones through the multipliers."""
        p = self.params
        a = self._standardise(adv) if p.normalize_advantage else adv
        if cost_adv is None or not self.lagrangian:
            return a
        c = self._standardise(cost_adv) if p.normalize_advantage else cost_adv
        lam = torch.as_tensor(self.multipliers, dtype=a.dtype, device=a.device)
        return (a - (c * lam).sum(-1)) / (1.0 + lam.sum())

    def update(self, rollout: Rollout) -> dict[str, float]:
        """PPO epochs on every group; returns mean losses and diagnostics (``<group>/<stat>``)."""
        p, stats = self.params, {}
        states = (
            None if rollout.states is None or not self.centralised else self._tensor(rollout.states)
        )
        joint = None  # [T, N, J] every agent's clipped action (counterfactual baseline)
        if self.counterfactual:
            joint = joint_actions(
                {n: self._tensor(rollout.groups[n].actions) for n in self.layouts}
            )
        for name, g in rollout.groups.items():
            t, n_envs, n = g.rewards.shape
            m = t * n_envs * n
            obs = self._tensor(g.obs)
            x = self.actor_input(name, obs).reshape(m, -1)
            cx = self.critic_input(name, obs, states).reshape(m, -1)
            actions = self._tensor(g.actions).reshape(m, -1)
            old_logp = self._tensor(g.log_probs).reshape(m)
            returns = torch.as_tensor(g.returns, device=self.device).reshape(m, 1)
            adv = torch.as_tensor(g.advantages, device=self.device).reshape(m).float()
            cost_adv = cost_returns = None
            if self.lagrangian and g.cost_advantages is not None:
                k = len(self.cost_names)
                cost_adv = (
                    torch.as_tensor(g.cost_advantages, device=self.device).reshape(m, k).float()
                )
                cost_returns = torch.as_tensor(g.cost_returns, device=self.device).reshape(m, k)
            vnorm = self.value_norms[name]
            qx = None
            if (
                joint is not None
            ):  # A_i = G_i - E_{a_i'} Q(s, a_i', a_-i), Q before this rollout's update
                qx = torch.cat(
                    [
                        cx.reshape(t, n_envs, n, -1),
                        joint.unsqueeze(2).expand(t, n_envs, n, joint.shape[-1]),
                    ],
                    -1,
                )
                qnorm = self.q_norms[name]
                qnorm.update(
                    returns, self.q_critics[name].net[-1]
                )  # outputs preserved: Q before the update
                q_targets = qnorm.normalize(returns).float()
                base = counterfactual_baseline(
                    self.q_critics[name],
                    self.actors[name],
                    x.reshape(t * n_envs, n, -1),
                    cx.reshape(t * n_envs, n, -1),
                    joint.reshape(t * n_envs, -1),
                    self._places[name],
                    p.counterfactual_samples,
                )
                adv = (returns.reshape(m) - qnorm.denormalize(base.double()).reshape(m)).float()
                qx = qx.reshape(m, -1)
            advantages = self.combined_advantages(adv, cost_adv)
            if p.value_norm:
                vnorm.update(returns)
            targets = vnorm.normalize(returns).float()
            cost_targets = None
            if cost_returns is not None:
                if p.value_norm:
                    self.cost_norms[name].update(cost_returns)
                cost_targets = self.cost_norms[name].normalize(cost_returns).float()
            if name in self.joint_noise:  # one row per env step: the group acts as one joint policy
                rows = (t * n_envs, n)
                x, cx = x.reshape(*rows, -1), cx.reshape(*rows, -1)
                actions, targets = actions.reshape(*rows, -1), targets.reshape(*rows, 1)
                old_logp, advantages = (
                    old_logp.reshape(rows).sum(-1),
                    advantages.reshape(rows).mean(-1),
                )
                if cost_targets is not None:
                    cost_targets = cost_targets.reshape(*rows, -1)
            stats.update(
                {
                    f"{name}/{k}": v
                    for k, v in self._epochs(
                        name,
                        x,
                        cx,
                        actions,
                        old_logp,
                        advantages,
                        targets,
                        cost_targets,
                        None if qx is None else (qx, q_targets),
                    ).items()
                }
            )
        return stats

    def _entropy_per_agent(self, name: str, dist: torch.distributions.Distribution) -> torch.Tensor:
        """Mean entropy per agent (nats): a joint Gaussian's entropy shared evenly over its agents."""
        if name in self.joint_noise:
            return dist.entropy().mean() / self.layouts[name].n
        return dist.entropy().sum(-1).mean()

    def _epochs(
        self,
        name: str,
        x: torch.Tensor,
        cx: torch.Tensor,
        actions: torch.Tensor,
        old_logp: torch.Tensor,
        advantages: torch.Tensor,
        targets: torch.Tensor,
        cost_targets: torch.Tensor | None,
        q_batch: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> dict[str, float]:
        p = self.params
        critic = self.critics[name]
        q_critic = self.q_critics[name] if q_batch is not None else None
        qx, q_targets = q_batch if q_batch is not None else (None, None)
        cost_critic = self.cost_critics[name] if cost_targets is not None else None
        m = x.shape[0]
        size = max(1, m // p.n_minibatches)
        sums: dict[str, float] = {}
        count = 0
        for _ in range(p.n_epochs):
            order = torch.randperm(m, device=self.device)
            for start in range(0, size * p.n_minibatches, size):
                idx = order[start : start + size]
                dist = self.policy_distribution(name, x[idx])
                logp = self.group_log_prob(name, dist, actions[idx])
                ratio = torch.exp(logp - old_logp[idx])
                adv = advantages[idx]
                policy_loss = -torch.min(
                    ratio * adv, ratio.clamp(1 - p.clip_range, 1 + p.clip_range) * adv
                ).mean()
                entropy = self._entropy_per_agent(name, dist)
                actor_loss = policy_loss - p.ent_coef * entropy
                self.actor_optims[name].zero_grad()
                actor_loss.backward()
                nn.utils.clip_grad_norm_(self._actor_parameters(name), p.max_grad_norm)
                self.actor_optims[name].step()

                value_loss = 0.5 * (critic(cx[idx]) - targets[idx]).pow(2).mean()
                critic_loss = value_loss
                cost_loss = torch.zeros(())
                if cost_critic is not None:
                    cost_loss = 0.5 * (cost_critic(cx[idx]) - cost_targets[idx]).pow(2).mean()
                    critic_loss = critic_loss + cost_loss
                q_loss = torch.zeros(())
                if (
                    q_critic is not None
                ):  # own optimiser, constant step, no gradient clip (see hparams)
                    q_loss = 0.5 * (q_critic(qx[idx]) - q_targets[idx]).pow(2).mean()
                    self.q_optims[name].zero_grad()
                    q_loss.backward()
                    self.q_optims[name].step()
                self.critic_optims[name].zero_grad()
                critic_loss.backward()
                nn.utils.clip_grad_norm_(critic.parameters(), p.max_grad_norm)
                if cost_critic is not None:
                    nn.utils.clip_grad_norm_(cost_critic.parameters(), p.max_grad_norm)
                self.critic_optims[name].step()

                with torch.no_grad():
                    log_ratio = logp - old_logp[idx]
                    batch = {
                        "policy_loss": policy_loss.item(),
                        "value_loss": value_loss.item(),
                        "entropy": entropy.item(),
                        "approx_kl": ((ratio - 1) - log_ratio).mean().item(),
                        "clip_fraction": ((ratio - 1).abs() > p.clip_range).float().mean().item(),
                    }
                    if cost_critic is not None:
                        batch["cost_value_loss"] = cost_loss.item()
                    if q_critic is not None:
                        batch["q_value_loss"] = q_loss.item()
                for key, value in batch.items():
                    sums[key] = sums.get(key, 0.0) + value
                count += 1
        out = {key: value / max(count, 1) for key, value in sums.items()}
        with torch.no_grad():
            out["action_std"] = float(self.action_std(name).mean().item())
        return out

    # ---- persistence -----------------------------------------------------------------------------
    def full_state(self) -> dict[str, Any]:
        """Networks, value normalisers, optimisers and multipliers (what a checkpoint needs)."""
        out = {
            "modules": self.state_dict(),
            "actor_optims": {n: o.state_dict() for n, o in self.actor_optims.items()},
            "critic_optims": {n: o.state_dict() for n, o in self.critic_optims.items()},
            "multipliers": self.multipliers.copy(),
        }
        if self.q_optims:
            out["q_optims"] = {n: o.state_dict() for n, o in self.q_optims.items()}
        return out

    def load_full_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`full_state` returned."""
        self.load_state_dict(state["modules"])
        for n, o in self.actor_optims.items():
            o.load_state_dict(state["actor_optims"][n])
        for n, o in self.critic_optims.items():
            o.load_state_dict(state["critic_optims"][n])
        for n, o in self.q_optims.items():
            o.load_state_dict(state["q_optims"][n])
        self.multipliers = np.asarray(state["multipliers"], np.float64).copy()

    def export_policy(
        self,
        deterministic: bool = True,
        meta: dict[str, Any] | None = None,
        obs_affine: tuple[np.ndarray, np.ndarray] | None = None,
        action_affine: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> MAPPOPolicy:
        """The actors as a :class:`MAPPOPolicy` (numpy copies: later training does not change it).

        ``obs_affine``: ``(mid, half)`` of the training env's observation normalisation (``None``:
        none); ``action_affine``: ``{group: (mid, half)}`` [n, act_dim] of its action normalisation
        (``None``: the [-1, 1] -> bounds map of each group's layout).
        """
        groups = {}
        for name, g in self.layouts.items():
            linears = [m for m in self.actors[name].mean if isinstance(m, nn.Linear)]
            layers = [
                (m.weight.detach().cpu().numpy().T.copy(), m.bias.detach().cpu().numpy().copy())
                for m in linears
            ]
            if action_affine is not None:
                mid, half = action_affine[name]
            else:
                mid, half = (
                    (g.high.astype(np.float64) + g.low) / 2.0,
                    (g.high.astype(np.float64) - g.low) / 2.0,
                )
            with torch.no_grad():  # joint exploration: each agent samples its own marginal
                log_std = (
                    self.joint_noise[name].marginal_log_std()
                    if name in self.joint_noise
                    else self.actors[name].log_std
                )
            groups[name] = GroupActor(
                g.agents,
                layers,
                log_std.detach().cpu().numpy().copy(),
                mid,
                half,
                *(obs_affine if obs_affine is not None else (None, None)),
            )
        return MAPPOPolicy(groups, deterministic, meta)
