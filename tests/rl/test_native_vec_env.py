"""SB3 on the native vector env: the VecEnv contract, SB3 training on it,
VecNormalize, the Trainer default."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from helpers import REPO_ROOT
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor, VecNormalize

from powerzoo.envs.introspect import inspect_env
from powerzoo.rl import make_env
from powerzoo.rl.sb3.callbacks import ConstraintCostCallback
from powerzoo.rl.sb3.native_vec_env import (
    DEFAULT_INFO_KEYS,
    NativeVecEnv,
    make_native_vec_env,
    merge_reset_options,
)

TASK = "battery_arbitrage"  # 48 half-hour steps, one constraint (soc_violation)
HORIZON = 48


def _actions(rng: np.random.Generator, venv: VecEnv) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=(venv.num_envs, *venv.action_space.shape)).astype(np.float32)


# ---- the VecEnv contract -------------------------------------------------------------------------
def test_shapes_dtypes_and_per_env_infos():
    venv = NativeVecEnv.make(TASK, 4, normalize=True)
    assert isinstance(venv, VecEnv) and venv.num_envs == 4
    assert venv.observation_space.shape == (6,) and venv.action_space.shape == (1,)
    obs = venv.reset()
    assert obs.shape == (4, 6) and obs.dtype == np.float32
    assert len(venv.reset_infos) == 4
    obs, rewards, dones, infos = venv.step(_actions(np.random.default_rng(0), venv))
    assert (
        obs.shape == (4, 6)
        and obs.dtype == np.float32
        and all(venv.observation_space.contains(o) for o in obs)
    )
    assert rewards.shape == (4,) and rewards.dtype == np.float32
    assert dones.shape == (4,) and dones.dtype == bool and not dones.any()
    assert isinstance(infos, list) and len(infos) == 4
    for info in infos:
        assert set(info) == {*DEFAULT_INFO_KEYS, "TimeLimit.truncated"}
        assert info["constraint_costs"].shape == (1,) and isinstance(info["cost_sum"], float)
        assert isinstance(info["is_safe"], bool) and info["TimeLimit.truncated"] is False
        assert info["cost_sum"] == pytest.approx(float(info["constraint_costs"].sum()))
        assert info["is_safe"] == (info["cost_sum"] == 0.0)


def test_rows_match_single_envs_and_terminal_observation_is_the_last_obs():
    days = [0, 5, 11]
    venv = NativeVecEnv.make(TASK, 3, normalize=True)
    venv.set_options([{"day_id": d} for d in days])
    singles = [make_env(TASK, normalize=True) for _ in days]
    obs = venv.reset()
    for k, (env, day) in enumerate(zip(singles, days, strict=True)):
        np.testing.assert_allclose(obs[k], env.reset(options={"day_id": day})[0])
    rng = np.random.default_rng(1)
    for t in range(1, HORIZON + 1):
        actions = _actions(rng, venv)
        obs, rewards, dones, infos = venv.step(actions)
        for k, env in enumerate(singles):
            s_obs, s_reward, s_term, s_trunc, s_info = env.step(actions[k])
            assert rewards[k] == pytest.approx(s_reward, rel=1e-6)
            np.testing.assert_allclose(infos[k]["constraint_costs"], s_info["constraint_costs"])
            assert bool(dones[k]) == (s_term or s_trunc) == (t == HORIZON)
            if t < HORIZON:
                np.testing.assert_allclose(obs[k], s_obs, rtol=1e-6)
                assert "terminal_observation" not in infos[k]
            else:  # the horizon: truncated, last obs kept, the row already restarted
                assert s_trunc and not s_term and infos[k]["TimeLimit.truncated"] is True
                np.testing.assert_allclose(infos[k]["terminal_observation"], s_obs, rtol=1e-6)
    runner = inspect_env(venv.env).runner
    new_days = runner.task.episode_day(runner.state)
    assert (runner.task.time_index(runner.state) == 0).all()
    for k in range(3):  # the returned obs is the first obs of the next episode
        np.testing.assert_allclose(
            obs[k], singles[k].reset(options={"day_id": int(new_days[k])})[0], rtol=1e-6
        )


@pytest.mark.parametrize("task", ["battery_arbitrage", "dc_microgrid"])
def test_a_one_env_batch_reproduces_sb3_dummy_vec_env_exactly(task):
    native = NativeVecEnv.make(task, 1, normalize=True)
    dummy = DummyVecEnv([functools.partial(make_env, task, normalize=True)])
    native.seed(3)
    dummy.seed(3)
    np.testing.assert_array_equal(native.reset(), dummy.reset())
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(300):  # crosses episode ends (48 steps; dc_microgrid: 288, stochastic workload)
        actions = _actions(rng, native)
        o1, r1, d1, i1 = native.step(actions)
        o2, r2, d2, i2 = dummy.step(actions)
        np.testing.assert_allclose(o1, o2, rtol=1e-6)
        np.testing.assert_allclose(r1, r2, rtol=1e-6)
        assert (d1 == d2).all()
        if d1[0]:
            ends += 1
            np.testing.assert_allclose(
                i1[0]["terminal_observation"], i2[0]["terminal_observation"], rtol=1e-6
            )
            assert i1[0]["TimeLimit.truncated"] == i2[0]["TimeLimit.truncated"]
    assert ends >= 1


def _rollout(venv: VecEnv, n_steps: int = 60) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    obs = [venv.reset()]
    rewards = []
    for _ in range(n_steps):
        o, r, _, _ = venv.step(_actions(rng, venv))
        obs.append(o)
        rewards.append(r)
    return np.stack(obs), np.stack(rewards)


def test_seeding_is_deterministic_and_used_once():
    a, b = NativeVecEnv.make(TASK, 8), NativeVecEnv.make(TASK, 8)
    assert a.seed(7) == list(range(7, 15))
    b.seed(7)
    obs_a, rew_a = _rollout(a)
    obs_b, rew_b = _rollout(b)
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(rew_a, rew_b)
    b.seed(8)
    assert not np.array_equal(_rollout(b)[0], obs_a)
    first = a.reset()  # no seed: the stream goes on, not a replay of seed 7
    assert not np.array_equal(first, obs_a[0])


def test_reset_options_for_all_envs_or_one_day_per_env():
    venv = NativeVecEnv.make(TASK, 3)
    runner = inspect_env(venv.env).runner
    venv.set_options({"day_id": 4})
    venv.reset()
    assert runner.task.episode_day(runner.state).tolist() == [4, 4, 4]
    venv.set_options([{"day_id": 1}, {"day_id": 2}, {"day_id": 9}])
    venv.reset()
    assert runner.task.episode_day(runner.state).tolist() == [1, 2, 9]
    venv.set_options([{"day_id": 1}, {}, {}])
    with pytest.raises(ValueError, match="set it for every env"):
        venv.reset()
    assert merge_reset_options([{}, {}]) is None


def test_attributes_methods_and_wrappers():
    venv = NativeVecEnv.make(TASK, 4, normalize=True)
    assert venv.get_attr("num_envs") == [4, 4, 4, 4]
    assert venv.get_attr("render_mode", indices=[0, 2]) == [None, None]
    assert venv.env_method("constraint_names", indices=1) == [("soc_violation",)]
    assert venv.constraint_names() == ("soc_violation",)
    assert venv.env_is_wrapped(gym.Wrapper) == [False] * 4
    venv.set_attr("custom_flag", 3)
    assert venv.get_attr("custom_flag") == [3] * 4
    with pytest.raises(ValueError, match="share one batched env"):
        venv.set_attr("custom_flag", 4, indices=[0])
    with pytest.raises(AttributeError):
        venv.get_attr("no_such_attribute")


def test_info_keys_all_and_a_wrong_key():
    everything = NativeVecEnv.make(TASK, 2, info_keys="all")
    everything.reset()
    _, _, _, infos = everything.step(np.zeros((2, 1), dtype=np.float32))
    assert {"soc", "day_id", "action_applied", "cost_soc_violation", "TimeLimit.truncated"} <= set(
        infos[0]
    )
    assert not {"final_obs", "final_info"} & set(infos[0])
    wrong = NativeVecEnv.make(TASK, 2, info_keys=("constraint_costs", "costs_typo"))
    wrong.reset()
    with pytest.raises(ValueError, match="costs_typo"):
        wrong.step(np.zeros((2, 1), dtype=np.float32))


def test_a_next_step_vector_env_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="autoreset_mode='same_step'"):
        NativeVecEnv(make_env(TASK, num_envs=2, autoreset_mode="next_step"))


# ---- SB3 on it -----------------------------------------------------------------------------------
def test_vec_monitor_episode_stats_match_the_summed_rewards():
    venv = VecMonitor(NativeVecEnv.make(TASK, 4, normalize=True))
    venv.seed(0)
    venv.reset()
    rng = np.random.default_rng(0)
    returns = np.zeros(4)
    for _ in range(HORIZON):
        _, rewards, dones, infos = venv.step(_actions(rng, venv))
        returns += rewards
    assert dones.all()
    for k, info in enumerate(infos):
        assert info["episode"]["l"] == HORIZON
        assert info["episode"]["r"] == pytest.approx(returns[k], rel=1e-5)


def test_ppo_learns_on_it_with_vec_normalize_and_the_cost_callback():
    venv = VecNormalize(VecMonitor(NativeVecEnv.make(TASK, 8, normalize=True)))
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=2, seed=0, verbose=0)
    costs = ConstraintCostCallback(("soc_violation",))
    model.learn(512, callback=costs)
    assert model.num_timesteps == 512
    episodes = list(model.ep_info_buffer)
    assert len(episodes) == 8 * (512 // 8 // HORIZON) and all(e["l"] == HORIZON for e in episodes)
    assert len(costs.finished) == len(episodes) and all(
        c.shape == (1,) and c[0] >= 0 for c in costs.finished
    )
    assert np.isfinite(venv.obs_rms.mean).all() and venv.obs_rms.count > 512


def test_sac_trains_on_it():
    venv = make_native_vec_env(TASK, 4, {"normalize": True}, seed=0)
    model = SAC("MlpPolicy", venv, learning_starts=64, batch_size=32, seed=0, verbose=0)
    model.learn(256)
    assert model.num_timesteps == 256 and model.replay_buffer.size() == 256 // 4


def test_vec_normalize_round_trip(tmp_path):
    venv = VecNormalize(make_native_vec_env(TASK, 8, {"normalize": True}, seed=0))
    PPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=1, seed=0).learn(256)
    venv.save(str(tmp_path / "vecnormalize.pkl"))
    fresh = make_native_vec_env(TASK, 2, {"normalize": True}, seed=1)  # another batch size is fine
    loaded = VecNormalize.load(str(tmp_path / "vecnormalize.pkl"), fresh)
    assert loaded.venv is fresh and loaded.num_envs == 2
    np.testing.assert_array_equal(loaded.obs_rms.mean, venv.obs_rms.mean)
    np.testing.assert_array_equal(loaded.obs_rms.var, venv.obs_rms.var)
    loaded.training = False
    raw = fresh.reset()
    np.testing.assert_allclose(loaded.normalize_obs(raw), venv.normalize_obs(raw))


# ---- the Trainer ---------------------------------------------------------------------------------
def _base(venv: VecEnv) -> VecEnv:
    while hasattr(venv, "venv"):
        venv = venv.venv
    return venv


def test_the_trainer_trains_on_the_native_env_by_default(tmp_path):
    from powerzoo.rl import TrainConfig, Trainer

    assert TrainConfig(task=TASK, total_timesteps=10).vec_env == "native"
    trainer = Trainer(
        TASK,
        n_envs=4,
        total_timesteps=384,
        seed=0,
        output_dir=str(tmp_path),
        evaluation=None,
        checkpoint=None,
        n_steps=96,
        batch_size=96,
        logging={"progress_bar": False, "tensorboard": False},
    )
    venv = trainer.get_env()
    assert isinstance(venv, VecNormalize) and isinstance(venv.venv, VecMonitor)
    assert (
        isinstance(_base(venv), NativeVecEnv) and _base(venv).num_envs == 4
    )  # n_envs is the batch size
    result = trainer.train()
    assert result.num_timesteps == 384
    assert [e["l"] for e in trainer.model.ep_info_buffer] == [HORIZON] * 4 * (96 // HORIZON)
    dummy = Trainer(TASK, n_envs=2, vec_env="dummy", total_timesteps=10, output_dir=str(tmp_path))
    assert isinstance(_base(dummy.get_env()), DummyVecEnv) and dummy.get_env().num_envs == 2


def test_presets_build_a_native_training_env():

    from powerzoo.rl import TrainConfig, Trainer
    from powerzoo.rl.algorithms import is_native

    presets = sorted((REPO_ROOT / "configs").glob("*.yaml"))
    built = 0
    for preset in presets:
        config = TrainConfig.from_file(preset)
        trainer = Trainer(config.model_copy(update={"n_envs": 2}))
        if trainer.is_multi_agent or is_native(config.algorithm):  # not SB3's (PPO-L, MAPPO)
            continue
        venv = trainer.get_env()
        assert isinstance(_base(venv), NativeVecEnv), preset.name
        assert venv.reset().shape == (2, *venv.observation_space.shape)
        built += 1
    assert built >= 3  # battery_arbitrage (PPO, SAC) and dc_microgrid presets


def test_cost_callback_reads_the_native_batch_array_and_agrees_with_the_infos():
    venv = VecMonitor(NativeVecEnv.make(TASK, 4, normalize=True))
    venv.seed(3)
    venv.reset()
    batched, per_env = (
        ConstraintCostCallback(("soc_violation",)),
        ConstraintCostCallback(("soc_violation",)),
    )
    model = PPO("MlpPolicy", venv, n_steps=8, seed=0)
    batched.init_callback(model)
    per_env.init_callback(model)
    per_env._native = None  # force the per-env info path (the DummyVecEnv one)
    assert batched._native is venv.venv
    rng = np.random.default_rng(0)
    for _ in range(2 * HORIZON):
        _, _, dones, infos = venv.step(
            _actions(rng, venv) * 3.0
        )  # beyond the bounds: SOC violations
        for cb in (batched, per_env):
            cb.locals = {"infos": infos, "dones": dones}
            cb._on_step()
    assert len(batched.finished) == len(per_env.finished) == 8
    assert any(c[0] > 0 for c in batched.finished)
    for a, b in zip(batched.finished, per_env.finished, strict=True):
        np.testing.assert_array_equal(a, b)
