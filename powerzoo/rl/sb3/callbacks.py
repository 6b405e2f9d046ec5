"""SB3 callbacks of the training layer: evaluation, checkpoint timing, costs, stop conditions,
progress.

All frequencies are in env steps counted over every parallel env (``model.num_timesteps``), so a
run with 8 envs evaluates as often, in env steps, as a run with one. None of these callbacks
closes, resets or steps the training env.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnvWrapper

from powerzoo.fileio import atomic_save, write_json
from powerzoo.progress import progress_bar
from powerzoo.rl.conditions import TrainingProgress, describe_condition, first_met
from powerzoo.rl.evaluation_log import EVAL_CSV, evaluation_row, write_evaluation_csv
from powerzoo.rl.sb3.policy import ModelPolicy, frozen_obs_stats

__all__ = [
    "EVAL_CSV",
    "evaluation_row",
    "write_evaluation_csv",
    "EvaluationCallback",
    "RunCheckpointCallback",
    "ConstraintCostCallback",
    "StopConditionCallback",
    "TqdmProgressCallback",
]


class ConstraintCostCallback(BaseCallback):
    """Logs each training episode's summed constraint costs next to SB3's ``rollout/ep_rew_mean``.

    Keys: ``rollout/ep_cost_<name>_mean`` per constraint and ``rollout/ep_cost_sum_mean``, means
    over the last ``window`` finished episodes (physical units, e.g. MWh).
    """

    def __init__(self, constraint_names: Sequence[str], window: int = 100) -> None:
        super().__init__()
        self.names = tuple(constraint_names)
        self.finished: deque[np.ndarray] = deque(maxlen=window)
        self._running: np.ndarray | None = None
        self._native: Any = None  # the NativeVecEnv under the training env's wrappers, if any

    def _init_callback(self) -> None:
        env = self.training_env
        while isinstance(
            env, VecEnvWrapper
        ):  # VecNormalize, VecMonitor, ... down to the base VecEnv
            env = env.venv
        self._native = env if hasattr(env, "last_constraint_costs") else None

    def _step_costs(self, infos: Sequence[dict[str, Any]]) -> np.ndarray:
        """``[n_envs, n_constraints]`` costs of the last step: the native env's batch array as it
        is, else gathered from the per-env infos."""
        batch = getattr(self._native, "last_constraint_costs", None)
        if batch is not None:
            return np.asarray(batch, dtype=np.float64)
        return np.asarray(
            [info.get("constraint_costs", np.zeros(len(self.names))) for info in infos],
            dtype=np.float64,
        )

    def _on_step(self) -> bool:
        infos, dones = self.locals.get("infos"), self.locals.get("dones")
        if infos is None or dones is None or not self.names:
            return True
        step = self._step_costs(infos)
        self._running = step.copy() if self._running is None else self._running + step
        for i in np.flatnonzero(dones):
            self.finished.append(self._running[i].copy())
            self._running[i] = 0.0
        return True

    def _on_rollout_end(self) -> None:
        if not self.finished:
            return
        mean = np.mean(np.stack(self.finished), axis=0)
        for name, value in zip(self.names, mean, strict=True):
            self.logger.record(f"rollout/ep_cost_{name}_mean", float(value))
        self.logger.record("rollout/ep_cost_sum_mean", float(mean.sum()))


class EvaluationCallback(BaseCallback):
    """Evaluate every ``eval_freq`` env steps on a separate env; keep the best model; write a CSV.

    Before each evaluation the training ``VecNormalize``'s observation statistics are copied and
    frozen into the evaluation policy (:class:`~powerzoo.rl.sb3.policy.ModelPolicy`); the training
    env is never touched. Each evaluation runs the same ``day_ids`` of the evaluation split with
    the same seeds, so evaluations are comparable and a reloaded best model reproduces its score.

    The trainer calls :meth:`evaluate_at_end` after ``learn``, so the last row is at the final step;
    with ``at_start`` the untrained model is evaluated too, before the first step (row 0).

    Writes ``evaluation/evaluation_metrics.csv`` (rewritten at every evaluation, one row each),
    ``evaluation/best_model.zip`` + ``best_vecnormalize.npz`` + ``best_model.json`` when the mean
    return improves, and logs ``eval/*`` scalars (return, costs, violation rate) to TensorBoard.
    """

    def __init__(
        self,
        eval_env: Any,
        eval_dir: str | Path,
        eval_freq: int,
        day_ids: Sequence[int],
        constraint_names: Sequence[str],
        deterministic: bool = True,
        seed: int = 0,
        history: list[dict[str, Any]] | None = None,
        on_evaluation: Callable[[dict[str, Any]], None] | None = None,
        at_start: bool = False,
    ) -> None:
        super().__init__()
        self.at_start = at_start
        self.eval_env = eval_env
        self.eval_dir = Path(eval_dir)
        self.eval_freq = int(eval_freq)
        self.day_ids = list(day_ids)
        self.names = tuple(constraint_names)
        self.deterministic = deterministic
        self.seed = seed
        # shared with the caller (the trainer checkpoints it), not copied
        self.history: list[dict[str, Any]] = history if history is not None else []
        self.on_evaluation = on_evaluation
        self.next_eval: int | None = None

    @property
    def best_mean_return(self) -> float:
        return max((row["mean_return"] for row in self.history), default=-np.inf)

    def _init_callback(self) -> None:
        self.eval_dir.mkdir(parents=True, exist_ok=True)
        self.next_eval = (self.model.num_timesteps // self.eval_freq + 1) * self.eval_freq
        if self.at_start and self.model.num_timesteps == 0 and not self.history:
            self.num_timesteps = 0
            self.evaluate_now()  # the untrained model: a candidate for the best model

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next_eval:
            while self.next_eval <= self.num_timesteps:
                self.next_eval += self.eval_freq
            self.evaluate_now()
        return True

    def evaluate_at_end(self) -> dict[str, Any] | None:
        """After ``learn``: evaluate once more unless the last evaluation was at this exact step.

        A run shorter than ``eval_freq`` (or stopped between evaluations) still ends with a CSV
        row and a best model. Returns the new row, or ``None`` when nothing was evaluated (the
        last row is at the final step, or ``learn`` never started this callback).
        """
        model = getattr(self, "model", None)
        if model is None:
            return None
        steps = int(model.num_timesteps)
        if self.history and int(self.history[-1]["timestep"]) == steps:
            return None
        self.num_timesteps = steps
        return self.evaluate_now()

    def evaluate_now(self) -> dict[str, Any]:
        """Run one evaluation at the current step, update the CSV / best model, return its row."""
        from powerzoo.benchmarks.evaluation import evaluate_days

        vec_normalize = self.model.get_vec_normalize_env()
        stats = frozen_obs_stats(vec_normalize)
        policy = ModelPolicy(self.model, stats, deterministic=self.deterministic)
        started = time.perf_counter()
        summary = evaluate_days(policy, self.eval_env, self.day_ids, seed=self.seed)
        row = evaluation_row(summary, int(self.num_timesteps), time.perf_counter() - started)
        improved = row["mean_return"] > self.best_mean_return
        row["new_best"] = improved
        self.history.append(row)
        write_evaluation_csv(self.eval_dir, self.history)
        if improved:
            self._save_best(row, vec_normalize)
        for key in ("mean_return", "std_return", "mean_length", "violation_rate"):
            self.logger.record(f"eval/{key}", row[key])
        for name in summary["mean_costs"]:
            self.logger.record(f"eval/cost_{name}", row[f"cost_{name}"])
        self.logger.dump(self.num_timesteps)
        if self.on_evaluation is not None:
            self.on_evaluation(row)
        return row

    def _save_best(self, row: dict[str, Any], vec_normalize: Any) -> None:
        atomic_save(self.eval_dir / "best_model.zip", self.model.save)
        if vec_normalize is not None:
            from powerzoo.rl.sb3.files import write_vecnormalize

            write_vecnormalize(self.eval_dir / "best_vecnormalize.npz", vec_normalize)
        write_json(
            self.eval_dir / "best_model.json",
            {
                "timestep": row["timestep"],
                "mean_return": row["mean_return"],
                "day_ids": self.day_ids,
                "seed": self.seed,
                "deterministic": self.deterministic,
            },
        )


class RunCheckpointCallback(BaseCallback):
    """Call ``save(num_timesteps)`` every ``save_freq`` env steps, between rollouts.

    Unlike SB3's ``CheckpointCallback`` (which writes model files itself), this one only decides
    *when*: the trainer's ``save`` writes the whole checkpoint folder of the run.

    Saving happens when a rollout starts (after the previous policy update), so a checkpoint
    never holds a half-collected on-policy rollout: resuming from it repeats no update and skips
    none. The trainer's ``save`` writes the checkpoint folder atomically.
    """

    def __init__(self, save_freq: int, save: Callable[[int], Any]) -> None:
        super().__init__()
        self.save_freq = int(save_freq)
        self.save = save
        self.last_saved = 0

    def _init_callback(self) -> None:
        self.last_saved = self.model.num_timesteps

    def _on_rollout_start(self) -> None:
        if self.num_timesteps - self.last_saved >= self.save_freq:
            self.save(self.num_timesteps)
            self.last_saved = self.num_timesteps

    def _on_step(self) -> bool:
        return True


class StopConditionCallback(BaseCallback):
    """Stop ``learn`` when one of ``conditions`` (see :mod:`powerzoo.rl.conditions`) is met.

    ``eval_returns`` is a callable giving the evaluation returns so far. Step limits count env
    steps: ``num_timesteps`` divided by ``agents_per_step`` (the agent count where one SB3
    sample is one agent's step, as under a policy shared across a multi-agent task). The met
    condition's description is kept in :attr:`stop_reason`.
    """

    def __init__(
        self,
        conditions: Sequence[Any],
        eval_returns: Callable[[], list[float]],
        agents_per_step: int = 1,
    ) -> None:
        super().__init__()
        self.conditions = list(conditions)
        self.eval_returns = eval_returns
        self.agents_per_step = int(agents_per_step)
        self.stop_reason: str | None = None

    def _on_step(self) -> bool:
        if not self.conditions:
            return True
        env_steps = int(self.num_timesteps) // self.agents_per_step
        met = first_met(self.conditions, TrainingProgress(env_steps, self.eval_returns()))
        if met is not None:
            self.stop_reason = describe_condition(met)
            return False
        return True


class TqdmProgressCallback(BaseCallback):
    """A tqdm bar over the env-step budget of SB3 ``learn`` calls (starts at the resumed step).

    ``enabled`` is :func:`powerzoo.progress.progress_bar`'s ``progress``: ``None`` shows the bar
    only when stderr is a terminal.
    """

    def __init__(
        self, total_timesteps: int, enabled: bool | None = None, desc: str = "training"
    ) -> None:
        super().__init__()
        self.total = int(total_timesteps)
        self.enabled = enabled
        self.desc = desc
        self.bar: Any = None

    def _on_training_start(self) -> None:
        self.bar = progress_bar(
            progress=self.enabled,
            total=self.total,
            initial=self.num_timesteps,
            desc=self.desc,
            unit="step",
            dynamic_ncols=True,
        )

    def _on_step(self) -> bool:
        if self.bar is not None:
            self.bar.update(self.num_timesteps - self.bar.n)
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()
