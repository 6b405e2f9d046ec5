"""``SB3Trainer``: a thin Stable-Baselines3 layer that turns a single-agent task into a run folder.

Built by :func:`powerzoo.rl.Trainer` for an SB3 algorithm on a single-agent task. It trains one
SB3 model on ``n_envs`` rows of the native batched env
(:class:`~powerzoo.rl.sb3.native_vec_env.NativeVecEnv`, one numpy call per step; ``vec_env: dummy
| subproc`` for SB3's own) wrapped in ``VecNormalize`` (unless the config turns it off). The run
folder layout is documented in :mod:`powerzoo.rl.run_dir`, checkpoints in
:mod:`powerzoo.rl.checkpoint`, the config file format in :mod:`powerzoo.rl.config`.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.baselines import select_days
from powerzoo.envs.introspect import task_of
from powerzoo.envs.make import make_env
from powerzoo.fileio import atomic_save
from powerzoo.rl import run_dir as rd
from powerzoo.rl import safe_files as sf
from powerzoo.rl.algorithms import algorithm_class, evaluates_at_start, is_on_policy
from powerzoo.rl.budget import sb3_rollout, warn_rounded_budget
from powerzoo.rl.checkpoint import (
    read_checkpoint_state,
    read_rng,
    set_rng_state,
    write_checkpoint,
)
from powerzoo.rl.config import EvaluationConfig, TrainConfig
from powerzoo.rl.result import TrainResult
from powerzoo.rl.sb3 import files
from powerzoo.rl.sb3.logger import (
    flush_logger,
    pending_records,
    restore_pending_records,
    run_logger,
)
from powerzoo.rl.sb3.policy import frozen_obs_stats
from powerzoo.rl.tracks import on_a_clock
from powerzoo.rl.trainer_base import TrainerBase, holds_run_dir

__all__ = ["SB3Trainer"]


def _make_single_env(task: str, env_options: dict[str, Any], split: str) -> Any:
    """A Monitor-ready single env (module-level so that subprocess workers can pickle it)."""
    options = dict(env_options)
    task_kwargs = options.pop("task_kwargs", {}) or {}
    options.pop("split", None)
    return make_env(task, split, **options, **task_kwargs)


class SB3Trainer(TrainerBase):
    """Train, evaluate, save, load and resume an SB3 agent on a single-agent task.

    Args:
        config: a validated run config naming an SB3 algorithm and a single-agent task (build
            one from a task name, dict or file with :func:`powerzoo.rl.Trainer`).
    """

    def __init__(self, config: TrainConfig) -> None:
        super().__init__(config)
        if self.is_multi_agent:
            raise ValueError(
                f"SB3Trainer is for single-agent tasks; {self.task} is multi-agent: build its "
                "trainer with powerzoo.rl.Trainer (SB3MultiAgentTrainer or MAPPOTrainer)"
            )
        self.model: Any = None
        self._train_env: Any = None
        self._loaded_vecnorm: dict[str, Any] | None = None  # statistics read from a run folder
        # logger values recorded before the restored checkpoint and not yet written
        self._pending_records: dict[str, Any] | None = None
        self._obs_stats: dict[str, Any] | None = None

    @property
    def num_timesteps(self) -> int:
        """Env steps trained so far."""
        return 0 if self.model is None else int(self.model.num_timesteps)

    def algorithm_kwargs(self) -> dict[str, Any]:
        """SB3 constructor arguments: the config's, with the task's discount factor by default.

        Returns:
            Keyword arguments by name.
        """
        # a deep copy: SB3 writes into the dicts it is given (A2C puts its optimizer class into
        # policy_kwargs), and the config's must stay as written
        return {**copy.deepcopy(self.config.algorithm_kwargs), "gamma": self.gamma}

    def _env_options(self, split: str | None = None) -> dict[str, Any]:
        options = self.config.env.model_dump()
        if split is not None:
            options["split"] = split
        return options

    # ---- envs -----------------------------------------------------------------------------------
    def _build_train_env(self, seed: int) -> Any:
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

        cfg = self.config
        if cfg.vec_env == "native":  # one batched numpy call per step for all n_envs
            from powerzoo.rl.sb3.native_vec_env import make_native_vec_env

            venv = make_native_vec_env(cfg.task, cfg.n_envs, self._env_options(), seed=seed)
        else:  # n_envs single envs, in this process or one process each
            factory = functools.partial(
                _make_single_env, cfg.task, self._env_options(), cfg.env.split
            )
            vec_cls = SubprocVecEnv if cfg.vec_env == "subproc" else DummyVecEnv
            venv = make_vec_env(factory, n_envs=cfg.n_envs, seed=seed, vec_env_cls=vec_cls)
        if self._loaded_vecnorm is not None:
            return files.vecnormalize_from_stats(venv, self._loaded_vecnorm)
        if cfg.vec_normalize is not None:
            v = cfg.vec_normalize
            gamma = self.gamma
            venv = VecNormalize(
                venv,
                norm_obs=v.norm_obs,
                norm_reward=v.norm_reward,
                clip_obs=v.clip_obs,
                clip_reward=v.clip_reward,
                gamma=gamma,
            )
        return venv

    def get_env(self) -> Any:
        """The training ``VecEnv`` (built on first use; ``VecNormalize`` outermost when enabled).

        Returns:
            The training env.
        """
        if self._train_env is None:
            self._train_env = self._build_train_env(self.config.seed)
        return self._train_env

    def make_eval_env(self, split: str, objective: bool = False) -> Any:
        """The evaluation env on ``split``, with the training env's options and no running
        statistics.

        A single Gymnasium env. ``objective=True`` drops a ``reward=`` override, so returns are the
        task's own objective (what the baselines table and ``normalized_score`` measure) whatever
        the agent trained on.

        Args:
            split: Date split of the evaluation episodes.
            objective: Drop a ``reward=`` override (returns are the task's own, $ per episode).

        Returns:
            The evaluation env.
        """
        options = self._env_options(split)
        if objective:
            options["reward"] = None
        return _make_single_env(self.task, options, split)

    # ---- model ----------------------------------------------------------------------------------
    def _ensure_model(self) -> Any:
        self._set_torch_threads()
        if self.model is None:
            cls = algorithm_class(self.algorithm)
            env = self.get_env()
            if self.config.init_model:  # its parameters, into the model the config describes
                self.model = files.read_model(
                    self.config.init_model,
                    lambda: files.new_model(
                        cls,
                        self.config.policy,
                        {"seed": self.config.seed, **self.algorithm_kwargs()},
                        env,
                    ),
                    lambda p: cls.load(
                        p, env=env, seed=self.config.seed, **self.algorithm_kwargs()
                    ),
                    self._trust_pickle,
                )
            else:
                self.model = cls(
                    self.config.policy,
                    env,
                    seed=self.config.seed,
                    verbose=self.config.logging.verbose,
                    **self.algorithm_kwargs(),
                )
        elif self.model.get_env() is None:
            self.model.set_env(self.get_env())
        return self.model

    def _configure_logger(self) -> None:
        logging = self.config.logging
        self.model.set_logger(
            run_logger(
                self.run_dir / rd.TENSORBOARD_DIR,
                logging.verbose,
                logging.tensorboard,
                self._purge_step,
            )
        )
        # the values the checkpointed run had recorded but not yet dumped (its last update's)
        restore_pending_records(self.model.logger, self._pending_records)
        self._pending_records = None

    # ---- training -------------------------------------------------------------------------------
    @holds_run_dir
    def train(
        self, stop_conditions: Sequence[Any] | None = None, steps_per_eval: int | None = None
    ) -> TrainResult:
        """Train until the budget (``total_timesteps``) or a stop condition; returns a
        :class:`TrainResult`.

        Args:
            stop_conditions: extra conditions (see :mod:`powerzoo.rl.conditions`), added to the
                config's.
            steps_per_eval: evaluation period in env steps, overriding ``evaluation.freq``.

        Writes the run folder (:mod:`powerzoo.rl.run_dir`): config, TensorBoard logs, evaluation
        CSV and best model, checkpoints, final model. With evaluation configured, the agent is
        evaluated every ``evaluation.freq`` env steps and once more when training ends (unless the
        last evaluation was at that step). The envs and the model are built before the folder is
        created, so a config that cannot run leaves nothing behind. Calling it again after the
        budget is reached returns at once. The run folder is locked while it trains
        (:func:`powerzoo.rl.run_dir.lock_run_dir`): another writer gets ``RunFolderBusyError``.

        Returns:
            The run's result (run folder, steps, evaluations, why it stopped).
        """
        from stable_baselines3.common.callbacks import CallbackList

        from powerzoo.rl.sb3 import callbacks as cb

        started = time.perf_counter()
        cfg = self.config
        planned = self._planned_run_dir()
        # everything that can fail on a bad config (envs, model, init_model) before the folder
        # exists
        model = self._ensure_model()
        budget = cfg.budget_timesteps()
        names = self.spec.constraint_names
        eval_cb = None
        callbacks: list[Any] = [cb.ConstraintCostCallback(names)]
        if cfg.evaluation is not None or steps_per_eval is not None:
            ev = cfg.evaluation or EvaluationConfig()
            eval_env = self.make_eval_env(ev.split)
            days = select_days(task_of(eval_env).n_days, ev.episodes)
            eval_cb = cb.EvaluationCallback(
                eval_env,
                planned / rd.EVAL_DIR,
                steps_per_eval or ev.freq,
                days,
                names,
                deterministic=ev.deterministic,
                seed=cfg.seed,
                history=self.evaluations,
                on_evaluation=lambda row: self._write_state("running"),
                at_start=evaluates_at_start(cfg.algorithm, ev.at_start),
            )
            callbacks.append(eval_cb)
        run_dir = self._ensure_run_dir()
        self._configure_logger()
        if cfg.checkpoint is not None:
            callbacks.append(cb.RunCheckpointCallback(cfg.checkpoint.freq, self._save_checkpoint))
        conditions = cfg.stop_condition_objects() + list(stop_conditions or [])
        stop_cb = cb.StopConditionCallback(
            conditions,
            lambda: [] if eval_cb is None else [r["mean_return"] for r in eval_cb.history],
        )
        remaining = budget - model.num_timesteps
        rollout = sb3_rollout(model)
        trained = budget  # what the bar counts to: the budget rounded up to whole rollouts
        if rollout is not None and not on_a_clock(cfg.stop_conditions):
            trained = warn_rounded_budget(self.algorithm, budget, model.num_timesteps, *rollout)
        callbacks += [stop_cb, cb.TqdmProgressCallback(trained, cfg.logging.progress_bar)]
        if remaining > 0:
            self._write_state("running")
            model.learn(remaining, callback=CallbackList(callbacks), reset_num_timesteps=False)
        if eval_cb is not None:
            # a short or stopped run still gets its CSV row and best model
            eval_cb.evaluate_at_end()
            self.evaluations = eval_cb.history
        status = "stopped" if stop_cb.stop_reason else "finished"
        self._save_checkpoint(model.num_timesteps)
        self.save(run_dir)
        self._write_state(status, stop_cb.stop_reason)
        flush_logger(model)
        return self._result(status, stop_cb.stop_reason, started)

    def _save_checkpoint(self, num_timesteps: int) -> Path | None:
        """Write ``checkpoints/step_<N>/`` atomically: model, statistics, replay buffer, RNG,
        counters."""
        checkpoint = self.config.checkpoint
        if checkpoint is None:
            return None
        keep_replay = checkpoint.replay_buffer and not is_on_policy(self.algorithm)
        folder = write_checkpoint(
            self.run_dir,
            checkpoint.keep,
            lambda folder: files.write_model_files(folder, self.model, keep_replay),
            num_timesteps,
            self.evaluations,
            {**self._config_record(), "pending_logs": pending_records(self.model)},
        )
        self._write_state("running")
        return folder

    # ---- evaluation -----------------------------------------------------------------------------
    def policy(self, deterministic: bool = True) -> Any:
        """The trained agent behind the benchmark policy interface (``act(obs, info)``).

        Sets torch's thread count to the config's ``torch_threads`` (small MLPs act fastest on one).

        Args:
            deterministic: Act with the policy's mode instead of sampling.

        Returns:
            A policy with ``reset()`` and ``act(obs, info)``.
        """
        from powerzoo.rl.sb3.policy import ModelPolicy

        self._set_torch_threads()
        if self.model is None:
            raise RuntimeError("no model yet: call train() or Trainer.load(...) first")
        stats = (
            frozen_obs_stats(self.model.get_vec_normalize_env())
            if self.model.get_env() is not None
            else None
        )
        return ModelPolicy(
            self.model, stats if stats is not None else self._obs_stats, deterministic=deterministic
        )

    # ---- persistence ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Save the model(s), the normalisation statistics and the resolved config into folder
        ``path``.

        Args:
            path: Folder to write (created if missing).

        Returns:
            The folder written.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if self.model is None:
            raise RuntimeError("nothing to save: call train() first")
        atomic_save(path / rd.MODEL_FILE, self.model.save)
        vec_normalize = (
            self.model.get_vec_normalize_env()
            if self.model.get_env() is not None
            else self._loaded_vecnorm
        )
        if vec_normalize is not None:
            files.write_vecnormalize(path / rd.VECNORM_FILE, vec_normalize)
        if not (path / rd.CONFIG_FILE).exists() or path != self.run_dir:
            self.config.to_file(path / rd.CONFIG_FILE)
        return path

    def _load_files(self, path: Path, model: str) -> None:
        """Read the model and statistics of ``path`` into this fresh trainer (see :meth:`load`):
        ``final`` (``model.zip``), ``best`` (``evaluation/best_model.zip``) or ``latest`` (newest
        readable checkpoint), each with its ``VecNormalize`` statistics. A damaged file raises
        :class:`~powerzoo.fileio.CorruptFileError` naming it; missing statistics of a run that
        normalises raise ``FileNotFoundError`` naming the file."""
        if model == "latest":
            found = rd.CheckpointStore(path).restore(
                lambda folder: (
                    self._read_vecnorm(folder / rd.VECNORM_FILE),
                    self._read_model(folder / rd.MODEL_FILE),
                )
            )
            if found is None:
                raise FileNotFoundError(f"{path} has no checkpoint")
            vec_normalize, self.model = found[1]
        else:
            folder = path if model == "final" else path / rd.EVAL_DIR
            prefix = "" if model == "final" else "best_"
            model_file = folder / (prefix + rd.MODEL_FILE)
            if not model_file.is_file():
                raise FileNotFoundError(f"{model_file} not found (model={model!r})")
            vec_normalize = self._read_vecnorm(folder / (prefix + rd.VECNORM_FILE))
            self.model = self._read_model(model_file)
        if vec_normalize is not None:
            self._loaded_vecnorm = vec_normalize
            self._obs_stats = files.obs_stats(vec_normalize)
        if (path / rd.STATE_FILE).is_file():
            self.run_dir = path

    def _read_vecnorm(self, file: Path) -> dict[str, Any] | None:
        """The ``VecNormalize`` statistics in ``file``: required when the config normalises
        (``vec_normalize``), else read if there."""
        try:
            return files.read_vecnormalize(file, self._trust_pickle)
        except FileNotFoundError:
            if self.config.vec_normalize is None:
                return None
            raise FileNotFoundError(
                f"{file} is missing: this run normalises its observations (vec_normalize in its "
                "config), and its model is meaningless without the statistics it was trained with"
            ) from None

    def _read_model(self, model_file: Path, env: Any = None) -> Any:
        """The model in ``model_file``, built from the run config (``env``: the env it trains on,
        or ``None`` for a model that only acts) with its parameters read from the zip
        (:func:`powerzoo.rl.sb3.files.read_model`); :class:`~powerzoo.fileio.CorruptFileError`
        names a damaged file."""
        cls = algorithm_class(self.algorithm)
        kwargs = {"seed": self.config.seed, **self.algorithm_kwargs(), "device": "cpu"}

        def build() -> Any:
            if env is not None:
                return files.new_model(cls, self.config.policy, kwargs, env)
            probe = self.make_eval_env(self.config.env.split)
            try:
                spaces = (probe.observation_space, probe.action_space)
            finally:
                probe.close()
            return files.new_model(cls, self.config.policy, kwargs, spaces=spaces)

        return files.read_model(
            model_file, build, lambda p: cls.load(p, env=env, device="cpu"), self._trust_pickle
        )

    def _read_checkpoint(self, folder: Path) -> tuple[dict[str, Any], Any, Any, Any]:
        """Read every file of checkpoint ``folder`` before anything of this trainer changes:
        ``(state, model, its fresh training env, RNG state)``."""
        state = read_checkpoint_state(self.config, folder)
        rng = read_rng(folder, self._trust_pickle)
        self._loaded_vecnorm = self._read_vecnorm(folder / rd.VECNORM_FILE)
        # a fresh env stream for the remaining steps (the interrupted episodes are not replayed)
        env = self._build_train_env(self.config.seed + int(state["num_timesteps"]))
        try:
            model = self._read_model(folder / rd.MODEL_FILE, env=env)
            model.num_timesteps = int(state["num_timesteps"])
            replay = folder / rd.REPLAY_FILE
            if replay.is_file() or (folder / sf.PICKLE_FORMAT[rd.REPLAY_FILE]).is_file():
                files.read_replay_buffer(replay, model, self._trust_pickle)
        except BaseException:
            env.close()
            self._loaded_vecnorm = None
            raise
        return state, model, env, rng

    def restore_checkpoint(self, run_dir: str | Path) -> SB3Trainer:
        """Position this fresh trainer at the newest readable checkpoint of ``run_dir``: model,
        statistics, replay buffer, RNG state and evaluation history; ready to :meth:`train` on.

        A damaged checkpoint is named in a warning and the next newest is used.

        Args:
            run_dir: The run folder.

        Returns:
            This trainer.
        """
        run_dir = Path(run_dir)
        found = rd.CheckpointStore(run_dir).restore(self._read_checkpoint)
        if found is None:
            raise FileNotFoundError(f"{run_dir} has no checkpoint to resume from")
        _, (state, self.model, self._train_env, rng) = found
        self.run_dir = run_dir
        set_rng_state(rng)
        self.evaluations = list(state["evaluations"])
        self._purge_step = int(state["num_timesteps"]) + 1  # hide events after the checkpoint
        self._pending_records = state.get("pending_logs")
        return self

    def close(self) -> None:
        """Close the training env and flush the logs."""
        if (
            getattr(self.model, "logger", None) is not None
        ):  # a loaded model has no logger until it trains
            flush_logger(self.model)
        if self._train_env is not None:
            self._train_env.close()
            self._train_env = None
