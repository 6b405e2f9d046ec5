"""Stable-Baselines3 algorithms by name, their keyword arguments, and task-aware defaults.

This is the one algorithm registry of the training layer: :func:`~powerzoo.rl.trainer.Trainer`
and the run config accept every name in :data:`ALGORITHMS`; the multi-agent loops of
:mod:`powerzoo.rl.sb3.marl` accept the subset :data:`MULTI_AGENT_ALGORITHMS`.

torch and SB3 are imported only when an algorithm class is asked for, so importing
:mod:`powerzoo.rl` stays cheap.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Sequence
from typing import Any

__all__ = [
    "ALGORITHMS",
    "ON_POLICY",
    "MULTI_AGENT_ALGORITHMS",
    "algorithm_class",
    "canonical_algorithm",
    "check_algorithm_kwargs",
    "trainer_class",
    "NATIVE_MARL_ALGORITHMS",
    "ALL_ALGORITHMS",
    "is_native_marl",
    "algorithms_for",
]


@dataclasses.dataclass(frozen=True)
class _Algorithm:
    module: str
    cls: str
    on_policy: bool
    multi_agent: bool  # accepted by the multi-agent loops (powerzoo.rl.sb3.marl)


_REGISTRY: dict[str, _Algorithm] = {
    "PPO": _Algorithm("stable_baselines3", "PPO", on_policy=True, multi_agent=True),
    "A2C": _Algorithm("stable_baselines3", "A2C", on_policy=True, multi_agent=True),
    "SAC": _Algorithm("stable_baselines3", "SAC", on_policy=False, multi_agent=True),
    "TD3": _Algorithm("stable_baselines3", "TD3", on_policy=False, multi_agent=True),
    "DDPG": _Algorithm("stable_baselines3", "DDPG", on_policy=False, multi_agent=False),
}
ALGORITHMS: tuple[str, ...] = tuple(_REGISTRY)
NATIVE_MARL_ALGORITHMS: tuple[str, ...] = ("MAPPO", "IPPO", "MAPPO-L", "IPPO-L")
"""The native multi-agent PPO family (:mod:`powerzoo.rl.mappo`): centralised critic (MAPPO) or
local critics (IPPO), ``-L`` with Lagrangian cost budgets."""
"""Every algorithm the single-agent trainer and the run config accept (names are
case-insensitive)."""
ON_POLICY: frozenset[str] = frozenset(k for k, v in _REGISTRY.items() if v.on_policy)
MULTI_AGENT_ALGORITHMS: tuple[str, ...] = tuple(k for k, v in _REGISTRY.items() if v.multi_agent)
"""The subset the multi-agent loops accept (``PPO, A2C, SAC, TD3``: DDPG is not offered there)."""
ALL_ALGORITHMS: tuple[str, ...] = ALGORITHMS + NATIVE_MARL_ALGORITHMS
"""What ``Trainer`` and the run config accept: the SB3 algorithms and the native multi-agent
PPO family (``MAPPO``, ``IPPO``, ``MAPPO-L``, ``IPPO-L``; :mod:`powerzoo.rl.mappo`)."""

# The trainer class of each family, imported when a trainer is built: the run config builds its
# trainer through this table, so the config never imports a trainer module.
_TRAINERS = {
    "sb3": "powerzoo.rl.sb3.trainer:SB3Trainer",
    "sb3_multi_agent": "powerzoo.rl.sb3.multi_agent:SB3MultiAgentTrainer",
    "native": "powerzoo.rl.mappo.trainer:MAPPOTrainer",
}
# Arguments the trainer sets itself; a config may not pass them through ``algorithm_kwargs``.
_RESERVED = frozenset({"env", "policy", "seed", "tensorboard_log", "verbose", "_init_setup_model"})


def is_native_marl(name: str) -> bool:
    """Whether ``name`` (any case) is one of the native multi-agent algorithms (no SB3 class)."""
    return isinstance(name, str) and name.upper() in NATIVE_MARL_ALGORITHMS


def algorithms_for(spec: Any) -> tuple[str, ...]:
    """Algorithms that fit a task spec: SB3's for single-agent tasks; for multi-agent tasks the SB3
    shared / independent-learner subset and the native family (the ``-L`` variants need selected
    costs)."""
    if spec.agent_mode != "multi":
        return ALGORITHMS
    native = tuple(
        a for a in NATIVE_MARL_ALGORITHMS if spec.selected_constraints or not a.endswith("-L")
    )
    return native + MULTI_AGENT_ALGORITHMS


def canonical_algorithm(name: str, valid: Sequence[str] = ALGORITHMS) -> str:
    """Upper-case registered name of ``name`` (case-insensitive).

    Names outside ``valid`` (default: every registered algorithm) raise ``ValueError`` listing them.
    """
    if isinstance(name, str) and name.upper() in valid:
        return name.upper()
    raise ValueError(f"unknown algorithm {name!r}; valid: {', '.join(valid)}")


def algorithm_class(name: str, valid: Sequence[str] = ALGORITHMS) -> type:
    """The SB3 class of algorithm ``name`` (imports SB3 and torch on first use); ``valid`` as in
    :func:`canonical_algorithm`."""
    if is_native_marl(name):
        raise ValueError(
            f"{name.upper()} is a native multi-agent algorithm (powerzoo.rl.mappo), "
            "not an SB3 class"
        )
    entry = _REGISTRY[canonical_algorithm(name, valid)]
    return getattr(importlib.import_module(entry.module), entry.cls)


def check_algorithm_kwargs(
    name: str, kwargs: dict[str, Any], where: str = "algorithm_kwargs"
) -> None:
    """Raise ``ValueError`` naming any key of ``kwargs`` that the SB3 constructor (or, for the
    native multi-agent algorithms, :class:`~powerzoo.rl.mappo.hparams.MAPPOParams`) does not
    take."""
    if is_native_marl(name):  # MAPPOParams checks them (imported here: it is the mappo wing's)
        check_params = importlib.import_module("powerzoo.rl.mappo.hparams").check_params
        check_params(kwargs, where)
        return
    params = inspect.signature(algorithm_class(name).__init__).parameters
    valid = sorted(
        p
        for p in params
        if p not in _RESERVED
        and p != "self"
        and params[p].kind is not inspect.Parameter.VAR_KEYWORD
    )
    for key in kwargs:
        if key in _RESERVED:
            raise ValueError(
                f"{where}.{key}: set by the trainer (use the config's own field for it)"
            )
        if key not in params:
            raise ValueError(
                f"{where}.{key}: not an argument of {canonical_algorithm(name)}; "
                f"valid: {', '.join(valid)}"
            )


def trainer_class(name: str, multi_agent: bool) -> type:
    """The trainer class for algorithm ``name`` on a single- or multi-agent task.

    The native multi-agent family (``MAPPO``, ``IPPO``, ``-L``) trains with
    :class:`~powerzoo.rl.mappo.trainer.MAPPOTrainer`; the SB3 algorithms with
    :class:`~powerzoo.rl.sb3.trainer.SB3Trainer` on single-agent tasks and
    :class:`~powerzoo.rl.sb3.multi_agent.SB3MultiAgentTrainer` on multi-agent ones.
    """
    family = "native" if is_native_marl(name) else "sb3_multi_agent" if multi_agent else "sb3"
    module, cls = _TRAINERS[family].split(":")
    return getattr(importlib.import_module(module), cls)
