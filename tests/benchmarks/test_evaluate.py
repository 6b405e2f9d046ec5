"""evaluate(), rollout() and the policies: returns,
IQM, costs without wrappers, multi-agent dict envs."""

import gymnasium as gym
import numpy as np
import pytest

from powerzoo.benchmarks.evaluation import (
    COST_TOLERANCE,
    budget_flags,
    evaluate,
    evaluate_days,
    interquartile_mean,
    rollout,
    task_of,
)
from powerzoo.benchmarks.policies import (
    OraclePolicy,
    RandomPolicy,
    RuleBasedPolicy,
    SB3Policy,
    seed_policy,
)
from powerzoo.rl import make_env

TASK = "battery_arbitrage"


class TwoAgentDictEnv:
    """A tiny multi-agent env with the ``framework="auto"`` dict API (RLlib shape).

    Two agents each set a power in [-1, 1]; the shared cost ``overload`` is the sum of both powers
    above 1 per step; agent ``a0`` is rewarded ``-|p|``, agent ``a1`` ``-2 |p|``. Episodes last
    ``HORIZON`` steps; the observation ``[level, step]`` (level drawn at reset) differs per agent.
    """

    HORIZON = 4
    possible_agents = ["a0", "a1"]

    def __init__(self) -> None:
        box = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Dict({a: box for a in self.possible_agents})
        obs_box = gym.spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
        self.observation_space = gym.spaces.Dict({a: obs_box for a in self.possible_agents})
        self.t, self.level = 0, 0.0

    def constraint_names(self) -> tuple[str, ...]:
        return ("overload",)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            a: np.array([self.level + i, self.t], np.float32)
            for i, a in enumerate(self.possible_agents)
        }

    def reset(self, seed=None, options=None):
        self.t, self.level = 0, float(np.random.default_rng(seed).uniform())
        return self._obs(), {a: {"step": 0} for a in self.possible_agents}

    def step(self, actions):
        p0, p1 = float(np.asarray(actions["a0"])[0]), float(np.asarray(actions["a1"])[0])
        self.t += 1
        overload = max(0.0, p0 + p1 - 1.0)
        done = self.t >= self.HORIZON
        info = {
            "constraint_costs": np.array([overload]),
            "cost_sum": overload,
            "is_safe": overload == 0.0,
            "step": self.t,
        }
        return (
            self._obs(),
            {"a0": -abs(p0), "a1": -2.0 * abs(p1)},
            {"a0": False, "a1": False, "__all__": False},
            {"a0": done, "a1": done, "__all__": done},
            {a: dict(info) for a in self.possible_agents},
        )


class ConstantPolicy:
    """Always the same action (physical units)."""

    name = "constant"

    def __init__(self, action) -> None:
        self.action = action

    def reset(self) -> None:
        return None

    def act(self, obs, info):
        return self.action


def test_interquartile_mean_cuts_a_quarter_from_each_end():
    assert interquartile_mean([1, 2, 3, 4, 5, 6, 7, 100]) == pytest.approx(4.5)  # mean of 3..6
    assert interquartile_mean([2.0, 4.0]) == pytest.approx(3.0)  # fewer than 4 values: plain mean
    with pytest.raises(ValueError):
        interquartile_mean([])


def test_evaluate_reports_soc_violation_of_full_discharge_without_any_wrapper():
    env = make_env(TASK)  # no safe-RL wrapper: costs come from info["constraint_costs"]
    result = evaluate(ConstantPolicy(np.array([25.0], np.float32)), env, n_episodes=2, seed=0)
    assert result["task"] == TASK and result["episodes"] == 2 and result["seed"] == 0
    # discharging 25 MW all day empties the battery (100 MWh from SOC 0.5 to 0.1 in ~3.6 h):
    # every later step asks for 25 MW * 0.5 h / 0.95 MWh beyond the bound
    assert result["mean_costs"]["soc_violation"] > 25 * 0.5 / 0.95 * 30
    assert result["violation_rate"] == 1.0 and result["mean_length"] == 48.0
    assert result["iqm_return"] == pytest.approx(result["mean_return"])  # 2 episodes: no cut
    idle = evaluate(ConstantPolicy(np.zeros(1, np.float32)), env, n_episodes=2, seed=0)
    assert idle["mean_costs"]["soc_violation"] == 0.0 and idle["violation_rate"] == 0.0


