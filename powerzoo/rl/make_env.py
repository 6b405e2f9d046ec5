"""``make_env``: the one entry point from a task name (or config) to a ready env."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from powerzoo.tasks.registry import get_task_class, make_task

__all__ = ["make_env", "FRAMEWORKS"]

FRAMEWORKS = ("auto", "gymnasium", "pettingzoo")

_DEFAULTS: dict[str, Any] = {
    "split": "train",
    "normalize": False,
    "seed": None,
    "framework": "auto",
    "num_envs": None,
    "obs_mode": None,
    "forecast_horizon": None,
    "safe_rl": False,
    "cost_threshold": None,
    "reward": None,
}


def _load_task_config(task: str | Mapping[str, Any] | Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
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
    unknown = set(config) - set(_DEFAULTS)
    if unknown:
        raise ValueError(
            f"task config ({source}): unknown field(s) {sorted(unknown)}; valid: task, task_kwargs, {', '.join(_DEFAULTS)}"
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
        framework: ``"gymnasium"``, ``"pettingzoo"`` (multi-agent tasks) or ``"auto"``.
        num_envs: if given, a native vectorised env stepping ``num_envs`` copies per call.
        obs_mode: observation mode of multi-agent tasks (single-agent tasks have none).
        forecast_horizon: append perfect forecasts of the task's exogenous series (steps).
        safe_rl: wrap in :class:`~powerzoo.envs.wrappers.SafeRLWrapper` (6-tuple ``step``).
        cost_threshold: per-episode cost budget reported by the safe-RL wrapper.
        reward: reward override: preset name, dict of weights, or callable of ``info``.
        **task_kwargs: task parameters (for example ``energy_capacity_mwh=200``).
    """
    from powerzoo.envs import wrappers as w

    name, options, file_kwargs = _load_task_config(task)
    args = dict(
        split=split, normalize=normalize, seed=seed, framework=framework, num_envs=num_envs,
        obs_mode=obs_mode, forecast_horizon=forecast_horizon, safe_rl=safe_rl,
        cost_threshold=cost_threshold, reward=reward,
    )
    for key, value in options.items():
        if args[key] is _DEFAULTS[key] or args[key] == _DEFAULTS[key]:
            args[key] = value
    task_kwargs = {**file_kwargs, **task_kwargs}

    if args["framework"] not in FRAMEWORKS:
        raise ValueError(f"unknown framework {args['framework']!r}; valid: {', '.join(FRAMEWORKS)}")
    spec = get_task_class(name).make_spec(**task_kwargs)
    if spec.agent_mode == "single":
        if args["framework"] == "pettingzoo":
            raise ValueError(
                f"{name} is a single-agent task; framework='pettingzoo' needs a multi-agent task. "
                "Use framework='gymnasium' (or 'auto') for it."
            )
        if args["obs_mode"] is not None:
            raise ValueError(f"{name} is single-agent and has no observation modes; got obs_mode={args['obs_mode']!r}")
    else:
        return _make_multi_agent_env(name, args, task_kwargs)

    task_obj = make_task(name, args["split"], **task_kwargs)
    if args["num_envs"] is not None:
        from powerzoo.envs.vector_env import PowerZooVectorEnv

        env: Any = PowerZooVectorEnv(
            task_obj, args["num_envs"], normalize=args["normalize"],
            forecast_horizon=args["forecast_horizon"], reward=args["reward"],
        )
        if args["safe_rl"]:
            env = w.SafeRLVectorWrapper(env, args["cost_threshold"])
    else:
        from powerzoo.envs.gym_env import PowerZooEnv

        env = PowerZooEnv(task_obj)
        if args["forecast_horizon"] is not None:
            env = w.ForecastWrapper(env, args["forecast_horizon"])
        if args["normalize"]:
            env = w.NormalizeWrapper(env)
        if args["reward"] is not None:
            env = w.RewardOverrideWrapper(env, args["reward"])
        if args["safe_rl"]:
            env = w.SafeRLWrapper(env, args["cost_threshold"])
    if args["seed"] is not None:
        env.action_space.seed(args["seed"])
        env.observation_space.seed(args["seed"])
        env.reset(seed=args["seed"])
    return env


def _make_multi_agent_env(name: str, args: dict[str, Any], task_kwargs: dict[str, Any]) -> Any:
    """PettingZoo Parallel env, ``auto`` dict env, or the native multi-agent vector env."""
    from powerzoo.envs import multi_agent as ma

    if args["framework"] == "gymnasium":
        raise ValueError(f"{name} is a multi-agent task; use framework='pettingzoo' or 'auto'")
    if args["forecast_horizon"] is not None:
        raise ValueError(f"forecast_horizon is for single-agent tasks; {name} takes obs_mode='local_plus_forecast' "
                         "(forecasts in each agent's observation)")
    if args["safe_rl"] or args["cost_threshold"] is not None:
        raise ValueError(f"safe_rl / cost_threshold give a single-agent 6-tuple step; on {name} every agent's info "
                         "already carries constraint_costs, selected_cost_sum and is_safe")
    get_task_class(name).make_spec(**task_kwargs).observation_spec(args["obs_mode"])  # validates obs_mode
    task_obj = make_task(name, args["split"], **task_kwargs)
    kwargs = {"obs_mode": args["obs_mode"], "normalize": args["normalize"], "reward": args["reward"]}
    if args["num_envs"] is not None:
        env: Any = ma.PowerZooMultiAgentVectorEnv(task_obj, args["num_envs"], **kwargs)
    elif args["framework"] == "pettingzoo":
        env = ma.PowerZooParallelEnv(task_obj, **kwargs)
    else:
        env = ma.PowerZooDictEnv(task_obj, **kwargs)
    if args["seed"] is not None:
        for agent in env.possible_agents:
            env.action_space(agent).seed(args["seed"] + env.possible_agents.index(agent))
        env.reset(seed=args["seed"])
    return env
