"""Tests of powerzoo.rl.step.trainer: one-step-per-call training / evaluation of SB3 models."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import REPO_ROOT, SAFETY_TIMEOUT_S
from stable_baselines3 import A2C, DQN, PPO, SAC, TD3
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from powerzoo.rl import make_env
from powerzoo.rl.step.trainer import StepResult, StepTrainer, StepTrainerConfig

QUIET = {"headless": True, "disable_progressbar": True}


class ToyEnv(gym.Env):
    """Reach a fixed target action; 10-step episodes ending by time-out;
    counts renders and closes."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, horizon: int = 10, render_mode: str | None = None) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.horizon, self.render_mode = horizon, render_mode
        self.renders = self.closes = 0
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t / self.horizon, 0.5, -0.5], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        a = float(np.asarray(action).reshape(-1)[0])
        info = {"constraint_costs": np.array([abs(a), 0.0]), "cost_sum": abs(a)}
        return self._obs(), -((a - 0.5) ** 2), False, self.t >= self.horizon, info

    def render(self):
        self.renders += 1
        return np.zeros((4, 4, 3), dtype=np.uint8)

    def close(self) -> None:
        self.closes += 1


def battery(seed: int = 0, **kwargs):
    return make_env("battery_arbitrage", normalize=True, seed=seed, **kwargs)


def params(model) -> np.ndarray:
    return (
        torch.nn.utils.parameters_to_vector(model.policy.parameters()).detach().cpu().numpy().copy()
    )


# ------------------------------------------------------------------------------------------ config


def test_config_from_dict_round_trip_and_defaults():
    cfg = StepTrainerConfig.from_dict(
        {"timesteps": 10, "headless": True, "disable_progressbar": None}
    )
    assert (cfg.timesteps, cfg.headless, cfg.disable_progressbar) == (10, True, None)
    assert StepTrainerConfig.from_dict(cfg.to_dict()) == cfg
    default = StepTrainerConfig()
    assert default.timesteps == 100_000 and default.environment_info == "episode"
    assert default.render_interval == 1 and default.close_environment_at_exit is True
    assert default.stochastic_evaluation is False and default.disable_progressbar is False


@pytest.mark.parametrize(
    "data, field",
    [
        ({"timestep": 5}, "timestep"),
        ({"headless": True, "bogus_field": 1}, "bogus_field"),
        ({"timesteps": "100"}, "timesteps"),
        ({"timesteps": 0}, "timesteps"),
        ({"timesteps": True}, "timesteps"),
        ({"headless": "yes"}, "headless"),
        ({"render_interval": 0}, "render_interval"),
        ({"disable_progressbar": 1}, "disable_progressbar"),
        ({"close_environment_at_exit": None}, "close_environment_at_exit"),
        ({"environment_info": 3}, "environment_info"),
        ({"stochastic_evaluation": "no"}, "stochastic_evaluation"),
    ],
)
def test_bad_config_raises_value_error_naming_the_field(data, field):
    with pytest.raises(ValueError, match=field):
        StepTrainerConfig.from_dict(data)


def test_trainer_rejects_bad_config_before_touching_the_agent():
    env = ToyEnv()
    model = PPO("MlpPolicy", env, n_steps=8, batch_size=8, seed=0)
    with pytest.raises(ValueError, match="not_a_field"):
        StepTrainer(env, model, {"not_a_field": 1})
    with pytest.raises(ValueError, match="render_interval"):
        StepTrainer(env, model, {"render_interval": -1})
    assert model.num_timesteps == 0


# -------------------------------------------------------------------------------------- the snippet


