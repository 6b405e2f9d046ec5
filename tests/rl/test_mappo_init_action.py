"""``init_action``: the native trainers' actors start at the middle of the action bounds, or at
the task's no-control action (``"idle"``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import SMALL_NATIVE, small_native_trainer

from powerzoo.envs.introspect import inspect_env
from powerzoo.rl import Trainer
from powerzoo.rl.mappo.algorithm import GroupLayout, MultiAgentPPO
from powerzoo.rl.mappo.hparams import MAPPOParams
from powerzoo.rl.mappo.init_action import start_actors_at
from powerzoo.tasks import task_spec


def _trainer(task: str, algorithm: str, init_action: str, tmp_path) -> Trainer:
    kwargs = {**SMALL_NATIVE, "init_action": init_action}
    return small_native_trainer(
        tmp_path, algorithm, task, n_envs=2, env={"normalize": True}, algorithm_kwargs=kwargs
    )


def _physical_start(trainer: Trainer) -> np.ndarray:
    """The joint physical action [A * d] of the actors' output biases (the initial means)."""
    learner = trainer._ensure_learner()
    spec = task_spec(trainer.task)
    index = {a: i for i, a in enumerate(spec.agents)}
    env_units = np.zeros((len(index), spec.agent_action_dim))
    means = {
        name: np.broadcast_to(
            learner.actors[name].mean[-1].bias.detach().numpy(), (1, layout.n, layout.act_dim)
        )
        for name, layout in learner.layouts.items()
    }
    for name, actions in learner.env_actions(means).items():
        env_units[[index[a] for a in learner.layouts[name].agents]] = actions[0]
    return inspect_env(trainer.get_env()).action_scaler.from_unit(env_units.reshape(-1))


@pytest.mark.parametrize(
    ("task", "algorithm"),
    [("marl_ev_v2g", "MAPPO-L"), ("marl_ders_benchmark", "MAPPO"), ("dso", "PPO-L")],
)
def test_idle_start_puts_every_actor_at_the_tasks_no_control_action(task, algorithm, tmp_path):
    spec = task_spec(task)
    low, high = np.asarray(spec.action.low), np.asarray(spec.action.high)
    idle = _physical_start(_trainer(task, algorithm, "idle", tmp_path / "idle"))
    np.testing.assert_allclose(idle, spec.idle_action, atol=1e-5 * (high - low).max())
    center = _physical_start(_trainer(task, algorithm, "center", tmp_path / "center"))
    np.testing.assert_allclose(center, (low + high) / 2, atol=1e-5 * (high - low).max())
    assert not np.allclose(idle, center)  # on these tasks the middle is not doing nothing


def test_the_idle_start_is_the_mean_action_up_to_the_small_output_weights(tmp_path):
    learner = _trainer("marl_ev_v2g", "MAPPO", "idle", tmp_path)._ensure_learner()
    for name, actor in learner.actors.items():
        x = torch.rand(256, actor.mean[0].in_features) * 2 - 1
        with torch.no_grad():
            mean = actor(x)
        assert torch.all((mean + 1.0).abs() < 0.1), name  # -1: the charger's full rating


def test_a_task_without_an_idle_action_is_refused(tmp_path):
    trainer = _trainer("marl_opf", "MAPPO", "idle", tmp_path)
    with pytest.raises(ValueError, match="'marl_opf' has no idle .*tasks with one: .*marl_ev_v2g"):
        trainer._ensure_learner()


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match="init_action must be one of"):
        MAPPOParams(init_action="zero")
    layout = GroupLayout(["a", "b"], 3, 1, -np.ones((2, 1)), np.ones((2, 1)))
    learner = MultiAgentPPO({"g": layout}, 6, MAPPOParams(), True, ())
    with pytest.raises(ValueError, match="start at different actions"):
        start_actors_at(learner, {"g": np.array([[0.5], [-0.5]])})
    with pytest.raises(ValueError, match=r"must lie in \[-1, 1\]"):
        start_actors_at(learner, {"g": np.array([[2.0], [2.0]])})
    start_actors_at(learner, {"g": np.array([[0.25], [0.25]])})
    assert learner.actors["g"].mean[-1].bias.item() == 0.25


def test_the_center_start_keeps_the_weights_a_seed_gave_before(tmp_path):
    """``init_action`` draws nothing: the default start is bit for bit what it was."""
    a = _trainer("marl_ev_v2g", "MAPPO", "center", tmp_path / "a")._ensure_learner()
    b = _trainer("marl_ev_v2g", "MAPPO", "idle", tmp_path / "b")._ensure_learner()
    sa, sb = a.state_dict(), b.state_dict()
    changed = [k for k in sa if not torch.equal(sa[k], sb[k])]
    assert changed and all(k.startswith("actors.") and k.endswith("mean.4.bias") for k in changed)
