"""What every trainer shares: its config and task, its run folder, its run state and evaluation.

:class:`TrainerBase` holds the run state the SB3 trainers (:mod:`powerzoo.rl.sb3`) and the native
multi-agent trainer (:mod:`powerzoo.rl.mappo`) have in common: the resolved run config, the task
spec, the run folder (planned before anything is written, created once everything that can fail
was built), ``run_state.json``, the evaluation history and the result. Each backend adds how it
trains, saves, loads, resumes and acts; :mod:`powerzoo.rl.trainer` builds the right one.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import os
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from powerzoo.fileio import check_output_folder, write_json
from powerzoo.rl import run_dir as rd
from powerzoo.rl.algorithms import algorithm_label, trainer_class
from powerzoo.rl.checkpoint import check_recorded_config
from powerzoo.rl.config import TrainConfig
from powerzoo.rl.result import TrainResult
from powerzoo.tasks.registry import task_spec

__all__ = ["TrainerBase", "MODEL_CHOICES", "holds_run_dir"]

F = TypeVar("F", bound=Callable[..., Any])

MODEL_CHOICES = ("final", "best", "latest")
"""Which model of a run folder ``load`` reads: the final one, the best evaluated one, the newest
checkpoint."""


def holds_run_dir(method: F) -> F:
    """Release the run-folder lock a trainer method took (:meth:`TrainerBase._ensure_run_dir`,
    :meth:`TrainerBase.resume`) when it returns or raises; a call inside another such call
    leaves the outer one's lock alone."""

    @functools.wraps(method)
    def locked(self: TrainerBase, *args: Any, **kwargs: Any) -> Any:
        outer = self._run_lock is not None
        try:
            return method(self, *args, **kwargs)
        except KeyboardInterrupt:
            if not outer:  # Ctrl-C: the run is no longer running; `powerzoo resume` continues it
                self._mark_interrupted()
            raise
        finally:
            if not outer:
                self._release_run_dir()

    return locked  # type: ignore[return-value]