def test_snippet_sac_learns_after_learning_starts_and_eval_is_pure(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what SB3 leaves there shows
    env = battery()
    model = SAC("MlpPolicy", env, learning_starts=20, batch_size=32, seed=0)
    cfg = {"timesteps": 60, **QUIET}
    trainer = StepTrainer(env=env, agent=model, cfg=cfg)
    assert trainer.venv is model.get_env()  # the agent's own DummyVecEnv (with Monitor) is reused
    before = params(model)
    for timestep in range(cfg["timesteps"]):
        obs, reward, terminated, truncated, info = trainer.train(timestep=timestep)
        if timestep + 1 <= model.learning_starts:
            np.testing.assert_array_equal(params(model), before)  # no update during warm-up
        assert model.num_timesteps == timestep + 1
    assert isinstance(obs, np.ndarray) and obs.shape == env.observation_space.shape
    assert (
        isinstance(reward, float) and isinstance(terminated, bool) and isinstance(truncated, bool)
    )
    assert isinstance(info, dict) and "price_per_mwh" in info
    assert model.replay_buffer.pos == 60
    assert model._n_updates == 60 - model.learning_starts
    trained = params(model)
    assert not np.allclose(trained, before)

    for timestep in range(cfg["timesteps"]):
        result = trainer.eval(timestep=timestep)
    assert isinstance(result, StepResult) and len(result) == 5
    np.testing.assert_array_equal(params(model), trained)
    assert model.num_timesteps == 60 and model.replay_buffer.pos == 60
    assert len(trainer.eval_episodes) == 1 and trainer.eval_episodes[0]["length"] == 48
    assert trainer.train_calls == 60 and trainer.eval_calls == 60
    trainer.close()
    assert list(tmp_path.glob("SB3-*")) == []  # no empty SB3-<date> log folder


def test_snippet_ppo_updates_when_the_rollout_is_full():
    env = battery()
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=2, seed=0)
    trainer = StepTrainer(env=env, agent=model, cfg={"timesteps": 64, **QUIET})
    before = params(model)
    for timestep in range(31):
        trainer.train(timestep=timestep)
    assert model.rollout_buffer.pos == 31 and model._n_updates == 0
    np.testing.assert_array_equal(params(model), before)
    trainer.train(timestep=31)  # 32nd step fills the buffer: update, then an empty buffer
    assert model._n_updates == 2 and model.rollout_buffer.pos == 0 and not model.rollout_buffer.full
    after_first = params(model)
    assert not np.allclose(after_first, before)
    for timestep in range(32, 64):
        trainer.train(timestep=timestep)
    assert model.num_timesteps == 64 and model._n_updates == 4
    trained = params(model)
    for timestep in range(50):
        trainer.eval(timestep=timestep)
    np.testing.assert_array_equal(params(model), trained)
    assert model.num_timesteps == 64 and model.rollout_buffer.pos == 0
    trainer.close()


@pytest.mark.parametrize("algo", ["a2c", "td3", "dqn"])
def test_other_algorithms_update(algo):
    if algo == "dqn":
        env = gym.make("CartPole-v1")
        model = DQN("MlpPolicy", env, learning_starts=10, train_freq=4, batch_size=16, seed=0)
    elif algo == "td3":
        env = ToyEnv()
        noise = NormalActionNoise(np.zeros(1), 0.1 * np.ones(1))
        model = TD3(
            "MlpPolicy",
            env,
            learning_starts=10,
            batch_size=16,
            action_noise=noise,
            policy_delay=1,
            seed=0,
        )
    else:
        env = ToyEnv()
        model = A2C("MlpPolicy", env, n_steps=5, seed=0)
    trainer = StepTrainer(env, model, QUIET)
    before = params(model)
    for _ in range(25):
        trainer.train()
    assert model.num_timesteps == 25
    assert not np.allclose(params(model), before)
    trained = params(model)
    for _ in range(10):
        trainer.eval()
    np.testing.assert_array_equal(params(model), trained)
    trainer.close()


