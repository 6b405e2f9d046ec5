"""The two multi-agent training loops on SB3: independent learners and one shared policy.

* **Independent learners (IL)**, :func:`train_independent_learners`: one SB3 model per agent,
  each on its own :class:`~powerzoo.rl.sb3.marl.adapters.SingleAgentView` (the other agents act with
  frozen policies). Training is round-robin: in each round every agent in turn learns for
  ``steps_per_round`` steps while the others act deterministically with their current models.
  Agents may have different spaces. Each agent sees a stationary env while it learns, at the
  price of ``n_agents`` separate envs and ``n_agents - 1`` policy calls per step.
* **Shared simultaneous training**, :func:`train_shared_policy`: one policy acts for every agent at
  once (parameter sharing) on :class:`~powerzoo.rl.sb3.marl.adapters.AgentsAsVecEnv`; all agents of
  all copies are stepped in one batched call. Every agent learns at the same time from the same
  samples, so it is far cheaper per sample than IL, but the agents need identical action spaces
  and equal observation sizes. :class:`~powerzoo.rl.sb3.policy.SharedPolicy` runs the trained
  model on the dict env for :func:`powerzoo.benchmarks.evaluation.evaluate_days`.

Both loops accept the algorithms of :data:`powerzoo.rl.algorithms.MULTI_AGENT_ALGORITHMS` and
rescale rewards for learning only (:mod:`powerzoo.rl.sb3.marl.reward_scale`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

from powerzoo.envs.introspect import inspect_env
from powerzoo.envs.make import make_env
from powerzoo.progress import progress_bar
from powerzoo.rl.algorithms import MULTI_AGENT_ALGORITHMS, algorithm_class
from powerzoo.rl.budget import sb3_rollout, warn_rounded_budget
from powerzoo.rl.sb3.callbacks import TqdmProgressCallback
from powerzoo.rl.sb3.logger import console_logger
from powerzoo.rl.sb3.marl.adapters import AgentsAsVecEnv, SingleAgentView
from powerzoo.rl.sb3.marl.reward_scale import scale_rewards

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

__all__ = [
    "train_independent_learners",
    "train_shared_policy",
    "ON_POLICY_ROLLOUT",
    "SHARED_LOG_STD_INIT",
]

ON_POLICY_ROLLOUT = 2048
"""About this many samples per PPO update (``n_steps * n_envs``) when ``n_steps`` is not given."""

SHARED_LOG_STD_INIT = -1.0
"""Initial log std of PPO/A2C Gaussian policies in :func:`train_shared_policy` (std 0.37, not 1).

With a shared reward every agent's exploration noise is noise in the others' returns too; with
the default std of 1 on [-1, 1] actions the team reward mostly measures that noise. On
``marl_opf`` (40k agent-steps, PPO, seed 0) it takes the test return from about -2.7M to -0.69M
$/day per agent. :func:`train_independent_learners` keeps SB3's default: there the other agents
act deterministically, so an agent's noise is its own."""

TaskLike = str | Mapping[str, Any] | Path
CallbackFactory = Callable[[str, int], Any]
"""``callback_factory(agent, round_index)`` -> an SB3 callback (or list, or ``None``) for one
``learn``."""


def _algorithm_class(name: str) -> type[BaseAlgorithm]:
    """SB3 class of ``name`` (case-insensitive); names outside the multi-agent subset raise
    ``ValueError``."""
    return algorithm_class(name, valid=MULTI_AGENT_ALGORITHMS)


def _derive_seeds(seed: int, n: int) -> list[int]:
    """``n`` independent 31-bit seeds from ``seed`` (one per agent)."""
    return [int(s.generate_state(1)[0] >> 1) for s in np.random.SeedSequence(int(seed)).spawn(n)]


def _multi_agent_facts(task: TaskLike, split: str, task_kwargs: Mapping[str, Any]) -> Any:
    """The facts (:func:`~powerzoo.envs.introspect.inspect_env`) of ``task``'s ``auto`` env, built
    once: they tell the agents and the gamma, or that the task is single-agent."""
    facts = inspect_env(make_env(task, split, framework="auto", **task_kwargs))
    if facts.agents is None:
        raise ValueError(
            f"{facts.task_id} is a single-agent task; "
            "the multi-agent trainers need a multi-agent task "
            "(marl_opf, opf_118, ...). Train it with Trainer.train() instead."
        )
    return facts


