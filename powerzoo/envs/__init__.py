"""Generic adapters from tasks to Gymnasium / PettingZoo / vector envs, wrappers, and ``make_env``.

``from powerzoo.envs import make_env`` is loaded on first use, so ``import powerzoo`` (which
registers the Gymnasium ids from :mod:`powerzoo.envs.registration`) stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make_env", "EnvOptions", "inspect_env"]


def __getattr__(name: str) -> Any:
    if name in ("make_env", "EnvOptions"):
        from powerzoo.envs import make

        return getattr(make, name)
    if name == "inspect_env":
        from powerzoo.envs.introspect import inspect_env

        return inspect_env
    raise AttributeError(f"module 'powerzoo.envs' has no attribute {name!r}")
