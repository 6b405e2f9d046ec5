"""``make_env``: the one entry point from a task name (or task config) to a ready env.

The options of a call are gathered in an :class:`EnvOptions` (validated once); the builders below
turn it into the Gymnasium env, the native vector env or one of the multi-agent adapters.
``powerzoo.rl.make_env`` is this function.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.tasks.registry import get_task_class, make_task

__all__ = ["make_env", "EnvOptions", "FRAMEWORKS"]

FRAMEWORKS = ("auto", "gymnasium", "pettingzoo", "rllib")


@dataclasses.dataclass(frozen=True)
class EnvOptions:
    """The ``make_env`` options of one env (task parameters travel separately as ``task_kwargs``).

    Field meanings are those of :func:`make_env`'s arguments.
    """

    split: str = "train"
    normalize: bool = False
    seed: int | None = None
    framework: str = "auto"
    num_envs: int | None = None
    obs_mode: str | None = None
    forecast_horizon: int | None = None
    safe_rl: bool = False
    cost_threshold: float | None = None
    reward: Any = None
    autoreset_mode: str | None = None

    def __post_init__(self) -> None:
        if self.framework not in FRAMEWORKS:
            raise ValueError(
                f"unknown framework {self.framework!r}; valid: {', '.join(FRAMEWORKS)}"
            )
        n = self.num_envs
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
            raise ValueError(f"num_envs must be a positive int (or None for one env), got {n!r}")

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Names of the options, in declaration order.

        Returns:
            The dataclass field names.
        """
        return tuple(f.name for f in dataclasses.fields(cls))

    def merged_with_file(self, from_file: Mapping[str, Any]) -> EnvOptions:
        """These options, with each one still at its default taken from a task config file.

        Args:
            from_file: Option values read from a task config file.

        Returns:
            New options.
        """
        defaults = EnvOptions()
        updates = {k: v for k, v in from_file.items() if getattr(self, k) == getattr(defaults, k)}
        return dataclasses.replace(self, **updates)