def _default_algo_kwargs(
    algo_cls: type,
    algo_kwargs: Mapping[str, Any] | None,
    gamma: float,
    n_envs: int,
    max_steps: int | None,
    log_std_init: float | None = None,
) -> dict[str, Any]:
    """The caller's kwargs plus PowerZoo's defaults: the task's gamma, PPO rollouts of about
    :data:`ON_POLICY_ROLLOUT` samples (not more than ``max_steps`` per env, so a short ``learn``
    call does not overshoot its budget) and, if given, the initial log std of PPO/A2C policies."""
    kwargs = dict(algo_kwargs or {})
    reserved = {"env", "policy", "seed", "tensorboard_log"} & set(kwargs)
    if reserved:
        raise ValueError(
            f"algo_kwargs may not set {sorted(reserved)}; the trainer sets them itself"
        )
    kwargs.setdefault("gamma", gamma)
    if issubclass(algo_cls, PPO) and "n_steps" not in kwargs:  # a subclass from outside too
        multiple = 64 // math.gcd(
            64, int(n_envs)
        )  # rollout a multiple of SB3's default batch of 64
        n_steps = max(8, -(-ON_POLICY_ROLLOUT // (n_envs * multiple)) * multiple)
        if max_steps is not None:
            n_steps = max(2, min(n_steps, max_steps))
        kwargs["n_steps"] = n_steps
        kwargs.setdefault("batch_size", min(64, n_steps * n_envs))
    if log_std_init is not None and issubclass(algo_cls, (PPO, A2C)):
        policy_kwargs = dict(kwargs.get("policy_kwargs") or {})
        policy_kwargs.setdefault("log_std_init", log_std_init)
        kwargs["policy_kwargs"] = policy_kwargs
    kwargs.setdefault("verbose", 0)
    return kwargs


def train_independent_learners(
    task: TaskLike,
    algorithm: str = "PPO",
    *,
    rounds: int = 4,
    steps_per_round: int = 2048,
    seed: int = 0,
    split: str = "train",
    normalize: bool = True,
    obs_mode: str | None = None,
    algo_kwargs: Mapping[str, Any] | None = None,
    task_kwargs: Mapping[str, Any] | None = None,
    progress: bool | None = None,
    tensorboard_log: str | Path | None = None,
    callback_factory: CallbackFactory | None = None,
    reward_scale: float | str = "auto",
) -> dict[str, BaseAlgorithm]:
    """Train one SB3 model per agent, round-robin, the others frozen (independent learners).

    In each of ``rounds`` rounds every agent in turn learns ``steps_per_round`` env steps on its
    :class:`~powerzoo.rl.sb3.marl.adapters.SingleAgentView` while the other agents act
    deterministically with their current models (``learn(..., reset_num_timesteps=False)``, so step
    counters, logs and episodes carry on across rounds). Each agent costs ``rounds *
    steps_per_round`` steps.

    Args:
        task: a multi-agent task name or config (as :func:`~powerzoo.rl.make_env` takes).
        algorithm: ``PPO``, ``A2C``, ``SAC`` or ``TD3`` (any case).
        seed: base seed; agent ``i``'s env and model get seed ``i`` of ``SeedSequence(seed)``.
        split, normalize, obs_mode, task_kwargs: passed to ``make_env``.
        algo_kwargs: extra SB3 constructor arguments, for every agent. Defaults PowerZoo fills in:
            ``gamma`` from the task spec; PPO ``n_steps = min(2048, steps_per_round)``.
        progress: tqdm bar over ``rounds * n_agents`` learn calls (``None``: only on a terminal).
        tensorboard_log: SB3 TensorBoard folder; each agent logs as run ``<agent>``.
        callback_factory: ``callback_factory(agent, round_index)`` returns the callback for that
            ``learn`` call (or ``None``).
        reward_scale: ``"auto"`` (running return normalisation) or a fixed factor; learning only
            (:mod:`powerzoo.rl.sb3.marl.reward_scale`).

    Returns:
        ``{agent: model}``; ``SB3Policy(models)`` evaluates them on the dict env.
    """
    algo_cls = _algorithm_class(algorithm)
    if int(rounds) < 1 or int(steps_per_round) < 1:
        raise ValueError(
            f"rounds and steps_per_round must be >= 1, got {rounds} and {steps_per_round}"
        )
    task_kwargs = dict(task_kwargs or {})
    facts = _multi_agent_facts(task, split, task_kwargs)
    agents, gamma = list(facts.agents), float(facts.spec.gamma)
    seeds = _derive_seeds(seed, len(agents))
    kwargs = _default_algo_kwargs(algo_cls, algo_kwargs, gamma, 1, int(steps_per_round))

    views: dict[str, SingleAgentView] = {}
    models: dict[str, BaseAlgorithm] = {}
    for agent, agent_seed in zip(agents, seeds, strict=True):
        pz = make_env(
            task,
            split,
            framework="pettingzoo",
            normalize=normalize,
            obs_mode=obs_mode,
            seed=agent_seed,
            **task_kwargs,
        )
        view = SingleAgentView(pz, agent)
        view.action_space.seed(agent_seed)
        venv = scale_rewards(
            DummyVecEnv([lambda v=view: Monitor(v)]), reward_scale, kwargs["gamma"]
        )
        views[agent] = view
        models[agent] = algo_cls(
            "MlpPolicy",
            venv,
            seed=agent_seed,
            tensorboard_log=None if tensorboard_log is None else str(tensorboard_log),
            **kwargs,
        )
        console_logger(models[agent])
    for agent, view in views.items():
        view.set_others({a: m for a, m in models.items() if a != agent})
    rollout = sb3_rollout(next(iter(models.values())))
    if rollout is not None:
        warn_rounded_budget(
            f"independent {algo_cls.__name__}",
            int(steps_per_round),
            0,
            *rollout,
            unit="env steps per agent and round",
            name="steps_per_round",
        )

    with progress_bar(
        progress=progress,
        total=int(rounds) * len(agents),
        desc=f"IL {algo_cls.__name__}",
        unit="learn",
    ) as bar:
        for round_index in range(int(rounds)):
            for agent in agents:
                callback = (
                    None if callback_factory is None else callback_factory(agent, round_index)
                )
                models[agent].learn(
                    int(steps_per_round),
                    callback=callback,
                    reset_num_timesteps=False,
                    tb_log_name=agent,
                )
                bar.set_postfix(round=round_index, agent=agent)
                bar.update(1)
    return models


def train_shared_policy(
    task: TaskLike,
    algorithm: str = "PPO",
    *,
    total_timesteps: int,
    n_envs: int = 4,
    seed: int = 0,
    split: str = "train",
    normalize: bool = True,
    obs_mode: str | None = None,
    algo_kwargs: Mapping[str, Any] | None = None,
    task_kwargs: Mapping[str, Any] | None = None,
    tensorboard_log: str | Path | None = None,
    callback: Any = None,
    progress: bool | None = None,
    reward_scale: float | str = "auto",
    budget_is_cap: bool = False,
) -> BaseAlgorithm:
    """Train one policy shared by all agents, all agents learning at once (parameter sharing).

    The env is :class:`~powerzoo.rl.sb3.marl.adapters.AgentsAsVecEnv` over ``make_env(task,
    num_envs=n_envs)``: SB3 sees ``n_envs * n_agents`` envs, so ``total_timesteps`` counts
    agent-steps (SB3's convention: one vector step adds ``n_envs * n_agents``); the task is stepped
    ``total_timesteps / (n_envs * n_agents)`` times per copy.

    Args:
        task: a multi-agent task name or config (as :func:`~powerzoo.rl.make_env` takes).
        algorithm: ``PPO``, ``A2C``, ``SAC`` or ``TD3`` (any case).
        total_timesteps: agent-steps to train for.
        n_envs: copies of the task stepped together.
        seed: seeds the env and the model.
        split, normalize, obs_mode, task_kwargs: passed to ``make_env``; a shared policy needs
            ``normalize=True`` unless all agents have the same physical action range.
        algo_kwargs: extra SB3 constructor arguments. Defaults PowerZoo fills in: ``gamma`` from
            the task spec; PPO ``n_steps`` so one rollout holds about 2,048 agent-steps;
            PPO/A2C ``policy_kwargs["log_std_init"] =`` :data:`SHARED_LOG_STD_INIT`.
        tensorboard_log: SB3 TensorBoard folder.
        callback: SB3 callback(s) for ``learn``.
        progress: tqdm bar over agent-steps (``None``: only on a terminal).
        reward_scale: ``"auto"`` (running return normalisation) or a fixed factor; learning only
            (:mod:`powerzoo.rl.sb3.marl.reward_scale`).
        budget_is_cap: ``total_timesteps`` is a cap a stop condition in ``callback`` ends
            training before (a compute track's), so it is not rounded to whole rollouts aloud.

    Returns:
        The model; evaluate it with ``SharedPolicy(model, env.possible_agents)``.
    """
    algo_cls = _algorithm_class(algorithm)
    if int(total_timesteps) < 1 or int(n_envs) < 1:
        raise ValueError(
            f"total_timesteps and n_envs must be >= 1, got {total_timesteps} and {n_envs}"
        )
    task_kwargs = dict(task_kwargs or {})
    gamma = float(_multi_agent_facts(task, split, task_kwargs).spec.gamma)
    native = make_env(
        task,
        split,
        normalize=normalize,
        obs_mode=obs_mode,
        num_envs=int(n_envs),
        seed=seed,
        **task_kwargs,
    )
    vec = AgentsAsVecEnv(native)
    kwargs = _default_algo_kwargs(
        algo_cls, algo_kwargs, gamma, vec.num_envs, None, SHARED_LOG_STD_INIT
    )
    venv = scale_rewards(VecMonitor(vec), reward_scale, kwargs["gamma"])
    model = algo_cls(
        "MlpPolicy",
        venv,
        seed=seed,
        tensorboard_log=None if tensorboard_log is None else str(tensorboard_log),
        **kwargs,
    )
    console_logger(model)
    callbacks = (
        [] if callback is None else (list(callback) if isinstance(callback, list) else [callback])
    )
    callbacks.append(
        TqdmProgressCallback(int(total_timesteps), progress, desc=f"shared {algo_cls.__name__}")
    )
    rollout = sb3_rollout(model)
    if rollout is not None and not budget_is_cap:  # the rollout counts agent-steps
        warn_rounded_budget(
            f"shared {algo_cls.__name__}", int(total_timesteps), 0, *rollout, unit="agent-steps"
        )
    model.learn(int(total_timesteps), callback=callbacks, tb_log_name=f"{algo_cls.__name__}_shared")
    return model
