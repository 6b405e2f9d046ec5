"""The reference baselines: residual on the rule, safety layer, behaviour cloning, and their
algorithm names in ``Trainer``."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from powerzoo.benchmarks.evaluation import evaluate_days, rollout
from powerzoo.benchmarks.policies import RuleBasedPolicy
from powerzoo.envs.introspect import inspect_env
from powerzoo.envs.make import make_env
from powerzoo.rl import Trainer
from powerzoo.rl.algorithms import (
    ALL_ALGORITHMS,
    REFERENCE_ALGORITHMS,
    algorithms_for,
    check_algorithm_kwargs,
    split_reference_kwargs,
)
from powerzoo.rl.reference.layers import bounds_kind, step_bounds
from powerzoo.rl.reference.wrappers import wrap_env
from powerzoo.tasks import task_spec

pytest.importorskip("stable_baselines3")

DAYS = [0, 3, 7]


class ZeroPolicy:
    """The learner's action 0 (in [-1, 1]) for every agent."""

    def __init__(self, env):
        self.space = env.action_space

    def reset(self):
        return None

    def act(self, obs, info):
        if isinstance(obs, dict):
            return {a: np.zeros(self.space[a].shape, np.float32) for a in obs}
        return np.zeros(self.space.shape, np.float32)


class RandomUnitPolicy(ZeroPolicy):
    """Uniform learner actions in [-1.5, 1.5] (beyond the box, to test the clipping too)."""

    def __init__(self, env, seed=0):
        super().__init__(env)
        self.rng = np.random.default_rng(seed)

    def act(self, obs, info):
        zero = super().act(obs, info)
        if isinstance(zero, dict):
            return {
                a: self.rng.uniform(-1.5, 1.5, z.shape).astype(np.float32) for a, z in zero.items()
            }
        return self.rng.uniform(-1.5, 1.5, zero.shape).astype(np.float32)


def _returns(env, policy, days):
    return [rollout(env, policy, day_id=d, seed=0)["return"] for d in days]


# ---- residual on the rule ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("task", "options"),
    [
        ("battery_arbitrage", {"normalize": True}),
        ("battery_arbitrage", {}),
        ("marl_opf", {"framework": "auto"}),
        ("marl_opf", {"framework": "auto", "normalize": True}),
    ],
)
def test_zero_residual_is_the_rule_exactly(task, options):
    env = make_env(task, "val", **options)
    rule = _returns(env, RuleBasedPolicy(env), DAYS)
    wrapped = wrap_env(make_env(task, "val", **options), "residual")
    assert _returns(wrapped, ZeroPolicy(wrapped), DAYS) == rule
    # a residual moves the actions: the returns differ
    assert _returns(wrapped, RandomUnitPolicy(wrapped), DAYS) != rule


def test_untrained_residual_trainers_act_as_the_rule(tmp_path):
    """The untrained PPO-residual / MAPPO-residual policies (mean 0) on their evaluation envs
    give the rule's returns exactly."""
    for task, algorithm in (("battery_arbitrage", "PPO-residual"), ("marl_opf", "MAPPO-residual")):
        trainer = Trainer(task, algorithm=algorithm, output_dir=str(tmp_path), seed=0)
        if algorithm.startswith("MAPPO"):
            trainer._ensure_learner()
            rule_env = make_env(task, "val", framework="auto")
        else:
            trainer._ensure_model()
            rule_env = make_env(task, "val", normalize=True)
        ours = evaluate_days(trainer.policy(), trainer.make_eval_env("val", objective=True), DAYS)
        rule = evaluate_days(RuleBasedPolicy(rule_env), rule_env, DAYS)
        assert ours["mean_return"] == rule["mean_return"], algorithm
        trainer.close()


def test_batched_residual_env_matches_the_rule_row_by_row():
    """The native trainer's vector env behind the residual layer, actors at 0: every row's
    episode return is the rule's on that row's day."""
    venv = wrap_env(
        make_env("marl_opf", "val", framework="pettingzoo", num_envs=3, normalize=True), "residual"
    )
    obs, _ = venv.reset(seed=5)
    days = inspect_env(venv).runner.state.day_id.copy()
    zero = {a: np.zeros((3, 1), np.float32) for a in venv.possible_agents}
    totals = np.zeros(3)
    for _ in range(task_spec("marl_opf").horizon):
        obs, rewards, *_ = venv.step(zero)
        # a shared reward: every agent gets the system's; the dict env's episode return is one
        totals += np.mean([np.asarray(rewards[a], np.float64) for a in venv.possible_agents], 0)
    env = make_env("marl_opf", "val", framework="auto", normalize=True)
    rule = _returns(env, RuleBasedPolicy(env), [int(d) for d in days])
    np.testing.assert_allclose(totals, rule, rtol=1e-9)


