"""What :class:`powerzoo.rl.sb3.trainer.Trainer` hands to the native multi-agent trainer, and its load descriptor.

``Trainer(task, algorithm="MAPPO" | "IPPO" | "MAPPO-L" | "IPPO-L")`` and ``Trainer.load`` /
``from_checkpoint`` / ``resume`` of such a run return a
:class:`~powerzoo.rl.mappo.trainer.MAPPOTrainer` (imported on first use: it needs torch).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from powerzoo.rl import run_dir as rd
from powerzoo.rl.algorithms import is_native_marl
from powerzoo.tasks.registry import task_spec

__all__ = [
    "class_or_instance_method",
    "native_trainer",
    "native_load",
    "native_from_checkpoint",
    "native_resume",
]


def _spec(config: Any) -> Any:
    return task_spec(config.task, **config.env.task_kwargs)


def native_trainer(config: Any) -> Any:
    """A :class:`~powerzoo.rl.mappo.trainer.MAPPOTrainer` for a resolved config naming a native algorithm."""
    from powerzoo.rl.mappo.trainer import MAPPOTrainer

    return MAPPOTrainer(config, _spec(config))


def native_load(instance: Any, path: Path, config: Any, model: str) -> Any:
    """``Trainer.load(path)`` of a native multi-agent run (loading into an SB3 trainer instance is refused)."""
    if instance is not None:
        raise ValueError(f"{path} holds a {config.algorithm} run; use Trainer.load({str(path)!r})")
    from powerzoo.rl.mappo.trainer import MAPPOTrainer

    return MAPPOTrainer.load(path, config, _spec(config), model)


def native_from_checkpoint(run_dir: Path, config: Any) -> Any:
    from powerzoo.rl.mappo.trainer import MAPPOTrainer

    return MAPPOTrainer.from_checkpoint(run_dir, config, _spec(config))


def native_resume(run_dir: Path, config_cls: Any, stop_conditions: Sequence[Any] | None) -> Any:
    """The resumed :class:`MAPPOTrainer` if ``run_dir`` is a native multi-agent run, else ``None``."""
    if not (Path(run_dir) / rd.CONFIG_FILE).is_file():
        return None
    config = config_cls.from_file(Path(run_dir) / rd.CONFIG_FILE)
    if not is_native_marl(config.algorithm):
        return None
    from powerzoo.rl.mappo.trainer import MAPPOTrainer

    return MAPPOTrainer.resume(run_dir, config, _spec(config), stop_conditions)


class class_or_instance_method:  # noqa: N801 (used as a decorator, like classmethod)
    """A method that works on the class and on an instance: ``f(cls, instance_or_None, *args)``.

    ``Trainer.load(path)`` calls ``f(Trainer, None, path)`` (a new trainer); ``trainer.load(path)``
    calls ``f(Trainer, trainer, path)`` (load into ``trainer``). A plain ``classmethod`` would
    quietly ignore the instance.
    """

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        functools.update_wrapper(self, func)

    def __get__(self, instance: Any, owner: type | None = None) -> Callable[..., Any]:
        func, owner = self.func, owner if owner is not None else type(instance)

        @functools.wraps(func)
        def bound(*args: Any, **kwargs: Any) -> Any:
            return func(owner, instance, *args, **kwargs)

        signature = inspect.signature(func)
        bound.__signature__ = signature.replace(parameters=list(signature.parameters.values())[2:])  # type: ignore[attr-defined]
        return bound
