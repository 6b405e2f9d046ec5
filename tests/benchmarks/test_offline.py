"""Offline datasets: HDF5 schema, reproduction from the seed, atomic writes, clear errors, CLI."""

import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest
from helpers import SAFETY_TIMEOUT_S, wait_until
from test_evaluate import ConstantPolicy, TwoAgentDictEnv

import powerzoo
from powerzoo.benchmarks.evaluation import evaluate
from powerzoo.benchmarks.offline import DatasetGenerator, DatasetLoader, _EpisodeBuffer
from powerzoo.benchmarks.policies import RandomPolicy
from powerzoo.cli.main import main
from powerzoo.rl import make_env

TASK = "battery_arbitrage"


def collect_random(path, n_episodes=4, seed=42, **generator_kwargs):
    env = make_env(TASK, framework="auto")
    gen = DatasetGenerator(env, info_keys=["cost_sum", "is_safe"], **generator_kwargs)
    return gen.collect(
        policy=RandomPolicy(env.action_space), n_episodes=n_episodes, save_path=path, seed=seed
    )


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# ---- schema and round trip -----------------------------------------------------------------------
def test_random_dataset_of_battery_arbitrage_round_trips(tmp_path):
    env = make_env("battery_arbitrage", framework="auto")  # task adapter
    gen = DatasetGenerator(env, info_keys=["cost_sum", "is_safe"])
    dataset = gen.collect(
        policy=RandomPolicy(env.action_space),
        n_episodes=5,
        save_path=str(tmp_path / "data" / "battery_random.h5"),  # the folder is created
        seed=42,
    )
    assert isinstance(dataset, DatasetLoader)
    n = 5 * 48
    assert dataset.n_steps == n and dataset.n_episodes == 5 and len(dataset) == n
    assert dataset.observations.shape == (n, 6) and dataset.observations.dtype == np.float32
    assert dataset.next_observations.shape == (n, 6)
    assert dataset.actions.shape == (n, 1) and dataset.actions.dtype == np.float32
    assert (
        dataset.rewards.shape == (n,)
        and dataset.terminals.dtype == bool
        and dataset.truncations.dtype == bool
    )
    assert set(dataset.infos) == {"cost_sum", "is_safe"} and dataset.infos["is_safe"].dtype == bool
    np.testing.assert_array_equal(dataset.episode_starts, np.arange(5) * 48)
    np.testing.assert_array_equal(dataset.episode_lengths, np.full(5, 48))
    a = dataset.attrs
    assert a["format"] == "powerzoo-offline" and a["schema_version"] == 1
    assert (a["task"], a["split"], a["policy"], a["seed"]) == (
        "battery_arbitrage",
        "train",
        "random",
        42,
    )
    assert (a["n_episodes"], a["n_steps"], a["num_envs"]) == (5, n, 1)
    assert a["powerzoo_version"] == powerzoo.__version__ and a["normalized"] is False
    assert a["observation_fields"][0] == "soc" and a["action_fields"] == ["p_mw"]
    assert a["mean_return"] == pytest.approx(dataset.episode_returns.mean())
    assert a["std_return"] == pytest.approx(dataset.episode_returns.std())
    # costs agree with the discharge that was asked: a violation is a positive cost,
    # is_safe the opposite
    np.testing.assert_array_equal(dataset.infos["is_safe"], dataset.infos["cost_sum"] == 0.0)
    with h5py.File(dataset.path) as f:
        assert f["observations"].compression == "gzip" and f["observations"].maxshape == (None, 6)
    dataset.close()