def test_evaluate_is_reproducible_and_reseeds_the_policy_per_episode():
    env = make_env(TASK)
    first = evaluate(RandomPolicy(env.action_space, seed=123), env, n_episodes=3, seed=7)
    second = evaluate(RandomPolicy(env.action_space, seed=999), env, n_episodes=3, seed=7)
    np.testing.assert_array_equal(
        first["returns"], second["returns"]
    )  # seed + i drives env and policy
    other = evaluate(RandomPolicy(env.action_space), env, n_episodes=3, seed=8)
    assert not np.array_equal(first["returns"], other["returns"])
    assert first["std_return"] == pytest.approx(np.std(first["returns"]))


def test_evaluate_on_multi_agent_dict_env_sums_agents_and_reads_shared_costs():
    env = TwoAgentDictEnv()
    policy = ConstantPolicy({"a0": np.array([0.8], np.float32), "a1": np.array([0.6], np.float32)})
    result = evaluate(policy, env, n_episodes=3, seed=0)
    assert result["agents"] == ["a0", "a1"]
    assert result["mean_agent_returns"]["a0"] == pytest.approx(-0.8 * 4)
    assert result["mean_agent_returns"]["a1"] == pytest.approx(-2 * 0.6 * 4)
    assert result["mean_return"] == pytest.approx(-3.2 - 4.8)  # team return = sum over agents
    assert result["mean_costs"] == {"overload": pytest.approx(0.4 * 4)}
    assert result["violation_rate"] == 1.0 and result["mean_length"] == 4.0


def test_random_policy_on_a_dict_space_samples_every_agent_reproducibly():
    env = TwoAgentDictEnv()
    first = evaluate(RandomPolicy(env.action_space), env, n_episodes=2, seed=3)
    second = evaluate(RandomPolicy(env.action_space), env, n_episodes=2, seed=3)
    np.testing.assert_array_equal(first["returns"], second["returns"])
    action = RandomPolicy(env.action_space, seed=0).act(None, {})
    assert set(action) == {"a0", "a1"} and env.action_space.contains(action)


def test_random_policy_takes_the_env_as_rule_based_policy_does():
    env = make_env(TASK, split="test")
    from_env = [RandomPolicy(env, seed=4).act(None, {}) for _ in range(2)]
    from_space = RandomPolicy(env.action_space, seed=4).act(None, {})
    np.testing.assert_array_equal(from_env[0], from_space)
    assert env.action_space.contains(from_env[0])
    marl = make_env("marl_der_arbitrage", split="test", framework="pettingzoo")
    action = RandomPolicy(marl, seed=0).act(None, {})
    assert set(action) == set(marl.possible_agents)
    assert all(marl.action_space(a).contains(action[a]) for a in action)


def test_random_policy_block_draws_equal_successive_action_space_samples():
    space = gym.spaces.Box(
        np.array([-25.0, 0.0], np.float32), np.array([25.0, 3.0], np.float32), dtype=np.float32
    )
    policy = RandomPolicy(space, seed=5)
    drawn = [policy.act(None, {}) for _ in range(3000)]  # spans several blocks
    reference = gym.spaces.Box(space.low, space.high, dtype=np.float32)
    reference.seed(5)
    np.testing.assert_array_equal(
        np.stack(drawn), np.stack([reference.sample() for _ in range(3000)])
    )
    assert all(d.dtype == np.float32 and space.contains(d) for d in drawn[:10])
    space.seed(5)  # re-seeding the space from outside restarts the stream
    np.testing.assert_array_equal(policy.act(None, {}), drawn[0])


def test_rollout_records_traces_and_evaluate_days_keeps_its_summary():
    env = make_env(TASK, split="test")
    record = rollout(
        env,
        ConstantPolicy(np.zeros(1, np.float32)),
        day_id=2,
        seed=0,
        trace_keys=("price_per_mwh",),
    )
    assert (
        record["length"] == 48
        and record["day_id"] == 2
        and record["trace"]["price_per_mwh"].shape == (48,)
    )
    summary = evaluate_days(ConstantPolicy(np.zeros(1, np.float32)), env, [0, 1], seed=0)
    assert {
        "episodes",
        "mean_return",
        "std_return",
        "mean_costs",
        "violation_rate",
        "returns",
    } <= set(summary)
    assert summary["episodes"] == 2 and summary["mean_costs"] == {"soc_violation": 0.0}


