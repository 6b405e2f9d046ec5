"""RLlib (Ray 2.60, new API stack) on PowerZoo's multi-agent tasks: env registration, PPO configs,
policies.

* :func:`register_rllib_envs`: every multi-agent task under ``"powerzoo/<task>"`` for
  ``config.environment("powerzoo/marl_opf", env_config={...})`` (keys: see
  :class:`~powerzoo.envs.rllib_env.PowerZooRLlibEnv`).
* :func:`ppo_config`: a ready ``PPOConfig`` with one RLModule per policy of the chosen parameter
  sharing (``"shared"``: one for all agents, ``"per_group"``: one per agent group of the task
  spec, ``"per_agent"``: one per agent) and the defaults written out below.
* :class:`RLlibPolicy` (in :mod:`powerzoo.integrations.rllib_policy`): the RLModules of a
  checkpoint acting deterministically in the physical-unit env of ``powerzoo.benchmarks.evaluate``.
* :func:`rllib_sampling_rate`: env-steps/s of RLlib's own sampling (for ``benchmarks/``).

Importing this module imports Ray; without the extra it raises an ImportError naming
``pip install "powerzoo[ray]"``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from powerzoo.envs.rllib_env import PowerZooRLlibEnv
from powerzoo.integrations.rllib_policy import RLlibPolicy
from powerzoo.tasks.registry import get_task_class, list_tasks

try:
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.tune.registry import register_env
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError('RLlib support needs Ray: pip install "powerzoo[ray]"') from err

__all__ = [
    "SHARING_MODES",
    "ENV_PREFIX",
    "register_rllib_envs",
    "module_mapping",
    "ppo_config",
    "auto_reward_scale",
    "rllib_sampling_rate",
    "RLlibPolicy",
    "AgentToModule",
    "TorchThreads",
    "MAX_TORCH_THREADS",
]

SHARING_MODES: tuple[str, ...] = ("shared", "per_group", "per_agent")
ENV_PREFIX = "powerzoo/"
SHARED_MODULE = "shared"
_ENV_KEYS = (
    "normalize",
    "obs_mode",
    "reward",
    "reward_scale",
)  # ppo_config's env_kwargs that are not task kwargs


class _EnvCreator:
    """Creator of the registered env ``"powerzoo/<task>"`` (a class, so it pickles by reference)."""

    def __init__(self, task: str) -> None:
        self.task = task

    def __call__(self, env_context: Any) -> PowerZooRLlibEnv:
        # RLlib's own EnvContext object goes through unchanged: the env numbers its sub-envs on it
        return PowerZooRLlibEnv(env_context, task=self.task)


class AgentToModule:
    """RLlib ``policy_mapping_fn``: agent id -> module id, from a fixed table (picklable).

    Args:
        mapping: ``{agent: module id}``.
    """

    def __init__(self, mapping: Mapping[str, str]) -> None:
        self.mapping = dict(mapping)

    def __call__(self, agent_id: str, episode: Any = None, **kwargs: Any) -> str:
        try:
            return self.mapping[agent_id]
        except KeyError:
            raise ValueError(
                f"unknown agent {agent_id!r}; agents: {', '.join(self.mapping)}"
            ) from None


MAX_TORCH_THREADS = 256  # ppo_config's bound on torch_threads (torch fails on huge counts)


class TorchThreads:
    """RLlib callback (picklable): ``threads`` torch threads, and as many BLAS / OpenMP threads
    (numpy's linear algebra, through threadpoolctl), in every process of a run.

    Registered by :func:`ppo_config` as ``on_algorithm_init`` (the driver, which holds the local
    env runner and the local learner, then every learner and env runner) and as
    ``on_environment_created`` (each env runner, also one that RLlib recreates after a failure).
    Small MLPs and small env matrices run fastest on one thread: a thread pool per library and
    per process oversubscribes the cores (Ray's actors already start with one; the driver does
    not).

    Args:
        threads: Threads per library and process.
    """

    def __init__(self, threads: int) -> None:
        self.threads = int(threads)

    def _set(self, *_: Any) -> int:
        """Set the thread counts in this process; returns torch's."""
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(self.threads)
        threadpool_limits(limits=self.threads)  # kept: not used as a context manager
        return torch.get_num_threads()

    def __call__(self, *, algorithm: Any = None, env_runner: Any = None, **_: Any) -> None:
        self._set()
        if algorithm is not None:  # on_algorithm_init, in the driver
            for result in algorithm.learner_group.foreach_learner(self._set):
                result.get()  # raises a learner's error here
            algorithm.env_runner_group.foreach_env_runner(self._set, local_env_runner=True)


def _multi_agent_tasks() -> list[str]:
    return [t for t in list_tasks() if get_task_class(t).make_spec().agent_mode == "multi"]


def register_rllib_envs() -> list[str]:
    """Register every multi-agent task with Tune's registry as ``"powerzoo/<task>"``; returns the
    names.

    ``env_config`` keys: ``split``, ``normalize``, ``seed``, ``obs_mode``, ``reward``,
    ``reward_scale``, ``task_kwargs`` (or task parameters as keys of their own).

    Returns:
        The registered env names.
    """
    names = []
    for task in _multi_agent_tasks():
        register_env(ENV_PREFIX + task, _EnvCreator(task))
        names.append(ENV_PREFIX + task)
    return names


def _multi_agent_spec(task: str, task_kwargs: Mapping[str, Any]) -> Any:
    spec = get_task_class(task).make_spec(
        **task_kwargs
    )  # unknown task -> ValueError listing the valid ones
    if spec.agent_mode != "multi":
        raise ValueError(
            f"{task} is a single-agent task; RLlib trains it from its Gymnasium env "
            f"(PPOConfig().environment('{spec.gym_id or task}')), not through ppo_config"
        )
    return spec


def module_mapping(task: str, sharing: str = "shared", **task_kwargs: Any) -> dict[str, str]:
    """``{agent: module id}`` of a sharing mode: ``"shared"``, group names, or agent names.

    Args:
        task: A registered multi-agent task.
        sharing: ``"shared"``, ``"per_group"`` or ``"per_agent"``.
        **task_kwargs: Task parameters.

    Returns:
        ``{agent: module id}``.
    """
    if sharing not in SHARING_MODES:
        raise ValueError(f"unknown sharing {sharing!r}; valid: {', '.join(SHARING_MODES)}")
    spec = _multi_agent_spec(task, task_kwargs)
    if sharing == "shared":
        return dict.fromkeys(spec.agents, SHARED_MODULE)
    if sharing == "per_agent":
        return {a: a for a in spec.agents}
    return {a: g.name for g in spec.groups for a in g.agents}


def auto_reward_scale(task: str, split: str = "train", seed: int = 0, **env_kwargs: Any) -> float:
    """Factor that brings returns to about 1:
    ``1 / (mean |reward| * min(horizon, 1 / (1 - gamma)))``.

    The mean absolute per-agent reward is measured on one episode of uniform random actions
    (the action spaces seeded from ``seed``); a task whose rewards are all 0 there gets 1.0.

    Args:
        task: A registered multi-agent task.
        split: Date split of the measured episode.
        seed: Seed of the episode and the action spaces.
        **env_kwargs: ``make_env`` options and task parameters.

    Returns:
        The reward scale, per $ of reward.
    """
    env = PowerZooRLlibEnv(
        {
            "task": task,
            "split": split,
            "seed": seed,
            **env_kwargs,
            "normalize": True,
            "reward_scale": 1.0,
        }
    )
    env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    while not done:
        _, rewards, terms, truncs, _ = env.step(
            {a: env.action_spaces[a].sample() for a in env.possible_agents}
        )
        total += float(np.mean(np.abs(list(rewards.values()))))
        steps += 1
        done = terms["__all__"] or truncs["__all__"]
    mean_abs = total / steps
    if not np.isfinite(mean_abs) or mean_abs <= 0.0:
        return 1.0
    gamma = env.task_spec.gamma
    effective = min(env.task_spec.horizon, 1.0 / (1.0 - gamma) if gamma < 1.0 else np.inf)
    return float(1.0 / (mean_abs * effective))


def ppo_config(
    task: str,
    sharing: str = "shared",
    *,
    split: str = "train",
    seed: int = 0,
    num_env_runners: int = 0,
    num_envs_per_env_runner: int = 1,
    torch_threads: int | None = 1,
    **env_kwargs: Any,
) -> PPOConfig:
    """A ready RLlib ``PPOConfig`` (new API stack, torch) for multi-agent ``task``.

    Args:
        task: a registered multi-agent task (single-agent tasks raise ``ValueError``).
        sharing: ``"shared"`` (one RLModule ``"shared"`` for every agent), ``"per_group"`` (one per
            agent group of the task spec, named after it) or ``"per_agent"`` (one per agent).
        split: data split the env runners train on.
        seed: seeds RLlib (torch, numpy, env resets) and the envs' streams
            (:func:`powerzoo.envs.rllib_env.stream_seed`: no two sub-envs share one).
        num_env_runners: remote env runners (0: sample in the driver process).
        num_envs_per_env_runner: env copies per runner (RLlib steps them one after the other).
        torch_threads: torch threads, and as many BLAS / OpenMP threads, of every process of
            the run (1 to :data:`MAX_TORCH_THREADS`): the driver (its local env runner and
            learner), each remote env runner and each remote learner, set by
            :class:`TorchThreads` when the algorithm is built. One (the default) is fastest for
            these small networks and envs: the libraries' defaults (one thread per core in every
            process) made ``train()`` 5-22x slower on 2 busy cores. The driver keeps the setting
            after ``algo.stop()``. ``None`` leaves the libraries as they are.
        **env_kwargs: ``normalize`` (default True), ``obs_mode``, ``reward``, ``reward_scale``
            (default ``"auto"``: :func:`auto_reward_scale`; a number: that factor) and task
            parameters.

    Every default below can be changed on the returned config (``config.training(lr=...)``).

    Returns:
        The PPO config; ``config.build_algo()`` builds the algorithm.
    """
    if sharing not in SHARING_MODES:
        raise ValueError(f"unknown sharing {sharing!r}; valid: {', '.join(SHARING_MODES)}")
    for name, value, least in (
        ("num_env_runners", num_env_runners, 0),
        ("num_envs_per_env_runner", num_envs_per_env_runner, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    if torch_threads is not None and (
        isinstance(torch_threads, bool)
        or not isinstance(torch_threads, (int, np.integer))
        or not 1 <= torch_threads <= MAX_TORCH_THREADS
    ):
        raise ValueError(
            f"torch_threads must be an int in [1, {MAX_TORCH_THREADS}] or None (the libraries' own "
            f"defaults), got {torch_threads!r}"
        )
    task_kwargs = {k: v for k, v in env_kwargs.items() if k not in _ENV_KEYS}
    spec = _multi_agent_spec(task, task_kwargs)
    mapping = module_mapping(task, sharing, **task_kwargs)
    env_config: dict[str, Any] = {
        "task": task,
        "split": split,
        "seed": int(seed),
        "normalize": bool(
            env_kwargs.get("normalize", True)
        ),  # observations and actions in about [-1, 1]
        "obs_mode": env_kwargs.get("obs_mode"),
        "reward": env_kwargs.get("reward"),
        "task_kwargs": task_kwargs,
    }
    scale = env_kwargs.get("reward_scale", "auto")  # dispatch rewards are -1e3 .. -1e6 $ per step
    if scale == "auto":
        scale = auto_reward_scale(
            task,
            split,
            seed,
            obs_mode=env_config["obs_mode"],
            reward=env_config["reward"],
            task_kwargs=task_kwargs,
        )
    env_config["reward_scale"] = float(scale)
    probe = PowerZooRLlibEnv({**env_config, "seed": None})  # spaces of every agent
    modules: dict[str, RLModuleSpec] = {}
    for agent, module_id in mapping.items():
        obs_space, act_space = probe.observation_spaces[agent], probe.action_spaces[agent]
        if module_id in modules:
            first = modules[module_id]
            if first.observation_space != obs_space or first.action_space != act_space:
                raise ValueError(
                    f"{task}: agents of module {module_id!r} have different spaces "
                    "(physical action bounds); use normalize=True or sharing='per_agent'"
                )
            continue
        modules[module_id] = RLModuleSpec(
            observation_space=obs_space,
            action_space=act_space,
            model_config=DefaultModelConfig(
                fcnet_hiddens=[64, 64],  # two tanh layers of 64, as the native MAPPO actors
                fcnet_activation="tanh",
                vf_share_layers=False,  # a separate value network (the critic sees the agent's obs)
            ),
        )
    register_env(ENV_PREFIX + task, _EnvCreator(task))
    config = (
        PPOConfig()
        .framework("torch")
        .environment(ENV_PREFIX + task, env_config=env_config)
        .env_runners(
            num_env_runners=int(num_env_runners),
            num_envs_per_env_runner=int(num_envs_per_env_runner),
            rollout_fragment_length="auto",  # train batch split evenly over runners and sub-envs
        )
        .multi_agent(policies=set(modules), policy_mapping_fn=AgentToModule(mapping))
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=modules))
        .training(
            train_batch_size_per_learner=max(
                2048, 8 * spec.horizon
            ),  # env steps per iteration (>= 8 episodes)
            minibatch_size=512,  # SGD mini-batch (module steps)
            num_epochs=5,  # passes over each batch, as the native MAPPO
            lr=3e-4,  # Adam step size
            gamma=spec.gamma,  # the task's own discount
            lambda_=0.95,  # GAE lambda
            clip_param=0.2,  # PPO ratio clip
            vf_clip_param=10.0,  # value-loss clip; returns are about 1 after reward_scale
            entropy_coeff=0.0,  # no entropy bonus (continuous actions, Gaussian noise)
            grad_clip=0.5,  # global gradient-norm clip
        )
        .debugging(seed=int(seed))
    )
    if torch_threads is not None:
        threads = TorchThreads(int(torch_threads))
        config.callbacks(on_algorithm_init=threads, on_environment_created=threads)
    return config


def rllib_sampling_rate(
    task: str = "marl_opf",
    num_env_runners: int = 0,
    num_envs_per_env_runner: int = 1,
    seconds: float = 5.0,
    **env_kwargs: Any,
) -> float:
    """Env-steps/s of RLlib's own sampling (the env runners of :func:`ppo_config`, no learning).

    Builds the algorithm, samples once to warm up, then samples whole fragments
    (``env_runner.sample`` on every runner at once) for about ``seconds`` and divides the env steps
    by the wall time. With ``num_env_runners > 0`` Ray must be running (or is started by RLlib).
    Torch and BLAS run on one thread meanwhile (:func:`ppo_config`'s default; tiny MLPs lose time
    to a thread pool); this process gets its thread counts back at the end.

    Args:
        task: A registered multi-agent task.
        num_env_runners: Remote env runners (0: sample in this process).
        num_envs_per_env_runner: Env copies per runner.
        seconds: Sampling time measured, s.
        **env_kwargs: ``make_env`` options and task parameters.

    Returns:
        Env steps per second.
    """
    import torch
    from threadpoolctl import threadpool_limits

    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds!r}")
    env_kwargs.setdefault("reward_scale", 1.0)  # no probe episode; the rate does not depend on it
    config = ppo_config(
        task,
        num_env_runners=num_env_runners,
        num_envs_per_env_runner=num_envs_per_env_runner,
        **env_kwargs,
    )
    fragment = (
        256 * num_envs_per_env_runner
    )  # env steps per runner per call: whole rollouts, not single steps

    def sample(runner: Any) -> int:
        return int(
            sum(e.env_steps() for e in runner.sample(num_timesteps=fragment, random_actions=False))
        )

    threads = torch.get_num_threads()
    blas = threadpool_limits(limits=None)  # remembers the BLAS / OpenMP threads to give back
    algo = config.build_algo()
    try:
        group = algo.env_runner_group

        def one_round() -> int:
            if num_env_runners == 0:
                return sample(algo.env_runner)
            return sum(group.foreach_env_runner(sample, local_env_runner=False))

        one_round()  # warm-up: first resets, first forward passes
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += one_round()
        return steps / (time.perf_counter() - start)
    finally:
        algo.stop()
        torch.set_num_threads(threads)
        blas.restore_original_limits()
