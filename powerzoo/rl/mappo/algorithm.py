"""The learner of MAPPO / IPPO and their Lagrangian variants: networks per group, acting, update.

Read top to bottom:

1. **Networks** (one set per agent group; agents of a group share them, with a one-hot id):
   an actor on the agent's observation; a reward critic on the global state (MAPPO) or on the
   agent's observation (IPPO); with ``-L`` a cost critic with one output per selected cost; with
   ``counterfactual_samples`` a Q-critic; with ``joint_exploration`` a
   :class:`~powerzoo.rl.mappo.networks.JointNoise` per group.
2. **Acting**: :meth:`MultiAgentPPO.act` samples Gaussian actions for a whole batch of envs
   (:class:`~powerzoo.rl.mappo.exploration.GroupPolicy`), :meth:`MultiAgentPPO.values`
   evaluates the critics (task units, de-normalised).
3. **Multipliers** (``-L``): :meth:`MultiAgentPPO.update_multipliers`, each iteration (PID or SGD).
4. **Update**: :meth:`MultiAgentPPO.update`: per group, :meth:`MultiAgentPPO.training_rows`
   prepares what the PPO epochs train on, every variant in turn, then
   :func:`~powerzoo.rl.mappo.ppo.ppo_epochs` runs the plain PPO step on mini-batches of it:

   * advantages: GAE, or the counterfactual ones (:mod:`~powerzoo.rl.mappo.counterfactual`);
     standardised; with ``-L`` mixed with the cost advantages through the multipliers;
   * critics regressed alongside the policy: the reward critic, the cost critic (``-L``), the
     Q-critic (counterfactual), each on value-normalised targets;
   * rows: one per agent, or under joint exploration one per env step of the whole group
     (:func:`~powerzoo.rl.mappo.exploration.per_env_step_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from powerzoo.rl.mappo.buffer import GroupRollout, Rollout
from powerzoo.rl.mappo.counterfactual import (
    QNorm,
    counterfactual_advantages,
    counterfactual_baseline,
    own_slot_placement,
    q_critic_rows,
    team_actions,
)
from powerzoo.rl.mappo.exploration import GroupPolicy, per_env_step_rows
from powerzoo.rl.mappo.hparams import MAPPOParams
from powerzoo.rl.mappo.lagrangian import Multipliers, mixed_advantages
from powerzoo.rl.mappo.networks import Actor, Critic, JointNoise, ValueNorm, with_agent_ids
from powerzoo.rl.mappo.policy import GroupActor, MAPPOPolicy
from powerzoo.rl.mappo.ppo import CriticFit, Rows, ppo_epochs

__all__ = ["GroupLayout", "MultiAgentPPO"]


class GroupLayout:
    """What the learner needs to know about one agent group: agents, sizes, bounds [n, act_dim]."""

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
        self.cost_critics, self.value_norms = nn.ModuleDict(), nn.ModuleDict()
        self.cost_norms = nn.ModuleDict()
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
        # counterfactual baseline only: a Q-critic on (state, team action, id) per group
        self.q_critics, self.q_norms = nn.ModuleDict(), nn.ModuleDict()
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
        self.joint_noise = nn.ModuleDict()  # joint exploration only: one per group
        if params.joint_exploration:
            for name, g in self.layouts.items():
                self.joint_noise[name] = JointNoise(g.n, g.act_dim, params.log_std_init)
                self.actors[name].log_std.requires_grad_(False)  # the joint noise replaces it
        self.to(self.device)
        self.actor_optims = {
            n: torch.optim.Adam(
                self.group_policy(n).parameters(), lr=params.learning_rate, eps=1e-5
            )
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
        self.multiplier_control = Multipliers(k, params)

    @property
    def multipliers(self) -> np.ndarray:
        """The Lagrange multipliers [k] (the controller's array: edits in place reach it)."""
        return self.multiplier_control.values

    @property
    def lagrangian(self) -> bool:
        return bool(self.cost_names)

    @property
    def joint(self) -> bool:
        """Whether each group explores with one joint Gaussian (``joint_exploration``)."""
        return len(self.joint_noise) > 0

    def group_policy(self, name: str) -> GroupPolicy:
        """Group ``name``'s actor with its exploration noise (independent, or joint)."""
        noise = self.joint_noise[name] if name in self.joint_noise else None
        return GroupPolicy(self.actors[name], noise, self.layouts[name].n)

    def policy_distribution(self, name: str, x: torch.Tensor) -> torch.distributions.Distribution:
        """Group ``name``'s action distribution on actor inputs ``x`` [..., n, in]
        (:meth:`~powerzoo.rl.mappo.exploration.GroupPolicy.distribution`)."""
        return self.group_policy(name).distribution(x)

    def group_log_prob(
        self, name: str, dist: torch.distributions.Distribution, actions: torch.Tensor
    ) -> torch.Tensor:
        """Log-probability of ``actions`` [..., n, act_dim]: per agent [..., n], or under joint
        exploration of the whole group action [...]."""
        return self.group_policy(name).log_prob(dist, actions)

    def action_std(self, name: str) -> torch.Tensor:
        """Each agent's standard deviation of exploration [n or 1, act_dim] ([-1, 1] units)."""
        std = self.group_policy(name).log_std().exp()
        return std if std.ndim == 2 else std.unsqueeze(0)

    # ---- inputs ----------------------------------------------------------------------------------
    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x, np.float32), device=self.device)

    def actor_input(self, name: str, obs: torch.Tensor) -> torch.Tensor:
        """[..., n, obs_dim] -> [..., n, obs_dim (+ n ids)]."""
        return with_agent_ids(obs, self.layouts[name].n)

    def critic_input(
        self, name: str, obs: torch.Tensor, state: torch.Tensor | None
    ) -> torch.Tensor:
        """Global state (MAPPO, broadcast to every agent) or own observation (IPPO), plus the
        agent id."""
        n = self.layouts[name].n
        if self.centralised:
            if state is None:
                raise ValueError("a centralised critic needs the global state")
            x = state.unsqueeze(-2).expand(*state.shape[:-1], n, state.shape[-1])
        else:
            x = obs
        return with_agent_ids(x, n)

    def _critic_values(
        self, critic: Critic, name: str, obs: torch.Tensor, state: torch.Tensor | None
    ) -> torch.Tensor:
        """``critic`` on :meth:`critic_input` [..., n, k]; a centralised critic evaluates the
        global state once for the group's agents (:meth:`Critic.forward_shared`)."""
        if self.centralised and state is not None:
            return critic.forward_shared(state, self.layouts[name].n)
        return critic(self.critic_input(name, obs, state))

    # ---- acting ----------------------------------------------------------------------------------
    @torch.inference_mode()
    def act(
        self, obs: Mapping[str, np.ndarray], deterministic: bool = False
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Actions ``{group: [N, n, act_dim]}`` (unclipped samples, [-1, 1] units) and their
        per-agent log-probabilities ``{group: [N, n]}``
        (:meth:`~powerzoo.rl.mappo.exploration.GroupPolicy.sample`); ``FloatingPointError`` when
        a policy gives NaN or infinite actions (the distributions skip torch's argument checks)."""
        actions, log_probs = {}, {}
        for name in self.layouts:
            x = self.actor_input(name, self._tensor(obs[name]))
            a, logp = self.group_policy(name).sample(x, deterministic)
            actions[name] = a.cpu().numpy()
            log_probs[name] = logp.cpu().numpy()
            if not np.isfinite(actions[name]).all():
                raise FloatingPointError(
                    f"group {name!r}: the policy gave NaN or infinite actions (finite ones "
                    "expected): its update diverged; lower learning_rate or max_grad_norm"
                )
        return actions, log_probs

    def env_actions(self, actions: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Samples -> actions the env takes: clipped to [-1, 1], mapped onto each agent's bounds."""
        out = {}
        for name, g in self.layouts.items():
            unit = np.clip(actions[name], -1.0, 1.0)
            out[name] = g.low + 0.5 * (unit + 1.0) * (g.high - g.low)
        return out

    @torch.inference_mode()
    def values(
        self, obs: Mapping[str, np.ndarray], state: np.ndarray | None
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
        """Reward values ``{group: [N, n]}`` and cost values ``{group: [N, n, k]}`` (task units)."""
        st = None if state is None or not self.centralised else self._tensor(state)
        values, costs = {}, ({} if self.lagrangian else None)
        for name in self.layouts:
            obs_t = self._tensor(obs[name])
            values[name] = (
                self.value_norms[name]
                .denormalize(self._critic_values(self.critics[name], name, obs_t, st))
                .squeeze(-1)
                .double()
                .cpu()
                .numpy()
            )
            if costs is not None:
                costs[name] = (
                    self.cost_norms[name]
                    .denormalize(self._critic_values(self.cost_critics[name], name, obs_t, st))
                    .double()
                    .cpu()
                    .numpy()
                )
        return values, costs

    # ---- multipliers -----------------------------------------------------------------------------
    def update_multipliers(self, mean_episode_costs: np.ndarray | None) -> np.ndarray:
        """Move the multipliers on the mean episode costs [k] against the budgets
        (:class:`~powerzoo.rl.mappo.lagrangian.Multipliers`); returns a copy. ``None`` (no cost
        estimate this iteration) leaves them unchanged."""
        if self.lagrangian and mean_episode_costs is not None:
            self.multiplier_control.step(mean_episode_costs, self.thresholds)
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
    def combined_advantages(self, adv: torch.Tensor, cost_adv: torch.Tensor | None) -> torch.Tensor:
        """Standardised reward advantages [R], with ``-L`` mixed with the cost ones [R, k]
        through the multipliers (:func:`~powerzoo.rl.mappo.lagrangian.mixed_advantages`)."""
        cost_adv = cost_adv if self.lagrangian else None
        return mixed_advantages(adv, cost_adv, self.multipliers, self.params.normalize_advantage)

    def update(self, rollout: Rollout) -> dict[str, float]:
        """PPO epochs on every group; returns mean losses and diagnostics (``<group>/<stat>``)."""
        states = None
        if rollout.states is not None and self.centralised:
            states = self._tensor(rollout.states)
        team = None  # [T, N, J] every agent's clipped action (counterfactual baseline)
        if self.counterfactual:
            team = team_actions({n: self._tensor(rollout.groups[n].actions) for n in self.layouts})
        stats = {}
        for name, g in rollout.groups.items():
            rows = self.training_rows(name, g, states, team)
            out = ppo_epochs(self.group_policy(name), self.actor_optims[name], rows, self.params)
            with torch.no_grad():
                out["action_std"] = float(self.action_std(name).mean().item())
            stats.update({f"{name}/{key}": value for key, value in out.items()})
        return stats

    def training_rows(
        self,
        name: str,
        g: GroupRollout,
        states: torch.Tensor | None,
        team: torch.Tensor | None = None,
    ) -> Rows:
        """What the PPO epochs of group ``name`` train on; each variant is applied here, once.

        Args:
            name: the group.
            g: its side of the rollout, GAE done (:meth:`Rollout.finish`).
            states: global states [T, N, state_dim] (centralised critics), else ``None``.
            team: team actions [T, N, J] (counterfactual baseline), else ``None``.
        """
        t, n_envs, n = g.rewards.shape
        m = t * n_envs * n  # one row per agent and env step
        obs = self._tensor(g.obs)
        returns = torch.as_tensor(g.returns, device=self.device).reshape(m, 1)
        if self.centralised and states is not None and team is None:
            # one global state per env step, read by each of its agents' rows (forward_rows)
            cx, agent_rows = states.reshape(t * n_envs, -1), n
        else:
            cx, agent_rows = self.critic_input(name, obs, states).reshape(m, -1), None
        value = self._critic_fit(
            name, "value_loss", self.critics, self.value_norms, cx, returns, agent_rows
        )
        rows = Rows(  # plain PPO: GAE advantages, the reward critic
            actor_x=self.actor_input(name, obs).reshape(m, -1),
            actions=self._tensor(g.actions).reshape(m, -1),
            old_log_probs=self._tensor(g.log_probs).reshape(m),
            advantages=torch.as_tensor(g.advantages, device=self.device).reshape(m).float(),
            value=value,
        )
        cost_adv = None
        if self.lagrangian and g.cost_advantages is not None:
            cost_adv = self._add_cost_critic(rows, name, g)
        if team is not None:
            self._use_counterfactual_baseline(rows, name, returns, team)
        rows.advantages = self.combined_advantages(rows.advantages, cost_adv)
        if name in self.joint_noise:
            rows = per_env_step_rows(rows, n)
        return rows

    def _critic_fit(
        self,
        name: str,
        stat: str,
        critics: nn.ModuleDict,
        norms: nn.ModuleDict,
        inputs: torch.Tensor,
        returns: torch.Tensor,
        agent_rows: int | None = None,
    ) -> CriticFit:
        """Group ``name``'s critic in ``critics`` regressed on ``returns`` [R, k] (task units)
        through its normaliser in ``norms`` (statistics updated first, with ``value_norm``);
        ``agent_rows``: see :class:`~powerzoo.rl.mappo.ppo.CriticFit`."""
        if self.params.value_norm:
            norms[name].update(returns)
        targets = norms[name].normalize(returns).float()
        optim, clip = self.critic_optims[name], self.params.max_grad_norm
        return CriticFit(stat, critics[name], inputs, targets, optim, clip, agent_rows=agent_rows)

    def _add_cost_critic(self, rows: Rows, name: str, g: GroupRollout) -> torch.Tensor:
        """``-L``: the cost critic trains alongside the reward critic (on the same inputs);
        returns the cost advantages [R, k] for :meth:`combined_advantages`."""
        m, k = len(rows), len(self.cost_names)
        cost_returns = torch.as_tensor(g.cost_returns, device=self.device).reshape(m, k)
        rows.extra_fits.append(
            self._critic_fit(
                name,
                "cost_value_loss",
                self.cost_critics,
                self.cost_norms,
                rows.value.inputs,
                cost_returns,
                rows.value.agent_rows,
            )
        )
        return torch.as_tensor(g.cost_advantages, device=self.device).reshape(m, k).float()

    def _use_counterfactual_baseline(
        self, rows: Rows, name: str, returns: torch.Tensor, team: torch.Tensor
    ) -> None:
        """Counterfactual baseline: the advantages become ``A_i = G_i - E_{a_i'} Q(s, a_i',
        a_-i)`` (:func:`~powerzoo.rl.mappo.counterfactual.counterfactual_advantages`) and the
        Q-critic trains alongside the reward critic, with its own optimiser (constant step, no
        gradient clip)."""
        n = self.layouts[name].n
        steps = len(rows) // n  # env steps
        q_critic, q_norm = self.q_critics[name], self.q_norms[name]
        critic_x, team = rows.value.inputs.reshape(steps, n, -1), team.reshape(steps, -1)
        q_inputs, q_targets = q_critic_rows(q_critic, q_norm, critic_x, team, returns)
        baseline = counterfactual_baseline(
            q_critic,
            self.actors[name],
            rows.actor_x.reshape(steps, n, -1),
            critic_x,
            team,
            self._places[name],
            self.params.counterfactual_samples,
        )
        rows.advantages = counterfactual_advantages(q_norm, returns, baseline)
        q_fit = CriticFit(
            "q_value_loss", self.q_critics[name], q_inputs, q_targets, self.q_optims[name], None
        )
        rows.extra_fits.append(q_fit)

    # ---- persistence -----------------------------------------------------------------------------
    def full_state(self) -> dict[str, Any]:
        """Networks, value normalisers, optimisers and multipliers (what a checkpoint needs)."""
        out = {
            "modules": self.state_dict(),
            "actor_optims": {n: o.state_dict() for n, o in self.actor_optims.items()},
            "critic_optims": {n: o.state_dict() for n, o in self.critic_optims.items()},
            "multipliers": self.multipliers.copy(),
            "multiplier_state": self.multiplier_control.state_dict(),
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
        self.multiplier_control.load_state_dict(state.get("multiplier_state", state))

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
                log_std = self.group_policy(name).log_std()
            groups[name] = GroupActor(
                g.agents,
                layers,
                log_std.detach().cpu().numpy().copy(),
                mid,
                half,
                *(obs_affine if obs_affine is not None else (None, None)),
            )
        return MAPPOPolicy(groups, deterministic, meta)
