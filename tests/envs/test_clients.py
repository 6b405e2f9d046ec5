"""PowerZoo under the client libraries users bring, used the way their own docs use them.

Gymnasium (`make` / `make_vec` / vector wrappers), Stable-Baselines3 (`PPO("MlpPolicy", id)`,
`make_vec_env(id)`), SuperSuit (with SB3 on top), TorchRL (`GymEnv`, `GymWrapper` of the native
vector env, `PettingZooWrapper`) and Minari (`DataCollector`, `recover_environment`).
"""

import gymnasium as gym
import numpy as np
import pytest

import powerzoo  # noqa: F401  (registers the Gymnasium ids)
from powerzoo.rl import make_env
from powerzoo.tasks import list_tasks, task_spec

TASK = "battery_arbitrage"
H = 48


# ---- Gymnasium registration ----------------------------------------------------------------------
def test_gym_make_accepts_render_mode_none_and_task_options():
    env = gym.make("powerzoo/BatteryArbitrage-v0", render_mode=None, split="val", normalize=True)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs) and env.unwrapped.task.split == "val"


@pytest.mark.parametrize("mode", ["human", "rgb_array"])
def test_an_unsupported_render_mode_warns_as_gymnasium_does(mode):
    with pytest.warns(UserWarning, match=f"no render modes .*render_mode='{mode}' is ignored"):
        env = gym.make("powerzoo/BatteryArbitrage-v0", render_mode=mode)
    assert env.render_mode is None and env.reset(seed=0)[0].shape == env.observation_space.shape
    with pytest.warns(UserWarning, match="no render modes"):
        venv = gym.make_vec("powerzoo/BatteryArbitrage-v0", num_envs=2, render_mode=mode)
    assert venv.render_mode is None and venv.reset(seed=0)[0].shape[0] == 2


# ---- Stable-Baselines3 from a Gymnasium id (it asks for render_mode="rgb_array") ----------------
GYM_IDS = [task_spec(t).gym_id for t in list_tasks() if task_spec(t).gym_id is not None]


@pytest.mark.parametrize("env_id", GYM_IDS)
def test_sb3_make_vec_env_builds_every_registered_id(env_id):
    from stable_baselines3.common.env_util import make_vec_env

    with pytest.warns(UserWarning, match="render_mode='rgb_array' is ignored"):
        venv = make_vec_env(env_id, n_envs=2, seed=0)
    obs = venv.reset()
    assert obs.shape == (2, *venv.observation_space.shape) and venv.render_mode is None
    venv.step_async(np.stack([venv.action_space.sample() for _ in range(2)]))
    obs, rewards, dones, _ = venv.step_wait()
    assert rewards.shape == (2,) and np.all(np.isfinite(rewards)) and not dones.any()
    venv.close()


def test_sb3_ppo_trains_from_a_gym_id_string():
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", "powerzoo/DSO-v0", n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.learn(64)
    assert model.num_timesteps == 64 and model.env.render_mode is None


def test_sb3_ppo_trains_on_make_vec_env_of_a_gym_id():
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env("powerzoo/BatteryArbitrage-v0", n_envs=4, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, seed=0)
    model.learn(64)
    assert model.num_timesteps == 64


def test_gym_make_rejects_unknown_keywords_like_a_python_function():
    with pytest.raises(TypeError, match="unexpected keyword argument 'frameskip'"):
        gym.make("powerzoo/BatteryArbitrage-v0", frameskip=4)
    # task parameters are not unknown
    env = gym.make("powerzoo/BatteryArbitrage-v0", energy_capacity_mwh=200.0)
    assert env.unwrapped.task.battery.energy_capacity_mwh == 200.0


def test_every_task_with_a_gym_id_is_registered_under_its_spec_id():
    # task_spec loads each class, which checks the registry's declared id against the spec
    ids = {t: task_spec(t).gym_id for t in list_tasks()}
    assert all(ids[t] for t in ids if task_spec(t).agent_mode == "single")
    for task, env_id in ids.items():
        assert env_id is None or gym.registry[env_id].kwargs == {"task": task}


def test_make_vec_uses_the_native_vector_entry_point():
    env = gym.make_vec("powerzoo/DCMicrogrid-v0", num_envs=8)
    assert type(env.unwrapped).__name__ == "PowerZooVectorEnv" and env.num_envs == 8
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    obs, _ = env.reset(seed=0)
    assert obs.shape == (8, *env.single_observation_space.shape)


