"""Gymnasium registration: ``gymnasium.make("powerzoo/BatteryArbitrage-v0")`` after
``import powerzoo``.

Every registered task whose spec has a ``gym_id`` gets that Gymnasium id, also tasks registered
later with :func:`powerzoo.tasks.register_task` (this module listens to the task registry). Each
id has an ``entry_point`` (one env) and a ``vector_entry_point`` (the native batched env), so
``gymnasium.make_vec(id, num_envs=N)`` steps N copies in one numpy call. Both accept Gymnasium's
standard ``render_mode``, every ``make_env`` option and the task's parameters; any other keyword
raises ``TypeError("... unexpected keyword argument 'x' ...")`` as a Python function would, which
is what client libraries such as TorchRL probe for.

PowerZoo envs have no render modes. A ``render_mode`` other than ``None`` is handled as Gymnasium
handles a mode an env does not list: a warning, and the env is built without rendering
(``env.render_mode`` stays ``None``). Stable-Baselines3 asks for ``render_mode="rgb_array"``
whenever it builds an env from an id (``PPO("MlpPolicy", id)``, ``make_vec_env(id)``), so those
idioms train.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register_envs", "register_gym_id", "make_registered", "make_registered_vector"]

ENTRY_POINT = "powerzoo.envs.registration:make_registered"
VECTOR_ENTRY_POINT = "powerzoo.envs.registration:make_registered_vector"

_IDS: dict[str, str] = {}  # task name -> the Gymnasium id this module registered for it


def _check_keywords(task: str, render_mode: str | None, kwargs: dict[str, Any], entry: str) -> None:
    """A warning for a render mode (none is supported); ``TypeError`` naming a keyword that
    neither ``make_env`` nor the task takes."""
    from gymnasium import logger

    from powerzoo.envs.make import EnvOptions, unexpected_keyword
    from powerzoo.tasks.base import task_keywords
    from powerzoo.tasks.registry import get_task_class

    if render_mode is not None:
        logger.warn(
            f"{task} has no render modes (possible render_modes: []); render_mode={render_mode!r} "
            "is ignored and the env renders nothing (pass render_mode=None to silence this)",
            stacklevel=3,
        )
    options = set(EnvOptions.field_names())
    task_class = get_task_class(task)
    for key, value in kwargs.items():
        if key in options:
            continue
        try:
            task_class.make_spec(**{key: value})
        except TypeError:
            params_class = getattr(task_class, "Params", None)
            try:
                params = task_keywords(params_class) if params_class is not None else ()
            except TypeError:
                params = ()
            raise TypeError(unexpected_keyword(entry, [key], task, params)) from None


def make_registered(task: str, render_mode: str | None = None, **kwargs: Any) -> Any:
    """Entry point used by ``gymnasium.make``: ``make_env(task, **kwargs)``."""
    from powerzoo.envs.make import make_env

    _check_keywords(task, render_mode, kwargs, "make_registered")
    return make_env(task, **kwargs)


def make_registered_vector(
    task: str, num_envs: int = 1, render_mode: str | None = None, **kwargs: Any
) -> Any:
    """Vector entry point used by ``gymnasium.make_vec``:
    ``make_env(task, num_envs=num_envs, **kwargs)``."""
    from powerzoo.envs.make import make_env

    _check_keywords(task, render_mode, kwargs, "make_registered_vector")
    return make_env(task, num_envs=num_envs, **kwargs)


def register_gym_id(task: str, gym_id: str | None) -> None:
    """Make ``gymnasium.make(gym_id)`` build ``task`` (``None``: withdraw the task's id).

    An id this module registered earlier for ``task`` under another name is withdrawn. Raises
    ``ValueError`` when ``gym_id`` is already a Gymnasium id of something other than ``task``.
    """
    from gymnasium.envs.registration import register, registry

    if gym_id is not None:
        existing = registry.get(gym_id)
        if existing is not None and not (
            existing.entry_point == ENTRY_POINT and existing.kwargs.get("task") == task
        ):
            raise ValueError(
                f"Gymnasium id {gym_id!r} of task {task!r} is already registered "
                f"(entry point {existing.entry_point!r}, kwargs {existing.kwargs})"
            )
    old = _IDS.pop(task, None)
    if old is not None and old != gym_id:
        registry.pop(old, None)
    if gym_id is None:
        return
    if gym_id not in registry:
        register(
            id=gym_id,
            entry_point=ENTRY_POINT,
            vector_entry_point=VECTOR_ENTRY_POINT,
            kwargs={"task": task},
        )
    _IDS[task] = gym_id


def register_envs() -> None:
    """Register the Gymnasium id of every task, now and whenever a task is registered later
    (idempotent)."""
    from powerzoo.tasks.registry import add_gym_id_listener

    add_gym_id_listener(register_gym_id)