# ---- safety layer --------------------------------------------------------------------------------
def test_safety_layer_keeps_the_battery_within_its_soc_feasible_power():
    env = make_env("battery_arbitrage", "val", normalize=True)
    assert bounds_kind(inspect_env(env).task) == "battery_soc"
    plain = rollout(env, RandomUnitPolicy(env), day_id=2, seed=0)
    assert plain["costs"][0] > 0  # random actions ask for energy beyond the SOC bounds
    safe = wrap_env(make_env("battery_arbitrage", "val", normalize=True), "safe")
    task, facts = inspect_env(safe).task, inspect_env(safe)
    obs, _ = safe.reset(seed=0, options={"day_id": 2})
    policy = RandomUnitPolicy(safe, seed=1)
    for _ in range(task.spec.horizon):
        lo, hi = step_bounds(task, facts.obs_scaler.from_unit(obs[None].astype(np.float64)))
        obs, _, _, truncated, info = safe.step(policy.act(obs, {}))
        applied = float(info["action_applied"][0])
        assert lo[0, 0] - 1e-4 <= applied <= hi[0, 0] + 1e-4
        assert float(info["constraint_costs"][0]) == 0.0
        if truncated:
            break


def test_safety_layer_keeps_every_unit_within_its_step_range():
    env = wrap_env(make_env("marl_opf", "val", framework="auto"), "safe")
    task = inspect_env(env).task
    assert bounds_kind(task) == "step_range"
    agents = list(env.possible_agents)
    obs, _ = env.reset(seed=0, options={"day_id": 1})
    policy = RandomUnitPolicy(env)
    moved = 0
    for _ in range(12):
        physical = np.stack([obs[a] for a in agents])[None].astype(np.float64)
        lo, hi = step_bounds(task, physical)
        obs, _, _, _, info = env.step(policy.act(obs, {}))
        applied = np.array([float(info[a]["action_applied"][0]) for a in agents])
        assert np.all(applied >= lo[0] - 1e-3) and np.all(applied <= hi[0] + 1e-3)
        box_lo, box_hi = np.asarray(task.spec.action.low), np.asarray(task.spec.action.high)
        moved += int(np.any((lo[0] > box_lo + 1e-6) | (hi[0] < box_hi - 1e-6)))
    assert moved > 0  # the ramps narrow the box on some steps


def test_tasks_without_declared_bounds_keep_the_box():
    env = make_env("dc_scheduling", "val", normalize=True)
    task = inspect_env(env).task
    assert bounds_kind(task) == "box"
    obs, _ = env.reset(seed=0)
    assert step_bounds(task, np.asarray(obs, np.float64)[None]) is None
    safe = wrap_env(env, "safe")
    lo, hi = safe.layer.bounds(np.asarray(obs)[None])
    np.testing.assert_allclose(lo[0], safe.layer.view.low)
    np.testing.assert_allclose(hi[0], safe.layer.view.high)


# ---- behaviour cloning ---------------------------------------------------------------------------
def test_behaviour_cloning_fits_the_oracle_actions(tmp_path):
    from stable_baselines3 import PPO

    from powerzoo.rl.reference.bc import (
        collect_oracle_dataset,
        fit_policy_mean,
        read_oracle_dataset,
    )

    env = make_env("battery_arbitrage", "train", normalize=True)
    path = collect_oracle_dataset(env, 6, tmp_path / "oracle.h5", seed=0)
    obs, actions = read_oracle_dataset(path, env)
    assert obs.shape == (6 * 48, 6) and actions.shape == (6 * 48, 1)
    model = PPO("MlpPolicy", env, seed=0, device="cpu")
    stats = fit_policy_mean(model, obs, actions, epochs=60, learning_rate=3e-3)
    assert stats["mse_after"] < 0.5 * stats["mse_before"]
    with pytest.raises(ValueError, match="normalized"):
        read_oracle_dataset(path, make_env("battery_arbitrage", "train"))