def test_dataset_equals_a_fresh_rollout_with_the_same_seed_and_policy(tmp_path):
    seed, n_episodes = 42, 4
    dataset = collect_random(tmp_path / "d.h5", n_episodes, seed)
    # the documented rule: episode i resets the env with seed + i and seeds the policy with seed + i
    env = make_env(TASK, framework="auto")
    policy = RandomPolicy(env.action_space)
    for i in range(n_episodes):
        obs, info = env.reset(seed=seed + i)
        policy.seed(seed + i)
        observations, actions, rewards, next_observations = [], [], [], []
        done = False
        while not done:
            action = policy.act(obs, info)
            next_obs, reward, terminated, truncated, info = env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(reward)
            next_observations.append(next_obs)
            obs, done = next_obs, terminated or truncated
        episode = dataset.episode(i)
        np.testing.assert_array_equal(episode["observations"], np.stack(observations))
        np.testing.assert_array_equal(episode["next_observations"], np.stack(next_observations))
        np.testing.assert_array_equal(episode["actions"], np.stack(actions))
        np.testing.assert_array_equal(episode["rewards"], np.float32(rewards))
        assert episode["truncations"][-1] and not episode["truncations"][:-1].any()
        assert dataset.episode_returns[i] == pytest.approx(sum(rewards))
    # evaluate() follows the same rule, so it replays the dataset's episodes
    assert evaluate(RandomPolicy(env.action_space), env, n_episodes, seed)[
        "mean_return"
    ] == pytest.approx(dataset.attrs["mean_return"])


def test_small_buffers_append_the_same_data_as_one_block(tmp_path):
    one_block = collect_random(tmp_path / "a.h5", 5, seed=1)
    many_blocks = collect_random(
        tmp_path / "b.h5", 5, seed=1, buffer_steps=30
    )  # one append per episode
    for key in ("observations", "actions", "rewards", "next_observations", "episode_returns"):
        np.testing.assert_array_equal(getattr(one_block, key), getattr(many_blocks, key))
    np.testing.assert_array_equal(one_block.infos["cost_sum"], many_blocks.infos["cost_sum"])


def test_episodes_and_minibatches(tmp_path):
    dataset = collect_random(tmp_path / "d.h5", 3, seed=0)
    episode = dataset.episode(-1)
    assert episode["observations"].shape == (48, 6) and set(episode["infos"]) == {
        "cost_sum",
        "is_safe",
    }
    np.testing.assert_array_equal(episode["observations"][1:], episode["next_observations"][:-1])
    np.testing.assert_array_equal(episode["observations"], dataset.observations[96:])
    with pytest.raises(IndexError, match="3 episodes"):
        dataset.episode(3)
    batches = list(dataset.iter_minibatches(batch_size=50, seed=0))
    assert [len(b["rewards"]) for b in batches] == [50, 50, 44]
    seen = np.concatenate([b["observations"] for b in batches])
    assert sorted(map(tuple, seen)) == sorted(
        map(tuple, dataset.observations)
    )  # each transition once
    again = next(dataset.iter_minibatches(batch_size=50, seed=0))
    np.testing.assert_array_equal(again["actions"], batches[0]["actions"])
    assert set(again["infos"]) == {"cost_sum", "is_safe"}
    ordered = next(dataset.iter_minibatches(batch_size=10, shuffle=False))
    np.testing.assert_array_equal(ordered["observations"], dataset.observations[:10])
    assert len(list(dataset.iter_minibatches(batch_size=50, drop_last=True))) == 2


# ---- vector env (fast path) and multi-agent ------------------------------------------------------
def test_vector_env_collection_stores_whole_episodes_reproducibly(tmp_path):
    def collect(path):
        env = make_env(TASK, num_envs=8)
        gen = DatasetGenerator(env, info_keys=["cost_sum"])
        return gen.collect(RandomPolicy(env.action_space), n_episodes=20, save_path=path, seed=3)

    first, second = collect(tmp_path / "a.h5"), collect(tmp_path / "b.h5")
    assert first.n_episodes == 20 and first.n_steps == 20 * 48 and first.attrs["num_envs"] == 8
    np.testing.assert_array_equal(first.observations, second.observations)
    np.testing.assert_array_equal(first.actions, second.actions)
    for i in (0, 7, 8, 19):
        ep = first.episode(i)
        np.testing.assert_array_equal(
            ep["observations"][1:], ep["next_observations"][:-1]
        )  # contiguous
        assert (
            ep["observations"][0, 5] == 1.0 and ep["next_observations"][-1, 5] == 0.0
        )  # time_remaining
        assert ep["truncations"][-1] and ep["truncations"].sum() == 1
        assert first.episode_returns[i] == pytest.approx(
            ep["rewards"].astype(np.float64).sum(), rel=1e-5
        )


