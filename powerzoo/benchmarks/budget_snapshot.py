"""The per-episode constraint budgets a campaign was scored against, kept with its results.

A task's budgets (which constraints count, ``spec.selected_constraints``, and each one's
per-episode limit, ``spec.cost_thresholds``, in the constraint's physical unit) may change after a
campaign was run: a task that only reported line overload may budget it later. Scored against
today's budgets, yesterday's trained agents and baselines would read as over budget on days that
were within the rules they were trained and measured under. A campaign folder therefore keeps
the budgets of its day in ``task_budgets.json``::

    {"voltage_control_118": {"selected": ["voltage_violation", "reactive_limit"],
                             "thresholds": {"voltage_violation": 1.0, "reactive_limit": 1.0}}}

and every reader of budgets in the report path (days over budget, the budget-aware score, the
budget columns and lines of the results page) asks :func:`budgets_of`, which returns the pinned
budgets inside :func:`task_budgets` and the live task spec's elsewhere, or for a task the file
does not name::

    with task_budgets("results/benchmark/task_budgets.json"):
        budgets_of("voltage_control_118").selected_constraints

A :class:`TaskBudgets` has the two attributes of a task spec that
:func:`~powerzoo.benchmarks.evaluation.budget_flags` reads, so it stands in for the spec there.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from powerzoo.fileio import CorruptFileError, read_json, read_or_corrupt, write_json
from powerzoo.tasks import task_spec

__all__ = [
    "TaskBudgets",
    "live_budgets",
    "budgets_of",
    "task_budgets",
    "budget_snapshot",
    "write_task_budgets",
    "read_task_budgets",
]


@dataclasses.dataclass(frozen=True)
class TaskBudgets:
    """The budgets of one task: spec-like (``selected_constraints``, ``cost_thresholds``).

    Attributes:
        selected_constraints: the constraints whose per-episode cost counts against a budget.
        cost_thresholds: ``{constraint: per-episode budget}`` in each constraint's physical unit
            (only the selected ones are budgets).
    """

    selected_constraints: tuple[str, ...]
    cost_thresholds: dict[str, float]

    def budget(self, name: str) -> float | None:
        """The per-episode budget of constraint ``name`` (its physical unit), ``None`` when it is
        not selected or has no threshold."""
        if name not in self.selected_constraints:
            return None
        return self.cost_thresholds.get(name)

    def to_json(self) -> dict[str, Any]:
        """``{"selected": [...], "thresholds": {name: value}}`` (the file's entry of a task)."""
        return {
            "selected": list(self.selected_constraints),
            "thresholds": {k: float(v) for k, v in self.cost_thresholds.items()},
        }


def live_budgets(task: str) -> TaskBudgets | None:
    """The budgets of the registered task's spec now; ``None`` for a name the registry does not
    know."""
    try:
        spec = task_spec(task)
    except (KeyError, ValueError):
        return None
    return TaskBudgets(
        tuple(spec.selected_constraints),
        {k: float(v) for k, v in spec.cost_thresholds.items()},
    )


_PINNED: contextvars.ContextVar[dict[str, TaskBudgets] | None] = contextvars.ContextVar(
    "task_budgets", default=None
)


def budgets_of(task: str) -> TaskBudgets | None:
    """The budgets ``task`` is scored against: the pinned ones inside :func:`task_budgets` when
    the file names the task, else the live spec's (:func:`live_budgets`; ``None`` for an unknown
    task)."""
    pinned = _PINNED.get()
    if pinned is not None and task in pinned:
        return pinned[task]
    return live_budgets(task)


@contextlib.contextmanager
def task_budgets(path: str | Path) -> Iterator[dict[str, TaskBudgets]]:
    """Within the block, :func:`budgets_of` returns the budgets of the ``task_budgets.json`` at
    ``path`` for every task it names (the live spec's for the others).

    Args:
        path: A task budgets JSON file (:func:`write_task_budgets`).

    Yields:
        The pinned budgets by task.
    """
    pinned = read_task_budgets(path)
    token = _PINNED.set(pinned)
    try:
        yield pinned
    finally:
        _PINNED.reset(token)


def budget_snapshot(tasks: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{task: {"selected", "thresholds"}}`` of the live specs of ``tasks`` (the file's content);
    ``KeyError`` for a task the registry does not know."""
    out = {}
    for task in dict.fromkeys(tasks):
        budgets = live_budgets(task)
        if budgets is None:
            raise KeyError(f"unknown task {task!r}")
        out[task] = budgets.to_json()
    return out


def write_task_budgets(path: str | Path, tasks: Iterable[str]) -> Path:
    """Write the live budgets of ``tasks`` (:func:`budget_snapshot`) to ``path``; returns it."""
    return write_json(path, budget_snapshot(tasks))


def _parse(data: Any) -> dict[str, TaskBudgets]:
    """The budgets by task of a decoded file; ``ValueError`` saying what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError("expected a mapping {task: {selected, thresholds}}")
    out = {}
    for task, entry in data.items():
        if not isinstance(entry, Mapping) or set(entry) != {"selected", "thresholds"}:
            raise ValueError(f"{task}: expected exactly the keys 'selected' and 'thresholds'")
        selected, thresholds = entry["selected"], entry["thresholds"]
        if not isinstance(selected, list) or not all(isinstance(n, str) for n in selected):
            raise ValueError(f"{task}: 'selected' must be a list of constraint names")
        if not isinstance(thresholds, Mapping):
            raise ValueError(f"{task}: 'thresholds' must be a mapping {{name: budget}}")
        values = {}
        for name, value in thresholds.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{task}: budget of {name!r} is not a number: {value!r}")
            if math.isnan(value) or value < 0:
                raise ValueError(f"{task}: budget of {name!r} must be >= 0, got {value!r}")
            values[str(name)] = float(value)
        out[str(task)] = TaskBudgets(tuple(selected), values)
    return out


def read_task_budgets(path: str | Path) -> dict[str, TaskBudgets]:
    """The budgets by task of the file at ``path``. ``FileNotFoundError`` without one;
    :class:`~powerzoo.fileio.CorruptFileError` (a ``ValueError`` naming the file) for a file that
    is not JSON or not of the documented form."""
    data = read_or_corrupt(path, read_json)
    try:
        return _parse(data)
    except ValueError as err:
        raise CorruptFileError(path, str(err)) from None
