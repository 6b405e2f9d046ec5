"""RLlib adapter: the MultiAgentEnv, ppo_config, seeds across runners, checkpoint policies."""

import shutil
import tempfile

import pytest

ray = pytest.importorskip("ray")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from ray.rllib.env.multi_agent_env import MultiAgentEnv  # noqa: E402
from ray.rllib.utils.pre_checks.env import check_multiagent_environments  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from powerzoo.benchmarks import evaluate  # noqa: E402
from powerzoo.envs import make_env  # noqa: E402
from powerzoo.envs.rllib_env import PowerZooRLlibEnv, stream_seed  # noqa: E402
from powerzoo.integrations import rllib as prl  # noqa: E402

TINY = {"train_batch_size_per_learner": 96, "minibatch_size": 48, "num_epochs": 1}


@pytest.fixture(scope="module")
def ray_session():
    temp_dir = tempfile.mkdtemp(prefix="pz_rllib_", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp_dir)
    yield
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


def _rollout(env, actions_of):
    obs, _ = env.reset(seed=7, options={"day_id": 3})
    rewards, done = [], False
    while not done:
        obs, rew, terms, truncs, _ = env.step(actions_of(obs))
        rewards.append([rew[a] for a in env.possible_agents])
        done = terms["__all__"] or truncs["__all__"]
    return np.asarray(rewards), obs, terms, truncs


def test_env_contract_and_same_numbers_as_pettingzoo():
    env = make_env("marl_opf", framework="rllib", seed=3)
    assert isinstance(env, MultiAgentEnv)
    for task in ("marl_opf", "marl_ders_benchmark"):  # homogeneous and grouped agents
        check_multiagent_environments(make_env(task, framework="rllib", seed=1))
    ref = make_env("marl_opf", framework="pettingzoo", seed=3)
    rng = np.random.default_rng(0)
    plan = [
        {
            a: rng.uniform(ref.action_space(a).low, ref.action_space(a).high).astype(np.float32)
            for a in ref.possible_agents
        }
        for _ in range(ref.task_spec.horizon)
    ]
    it = iter(plan)
    ours, final_obs, terms, truncs = _rollout(env, lambda _obs: next(it))
    it = iter(plan)
    theirs = []
    obs, _ = ref.reset(seed=7, options={"day_id": 3})
    for actions in it:
        last, rew, *_ = ref.step(actions)
        theirs.append([rew[a] for a in ref.possible_agents])
    np.testing.assert_array_equal(ours, np.asarray(theirs))
    assert (
        truncs["__all__"]
        and not terms["__all__"]
        and set(truncs) == {*env.possible_agents, "__all__"}
    )
    for a in env.possible_agents:  # the final observation of every agent
        np.testing.assert_array_equal(final_obs[a], last[a])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(plan[0])


def test_infos_numeric_and_bad_input():
    env = make_env("marl_ders_benchmark", framework="rllib", seed=0, normalize=True)
    env.reset()
    *_, infos = env.step({a: env.action_spaces[a].sample() for a in env.possible_agents})
    assert set(infos) == set(env.possible_agents)
    for info in infos.values():
        assert "constraint_costs" in info and "action_applied" in info
        assert all(np.asarray(v).dtype.kind in "biuf" for v in info.values())
    with pytest.raises(ValueError, match="single-agent"):
        make_env("battery_arbitrage", framework="rllib")
    with pytest.raises(ValueError, match="num_envs"):
        make_env("marl_opf", framework="rllib", num_envs=2)
    with pytest.raises(ValueError, match="task"):
        PowerZooRLlibEnv({})
    with pytest.raises(ValueError, match="reward_scale"):
        PowerZooRLlibEnv({"task": "marl_opf", "reward_scale": 0})


def test_stream_seed_formula():
    assert (
        stream_seed(5, 0, 0) == 5
    )  # the first sub-env of the local runner = the PettingZoo env's stream
    seeds = {stream_seed(s, w, k) for s in range(3) for w in range(3) for k in range(3)}
    assert len(seeds) == 27
    with pytest.raises(ValueError):
        stream_seed(-1, 0, 1)


