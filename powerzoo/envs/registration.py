"""Gymnasium registration: ``gymnasium.make("powerzoo/BatteryArbitrage-v0")`` after ``import powerzoo``.

Each single-agent task is registered with an ``entry_point`` (one env) and a
``vector_entry_point`` (the native batched env), so ``gymnasium.make_vec(id, num_envs=N)`` steps
N copies in one numpy call. Both accept Gymnasium's standard ``render_mode`` (PowerZoo envs have
no render modes, so only ``None``), every ``make_env`` option and the task's parameters; any
other keyword raises ``TypeError("... unexpected keyword argument 'x' ...")`` as a Python
function would, which is what client libraries such as TorchRL probe for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register_envs", "make_registered", "make_registered_vector", "GYM_IDS"]

# Gymnasium ids of the single-agent tasks (kept here so registering imports no task module)
GYM_IDS = {
    "battery_arbitrage": "powerzoo/BatteryArbitrage-v0",
    "dc_microgrid": "powerzoo/DCMicrogrid-v0",
    "dc_microgrid_safe": "powerzoo/DCMicrogridSafe-v0",
    "dc_scheduling": "powerzoo/DCScheduling-v0",
    "dso": "powerzoo/DSO-v0",
    "tso": "powerzoo/TSO-v0",
}


def _check_keywords(task: str, render_mode: str | None, kwargs: dict[str, Any], entry: str) -> None:
    """``ValueError`` for a render mode, ``TypeError`` naming a keyword neither make_env nor the task takes."""
    from powerzoo.envs.make import EnvOptions
    from powerzoo.tasks.registry import get_task_class

    if render_mode is not None:
        raise ValueError(f"{task} has no render modes; got render_mode={render_mode!r} (use None)")
    options = set(EnvOptions.field_names())
    task_class = get_task_class(task)
    for key, value in kwargs.items():
        if key in options:
            continue
        try:
            task_class.make_spec(**{key: value})
        except TypeError:
            raise TypeError(
                f"{entry}() got an unexpected keyword argument '{key}': not a make_env option "
                f"({', '.join(sorted(options))}) nor a parameter of {task}"
            ) from None


def make_registered(task: str, render_mode: str | None = None, **kwargs: Any) -> Any:
    """Entry point used by ``gymnasium.make``: ``make_env(task, **kwargs)``."""
    from powerzoo.envs.make import make_env

    _check_keywords(task, render_mode, kwargs, "make_registered")
    return make_env(task, **kwargs)


def make_registered_vector(
    task: str, num_envs: int = 1, render_mode: str | None = None, **kwargs: Any
) -> Any:
    """Vector entry point used by ``gymnasium.make_vec``: ``make_env(task, num_envs=num_envs, **kwargs)``."""
    from powerzoo.envs.make import make_env

    _check_keywords(task, render_mode, kwargs, "make_registered_vector")
    return make_env(task, num_envs=num_envs, **kwargs)


def register_envs() -> None:
    """Register every single-agent task with Gymnasium (idempotent)."""
    from gymnasium.envs.registration import register, registry

    for task, env_id in GYM_IDS.items():
        if env_id not in registry:
            register(
                id=env_id,
                entry_point="powerzoo.envs.registration:make_registered",
                vector_entry_point="powerzoo.envs.registration:make_registered_vector",
                kwargs={"task": task},
            )