def test_torchrl_gym_env_rolls_out():
    from torchrl.envs import GymEnv

    env = GymEnv("powerzoo/BatteryArbitrage-v0")
    rollout = env.rollout(10)
    assert rollout["next", "reward"].shape == (10, 1)
    assert not rollout["next", "done"].any()


@pytest.mark.parametrize("mode", ["same_step", "disabled"])
def test_torchrl_gym_wrapper_rolls_out_the_native_vector_env(mode):
    from torchrl.envs import GymWrapper

    env = GymWrapper(make_env(TASK, num_envs=3, autoreset_mode=mode, seed=0))
    assert env.batch_size == (3,)
    rollout = env.rollout(H + 4, break_when_any_done=False)  # crosses the end of the day
    done = rollout["next", "done"][..., 0].numpy()
    assert done[:, H - 1].all() and done.sum() == 3  # every row ends its day once, at step H
    time_remaining = rollout["observation"][..., 5].numpy()
    assert np.all(time_remaining[:, 0] == 1.0) and np.all(time_remaining[:, H] == 1.0)
    assert np.all(rollout["next", "reward"][:, H:].numpy() != 0.0)  # trading again on a new day


def test_torchrl_gym_wrapper_refuses_next_step_autoreset():
    from torchrl.envs import GymWrapper

    with pytest.raises(RuntimeError, match="SAME_STEP or DISABLED"):
        GymWrapper(make_env(TASK, num_envs=2))  # the default, next_step


# ---- native vector env: Gymnasium's conventions --------------------------------------------------
def test_gymnasium_vector_wrappers_accept_the_native_env():
    env = make_env(TASK, num_envs=4)
    env = gym.wrappers.vector.RecordEpisodeStatistics(gym.wrappers.vector.NormalizeObservation(env))
    env.reset(seed=0)
    episodes = []
    for _ in range(2 * H + 2):
        _, _, _, _, info = env.step(np.zeros((4, 1), np.float32))
        if "episode" in info:
            episodes.append(info["episode"]["l"][info["_episode"]])
    assert (
        np.concatenate(episodes).tolist() == [H] * 8
    )  # two whole episodes per env, autoreset in between


def test_next_step_autoreset_starts_the_next_episode_on_the_following_step():
    env = make_env(TASK, num_envs=3, seed=0)
    env.reset(seed=0, options={"day_id": [0, 1, 2]})
    for _ in range(H):
        obs, reward, terminated, truncated, info = env.step(np.full((3, 1), 25.0, np.float32))
    assert truncated.all() and np.all(
        obs[:, 5] == 0.0
    )  # the last observation itself (time_remaining 0)
    assert "final_obs" not in info
    obs, reward, terminated, truncated, info = env.step(np.full((3, 1), 25.0, np.float32))
    assert (
        np.all(obs[:, 5] == 1.0) and not (terminated | truncated).any()
    )  # first observation of the next day
    assert (
        np.all(reward == 0.0)
        and np.all(info["constraint_costs"] == 0.0)
        and np.all(info["step"] == 0)
    )
    _, reward, *_ = env.step(np.full((3, 1), 25.0, np.float32))
    assert np.all(reward != 0.0)  # and now they trade again


def test_same_step_and_disabled_modes_are_selectable():
    same = make_env(TASK, num_envs=2, autoreset_mode="same_step", seed=0)
    assert same.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    off = make_env(TASK, num_envs=2, autoreset_mode="disabled", seed=0)
    for _ in range(H):
        obs, *_ = off.step(np.zeros((2, 1), np.float32))
    with pytest.raises(RuntimeError, match=r"episode is over in row\(s\) \[0, 1\]"):
        off.step(np.zeros((2, 1), np.float32))  # no reset: step refuses to pass the horizon
    with pytest.raises(ValueError, match="unknown autoreset_mode"):
        make_env(TASK, num_envs=2, autoreset_mode="sometimes")
    with pytest.raises(ValueError, match="pass num_envs"):
        make_env(TASK, autoreset_mode="same_step")


