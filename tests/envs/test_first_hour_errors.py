"""What a new user meets first: a typo in a keyword, ``render()``, a wrong action shape on a
large case, SuperSuit's frame skip. Each says what is wrong in a short line."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import powerzoo  # noqa: F401  (registers the Gymnasium ids)
from powerzoo.rl import make_env


@pytest.mark.parametrize(
    ("keyword", "meant"), [("normalise", "normalize"), ("n_env", "num_envs"), ("sed", "seed")]
)
def test_a_mistyped_keyword_names_the_one_meant(keyword, meant):
    with pytest.raises(
        TypeError, match=f"unexpected keyword argument '{keyword}'; did you mean '{meant}'"
    ):
        make_env("battery_arbitrage", **{keyword: 4})
    with pytest.raises(
        TypeError, match=f"unexpected keyword argument '{keyword}'; did you mean '{meant}'"
    ):
        gym.make("powerzoo/BatteryArbitrage-v0", **{keyword: 4})


def test_a_mistyped_task_parameter_names_the_parameter():
    with pytest.raises(TypeError, match="did you mean 'energy_capacity_mwh'") as err:
        make_env("battery_arbitrage", energy_capacity=3.0)
    assert "unknown parameter(s) ['energy_capacity']; valid: " in str(err.value)


def test_a_keyword_close_to_nothing_lists_the_valid_ones():
    with pytest.raises(TypeError) as err:
        make_env("battery_arbitrage", zzzz=1)
    assert "did you mean" not in str(err.value) and "make_env options: split, normalize" in str(
        err.value
    )


@pytest.mark.parametrize(
    "build",
    [
        lambda: make_env("battery_arbitrage", seed=0),
        lambda: make_env("battery_arbitrage", normalize=True, num_envs=2),
        lambda: make_env("marl_opf", framework="pettingzoo", seed=0),
        lambda: make_env("marl_opf", num_envs=2),
    ],
)
def test_render_says_there_is_nothing_to_draw_and_what_to_use(build):
    env = build()
    with pytest.raises(NotImplementedError) as err:
        env.render()
    message = str(err.value)
    assert "has no render modes" in message and "plot_recorded_episode" in message
    assert env.metadata["render_modes"] == []


def test_supersuit_frame_skip_on_a_gymnasium_env():
    supersuit = pytest.importorskip("supersuit")
    env = make_env("battery_arbitrage", normalize=True, seed=0)
    skipped = supersuit.frame_skip_v0(env, (2, 4))
    runs = []
    for _ in range(2):
        skipped.reset(seed=3)
        generator = env.unwrapped.np_random
        assert isinstance(generator, np.random.Generator)
        total = 0.0
        for _ in range(5):
            _, reward, terminated, truncated, _ = skipped.step(np.zeros(env.action_space.shape))
            total += reward
        runs.append(total)
    assert runs[0] == runs[1]  # seeded by reset: the same skips, the same episode


def test_supersuit_frame_skip_on_a_parallel_env():
    supersuit = pytest.importorskip("supersuit")
    env = make_env("marl_der_arbitrage", framework="pettingzoo", normalize=True, seed=0)
    skipped = supersuit.frame_skip_v0(env, (2, 3))
    returns = []
    for _ in range(2):
        skipped.reset(seed=5)
        assert isinstance(env.unwrapped.np_random, np.random.Generator)
        _, rewards, *_ = skipped.step({a: np.zeros(1, np.float32) for a in skipped.agents})
        returns.append(dict(rewards))
    assert returns[0] == returns[1]


@pytest.fixture(scope="module")
def large_opf():
    """``opf`` on the 2,869-bus case with one agent per unit: 510 agents."""
    return make_env("opf", case="case2869pegase", agents="unit", seed=0)


def test_a_wrong_action_on_a_large_case_is_a_short_message(large_opf):
    env = large_opf
    agents = env.possible_agents
    good = {a: np.zeros(env.action_space(a).shape, np.float32) for a in agents}
    bad_inputs = [
        {a: good[a] for a in agents[:-1]},  # one agent missing
        {**good, "nobody": 0.0},  # one agent too many
        {**good, agents[0]: np.zeros(env.action_space(agents[0]).shape[0] + 1)},  # shape
        {**good, agents[0]: "abc"},  # not a number
    ]
    for actions in bad_inputs:
        with pytest.raises(ValueError) as err:
            env.step(actions)
        message = str(err.value)
        assert len(message) < 300, message
        assert "\n" not in message


def test_a_wrong_action_shape_says_expected_and_given_and_a_few_names():
    env = make_env("opf", case="case2869pegase", seed=0)  # 8 areas, up to 104 units each
    agent = env.possible_agents[0]
    size = env.action_space(agent).shape[0]
    actions = {a: np.zeros(env.action_space(a).shape, np.float32) for a in env.possible_agents}
    actions[agent] = np.zeros(size + 1, np.float32)
    with pytest.raises(ValueError) as err:
        env.step(actions)
    message = str(err.value)
    assert f"has shape ({size + 1},), expected ({size},)" in message
    assert f"... {size} in all" in message and message.count(".p_mw") <= 3
    assert len(message) < 300, message
    single = make_env("tso", seed=0)
    with pytest.raises(ValueError) as err:
        single.step(np.zeros(single.action_space.shape[0] + 3))
    assert len(str(err.value)) < 300 and "in all" in str(err.value)