def test_ppo_config_sharing_modes_and_errors():
    spec = make_env("marl_ders_benchmark", framework="rllib").task_spec
    groups = {a: g.name for g in spec.groups for a in g.agents}
    expected = {"shared": 1, "per_group": len(spec.groups), "per_agent": len(spec.agents)}
    for sharing, n_modules in expected.items():
        config = prl.ppo_config("marl_ders_benchmark", sharing, reward_scale=1.0)
        assert len(config.policies) == n_modules
        assert set(config.rl_module_spec.rl_module_specs) == set(config.policies)
        mapped = {a: config.policy_mapping_fn(a, None) for a in spec.agents}
        assert set(mapped.values()) == set(config.policies)
        if sharing == "per_group":
            assert mapped == groups
        if sharing == "per_agent":
            assert mapped == {a: a for a in spec.agents}
    config = prl.ppo_config("marl_opf", seed=4)
    assert config.env_config["normalize"] and config.env_config["seed"] == 4 and config.seed == 4
    assert 0 < config.env_config["reward_scale"] < 1  # rewards of about -2e5 $ per step scaled down
    with pytest.raises(ValueError, match="sharing"):
        prl.ppo_config("marl_opf", "per_team")
    with pytest.raises(ValueError, match="single-agent"):
        prl.ppo_config("battery_arbitrage")
    with pytest.raises(ValueError, match="unknown task"):
        prl.ppo_config("no_such_task")
    with pytest.raises(ValueError, match="num_env_runners"):
        prl.ppo_config("marl_opf", num_env_runners=-1, reward_scale=1.0)
    names = prl.register_rllib_envs()
    assert "powerzoo/marl_opf" in names and "powerzoo/battery_arbitrage" not in names


def _every_agent_reported(result, agents):
    sampled = result["env_runners"]["num_agent_steps_sampled"]
    assert set(sampled) == set(agents) and all(v > 0 for v in sampled.values())


def test_train_local_checkpoint_policy_evaluates(ray_session, tmp_path):
    config = prl.ppo_config("marl_opf", seed=0).training(**TINY)
    algo = config.build_algo()
    try:
        result = algo.train()
        agents = make_env("marl_opf", framework="rllib").possible_agents
        _every_agent_reported(result, agents)
        assert "shared" in result["learners"]
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
        live = prl.RLlibPolicy.from_algorithm(algo)
    finally:
        algo.stop()
    policy = prl.RLlibPolicy.from_checkpoint(path, task="marl_opf")
    env = make_env("marl_opf", "test")  # physical units, as the baselines table
    obs, _ = env.reset(seed=0)
    a_ckpt, a_live = policy.act(obs), live.act(obs)
    assert all(np.array_equal(a_ckpt[a], a_live[a]) for a in agents)
    summary = evaluate(policy, env, n_episodes=2, seed=0)
    assert summary["episodes"] == 2 and np.all(np.isfinite(summary["returns"]))
    # the same episode through the training env (normalised, scaled rewards) and the physical env
    train_env = PowerZooRLlibEnv({**config.env_config, "split": "test"})
    scaled, *_ = _rollout(train_env, lambda o: policy.module_actions(o))
    physical, *_ = _rollout(env, policy.act)
    np.testing.assert_allclose(scaled, physical * config.env_config["reward_scale"], rtol=1e-5)
    with pytest.raises(ValueError, match="trained on"):
        prl.RLlibPolicy.from_checkpoint(path, task="marl_uc")
    with pytest.raises(FileNotFoundError):
        prl.RLlibPolicy.from_checkpoint(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="not an RLlib"):
        prl.RLlibPolicy.from_checkpoint(tmp_path)


def _threads(algo, local_env_runner=True):
    """(torch threads, largest BLAS / OpenMP pool) in each env runner and learner of ``algo``."""

    def threads(_runner_or_learner):
        pools = [pool["num_threads"] for pool in threadpool_info()]
        return torch.get_num_threads(), max(pools)

    runners = algo.env_runner_group.foreach_env_runner(threads, local_env_runner=local_env_runner)
    learners = [result.get() for result in algo.learner_group.foreach_learner(threads)]
    return runners, learners