def test_reset_mask_restarts_only_the_masked_rows_on_the_given_days():
    env = make_env(TASK, split="test", num_envs=3, seed=0)
    env.reset(seed=0, options={"day_id": [0, 1, 2]})
    for _ in range(5):
        env.step(np.zeros((3, 1), np.float32))
    obs, info = env.reset(options={"reset_mask": np.array([False, True, False]), "day_id": 7})
    assert info["day_id"].tolist() == [0, 7, 2] and info["step"].tolist() == [5, 0, 5]
    assert obs[1, 5] == 1.0 and obs[0, 5] < 1.0
    with pytest.raises(ValueError, match="reset_mask must be 3 bools"):
        env.reset(options={"reset_mask": [1, 0, 1]})


def test_per_env_seed_lists_are_deterministic_and_checked():
    def first_days(seed):
        return make_env(TASK, num_envs=4).reset(seed=seed)[1]["day_id"].tolist()

    assert first_days([1, 2, 3, 4]) == first_days([1, 2, 3, 4])
    assert first_days([1, 2, 3, 4]) != first_days([4, 3, 2, 1])
    with pytest.raises(ValueError, match="a list of 4 ints"):
        make_env(TASK, num_envs=4).reset(seed=[1, 2])


# ---- infos: numeric, the same keys at reset and step ---------------------------------------------
def _is_numeric(value):
    return isinstance(value, (bool, int, float, np.number, np.bool_)) or (
        isinstance(value, np.ndarray) and value.dtype.kind in "biuf"
    )


@pytest.mark.parametrize("task", list_tasks())
def test_reset_and_step_infos_have_the_same_numeric_keys(task):
    multi = task_spec(task).agent_mode == "multi"
    env = make_env(task, seed=0, **({"framework": "pettingzoo"} if multi else {}))
    _, reset_info = env.reset(seed=0)
    if multi:
        actions = {a: env.action_space(a).sample() for a in env.possible_agents}
        step_info = env.step(actions)[-1]
        reset_info, step_info = (
            reset_info[env.possible_agents[0]],
            step_info[env.possible_agents[0]],
        )
    else:
        step_info = env.step(env.action_space.sample())[-1]
    assert reset_info.keys() == step_info.keys()
    for key in step_info:
        assert _is_numeric(step_info[key]) and _is_numeric(reset_info[key]), key
        assert np.shape(step_info[key]) == np.shape(reset_info[key]), key
    assert np.all(np.asarray(reset_info["constraint_costs"]) == 0.0)
    # no cost yet, so the reset is safe (docs/concepts.md: "whether this step's costs are all
    # zero"); the step quantities are 0 placeholders of the step's shapes
    assert reset_info["is_safe"] is True or reset_info["is_safe"] == np.True_
    assert np.all(np.asarray(reset_info["reward_terms"]) == 0.0)
    selected = (
        env.unwrapped.selected_constraint_names() if not multi else env.selected_constraint_names()
    )
    # every task constrains something, but gencos_bidding, whose overload cannot occur
    assert tuple(selected) == task_spec(task).selected_constraints
    assert bool(selected) == (task != "gencos_bidding")


def test_vector_env_reset_info_is_safe_in_every_row_and_step_quantities_are_placeholders():
    env = make_env(TASK, num_envs=3, seed=0)
    obs, info = env.reset(seed=0)
    assert info["is_safe"].shape == (3,) and info["is_safe"].all()
    assert info["cost_sum"].tolist() == [0.0, 0.0, 0.0]
    # the task's own step quantities are 0 at reset; the starting state is in the observation
    names = list(task_spec(TASK).observation.names)
    assert info["soc"].tolist() == [0.0] * 3 and np.all(obs[:, names.index("soc")] > 0.0)


def test_wrapped_env_infos_keep_the_keys_of_their_wrappers_at_reset():
    env = make_env(TASK, seed=0, safe_rl=True, reward={"soc_violation": 10.0})
    _, reset_info = env.reset(seed=0)
    step_info = env.step(env.action_space.sample())[-1]
    assert reset_info.keys() == step_info.keys() and {"cost", "task_reward"} <= set(reset_info)


# ---- PettingZoo clients --------------------------------------------------------------------------
MULTI_AGENT_TASKS = [t for t in list_tasks() if task_spec(t).agent_mode == "multi"]


