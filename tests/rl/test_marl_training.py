"""Multi-agent training on SB3: the single-agent view,
the agents-as-envs VecEnv, and both trainers."""

import tempfile

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from stable_baselines3 import A2C, PPO, SAC
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from powerzoo.benchmarks.evaluation import evaluate_days
from powerzoo.benchmarks.policies import RandomPolicy, SB3Policy
from powerzoo.rl import make_env
from powerzoo.rl.sb3.marl import (
    AgentsAsVecEnv,
    SharedPolicy,
    SingleAgentView,
    train_independent_learners,
    train_shared_policy,
)

TASK = "marl_opf"
AGENTS = [f"gen_{i}" for i in range(5)]
TEST_DAYS = [0, 9, 18, 27, 36, 45, 54, 63]  # 8 of the 65 test-split days
# index of ``time_remaining`` in the global observation (normalised: 1 at the start, -1 at the end)
TIME_REMAINING = 2


def _parallel_env(seed: int = 0):
    return make_env(TASK, framework="pettingzoo", normalize=True, seed=seed)


class _ConstantModel:
    """predict-like stand-in that records how it was called."""

    def __init__(self, value: float) -> None:
        self.value, self.calls = value, []

    def predict(self, obs, deterministic=False):
        self.calls.append((np.asarray(obs).shape, deterministic))
        return np.full(1, self.value, dtype=np.float32), None


# ---- SingleAgentView -------------------------------------------------------------------------
def test_single_agent_view_passes_gymnasium_and_sb3_env_checkers():
    view = SingleAgentView(_parallel_env(), "gen_2")
    check_env(view, skip_render_check=True)
    sb3_check_env(view, warn=True)
    assert view.observation_space.shape == (10,) and view.action_space.shape == (1,)


def test_single_agent_view_others_act_with_model_callable_or_hold_midrange():
    env = _parallel_env()
    sent = []  # the joint actions the view sends (normalised: -1 Pmin, 0 mid-range, +1 Pmax)
    parallel_step = env.step
    env.step = lambda actions: (sent.append(actions), parallel_step(actions))[1]
    model = _ConstantModel(1.0)  # gen_4 at Pmax
    view = SingleAgentView(
        env, "gen_0", {"gen_4": model, "gen_1": lambda obs: np.array([-1.0], np.float32)}
    )
    view.reset(seed=3)
    _, reward, terminated, truncated, info = view.step(np.array([0.0], np.float32))
    asked = {agent: float(np.ravel(a)[0]) for agent, a in sent[-1].items()}
    # gen_2 and gen_3 hold mid-range
    assert asked == {"gen_0": 0.0, "gen_1": -1.0, "gen_2": 0.0, "gen_3": 0.0, "gen_4": 1.0}
    assert info["total_generation_mw"] > 0.0  # applied within each unit's step range
    assert model.calls == [((10,), True)]
    assert isinstance(reward, float) and reward < 0 and not terminated and not truncated

    view.set_others(None)  # everyone holds mid-range now
    view.reset(seed=3)
    view.step(np.array([0.0], np.float32))
    assert {agent: float(np.ravel(a)[0]) for agent, a in sent[-1].items()} == dict.fromkeys(
        asked, 0.0
    )


def test_single_agent_view_episode_lasts_the_task_horizon():
    view = SingleAgentView(_parallel_env(), "gen_1")
    view.reset(seed=0)
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, _ = view.step(view.action_space.sample())
        steps, done = steps + 1, terminated or truncated
    assert steps == 48 and truncated
    with pytest.raises(RuntimeError, match="reset"):
        view.step(view.action_space.sample())


def test_single_agent_view_rejects_bad_agents_and_policies():
    env = _parallel_env()
    with pytest.raises(ValueError, match="unknown agent 'gen_9'"):
        SingleAgentView(env, "gen_9")
    with pytest.raises(ValueError, match="own agent"):
        SingleAgentView(env, "gen_0", {"gen_0": None})
    with pytest.raises(ValueError, match="unknown agent"):
        SingleAgentView(env, "gen_0", {"bus_1": None})
    with pytest.raises(TypeError, match="predict"):
        SingleAgentView(env, "gen_0", {"gen_1": 3.0})


# ---- AgentsAsVecEnv --------------------------------------------------------------------------
def test_agents_as_vec_env_has_one_env_per_agent_and_copy_with_one_hot_ids():
    vec = AgentsAsVecEnv(make_env(TASK, num_envs=3, normalize=True, seed=0))
    assert vec.num_envs == 3 * 5
    assert vec.observation_space.shape == (10 + 5,) and vec.action_space.shape == (1,)
    obs = vec.reset()
    assert obs.shape == (15, 15) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs[:, 10:], np.tile(np.eye(5, dtype=np.float32), (3, 1)))
    assert all(vec.observation_space.contains(o) for o in obs)