# ---- algorithm names -----------------------------------------------------------------------------
def test_reference_names_are_trainer_algorithms():
    assert set(REFERENCE_ALGORITHMS) <= set(ALL_ALGORITHMS)
    single, multi = (
        algorithms_for(task_spec("battery_arbitrage")),
        algorithms_for(task_spec("marl_opf")),
    )
    assert {"PPO-RESIDUAL", "SAC-RESIDUAL", "PPO-SAFE", "BC-PPO"} <= set(single)
    assert {"MAPPO-RESIDUAL", "MAPPO-SAFE"} <= set(multi)
    assert not {"MAPPO-RESIDUAL", "MAPPO-SAFE"} & set(single)
    assert not {"PPO-RESIDUAL", "BC-PPO"} & set(multi)
    own, base = split_reference_kwargs("PPO-residual", {"residual_scale": 0.5, "n_steps": 64})
    assert own == {"residual_scale": 0.5} and base == {"n_steps": 64}
    check_algorithm_kwargs("MAPPO-residual", {"residual_scale": 0.1, "n_steps": 48})
    with pytest.raises(ValueError, match="residual_scale"):
        check_algorithm_kwargs("PPO-residual", {"residual_scale": -1})
    with pytest.raises(ValueError, match="bc_epochs"):
        check_algorithm_kwargs("PPO-residual", {"bc_epochs": 3})
    with pytest.raises(ValueError, match="single-agent"):
        Trainer("marl_opf", algorithm="PPO-residual")._ensure_model()


TINY = {
    "PPO-residual": ("battery_arbitrage", {"n_steps": 32, "batch_size": 64}),
    "SAC-residual": ("battery_arbitrage", {"learning_starts": 32, "batch_size": 32}),
    "PPO-safe": ("battery_arbitrage", {"n_steps": 32, "batch_size": 64}),
    "BC-PPO": (
        "battery_arbitrage",
        {"n_steps": 32, "batch_size": 64, "bc_episodes": 2, "bc_epochs": 2},
    ),
    "MAPPO-residual": ("marl_opf", {"n_steps": 8, "n_minibatches": 1, "n_epochs": 1}),
    "MAPPO-safe": ("marl_opf", {"n_steps": 8, "n_minibatches": 1, "n_epochs": 1}),
}


def _evaluation_rows(run_dir):
    with (run_dir / "evaluation" / "evaluation_metrics.csv").open() as f:
        return list(csv.DictReader(f))


def _tiny_trainer(task, algorithm, tmp_path, evaluation, **kwargs):
    return Trainer(
        task,
        algorithm=algorithm,
        total_timesteps=128,
        seed=0,
        n_envs=4,
        output_dir=str(tmp_path),
        evaluation={"freq": 10**9, "episodes": 2, **evaluation},
        checkpoint=None,
        logging={"tensorboard": False, "progress_bar": False},
        **kwargs,
    )


@pytest.mark.parametrize("algorithm", list(TINY))
def test_tiny_training_run_of_each_reference_algorithm(algorithm, tmp_path):
    task, kwargs = TINY[algorithm]
    trainer = _tiny_trainer(task, algorithm, tmp_path, {"episodes": 1}, **kwargs)
    result = trainer.train()
    assert result.status == "finished" and result.num_timesteps >= 128
    assert trainer.algorithm == algorithm.upper()
    assert result.run_dir.name.startswith(algorithm.upper())
    summary = trainer.evaluate(split="val", n_episodes=1)
    loaded = Trainer.load(result.run_dir)
    assert type(loaded) is type(trainer)
    assert loaded.evaluate(split="val", n_episodes=1)["mean_return"] == summary["mean_return"]
    trainer.close()


@pytest.mark.slow
def test_residual_ppo_selected_on_val_is_not_worse_than_the_rule(tmp_path):
    """20k env steps of PPO-residual on battery_arbitrage (the preset's PPO settings), the model
    selected on 8 val days, scored on every val day: at least the rule's return (the untrained
    residual is the rule, so selection can always fall back on it)."""
    trainer = Trainer(
        "configs/battery_arbitrage.yaml",
        algorithm="PPO-residual",
        total_timesteps=20_480,
        seed=0,
        output_dir=str(tmp_path),
        evaluation={"freq": 2048, "episodes": 8},
        checkpoint=None,
        stop_conditions=[],
        logging={"tensorboard": False, "progress_bar": False},
    )
    result = trainer.train()
    best = Trainer.load(result.run_dir, model="best").evaluate(split="val", seed=0)
    env = make_env("battery_arbitrage", "val")
    days = list(range(inspect_env(env).task.n_days))
    rule = evaluate_days(RuleBasedPolicy(env), env, days, seed=0)
    assert best["mean_return"] >= rule["mean_return"] - 1e-6
    assert best["mean_costs"]["soc_violation"] <= rule["mean_costs"]["soc_violation"] + 1e-6