def test_evaluate_days_takes_evaluates_argument_order_and_warns_on_the_old_one():
    env = make_env(TASK, split="test")
    policy = ConstantPolicy(np.full(1, 5.0, np.float32))
    new = evaluate_days(policy, env, [3, 4], seed=1)
    with pytest.warns(DeprecationWarning, match="evaluate_days\\(policy, env"):
        old = evaluate_days(env, policy, [3, 4], seed=1)
    np.testing.assert_array_equal(new["returns"], old["returns"])


def test_evaluate_rejects_vector_envs_and_bad_episode_counts():
    with pytest.raises(TypeError, match="single env"):
        evaluate(
            RandomPolicy(gym.spaces.Box(-1, 1, (4, 1))), make_env(TASK, num_envs=4), n_episodes=1
        )
    with pytest.raises(ValueError, match="n_episodes must be a positive int"):
        evaluate(RandomPolicy(gym.spaces.Box(-1, 1, (1,))), make_env(TASK), n_episodes=0)


def test_sb3_policy_adapter_runs_a_model_deterministically():
    from stable_baselines3 import PPO

    env = make_env(TASK, normalize=True, seed=0)
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0, device="cpu")
    policy = SB3Policy(model)
    assert policy.name == "sb3_ppo"
    first = evaluate(policy, env, n_episodes=2, seed=0)
    second = evaluate(policy, env, n_episodes=2, seed=0)
    np.testing.assert_array_equal(first["returns"], second["returns"])
    obs, info = env.reset(seed=0)
    np.testing.assert_array_equal(policy.act(obs, info), model.predict(obs, deterministic=True)[0])
    with pytest.raises(TypeError, match="predict"):
        SB3Policy(object())


def test_sb3_policy_with_one_model_per_agent_on_a_dict_env():
    class FixedModel:
        def __init__(self, value):
            self.value = value

        def predict(self, obs, state=None, episode_start=None, deterministic=False):
            return np.array([self.value], np.float32), None

    env = TwoAgentDictEnv()
    policy = SB3Policy({"a0": FixedModel(0.5), "a1": FixedModel(1.0)})
    result = evaluate(policy, env, n_episodes=1, seed=0)
    assert result["mean_costs"]["overload"] == pytest.approx(0.5 * 4)
    with pytest.raises(ValueError, match="no model for agent"):
        SB3Policy({"a0": FixedModel(0.5)}).act(env.reset()[0], {})


def test_seed_policy_ignores_policies_without_a_seed_method():
    seed_policy(ConstantPolicy(0.0), 3)  # no seed(): nothing happens
    space = gym.spaces.Box(-1, 1, (1,))
    policy = RandomPolicy(space)
    seed_policy(policy, 11)
    a = policy.act(None, {})
    seed_policy(policy, 11)
    np.testing.assert_array_equal(policy.act(None, {}), a)


# ---- PettingZoo Parallel envs: the same results as the dict env ----------------------------------
def _pettingzoo_and_dict_env(task, **options):
    return (
        make_env(task, framework="pettingzoo", **options),
        make_env(task, framework="auto", **options),
    )


@pytest.mark.parametrize("task", ["marl_opf", "marl_ev_v2g", "marl_der_arbitrage", "marl_uc"])
def test_evaluate_and_baselines_accept_a_pettingzoo_env_like_the_dict_env(task):
    par_env, dict_env = _pettingzoo_and_dict_env(task, normalize=True)
    for make_policy in (lambda env: RandomPolicy(env.action_space), RuleBasedPolicy):
        on_par = evaluate(make_policy(par_env), par_env, n_episodes=2, seed=5)
        on_dict = evaluate(make_policy(dict_env), dict_env, n_episodes=2, seed=5)
        np.testing.assert_array_equal(on_par["returns"], on_dict["returns"])
        assert on_par["mean_costs"] == on_dict["mean_costs"] and on_par["mean_length"] > 1
        assert on_par["agents"] == par_env.possible_agents


