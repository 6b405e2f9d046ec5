"""The faster computations of the native MAPPO update compute what the plain ones do.

* :class:`~powerzoo.rl.mappo.networks.Tanh` (``2 sigmoid(2x) - 1``) against ``torch.tanh``;
* :meth:`~powerzoo.rl.mappo.networks.Critic.forward_shared` and ``forward_rows`` (the global
  state once per env step) against the critic on one repeated row per agent with its id, and
  the critic losses of the rows built that way against those on repeated rows;
* a NaN policy is refused by ``act`` (the distributions skip torch's argument checks);
* a fixed seed still gives the same weights.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from powerzoo.rl import Trainer
from powerzoo.rl.mappo.algorithm import GroupLayout, MultiAgentPPO
from powerzoo.rl.mappo.buffer import GroupRollout
from powerzoo.rl.mappo.hparams import MAPPOParams
from powerzoo.rl.mappo.networks import Critic, Tanh, with_agent_ids


def test_tanh_matches_torch_tanh_and_its_gradient():
    x = torch.linspace(-12.0, 12.0, 20001, requires_grad=True)
    y = Tanh()(x)
    assert (y.detach().double() - torch.tanh(x.detach().double())).abs().max() < 2e-7
    assert y.detach().abs().max() <= 1.0
    grad = torch.randn_like(x)
    y.backward(grad)
    expected = grad * (1.0 - y.detach() ** 2)  # torch's tanh gradient on the output
    torch.testing.assert_close(x.grad, expected, atol=1e-6, rtol=1e-6)
    with torch.no_grad():
        assert torch.equal(Tanh()(x), y.detach())
    assert torch.isnan(Tanh()(torch.tensor([float("nan")]))).all()
    double = torch.randn(12, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(Tanh(), (double,))


@pytest.mark.parametrize("n_agents", [1, 3])
def test_critic_on_a_shared_state_equals_the_critic_on_repeated_rows(n_agents):
    torch.manual_seed(0)
    d = 7
    critic = Critic(d + (n_agents if n_agents > 1 else 0), (16, 16), n_out=2)
    state = torch.randn(5, 4, d)
    repeated = with_agent_ids(state.unsqueeze(-2).expand(5, 4, n_agents, d), n_agents)
    expected = critic(repeated)
    shared = critic.forward_shared(state, n_agents)
    assert shared.shape == expected.shape == (5, 4, n_agents, 2)
    torch.testing.assert_close(shared, expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("n_agents", [1, 3])
def test_critic_on_agent_rows_of_shared_states_equals_the_critic_on_repeated_rows(n_agents):
    torch.manual_seed(0)
    d, steps = 7, 6
    critic = Critic(d + (n_agents if n_agents > 1 else 0), (16, 16), n_out=2)
    state = torch.randn(steps, d)
    repeated = with_agent_ids(state.unsqueeze(-2).expand(steps, n_agents, d), n_agents)
    rows = torch.tensor([0, 2, steps * n_agents - 1, 1])
    expected = critic(repeated.reshape(steps * n_agents, -1)[rows])
    got = critic.forward_rows(state, rows, n_agents)
    assert got.shape == expected.shape == (4, 2)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)


def _learner(cost_names: tuple[str, ...] = (), joint: bool = True) -> MultiAgentPPO:
    torch.manual_seed(1)
    layout = GroupLayout(["a0", "a1", "a2"], 2, 1, -np.ones((3, 1)), np.ones((3, 1)))
    params = MAPPOParams(joint_exploration=joint, hidden_sizes=(16,), gamma=0.5, gae_lambda=0.0)
    return MultiAgentPPO(
        {"g": layout}, 6, params, True, cost_names, thresholds=[1.0] * len(cost_names)
    )


@pytest.mark.parametrize("joint", [True, False])
def test_critic_losses_on_shared_states_equal_those_on_repeated_rows(joint):
    """The centralised critics read one global state per env step (per agent row, or once for
    the whole group under joint exploration); their losses are those on repeated rows."""
    learner = _learner(("c",), joint)
    rng = np.random.default_rng(0)
    t, n_envs, n = 4, 3, 3
    g = GroupRollout.empty(t, n_envs, n, 2, 1, 1)
    g.obs[:] = rng.normal(size=g.obs.shape)
    g.actions[:] = rng.normal(size=g.actions.shape)
    g.advantages, g.returns = rng.normal(size=(t, n_envs, n)), rng.normal(size=(t, n_envs, n))
    g.cost_advantages = rng.normal(size=(t, n_envs, n, 1))
    g.cost_returns = rng.normal(size=(t, n_envs, n, 1))
    states = torch.as_tensor(g.obs.reshape(t, n_envs, n * 2))  # every agent's observation
    rows = learner.training_rows("g", g, states)
    fits = [rows.value, *rows.extra_fits]
    assert len(fits) == 2
    assert all(f.inputs.shape == (t * n_envs, n * 2) for f in fits)  # never repeated
    repeated = learner.critic_input("g", torch.as_tensor(g.obs), states)
    if joint:
        assert [f.shared_agents for f in fits] == [n, n]
        repeated, idx = repeated.reshape(t * n_envs, n, -1), torch.tensor([0, 5, 7, 11])
    else:
        assert [f.agent_rows for f in fits] == [n, n]
        repeated, idx = repeated.reshape(t * n_envs * n, -1), torch.tensor([0, 5, 7, 11, 35])
    for fit in fits:
        plain = dataclasses.replace(fit, inputs=repeated, shared_agents=None, agent_rows=None)
        torch.testing.assert_close(fit.loss(idx), plain.loss(idx), atol=1e-6, rtol=1e-5)


def test_a_policy_with_nan_weights_is_refused_when_acting():
    learner = _learner()
    with torch.no_grad():
        learner.actors["g"].mean[0].weight.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match="NaN or infinite actions"):
        learner.act({"g": np.zeros((2, 3, 2), np.float32)})


def test_a_fixed_seed_gives_the_same_weights_with_joint_exploration(tmp_path):
    kwargs = {"n_steps": 8, "n_minibatches": 2, "n_epochs": 2, "joint_exploration": True}

    def weights(folder: str) -> dict[str, torch.Tensor]:
        trainer = Trainer(
            "marl_opf",
            algorithm="MAPPO-L",
            total_timesteps=64,
            n_envs=4,
            seed=5,
            evaluation=None,
            checkpoint=None,
            output_dir=str(tmp_path / folder),
            algorithm_kwargs=kwargs,
            logging={"tensorboard": False, "progress_bar": False},
        )
        trainer.train()
        return trainer._ensure_learner().state_dict()

    first, second = weights("a"), weights("b")
    assert all(torch.equal(first[k], second[k]) for k in first)