def test_agents_as_vec_env_step_matches_the_native_env():
    vec = AgentsAsVecEnv(make_env(TASK, num_envs=3, normalize=True, seed=0))
    native = make_env(TASK, num_envs=3, normalize=True, seed=0)
    vec.seed(7)
    obs = vec.reset()
    native_obs, _ = native.reset(seed=7)
    rng = np.random.default_rng(0)
    for _ in range(3):
        actions = rng.uniform(-1, 1, size=(15, 1)).astype(np.float32)
        obs, rewards, dones, infos = vec.step(actions)
        per_copy = actions.reshape(3, 5, 1)
        native_obs, native_rew, _, _, _ = native.step(
            {a: per_copy[:, i] for i, a in enumerate(AGENTS)}
        )
        expected_obs = np.stack([native_obs[a] for a in AGENTS], axis=1).reshape(15, -1)
        expected_rew = np.stack([native_rew[a] for a in AGENTS], axis=1).reshape(15)
        np.testing.assert_allclose(obs[:, :10], expected_obs)
        np.testing.assert_allclose(rewards, expected_rew, rtol=1e-6)
        assert not dones.any() and all(info == {"TimeLimit.truncated": False} for info in infos)
    # shared reward: every agent of a copy gets the team reward
    np.testing.assert_allclose(
        rewards.reshape(3, 5), rewards.reshape(3, 5)[:, :1].repeat(5, axis=1)
    )


def test_agents_as_vec_env_autoresets_with_terminal_observation_after_48_steps():
    vec = AgentsAsVecEnv(make_env(TASK, num_envs=2, normalize=True, seed=0))
    vec.reset()
    zeros = np.zeros((vec.num_envs, 1), np.float32)
    for step in range(1, 49):
        obs, _, dones, infos = vec.step(zeros)
        if step < 48:
            assert not dones.any() and "terminal_observation" not in infos[0]
    assert dones.all()
    for k, info in enumerate(infos):
        final = info["terminal_observation"]
        assert info["TimeLimit.truncated"] is True
        assert final.shape == (15,) and final[TIME_REMAINING] == pytest.approx(-1.0)  # episode end
        np.testing.assert_array_equal(final[10:], np.eye(5)[k % 5])
    np.testing.assert_allclose(obs[:, TIME_REMAINING], 1.0)  # the next episode's first observation


def test_agents_as_vec_env_needs_equal_action_spaces():
    with pytest.raises(ValueError, match="normalize=True"):
        AgentsAsVecEnv(make_env(TASK, num_envs=2, normalize=False, seed=0))  # Pmax differs per unit


# ---- SharedPolicy ----------------------------------------------------------------------------
def test_shared_policy_predicts_all_agents_in_one_call_with_ids():
    class Recorder:
        observation_space = type("S", (), {"shape": (15,)})()

        def __init__(self):
            self.seen = []

        def predict(self, obs, deterministic=False):
            self.seen.append((obs.copy(), deterministic))
            return obs[:, 10:15].argmax(axis=1, keepdims=True).astype(np.float32) / 10.0, None

    model = Recorder()
    policy = SharedPolicy(model, AGENTS)
    env = make_env(TASK, split="test", framework="auto", normalize=True, seed=0)
    obs, info = env.reset(seed=0)
    policy.reset()
    action = policy.act(obs, info)
    assert len(model.seen) == 1 and model.seen[0][1] is True
    batch = model.seen[0][0]
    assert batch.shape == (5, 15)
    np.testing.assert_array_equal(batch[:, 10:], np.eye(5))
    assert list(action) == AGENTS
    np.testing.assert_allclose([action[a][0] for a in AGENTS], [0.0, 0.1, 0.2, 0.3, 0.4], rtol=1e-6)
    model.observation_space.shape = (5,)  # no room for the ids of 5 agents
    with pytest.raises(ValueError, match="one-hot"):
        SharedPolicy(model, AGENTS)