def _load_task_config(
    task: str | Mapping[str, Any] | Path,
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Split ``task`` into (task name, make_env options, task kwargs)."""
    source = "dict"
    if isinstance(task, (str, Path)) and Path(task).suffix.lower() in (".yaml", ".yml", ".json"):
        path = Path(task)
        if not path.is_file():
            raise FileNotFoundError(f"task config file {path} not found")
        text = path.read_text()
        if path.suffix.lower() == ".json":
            config = json.loads(text)
        else:
            import yaml

            config = yaml.safe_load(text)
        source = str(path)
    elif isinstance(task, str):
        return task, {}, {}
    else:
        config = task
    if not isinstance(config, Mapping) or "task" not in config:
        raise ValueError(f"task config ({source}) must be a mapping with a 'task' field")
    config = dict(config)
    name = config.pop("task")
    task_kwargs = dict(config.pop("task_kwargs", {}) or {})
    unknown = set(config) - set(EnvOptions.field_names())
    if unknown:
        raise ValueError(
            f"task config ({source}): unknown field(s) {sorted(unknown)}; valid: task, "
            f"task_kwargs, {', '.join(EnvOptions.field_names())}"
        )
    return name, config, task_kwargs


def make_env(
    task: str | Mapping[str, Any] | Path,
    split: str = "train",
    *,
    normalize: bool = False,
    seed: int | None = None,
    framework: str = "auto",
    num_envs: int | None = None,
    obs_mode: str | None = None,
    forecast_horizon: int | None = None,
    safe_rl: bool = False,
    cost_threshold: float | None = None,
    reward: Any = None,
    autoreset_mode: str | None = None,
    **task_kwargs: Any,
) -> Any:
    """Build an env for ``task``.

    Args:
        task: a registered task name (see ``powerzoo.tasks.list_tasks()``), a dict, or a path to
            a YAML/JSON file with a ``task`` field plus any of the options below and
            ``task_kwargs``. Explicit arguments win over file values that differ from defaults.
        split: ``train`` / ``val`` / ``test`` or one of the task's stress splits.
        normalize: observations scaled to about [-1, 1], actions taken in [-1, 1] and mapped to
            physical units once (``info["action_applied"]`` stays physical).
        seed: seeds the env and its spaces and resets it once.
        framework: ``"gymnasium"``, ``"pettingzoo"`` (multi-agent tasks) or ``"auto"``: a
            Gymnasium env for single-agent tasks; for multi-agent tasks a PettingZoo Parallel env
            whose ``step`` adds ``"__all__"`` to the done dicts (the shape RLlib uses; not an
            RLlib ``MultiAgentEnv`` class); ``"rllib"`` (multi-agent tasks, needs
            ``powerzoo[ray]``): :class:`~powerzoo.envs.rllib_env.PowerZooRLlibEnv`, an RLlib
            ``MultiAgentEnv``. In physical units the agents of a task may have different action
            bounds (MW limits of each generator); with ``normalize=True`` every agent has the
            same observation space and the action space [-1, 1], which SuperSuit's
            ``pettingzoo_env_to_vec_env_v1`` requires.
        num_envs: if given, a native vectorised env stepping ``num_envs`` copies per call.
        obs_mode: observation mode of multi-agent tasks (single-agent tasks have none).
        forecast_horizon: append perfect forecasts of the task's exogenous series (steps).
        safe_rl: wrap in :class:`~powerzoo.envs.wrappers.SafeRLWrapper` (6-tuple ``step``).
        cost_threshold: per-episode cost budget reported by the safe-RL wrapper.
        reward: reward override: preset name, dict of weights, or callable of ``info``.
        autoreset_mode: with ``num_envs`` on a single-agent task, ``"next_step"`` (default,
            Gymnasium's), ``"same_step"`` or ``"disabled"`` (see :mod:`powerzoo.envs.vector_env`).
            TorchRL's ``GymWrapper`` takes ``"same_step"`` or ``"disabled"`` (it resets the
            ended rows itself) and refuses ``"next_step"``; PowerZoo's SB3 ``NativeVecEnv`` needs
            ``"same_step"``.
        **task_kwargs: task parameters (for example ``energy_capacity_mwh=200``).

    Returns:
        A Gymnasium env, a native vector env, a PettingZoo Parallel env or a multi-agent vector env,
        by ``framework`` and ``num_envs``.
    """
    name, from_file, file_kwargs = _load_task_config(task)
    options = EnvOptions(
        split=split,
        normalize=normalize,
        seed=seed,
        framework=framework,
        num_envs=num_envs,
        obs_mode=obs_mode,
        forecast_horizon=forecast_horizon,
        safe_rl=safe_rl,
        cost_threshold=cost_threshold,
        reward=reward,
        autoreset_mode=autoreset_mode,
    ).merged_with_file(from_file)
    return build_env(name, options, {**file_kwargs, **task_kwargs})


def unexpected_keyword(entry: str, keys: list[str], task: str, params: tuple[str, ...]) -> str:
    """The message of keywords ``keys`` of ``entry`` (``make_env``) that are neither options nor
    parameters of ``task`` (``params``): Python's own wording for the first, the closest valid
    names (``difflib``), then the task's parameters and the options."""
    options = EnvOptions.field_names()
    close = difflib.get_close_matches(keys[0], [*options, *params], n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listed = ", ".join(params) if params else f"none, {task} takes no task parameters"
    return (
        f"{entry}() got an unexpected keyword argument '{keys[0]}'{hint} ({task} got unknown "
        f"parameter(s) {keys}; valid: {listed}; {entry} options: {', '.join(options)})"
    )


def check_task_keywords(name: str, task_kwargs: Mapping[str, Any], entry: str = "make_env") -> None:
    """``TypeError`` for keywords that are not parameters of task ``name``, naming the closest
    option or parameter (``normalise`` -> ``normalize``, ``n_env`` -> ``num_envs``).

    A task class without a ``Params`` class is left to check its keywords itself.
    """
    from powerzoo.tasks.base import task_keywords

    params_class = getattr(get_task_class(name), "Params", None)
    if params_class is None:
        return
    try:
        valid = task_keywords(params_class)
    except TypeError:  # not a dataclass and no KEYWORDS: the task checks its keywords itself
        return
    unknown = [key for key in task_kwargs if key not in valid]
    if unknown:
        raise TypeError(unexpected_keyword(entry, unknown, name, valid))


def build_env(name: str, options: EnvOptions, task_kwargs: Mapping[str, Any]) -> Any:
    """The env of task ``name`` under ``options`` (what :func:`make_env` returns)."""
    task_kwargs = dict(task_kwargs)
    check_task_keywords(name, task_kwargs)
    spec = get_task_class(name).make_spec(**task_kwargs)
    if spec.agent_mode == "multi":
        return _make_multi_agent_env(name, options, task_kwargs)
    if options.framework == "rllib":
        raise ValueError(
            f"{name} is a single-agent task; framework='rllib' needs a multi-agent task "
            "(RLlib takes the Gymnasium env of a single-agent task directly)"
        )
    if options.framework == "pettingzoo":
        raise ValueError(
            f"{name} is a single-agent task; framework='pettingzoo' needs a multi-agent task. "
            "Use framework='gymnasium' (or 'auto') for it."
        )
    if options.obs_mode is not None:
        raise ValueError(
            f"{name} is single-agent and has no observation modes; "
            f"got obs_mode={options.obs_mode!r}"
        )
    if options.autoreset_mode is not None and options.num_envs is None:
        raise ValueError("autoreset_mode applies to the native vector env; pass num_envs=N with it")
    env = _make_single_agent_env(name, options, task_kwargs)
    if options.num_envs is None:
        env.unwrapped.spec = registered_spec(spec.gym_id, name, options, task_kwargs)
    if options.seed is not None:
        env.action_space.seed(options.seed)
        env.observation_space.seed(options.seed)
        env.reset(seed=options.seed)
    return env


def registered_spec(
    gym_id: str | None, name: str, options: EnvOptions, task_kwargs: Mapping[str, Any]
) -> Any:
    """The Gymnasium ``EnvSpec`` that ``gymnasium.make`` would rebuild this env from, or ``None``.

    Recorders (Minari's ``DataCollector``, ``recover_environment``) read ``env.spec``. ``None``
    when the task has no Gymnasium id or an option (a reward callable) cannot be written to JSON.
    """
    from gymnasium.envs.registration import EnvSpec

    if gym_id is None:
        return None
    defaults = EnvOptions()
    kwargs: dict[str, Any] = {"task": name}
    for field in EnvOptions.field_names():
        value = getattr(options, field)
        if field != "seed" and value != getattr(defaults, field):
            kwargs[field] = value
    kwargs.update(task_kwargs)
    try:
        json.dumps(kwargs)
    except (TypeError, ValueError):
        return None
    return EnvSpec(
        id=gym_id,
        entry_point="powerzoo.envs.registration:make_registered",
        vector_entry_point="powerzoo.envs.registration:make_registered_vector",
        kwargs=kwargs,
        order_enforce=False,
        disable_env_checker=True,
    )


def _make_single_agent_env(name: str, options: EnvOptions, task_kwargs: dict[str, Any]) -> Any:
    """Gymnasium env with its wrappers, or the native vector env."""
    from powerzoo.envs import wrappers as w

    task_obj = make_task(name, options.split, **task_kwargs)
    if options.num_envs is not None:
        from powerzoo.envs.vector_env import PowerZooVectorEnv

        env: Any = PowerZooVectorEnv(
            task_obj,
            options.num_envs,
            normalize=options.normalize,
            forecast_horizon=options.forecast_horizon,
            reward=options.reward,
            autoreset_mode=options.autoreset_mode or "next_step",
        )
        if options.safe_rl:
            env = w.SafeRLVectorWrapper(env, options.cost_threshold)
        return env
    from powerzoo.envs.gym_env import PowerZooEnv

    env = PowerZooEnv(task_obj)
    if options.forecast_horizon is not None:
        env = w.ForecastWrapper(env, options.forecast_horizon)
    if options.normalize:
        env = w.NormalizeWrapper(env)
    if options.reward is not None:
        env = w.RewardOverrideWrapper(env, options.reward)
    if options.safe_rl:
        env = w.SafeRLWrapper(env, options.cost_threshold)
    return env


def _make_multi_agent_env(name: str, options: EnvOptions, task_kwargs: dict[str, Any]) -> Any:
    """PettingZoo Parallel env, ``auto`` dict env, or the native multi-agent vector env."""
    from powerzoo.envs import multi_agent as ma

    if options.framework == "gymnasium":
        raise ValueError(f"{name} is a multi-agent task; use framework='pettingzoo' or 'auto'")
    if options.forecast_horizon is not None:
        raise ValueError(
            f"forecast_horizon is for single-agent tasks; {name} takes "
            "obs_mode='local_plus_forecast' (forecasts in each agent's observation)"
        )
    if options.autoreset_mode is not None:
        raise ValueError(
            f"autoreset_mode is for single-agent vector envs; {name}'s multi-agent vector env "
            "resets in the same step (info['final_obs'])"
        )
    if options.safe_rl or options.cost_threshold is not None:
        raise ValueError(
            f"safe_rl / cost_threshold give a single-agent 6-tuple step; on {name} every agent's "
            "info already carries constraint_costs, selected_cost_sum and is_safe"
        )
    get_task_class(name).make_spec(**task_kwargs).observation_spec(
        options.obs_mode
    )  # validates obs_mode
    if options.framework == "rllib":  # imports Ray only here
        if options.num_envs is not None:
            raise ValueError(
                "framework='rllib' gives one env; RLlib's runners make the copies "
                "(num_envs_per_env_runner)"
            )
        from powerzoo.envs.rllib_env import PowerZooRLlibEnv

        return PowerZooRLlibEnv(
            {
                "task": name,
                "split": options.split,
                "normalize": options.normalize,
                "seed": options.seed,
                "obs_mode": options.obs_mode,
                "reward": options.reward,
                "task_kwargs": task_kwargs,
            }
        )
    task_obj = make_task(name, options.split, **task_kwargs)
    kwargs = {
        "obs_mode": options.obs_mode,
        "normalize": options.normalize,
        "reward": options.reward,
    }
    if options.num_envs is not None:
        env: Any = ma.PowerZooMultiAgentVectorEnv(task_obj, options.num_envs, **kwargs)
    elif options.framework == "pettingzoo":
        env = ma.PowerZooParallelEnv(task_obj, **kwargs)
    else:
        env = ma.PowerZooDictEnv(task_obj, **kwargs)
    if options.seed is not None:
        for agent in env.possible_agents:
            env.action_space(agent).seed(options.seed + env.possible_agents.index(agent))
        env.reset(seed=options.seed)
    return env