# ------------------------------------------------------------------------------------------ VecEnv


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_vec_env_returns_batched_arrays(algo):
    venv = DummyVecEnv([lambda: battery(seed=0), lambda: battery(seed=1)])
    if algo == "ppo":
        model = PPO("MlpPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, seed=0)
    else:
        model = SAC("MlpPolicy", venv, learning_starts=20, batch_size=32, seed=0)
    trainer = StepTrainer(venv, model, {"timesteps": 50, **QUIET})
    assert trainer.n_envs == 2
    ends = []
    for timestep in range(50):
        obs, reward, terminated, truncated, info = trainer.train(timestep=timestep)
        assert obs.shape == (2, 6) and reward.shape == (2,)
        assert terminated.dtype == bool and truncated.shape == (2,)
        assert isinstance(info, list) and len(info) == 2
        if truncated.any():
            ends.append(timestep)
            assert all("terminal_observation" in i for i in info)
    assert ends == [47]  # 48-step days, both envs in step
    assert model.num_timesteps == 100
    assert len(trainer.train_episodes) == 2
    obs, reward, terminated, truncated, info = trainer.eval()
    assert obs.shape == (2, 6) and reward.shape == (2,) and len(info) == 2
    assert model.num_timesteps == 100
    trainer.close()


def test_env_mismatch_is_rejected():
    venv = DummyVecEnv([lambda: battery(seed=0), lambda: battery(seed=1)])
    model = PPO("MlpPolicy", battery(), n_steps=16, batch_size=16, seed=0)
    with pytest.raises(ValueError, match="sub-envs"):
        StepTrainer(venv, model, QUIET)


def test_a_different_plain_env_is_attached_and_unbatched():
    model = SAC("MlpPolicy", battery(seed=0), learning_starts=5, seed=0)
    other = battery(seed=3)
    trainer = StepTrainer(other, model, QUIET)
    assert trainer.venv is model.get_env()
    obs, reward, *_ = trainer.train()
    assert obs.shape == (6,) and isinstance(reward, float)
    trainer.close()


# ------------------------------------------------------------------------------- truncation / modes


def test_time_out_bootstraps_like_sb3():
    env = ToyEnv(horizon=10)
    model = PPO("MlpPolicy", env, n_steps=16, batch_size=16, seed=0)
    trainer = StepTrainer(env, model, QUIET)
    rewards = []
    for _ in range(10):
        obs, reward, terminated, truncated, info = trainer.train()
        rewards.append(reward)
    assert truncated and not terminated
    terminal = info["terminal_observation"]
    with torch.no_grad():
        value = model.policy.predict_values(model.policy.obs_to_tensor(terminal)[0]).item()
    stored = model.rollout_buffer.rewards[:10, 0]
    np.testing.assert_allclose(stored[:9], rewards[:9], rtol=1e-6)
    np.testing.assert_allclose(stored[9], rewards[9] + model.gamma * value, rtol=1e-5)
    np.testing.assert_allclose(obs, ToyEnv()._obs())  # auto-reset: obs starts the next episode

    sac = SAC("MlpPolicy", ToyEnv(horizon=10), learning_starts=100, seed=0)
    trainer = StepTrainer(sac.get_env(), sac, QUIET)
    for _ in range(10):
        obs, _, _, truncated, info = trainer.train()
    assert truncated.all()
    buffer = sac.replay_buffer
    assert buffer.dones[9, 0] == 1 and buffer.timeouts[9, 0] == 1
    np.testing.assert_allclose(buffer.next_observations[9, 0], info[0]["terminal_observation"])


def test_eval_on_the_shared_env_closes_the_training_episode_as_truncated():
    env = ToyEnv(horizon=10)
    sac = SAC("MlpPolicy", env, learning_starts=100, seed=0)
    trainer = StepTrainer(env, sac, QUIET)
    for _ in range(4):
        trainer.train()
    assert sac.replay_buffer.timeouts[3, 0] == 0
    obs, *_ = trainer.eval()
    buffer = sac.replay_buffer
    assert buffer.dones[3, 0] == 1 and buffer.timeouts[3, 0] == 1  # truncated: still bootstraps
    np.testing.assert_allclose(obs, [0.1, 0.5, -0.5])  # evaluation started its own episode
    for _ in range(3):
        trainer.eval()
    obs, *_ = trainer.train()  # back to training: fresh episode, not the evaluation one
    np.testing.assert_allclose(obs, [0.1, 0.5, -0.5])
    for _ in range(9):
        trainer.train()
    assert [e["length"] for e in trainer.train_episodes] == [10]

    ppo = PPO("MlpPolicy", ToyEnv(horizon=10), n_steps=16, batch_size=16, seed=0)
    trainer = StepTrainer(ppo.get_env(), ppo, QUIET)
    raw = [trainer.train()[1][0] for _ in range(4)]
    last_obs = ppo._last_obs.copy()
    with torch.no_grad():
        value = ppo.policy.predict_values(torch.as_tensor(last_obs)).item()
    trainer.eval()
    np.testing.assert_allclose(
        ppo.rollout_buffer.rewards[3, 0], raw[3] + ppo.gamma * value, rtol=1e-5
    )
    trainer.train()
    assert ppo.rollout_buffer.episode_starts[4, 0] == 1


def test_separate_eval_env_leaves_the_training_episode_alone():
    env = ToyEnv(horizon=10)
    eval_env = ToyEnv(horizon=10)
    model = SAC("MlpPolicy", env, learning_starts=100, seed=0)
    trainer = StepTrainer(env, model, QUIET, eval_env=eval_env)
    for _ in range(4):
        trainer.train()
    for _ in range(12):
        obs, reward, terminated, truncated, info = trainer.eval()
    assert isinstance(reward, float)
    for _ in range(6):
        trainer.train()
    assert [e["length"] for e in trainer.train_episodes] == [10]
    assert [e["length"] for e in trainer.eval_episodes] == [10]
    assert model.replay_buffer.timeouts[:10, 0].tolist() == [0] * 9 + [1]
    trainer.close()
    assert env.closes == 1 and eval_env.closes == 1


def test_reset_starts_new_episodes():
    env = ToyEnv(horizon=10)
    model = SAC("MlpPolicy", env, learning_starts=100, seed=0)
    trainer = StepTrainer(env, model, QUIET)
    for _ in range(3):
        trainer.train()
    trainer.reset()
    assert model.replay_buffer.timeouts[2, 0] == 1
    np.testing.assert_allclose(model._last_obs[0], [0.0, 0.5, -0.5])
    for _ in range(10):
        trainer.train()
    assert [e["length"] for e in trainer.train_episodes] == [10]
    assert model.num_timesteps == 13


def test_vecnormalize_is_frozen_while_evaluating():
    venv = VecNormalize(DummyVecEnv([ToyEnv]), norm_obs=True, norm_reward=True)
    model = PPO("MlpPolicy", venv, n_steps=8, batch_size=8, seed=0)
    trainer = StepTrainer(venv, model, QUIET)
    raw = []
    for _ in range(5):
        trainer.train()
    count = venv.obs_rms.count
    for _ in range(5):
        trainer.eval()
    assert venv.obs_rms.count == count and not venv.training
    trainer.train()
    raw.append(float(venv.get_original_reward()[0]))
    assert venv.training and venv.obs_rms.count > count
    # episode returns are kept in the env's own reward scale, not the normalised one
    for _ in range(9):
        _, reward, *_ = trainer.train()
        raw.append(float(venv.get_original_reward()[0]))
        assert reward[0] != pytest.approx(raw[-1])
    episode = trainer.train_episodes[0]
    assert episode["length"] == 10 and episode["return"] == pytest.approx(sum(raw), rel=1e-5)
    np.testing.assert_allclose(episode["costs"][1], 0.0)


@pytest.mark.parametrize("stochastic", [False, True])
def test_stochastic_evaluation_samples(stochastic):
    env = ToyEnv()
    model = SAC("MlpPolicy", env, seed=0)
    trainer = StepTrainer(env, model, {**QUIET, "stochastic_evaluation": stochastic})
    first = [trainer.eval()[1] for _ in range(5)]
    trainer.reset()
    second = [trainer.eval()[1] for _ in range(5)]
    assert (
        first != second
    ) == stochastic  # same observations: only sampling can change the rewards


# ------------------------------------------------------------------------- logging, rendering, bars


class _Spy:
    def __init__(self, logger):
        self.records: dict[str, list[float]] = {}
        self._record_mean = logger.record_mean

    def __call__(self, key, value, exclude=None):
        self.records.setdefault(key, []).append(value)
        self._record_mean(key, value, exclude)


def test_episode_summaries_are_logged(monkeypatch):
    env = battery()
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0)
    trainer = StepTrainer(env, model, QUIET)
    spy = _Spy(model.logger)
    monkeypatch.setattr(model.logger, "record_mean", spy)
    for _ in range(48):
        trainer.train()
    episode = trainer.train_episodes[0]
    assert spy.records["rollout/episode_length"] == [48]
    assert spy.records["rollout/episode_return"] == [pytest.approx(episode["return"])]
    assert spy.records["rollout/episode_cost_soc_violation"] == [
        pytest.approx(float(episode["costs"][0]))
    ]
    assert "rollout/episode_cost_sum" in spy.records
    for _ in range(48):
        trainer.eval()
    assert spy.records["eval/episode_length"] == [48]


