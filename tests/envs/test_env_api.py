"""API contracts of make_env, the Gymnasium env, the native vector env and the wrappers."""

import json
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from helpers import run_python
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import powerzoo  # noqa: F401  (registers the Gymnasium ids)
from powerzoo.data.calendar import DATES, base_split_of_days
from powerzoo.envs.wrappers import SafeRLWrapper
from powerzoo.rl import make_env
from powerzoo.tasks import list_tasks, task_spec

TASK = "battery_arbitrage"


def rollout_actions(env, actions, seed, day_id=None):
    obs, info = env.reset(seed=seed, options=None if day_id is None else {"day_id": day_id})
    out = [obs]
    for a in actions:
        obs, reward, terminated, truncated, _ = env.step(a)
        out.append(np.append(obs, reward))
        if terminated or truncated:  # the next episode starts from the env's own stream
            obs, _ = env.reset()
            out.append(obs)
    return np.concatenate([np.ravel(o) for o in out])


# ---- checkers --------------------------------------------------------------------------------
@pytest.mark.parametrize("normalize", [False, True])
def test_gymnasium_and_sb3_checkers_pass(normalize):
    env = make_env(TASK, normalize=normalize, seed=0)
    gym_check_env(env.unwrapped if not normalize else env, skip_render_check=True)
    sb3_check_env(env, warn=False)


def test_gymnasium_make_registered_id():
    env = gym.make("powerzoo/BatteryArbitrage-v0", split="val")
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    date = env.unwrapped.current_date()  # dates come from the env, infos stay numeric
    val_days = DATES[base_split_of_days() == "val"]
    assert date.startswith("2023-") and np.datetime64(date) in val_days


def test_normalized_spaces_and_observation_scale():
    env = make_env(TASK, split="train", normalize=True, seed=0)
    assert env.action_space.low.tolist() == [-1.0] and env.action_space.high.tolist() == [1.0]
    obs, _ = env.reset(seed=0)
    lows = []
    for _ in range(48):
        obs, _, _, _, info = env.step(np.array([1.0], np.float32))
        lows.append(obs)
    # within the nominal range everything lands in [-1, 1]
    assert np.abs(np.asarray(lows)).max() <= 1.0 + 1e-6
    # action 1.0 maps once to +25 MW (requested), never scaled twice
    assert info["action_requested"].tolist() == [25.0]


# ---- typical user snippets (a tiny training budget) -----------------------------------------
def test_normalised_train_split_env_resets_into_its_space():
    env = make_env("battery_arbitrage", split="train", normalize=True, seed=0)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)


def test_sb3_make_vec_env_with_subprocess_workers_trains():
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    def env_fn(seed=0):
        return make_env("battery_arbitrage", normalize=True, seed=seed)

    vec_env = make_vec_env(env_fn, n_envs=2, seed=0, vec_env_cls="subproc")
    try:
        model = PPO("MlpPolicy", vec_env, n_steps=64, batch_size=64, verbose=0)
        model.learn(total_timesteps=128)
        assert model.num_timesteps >= 128
    finally:
        vec_env.close()


def test_env_is_picklable():
    env = make_env(TASK, normalize=True, seed=0)
    clone = pickle.loads(pickle.dumps(env))
    a = np.array([0.3], np.float32)
    assert np.allclose(env.step(a)[0], clone.step(a)[0])