def test_oracle_policy_on_a_pettingzoo_env():
    par_env, dict_env = _pettingzoo_and_dict_env("marl_der_arbitrage")
    on_par = evaluate(OraclePolicy(par_env), par_env, n_episodes=1, seed=0)
    on_dict = evaluate(OraclePolicy(dict_env), dict_env, n_episodes=1, seed=0)
    assert on_par["mean_return"] == on_dict["mean_return"]
    random = evaluate(RandomPolicy(par_env.action_space), par_env, n_episodes=1, seed=0)
    assert on_par["mean_return"] > random["mean_return"]


def test_random_policy_takes_pettingzoo_s_action_space_method():
    par_env = make_env("marl_opf", framework="pettingzoo")
    policy = RandomPolicy(par_env.action_space, seed=0)
    action = policy.act(None, {})
    assert list(action) == par_env.possible_agents
    assert all(par_env.action_space(a).contains(action[a]) for a in par_env.possible_agents)
    with pytest.raises(TypeError, match="cannot tell the agents"):
        RandomPolicy(lambda agent: par_env.action_space(agent))
    with pytest.raises(TypeError, match="expected a gymnasium space"):
        RandomPolicy([par_env.action_space("gen_0")])


def test_budget_flags_count_selected_costs_over_tolerance_and_budget():
    task = task_of(make_env("marl_opf"))
    names = task.spec.constraint_names
    budgets = np.array([task.spec.cost_thresholds[n] for n in names])
    costs = np.zeros((4, len(names)))
    costs[1, 0] = 1e-5  # solver residue: neither a violation nor over budget
    costs[2, 0] = 0.5 * budgets[0]  # a violation within the budget
    costs[3, -1] = budgets[-1] + 1.0  # over the last cost's budget
    flags = budget_flags(costs, names, task.spec)
    assert flags["violation_rate"] == pytest.approx(0.5)
    assert flags["over_budget"] == [False, False, False, True]
    assert flags["over_budget_rate"] == pytest.approx(0.25)
    foreign = budget_flags(costs, names)  # no task: every cost counts, no budget is known
    assert foreign["over_budget"] is None and foreign["over_budget_rate"] is None
    assert foreign["violation_rate"] == pytest.approx(0.5)


def test_evaluate_days_keeps_per_episode_costs_and_budget_flags():
    env = make_env(TASK)
    full = evaluate_days(ConstantPolicy(np.array([25.0], np.float32)), env, day_ids=[0, 1])
    assert len(full["episode_costs"]["soc_violation"]) == 2
    assert np.mean(full["episode_costs"]["soc_violation"]) == pytest.approx(
        full["mean_costs"]["soc_violation"]
    )
    assert full["over_budget"] == [True, True] and full["over_budget_rate"] == 1.0
    # per episode, the steps with each cost above COST_TOLERANCE (a step above it puts the
    # episode's sum above it too)
    steps = full["episode_cost_steps"]["soc_violation"]
    costs = full["episode_costs"]["soc_violation"]
    assert len(steps) == 2 and all(isinstance(k, int) for k in steps)
    assert all(0 < k <= full["mean_length"] for k in steps)  # over budget on both days
    assert all(c > COST_TOLERANCE * k for k, c in zip(steps, costs, strict=True))


def test_episode_metrics_sum_the_named_step_info_over_each_episode() -> None:
    """A task's ``episode_metrics`` names step info values; rollout sums each over the episode
    and the summary keeps the per-episode sums (the task card's figures read them)."""
    env = make_env(TASK, split="test", seed=0)
    task = task_of(env)
    task.episode_metrics = ("step",)  # the time index after each step: 1 + 2 + ... + horizon
    policy = RuleBasedPolicy(env)
    records = [rollout(env, policy, day_id=d, seed=0) for d in (0, 1)]
    horizon = records[0]["length"]
    assert [r["metrics"]["step"] for r in records] == [horizon * (horizon + 1) / 2] * 2
    summary = evaluate_days(policy, env, [0, 1], seed=0)
    assert summary["episode_metrics"] == {"step": [horizon * (horizon + 1) / 2] * 2}
    task.episode_metrics = ()
    assert "metrics" not in rollout(env, policy, day_id=0, seed=0)
