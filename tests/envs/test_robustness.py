"""Every task survives random and extreme actions for a whole episode: finite observations,
rewards and costs, non-negative costs, no exception (the batched env, one row per action kind)."""

from __future__ import annotations

import numpy as np
import pytest

from powerzoo.rl import make_env
from powerzoo.tasks import list_tasks, task_spec

ROWS = ("low", "high", "random")


def _actions(space, rng: np.random.Generator) -> np.ndarray:
    """Rows: every entry at its lower bound, at its upper bound, uniform in between."""
    low, high = space.low, space.high
    return np.stack([low[0], high[0], rng.uniform(low[0], high[0])]).astype(space.dtype)


@pytest.mark.parametrize("task", list_tasks())
def test_random_and_extreme_actions_keep_every_number_finite(task: str) -> None:
    spec = task_spec(task)
    env = make_env(task, split="test", num_envs=len(ROWS), seed=0)
    rng = np.random.default_rng(0)
    multi = spec.agent_mode == "multi"
    env.reset(seed=0)
    for _ in range(spec.horizon):
        if multi:
            actions = {a: _actions(env.action_space(a), rng) for a in env.possible_agents}
            obs, rewards, _, _, info = env.step(actions)
            values = [np.asarray(v) for v in obs.values()] + [
                np.asarray(v) for v in rewards.values()
            ]
        else:
            obs, reward, _, _, info = env.step(_actions(env.action_space, rng))
            values = [np.asarray(obs), np.asarray(reward)]
        costs = np.asarray(info["constraint_costs"])
        for v in values + [costs]:
            assert np.all(np.isfinite(v)), f"{task}: a non-finite number"
        assert np.all(costs >= 0.0), f"{task}: a negative cost"
