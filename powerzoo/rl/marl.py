"""Multi-agent training with Stable-Baselines3: independent learners and one shared policy.

PowerZoo's multi-agent tasks (``marl_opf``, ``opf_118``, ``opf_118_7d``) give every agent its own
observation and action; SB3 trains single-agent policies. Two ways to bridge the gap live here:

* **Independent learners (IL)**, :func:`train_independent_learners`: one SB3 model per agent,
  each on its own :class:`SingleAgentView` (a Gymnasium env that shows one agent of a PettingZoo
  env and lets the other agents act with frozen policies). Training is round-robin: in each
  round every agent in turn learns for ``steps_per_round`` steps while the others act
  deterministically with their current models. Agents may have different spaces. Each agent
  sees a stationary env while it learns, at the price of ``n_agents`` separate envs and
  ``n_agents - 1`` policy calls per step.
* **Shared simultaneous training**, :func:`train_shared_policy`: one policy acts for every
  agent at once (parameter sharing). :class:`AgentsAsVecEnv` turns ``N`` copies of the native
  batched multi-agent env into an SB3 ``VecEnv`` of ``N * n_agents`` single-agent envs whose
  observations end with a one-hot agent id; all agents of all copies are stepped in one batched
  call. Every agent learns at the same time from the same samples, so it is far cheaper per
  sample than IL, but the agents need identical action spaces and equal observation sizes.
  :class:`SharedPolicy` runs the trained model on the dict env for
  :func:`powerzoo.benchmarks.evaluation.evaluate_days`.

Reward scale: the dispatch tasks pay shared rewards of ``-1e3`` to ``-1e6`` $ per step. Value
targets of that size swamp the gradient (SB3 clips the norm of the joint policy/value gradient),
so both trainers rescale rewards for learning only, through ``reward_scale``: ``"auto"``
(default) divides them by a running estimate of the discounted return's standard deviation
(SB3's ``VecNormalize(norm_obs=False, norm_reward=True)``); a number multiplies them by that
fixed factor (``1.0`` = raw rewards). Observations are not touched, so the returned models act
directly on ``make_env(task, normalize=True)`` envs with no statistics to carry along.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    VecEnv,
    VecEnvWrapper,
    VecMonitor,
    VecNormalize,
)
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from powerzoo.envs.make import make_env

if TYPE_CHECKING:
    from pettingzoo import ParallelEnv
    from stable_baselines3.common.base_class import BaseAlgorithm

    from powerzoo.envs.multi_agent import PowerZooMultiAgentVectorEnv

__all__ = [
    "ALGORITHMS",
    "SingleAgentView",
    "AgentsAsVecEnv",
    "SharedPolicy",
    "train_independent_learners",
    "train_shared_policy",
]

ALGORITHMS: tuple[str, ...] = ("PPO", "A2C", "SAC", "TD3")
"""Algorithms the multi-agent trainers accept (names are case-insensitive)."""

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
"""``callback_factory(agent, round_index)`` -> an SB3 callback (or list, or ``None``) for one ``learn``."""


# ---- helpers ----------------------------------------------------------------------------------
def _algorithm_class(name: str) -> type[BaseAlgorithm]:
    """SB3 class of ``name`` (case-insensitive); unknown names raise ``ValueError`` listing valid ones."""
    key = name.upper() if isinstance(name, str) else None
    if key not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; valid: {', '.join(ALGORITHMS)}")
    import stable_baselines3

    return getattr(stable_baselines3, key)


def _hold_action(space: gym.Space) -> Any:
    """Default action of an agent without a policy: mid-range of a Box (0 in normalised envs)."""
    if isinstance(space, gym.spaces.Box):
        low, high = space.low.astype(np.float64), space.high.astype(np.float64)
        bounded = np.isfinite(low) & np.isfinite(high)
        mid = np.where(bounded, (low + high) / 2.0, np.clip(0.0, low, high))
        return mid.astype(space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        return np.int64(space.start)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.asarray(space.start, dtype=space.dtype).copy()
    if isinstance(space, gym.spaces.MultiBinary):
        return np.zeros(space.shape, dtype=space.dtype)
    raise TypeError(f"no default action for a {type(space).__name__} space; give that agent a policy")


def _check_other(agent: str, policy: Any) -> None:
    if policy is not None and not (callable(getattr(policy, "predict", None)) or callable(policy)):
        raise TypeError(
            f"policy of {agent!r} must have .predict(obs, deterministic=True) (an SB3 model), be a "
            f"callable obs -> action, or be None (hold the default action); got {type(policy).__name__}"
        )


def _derive_seeds(seed: int, n: int) -> list[int]:
    """``n`` independent 31-bit seeds from ``seed`` (one per agent)."""
    return [int(s.generate_state(1)[0] >> 1) for s in np.random.SeedSequence(int(seed)).spawn(n)]


def _show_progress(progress: bool) -> bool:
    return bool(progress) and sys.stderr.isatty()


def _multi_agent_probe(task: TaskLike, split: str, task_kwargs: Mapping[str, Any]) -> Any:
    """Build the ``auto`` env of ``task`` once: it tells the agents, or that the task is single-agent."""
    env = make_env(task, split, framework="auto", **task_kwargs)
    if getattr(env, "possible_agents", None) is None:
        spec = getattr(getattr(env.unwrapped, "task", None), "spec", None)
        name = spec.task_id if spec is not None else task
        raise ValueError(
            f"{name} is a single-agent task; the multi-agent trainers need a multi-agent task "
            "(marl_opf, opf_118, ...). Train it with Trainer.train() instead."
        )
    return env


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
        raise ValueError(f"algo_kwargs may not set {sorted(reserved)}; the trainer sets them itself")
    kwargs.setdefault("gamma", gamma)
    if algo_cls.__name__ == "PPO" and "n_steps" not in kwargs:
        multiple = 64 // math.gcd(64, int(n_envs))  # rollout a multiple of SB3's default batch of 64
        n_steps = max(8, -(-ON_POLICY_ROLLOUT // (n_envs * multiple)) * multiple)
        if max_steps is not None:
            n_steps = max(2, min(n_steps, max_steps))
        kwargs["n_steps"] = n_steps
        kwargs.setdefault("batch_size", min(64, n_steps * n_envs))
    if log_std_init is not None and algo_cls.__name__ in ("PPO", "A2C"):
        policy_kwargs = dict(kwargs.get("policy_kwargs") or {})
        policy_kwargs.setdefault("log_std_init", log_std_init)
        kwargs["policy_kwargs"] = policy_kwargs
    kwargs.setdefault("verbose", 0)
    return kwargs


class _ScaleReward(VecEnvWrapper):
    """Multiplies rewards by a fixed factor (observations and infos untouched)."""

    def __init__(self, venv: VecEnv, scale: float) -> None:
        super().__init__(venv)
        self.scale = float(scale)

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        return obs, rewards * self.scale, dones, infos


def _scale_rewards(venv: VecEnv, reward_scale: float | str, gamma: float) -> VecEnv:
    """Wrap ``venv`` so the learner sees rescaled rewards (module docstring, *Reward scale*)."""
    if isinstance(reward_scale, str):
        if reward_scale != "auto":
            raise ValueError(f"reward_scale must be 'auto' or a positive number, got {reward_scale!r}")
        return VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=gamma, clip_reward=np.inf)  # no clipping
    if not np.isfinite(reward_scale) or reward_scale <= 0:
        raise ValueError(f"reward_scale must be 'auto' or a positive number, got {reward_scale!r}")
    return venv if reward_scale == 1.0 else _ScaleReward(venv, reward_scale)


class _TqdmSteps(BaseCallback):
    """tqdm bar over environment steps of one ``learn`` call."""

    def __init__(self, total: int, desc: str) -> None:
        super().__init__()
        self.total, self.desc, self.bar = total, desc, None

    def _on_training_start(self) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=self.total, desc=self.desc, unit="step")

    def _on_step(self) -> bool:
        self.bar.update(self.training_env.num_envs)
        return True

    def _on_training_end(self) -> None:
        self.bar.close()


# ---- independent learners ---------------------------------------------------------------------
class SingleAgentView(gym.Env):
    """One agent of a PettingZoo parallel env as a Gymnasium env; the other agents act by ``others``.

    Args:
        env: a PettingZoo ``ParallelEnv`` (``make_env(task, framework="pettingzoo")``).
        agent: the agent this view exposes (its spaces, reward, termination and info).
        others: ``{agent: policy}`` for the other agents. A policy is an object with
            ``predict(obs, deterministic=True) -> (action, state)`` (an SB3 model), a callable
            ``obs -> action``, or ``None``: the agent holds a fixed default action, the middle of
            its Box (0 in a ``normalize=True`` env; 0 clipped into range where a bound is
            infinite; the lowest value of a discrete space). Agents left out are ``None``.

    The other policies are called on the observation each agent received at the previous step,
    deterministically. Update them with :meth:`set_others` (SB3 models passed here are held by
    reference, so a model that keeps training is seen at its current weights).
    """

    metadata = {"render_modes": []}

    def __init__(self, env: ParallelEnv, agent: str, others: Mapping[str, Any] | None = None) -> None:
        agents = list(env.possible_agents)
        if agent not in agents:
            raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(agents)}")
        self.env, self.agent, self.possible_agents = env, agent, agents
        self.observation_space = env.observation_space(agent)
        self.action_space = env.action_space(agent)
        self._defaults = {a: _hold_action(env.action_space(a)) for a in agents if a != agent}
        self.others: dict[str, Any] = {}
        self._last_obs: dict[str, Any] | None = None
        self.set_others(others)

    def set_others(self, others: Mapping[str, Any] | None) -> None:
        """Replace the other agents' policies (``None`` or a missing agent: hold the default action)."""
        others = dict(others or {})
        if self.agent in others:
            raise ValueError(f"others must not include the view's own agent {self.agent!r}")
        unknown = set(others) - set(self.possible_agents)
        if unknown:
            raise ValueError(f"unknown agent(s) {sorted(unknown)} in others; agents: {', '.join(self.possible_agents)}")
        for a, policy in others.items():
            _check_other(a, policy)
        self.others = {a: others.get(a) for a in self._defaults}

    def _other_action(self, agent: str, obs: Any) -> Any:
        policy = self.others.get(agent)
        if policy is None:
            return self._defaults[agent]
        if callable(getattr(policy, "predict", None)):
            action, _ = policy.predict(obs, deterministic=True)
        else:
            action = policy(obs)
        return action

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        obs, infos = self.env.reset(seed=seed, options=options)
        self._last_obs = obs
        return obs[self.agent], infos.get(self.agent, {})

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._last_obs is None or self.agent not in self.env.agents:
            raise RuntimeError("episode is over (or not started); call reset()")
        actions = {a: self._other_action(a, self._last_obs[a]) for a in self.env.agents if a != self.agent}
        actions[self.agent] = action
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        self._last_obs = obs
        a = self.agent
        return obs[a], float(rewards[a]), bool(terms[a]), bool(truncs[a]), infos.get(a, {})

    def close(self) -> None:
        self.env.close()


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
    progress: bool = False,
    tensorboard_log: str | Path | None = None,
    callback_factory: CallbackFactory | None = None,
    reward_scale: float | str = "auto",
) -> dict[str, BaseAlgorithm]:
    """Train one SB3 model per agent, round-robin, the others frozen (independent learners).

    In each of ``rounds`` rounds every agent in turn learns ``steps_per_round`` env steps on its
    :class:`SingleAgentView` while the other agents act deterministically with their current
    models (``learn(..., reset_num_timesteps=False)``, so step counters, logs and episodes carry
    on across rounds). Each agent costs ``rounds * steps_per_round`` steps.

    Args:
        task: a multi-agent task name or config (as :func:`~powerzoo.rl.make_env` takes).
        algorithm: ``PPO``, ``A2C``, ``SAC`` or ``TD3`` (any case).
        seed: base seed; agent ``i``'s env and model get seed ``i`` of ``SeedSequence(seed)``.
        split, normalize, obs_mode, task_kwargs: passed to ``make_env``.
        algo_kwargs: extra SB3 constructor arguments, for every agent. Defaults PowerZoo fills in:
            ``gamma`` from the task spec; PPO ``n_steps = min(2048, steps_per_round)``.
        progress: tqdm bar over ``rounds * n_agents`` learn calls (only when stderr is a TTY).
        tensorboard_log: SB3 TensorBoard folder; each agent logs as run ``<agent>``.
        callback_factory: ``callback_factory(agent, round_index)`` returns the callback for that
            ``learn`` call (or ``None``).
        reward_scale: ``"auto"`` (running return normalisation) or a fixed factor; learning only
            (module docstring).

    Returns:
        ``{agent: model}``; ``SB3Policy(models)`` evaluates them on the dict env.
    """
    algo_cls = _algorithm_class(algorithm)
    if int(rounds) < 1 or int(steps_per_round) < 1:
        raise ValueError(f"rounds and steps_per_round must be >= 1, got {rounds} and {steps_per_round}")
    task_kwargs = dict(task_kwargs or {})
    probe = _multi_agent_probe(task, split, task_kwargs)
    agents, gamma = list(probe.possible_agents), float(probe.task_spec.gamma)
    seeds = _derive_seeds(seed, len(agents))
    kwargs = _default_algo_kwargs(algo_cls, algo_kwargs, gamma, 1, int(steps_per_round))

    views: dict[str, SingleAgentView] = {}
    models: dict[str, BaseAlgorithm] = {}
    for agent, agent_seed in zip(agents, seeds, strict=True):
        pz = make_env(task, split, framework="pettingzoo", normalize=normalize, obs_mode=obs_mode,
                      seed=agent_seed, **task_kwargs)
        view = SingleAgentView(pz, agent)
        view.action_space.seed(agent_seed)
        venv = _scale_rewards(DummyVecEnv([lambda v=view: Monitor(v)]), reward_scale, kwargs["gamma"])
        views[agent] = view
        models[agent] = algo_cls("MlpPolicy", venv, seed=agent_seed,
                                 tensorboard_log=None if tensorboard_log is None else str(tensorboard_log), **kwargs)
    for agent, view in views.items():
        view.set_others({a: m for a, m in models.items() if a != agent})

    bar = None
    if _show_progress(progress):
        from tqdm.auto import tqdm

        bar = tqdm(total=int(rounds) * len(agents), desc=f"IL {algo_cls.__name__}", unit="learn")
    try:
        for round_index in range(int(rounds)):
            for agent in agents:
                callback = None if callback_factory is None else callback_factory(agent, round_index)
                models[agent].learn(int(steps_per_round), callback=callback, reset_num_timesteps=False,
                                    tb_log_name=agent)
                if bar is not None:
                    bar.set_postfix(round=round_index, agent=agent)
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return models