def test_an_info_key_is_logged_every_step(monkeypatch):
    env = ToyEnv()
    model = SAC("MlpPolicy", env, learning_starts=100, seed=0)
    trainer = StepTrainer(env, model, {**QUIET, "environment_info": "cost_sum"})
    spy = _Spy(model.logger)
    monkeypatch.setattr(model.logger, "record_mean", spy)
    for _ in range(5):
        trainer.train()
    assert len(spy.records["rollout/cost_sum"]) == 5
    assert not any("episode" in k for k in spy.records)
    trainer.eval()
    assert len(spy.records["eval/cost_sum"]) == 1


def test_render_interval_and_headless():
    env = ToyEnv(render_mode="rgb_array")
    model = PPO("MlpPolicy", env, n_steps=8, batch_size=8, seed=0)
    trainer = StepTrainer(env, model, {"render_interval": 3, "disable_progressbar": True})
    for timestep in range(9):
        trainer.train(timestep=timestep)
    assert env.renders == 3  # timesteps 0, 3, 6

    headless = ToyEnv(render_mode="rgb_array")
    model = PPO("MlpPolicy", headless, n_steps=8, batch_size=8, seed=0)
    trainer = StepTrainer(headless, model, QUIET)
    for _ in range(5):
        trainer.train()
        trainer.eval()
    assert headless.renders == 0