# ---- determinism -----------------------------------------------------------------------------
def test_same_seed_gives_identical_trajectories():
    actions = np.random.default_rng(0).uniform(-1, 1, (60, 1)).astype(np.float32)
    a = rollout_actions(make_env(TASK, normalize=True), actions, seed=7)
    b = rollout_actions(make_env(TASK, normalize=True), actions, seed=7)
    c = rollout_actions(make_env(TASK, normalize=True), actions, seed=8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_vector_env_is_deterministic_under_a_seed():
    actions = np.random.default_rng(0).uniform(-25, 25, (100, 16, 1))

    def run(seed):
        env = make_env(TASK, num_envs=16)
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for a in actions:
            obs, r, *_ = env.step(a)
            out += [obs, r[:, None]]
        return np.concatenate([o.ravel() for o in out])

    np.testing.assert_array_equal(run(5), run(5))
    assert not np.array_equal(run(5), run(6))


def test_trajectories_are_identical_across_processes():
    code = (
        "import numpy as np, hashlib; from powerzoo.rl import make_env\n"
        "env = make_env('battery_arbitrage', seed=11); h = hashlib.sha256()\n"
        "for _ in range(120):\n"
        "    obs, r, te, tr, info = env.step(env.action_space.sample()); "
        "h.update(obs.tobytes()); h.update(np.float64(r).tobytes())\n"
        "    if te or tr: obs, info = env.reset()\n"
        "print(h.hexdigest())"
    )
    outs = {run_python(code, check=True).stdout for _ in range(2)}
    assert len(outs) == 1


# ---- episodes, splits, day_id ------------------------------------------------------------------
def test_episode_truncates_at_horizon_and_never_terminates():
    env = make_env(TASK, seed=0)
    env.reset(seed=0)
    for t in range(48):
        _, _, terminated, truncated, info = env.step(np.zeros(1, np.float32))
        assert not terminated
        assert truncated == (t == 47)
    assert info["step"] == 48


def test_day_id_selects_the_start_day_and_is_checked():
    env = make_env(TASK, split="test")
    _, info = env.reset(seed=0, options={"day_id": 5})
    assert info["day_id"] == 5 and env.unwrapped.current_date() == "2023-03-03"
    _, info = env.reset(day_id=6)  # shortcut: day_id as a keyword of reset
    assert info["day_id"] == 6 and env.unwrapped.current_date() == "2023-03-04"
    with pytest.raises(ValueError, match=r"day_id \[65\] out of range .* valid 0..64"):
        env.reset(options={"day_id": 65})
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"day": 1})


def test_splits_are_honoured_by_the_env():
    from powerzoo.data import split_day_indices
    from powerzoo.data.calendar import DATES

    for split in ("train", "val", "test", "price_spike"):
        env = make_env(TASK, split=split, seed=0)
        allowed = {str(d) for d in DATES[split_day_indices(split)]}
        seen = set()
        for _ in range(30):
            env.reset()
            seen.add(env.unwrapped.current_date())
        assert seen <= allowed, split


def test_stress_split_reads_transformed_prices():
    def day_prices(split, market):
        env = make_env(TASK, split=split, market=market)
        env.reset(seed=0, options={"day_id": 3})
        return np.array([env.step(np.zeros(1))[4]["price_per_mwh"] for _ in range(48)])

    # pjm_like: two evening hours multiplied by x3 to x6 (day 3: 52 -> 243 $/MWh)
    base, spike = day_prices("test", "pjm_like"), day_prices("price_spike", "pjm_like")
    assert spike.max() > 2.5 * base.max()
    # high_renewable (the default): forced outages doubled and 7.5-15 % of the thermal fleet
    # tripped in those hours, so every price rises, by 1-2 % in the day and by 11-19 % in the
    # trip hours of day 3 (46 -> 53 $/MWh), a day with a wide reserve (the scarcity spikes come
    # on days already short of it)
    base, spike = day_prices("test", "high_renewable"), day_prices("price_spike", "high_renewable")
    assert np.all(spike >= base) and spike.max() > 1.1 * base.max()
    rise = spike / base
    assert 32 <= np.argmax(rise) < 42 and rise.max() > 1.1  # in the 16:00-21:00 spike window


def test_unknown_split_and_task_raise_listing_valid_names():
    with pytest.raises(ValueError, match="unknown split 'tets'; valid: train, val, test, heatwave"):
        make_env(TASK, split="tets")
    with pytest.raises(ValueError, match="unknown task 'batery'; registered tasks: ") as err:
        make_env("batery")
    assert ", ".join(list_tasks()) in str(err.value)


# ---- bad input -----------------------------------------------------------------------------------
def test_bad_actions_raise_clear_errors():
    env = make_env(TASK, seed=0)
    with pytest.raises(ValueError, match=r"shape \(2,\), expected \(1,\) \(p_mw\)"):
        env.step(np.zeros(2))
    with pytest.raises(ValueError, match="NaN or inf"):
        env.step(np.array([np.nan]))
    with pytest.raises(ValueError, match="NaN or inf"):
        make_env(TASK, normalize=True, seed=0).step(np.array([np.inf], np.float32))
    with pytest.raises(ValueError, match="numeric"):
        env.step(np.array(["a"]))


def test_out_of_range_action_is_clipped_and_reported():
    env = make_env(TASK, seed=0)
    env.reset(seed=0, options={"day_id": 0})
    _, _, _, _, info = env.step(np.array([-80.0], np.float32))
    assert info["action_clipped"] is True
    assert info["action_requested"].tolist() == [-25.0]
    _, _, _, _, info = env.step(np.array([3.0], np.float32))
    assert info["action_clipped"] is False