def test_episode_buffer_hands_out_ragged_episodes_in_finishing_order():
    # 3 streams; the payload encodes (stream, step) so every transition can be traced back
    done = np.zeros((10, 3), bool)
    done[[2, 6, 9], 0] = True  # stream 0: episodes of 3, 4, 3 steps
    done[[4, 5], 1] = True  # stream 1: 5, 1, then an unfinished tail
    done[[1, 8], 2] = True  # stream 2: 2, 7
    buffer = _EpisodeBuffer(
        ("observations", "actions", "rewards", "next_observations", "terminals", "truncations"),
        batched=True,
    )
    taken = []
    for t in range(10):
        payload = np.array([[s, t] for s in range(3)], np.float32)
        buffer.add(payload, payload, np.zeros(3), payload, done[t], np.zeros(3, bool))
        if t in (4, 9):  # two takes: episodes cross the first one
            out, lengths = buffer.take()
            taken += np.split(out["observations"], np.cumsum(lengths)[:-1])
    ends = [(int(e[-1, 1]), int(e[0, 0])) for e in taken]
    assert ends == sorted(ends)  # finishing order: by step, then stream
    spans = [(int(e[0, 0]), int(e[0, 1]), int(e[-1, 1])) for e in taken]
    assert spans == [(2, 0, 1), (0, 0, 2), (1, 0, 4), (1, 5, 5), (0, 3, 6), (2, 2, 8), (0, 7, 9)]
    for e in taken:  # one stream, consecutive steps
        assert len(set(e[:, 0])) == 1 and np.all(np.diff(e[:, 1]) == 1)
    assert buffer.n_pending_steps == 4  # stream 1's tail, steps 6..9


def test_multi_agent_dict_env_dataset_keeps_an_agent_axis(tmp_path):
    env = TwoAgentDictEnv()
    dataset = DatasetGenerator(env, info_keys=["cost_sum", "is_safe"]).collect(
        RandomPolicy(env.action_space), n_episodes=3, save_path=tmp_path / "ma.h5", seed=0
    )
    n = 3 * TwoAgentDictEnv.HORIZON
    assert dataset.agents == ["a0", "a1"]
    assert dataset.observations.shape == (n, 2, 2) and dataset.actions.shape == (n, 2, 1)
    assert dataset.rewards.shape == (n, 2) and dataset.terminals.shape == (n,)
    assert dataset.episode_returns.shape == (3, 2)
    np.testing.assert_allclose(
        dataset.rewards[:, 1], -2 * np.abs(dataset.actions[:, 1, 0]), rtol=1e-6
    )
    assert dataset.attrs["mean_return"] == pytest.approx(dataset.episode_returns.sum(axis=1).mean())
    np.testing.assert_allclose(
        dataset.infos["cost_sum"],
        np.maximum(0, dataset.actions[:, :, 0].sum(axis=1) - 1),
        atol=1e-6,
    )
    # a fresh rollout with the same seeds reproduces it, as for single-agent envs
    assert evaluate(RandomPolicy(env.action_space), env, 3, seed=0)["mean_return"] == pytest.approx(
        dataset.attrs["mean_return"]
    )


def test_random_dataset_of_marl_opf_round_trips(tmp_path):
    env = make_env("marl_opf", framework="auto")  # task adapter
    gen = DatasetGenerator(env, info_keys=["cost_sum", "is_safe"])
    dataset = gen.collect(
        policy=RandomPolicy(env.action_space),
        n_episodes=2,
        save_path=str(tmp_path / "data" / "marl_opf_random.h5"),
        seed=42,
    )
    n_agents = len(env.possible_agents)
    assert dataset.agents == list(env.possible_agents)
    assert dataset.actions.shape[:2] == (dataset.n_steps, n_agents) and dataset.rewards.shape == (
        dataset.n_steps,
        n_agents,
    )
    assert evaluate(RandomPolicy(env.action_space), env, 2, seed=42)[
        "mean_return"
    ] == pytest.approx(dataset.attrs["mean_return"])


