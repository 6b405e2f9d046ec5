"""Tasks: declarative specs plus batched reset / step functions, and their registry.

``register_task(name, "package.module:Class")`` (or the class itself) adds a task; see
``docs/architecture.md`` for everything a new task brings along.
"""

from powerzoo.tasks.registry import (
    describe,
    get_task_class,
    info,
    list_tasks,
    make_task,
    register_task,
    task_spec,
    unregister_task,
)

__all__ = [
    "describe",
    "get_task_class",
    "info",
    "list_tasks",
    "make_task",
    "register_task",
    "task_spec",
    "unregister_task",
]
