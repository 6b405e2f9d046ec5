"""Stable-Baselines3 algorithms by name, their keyword arguments, and task-aware defaults.

torch and SB3 are imported only when an algorithm class is asked for, so importing
:mod:`powerzoo.rl` stays cheap.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

__all__ = [
    "ALGORITHMS",
    "ON_POLICY",
    "algorithm_class",
    "canonical_algorithm",
    "check_algorithm_kwargs",
    "default_gamma",
    "LONG_HORIZON_STEPS",
    "LONG_HORIZON_GAMMA",
]

# name -> (module, class, on-policy?)
_REGISTRY: dict[str, tuple[str, str, bool]] = {
    "PPO": ("stable_baselines3", "PPO", True),
    "A2C": ("stable_baselines3", "A2C", True),
    "SAC": ("stable_baselines3", "SAC", False),
    "TD3": ("stable_baselines3", "TD3", False),
    "DDPG": ("stable_baselines3", "DDPG", False),
}
ALGORITHMS: tuple[str, ...] = tuple(_REGISTRY)
ON_POLICY: frozenset[str] = frozenset(k for k, v in _REGISTRY.items() if v[2])

LONG_HORIZON_STEPS = 168
"""Episodes of at least this many steps get :data:`LONG_HORIZON_GAMMA` unless gamma is given."""
LONG_HORIZON_GAMMA = 0.999
# Arguments the trainer sets itself; a config may not pass them through ``algorithm_kwargs``.
_RESERVED = frozenset({"env", "policy", "seed", "tensorboard_log", "verbose", "_init_setup_model"})


def canonical_algorithm(name: str) -> str:
    """Upper-case registered name of ``name`` (case-insensitive); unknown names raise ``ValueError``."""
    if isinstance(name, str) and name.upper() in _REGISTRY:
        return name.upper()
    raise ValueError(f"unknown algorithm {name!r}; valid: {', '.join(ALGORITHMS)}")


def algorithm_class(name: str) -> type:
    """The SB3 class of algorithm ``name`` (imports SB3 and torch on first use)."""
    module, cls, _ = _REGISTRY[canonical_algorithm(name)]
    return getattr(importlib.import_module(module), cls)


def check_algorithm_kwargs(name: str, kwargs: dict[str, Any], where: str = "algorithm_kwargs") -> None:
    """Raise ``ValueError`` naming any key of ``kwargs`` that the SB3 constructor does not take."""
    params = inspect.signature(algorithm_class(name).__init__).parameters
    valid = sorted(p for p in params if p not in _RESERVED and p != "self" and params[p].kind is not inspect.Parameter.VAR_KEYWORD)
    for key in kwargs:
        if key in _RESERVED:
            raise ValueError(f"{where}.{key}: set by the trainer (use the config's own field for it)")
        if key not in params:
            raise ValueError(f"{where}.{key}: not an argument of {canonical_algorithm(name)}; valid: {', '.join(valid)}")


def default_gamma(horizon: int) -> float | None:
    """``0.999`` for long episodes (>= 168 steps, SPEC 4), else ``None`` (the algorithm's default)."""
    return LONG_HORIZON_GAMMA if horizon >= LONG_HORIZON_STEPS else None
