"""What a run config's task rejects, checked from the task's spec before a run folder exists.

:meth:`powerzoo.rl.config.TrainConfig.from_dict` raises these problems as one
:class:`~powerzoo.rl.config.ConfigError`.
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from powerzoo.rl.algorithms import exact_number, is_native, is_native_marl
from powerzoo.rl.selection import selection_split_problem

__all__ = [
    "MAX_TIMESTEPS",
    "task_field_problems",
    "whole_number",
    "number_for_field",
    "format_errors",
]

MAX_TIMESTEPS = 10**12
"""Largest training budget in env steps (years of wall time at any speed PowerZoo reaches)."""


def task_field_problems(config: Any) -> list[str]:
    """What the config's task rejects, checked from its spec (no data loaded, nothing written).

    One ``"field 'env.split': ..."`` message per bad field: ``env.task_kwargs`` (unknown names or
    bad values), ``env.split`` and ``evaluation.split`` (one of the task's splits, not the
    held-out test split: :mod:`powerzoo.rl.selection`),
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
    splits = [("env.split", env.split, "training")]
    if config.evaluation is not None:
        splits.append(("evaluation.split", config.evaluation.split, "model selection"))
    for field, split, use in splits:
        if split not in spec.splits:
            problems.append(
                f"field '{field}': unknown split {split!r} for {config.task}; "
                f"valid: {', '.join(spec.splits)}"
            )
        elif (held_out := selection_split_problem(split, use)) is not None:
            problems.append(f"field '{field}': {held_out}")
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


def _is_integer_field(annotation: Any) -> bool:
    """Whether a field holds an ``int`` (``int`` or ``int | None``; ``bool`` is not one)."""
    if annotation is int:
        return True
    args = getattr(annotation, "__args__", ())
    return int in args and all(a in (int, type(None)) for a in args)


def whole_number(value: Any) -> Any:
    """An integer field's value: an exact numeric string or a float without a fractional part
    as an ``int`` (``1e6``, ``"1e6"``, ``1000000.0``); ``ValueError`` for a fractional one;
    anything else unchanged (the field's own check refuses it)."""
    value = exact_number(value)
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        if math.isfinite(value):
            raise ValueError(f"must be a whole number, got {value!r}")
    return value


def number_for_field(annotation: Any, value: Any) -> Any:
    """``value`` for a run-config field of type ``annotation``: ``total_timesteps: 1e6`` (a
    string to YAML 1.1) and ``1e6`` as a float are the whole number 1,000,000 for an integer
    field (``1.5`` is refused), an exact numeric string is the number for a float field."""
    if _is_integer_field(annotation):
        return whole_number(value)
    if annotation in (float, float | None):
        return exact_number(value)
    return value


def format_errors(err: Any, model: Any) -> str:
    """pydantic's ``ValidationError`` of ``model`` (the run config's class) as one line: each
    field by its dotted name, an unknown one with the closest known name."""
    parts = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            parts.append(f"unknown field {field!r}{_close_field(e['loc'], model)}")
        elif e["type"] == "missing":
            parts.append(f"missing required field {field!r}")
        elif not e["loc"]:  # a check across fields: its message names them
            parts.append(msg)
        else:
            parts.append(f"field {field!r}: {msg}")
    return "; ".join(parts)


def _close_field(loc: tuple[Any, ...], model: Any) -> str:
    """``"; did you mean 'total_timesteps'?"`` for an unknown field at ``loc`` of ``model`` (a
    pydantic model class; empty when no field of its section is close)."""
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if isinstance(model, type) else None
        args = getattr(field.annotation, "__args__", (field.annotation,)) if field else ()
        model = next((a for a in args if hasattr(a, "model_fields")), None)
        if model is None:
            return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
