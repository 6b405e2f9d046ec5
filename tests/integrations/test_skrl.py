"""skrl on PowerZoo: its Gymnasium wrapper around the native vector env, a short PPO run.

Written the way skrl's own examples are: models from its mixins, ``RandomMemory``, ``PPO`` with a
``PPO_CFG`` and a ``SequentialTrainer``. The checks are what a user relies on: skrl sees each
day end exactly once per row (same-step autoreset), its updates move the policy, and the trained
policy scores on a test day with PowerZoo's own ``evaluate`` in physical units.
"""

from __future__ import annotations

import numpy as np
import pytest

skrl = pytest.importorskip("skrl")
torch = pytest.importorskip("torch")

from skrl.agents.torch import ExperimentCfg  # noqa: E402
from skrl.agents.torch.ppo import PPO, PPO_CFG  # noqa: E402
from skrl.envs.wrappers.torch import wrap_env  # noqa: E402
from skrl.memories.torch import RandomMemory  # noqa: E402
from skrl.models.torch import DeterministicMixin, GaussianMixin, Model  # noqa: E402
from skrl.trainers.torch import SequentialTrainer  # noqa: E402
from torch import nn  # noqa: E402

from powerzoo.benchmarks import evaluate  # noqa: E402
from powerzoo.rl import make_env  # noqa: E402

TASK, HORIZON, N_ENVS = "battery_arbitrage", 48, 4


class Policy(GaussianMixin, Model):
    """Gaussian policy: a tanh MLP for the mean, one learned log-std per action."""

    def __init__(self, observation_space, action_space, device):
        Model.__init__(
            self, observation_space=observation_space, action_space=action_space, device=device
        )
        GaussianMixin.__init__(self, clip_actions=True)
        self.net = nn.Sequential(
            nn.Linear(self.num_observations, 32), nn.Tanh(), nn.Linear(32, self.num_actions)
        )
        self.log_std = nn.Parameter(torch.full((self.num_actions,), -1.0))

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {"log_std": self.log_std}


class Value(DeterministicMixin, Model):
    """State-value critic."""

    def __init__(self, observation_space, action_space, device):
        Model.__init__(
            self, observation_space=observation_space, action_space=action_space, device=device
        )
        DeterministicMixin.__init__(self)
        self.net = nn.Sequential(nn.Linear(self.num_observations, 32), nn.Tanh(), nn.Linear(32, 1))

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {}


class SkrlPolicy:
    """A trained skrl Gaussian policy behind PowerZoo's policy interface (mean action)."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def reset(self) -> None:
        pass

    def act(self, obs, info):
        with torch.no_grad():
            inputs = {"observations": torch.as_tensor(obs, dtype=torch.float32)[None]}
            _, outputs = self.model.act(inputs, role="policy")
        return outputs["mean_actions"][0].numpy()


def test_skrl_ppo_trains_on_the_native_vector_env_and_its_policy_evaluates(tmp_path):
    torch.manual_seed(0)
    env = wrap_env(
        make_env(TASK, normalize=True, num_envs=N_ENVS, autoreset_mode="same_step", seed=0),
        wrapper="gymnasium",
    )
    assert env.num_envs == N_ENVS and env.observation_space.shape == (6,)
    models = {
        "policy": Policy(env.observation_space, env.action_space, env.device),
        "value": Value(env.observation_space, env.action_space, env.device),
    }
    before = [p.detach().clone() for p in models["policy"].parameters()]
    memory = RandomMemory(memory_size=HORIZON, num_envs=env.num_envs, device=env.device)
    cfg = PPO_CFG(
        rollouts=HORIZON,
        learning_epochs=2,
        mini_batches=2,
        experiment=ExperimentCfg(directory=str(tmp_path), write_interval=0, checkpoint_interval=0),
    )
    agent = PPO(
        models=models,
        memory=memory,
        observation_space=env.observation_space,
        action_space=env.action_space,
        device=env.device,
        cfg=cfg,
    )
    trainer = SequentialTrainer(
        env=env,
        agents=agent,
        cfg={
            "timesteps": 2 * HORIZON,
            "headless": True,
            "disable_progressbar": True,
            "close_environment_at_exit": False,  # closed below, while logging still works
        },
    )
    trainer.train()  # two days per row, one PPO update after each

    # the memory holds the second day of every row: each ends once, on its last step, by time
    truncated = memory.get_tensor_by_name("truncated")[..., 0]
    terminated = memory.get_tensor_by_name("terminated")[..., 0]
    assert truncated.shape == (HORIZON, N_ENVS)
    assert truncated[-1].all() and int(truncated.sum()) == N_ENVS and not terminated.any()
    rewards = memory.get_tensor_by_name("rewards")
    assert torch.isfinite(rewards).all() and (rewards != 0).any()
    after = list(models["policy"].parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))

    summary = evaluate(SkrlPolicy(models["policy"]), make_env(TASK, "test", normalize=True))
    assert summary["mean_length"] == HORIZON and np.all(np.isfinite(summary["returns"]))
    assert set(summary["mean_costs"]) == {"soc_violation"}
    env.close()
