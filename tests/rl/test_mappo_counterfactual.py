"""The counterfactual baseline of MAPPO (``counterfactual_samples``): team actions, baseline,
Q normaliser, option."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from powerzoo.rl.mappo.algorithm import GroupLayout, MultiAgentPPO
from powerzoo.rl.mappo.counterfactual import (
    QNorm,
    counterfactual_baseline,
    own_slot_placement,
    team_actions,
)
from powerzoo.rl.mappo.hparams import MAPPOParams, check_params
from powerzoo.rl.mappo.networks import Actor


def test_team_actions_are_clipped_and_agent_major_over_groups():
    a = torch.tensor([[[0.5], [2.0]]])  # [M=1, n=2, d=1]
    b = torch.tensor([[[-3.0, 0.25]]])  # [M=1, n=1, d=2]
    assert team_actions({"a": a, "b": b}).tolist() == [[0.5, 1.0, -1.0, 0.25]]


def test_own_slot_placement_maps_each_agent_onto_its_slot():
    # team action of length 4, group 1 at offset 2
    place = own_slot_placement([(2, 1), (1, 2)], group=1)
    assert place.shape == (1, 2, 4)
    assert place[0].tolist() == [[0, 0, 1, 0], [0, 0, 0, 1]]
    place0 = own_slot_placement([(2, 1), (1, 2)], group=0)
    assert place0[:, 0].tolist() == [[1, 0, 0, 0], [0, 1, 0, 0]]


def _constant_actor(mean: float, log_std: float, n_in: int) -> Actor:
    actor = Actor(n_in, 1, (4,), log_std)
    last = actor.mean[-1]
    nn.init.zeros_(last.weight)
    nn.init.constant_(last.bias, mean)
    return actor


def test_baseline_on_a_linear_q_leaves_only_the_agents_own_part():
    """Q(s, a) = w . a (+ u . critic input): with the return equal to Q,
    A_i = G - b_i = w_i (a_i - mu_i), whatever the other agents did (hand-computed; a
    near-deterministic policy makes the samples its mean)."""
    torch.manual_seed(0)
    m, n, width = 6, 3, 2
    w = torch.tensor([1.0, -2.0, 0.5])
    u = torch.tensor([0.3, -0.7])
    q = nn.Linear(width + n, 1)
    with torch.no_grad():
        q.weight.copy_(torch.cat([u, w])[None])
        q.bias.fill_(4.0)
    mu = 0.2
    actor = _constant_actor(mu, -20.0, 5)
    actor_x = torch.randn(m, n, 5)
    critic_x = torch.randn(m, n, width)
    team = torch.rand(m, n) * 2 - 1
    base = counterfactual_baseline(
        q, actor, actor_x, critic_x, team, own_slot_placement([(n, 1)], 0), samples=4
    )
    returns = (critic_x @ u + 4.0) + (team @ w)[:, None]  # Q(s, a) for every agent row [M, n]
    expected = w * (team - mu)
    assert torch.allclose(returns - base, expected, atol=1e-5)


def test_baseline_averages_the_clipped_samples():
    """A wide policy centred on the upper bound: half the draws clip to 1, so E[clip(a')] < 1."""
    torch.manual_seed(1)
    q = nn.Linear(1 + 1, 1, bias=False)
    with torch.no_grad():
        q.weight.copy_(torch.tensor([[0.0, 1.0]]))
    actor = _constant_actor(1.0, 0.0, 2)
    base = counterfactual_baseline(
        q,
        actor,
        torch.zeros(1, 1, 2),
        torch.zeros(1, 1, 1),
        torch.zeros(1, 1),
        own_slot_placement([(1, 1)], 0),
        samples=20_000,
    )
    # E[min(1 + z, 1)] = 1 - E[max(-z, 0)] = 1 - 1/sqrt(2 pi) (z ~ N(0, 1)); the lower clip is
    # negligible
    assert base.item() == pytest.approx(1.0 - 1.0 / np.sqrt(2 * np.pi), abs=0.02)


def test_qnorm_follows_the_returns_and_preserves_outputs():
    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    norm = QNorm(beta=0.9)
    x = torch.randn(16, 3)
    before = norm.denormalize(net(x).double())
    norm.update(torch.full((50,), 1000.0) + torch.randn(50), net[-1])
    assert torch.allclose(norm.denormalize(net(x).double()), before, atol=1e-3)
    assert float(norm.mean) == pytest.approx(1000.0, abs=1.0)
    mid = norm.denormalize(net(x).double())
    norm.update(torch.full((50,), -500.0), net[-1])
    assert torch.allclose(norm.denormalize(net(x).double()), mid, atol=1e-2)
    assert float(norm.mean) == pytest.approx(0.9 * 1000.0 + 0.1 * -500.0, abs=1.0)


def _learner(samples: int, centralised: bool = True) -> MultiAgentPPO:
    torch.manual_seed(5)
    layout = GroupLayout(["a0", "a1"], 3, 1, -np.ones((2, 1)), np.ones((2, 1)))
    return MultiAgentPPO(
        {"g": layout}, 6, MAPPOParams(counterfactual_samples=samples, n_epochs=2), centralised
    )


def test_option_off_adds_nothing_and_on_keeps_the_other_networks():
    off, on = _learner(0), _learner(4)
    assert not off.counterfactual and not off.q_optims and "q_optims" not in off.full_state()
    assert not any(k.startswith("q_") for k in off.state_dict())
    on_state = on.state_dict()
    for (
        key,
        value,
    ) in off.state_dict().items():  # actors, critics: same draws (the Q-critic has its own stream)
        assert torch.equal(on_state[key], value), key
    assert any(k.startswith("q_critics.") for k in on_state)


def test_update_with_the_option_trains_the_q_critic_and_restores():
    from powerzoo.rl.mappo.buffer import GroupRollout, Rollout

    learner = _learner(3)
    rng = np.random.default_rng(0)
    t, n_envs = 4, 5
    g = GroupRollout.empty(t, n_envs, 2, 3, 1, 0)
    g.obs[:] = rng.normal(size=g.obs.shape)
    g.actions[:] = rng.normal(size=g.actions.shape)
    g.rewards[:] = -np.abs(g.actions.sum(axis=(2, 3)))[:, :, None]
    rollout = Rollout(
        {"g": g},
        rng.normal(size=(t, n_envs, 6)).astype(np.float32),
        None,
        np.zeros((t, n_envs), bool),
        np.zeros((t, n_envs), bool),
    )
    rollout.finish({"g": np.zeros((n_envs, 2))}, None, 0.5, 0.0, 0.5)
    q_before = [p.detach().clone() for p in learner.q_critics["g"].parameters()]
    stats = learner.update(rollout)
    assert np.isfinite(stats["g/q_value_loss"])
    assert any(
        not torch.equal(a, b)
        for a, b in zip(q_before, learner.q_critics["g"].parameters(), strict=True)
    )
    copy = _learner(3)
    copy.load_full_state(learner.full_state())
    for key, value in learner.state_dict().items():
        assert torch.equal(copy.state_dict()[key], value), key


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="counterfactual_samples"):
        check_params({"counterfactual_samples": -1})
    with pytest.raises(ValueError, match="counterfactual_learning_rate"):
        check_params({"counterfactual_samples": 2, "counterfactual_learning_rate": 0})
    with pytest.raises(ValueError, match="centralised critic"):
        _learner(2, centralised=False)