@pytest.fixture
def driver_threads():
    """The libraries' default thread counts on 2 cores in the test process, given back after."""
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(2)
    with threadpool_limits(limits=2):
        yield
    torch.set_num_threads(torch_threads)


def test_one_torch_and_blas_thread_by_default_and_the_override(ray_session, driver_threads):
    algo = prl.ppo_config("marl_opf", reward_scale=1.0).build_algo()
    try:
        one = [(1, 1)]
        assert _threads(algo) == (one, one)  # the local env runner and learner
    finally:
        algo.stop()
    config = prl.ppo_config("marl_opf", reward_scale=1.0, torch_threads=3)
    assert config.callbacks_on_algorithm_init.threads == 3
    algo = config.build_algo()
    try:
        three = [(3, 3)]
        assert _threads(algo) == (three, three)
    finally:
        algo.stop()
    config = prl.ppo_config("marl_opf", reward_scale=1.0, torch_threads=None)
    assert not config.callbacks_on_algorithm_init
    for bad in (0, True, 1.5, 10**6, "2"):
        with pytest.raises(ValueError, match=r"torch_threads must be an int in \[1, 256\] or None"):
            prl.ppo_config("marl_opf", reward_scale=1.0, torch_threads=bad)


@pytest.mark.slow  # two remote runners each import RLlib (about 20 s on 2 cores)
def test_remote_runners_train_follow_the_thread_override_and_never_share_a_seed(
    ray_session, driver_threads
):
    """Two remote env runners of 3 sub-envs each, one policy per agent, 2 torch threads."""
    seed = 11
    config = (
        prl.ppo_config(
            "marl_opf",
            "per_agent",
            num_env_runners=2,
            num_envs_per_env_runner=3,
            seed=seed,
            reward_scale=1.0,
            torch_threads=2,
        )
        .env_runners(num_cpus_per_env_runner=0.5)
        .training(**TINY)
    )
    algo = config.build_algo()
    try:
        result = algo.train()
        # the remote runners (actors, whose torch Ray starts with one thread) follow the override
        assert _threads(algo, local_env_runner=False) == ([(2, 2), (2, 2)], [(2, 2)])
        seen = algo.env_runner_group.foreach_env_runner(
            lambda r: [
                (e.unwrapped.sub_env_id, list(e.unwrapped.seed_history)) for e in r.env.envs
            ],
            local_env_runner=False,
        )
    finally:
        algo.stop()
    agents = make_env("marl_opf", framework="rllib").possible_agents
    _every_agent_reported(result, agents)
    assert set(result["learners"]) - {"__all_modules__"} == set(agents)
    envs = [entry for runner in seen for entry in runner]
    ids = [i for i, _ in envs]
    assert sorted(ids) == [(w, k) for w in (1, 2) for k in range(3)]
    for (w, k), history in envs:
        assert history[0] == stream_seed(seed, w, k)  # env_config seed at construction
        assert history[-1] == stream_seed(
            seed + w + k, w, k
        )  # RLlib's reset seed, config.seed + w + k
    used = [s for _, history in envs for s in history]
    assert len(set(used)) == len(used)  # no two sub-envs ever share a stream


def test_sampling_rate(ray_session):
    assert prl.rllib_sampling_rate("marl_opf", 0, 1, seconds=0.5) > 0


@pytest.mark.parametrize(
    "task",
    ["opf", "joint_trans_dist", "joint_trans_dist_118", "acopf_118", "voltage_control_118"],
)
def test_rllib_checks_the_dispatch_coupled_and_ac_tasks(task):
    """RLlib's own environment check passes on the tasks with padded or grouped agents."""
    env = make_env(task, framework="rllib", seed=1)
    check_multiagent_environments(env)
    obs, _ = env.reset(seed=2)
    actions = {a: env.action_space[a].sample() for a in obs}
    obs, rewards, terms, truncs, _ = env.step(actions)
    assert set(rewards) == set(env.possible_agents) and not terms["__all__"]