def test_framework_and_obs_mode_errors():
    with pytest.raises(
        ValueError, match="single-agent task; framework='pettingzoo' needs a multi-agent task"
    ):
        make_env(TASK, framework="pettingzoo")
    with pytest.raises(ValueError, match="unknown framework"):
        make_env(TASK, framework="tianshou")
    with pytest.raises(ValueError, match="no observation modes"):
        make_env(TASK, obs_mode="global")


# ---- CMDP info -----------------------------------------------------------------------------------
def test_info_carries_cmdp_keys_and_costs_match_physics():
    env = make_env(TASK, seed=0)
    env.reset(seed=0, options={"day_id": 0})
    assert env.unwrapped.constraint_names() == ("soc_violation",)
    for _ in range(48):  # discharge hard all day: the SOC hits its floor and requests are cut
        _, _, _, _, info = env.step(np.array([25.0], np.float32))
    for key in (
        "constraint_costs",
        "cost_sum",
        "selected_constraint_costs",
        "selected_cost_sum",
        "cost_soc_violation",
        "is_safe",
        "reward_terms",
        "action_applied",
    ):
        assert key in info
    assert env.unwrapped.selected_constraint_names() == ("soc_violation",)
    assert info["cost_soc_violation"] == pytest.approx(25.0 * 0.5 / 0.95)
    assert info["cost_sum"] == info["selected_cost_sum"] == info["constraint_costs"][0]
    assert info["is_safe"] is False and info["action_applied"][0] == 0.0


def test_safe_rl_wrapper_returns_six_tuple_with_cost():
    env = make_env(TASK, seed=0, safe_rl=True, cost_threshold=2.0)
    assert isinstance(env, SafeRLWrapper) and env.cost_threshold == 2.0
    env.reset(seed=0, options={"day_id": 0})
    total = 0.0
    for _ in range(48):
        out = env.step(np.array([25.0], np.float32))
        assert len(out) == 6
        total += out[2]
        # unit-free: the step's soc_violation as a fraction of its per-episode budget
        budget = task_spec(TASK).cost_thresholds["soc_violation"]
        assert out[2] == out[5]["cost"] == pytest.approx(out[5]["selected_cost_sum"] / budget)
    assert total > 2.0
    assert make_env(TASK, safe_rl=True).cost_threshold == 1.0


def test_safe_rl_cost_never_adds_costs_of_different_units():
    env = make_env("dc_microgrid_safe", seed=0, safe_rl=True)
    spec = task_spec("dc_microgrid_safe")
    env.reset(seed=0, options={"day_id": 0})
    out = env.step(env.action_space.sample())
    costs = dict(zip(spec.constraint_names, out[5]["constraint_costs"], strict=True))
    expected = sum(costs[n] / spec.cost_thresholds[n] for n in spec.selected_constraints)
    assert out[2] == pytest.approx(expected)
    assert len({u for u in spec.constraint_units}) > 1  # GPU-h, K h, MWh


def test_reward_override_by_preset_weights_and_callable():
    actions = np.full((48, 1), 25.0, np.float32)
    base = make_env(TASK, seed=0)
    penal = make_env(TASK, seed=0, reward="penalized")
    weights = make_env(TASK, seed=0, reward={"degradation": 0.0, "soc_violation": 10.0})
    custom = make_env(TASK, seed=0, reward=lambda info: -info["cost_sum"])
    for env in (base, penal, weights, custom):
        env.reset(seed=0, options={"day_id": 0})
    for a in actions:
        _, r0, *_, i0 = base.step(a)
        _, r1, *_ = penal.step(a)
        _, r2, *_, i2 = weights.step(a)
        _, r3, *_ = custom.step(a)
        assert r1 == pytest.approx(r0 - 100.0 * i0["cost_sum"])
        terms = i2["reward_terms"]
        # weight 0 on degradation; the other terms (settlement included) keep weight 1
        assert r2 == pytest.approx(terms[0] + terms[1] + terms[3] - 10.0 * i2["cost_sum"])
        assert r3 == pytest.approx(-i0["cost_sum"])
        assert i2["task_reward"] == pytest.approx(r0)
    with pytest.raises(ValueError, match="unknown reward key"):
        make_env(TASK, reward={"profit": 1.0})
    with pytest.raises(ValueError, match="unknown reward preset"):
        make_env(TASK, reward="greedy")


