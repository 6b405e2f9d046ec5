"""Task facts every adapter answers the same way (names of cost, reward-term and CMDP columns)."""

from __future__ import annotations

from typing import Any

__all__ = ["TaskMetadata"]


class TaskMetadata:
    """Mixin for adapters holding ``task_spec``: the orders of the info arrays' columns."""

    task_spec: Any

    def constraint_names(self) -> tuple[str, ...]:
        """Order of ``info["constraint_costs"]`` columns."""
        return self.task_spec.constraint_names

    def reward_term_names(self) -> tuple[str, ...]:
        """Order of ``info["reward_terms"]`` columns."""
        return self.task_spec.reward_terms

    def selected_constraint_names(self) -> tuple[str, ...]:
        """Order of ``info["selected_constraint_costs"]`` columns (the task's CMDP costs)."""
        return self.task_spec.selected_constraints
