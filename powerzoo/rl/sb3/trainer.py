"""``Trainer``: a thin Stable-Baselines3 layer that turns a task (or a run config) into a run folder.

::

    from powerzoo.rl import Trainer

    trainer = Trainer("battery_arbitrage", algorithm="PPO", total_timesteps=100_000, seed=0)
    result = trainer.train()                       # run folder, evaluations, checkpoints
    trainer.evaluate(split="test")                 # mean/std return, costs, normalised score
    trainer.save("my_model")                       # model + normalisation statistics + config
    Trainer.load("my_model").evaluate()            # new trainer (trainer.load(path) loads into this one)
    Trainer.resume("runs/PPO-battery_arbitrage-seed0-20261121-101500")   # after a crash

Single-agent tasks train one SB3 model on ``n_envs`` rows of the native batched env
(:class:`~powerzoo.rl.sb3.native_vec_env.NativeVecEnv`, one numpy call per step; ``vec_env: dummy |
subproc`` for SB3's own) wrapped in ``VecNormalize`` (unless the config turns it off). Multi-agent tasks train with
:meth:`Trainer.train_il` (independent learners) or :meth:`Trainer.train_marl_simultaneous` (one
shared policy); :meth:`Trainer.train` picks the latter (:mod:`powerzoo.rl.sb3.multi_agent`).
``algorithm="MAPPO" | "IPPO" | "MAPPO-L" | "IPPO-L"`` returns a
:class:`~powerzoo.rl.mappo.trainer.MAPPOTrainer` instead (native multi-agent PPO, same run folder).
The run folder layout is documented in :mod:`powerzoo.rl.run_dir`, checkpoints in
:mod:`powerzoo.rl.checkpoint`, the config file format in :mod:`powerzoo.rl.config`.
"""

from __future__ import annotations

import functools
import pickle
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.baselines import score_or_none, select_days
from powerzoo.envs.introspect import task_of
from powerzoo.envs.make import make_env
from powerzoo.fileio import atomic_save, read_json, write_json
from powerzoo.rl import run_dir as rd
from powerzoo.rl.algorithms import ON_POLICY, algorithm_class, default_gamma, is_native_marl
from powerzoo.rl.checkpoint import STATE_JSON, set_rng_state, write_checkpoint

# config.py imports this module back inside TrainConfig.build() (which returns a Trainer): the
# one import cycle kept inside rl/ (issue 12).
from powerzoo.rl.config import EvaluationConfig, TrainConfig, resolve_config
from powerzoo.rl.sb3.multi_agent import MultiAgentRuns
from powerzoo.rl.sb3.policy import frozen_obs_stats
from powerzoo.rl.result import TrainResult
from powerzoo.rl.sb3.logger import flush_logger, run_logger
from powerzoo.rl.trainer_dispatch import (
    class_or_instance_method,
    native_from_checkpoint,
    native_load,
    native_resume,
    native_trainer,
)
from powerzoo.tasks.registry import make_task, task_spec

__all__ = ["Trainer", "TrainResult", "MODEL_CHOICES"]

MODEL_CHOICES = ("final", "best", "latest")


def _make_single_env(task: str, env_options: dict[str, Any], split: str) -> Any:
    """A Monitor-ready single env (module-level so that subprocess workers can pickle it)."""
    options = dict(env_options)
    task_kwargs = options.pop("task_kwargs", {}) or {}
    options.pop("split", None)
    return make_env(task, split, **options, **task_kwargs)