def test_forecast_window_appends_future_prices():
    env = make_env(TASK, seed=0, forecast_horizon=4)
    assert env.observation_space.shape == (10,)
    obs, _ = env.reset(seed=0, options={"day_id": 2})
    first_forecast = obs[6:].copy()
    prices = []
    for _ in range(5):
        obs, _, _, _, info = env.step(np.zeros(1, np.float32))
        prices.append(info["price_per_mwh"])
    # the forecast at t = 0 lists the prices of steps 1..4, which are settled in steps 2..5
    np.testing.assert_allclose(first_forecast, prices[1:5], rtol=1e-6)
    gym_check_env(
        make_env(TASK, forecast_horizon=3, normalize=True, seed=0), skip_render_check=True
    )
    with pytest.raises(ValueError, match="forecast_horizon must be a positive int"):
        make_env(TASK, forecast_horizon=0)


def test_task_from_config_file_and_dict(tmp_path):
    path = tmp_path / "task.json"
    path.write_text(
        json.dumps(
            {"task": TASK, "split": "val", "normalize": True, "task_kwargs": {"power_max_mw": 10.0}}
        )
    )
    env = make_env(path, seed=0)
    assert env.unwrapped.task.split == "val" and env.action_space.high.tolist() == [1.0]
    assert env.unwrapped.action_space.high.tolist() == [10.0]
    yaml_path = tmp_path / "task.yaml"
    yaml_path.write_text(f"task: {TASK}\nsplit: test\nseed: 3\n")
    assert make_env(yaml_path).unwrapped.task.split == "test"
    with pytest.raises(ValueError, match="unknown field"):
        make_env({"task": TASK, "spilt": "val"})


# ---- native vector env --------------------------------------------------------------------------
def test_vector_env_steps_1024_envs_with_gymnasium_conventions():
    env = make_env(TASK, num_envs=1024, seed=0, autoreset_mode="same_step")
    assert isinstance(env, gym.vector.VectorEnv)
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    assert env.single_observation_space.shape == (6,) and env.observation_space.shape == (1024, 6)
    assert env.single_action_space.shape == (1,) and env.action_space.shape == (1024, 1)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and info["day_id"].shape == (1024,)
    for _ in range(48):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs.shape == (1024, 6) and reward.shape == (1024,)
        assert env.observation_space.contains(obs)
        assert info["constraint_costs"].shape == (1024, 1)
    assert truncated.all() and not terminated.any()
    assert info["_final_obs"].all() and info["final_obs"].shape == (1024, 6)
    assert np.all(info["final_obs"][:, 5] == 0.0)  # time_remaining of the last observation
    assert np.all(obs[:, 5] == 1.0)  # autoreset: first observation of the next episode


def test_vector_env_matches_single_env_row_by_row():
    vec = make_env(TASK, num_envs=3, normalize=True, autoreset_mode="same_step")
    vec.reset(seed=0, options={"day_id": [0, 1, 2]})
    singles = [make_env(TASK, normalize=True) for _ in range(3)]
    for k, env in enumerate(singles):
        env.reset(seed=0, options={"day_id": k})
    actions = np.random.default_rng(0).uniform(-1.2, 1.2, (48, 3, 1)).astype(np.float32)
    for t, a in enumerate(actions):
        v_obs, v_r, _, _, v_info = vec.step(a)
        for k, env in enumerate(singles):
            s_obs, s_r, _, _, s_info = env.step(a[k])
            # on the last step the vector env has auto-reset; compare its final_obs instead
            np.testing.assert_allclose(
                v_info["final_obs"][k] if t == 47 else v_obs[k], s_obs, rtol=1e-6
            )
            assert v_r[k] == pytest.approx(s_r)
            assert v_info["action_clipped"][k] == s_info["action_clipped"]


def test_vector_env_bad_input_and_wrappers():
    env = make_env(TASK, num_envs=4, seed=0)
    with pytest.raises(ValueError, match=r"shape \(3, 1\), expected \(4, 1\)"):
        env.step(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.full((4, 1), np.nan))
    safe = make_env(TASK, num_envs=4, seed=0, safe_rl=True)
    out = safe.step(np.full((4, 1), 25.0))
    assert len(out) == 6 and out[2].shape == (4,)
    fc = make_env(TASK, num_envs=4, seed=0, forecast_horizon=2, normalize=True)
    assert fc.single_observation_space.shape == (8,)
    assert fc.observation_space.contains(fc.reset(seed=0)[0])
