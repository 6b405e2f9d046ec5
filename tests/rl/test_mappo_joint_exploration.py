"""Joint exploration of an agent group (``algorithm_kwargs: {joint_exploration: true}``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from powerzoo.rl import Trainer
from powerzoo.rl.mappo.algorithm import GroupLayout, MultiAgentPPO
from powerzoo.rl.mappo.buffer import GroupRollout, Rollout
from powerzoo.rl.mappo.hparams import MAPPOParams, check_params
from powerzoo.rl.mappo.networks import JointNoise


def test_joint_noise_starts_as_independent_noise():
    noise = JointNoise(3, 2, log_std_init=-1.0)
    assert torch.equal(noise.scale_tril(), torch.eye(6) * np.exp(-1.0))
    assert torch.allclose(noise.marginal_log_std(), torch.full((3, 2), -1.0))
    mean = torch.randn(4, 3, 2)
    actions = mean + 0.3 * torch.randn(4, 3, 2)
    independent = torch.distributions.Normal(mean, np.exp(-1.0)).log_prob(actions).sum((-2, -1))
    assert torch.allclose(
        noise.distribution(mean).log_prob(actions.flatten(-2)), independent, atol=1e-5
    )
    with torch.no_grad():  # a correlation shows in the marginals: row norms of the Cholesky factor
        noise.lower[1, 0] = 0.5
    std = noise.marginal_log_std().exp()
    assert std[0, 1].item() == pytest.approx(np.hypot(0.5, np.exp(-1.0)), rel=1e-6)


def _learner(joint: bool, **kw) -> MultiAgentPPO:
    torch.manual_seed(2)
    layout = GroupLayout(["a0", "a1"], 2, 1, -np.ones((2, 1)), np.ones((2, 1)))
    params = MAPPOParams(
        joint_exploration=joint,
        n_epochs=4,
        learning_rate=1e-2,
        critic_learning_rate=1e-2,
        hidden_sizes=(16,),
        log_std_init=-1.0,
        gamma=0.5,
        gae_lambda=0.0,
        **kw,
    )
    return MultiAgentPPO({"g": layout}, 4, params, centralised=True)


def test_act_splits_the_joint_log_prob_evenly_over_the_agents():
    learner = _learner(True)
    obs = {"g": np.random.default_rng(0).normal(size=(5, 2, 2)).astype(np.float32)}
    actions, log_probs = learner.act(obs)
    assert actions["g"].shape == (5, 2, 1) and log_probs["g"].shape == (5, 2)
    assert np.array_equal(log_probs["g"][:, 0], log_probs["g"][:, 1])
    x = learner.actor_input("g", torch.as_tensor(obs["g"]))
    dist = learner.policy_distribution("g", x)
    joint = dist.log_prob(torch.as_tensor(actions["g"]).flatten(-2)).detach().numpy()
    assert np.allclose(log_probs["g"].sum(axis=1), joint, atol=1e-5)
    means, _ = learner.act(
        obs, deterministic=True
    )  # decentralised means: each agent's own actor output
    assert np.allclose(means["g"], learner.actors["g"].mean(x).detach().numpy())


def _train_on_balance_bandit(
    joint: bool, iterations: int = 30, n_envs: int = 256
) -> tuple[float, float, float]:
    """A one-step team bandit: reward ``-10 |a0 + a1| + 0.1 (a0 - a1)`` on actions clipped to
    [-1, 1], a balance penalty plus a reward 100x smaller for moving agent 0 up and agent 1 down
    together (marl_opf's merit order in miniature: 10-40 $/MWh under a 1,000 $/MWh imbalance
    price). Returns the deterministic ``a0 - a1`` and ``|a0 + a1|`` after training (clipped), and
    the noise correlation."""
    learner = _learner(joint)
    obs = {"g": np.zeros((n_envs, 2, 2), np.float32)}
    state = np.zeros((1, n_envs, 4), np.float32)
    flags = np.zeros((1, n_envs), bool)
    for _ in range(iterations):
        actions, log_probs = learner.act(obs)
        a = np.clip(actions["g"][..., 0], -1.0, 1.0)
        reward = -10.0 * np.abs(a.sum(axis=1)) + 0.1 * (a[:, 0] - a[:, 1])
        values, _ = learner.values(obs, state[0])
        g = GroupRollout.empty(1, n_envs, 2, 2, 1, 0)
        g.obs[0], g.actions[0], g.log_probs[0], g.values[0] = (
            obs["g"],
            actions["g"],
            log_probs["g"],
            values["g"],
        )
        g.rewards[0] = reward[:, None]
        rollout = Rollout(
            {"g": g}, state, None, flags, ~flags
        )  # every step ends its episode (truncated)
        rollout.finish({"g": np.zeros((n_envs, 2))}, None, 0.5, 0.0, 0.5)
        learner.update(rollout)
    mean, _ = learner.act(obs, deterministic=True)
    m = np.clip(mean["g"][0, :, 0], -1.0, 1.0)  # what the env takes
    if joint:
        cov = (
            (learner.joint_noise["g"].scale_tril() @ learner.joint_noise["g"].scale_tril().T)
            .detach()
            .numpy()
        )
        corr = cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1])
    else:
        corr = 0.0
    return float(m[0] - m[1]), float(abs(m[0] + m[1])), float(corr)


def test_joint_noise_learns_to_move_coupled_agents_against_each_other():
    spread, imbalance, corr = _train_on_balance_bandit(joint=True)
    assert (
        corr < -0.5
    )  # the noise along the penalised total shrank: agents explore against each other
    assert imbalance < 0.05
    independent_spread, independent_imbalance, _ = _train_on_balance_bandit(joint=False)
    assert independent_imbalance < 0.05  # both learn the balance ...
    assert (
        spread > 1.0 and independent_spread < 0.5
    )  # ... only the joint noise finds the opposite move


def test_joint_exploration_trains_end_to_end_and_restores(tmp_path):
    trainer = Trainer(
        "marl_opf",
        algorithm="MAPPO",
        total_timesteps=64,
        seed=3,
        n_envs=4,
        evaluation=None,
        checkpoint=None,
        output_dir=str(tmp_path),
        logging={"tensorboard": False, "progress_bar": False},
        algorithm_kwargs={
            "n_steps": 8,
            "n_epochs": 2,
            "hidden_sizes": [16, 16],
            "joint_exploration": True,
        },
    )
    trainer.train()
    learner = trainer.learner
    assert learner.joint and set(learner.joint_noise) == set(learner.layouts)
    lower = learner.joint_noise[next(iter(learner.layouts))].lower
    assert torch.tril(lower, -1).abs().sum() > 0  # the correlations trained
    copy = MultiAgentPPO(
        learner.layouts, trainer.collector._state_dim(), learner.params, learner.centralised
    )
    copy.load_full_state(learner.full_state())
    for key, value in learner.state_dict().items():
        assert torch.equal(copy.state_dict()[key], value), key
    policy = learner.export_policy(deterministic=False)  # each agent samples its own marginal
    group = next(iter(policy.groups.values()))
    assert group.log_std.shape == (len(group.agents), 1)


def test_bad_joint_settings_are_refused():
    with pytest.raises(ValueError, match="joint_exploration must be a bool"):
        check_params({"joint_exploration": "yes"})
    with pytest.raises(ValueError, match="do not combine"):
        check_params({"joint_exploration": True, "counterfactual_samples": 2})
    with pytest.raises(ValueError, match="in-process rollouts"):
        check_params({"joint_exploration": True, "rollout_workers": 2})
