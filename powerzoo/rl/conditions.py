"""Stop conditions for training runs.

A condition is any callable ``condition(progress) -> bool`` that returns True when training should
stop; :class:`TrainingProgress` is what it sees. Step limits are checked at every env step, the
others after every evaluation (they read the evaluation history). Training stops as soon as one
condition is met; the condition's ``describe()`` (or its repr) becomes the run's stop reason.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "TrainingProgress",
    "StopCondition",
    "MaxSteps",
    "RewardThreshold",
    "NoImprovement",
    "Plateau",
    "WallClock",
    "CpuTime",
    "condition_from_dict",
    "describe_condition",
    "CONDITION_TYPES",
]


@dataclasses.dataclass
class TrainingProgress:
    """What stop conditions see: env steps so far and the evaluation returns in order."""

    num_timesteps: int
    eval_returns: list[float] = dataclasses.field(default_factory=list)


StopCondition = Callable[[TrainingProgress], bool]


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class MaxSteps:
    """Stop once ``steps`` env steps (summed over parallel envs) have been taken."""

    steps: int

    def __post_init__(self) -> None:
        _positive_int("MaxSteps.steps", self.steps)

    def __call__(self, progress: TrainingProgress) -> bool:
        return progress.num_timesteps >= self.steps

    def describe(self) -> str:
        """The stop reason recorded when this condition ends a run.

        Returns:
            One line of text.
        """
        return f"max_steps: reached {self.steps} env steps"


@dataclasses.dataclass(frozen=True)
class RewardThreshold:
    """Stop when an evaluation's mean return reaches ``threshold`` (same units as the return)."""

    threshold: float

    def __call__(self, progress: TrainingProgress) -> bool:
        return bool(progress.eval_returns) and progress.eval_returns[-1] >= self.threshold

    def describe(self) -> str:
        """The stop reason recorded when this condition ends a run.

        Returns:
            One line of text.
        """
        return f"reward_threshold: evaluation mean return >= {self.threshold:g}"


@dataclasses.dataclass(frozen=True)
class NoImprovement:
    """Stop after ``evaluations`` evaluations in a row without beating the best by ``min_delta``."""

    evaluations: int
    min_delta: float = 0.0

    def __post_init__(self) -> None:
        _positive_int("NoImprovement.evaluations", self.evaluations)

    def __call__(self, progress: TrainingProgress) -> bool:
        returns = progress.eval_returns
        if len(returns) <= self.evaluations:
            return False
        best_before = max(returns[: -self.evaluations])
        return max(returns[-self.evaluations :]) < best_before + self.min_delta

    def describe(self) -> str:
        """The stop reason recorded when this condition ends a run.

        Returns:
            One line of text.
        """
        return (
            f"no_improvement: {self.evaluations} evaluations without improving by "
            f"{self.min_delta:g}"
        )


@dataclasses.dataclass(frozen=True)
class Plateau:
    """Stop when the last ``window`` evaluation returns span less than ``tolerance``.

    The span (max − min) is compared with ``tolerance`` in return units, or with
    ``tolerance · |mean|`` when ``relative`` is True.
    """

    window: int
    tolerance: float
    relative: bool = False

    def __post_init__(self) -> None:
        if _positive_int("Plateau.window", self.window) < 2:
            raise ValueError(f"Plateau.window must be >= 2, got {self.window}")
        if self.tolerance < 0:
            raise ValueError(f"Plateau.tolerance must be >= 0, got {self.tolerance}")

    def __call__(self, progress: TrainingProgress) -> bool:
        if len(progress.eval_returns) < self.window:
            return False
        last = np.asarray(progress.eval_returns[-self.window :])
        scale = abs(float(last.mean())) if self.relative else 1.0
        return float(last.max() - last.min()) < self.tolerance * scale

    def describe(self) -> str:
        """The stop reason recorded when this condition ends a run.

        Returns:
            One line of text.
        """
        kind = "relative" if self.relative else "absolute"
        return f"plateau: last {self.window} evaluations within {self.tolerance:g} ({kind})"