# ---- trainers: errors and smoke --------------------------------------------------------------
def test_trainers_reject_single_agent_tasks_and_unknown_algorithms():
    with pytest.raises(ValueError, match=r"single-agent task.*Trainer\.train\(\)"):
        train_independent_learners("battery_arbitrage", rounds=1, steps_per_round=8)
    with pytest.raises(ValueError, match=r"single-agent task.*Trainer\.train\(\)"):
        train_shared_policy("battery_arbitrage", total_timesteps=8)
    with pytest.raises(ValueError, match="unknown algorithm 'DQN'; valid: PPO, A2C, SAC, TD3"):
        train_shared_policy(TASK, "DQN", total_timesteps=8)
    with pytest.raises(ValueError, match="reward_scale"):
        train_shared_policy(TASK, total_timesteps=8, reward_scale=-1.0)


@pytest.fixture
def temp_folder(monkeypatch, tmp_path):
    """The system's temporary directory, emptied for one test: what SB3 leaves there shows."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_independent_learners_round_robin_counts_steps_and_calls_callbacks(temp_folder):
    calls = []
    models = train_independent_learners(
        TASK,
        "a2c",
        rounds=2,
        steps_per_round=50,
        seed=1,
        algo_kwargs={"n_steps": 10},
        callback_factory=lambda agent, round_index: calls.append((agent, round_index)),
    )
    assert list(models) == AGENTS and all(isinstance(m, A2C) for m in models.values())
    assert all(m.num_timesteps == 100 for m in models.values())
    assert calls == [(a, r) for r in range(2) for a in AGENTS]
    seeds = {m.seed for m in models.values()}
    assert len(seeds) == 5  # one derived seed per agent
    assert list(temp_folder.glob("SB3-*")) == []  # no empty SB3-<date> log folder per learn


def test_shared_policy_trains_with_off_policy_algorithm_and_fixed_reward_scale(temp_folder):
    model = train_shared_policy(
        TASK,
        "SAC",
        total_timesteps=400,
        n_envs=2,
        seed=0,
        reward_scale=1e-4,
        algo_kwargs={"learning_starts": 100, "batch_size": 32},
    )
    assert isinstance(model, SAC) and model.num_timesteps == 400
    assert list(temp_folder.glob("SB3-*")) == []
    env = make_env(TASK, split="test", framework="auto", normalize=True)
    summary = evaluate_days(SharedPolicy(model, env.possible_agents), env, [0], seed=0)
    assert summary["mean_length"] == 48


# ---- trainers learn ---------------------------------------------------------------------------
def _test_returns(policy) -> float:
    env = make_env(TASK, split="test", framework="auto", normalize=True)
    return evaluate_days(policy, env, TEST_DAYS, seed=0)["mean_return"]


def _random_and_hold_returns() -> tuple[float, float]:
    env = make_env(TASK, split="test", framework="auto", normalize=True)
    random = evaluate_days(RandomPolicy(env.action_space, seed=0), env, TEST_DAYS, seed=0)[
        "mean_return"
    ]

    class Hold:  # every unit at mid-range: what an untrained deterministic policy does
        def reset(self):
            return None

        def act(self, obs, info):
            return {a: np.zeros(1, np.float32) for a in obs}

    return random, evaluate_days(Hold(), env, TEST_DAYS, seed=0)["mean_return"]


@pytest.mark.slow
def test_independent_learners_beat_random_dispatch_on_test_days():
    # 5 agents x 4 rounds x 256 steps. Measured (team return, $/day, the 8 test days): trained
    # -3.39M, hold-mid-range -7.13M, random -8.07M; after 2 rounds of 256 or 512 steps it is
    # still about -5.7M (each agent learns against the others' changing policies).
    models = train_independent_learners(TASK, "PPO", rounds=4, steps_per_round=256, seed=0)
    assert list(models) == AGENTS and all(isinstance(m, PPO) for m in models.values())
    trained = _test_returns(SB3Policy(models))
    random, hold = _random_and_hold_returns()
    assert trained > 0.5 * random  # at most half of random's loss
    assert trained > 0.6 * hold  # and clearly better than the untrained (mid-range) policy


@pytest.mark.slow
def test_shared_policy_beats_random_dispatch_on_test_days():
    # 40k agent-steps = 2,000 steps of 4 copies x 5 agents, about 40 CPU-s. Measured ($/day of
    # the system, the 8 test days): trained about -1.29M, hold-mid-range -7.13M, random -8.07M;
    # at 20k agent-steps still about -3.8M.
    model = train_shared_policy(TASK, "PPO", total_timesteps=40_000, n_envs=4, seed=0)
    assert isinstance(model, PPO) and model.num_timesteps >= 40_000
    trained = _test_returns(SharedPolicy(model, AGENTS))
    random, hold = _random_and_hold_returns()
    assert trained > 0.2 * random
    assert trained > 0.35 * hold
