"""Every adapter stops at the horizon and refuses bad reset options and bad actions alike.

Written as users call the envs: ``make_env(task, num_envs=N, autoreset_mode="disabled")`` on
every single-agent task, and the PettingZoo, dict (``framework="auto"``) and batched
(``num_envs=N``) envs of every multi-agent task.
"""

import numpy as np
import pytest

from powerzoo.rl import make_env
from powerzoo.tasks import list_tasks, task_spec

SINGLE = [t for t in list_tasks() if task_spec(t).agent_mode == "single"]
MULTI = [t for t in list_tasks() if task_spec(t).agent_mode == "multi"]
N = 3
MULTI_FORMS = ("pettingzoo", "auto", "batched")


def _multi_env(task: str, form: str):
    if form == "batched":
        return make_env(task, num_envs=N, seed=0)
    return make_env(task, framework=form, seed=0)


def _multi_actions(env, form: str) -> dict:
    """Every agent's action, sampled from its own space (``[N, d]`` per agent when batched)."""
    return {agent: env.action_space(agent).sample() for agent in env.possible_agents}


# ---- the horizon ---------------------------------------------------------------------------------
@pytest.mark.parametrize("task", SINGLE)
def test_vector_env_without_autoreset_refuses_to_step_past_the_horizon(task):
    env = make_env(task, num_envs=N, autoreset_mode="disabled", seed=0)
    horizon = env.unwrapped.task_spec.horizon
    env.reset(seed=0)
    for _ in range(horizon):
        _, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert np.all(terminated | truncated) and info["step"].tolist() == [horizon] * N
    with pytest.raises(
        RuntimeError,
        match=r"episode is over in row\(s\) \[0, 1, 2\]; call reset\(\) for the finished rows",
    ):
        env.step(env.action_space.sample())
    env.reset(options={"reset_mask": np.array([True, False, False])})
    with pytest.raises(RuntimeError, match=r"episode is over in row\(s\) \[1, 2\]"):
        env.step(env.action_space.sample())
    env.reset(options={"reset_mask": np.array([False, True, True])})
    *_, info = env.step(env.action_space.sample())
    assert info["step"].tolist() == [1] * N


@pytest.mark.parametrize("task", SINGLE[:1])
def test_a_finished_row_stays_finished_across_autoreset_as(task):
    env = make_env(task, num_envs=N, autoreset_mode="disabled", seed=0)
    env.reset(seed=0)
    for _ in range(env.unwrapped.task_spec.horizon):
        env.step(env.action_space.sample())
    with env.autoreset_as("same_step"), pytest.raises(RuntimeError, match="episode is over"):
        env.step(env.action_space.sample())
    with env.autoreset_as("next_step"):  # next_step restarts the finished rows
        _, reward, *_, info = env.step(env.action_space.sample())
    assert info["step"].tolist() == [0] * N and reward.tolist() == [0.0] * N


@pytest.mark.parametrize("task", MULTI)
def test_batched_multi_agent_env_restarts_rows_at_the_horizon(task):
    env = make_env(task, num_envs=N, seed=0)
    horizon = env.task_spec.horizon
    env.reset(seed=0)
    for t in range(1, horizon + 2):
        _, rewards, terms, truncs, info = env.step(_multi_actions(env, "batched"))
        assert info["step"].tolist() == [(t - 1) % horizon + 1] * N
        ended = terms[env.possible_agents[0]] | truncs[env.possible_agents[0]]
        assert ended.tolist() == [t == horizon] * N
    assert env.state().shape[0] == N


# ---- reset options -------------------------------------------------------------------------------
@pytest.mark.parametrize("form", MULTI_FORMS)
@pytest.mark.parametrize("task", MULTI)
def test_multi_agent_envs_refuse_unknown_and_malformed_reset_options(task, form):
    env = _multi_env(task, form)
    with pytest.raises(ValueError, match=r"unknown reset option\(s\) \['dayid'\]; valid: day_id"):
        env.reset(seed=0, options={"dayid": 3})
    with pytest.raises(TypeError, match=r"reset options must be a dict such as \{'day_id': 3\}"):
        env.reset(seed=0, options="day_id")
    _, info = env.reset(seed=0, options={"day_id": 3})
    day = info["day_id"] if form == "batched" else info[env.possible_agents[0]]["day_id"]
    assert np.all(np.asarray(day) == 3)


def test_single_agent_envs_refuse_malformed_reset_options():
    task = SINGLE[0]
    for env, valid in (
        (make_env(task, seed=0), "day_id"),
        (make_env(task, num_envs=N, seed=0), "day_id, reset_mask"),
    ):
        with pytest.raises(
            ValueError, match=rf"unknown reset option\(s\) \['dayid'\]; valid: {valid}"
        ):
            env.reset(options={"dayid": 3})
        with pytest.raises(TypeError, match="reset options must be a dict"):
            env.reset(options="day_id")


# ---- actions -------------------------------------------------------------------------------------
BAD_KINDS = {
    "complex": lambda a: a.astype(np.complex128),
    "bool": lambda a: a > a.mean(),
    "str": lambda a: a.astype(str),
}