@dataclasses.dataclass
class WallClock:
    """Stop once ``seconds`` of wall-clock time have passed since the condition was made.

    A trainer makes the conditions of its config when ``train`` starts, after its envs and model
    are built, so the allowance counts training (rollouts, updates and the periodic evaluations),
    not the set-up; a resumed run gets a fresh allowance. ``clock`` returns seconds (default
    :func:`time.perf_counter`); a test passes a fake one.
    """

    seconds: float
    clock: Callable[[], float] = dataclasses.field(
        default=time.perf_counter, repr=False, compare=False
    )
    started: float = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        value = self.seconds
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float, np.integer, np.floating))
            or not math.isfinite(value)
            or value <= 0
        ):
            raise ValueError(
                f"{type(self).__name__}.seconds must be a positive number, got {value!r}"
            )
        if not callable(self.clock):
            raise ValueError(f"{type(self).__name__}.clock must be callable, got {self.clock!r}")
        self.seconds = float(value)
        self.started = float(self.clock())

    def elapsed(self) -> float:
        """Seconds of the clock since the condition was made.

        Returns:
            The seconds elapsed.
        """
        return float(self.clock()) - self.started

    def __call__(self, progress: TrainingProgress) -> bool:
        return self.elapsed() >= self.seconds

    def describe(self) -> str:
        """The stop reason recorded when this condition ends a run.

        Returns:
            One line of text.
        """
        return f"wall_clock: spent the allowance of {self.seconds:g} s"


@dataclasses.dataclass
class CpuTime(WallClock):
    """Stop once this process has used ``seconds`` of CPU time since the condition was made.

    The allowance of a compute track on a shared machine: a one-thread run on a dedicated core
    uses one CPU second per wall-clock second, and on a machine that other work also loads it
    still gets the same compute (the wall clock would give it less). ``clock`` returns seconds
    (default :func:`time.process_time`: every thread of the process); a test passes a fake one.
    """

    clock: Callable[[], float] = dataclasses.field(
        default=time.process_time, repr=False, compare=False
    )

    def describe(self) -> str:
        """The stop reason recorded when this condition ends a run.

        Returns:
            One line of text.
        """
        return f"cpu_time: spent the allowance of {self.seconds:g} CPU s"


CONDITION_TYPES: dict[str, type] = {
    "max_steps": MaxSteps,
    "reward_threshold": RewardThreshold,
    "no_improvement": NoImprovement,
    "plateau": Plateau,
    "wall_clock": WallClock,
    "cpu_time": CpuTime,
}


def condition_from_dict(spec: dict[str, Any]) -> Any:
    """Build a condition from ``{"type": name, **params}`` (as in a run config)."""
    params = dict(spec)
    kind = params.pop("type", None)
    if kind not in CONDITION_TYPES:
        raise ValueError(
            f"stop condition type {kind!r} unknown; valid: {', '.join(CONDITION_TYPES)}"
        )
    cls = CONDITION_TYPES[kind]
    names = {f.name for f in dataclasses.fields(cls) if f.init and f.name != "clock"}
    unknown = set(params) - names
    if unknown:
        raise ValueError(
            f"stop condition {kind}: unknown field(s) {sorted(unknown)}; valid: {sorted(names)}"
        )
    try:
        return cls(**params)
    except TypeError as err:
        raise ValueError(f"stop condition {kind}: {err}") from None


def describe_condition(condition: Any) -> str:
    """Human-readable stop reason of ``condition``."""
    describe = getattr(condition, "describe", None)
    return describe() if callable(describe) else repr(condition)


def first_met(conditions: Sequence[Any], progress: TrainingProgress) -> Any | None:
    """The first condition in ``conditions`` that is met, or ``None``."""
    return next((c for c in conditions if c(progress)), None)