def test_render_without_render_mode_warns_once():
    env = ToyEnv()
    model = PPO("MlpPolicy", env, n_steps=8, batch_size=8, seed=0)
    trainer = StepTrainer(env, model, {"disable_progressbar": True})
    with pytest.warns(UserWarning, match="render_mode"):
        trainer.train()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer.train()  # warned once only
    assert env.renders == 0


def test_progress_bars_per_mode_and_tty_rule():
    env = ToyEnv()
    model = PPO("MlpPolicy", env, n_steps=8, batch_size=8, seed=0)
    trainer = StepTrainer(env, model, {"timesteps": 7, "headless": True})
    trainer.train()
    trainer.train(timesteps=20)
    trainer.eval()
    bars = trainer._bars
    assert bars["train"].n == 2 and bars["train"].total == 20
    assert bars["eval"].n == 1 and bars["eval"].total == 7
    assert model._total_timesteps == 20
    trainer.close()
    assert not trainer._bars

    auto = StepTrainer(ToyEnv(), model, {"headless": True, "disable_progressbar": None})
    auto.train()
    assert auto._bars["train"].disable == (not sys.stderr.isatty())
    auto.close()


def test_internal_counter_and_timesteps_override():
    env = ToyEnv()
    model = SAC("MlpPolicy", env, learning_starts=100, seed=0)
    trainer = StepTrainer(env, model, {"timesteps": 10, **QUIET})
    for _ in range(3):
        trainer.train()
    assert trainer._next_timestep["train"] == 3
    trainer.train(timestep=10)
    assert trainer._next_timestep["train"] == 11
    assert model._current_progress_remaining == pytest.approx(1 - 4 / 10)
    with pytest.raises(ValueError, match="timestep"):
        trainer.train(timestep=-1)


# ------------------------------------------------------------------------------------------ closing


def test_close_is_idempotent_and_final():
    env = ToyEnv()
    model = PPO("MlpPolicy", env, n_steps=8, batch_size=8, seed=0)
    trainer = StepTrainer(env, model, QUIET)
    trainer.train()
    hook = trainer._atexit_hook
    assert hook is not None
    trainer.close()
    trainer.close()
    hook()  # what atexit would run: a no-op now
    assert env.closes == 1 and trainer.closed
    with pytest.raises(RuntimeError, match="closed"):
        trainer.train()

    with StepTrainer(ToyEnv(), PPO("MlpPolicy", ToyEnv(), n_steps=8, batch_size=8), QUIET) as t:
        t.eval()
    assert t.closed

    kept = StepTrainer(env, model, {**QUIET, "close_environment_at_exit": False})
    assert kept._atexit_hook is None


