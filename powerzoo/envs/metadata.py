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

    def render(self) -> None:
        """PowerZoo envs have no render modes (``metadata["render_modes"] == []``): raises
        ``NotImplementedError`` saying so and what to use instead (a plot of an episode)."""
        raise NotImplementedError(
            f"{self.task_spec.task_id} has no render modes (metadata['render_modes'] is []): "
            "PowerZoo envs draw nothing. To look at an episode, plot it: "
            "powerzoo.benchmarks.plots.record_episode(env, policy) then "
            "plot_recorded_episode(trace, env.unwrapped.task_spec, 'episode.png'), or "
            "`powerzoo eval RUN_DIR --plot-day K` for a trained run"
        )

    def selected_constraint_names(self) -> tuple[str, ...]:
        """Order of ``info["selected_constraint_costs"]`` columns (the task's CMDP costs)."""
        return self.task_spec.selected_constraints
