"""``predict_action``: SB3's ``predict`` without its per-call wrapping, equal to it bit for bit."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import A2C, DQN, PPO, SAC, TD3

from powerzoo.benchmarks.sb3_policy import (
    _GAUSSIAN_MEAN,
    _POLICY_PREDICT,
    SB3Policy,
    _route,
    predict_action,
    predicts_directly,
)
from powerzoo.rl import make_env


class _DiscreteEnv(gym.Env):
    """A Box observation and a Discrete action: nothing else matters here."""

    observation_space = gym.spaces.Box(-2.0, 2.0, shape=(3,), dtype=np.float32)
    action_space = gym.spaces.Discrete(4)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(3, dtype=np.float32), 0.0, False, False, {}


class _NarrowBoxEnv(_DiscreteEnv):
    """Action bounds much narrower than an untrained policy's means: the clip decides."""

    action_space = gym.spaces.Box(-1e-3, 1e-3, shape=(2,), dtype=np.float32)


class _DictEnv(_DiscreteEnv):
    observation_space = gym.spaces.Dict({"x": gym.spaces.Box(-1.0, 1.0, shape=(2,))})

    def reset(self, *, seed=None, options=None):
        return {"x": np.zeros(2, dtype=np.float32)}, {}


def _observations(space: gym.spaces.Box, n: int = 64) -> np.ndarray:
    """Observations inside and well outside the space's bounds."""
    rng = np.random.default_rng(0)
    low = np.where(np.isfinite(space.low), space.low, -3.0)
    high = np.where(np.isfinite(space.high), space.high, 3.0)
    span = high - low
    return rng.uniform(low - span, high + span, size=(n, *space.shape)).astype(space.dtype)


def _assert_same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a, b)


@pytest.mark.parametrize(
    ("algorithm", "kwargs", "route"),
    [
        (PPO, {}, _GAUSSIAN_MEAN),
        (A2C, {}, _GAUSSIAN_MEAN),
        (PPO, {"use_sde": True}, _POLICY_PREDICT),
        (SAC, {}, _POLICY_PREDICT),
        (TD3, {}, _POLICY_PREDICT),
    ],
)
@pytest.mark.parametrize("normalize", [True, False])
def test_equal_to_predict_on_single_and_batched_observations(algorithm, kwargs, route, normalize):
    env = make_env("battery_arbitrage", "train", normalize=normalize, seed=0)
    model = algorithm("MlpPolicy", env, seed=1, device="cpu", **kwargs)
    assert _route(model) == route
    obs = _observations(env.observation_space)
    for o in obs[:16]:
        _assert_same(predict_action(model, o), model.predict(o, deterministic=True)[0])
    _assert_same(predict_action(model, obs), model.predict(obs, deterministic=True)[0])


def test_a_sample_draws_the_same_stream_as_predict():
    env = make_env("battery_arbitrage", "train", normalize=True, seed=0)
    model = PPO("MlpPolicy", env, seed=1, device="cpu")
    obs = _observations(env.observation_space, 8)
    torch.manual_seed(3)
    expected = [model.predict(o, deterministic=False)[0] for o in obs]
    torch.manual_seed(3)
    got = [predict_action(model, o, deterministic=False) for o in obs]
    for a, b in zip(got, expected, strict=True):
        _assert_same(a, b)
    assert len({a.tobytes() for a in got}) > 1  # samples, not the mode


@pytest.mark.parametrize("env_class", [_DiscreteEnv, _NarrowBoxEnv])
def test_discrete_and_clipped_actions_and_evaluation_mode(env_class):
    env = env_class()
    model = PPO("MlpPolicy", env, seed=0, device="cpu", n_steps=8, batch_size=8)
    obs = _observations(env.observation_space)
    model.policy.set_training_mode(True)  # as ``learn`` leaves it
    _assert_same(predict_action(model, obs[0]), model.predict(obs[0], deterministic=True)[0])
    assert not model.policy.training  # as ``predict`` leaves it
    _assert_same(predict_action(model, obs), model.predict(obs, deterministic=True)[0])
    if env_class is _NarrowBoxEnv:
        assert np.any(np.abs(predict_action(model, obs)) == np.float32(1e-3))  # clipped


def test_models_with_their_own_predict_or_dict_observations_go_through_predict():
    dqn = DQN("MlpPolicy", _DiscreteEnv(), seed=0, device="cpu", learning_starts=0)
    assert not predicts_directly(dqn)  # its predict explores when not deterministic
    obs = _observations(_DiscreteEnv.observation_space, 4)
    _assert_same(predict_action(dqn, obs[0]), dqn.predict(obs[0], deterministic=True)[0])
    dict_model = PPO("MultiInputPolicy", _DictEnv(), seed=0, device="cpu", n_steps=8, batch_size=8)
    assert not predicts_directly(dict_model)
    o = {"x": np.array([0.5, -0.25], dtype=np.float32)}
    _assert_same(predict_action(dict_model, o), dict_model.predict(o, deterministic=True)[0])


def test_a_wrong_observation_shape_raises_predicts_error():
    model = PPO("MlpPolicy", _DiscreteEnv(), seed=0, device="cpu", n_steps=8, batch_size=8)
    with pytest.raises(ValueError, match="Unexpected observation shape"):
        predict_action(model, np.zeros(5, dtype=np.float32))


def test_sb3_policy_acts_as_predict_does():
    env = make_env("battery_arbitrage", "train", normalize=True, seed=0)
    model = SAC("MlpPolicy", env, seed=1, device="cpu")
    policy = SB3Policy(model)
    for o in _observations(env.observation_space, 8):
        _assert_same(policy.act(o, {}), model.predict(o, deterministic=True)[0])