@pytest.mark.parametrize("kind", BAD_KINDS)
@pytest.mark.parametrize("form", MULTI_FORMS)
@pytest.mark.parametrize("task", MULTI)
def test_multi_agent_envs_refuse_complex_bool_and_string_actions(task, form, kind):
    env = _multi_env(task, form)
    env.reset(seed=0)
    actions = _multi_actions(env, form)
    bad_agent = env.possible_agents[-1]
    actions[bad_agent] = BAD_KINDS[kind](actions[bad_agent])
    with pytest.raises(ValueError, match=rf"action of {bad_agent} must be numeric.*got {kind}"):
        env.step(actions)
    shapes = {env.action_space(a).shape for a in env.possible_agents}
    if form != "batched" and shapes == {(1,)}:  # a Python bool among Python floats
        actions = {a: float(env.action_space(a).low[0]) for a in env.possible_agents}
        for bad in (True, [True], np.True_):
            actions[bad_agent] = bad
            with pytest.raises(ValueError, match=f"action of {bad_agent} must be numeric"):
                env.step(actions)


@pytest.mark.parametrize("kind", BAD_KINDS)
@pytest.mark.parametrize("normalize", [False, True])
def test_single_agent_envs_refuse_complex_bool_and_string_actions(kind, normalize):
    task = "dso"
    for env in (
        make_env(task, normalize=normalize, seed=0),
        make_env(task, num_envs=N, normalize=normalize, seed=0),
    ):
        env.reset(seed=0)
        with pytest.raises(ValueError, match=rf"{task}: action must be numeric.*got {kind}"):
            env.step(BAD_KINDS[kind](env.action_space.sample()))
    with pytest.raises(ValueError, match="must be numeric"):
        make_env(task, seed=0).step(True)


# ---- extra axes of length 1 ----------------------------------------------------------------------
def _replay(env, reshape, steps=4):
    """Observations of ``steps`` seeded steps with every action passed through ``reshape``."""
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(0)
    low, high = env.action_space.low, env.action_space.high
    seen = [obs]
    for _ in range(steps):
        obs, *_ = env.step(reshape(rng.uniform(np.maximum(low, -5), np.minimum(high, 5))))
        seen.append(obs)
    return seen


@pytest.mark.parametrize("normalize", [False, True])
def test_single_agent_axes_of_length_one_are_accepted_and_nothing_else(normalize):
    task = "dso"  # 12 action entries
    plain = _replay(make_env(task, normalize=normalize), lambda a: a)
    for extra in (lambda a: a[None], lambda a: a[:, None], lambda a: a[None, :, None]):
        assert all(
            np.array_equal(x, y)
            for x, y in zip(plain, _replay(make_env(task, normalize=normalize), extra), strict=True)
        )
    env = make_env(task, normalize=normalize, seed=0)
    with pytest.raises(
        ValueError, match=r"shape \(3, 4\), expected \(12,\) .*axes of length 1 may be added"
    ):
        env.step(np.zeros((3, 4)))
    vec = make_env(task, num_envs=N, normalize=normalize, seed=0)
    vplain = _replay(make_env(task, num_envs=N, normalize=normalize), lambda a: a)
    vextra = _replay(make_env(task, num_envs=N, normalize=normalize), lambda a: a[:, None, :, None])
    assert all(np.array_equal(x, y) for x, y in zip(vplain, vextra, strict=True))
    with pytest.raises(ValueError, match=r"shape \(12, 3\), expected \(3, 12\)"):
        vec.step(np.zeros((12, N)))  # transposed: refused, not reshaped


@pytest.mark.parametrize("form", MULTI_FORMS)
@pytest.mark.parametrize("task", MULTI)
def test_multi_agent_axes_of_length_one_are_accepted_and_nothing_else(task, form):
    def rollout(reshape):
        env = _multi_env(task, form)
        obs, _ = env.reset(seed=1)
        rng = np.random.default_rng(0)
        seen = [obs]
        for _ in range(3):
            actions = {}
            for agent in env.possible_agents:
                space = env.action_space(agent)
                low = np.maximum(space.low, -5)  # finite bounds (a unit's may start above 5)
                value = rng.uniform(low, np.minimum(space.high, low + 10))
                actions[agent] = reshape(value)
            obs, *_ = env.step(actions)
            seen.append(obs)
        return seen

    def same(a, b):
        return all(
            all(np.array_equal(x[agent], y[agent]) for agent in x)
            for x, y in zip(a, b, strict=True)
        )

    plain = rollout(lambda a: a)
    assert same(plain, rollout(lambda a: a[None]))
    assert same(plain, rollout(lambda a: a[..., None]))
    env = _multi_env(task, form)
    env.reset(seed=0)
    actions = _multi_actions(env, form)
    agent = env.possible_agents[0]
    wrong = np.zeros(actions[agent].shape[::-1] + (2,))
    with pytest.raises(ValueError, match=rf"action of {agent} has shape"):
        env.step({**actions, agent: wrong})
    if form == "batched" and actions[agent].shape[1] not in (1, N):
        with pytest.raises(ValueError, match=rf"action of {agent} has shape"):
            env.step({**actions, agent: actions[agent].T})  # transposed: refused
