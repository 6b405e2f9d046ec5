"""Tasks: declarative specs plus batched reset / step functions, and their registry."""

from powerzoo.tasks.registry import describe, get_task_class, info, list_tasks, make_task, task_spec

__all__ = ["describe", "get_task_class", "info", "list_tasks", "make_task", "task_spec"]
