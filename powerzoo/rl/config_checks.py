"""What a run config's task rejects, checked from the task's spec before a run folder exists.

:meth:`powerzoo.rl.config.TrainConfig.from_dict` raises these problems as one
:class:`~powerzoo.rl.config.ConfigError`.
"""

from __future__ import annotations

from typing import Any

from powerzoo.rl.algorithms import is_native, is_native_marl

__all__ = ["MAX_TIMESTEPS", "task_field_problems"]

MAX_TIMESTEPS = 10**12
"""Largest training budget in env steps (years of wall time at any speed PowerZoo reaches)."""


def task_field_problems(config: Any) -> list[str]:
    """What the config's task rejects, checked from its spec (no data loaded, nothing written).

    One ``"field 'env.split': ..."`` message per bad field: ``env.task_kwargs`` (unknown names or
    bad values), ``env.split`` and ``evaluation.split`` (one of the task's splits),
    ``env.obs_mode`` (multi-agent tasks only), ``env.forecast_horizon`` (single-agent tasks with
    forecastable series, at most the horizon) and ``env.reward`` (preset name or term weights).
    ``TrainConfig.from_dict`` / ``from_file`` raise them as one :class:`ConfigError`, so a bad
    field fails before a run folder exists.
    """
    from powerzoo.envs.pipeline import check_forecast_horizon, compile_reward
    from powerzoo.tasks.registry import task_spec

    env, problems = config.env, []
    try:
        spec = task_spec(config.task, **env.task_kwargs)
    except (TypeError, ValueError) as err:
        problems.append(f"field 'env.task_kwargs': {err}")
        spec = task_spec(config.task)
    if config.episodes is not None and config.episodes * spec.horizon > MAX_TIMESTEPS:
        problems.append(
            f"field 'episodes': {config.episodes} episodes of {spec.horizon} steps exceed the "
            f"largest budget, {MAX_TIMESTEPS:,} env steps"
        )
    splits = [("env.split", env.split)]
    if config.evaluation is not None:
        splits.append(("evaluation.split", config.evaluation.split))
    for field, split in splits:
        if split not in spec.splits:
            problems.append(
                f"field '{field}': unknown split {split!r} for {config.task}; "
                f"valid: {', '.join(spec.splits)}"
            )
    multi = spec.agent_mode == "multi"
    if is_native(config.algorithm) and is_native_marl(config.algorithm) != multi:
        kind, use = ("single", "MAPPO-L or IPPO-L") if multi else ("multi", "PPO-L, PPO, SAC, ...")
        problems.append(
            f"field 'algorithm': {config.algorithm} is for {kind}-agent tasks; {config.task} is "
            f"{'multi' if multi else 'single'}-agent (use {use})"
        )

    def obs_mode(mode: Any) -> None:
        if not multi:
            raise ValueError(
                f"{config.task} is single-agent and has no observation modes; "
                f"got {mode!r} (leave it null)"
            )
        spec.observation_spec(mode)

    def forecast_horizon(horizon: Any) -> None:
        if multi:
            raise ValueError(
                f"forecast_horizon is for single-agent tasks; {config.task} takes obs_mode: "
                "local_plus_forecast (forecasts in each agent's observation)"
            )
        check_forecast_horizon(spec, horizon)

    checks = {
        "env.obs_mode": (env.obs_mode, obs_mode),
        "env.forecast_horizon": (env.forecast_horizon, forecast_horizon),
        "env.reward": (env.reward, lambda reward: compile_reward(spec, reward)),
    }
    for field, (value, check) in checks.items():
        if value is None:
            continue
        try:
            check(value)
        except ValueError as err:
            problems.append(f"field '{field}': {err}")
    return problems
