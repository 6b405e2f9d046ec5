"""Agent groups: agents of one kind share the meaning of their actions (one network per group)."""

import dataclasses

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from powerzoo.rl import make_env
from powerzoo.tasks import describe, info, task_spec
from powerzoo.tasks.spec import AgentGroup


@pytest.fixture
def grouped_marl_opf(monkeypatch):
    """``marl_opf`` with its five generators split into two groups."""
    from powerzoo.tasks.economic_dispatch import MarlOpf

    make_spec = MarlOpf.make_spec.__func__

    def with_groups(cls, **task_kwargs):
        spec = make_spec(cls, **task_kwargs)
        groups = (
            AgentGroup("base", ("gen_0", "gen_2")),
            AgentGroup("peak", ("gen_1", "gen_3", "gen_4")),
        )
        return dataclasses.replace(spec, agent_groups=groups)

    monkeypatch.setattr(MarlOpf, "make_spec", classmethod(with_groups))
    return "marl_opf"


def test_a_homogeneous_task_is_one_group():
    spec = task_spec("marl_opf")
    assert [g.name for g in spec.groups] == ["agents"] and spec.groups[0].agents == spec.agents
    assert spec.group_of("gen_3") == "agents"
    assert info("marl_opf")["agent_groups"]["agents"]["action"] == ["p_mw"]


def test_groups_must_cover_every_agent_once():
    spec = task_spec("marl_opf")
    with pytest.raises(ValueError, match="every agent exactly once"):
        dataclasses.replace(spec, agent_groups=(AgentGroup("a", ("gen_0", "gen_1")),))
    with pytest.raises(ValueError, match="unknown agent"):
        spec.group_of("gen_9")


def test_groups_reach_describe_and_the_adapters(grouped_marl_opf):
    assert "agent groups: base (2: p_mw); peak (3: p_mw)" in describe(grouped_marl_opf)
    env = make_env(grouped_marl_opf, framework="pettingzoo", seed=0)
    assert env.agent_groups == {"base": ["gen_0", "gen_2"], "peak": ["gen_1", "gen_3", "gen_4"]}
    parallel_api_test(make_env(grouped_marl_opf, framework="pettingzoo"), num_cycles=5)


def test_vector_env_gives_batched_arrays_per_group_and_takes_them_back(grouped_marl_opf):
    env = make_env(grouped_marl_opf, num_envs=4, normalize=True, seed=0)
    obs, _ = env.reset(seed=0)
    by_group = env.group_arrays(obs)
    assert (
        by_group["base"].shape == (4, 2, obs["gen_0"].shape[1]) and by_group["peak"].shape[1] == 3
    )
    np.testing.assert_array_equal(by_group["peak"][:, 2], obs["gen_4"])
    actions = {
        "base": np.full((4, 2, 1), 0.5, np.float32),
        "peak": np.full((4, 3, 1), -0.5, np.float32),
    }
    per_agent = env.agent_arrays(actions)
    assert (
        per_agent["gen_2"].tolist() == [[0.5]] * 4 and per_agent["gen_1"].tolist() == [[-0.5]] * 4
    )
    env.step(per_agent)
    with pytest.raises(ValueError, match=r"group 'base' needs an array \[N, 2, ...\]"):
        env.agent_arrays({"base": np.zeros((4, 3, 1)), "peak": np.zeros((4, 3, 1))})