@pytest.mark.parametrize("task", ["marl_opf", "gencos_bidding"])
def test_a_pettingzoo_env_collects_the_dict_env_s_dataset(tmp_path, task):
    files = {}
    for framework in ("pettingzoo", "auto"):
        env = make_env(task, framework=framework)
        files[framework] = DatasetGenerator(env, info_keys=["cost_sum"]).collect(
            RandomPolicy(env.action_space), 2, tmp_path / f"{framework}.h5", seed=3
        )
    par, ref = files["pettingzoo"], files["auto"]
    assert par.agents == ref.agents == env.possible_agents
    for key in ("observations", "actions", "rewards", "next_observations", "terminals"):
        np.testing.assert_array_equal(getattr(par, key), getattr(ref, key), err_msg=key)
    np.testing.assert_array_equal(par.infos["cost_sum"], ref.infos["cost_sum"])


# ---- no partial files ----------------------------------------------------------------------------
class FailAfter(RandomPolicy):
    """Random policy that raises after ``k`` actions."""

    def __init__(self, action_space, k):
        super().__init__(action_space)
        self.k, self.calls = k, 0

    def act(self, obs, info):
        self.calls += 1
        if self.calls > self.k:
            raise RuntimeError("policy crashed")
        return super().act(obs, info)


def test_an_exception_mid_collection_leaves_no_file_and_keeps_an_older_one(tmp_path):
    env = make_env(TASK)
    path = tmp_path / "d.h5"
    with pytest.raises(RuntimeError, match="policy crashed"):
        DatasetGenerator(env, buffer_steps=48).collect(FailAfter(env.action_space, 130), 5, path)
    assert not path.exists() and leftovers(tmp_path) == []
    collect_random(path, 2, seed=0).close()
    with pytest.raises(RuntimeError):
        DatasetGenerator(env, buffer_steps=48).collect(FailAfter(env.action_space, 130), 5, path)
    assert DatasetLoader(path).n_episodes == 2  # the previous dataset is untouched
    assert leftovers(tmp_path) == []