class TrainerBase(abc.ABC):
    """Run state shared by every trainer; subclasses implement training, persistence and acting.

    Args:
        config: a validated run config (:class:`~powerzoo.rl.config.TrainConfig`).
    """

    RESUMABLE = True
    """Whether ``resume`` continues an interrupted run from a checkpoint (not the SB3 multi-agent
    loops, which keep only their final models)."""

    agents_per_step = 1
    """Samples in ``num_timesteps`` per env step: the agent count where one SB3 policy acts for
    every agent of a multi-agent env (:attr:`TrainResult.env_steps` divides by it)."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.spec = task_spec(config.task, **config.env.task_kwargs)
        self.run_dir: Path | None = None
        self.evaluations: list[dict[str, Any]] = []
        self.result: TrainResult | None = None
        self._purge_step: int | None = None  # TensorBoard steps hidden after a resume
        self._planned_dir: Path | None = None
        self._trust_pickle = False  # read the pickles of older run folders (load / resume)
        self._run_lock: contextlib.ExitStack | None = None
        self._locked_dir: Path | None = None
        # called with the run folder once training has started (run_state.json says "running")
        self.on_start: Callable[[Path], None] | None = None
        self._start_announced = False

    # ---- facts -----------------------------------------------------------------------------------
    @property
    def task(self) -> str:
        """The task's registered name."""
        return self.config.task

    @property
    def algorithm(self) -> str:
        """The algorithm's canonical name (``PPO``, ``SAC``, ``MAPPO``, ...)."""
        return self.config.algorithm

    @property
    def is_multi_agent(self) -> bool:
        """Whether the task has several agents."""
        return self.spec.agent_mode == "multi"

    @property
    def gamma(self) -> float:
        """The discount factor: ``algorithm_kwargs.gamma`` if given, else the task's own."""
        gamma = self.config.algorithm_kwargs.get("gamma")
        return float(self.spec.gamma if gamma is None else gamma)

    # ---- the protocol each backend implements ---------------------------------------------------
    @abc.abstractmethod
    def train(
        self, stop_conditions: Sequence[Any] | None = None, steps_per_eval: int | None = None
    ) -> TrainResult:
        """Train until the budget or a stop condition; writes the run folder."""

    @abc.abstractmethod
    def save(self, path: str | Path) -> Path:
        """Write the trained model(s) and the resolved config into folder ``path``."""

    def load(
        self, path: str | Path, model: str = "final", *, trust_pickle: bool = False
    ) -> TrainerBase:
        """Load a saved folder or run folder into this trainer and return it.

        The saved config, model(s), normalisation statistics and run folder replace the
        trainer's own; the saved run must be of this trainer's task and kind (else
        ``ValueError``: use ``powerzoo.rl.Trainer.load(path)`` for a new trainer). To train a
        saved SB3 model further with new settings, start a trainer with ``init_model=``.

        Loading runs no code from the folder: models are built from its config and only their
        parameters are read (:mod:`powerzoo.rl.run_dir`). A run that normalises observations must
        have its statistics file (else ``FileNotFoundError`` naming it).

        Args:
            path: a folder written by :meth:`save` or a run folder (``config.yaml`` inside).
            model: in a run folder, ``"final"``, ``"best"`` (best evaluated) or ``"latest"``
                (newest checkpoint).
            trust_pickle: also read the pickles an older PowerZoo wrote, and SB3 zips with SB3's
                own ``load``; both run code: for folders from trusted sources only.

        Returns:
            This trainer.
        """
        path = Path(path)
        if model not in MODEL_CHOICES:
            raise ValueError(f"model must be one of {MODEL_CHOICES}, got {model!r}")
        if not (path / rd.CONFIG_FILE).is_file():
            raise FileNotFoundError(
                f"{path} has no {rd.CONFIG_FILE}: not a PowerZoo model or run folder"
            )
        config = TrainConfig.from_file(path / rd.CONFIG_FILE)
        check_recorded_config(
            config, path / rd.CONFIG_FILE, rd.read_run_state(path), path / rd.STATE_FILE
        )
        if config.task != self.task:
            raise ValueError(
                f"{path} holds a {config.task} model but this trainer is for {self.task}; "
                f"use Trainer.load({str(path)!r}) for a new trainer"
            )
        kind = trainer_class(config.algorithm, self.is_multi_agent)
        if kind is not type(self):
            raise ValueError(
                f"{path} holds a {config.algorithm} run ({kind.__name__}); this trainer is a "
                f"{type(self).__name__}: use Trainer.load({str(path)!r})"
            )
        fresh = type(self)(config)
        fresh._trust_pickle = trust_pickle
        fresh._load_files(path, model)
        self.close()  # this trainer drops its own model, envs and run folder for the loaded ones
        vars(self).update(vars(fresh))
        return self

    @abc.abstractmethod
    def _load_files(self, path: Path, model: str) -> None:
        """Read the model(s) that ``path`` keeps under ``model`` into this fresh trainer."""

    @abc.abstractmethod
    def restore_checkpoint(self, run_dir: str | Path) -> TrainerBase:
        """Position this fresh trainer at the newest checkpoint of ``run_dir``; returns it.

        Nothing read runs code unless the trainer trusts pickles (``trust_pickle`` of
        :func:`powerzoo.rl.trainer.trainer_from_checkpoint`, :meth:`resume`, :meth:`load`)."""

    @holds_run_dir
    def resume(
        self,
        run_dir: str | Path,
        stop_conditions: Sequence[Any] | None = None,
        *,
        trust_pickle: bool = False,
    ) -> TrainerBase:
        """Continue ``run_dir`` from its newest checkpoint up to its budget; returns this trainer.

        The config (``config.yaml``) must be the one the run recorded (else ``ConfigError``
        naming the fields). A damaged checkpoint is skipped for the next newest (with a warning).
        A run killed before its first checkpoint trains again from step 0 in the same folder
        (with a warning). A finished run is loaded (final model) and nothing is written; a run a
        stop condition ended is restored but not trained further. ``result`` stays ``None`` for
        both.

        The run folder is locked for the whole call (:func:`powerzoo.rl.run_dir.lock_run_dir`):
        a second ``resume`` or ``train`` of it gets ``RunFolderBusyError`` naming the holder.
        Nothing read runs code unless ``trust_pickle=True``; missing normalisation statistics of
        a run that normalises are an error naming the file.

        Args:
            run_dir: The run folder.
            stop_conditions: Conditions of :mod:`powerzoo.rl.conditions` that end training early.
            trust_pickle: Read the pickles of a run folder an older PowerZoo wrote (trusted
                folders only).

        Returns:
            This trainer.
        """
        run_dir = Path(run_dir)
        self._trust_pickle = self._trust_pickle or trust_pickle
        self._hold_run_dir(run_dir)
        state = rd.read_run_state(run_dir) or {}
        check_recorded_config(self.config, run_dir / rd.CONFIG_FILE, state, run_dir / rd.STATE_FILE)
        steps = int(state.get("num_timesteps") or 0)
        if state.get("status") == "finished" and steps >= self.config.budget_timesteps():
            self._load_files(run_dir, "final")
            return self
        if not rd.CheckpointStore(run_dir).complete():
            warnings.warn(
                f"{run_dir} has no checkpoint (the run ended before its first one): training "
                "it again from step 0 in the same folder",
                stacklevel=2,
            )
            self.run_dir, self._purge_step = run_dir, 0
        else:
            self.restore_checkpoint(run_dir)
            if state.get("status") == "stopped":
                return self
        self.train(stop_conditions=stop_conditions)
        return self

    @abc.abstractmethod
    def policy(self, deterministic: bool = True) -> Any:
        """The trained agent(s) behind the benchmark policy interface."""

    @abc.abstractmethod
    def make_eval_env(self, split: str, objective: bool = False) -> Any:
        """An evaluation env on ``split`` with the training env's options (``objective=True``
        drops a ``reward=`` override)."""

    def close(self) -> None:  # noqa: B027 (a hook: most backends hold nothing to close)
        """Release envs, workers and log writers."""

    # ---- run folder and run state ----------------------------------------------------------------
    def _set_torch_threads(self) -> None:
        if self.config.torch_threads is not None:
            import torch

            torch.set_num_threads(self.config.torch_threads)

    def _planned_run_dir(self) -> Path:
        """The folder :meth:`_ensure_run_dir` will use; ``FileExistsError`` if it holds a run,
        ``RunFolderBusyError`` naming the holder if another process is writing it.

        Writes nothing, so a config that fails later leaves no folder behind.
        """
        if self.run_dir is not None:
            return self.run_dir
        if self._planned_dir is None:
            cfg = self.config
            # a file or an unwritable folder fails here, in one line, before anything is built
            check_output_folder(cfg.output_dir, "output folder (output_dir, --output-dir)")
            name = cfg.name or rd.free_run_name(
                cfg.output_dir, algorithm_label(cfg.algorithm), cfg.task, cfg.seed
            )
            self._planned_dir = Path(cfg.output_dir) / name
        if (self._planned_dir / rd.CONFIG_FILE).exists() and not self.config.overwrite:
            if self._locked_dir != self._planned_dir.absolute():
                with rd.lock_run_dir(self._planned_dir):  # a writer at work is named first
                    pass
            raise FileExistsError(
                f"run folder {self._planned_dir} already holds a run; resume it with "
                f"`powerzoo resume {self._planned_dir}`, choose another name, or replace it "
                "(`powerzoo train --overwrite`, config field overwrite: true)"
            )
        return self._planned_dir

    def _hold_run_dir(self, run_dir: Path) -> None:
        """Lock ``run_dir`` for this trainer (:func:`powerzoo.rl.run_dir.lock_run_dir`) until
        :meth:`_release_run_dir`; ``RunFolderBusyError`` names another holder."""
        run_dir = Path(run_dir).absolute()
        if self._run_lock is not None and self._locked_dir == run_dir:
            return
        self._release_run_dir()
        stack = contextlib.ExitStack()
        stack.enter_context(rd.lock_run_dir(run_dir))
        self._run_lock, self._locked_dir = stack, run_dir

    def _release_run_dir(self) -> None:
        if self._run_lock is not None:
            self._run_lock.close()
            self._run_lock = self._locked_dir = None

    def _ensure_run_dir(self) -> Path:
        """Create the run folder and its ``config.yaml`` (once everything that can fail was
        built), holding its lock (released when the training call returns: :func:`holds_run_dir`).
        """
        if self.run_dir is not None:
            self._hold_run_dir(self.run_dir)
        else:
            run_dir = self._planned_run_dir()
            self._hold_run_dir(run_dir)
            self._planned_run_dir()  # again, under the lock: another run may have finished there
            if (run_dir / rd.CONFIG_FILE).exists():  # overwrite: the old run goes, as a whole
                aside = run_dir.with_name(f".{run_dir.name}.replaced-{os.getpid()}")
                os.replace(run_dir, aside)
                shutil.rmtree(aside)
            run_dir.mkdir(parents=True, exist_ok=True)
            self.config.to_file(run_dir / rd.CONFIG_FILE)
            self.run_dir = run_dir
        return self.run_dir

    def _write_state(self, status: str, stop_reason: str | None = None, **extra: Any) -> None:
        """Write ``run_state.json``: status, stop reason, step counters, task, algorithm and the
        resolved config with its fingerprint (rewritten at each checkpoint and evaluation, so a
        killed run shows its last known step)."""
        write_json(
            self.run_dir / rd.STATE_FILE,
            {
                "status": status,
                "stop_reason": stop_reason,
                "num_timesteps": self.num_timesteps,
                **extra,
                "total_timesteps": self.config.budget_timesteps(),
                "task": self.task,
                "algorithm": self.algorithm,
                "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
                **self._config_record(),
            },
        )
        if status == "running" and self.on_start is not None and not self._start_announced:
            self._start_announced = True
            self.on_start(self.run_dir)

    def _mark_interrupted(self) -> None:
        """After Ctrl-C: ``run_state.json`` says ``interrupted`` instead of ``running`` (the
        newest checkpoint stays what ``resume`` continues from); nothing when the run folder was
        not written yet or the run had ended."""
        if self.run_dir is None:
            return
        try:
            state = rd.read_run_state(self.run_dir) or {}
            if state.get("status") == "running":
                self._write_state("interrupted")
        except Exception as err:  # noqa: BLE001 - the interrupt is what the caller must see
            warnings.warn(f"could not mark {self.run_dir} interrupted: {err}", stacklevel=2)

    def _config_record(self) -> dict[str, Any]:
        """``config_fingerprint`` and ``config`` (the resolved config), kept in ``run_state.json``
        and in each checkpoint's ``state.json`` (:func:`check_recorded_config` compares them)."""
        return {"config_fingerprint": self.config.fingerprint(), "config": self.config.to_dict()}

    def _result(self, status: str, stop_reason: str | None, started: float) -> TrainResult:
        """Keep and return the :class:`TrainResult` of a run that started at ``started``."""
        self.result = TrainResult(
            self.run_dir,
            self.num_timesteps,
            status,
            stop_reason,
            list(self.evaluations),
            time.perf_counter() - started,
            self.agents_per_step,
        )
        return self.result

    # ---- evaluation ------------------------------------------------------------------------------
    def evaluate(
        self,
        split: str = "test",
        n_episodes: int | None = None,
        deterministic: bool = True,
        seed: int = 0,
    ) -> dict[str, Any]:
        """Evaluate the agent(s) on ``split``: one episode per start day, without exploration noise.

        ``n_episodes=None`` runs every day of the split (the protocol of the baselines table, so
        ``normalized_score`` compares like with like); ``n_episodes=k`` runs k days spread evenly.
        Returns ``mean_return`` / ``std_return`` / ``iqm_return`` (task units, e.g. $ per episode;
        the system return on multi-agent tasks, as the baselines table reports it),
        ``mean_costs`` per constraint (physical units per episode), ``violation_rate``,
        ``over_budget_rate``, ``mean_length``, ``normalized_score`` (0 = random, 1 = oracle;
        ``None`` when the baselines table has no entry for this task and split) and
        ``cmdp_score`` (the budget-aware score of :mod:`powerzoo.benchmarks.cmdp_score`;
        ``None`` unless the days and seed are the table's).
        Returns are the task's own objective: a ``reward=`` the agent trained on is not applied.
        """
        from powerzoo.benchmarks.baselines import score_or_none, select_days
        from powerzoo.benchmarks.cmdp_score import cmdp_score_or_none
        from powerzoo.benchmarks.evaluation import evaluate_days
        from powerzoo.envs.introspect import task_of

        if n_episodes is not None and (isinstance(n_episodes, bool) or int(n_episodes) < 1):
            raise ValueError(f"n_episodes must be a positive int or None, got {n_episodes!r}")
        env = self.make_eval_env(split, objective=True)
        n_days = task_of(env).n_days
        days = list(range(n_days)) if n_episodes is None else select_days(n_days, int(n_episodes))
        summary = evaluate_days(self.policy(deterministic), env, days, seed=seed)
        summary["split"] = split
        summary["normalized_score"] = (
            score_or_none(self.task, summary["mean_return"], split) if n_episodes is None else None
        )
        summary["cmdp_score"] = cmdp_score_or_none(self.task, summary, days, seed, split)
        return summary
