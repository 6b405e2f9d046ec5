"""``SB3Trainer``: a thin Stable-Baselines3 layer that turns a single-agent task into a run folder.

Built by :func:`powerzoo.rl.Trainer` for an SB3 algorithm on a single-agent task. It trains one
SB3 model on ``n_envs`` rows of the native batched env
(:class:`~powerzoo.rl.sb3.native_vec_env.NativeVecEnv`, one numpy call per step; ``vec_env: dummy
| subproc`` for SB3's own) wrapped in ``VecNormalize`` (unless the config turns it off). The run
folder layout is documented in :mod:`powerzoo.rl.run_dir`, checkpoints in
:mod:`powerzoo.rl.checkpoint`, the config file format in :mod:`powerzoo.rl.config`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.baselines import select_days
from powerzoo.envs.introspect import task_of
from powerzoo.envs.make import make_env
from powerzoo.fileio import atomic_save, read_or_corrupt
from powerzoo.rl import run_dir as rd
from powerzoo.rl.algorithms import ON_POLICY, algorithm_class
from powerzoo.rl.budget import sb3_rollout, warn_rounded_budget
from powerzoo.rl.checkpoint import read_checkpoint_state, set_rng_state, write_checkpoint
from powerzoo.rl.config import EvaluationConfig, TrainConfig
from powerzoo.rl.result import TrainResult
from powerzoo.rl.sb3.logger import flush_logger, run_logger
from powerzoo.rl.sb3.policy import frozen_obs_stats
from powerzoo.rl.trainer_base import TrainerBase

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
        self._loaded_vecnormalize: Any = None
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
        return {**self.config.algorithm_kwargs, "gamma": self.gamma}

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
        if self._loaded_vecnormalize is not None:
            self._loaded_vecnormalize.set_venv(venv)
            self._loaded_vecnormalize.training = True
            return self._loaded_vecnormalize
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
            if self.config.init_model:
                self.model = cls.load(
                    self.config.init_model,
                    env=env,
                    seed=self.config.seed,
                    **self.algorithm_kwargs(),
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

    # ---- training -------------------------------------------------------------------------------
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
        budget is reached returns at once.

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
        callbacks += [stop_cb, cb.TqdmProgressCallback(budget, cfg.logging.progress_bar)]
        remaining = budget - model.num_timesteps
        rollout = sb3_rollout(model)
        if rollout is not None:
            warn_rounded_budget(self.algorithm, budget, model.num_timesteps, *rollout)
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
        keep_replay = checkpoint.replay_buffer and self.algorithm not in ON_POLICY
        folder = write_checkpoint(
            self.run_dir,
            checkpoint.keep,
            self.model,
            num_timesteps,
            self.evaluations,
            keep_replay,
            self._config_record(),
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
            else self._loaded_vecnormalize
        )
        if vec_normalize is not None:
            atomic_save(path / rd.VECNORM_FILE, lambda p: vec_normalize.save(str(p)))
        if not (path / rd.CONFIG_FILE).exists() or path != self.run_dir:
            self.config.to_file(path / rd.CONFIG_FILE)
        return path

    def _load_files(self, path: Path, model: str) -> None:
        """Read the model and statistics of ``path`` into this fresh trainer (see :meth:`load`):
        ``final`` (``model.zip``), ``best`` (``evaluation/best_model.zip``) or ``latest`` (newest
        readable checkpoint), each with its ``VecNormalize`` statistics. A damaged file raises
        :class:`~powerzoo.fileio.CorruptFileError` naming it."""
        if model == "latest":
            found = rd.CheckpointStore(path).restore(
                lambda folder: self._read_model(folder / rd.MODEL_FILE, folder / rd.VECNORM_FILE)
            )
            if found is None:
                raise FileNotFoundError(f"{path} has no checkpoint")
            self.model, vec_normalize = found[1]
        else:
            folder = path if model == "final" else path / rd.EVAL_DIR
            prefix = "" if model == "final" else "best_"
            model_file = folder / (prefix + rd.MODEL_FILE)
            if not model_file.is_file():
                raise FileNotFoundError(f"{model_file} not found (model={model!r})")
            self.model, vec_normalize = self._read_model(
                model_file, folder / (prefix + rd.VECNORM_FILE)
            )
        if vec_normalize is not None:
            self._loaded_vecnormalize = vec_normalize
            self._obs_stats = frozen_obs_stats(vec_normalize)
        if (path / rd.STATE_FILE).is_file():
            self.run_dir = path

    def _read_model(
        self, model_file: Path, vecnorm_file: Path | None = None, env: Any = None
    ) -> tuple[Any, Any]:
        """``(model, VecNormalize or None)`` read from the two files (the statistics are
        optional); :class:`~powerzoo.fileio.CorruptFileError` names a damaged one."""
        vec_normalize = (
            rd.read_pickle(vecnorm_file)
            if vecnorm_file is not None and vecnorm_file.is_file()
            else None
        )
        cls = algorithm_class(self.algorithm)
        rd.check_zip(model_file)
        loaded = read_or_corrupt(model_file, lambda p: cls.load(p, env=env, device="cpu"))
        return loaded, vec_normalize

    def _read_checkpoint(self, folder: Path) -> tuple[dict[str, Any], Any, Any, Any]:
        """Read every file of checkpoint ``folder`` before anything of this trainer changes:
        ``(state, model, its fresh training env, RNG state)``."""
        state = read_checkpoint_state(self.config, folder)
        rng = rd.read_pickle(folder / rd.RNG_FILE)
        vecnorm_file = folder / rd.VECNORM_FILE
        self._loaded_vecnormalize = rd.read_pickle(vecnorm_file) if vecnorm_file.is_file() else None
        # a fresh env stream for the remaining steps (the interrupted episodes are not replayed)
        env = self._build_train_env(self.config.seed + int(state["num_timesteps"]))
        try:
            model, _ = self._read_model(folder / rd.MODEL_FILE, env=env)
            if (folder / rd.REPLAY_FILE).is_file():
                read_or_corrupt(folder / rd.REPLAY_FILE, model.load_replay_buffer)
        except BaseException:
            env.close()
            self._loaded_vecnormalize = None
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