# ---- shared policy, simultaneous training -----------------------------------------------------
class AgentsAsVecEnv(VecEnv):
    """SB3 ``VecEnv`` of ``N * n_agents`` single-agent envs over a native multi-agent vector env.

    Env ``k`` is agent ``k % n_agents`` in copy ``k // n_agents`` of ``env``
    (:class:`~powerzoo.envs.multi_agent.PowerZooMultiAgentVectorEnv`, ``make_env(task,
    num_envs=N)``). Its observation is the agent's observation followed by the one-hot id of the
    agent (``n_agents`` entries); its reward is the agent's reward. One SB3 step is one batched
    native step of all agents in all copies. Episodes auto-reset in that step, as SB3 expects:
    ``dones[k]`` is set, the returned observation is the new episode's first one, and
    ``infos[k]["terminal_observation"]`` holds the last one; ``infos[k]["TimeLimit.truncated"]`` is
    true when the episode was cut by the time limit rather than terminated.

    All agents need the same action space (``normalize=True`` makes them [-1, 1]) and
    observations of equal size; the observation space's bounds are the union of the agents'.
    The copies share one random stream, so ``seed()`` / ``reset()`` seed the whole batch with
    env 0's seed.
    """

    def __init__(self, env: PowerZooMultiAgentVectorEnv) -> None:
        self.env = env
        self.agents = list(env.possible_agents)
        self.n_agents, self.n_copies = len(self.agents), int(env.num_envs)
        obs_spaces = [env.single_observation_space(a) for a in self.agents]
        act_spaces = [env.single_action_space(a) for a in self.agents]
        if not all(isinstance(s, gym.spaces.Box) for s in obs_spaces + act_spaces):
            raise ValueError("AgentsAsVecEnv needs Box observation and action spaces")
        shapes = {s.shape for s in obs_spaces}
        if len(shapes) != 1 or len(obs_spaces[0].shape) != 1:
            raise ValueError(
                f"a shared policy needs 1-D observations of equal size for all agents, got {sorted(shapes)}; "
                "use an obs_mode with equal sizes or train_independent_learners"
            )
        first = act_spaces[0]
        if not all(s.shape == first.shape and np.array_equal(s.low, first.low) and np.array_equal(s.high, first.high)
                   for s in act_spaces):
            raise ValueError(
                "a shared policy needs the same action space for every agent; build the env with "
                "normalize=True (all actions in [-1, 1]) or use train_independent_learners"
            )
        eye = np.eye(self.n_agents, dtype=np.float32)
        low = np.concatenate([np.min([s.low for s in obs_spaces], axis=0), np.zeros(self.n_agents)])
        high = np.concatenate([np.max([s.high for s in obs_spaces], axis=0), np.ones(self.n_agents)])
        observation_space = gym.spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)
        self._ids = np.broadcast_to(eye, (self.n_copies, self.n_agents, self.n_agents))
        self._actions: np.ndarray | None = None
        super().__init__(self.n_copies * self.n_agents, observation_space, first)

    def _flat_obs(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """``{agent: [N, d]}`` -> ``[N * n_agents, d + n_agents]`` with the one-hot ids appended."""
        stacked = np.stack([np.asarray(obs[a], dtype=np.float32) for a in self.agents], axis=1)
        return np.concatenate([stacked, self._ids], axis=2).reshape(self.num_envs, -1)

    def _per_env(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """``{agent: [N]}`` -> ``[N * n_agents]`` in env order."""
        return np.stack([np.asarray(values[a]) for a in self.agents], axis=1).reshape(-1)

    def reset(self) -> np.ndarray:
        seed = self._seeds[0]
        options = self._options[0] or None
        obs, _ = self.env.reset(seed=seed, options=options)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return self._flat_obs(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_async must be called before step_wait")
        shape = (self.n_copies, self.n_agents, *self.action_space.shape)
        actions = self._actions.reshape(shape)
        self._actions = None
        obs, rewards, terms, truncs, info = self.env.step({a: actions[:, i] for i, a in enumerate(self.agents)})
        terminated, truncated = self._per_env(terms).astype(bool), self._per_env(truncs).astype(bool)
        dones = terminated | truncated
        timeout = truncated & ~terminated
        infos: list[dict[str, Any]] = [{"TimeLimit.truncated": bool(t)} for t in timeout]
        if dones.any():
            final = self._flat_obs(info["final_obs"])
            for k in np.flatnonzero(dones):
                infos[k]["terminal_observation"] = final[k]
        return self._flat_obs(obs), self._per_env(rewards).astype(np.float32), dones, infos

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        n = len(list(self._get_indices(indices)))
        value = getattr(self.env, attr_name, None) if attr_name == "render_mode" else getattr(self.env, attr_name)
        return [value] * n

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        setattr(self.env, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any) -> list[Any]:
        """Calls ``method_name`` once on the native env (shared by all envs) and repeats the result."""
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [result] * len(list(self._get_indices(indices)))

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(list(self._get_indices(indices)))


class SharedPolicy:
    """A model trained by :func:`train_shared_policy` acting for every agent of a dict env.

    ``act(obs, info)`` appends each agent's one-hot id (the order of ``agents``, which must be the
    training env's ``possible_agents``) and predicts all agents in one batched call.
    """

    def __init__(self, model: Any, agents: Sequence[str], deterministic: bool = True) -> None:
        if not callable(getattr(model, "predict", None)):
            raise TypeError(f"SharedPolicy needs a model with .predict(obs, ...), got {model!r}")
        self.model, self.agents, self.deterministic = model, list(agents), bool(deterministic)
        self._ids = np.eye(len(self.agents), dtype=np.float32)
        self._index = {a: i for i, a in enumerate(self.agents)}
        shape = getattr(getattr(model, "observation_space", None), "shape", None)
        if shape is not None and (len(shape) != 1 or shape[0] <= len(self.agents)):
            raise ValueError(
                f"model observations have shape {shape}; a shared policy over {len(self.agents)} agents "
                "expects 1-D observations ending with the one-hot agent id"
            )
        self.name = f"shared_{type(model).__name__.lower()}"

    def seed(self, seed: int) -> None:
        """Seed the model's sampling (only matters with ``deterministic=False``)."""
        if not self.deterministic and callable(getattr(self.model, "set_random_seed", None)):
            self.model.set_random_seed(seed)

    def reset(self) -> None:
        return None

    def act(self, obs: Mapping[str, Any], info: Any = None) -> dict[str, Any]:
        present = [a for a in obs if a in self._index]
        unknown = set(obs) - set(present)
        if unknown:
            raise ValueError(f"SharedPolicy was built for agents {self.agents}; got unknown {sorted(unknown)}")
        rows = np.stack([np.asarray(obs[a], dtype=np.float32).reshape(-1) for a in present])
        ids = self._ids[[self._index[a] for a in present]]
        actions, _ = self.model.predict(np.concatenate([rows, ids], axis=1), deterministic=self.deterministic)
        return {a: actions[i] for i, a in enumerate(present)}


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
    progress: bool = False,
    reward_scale: float | str = "auto",
) -> BaseAlgorithm:
    """Train one policy shared by all agents, all agents learning at once (parameter sharing).

    The env is :class:`AgentsAsVecEnv` over ``make_env(task, num_envs=n_envs)``: SB3 sees
    ``n_envs * n_agents`` envs, so ``total_timesteps`` counts agent-steps (SB3's convention:
    one vector step adds ``n_envs * n_agents``); the task is stepped ``total_timesteps /
    (n_envs * n_agents)`` times per copy.

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
        progress: tqdm bar over agent-steps (only when stderr is a TTY).
        reward_scale: ``"auto"`` (running return normalisation) or a fixed factor; learning only
            (module docstring).

    Returns:
        The model; evaluate it with ``SharedPolicy(model, env.possible_agents)``.
    """
    algo_cls = _algorithm_class(algorithm)
    if int(total_timesteps) < 1 or int(n_envs) < 1:
        raise ValueError(f"total_timesteps and n_envs must be >= 1, got {total_timesteps} and {n_envs}")
    task_kwargs = dict(task_kwargs or {})
    probe = _multi_agent_probe(task, split, task_kwargs)
    gamma = float(probe.task_spec.gamma)
    native = make_env(task, split, normalize=normalize, obs_mode=obs_mode, num_envs=int(n_envs), seed=seed,
                      **task_kwargs)
    vec = AgentsAsVecEnv(native)
    kwargs = _default_algo_kwargs(algo_cls, algo_kwargs, gamma, vec.num_envs, None, SHARED_LOG_STD_INIT)
    venv = _scale_rewards(VecMonitor(vec), reward_scale, kwargs["gamma"])
    model = algo_cls("MlpPolicy", venv, seed=seed,
                     tensorboard_log=None if tensorboard_log is None else str(tensorboard_log), **kwargs)
    callbacks = [] if callback is None else (list(callback) if isinstance(callback, list) else [callback])
    if _show_progress(progress):
        callbacks.append(_TqdmSteps(int(total_timesteps), f"shared {algo_cls.__name__}"))
    model.learn(int(total_timesteps), callback=callbacks or None, tb_log_name=f"{algo_cls.__name__}_shared")
    return model