def test_env_is_closed_once_at_interpreter_exit(tmp_path):
    script = textwrap.dedent(
        """
        import gymnasium as gym, numpy as np
        from stable_baselines3 import PPO
        from powerzoo.rl.step.trainer import StepTrainer

        class Env(gym.Env):
            observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
            action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
            def reset(self, *, seed=None, options=None):
                return np.zeros(2, np.float32), {}
            def step(self, action):
                return np.zeros(2, np.float32), 0.0, False, False, {}
            def close(self):
                print("closed", flush=True)

        env = Env()
        trainer = StepTrainer(
            env, PPO("MlpPolicy", env, n_steps=4, batch_size=4), {"headless": True}
        )
        trainer.train()
        """
    )
    path = tmp_path / "exit_script.py"
    path.write_text(script)
    root = REPO_ROOT
    out = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=SAFETY_TIMEOUT_S,  # a guard against a hang only
        cwd=root,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("closed") == 1


# ----------------------------------------------------------------------------------------- learning


@pytest.mark.xfail(
    reason="battery_arbitrage now settles its storage and prices wear at 15 $/MWh: the oracle "
    "earns ~220 $/day over random's ~0, and PPO at 2,048 steps has not learnt to stay idle; "
    "the preset is being re-tuned with the benchmark",
    strict=False,
)
def test_ppo_trained_step_by_step_beats_random_on_test_days():
    from powerzoo.benchmarks.evaluation import evaluate_days
    from powerzoo.benchmarks.policies import RandomPolicy, SB3Policy

    test_env = make_env("battery_arbitrage", split="test", normalize=True)
    days = [0, 9, 18, 27, 36, 45, 54, 63]
    # Rewards are dollars per half hour (hundreds): normalise them for PPO's value loss.
    venv = VecNormalize(DummyVecEnv([battery]), norm_obs=False, norm_reward=True)
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=64, seed=0)
    untrained = evaluate_days(SB3Policy(model), test_env, days)["mean_return"]
    trainer = StepTrainer(venv, model, {"timesteps": 2048, **QUIET})
    for timestep in range(2048):
        trainer.train(timestep=timestep)
    trained = evaluate_days(SB3Policy(model), test_env, days)["mean_return"]
    random = evaluate_days(RandomPolicy(test_env.action_space, seed=0), test_env, days)[
        "mean_return"
    ]
    assert trained > random + 500.0, (trained, random)
    assert trained > untrained + 500.0, (trained, untrained)


@pytest.mark.slow
def test_sac_trained_step_by_step_beats_random_on_test_days():
    from powerzoo.benchmarks.evaluation import evaluate_days
    from powerzoo.benchmarks.policies import RandomPolicy, SB3Policy

    test_env = make_env("battery_arbitrage", split="test", normalize=True)
    days = [0, 9, 18, 27, 36, 45, 54, 63]
    env = battery()
    # measured, seed 0, 8 test days: trained 12,337 $/day against random's -3,127 (800 steps:
    # 140; 1,500 steps: 8,896)
    model = SAC("MlpPolicy", env, learning_starts=200, batch_size=128, seed=0)
    trainer = StepTrainer(env=env, agent=model, cfg={"timesteps": 1000, **QUIET})
    for timestep in range(1000):
        trainer.train(timestep=timestep)
    trained = evaluate_days(SB3Policy(model), test_env, days)["mean_return"]
    random = evaluate_days(RandomPolicy(test_env.action_space, seed=0), test_env, days)[
        "mean_return"
    ]
    assert trained > random + 500.0, (trained, random)


def test_continues_after_model_learn():
    env = ToyEnv(horizon=10)
    model = SAC("MlpPolicy", env, learning_starts=100, seed=0)
    model.learn(12)
    trainer = StepTrainer(env, model, QUIET)  # no reset: the episode in progress goes on
    for _ in range(5):
        trainer.train()
    assert model.num_timesteps == 17 and model.replay_buffer.pos == 17
    assert model.replay_buffer.timeouts[:17, 0].tolist() == [0] * 9 + [1] + [0] * 7
    trainer.eval()  # abandons the training episode in progress (7 steps in)
    assert model.replay_buffer.timeouts[16, 0] == 1 and model.replay_buffer.dones[16, 0] == 1
