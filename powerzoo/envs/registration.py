"""Gymnasium registration: ``gymnasium.make("powerzoo/BatteryArbitrage-v0")`` after ``import powerzoo``."""

from __future__ import annotations

from typing import Any

__all__ = ["register_envs", "make_registered"]

# Gymnasium ids of the single-agent tasks (kept here so registering imports no task module)
GYM_IDS = {
    "battery_arbitrage": "powerzoo/BatteryArbitrage-v0",
    "dc_microgrid": "powerzoo/DCMicrogrid-v0",
    "dc_microgrid_safe": "powerzoo/DCMicrogridSafe-v0",
}


def make_registered(task: str, **kwargs: Any) -> Any:
    """Entry point used by ``gymnasium.make``: ``make_env(task, **kwargs)``."""
    from powerzoo.envs.make import make_env

    return make_env(task, **kwargs)


def register_envs() -> None:
    """Register every single-agent task with Gymnasium (idempotent)."""
    from gymnasium.envs.registration import register, registry

    for task, env_id in GYM_IDS.items():
        if env_id not in registry:
            register(id=env_id, entry_point="powerzoo.envs.registration:make_registered", kwargs={"task": task})