class Trainer(MultiAgentRuns):
    """Train, evaluate, save, load and resume SB3 agents on PowerZoo tasks.

    Args:
        task_or_config: a task name, a :class:`~powerzoo.rl.config.TrainConfig`, a dict of config
            fields, or a YAML/JSON run-config path.
        algorithm: ``"PPO"``, ``"A2C"``, ``"SAC"``, ``"TD3"`` or ``"DDPG"`` (default from the config, else PPO).
        total_timesteps: training budget in env steps (default from the config, else 100,000).
        seed: seeds the model, the training envs and the evaluation (default 0).
        **kwargs: other config fields (``n_envs=8``, ``evaluation={...}``, ``output_dir=...``),
            ``make_env`` options (``normalize``, ``split``, ``reward``, ...), or SB3 arguments
            (``learning_rate=1e-3``, ``gamma=0.999``); unknown names raise ``ValueError``.
    """

    def __new__(
        cls,
        task_or_config: Any = None,
        algorithm: str | None = None,
        total_timesteps: int | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ) -> Any:
        # the native multi-agent algorithms have their own trainer (powerzoo.rl.mappo)
        if cls is Trainer and task_or_config is not None:
            config = resolve_config(
                task_or_config,
                {
                    "algorithm": algorithm,
                    "total_timesteps": total_timesteps,
                    "seed": seed,
                    **kwargs,
                },
            )
            if is_native_marl(config.algorithm):
                return native_trainer(config)
        return super().__new__(cls)

    def __init__(
        self,
        task_or_config: Any,
        algorithm: str | None = None,
        total_timesteps: int | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.config = resolve_config(
            task_or_config,
            {"algorithm": algorithm, "total_timesteps": total_timesteps, "seed": seed, **kwargs},
        )
        self.spec = task_spec(self.config.task, **self.config.env.task_kwargs)
        self.model: Any = None
        self.models: dict[str, Any] | None = None  # multi-agent: one model per agent (train_il)
        self.shared_model: Any = None  # multi-agent: one shared policy (train_marl_simultaneous)
        self.run_dir: Path | None = None
        self.evaluations: list[dict[str, Any]] = []
        self.result: TrainResult | None = None
        self._train_env: Any = None
        self._loaded_vecnormalize: Any = None
        self._obs_stats: dict[str, Any] | None = None
        self._purge_step: int | None = None
        self._planned_dir: Path | None = None

    # ---- properties ------------------------------------------------------------------------------
    @property
    def task(self) -> str:
        return self.config.task

    @property
    def algorithm(self) -> str:
        return self.config.algorithm

    @property
    def is_multi_agent(self) -> bool:
        return self.spec.agent_mode == "multi"

    @property
    def num_timesteps(self) -> int:
        """Env steps trained so far."""
        return 0 if self.model is None else int(self.model.num_timesteps)

    def algorithm_kwargs(self) -> dict[str, Any]:
        """SB3 constructor arguments: the config's, plus ``gamma=0.999`` on long-horizon tasks."""
        kwargs = dict(self.config.algorithm_kwargs)
        gamma = default_gamma(self.spec.horizon)
        if gamma is not None:
            kwargs.setdefault("gamma", gamma)
        return kwargs

    def _env_options(self, split: str | None = None) -> dict[str, Any]:
        options = self.config.env.model_dump()
        if split is not None:
            options["split"] = split
        return options

    # ---- envs -----------------------------------------------------------------------------------
    def _require_single_agent(self, what: str) -> None:
        if self.is_multi_agent:
            raise ValueError(
                f"{what} is for single-agent tasks; {self.task} is multi-agent: use train_il() or "
                "train_marl_simultaneous()"
            )

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
            gamma = self.algorithm_kwargs().get("gamma", 0.99)
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
        """The training ``VecEnv`` (built on first use; ``VecNormalize`` outermost when enabled)."""
        self._require_single_agent("get_env")
        if self._train_env is None:
            self._train_env = self._build_train_env(self.config.seed)
        return self._train_env

    def make_eval_env(self, split: str, objective: bool = False) -> Any:
        """The evaluation env on ``split``, with the training env's options and no running statistics.

        A single Gymnasium env for single-agent tasks; for multi-agent tasks the dict env
        (``framework="auto"``) with the training env's ``normalize``, ``obs_mode`` and ``task_kwargs``.
        ``objective=True`` drops a ``reward=`` override, so returns are the task's own objective
        (what the baselines table and ``normalized_score`` measure) whatever the agent trained on.
        """
        if self.is_multi_agent:
            return self._multi_agent_eval_env(split)
        options = self._env_options(split)
        if objective:
            options["reward"] = None
        return _make_single_env(self.task, options, split)

    # ---- model ----------------------------------------------------------------------------------
    def _set_torch_threads(self) -> None:
        if self.config.torch_threads is not None:
            import torch

            torch.set_num_threads(self.config.torch_threads)

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

    def _planned_run_dir(self) -> Path:
        """The run folder :meth:`_ensure_run_dir` will use; ``FileExistsError`` if a new one is taken. Writes nothing."""
        if self.run_dir is not None:
            return self.run_dir
        if self._planned_dir is None:
            cfg = self.config
            self._planned_dir = Path(cfg.output_dir) / (
                cfg.name or rd.run_name(cfg.algorithm, cfg.task, cfg.seed)
            )
        if (self._planned_dir / rd.CONFIG_FILE).exists():
            raise FileExistsError(
                f"run folder {self._planned_dir} already holds a run; resume it with "
                f"`powerzoo resume {self._planned_dir}` or choose another name"
            )
        return self._planned_dir

    def _ensure_run_dir(self) -> Path:
        """Create the run folder and its ``config.yaml`` (call it once everything that can fail was built)."""
        if self.run_dir is None:
            run_dir = self._planned_run_dir()
            run_dir.mkdir(parents=True, exist_ok=True)
            self.config.to_file(run_dir / rd.CONFIG_FILE)
            self.run_dir = run_dir
        return self.run_dir

    # ---- training -------------------------------------------------------------------------------
    def train(
        self, stop_conditions: Sequence[Any] | None = None, steps_per_eval: int | None = None
    ) -> TrainResult:
        """Train until the budget (``total_timesteps``) or a stop condition; returns a :class:`TrainResult`.

        Args:
            stop_conditions: extra conditions (see :mod:`powerzoo.rl.conditions`), added to the config's.
            steps_per_eval: evaluation period in env steps, overriding ``evaluation.freq``.

        Writes the run folder (:mod:`powerzoo.rl.run_dir`): config, TensorBoard logs, evaluation
        CSV and best model, checkpoints, final model. With evaluation configured, the agent is
        evaluated every ``evaluation.freq`` env steps and once more when training ends (unless the
        last evaluation was at that step). The envs and the model are built before the folder is
        created, so a config that cannot run leaves nothing behind. Calling it again after the
        budget is reached returns at once; a multi-agent task runs :meth:`train_marl_simultaneous`.
        """
        if self.is_multi_agent:
            return self.train_marl_simultaneous()
        from stable_baselines3.common.callbacks import CallbackList

        from powerzoo.rl.sb3 import callbacks as cb

        started = time.perf_counter()
        cfg = self.config
        planned = self._planned_run_dir()
        # everything that can fail on a bad config (envs, model, init_model) before the folder exists
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
        if remaining > 0:
            self._write_state("running")
            model.learn(remaining, callback=CallbackList(callbacks), reset_num_timesteps=False)
        if eval_cb is not None:
            eval_cb.evaluate_at_end()  # a short or stopped run still gets its CSV row and best model
            self.evaluations = eval_cb.history
        status = "stopped" if stop_cb.stop_reason else "finished"
        self._save_checkpoint(model.num_timesteps)
        self.save(run_dir)
        self._write_state(status, stop_cb.stop_reason)
        flush_logger(model)
        self.result = TrainResult(
            run_dir,
            int(model.num_timesteps),
            status,
            stop_cb.stop_reason,
            list(self.evaluations),
            time.perf_counter() - started,
        )
        return self.result

    def _write_state(self, status: str, stop_reason: str | None = None) -> None:
        write_json(
            self.run_dir / rd.STATE_FILE,
            {
                "status": status,
                "stop_reason": stop_reason,
                "num_timesteps": self.num_timesteps,
                "total_timesteps": self.config.budget_timesteps(),
                "task": self.task,
                "algorithm": self.algorithm,
                "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
            },
        )

    def _save_checkpoint(self, num_timesteps: int) -> Path | None:
        """Write ``checkpoints/step_<N>/`` atomically: model, statistics, replay buffer, RNG, counters."""
        checkpoint = self.config.checkpoint
        if checkpoint is None:
            return None
        keep_replay = checkpoint.replay_buffer and self.algorithm not in ON_POLICY
        return write_checkpoint(
            self.run_dir, checkpoint.keep, self.model, num_timesteps, self.evaluations, keep_replay
        )

    # ---- evaluation -----------------------------------------------------------------------------
    def policy(self, deterministic: bool = True) -> Any:
        """The trained agent behind the benchmark policy interface (``act(obs, info)``).

        Sets torch's thread count to the config's ``torch_threads`` (small MLPs act fastest on one).
        """
        from powerzoo.rl.sb3.policy import ModelPolicy

        self._set_torch_threads()
        if self.is_multi_agent:
            return self._multi_agent_policy(deterministic)
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

    def evaluate(
        self,
        split: str = "test",
        n_episodes: int | None = None,
        deterministic: bool = True,
        seed: int = 0,
    ) -> dict[str, Any]:
        """Evaluate the agent on ``split``: one episode per start day, without exploration noise.

        ``n_episodes=None`` runs every day of the split (the protocol of the baselines table, so
        ``normalized_score`` compares like with like); ``n_episodes=k`` runs k days spread evenly.
        Returns ``mean_return`` / ``std_return`` / ``iqm_return`` (task units, e.g. $ per episode),
        ``mean_costs`` per constraint (physical units per episode), ``violation_rate``,
        ``mean_length`` and ``normalized_score`` (0 = random, 1 = oracle; ``None`` when the
        baselines table has no entry for this task and split). Returns are the task's own
        objective: a ``reward=`` the agent trained on (a penalty) is not applied here.
        """
        from powerzoo.benchmarks.evaluation import evaluate_days

        env = self.make_eval_env(split, objective=True)
        n_days = make_task(self.task, split, **self.config.env.task_kwargs).n_days
        if n_episodes is not None and (isinstance(n_episodes, bool) or int(n_episodes) < 1):
            raise ValueError(f"n_episodes must be a positive int or None, got {n_episodes!r}")
        days = list(range(n_days)) if n_episodes is None else select_days(n_days, int(n_episodes))
        summary = evaluate_days(self.policy(deterministic), env, days, seed=seed)
        summary["split"] = split
        summary["normalized_score"] = (
            score_or_none(self.task, summary["mean_return"], split) if n_episodes is None else None
        )
        return summary

    # ---- persistence ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Save the model(s), the normalisation statistics and the resolved config into folder ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if self.is_multi_agent:
            self._save_multi_agent(path)
        else:
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

    @class_or_instance_method
    def load(cls, self: Trainer | None, path: str | Path, model: str = "final") -> Trainer:
        """Load a saved model folder or run folder: ``Trainer.load(path)`` or ``trainer.load(path)``.

        On the class it returns a new trainer. On an instance it loads into that trainer and
        returns it: the saved config, model(s), normalisation statistics and run folder replace
        the trainer's own (its task must be the saved one, else ``ValueError``). To train a saved
        model further with new settings, start a trainer with ``init_model=".../model.zip"``.

        Args:
            path: a folder written by :meth:`save` or a run folder (``config.yaml`` inside).
            model: in a run folder, ``"final"`` (``model.zip``), ``"best"``
                (``evaluation/best_model.zip``) or ``"latest"`` (newest checkpoint). A multi-agent
                run keeps only its final models (``agents/``): ``"best"`` loads them too.
        """
        path = Path(path)
        if model not in MODEL_CHOICES:
            raise ValueError(f"model must be one of {MODEL_CHOICES}, got {model!r}")
        if not (path / rd.CONFIG_FILE).is_file():
            raise FileNotFoundError(
                f"{path} has no {rd.CONFIG_FILE}: not a PowerZoo model or run folder"
            )
        config = TrainConfig.from_file(path / rd.CONFIG_FILE)
        if is_native_marl(config.algorithm):
            return native_load(self, path, config, model)
        if self is not None and config.task != self.task:
            raise ValueError(
                f"{path} holds a {config.task} model but this trainer is for {self.task}; "
                f"use Trainer.load({str(path)!r}) for a new trainer"
            )
        trainer = cls(config)
        trainer._load_files(path, model)
        if self is None:
            return trainer
        self.close()  # the instance drops its own model, envs and run folder for the loaded ones
        vars(self).update(vars(trainer))
        return self

    def _load_files(self, path: Path, model: str) -> None:
        """Read the model(s) and statistics of ``path`` into this fresh trainer (see :meth:`load`)."""
        if self.is_multi_agent:
            if model == "latest":
                raise FileNotFoundError(
                    f"{path} is a multi-agent run: it keeps only its final models "
                    f"({rd.AGENTS_DIR}/), no checkpoints; use model='final'"
                )
            self._load_multi_agent(path)
            return
        model_file, vecnorm_file = {
            "final": (path / rd.MODEL_FILE, path / rd.VECNORM_FILE),
            "best": (
                path / rd.EVAL_DIR / "best_model.zip",
                path / rd.EVAL_DIR / "best_vecnormalize.pkl",
            ),
            "latest": (None, None),
        }[model]
        if model == "latest":
            folder = rd.CheckpointStore(path).latest()
            if folder is None:
                raise FileNotFoundError(f"{path} has no checkpoint")
            model_file, vecnorm_file = folder / rd.MODEL_FILE, folder / rd.VECNORM_FILE
        if not model_file.is_file():
            raise FileNotFoundError(f"{model_file} not found (model={model!r})")
        self.model = algorithm_class(self.algorithm).load(model_file, device="cpu")
        if vecnorm_file.is_file():
            self._loaded_vecnormalize = pickle.loads(vecnorm_file.read_bytes())
            self._obs_stats = frozen_obs_stats(self._loaded_vecnormalize)
        if (path / rd.STATE_FILE).is_file():
            self.run_dir = path

    @classmethod
    def from_checkpoint(cls, run_dir: str | Path) -> Trainer:
        """A trainer positioned at the newest checkpoint of ``run_dir``, ready to :meth:`train` on."""
        run_dir = Path(run_dir)
        if not (run_dir / rd.CONFIG_FILE).is_file():
            raise FileNotFoundError(f"{run_dir} is not a run folder (no {rd.CONFIG_FILE})")
        config = TrainConfig.from_file(run_dir / rd.CONFIG_FILE)
        if is_native_marl(config.algorithm):
            return native_from_checkpoint(run_dir, config)
        trainer = cls(config)
        trainer._require_single_agent("resume")
        folder = rd.CheckpointStore(run_dir).latest()
        if folder is None:
            raise FileNotFoundError(f"{run_dir} has no checkpoint to resume from")
        state = read_json(folder / STATE_JSON)
        steps = int(state["num_timesteps"])
        trainer.run_dir = run_dir
        if (folder / rd.VECNORM_FILE).is_file():
            trainer._loaded_vecnormalize = pickle.loads((folder / rd.VECNORM_FILE).read_bytes())
        # a fresh env stream for the remaining steps (the interrupted episodes are not replayed)
        trainer._train_env = trainer._build_train_env(trainer.config.seed + steps)
        trainer.model = algorithm_class(trainer.algorithm).load(
            folder / rd.MODEL_FILE, env=trainer._train_env, device="cpu"
        )
        if (folder / rd.REPLAY_FILE).is_file():
            trainer.model.load_replay_buffer(folder / rd.REPLAY_FILE)
        set_rng_state(pickle.loads((folder / rd.RNG_FILE).read_bytes()))
        trainer.evaluations = list(state["evaluations"])
        trainer._purge_step = steps + 1  # hide TensorBoard events logged after the checkpoint
        return trainer

    @classmethod
    def resume(cls, run_dir: str | Path, stop_conditions: Sequence[Any] | None = None) -> Trainer:
        """Continue the run in ``run_dir`` from its newest checkpoint up to its budget.

        Model, normalisation statistics, replay buffer, step counter, RNG state, evaluation
        history and the TensorBoard run continue; a run that already finished or was stopped by a
        stop condition is returned as is. The result is in ``trainer.result``.
        """
        run_dir = Path(run_dir)
        state_file = run_dir / rd.STATE_FILE
        native = native_resume(run_dir, TrainConfig, stop_conditions)
        if native is not None:
            return native
        trainer = cls.from_checkpoint(run_dir)
        status = read_json(state_file).get("status") if state_file.is_file() else None
        if status == "stopped":
            return trainer
        trainer.train(stop_conditions=stop_conditions)
        return trainer

    def close(self) -> None:
        """Close the training env and flush the logs."""
        if (
            getattr(self.model, "logger", None) is not None
        ):  # a loaded model has no logger until it trains
            flush_logger(self.model)
        if self._train_env is not None:
            self._train_env.close()
            self._train_env = None