@pytest.mark.parametrize("task", MULTI_AGENT_TASKS)
def test_supersuit_pettingzoo_to_vec_env_recipe_on_every_multi_agent_task(task):
    import supersuit as ss

    par_env = make_env(task, framework="pettingzoo", normalize=True)
    first = par_env.possible_agents[0]
    for agent in par_env.possible_agents:  # what SuperSuit checks, with an informative failure
        assert par_env.observation_space(agent) == par_env.observation_space(first), agent
        assert par_env.action_space(agent) == par_env.action_space(first), agent
    n = len(par_env.possible_agents)
    env = ss.concat_vec_envs_v1(
        ss.pettingzoo_env_to_vec_env_v1(par_env), 2, num_cpus=0, base_class="gymnasium"
    )
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2 * n, *par_env.observation_space(first).shape)
    actions = np.stack([par_env.action_space(first).sample() for _ in range(2 * n)])
    obs, rewards, terminated, truncated, _ = env.step(actions)
    assert rewards.shape == (2 * n,) and np.all(np.isfinite(rewards))


def test_supersuit_without_normalize_fails_where_agents_limits_differ():
    # docs/integrations.md: without normalize=True SuperSuit stops on every multi-agent task whose
    # agents' physical limits differ, "most multi-agent tasks"; marl_der_arbitrage passes
    import supersuit as ss

    refused = []
    for task in MULTI_AGENT_TASKS:
        par_env = make_env(task, framework="pettingzoo")
        first = par_env.possible_agents[0]
        alike = all(
            par_env.observation_space(a) == par_env.observation_space(first)
            and par_env.action_space(a) == par_env.action_space(first)
            for a in par_env.possible_agents
        )
        try:
            ss.pettingzoo_env_to_vec_env_v1(par_env)
        except AssertionError as err:
            assert "spaces not consistent" in str(err) and not alike, (task, err)
            refused.append(task)
        else:
            assert alike, task
    assert len(refused) > len(MULTI_AGENT_TASKS) / 2, refused
    assert "marl_opf" in refused and "marl_der_arbitrage" not in refused


def test_sb3_ppo_learns_on_a_supersuit_vec_env():
    import supersuit as ss
    from stable_baselines3 import PPO

    env = ss.pettingzoo_env_to_vec_env_v1(
        make_env("marl_opf", framework="pettingzoo", normalize=True)
    )
    env = ss.concat_vec_envs_v1(env, 2, num_cpus=0, base_class="stable_baselines3")
    # no seed=: SB3 then calls env.seed(), which SuperSuit's ConcatVecEnv lacks (SuperSuit's own
    # SB3 examples pass none either)
    model = PPO("MlpPolicy", env, n_steps=8, batch_size=40, n_epochs=1)
    model.learn(160)  # 10 agent rows x 8 steps, twice
    assert model.num_timesteps == 160


def test_torchrl_pettingzoo_wrapper_rolls_out():
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    env = PettingZooWrapper(
        make_env("marl_opf", framework="pettingzoo", normalize=True), use_mask=False
    )
    rollout = env.rollout(5)
    assert rollout["next", "gen", "reward"].shape == (5, 5, 1)
    assert ("gen", "info", "cost_sum") in rollout.keys(True)


# ---- Minari --------------------------------------------------------------------------------------
@pytest.fixture
def minari_home(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    return tmp_path


def test_minari_data_collector_records_infos_and_recovers_the_env(minari_home):
    import minari

    env = minari.DataCollector(
        make_env(TASK, split="val", normalize=True, seed=0), record_infos=True
    )
    for episode in range(2):
        env.reset(seed=episode)
        done = False
        while not done:
            *_, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
    dataset = env.create_dataset("powerzoo/battery-collector-v0", algorithm_name="random")
    episode = next(dataset.iterate_episodes())
    assert dataset.total_episodes == 2 and len(episode.rewards) == H
    assert episode.infos["cost_sum"].shape == (H + 1,)  # the reset info, then one per step
    recovered = minari.load_dataset("powerzoo/battery-collector-v0").recover_environment()
    assert recovered.spec.id == task_spec(TASK).gym_id and recovered.spec.kwargs["split"] == "val"
    assert recovered.action_space == env.action_space


def test_to_minari_stores_the_env_spec(minari_home):
    import minari

    from powerzoo.benchmarks import DatasetGenerator, RandomPolicy

    env = make_env(TASK, split="test", normalize=True, seed=0)
    data = DatasetGenerator(env).collect(
        RandomPolicy(env.action_space), 2, minari_home / "d.h5", seed=0
    )
    data.to_minari("powerzoo/battery-export-v0")
    recovered = minari.load_dataset("powerzoo/battery-export-v0").recover_environment()
    obs, _ = recovered.reset(seed=0)
    assert recovered.observation_space.contains(obs) and recovered.spec.kwargs["normalize"] is True