_CHILD = """
import pathlib, signal, sys, time
# a shell that starts jobs in the background makes them ignore SIGINT, and Python then installs
# no KeyboardInterrupt handler: restore it, as an interactive user would have it
signal.signal(signal.SIGINT, signal.default_int_handler)
from powerzoo.benchmarks.offline import DatasetGenerator
from powerzoo.benchmarks.policies import RandomPolicy
from powerzoo.rl import make_env

class StallAfter(RandomPolicy):
    calls = 0
    def act(self, obs, info):
        StallAfter.calls += 1
        if StallAfter.calls == 150:  # two episodes are already in the temporary file
            pathlib.Path(sys.argv[2]).touch()
            time.sleep(3600)  # stalled until the test's signal (a guard ends it, not a clock)
        return super().act(obs, info)

env = make_env("battery_arbitrage")
DatasetGenerator(env, buffer_steps=48).collect(
    StallAfter(env.action_space), 50, sys.argv[1], progress=False
)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_a_killed_collection_leaves_no_file_at_save_path(tmp_path, sig):
    path, marker = tmp_path / "d.h5", tmp_path / "stalled"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(marker.exists, "the collection stalled after two episodes", child)
        assert leftovers(tmp_path)  # the data so far lives in a temporary file
        child.send_signal(sig)
        child.wait(timeout=SAFETY_TIMEOUT_S)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    assert child.returncode != 0
    assert not path.exists()
    if sig == signal.SIGINT:  # KeyboardInterrupt: the temporary file is removed too
        assert leftovers(tmp_path) == []


# ---- clear errors --------------------------------------------------------------------------------
def test_truncated_and_non_hdf5_files_give_clear_errors(tmp_path):
    dataset = collect_random(tmp_path / "good.h5", 3)
    dataset.close()
    data = (tmp_path / "good.h5").read_bytes()
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(
        ValueError, match=r"truncated.h5: corrupt or unreadable \(not a readable HDF5 file: .*trunc"
    ):
        DatasetLoader(truncated)
    text = tmp_path / "notes.h5"
    text.write_text("not hdf5")
    with pytest.raises(ValueError, match=r"notes.h5: corrupt or unreadable \(not a readable HDF5"):
        DatasetLoader(text)
    with pytest.raises(FileNotFoundError, match="missing.h5 not found"):
        DatasetLoader(tmp_path / "missing.h5")


def test_foreign_hdf5_and_broken_datasets_are_named(tmp_path):
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["states"] = np.zeros((3, 2))
    with pytest.raises(
        ValueError,
        match=r"foreign.h5: an HDF5 file but not a PowerZoo offline dataset .*\['states'\]",
    ):
        DatasetLoader(foreign)

    path = tmp_path / "d.h5"
    collect_random(path, 2).close()
    with h5py.File(path, "a") as f:
        f["rewards"].resize((95,))
    with pytest.raises(ValueError, match=r"rewards has 95 rows, expected 96 \(n_steps\)"):
        DatasetLoader(path)
    with h5py.File(path, "a") as f:
        del f["rewards"]
        del f["episode_lengths"]
    with pytest.raises(ValueError, match="d.h5: missing rewards, episode_lengths"):
        DatasetLoader(path)


def test_bad_arguments_are_reported_before_any_file_is_written(tmp_path):
    env = make_env(TASK)
    with pytest.raises(
        ValueError,
        match="info key 'no_such_key' is not in the env's step info; available: .*cost_sum",
    ):
        DatasetGenerator(env, info_keys=["no_such_key"]).collect(
            RandomPolicy(env.action_space), 1, tmp_path / "x.h5"
        )
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="n_episodes must be a positive int"):
        DatasetGenerator(env).collect(RandomPolicy(env.action_space), 0, tmp_path / "x.h5")
    with pytest.raises(TypeError, match="info_keys must be a list"):
        DatasetGenerator(env, info_keys="cost_sum")


def test_to_minari_without_minari_names_the_pip_command(tmp_path, monkeypatch):
    dataset = collect_random(tmp_path / "d.h5", 1)
    monkeypatch.setitem(sys.modules, "minari", None)  # as if minari were not installed
    with pytest.raises(ImportError, match="pip install minari"):
        dataset.to_minari("powerzoo/battery_arbitrage/random-v0")


# ---- CLI -----------------------------------------------------------------------------------------
def test_cli_collect_writes_a_dataset_and_reports_speed(tmp_path, capsys):
    path = tmp_path / "rule.h5"
    assert (
        main(
            [
                "collect",
                TASK,
                "--policy",
                "rule_based",
                "--episodes",
                "2",
                "-o",
                str(path),
                "--split",
                "test",
                "--seed",
                "5",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "transitions/s" in out and "MB" in out
    with DatasetLoader(path) as dataset:
        assert (dataset.attrs["policy"], dataset.attrs["split"], dataset.attrs["seed"]) == (
            "rule_based",
            "test",
            5,
        )
        assert dataset.n_steps == 96 and set(dataset.infos) == {
            "constraint_costs",
            "cost_sum",
            "is_safe",
        }
    fast = tmp_path / "random.h5"
    assert main(["collect", TASK, "--episodes", "10", "-o", str(fast)]) == 0
    assert DatasetLoader(fast).attrs["num_envs"] == 64  # the random policy uses the vector env
    assert (
        main(
            ["collect", TASK, "--policy", "oracle", "--num-envs", "4", "-o", str(tmp_path / "x.h5")]
        )
        == 2
    )
    assert "--num-envs 4 needs --policy random" in capsys.readouterr().err


def test_constant_discharge_dataset_records_its_violations(tmp_path):
    env = make_env(TASK)
    dataset = DatasetGenerator(env, info_keys=["cost_soc_violation", "is_safe"]).collect(
        ConstantPolicy(np.array([25.0], np.float32)), 1, tmp_path / "d.h5", seed=0
    )
    assert dataset.attrs["policy"] == "constant"
    assert dataset.infos["cost_soc_violation"].sum() == pytest.approx(
        evaluate(ConstantPolicy(np.array([25.0], np.float32)), env, 1, seed=0)["mean_costs"][
            "soc_violation"
        ],
        rel=1e-5,
    )
    assert not dataset.infos["is_safe"][-1]
