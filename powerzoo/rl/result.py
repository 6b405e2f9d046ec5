"""``TrainResult``: the outcome of one training run (the in-memory side of ``run_state.json``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

__all__ = ["TrainResult"]


@dataclasses.dataclass
class TrainResult:
    """Outcome of :meth:`~powerzoo.rl.trainer.TrainerProtocol.train`: where, how far, why it
    stopped, the evaluations."""

    run_dir: Path
    num_timesteps: int
    status: str  # "finished" (budget reached) or "stopped" (a stop condition)
    stop_reason: str | None
    evaluations: list[dict[str, Any]]
    wall_seconds: float
    agents_per_step: int = 1  # samples per env step: the agents of a shared multi-agent policy

    @property
    def env_steps(self) -> int:
        """Env steps trained (summed over parallel envs): ``num_timesteps`` counts agent-steps
        where one policy acts for every agent of a multi-agent env."""
        return int(self.num_timesteps) // max(1, int(self.agents_per_step))

    @property
    def best_mean_return(self) -> float | None:
        """Best evaluation mean return ($ or the task's return unit), ``None`` without
        evaluations."""
        return max((r["mean_return"] for r in self.evaluations), default=None)