def test_a_campaign_trains_and_scores_the_reference_baselines(tmp_path):
    """One tiny local campaign: PPO-residual and PPO-safe on battery_arbitrage, each trained,
    loaded back and scored on 2 test days; the rows name the algorithms."""
    from powerzoo.rl.campaigns import parse_campaign, run_local

    tiny = {
        "algorithm_kwargs": {"n_steps": 64, "batch_size": 64},
        "overrides": {"evaluation": None},
    }
    spec = parse_campaign(
        {
            "name": "reference",
            "tasks": ["battery_arbitrage", "marl_opf"],
            "seeds": [0],
            "budget": {"total_timesteps": 256, "n_envs": 4},
            "evaluation": {"split": "test", "episodes": 2, "baselines": [], "model": "final",
                           "plots": False},
            "algorithms": {"ppo-residual": {"settings": {"default": tiny}},
                           "PPO-safe": {"settings": {"default": tiny}}},
        }
    )  # fmt: skip
    ids = [t.trial_id for t in spec.trials]
    assert ids == [
        "battery_arbitrage-PPO-RESIDUAL-default-seed0",
        "battery_arbitrage-PPO-SAFE-default-seed0",
    ]
    out = tmp_path / "out"
    assert not run_local(spec, out, progress=False).failed
    with open(out / "trials.csv", newline="") as f:
        trials = list(csv.DictReader(f))
    assert [r["trial_id"] for r in trials] == ids
    returns = [float(r["mean_return"]) for r in trials]
    assert all(np.isfinite(returns)) and returns[0] != returns[1]


@pytest.mark.parametrize("algorithm", ["PPO-residual", "MAPPO-residual"])
def test_a_residual_run_first_evaluates_its_untrained_policy_the_rule(algorithm, tmp_path):
    """Model selection can fall back on the rule: the untrained residual is evaluated before
    the first update (row 0 of the log, the rule's return on the same val days); with
    ``at_start: false`` it is not."""
    from powerzoo.benchmarks.baselines import select_days

    task, kwargs = TINY[algorithm]
    trainer = _tiny_trainer(task, algorithm, tmp_path / "on", {}, **kwargs)
    result = trainer.train()
    trainer.close()
    rows = _evaluation_rows(result.run_dir)
    assert [int(r["timestep"]) for r in rows] == [0, result.num_timesteps]
    assert rows[0]["new_best"] == "True"
    multi = algorithm.startswith("MAPPO")
    # the rule on the env the run evaluates on (a normalised one for PPO), as above
    env = (
        make_env(task, "val", framework="auto") if multi else make_env(task, "val", normalize=True)
    )
    days = select_days(inspect_env(env).task.n_days, 2)
    rule = evaluate_days(RuleBasedPolicy(env), env, days, seed=0)
    assert float(rows[0]["mean_return"]) == pytest.approx(rule["mean_return"], rel=1e-12)
    trainer = _tiny_trainer(task, algorithm, tmp_path / "off", {"at_start": False}, **kwargs)
    result = trainer.train()
    trainer.close()
    assert [int(r["timestep"]) for r in _evaluation_rows(result.run_dir)] == [result.num_timesteps]


def test_plain_learners_evaluate_at_start_only_when_asked(tmp_path):
    tiny = {"n_steps": 32, "batch_size": 64}
    default = _tiny_trainer("battery_arbitrage", "PPO", tmp_path / "a", {}, **tiny).train()
    assert [int(r["timestep"]) for r in _evaluation_rows(default.run_dir)] == [128]
    asked = _tiny_trainer("battery_arbitrage", "PPO", tmp_path / "b", {"at_start": True}, **tiny)
    result = asked.train()
    assert [int(r["timestep"]) for r in _evaluation_rows(result.run_dir)] == [0, 128]
    # SB3 on a multi-agent task evaluates once, at the end: asking for more is refused up front
    shared = _tiny_trainer("marl_opf", "PPO", tmp_path / "c", {"at_start": True}, **tiny)
    with pytest.raises(ValueError, match="evaluates once, at the end"):
        shared.train()
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())


def test_an_unset_at_start_is_not_written_so_config_hashes_stay_as_they_were(tmp_path):
    from powerzoo.rl.config import EvaluationConfig, TrainConfig

    plain = {"split": "val", "freq": 10_000, "episodes": 8, "deterministic": True}
    assert EvaluationConfig().model_dump() == plain  # the dict (and hash) from before the field
    assert EvaluationConfig(at_start=False).model_dump() == {**plain, "at_start": False}
    unset = TrainConfig(task="battery_arbitrage", total_timesteps=1000)
    assert "at_start" not in unset.to_dict()["evaluation"]
    asked = TrainConfig(
        task="battery_arbitrage", total_timesteps=1000, evaluation={"at_start": True}
    )
    assert asked.fingerprint() != unset.fingerprint()
    back = TrainConfig.from_file(asked.to_file(tmp_path / "run.yaml"))
    assert back.evaluation.at_start is True and back.fingerprint() == asked.fingerprint()
