"""``Trainer``: a thin Stable-Baselines3 layer that turns a task (or a run config) into a run folder.

::

    from powerzoo.rl import Trainer

    trainer = Trainer("battery_arbitrage", algorithm="PPO", total_timesteps=100_000, seed=0)
    result = trainer.train()                       # run folder, evaluations, checkpoints
    trainer.evaluate(split="test")                 # mean/std return, costs, normalised score
    trainer.save("my_model")                       # model + normalisation statistics + config
    Trainer.load("my_model").evaluate()
    Trainer.resume("runs/PPO-battery_arbitrage-seed0-20261121-101500")   # after a crash

Single-agent tasks train one SB3 model on ``n_envs`` copies of ``make_env(task, ...)`` wrapped
in SB3's ``VecNormalize`` (unless the config turns it off). Multi-agent tasks train with
:meth:`Trainer.train_il` (independent learners) or :meth:`Trainer.train_marl_simultaneous` (one
shared policy); :meth:`Trainer.train` picks the latter. The run folder layout is documented in
:mod:`powerzoo.rl.run_dir`, the config file format in :mod:`powerzoo.rl.config`.
"""

from __future__ import annotations

import dataclasses
import functools
import pickle
import random
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.rl import run_dir as rd
from powerzoo.rl.algorithms import ON_POLICY, algorithm_class, default_gamma
from powerzoo.rl.config import EnvConfig, TrainConfig
from powerzoo.tasks.registry import make_task, task_spec

__all__ = ["Trainer", "TrainResult", "MODEL_CHOICES"]

MODEL_CHOICES = ("final", "best", "latest")
_DEFAULT_BUDGET = 100_000


@dataclasses.dataclass
class TrainResult:
    """Outcome of :meth:`Trainer.train`: where, how far, why it stopped, the evaluations."""

    run_dir: Path
    num_timesteps: int
    status: str  # "finished" (budget reached) or "stopped" (a stop condition)
    stop_reason: str | None
    evaluations: list[dict[str, Any]]
    wall_seconds: float

    @property
    def best_mean_return(self) -> float | None:
        """Best evaluation mean return ($ or the task's return unit), ``None`` without evaluations."""
        return max((r["mean_return"] for r in self.evaluations), default=None)


def _make_single_env(task: str, env_options: dict[str, Any], split: str) -> Any:
    """A Monitor-ready single env (module-level so that subprocess workers can pickle it)."""
    from powerzoo.envs.make import make_env

    options = dict(env_options)
    task_kwargs = options.pop("task_kwargs", {}) or {}
    options.pop("split", None)
    return make_env(task, split, **options, **task_kwargs)


def _resolve_config(task_or_config: Any, overrides: dict[str, Any]) -> TrainConfig:
    """A validated :class:`TrainConfig` from a task name / dict / file / config plus keyword overrides.

    Keywords that are config fields set them, ``make_env`` options (``split``, ``normalize``, ...)
    go to ``env``, anything else goes to ``algorithm_kwargs`` (and must be an SB3 argument).
    """
    if isinstance(task_or_config, TrainConfig):
        data, source = task_or_config.to_dict(), task_or_config._source
    elif isinstance(task_or_config, Mapping):
        data, source = dict(task_or_config), None
    elif isinstance(task_or_config, (str, Path)) and Path(task_or_config).suffix.lower() in (".yaml", ".yml", ".json"):
        loaded = TrainConfig.from_file(task_or_config)
        data, source = loaded.to_dict(), str(task_or_config)
    elif isinstance(task_or_config, str):
        data, source = {"task": task_or_config}, None
    else:
        raise TypeError(f"Trainer needs a task name, a TrainConfig, a dict or a config file path, got {task_or_config!r}")
    env_fields = set(EnvConfig.model_fields)
    for key, value in overrides.items():
        if value is None and key in ("algorithm", "total_timesteps", "seed"):
            continue
        if key in TrainConfig.model_fields:
            data[key] = value
        elif key in env_fields:
            data["env"] = {**(data.get("env") or {}), key: value}
        else:
            data["algorithm_kwargs"] = {**(data.get("algorithm_kwargs") or {}), key: value}
    if data.get("total_timesteps") is None and data.get("episodes") is None:
        data["total_timesteps"] = _DEFAULT_BUDGET
    if "total_timesteps" in overrides and overrides["total_timesteps"] is not None:
        data["episodes"] = None
    return TrainConfig.from_dict(data, source=source)


class Trainer:
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

    def __init__(self, task_or_config: Any, algorithm: str | None = None, total_timesteps: int | None = None,
                 seed: int | None = None, **kwargs: Any) -> None:
        self.config = _resolve_config(task_or_config, {"algorithm": algorithm, "total_timesteps": total_timesteps,
                                                       "seed": seed, **kwargs})
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
            raise ValueError(f"{what} is for single-agent tasks; {self.task} is multi-agent: use train_il() or "
                             "train_marl_simultaneous()")

    def _build_train_env(self, seed: int) -> Any:
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

        cfg = self.config
        factory = functools.partial(_make_single_env, cfg.task, self._env_options(), cfg.env.split)
        vec_cls = SubprocVecEnv if cfg.vec_env == "subproc" else DummyVecEnv
        venv = make_vec_env(factory, n_envs=cfg.n_envs, seed=seed, vec_env_cls=vec_cls)
        if self._loaded_vecnormalize is not None:
            self._loaded_vecnormalize.set_venv(venv)
            self._loaded_vecnormalize.training = True
            return self._loaded_vecnormalize
        if cfg.vec_normalize is not None:
            v = cfg.vec_normalize
            gamma = self.algorithm_kwargs().get("gamma", 0.99)
            venv = VecNormalize(venv, norm_obs=v.norm_obs, norm_reward=v.norm_reward, clip_obs=v.clip_obs,
                                clip_reward=v.clip_reward, gamma=gamma)
        return venv

    def get_env(self) -> Any:
        """The training ``VecEnv`` (built on first use; ``VecNormalize`` outermost when enabled)."""
        self._require_single_agent("get_env")
        if self._train_env is None:
            self._train_env = self._build_train_env(self.config.seed)
        return self._train_env

    def make_eval_env(self, split: str) -> Any:
        """A single env on ``split`` with the training env's options (no running statistics)."""
        return _make_single_env(self.task, self._env_options(split), split)

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
                self.model = cls.load(self.config.init_model, env=env, seed=self.config.seed, **self.algorithm_kwargs())
            else:
                self.model = cls(self.config.policy, env, seed=self.config.seed, verbose=self.config.logging.verbose,
                                 **self.algorithm_kwargs())
        elif self.model.get_env() is None:
            self.model.set_env(self.get_env())
        return self.model

    def _configure_logger(self) -> None:
        from stable_baselines3.common.logger import HumanOutputFormat, Logger

        formats: list[Any] = []
        if self.config.logging.verbose >= 1:
            formats.append(HumanOutputFormat(sys.stdout))
        if self.config.logging.tensorboard:
            formats.append(_tensorboard_format(self.run_dir / rd.TENSORBOARD_DIR, self._purge_step))
        self.model.set_logger(Logger(folder=str(self.run_dir / rd.TENSORBOARD_DIR), output_formats=formats))

    def _ensure_run_dir(self) -> Path:
        if self.run_dir is None:
            cfg = self.config
            name = cfg.name or rd.run_name(cfg.algorithm, cfg.task, cfg.seed)
            self.run_dir = Path(cfg.output_dir) / name
            if (self.run_dir / rd.CONFIG_FILE).exists():
                raise FileExistsError(f"run folder {self.run_dir} already holds a run; resume it with "
                                      f"`powerzoo resume {self.run_dir}` or choose another name")
            self.run_dir.mkdir(parents=True, exist_ok=True)
            cfg.to_file(self.run_dir / rd.CONFIG_FILE)
        return self.run_dir

    # ---- training -------------------------------------------------------------------------------
    def train(self, stop_conditions: Sequence[Any] | None = None, steps_per_eval: int | None = None) -> TrainResult:
        """Train until the budget (``total_timesteps``) or a stop condition; returns a :class:`TrainResult`.

        Args:
            stop_conditions: extra conditions (see :mod:`powerzoo.rl.conditions`), added to the config's.
            steps_per_eval: evaluation period in env steps, overriding ``evaluation.freq``.

        Writes the run folder (:mod:`powerzoo.rl.run_dir`): config, TensorBoard logs, evaluation
        CSV and best model, checkpoints, final model. Calling it again after the budget is
        reached returns at once; a multi-agent task runs :meth:`train_marl_simultaneous`.
        """
        if self.is_multi_agent:
            return self.train_marl_simultaneous()
        from stable_baselines3.common.callbacks import CallbackList

        from powerzoo.rl import callbacks as cb

        started = time.perf_counter()
        cfg = self.config
        run_dir = self._ensure_run_dir()
        model = self._ensure_model()
        self._configure_logger()
        budget = cfg.budget_timesteps()
        names = self.spec.constraint_names
        eval_cb = None
        callbacks: list[Any] = [cb.ConstraintCostCallback(names)]
        if cfg.evaluation is not None or steps_per_eval is not None:
            ev = cfg.evaluation or _default_evaluation()
            eval_env = self.make_eval_env(ev.split)
            days = cb.spread_days(eval_env.unwrapped.task.n_days, ev.episodes)
            eval_cb = cb.EvaluationCallback(eval_env, run_dir / rd.EVAL_DIR, steps_per_eval or ev.freq, days, names,
                                            deterministic=ev.deterministic, seed=cfg.seed, history=self.evaluations)
            callbacks.append(eval_cb)
        if cfg.checkpoint is not None:
            callbacks.append(cb.CheckpointCallback(cfg.checkpoint.freq, self._save_checkpoint))
        conditions = cfg.stop_condition_objects() + list(stop_conditions or [])
        stop_cb = cb.StopConditionCallback(
            conditions, lambda: [] if eval_cb is None else [r["mean_return"] for r in eval_cb.history]
        )
        callbacks += [stop_cb, cb.TqdmProgressCallback(budget, cfg.logging.progress_bar)]
        remaining = budget - model.num_timesteps
        if remaining > 0:
            self._write_state("running")
            model.learn(remaining, callback=CallbackList(callbacks), reset_num_timesteps=False)
        if eval_cb is not None:
            self.evaluations = eval_cb.history
        status = "stopped" if stop_cb.stop_reason else "finished"
        self._save_checkpoint(model.num_timesteps)
        self.save(run_dir)
        self._write_state(status, stop_cb.stop_reason)
        _flush_logger(model)
        self.result = TrainResult(run_dir, int(model.num_timesteps), status, stop_cb.stop_reason,
                                  list(self.evaluations), time.perf_counter() - started)
        return self.result

    def _write_state(self, status: str, stop_reason: str | None = None) -> None:
        rd.write_json(self.run_dir / rd.STATE_FILE, {
            "status": status, "stop_reason": stop_reason, "num_timesteps": self.num_timesteps,
            "total_timesteps": self.config.budget_timesteps(), "task": self.task, "algorithm": self.algorithm,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        })

    def _save_checkpoint(self, num_timesteps: int) -> Path | None:
        """Write ``checkpoints/step_<N>/`` atomically: model, statistics, replay buffer, RNG, counters."""
        if self.config.checkpoint is None:
            return None
        model = self.model
        keep_replay = self.config.checkpoint.replay_buffer and self.algorithm not in ON_POLICY

        def write(folder: Path) -> None:
            model.save(folder / rd.MODEL_FILE)
            vec_normalize = model.get_vec_normalize_env()
            if vec_normalize is not None:
                vec_normalize.save(str(folder / rd.VECNORM_FILE))
            if keep_replay:
                model.save_replay_buffer(folder / rd.REPLAY_FILE)
            (folder / rd.RNG_FILE).write_bytes(pickle.dumps(_rng_state()))
            rd.write_json(folder / "state.json", {
                "num_timesteps": int(num_timesteps),
                "evaluations": [r for r in self.evaluations if r["timestep"] <= num_timesteps],
            })

        return rd.CheckpointStore(self.run_dir, self.config.checkpoint.keep).write(int(num_timesteps), write)

    # ---- evaluation -----------------------------------------------------------------------------
    def policy(self, deterministic: bool = True) -> Any:
        """The trained agent behind the benchmark policy interface (``act(obs, info)``)."""
        from powerzoo.rl.policy import ModelPolicy, frozen_obs_stats

        if self.is_multi_agent:
            return self._multi_agent_policy(deterministic)
        if self.model is None:
            raise RuntimeError("no model yet: call train() or Trainer.load(...) first")
        stats = frozen_obs_stats(self.model.get_vec_normalize_env()) if self.model.get_env() is not None else None
        return ModelPolicy(self.model, stats if stats is not None else self._obs_stats, deterministic=deterministic)

    def evaluate(self, split: str = "test", n_episodes: int | None = None, deterministic: bool = True,
                 seed: int = 0) -> dict[str, Any]:
        """Evaluate the agent on ``split``: one episode per start day, without exploration noise.

        ``n_episodes=None`` runs every day of the split (the protocol of the baselines table, so
        ``normalized_score`` compares like with like); ``n_episodes=k`` runs k days spread evenly.
        Returns ``mean_return`` / ``std_return`` / ``iqm_return`` (task units, e.g. $ per episode),
        ``mean_costs`` per constraint (physical units per episode), ``violation_rate``,
        ``mean_length`` and ``normalized_score`` (0 = random, 1 = oracle; ``None`` when the
        baselines table has no entry for this task and split).
        """
        from powerzoo.benchmarks.evaluation import evaluate_days
        from powerzoo.rl.callbacks import spread_days

        env = self.make_eval_env(split) if not self.is_multi_agent else self._make_multi_agent_eval_env(split)
        n_days = make_task(self.task, split, **self.config.env.task_kwargs).n_days
        if n_episodes is not None and (isinstance(n_episodes, bool) or int(n_episodes) < 1):
            raise ValueError(f"n_episodes must be a positive int or None, got {n_episodes!r}")
        days = list(range(n_days)) if n_episodes is None else spread_days(n_days, int(n_episodes))
        summary = evaluate_days(env, self.policy(deterministic), days, seed=seed)
        summary["split"] = split
        summary["normalized_score"] = _normalized_score(self.task, summary["mean_return"], split) if n_episodes is None else None
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
            rd.atomic_save(path / rd.MODEL_FILE, self.model.save)
            vec_normalize = self.model.get_vec_normalize_env() if self.model.get_env() is not None else self._loaded_vecnormalize
            if vec_normalize is not None:
                rd.atomic_save(path / rd.VECNORM_FILE, lambda p: vec_normalize.save(str(p)))
        if not (path / rd.CONFIG_FILE).exists() or path != self.run_dir:
            self.config.to_file(path / rd.CONFIG_FILE)
        return path

    @classmethod
    def load(cls, path: str | Path, model: str = "final") -> Trainer:
        """Load a saved model folder or run folder.

        Args:
            path: a folder written by :meth:`save` or a run folder (``config.yaml`` inside).
            model: in a run folder, ``"final"`` (``model.zip``), ``"best"``
                (``evaluation/best_model.zip``) or ``"latest"`` (newest checkpoint).
        """
        path = Path(path)
        if model not in MODEL_CHOICES:
            raise ValueError(f"model must be one of {MODEL_CHOICES}, got {model!r}")
        if not (path / rd.CONFIG_FILE).is_file():
            raise FileNotFoundError(f"{path} has no {rd.CONFIG_FILE}: not a PowerZoo model or run folder")
        trainer = cls(TrainConfig.from_file(path / rd.CONFIG_FILE))
        if trainer.is_multi_agent:
            trainer._load_multi_agent(path)
            return trainer
        model_file, vecnorm_file = {
            "final": (path / rd.MODEL_FILE, path / rd.VECNORM_FILE),
            "best": (path / rd.EVAL_DIR / "best_model.zip", path / rd.EVAL_DIR / "best_vecnormalize.pkl"),
            "latest": (None, None),
        }[model]
        if model == "latest":
            folder = rd.CheckpointStore(path).latest()
            if folder is None:
                raise FileNotFoundError(f"{path} has no checkpoint")
            model_file, vecnorm_file = folder / rd.MODEL_FILE, folder / rd.VECNORM_FILE
        if not model_file.is_file():
            raise FileNotFoundError(f"{model_file} not found (model={model!r})")
        trainer.model = algorithm_class(trainer.algorithm).load(model_file, device="cpu")
        if vecnorm_file.is_file():
            trainer._loaded_vecnormalize = pickle.loads(vecnorm_file.read_bytes())
            trainer._obs_stats = _stats_of(trainer._loaded_vecnormalize)
        if (path / rd.STATE_FILE).is_file():
            trainer.run_dir = path
        return trainer

    @classmethod
    def from_checkpoint(cls, run_dir: str | Path) -> Trainer:
        """A trainer positioned at the newest checkpoint of ``run_dir``, ready to :meth:`train` on."""
        run_dir = Path(run_dir)
        if not (run_dir / rd.CONFIG_FILE).is_file():
            raise FileNotFoundError(f"{run_dir} is not a run folder (no {rd.CONFIG_FILE})")
        trainer = cls(TrainConfig.from_file(run_dir / rd.CONFIG_FILE))
        trainer._require_single_agent("resume")
        folder = rd.CheckpointStore(run_dir).latest()
        if folder is None:
            raise FileNotFoundError(f"{run_dir} has no checkpoint to resume from")
        state = rd.read_json(folder / "state.json")
        steps = int(state["num_timesteps"])
        trainer.run_dir = run_dir
        if (folder / rd.VECNORM_FILE).is_file():
            trainer._loaded_vecnormalize = pickle.loads((folder / rd.VECNORM_FILE).read_bytes())
        # a fresh env stream for the remaining steps (the interrupted episodes are not replayed)
        trainer._train_env = trainer._build_train_env(trainer.config.seed + steps)
        trainer.model = algorithm_class(trainer.algorithm).load(folder / rd.MODEL_FILE, env=trainer._train_env,
                                                                device="cpu")
        if (folder / rd.REPLAY_FILE).is_file():
            trainer.model.load_replay_buffer(folder / rd.REPLAY_FILE)
        _set_rng_state(pickle.loads((folder / rd.RNG_FILE).read_bytes()))
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
        trainer = cls.from_checkpoint(run_dir)
        status = rd.read_json(state_file).get("status") if state_file.is_file() else None
        if status == "stopped":
            return trainer
        trainer.train(stop_conditions=stop_conditions)
        return trainer

    # ---- multi-agent ----------------------------------------------------------------------------
    def _require_multi_agent(self, what: str) -> None:
        if not self.is_multi_agent:
            raise ValueError(f"{what} is for multi-agent tasks; {self.task} is single-agent: use train()")

    def train_il(self, rounds: int | None = None, steps_per_round: int | None = None) -> TrainResult:
        """Independent learners: one SB3 model per agent, trained round-robin, the others frozen.

        The budget ``total_timesteps`` is split into ``rounds`` rounds (default 4) of
        ``steps_per_round`` steps per agent. Models are saved in the run folder.
        """
        from powerzoo.rl.marl import train_independent_learners

        self._require_multi_agent("train_il")
        self._set_torch_threads()
        started = time.perf_counter()
        run_dir = self._ensure_run_dir()
        n_agents = len(self.spec.agents)
        rounds = rounds or 4
        steps_per_round = steps_per_round or max(1, self.config.budget_timesteps() // (rounds * n_agents))
        self.models = train_independent_learners(
            self.task, self.algorithm, rounds=rounds, steps_per_round=steps_per_round, seed=self.config.seed,
            split=self.config.env.split, normalize=self.config.env.normalize, obs_mode=self.config.env.obs_mode,
            algo_kwargs=self.algorithm_kwargs(), task_kwargs=self.config.env.task_kwargs,
            progress=_progress_enabled(self.config.logging.progress_bar),
            tensorboard_log=str(run_dir / rd.TENSORBOARD_DIR) if self.config.logging.tensorboard else None,
        )
        self.shared_model = None
        return self._finish_multi_agent(run_dir, rounds * steps_per_round * n_agents, started)

    def train_marl_simultaneous(self, total_timesteps: int | None = None) -> TrainResult:
        """All agents learn at once: one shared SB3 policy (one-hot agent id in the observation).

        ``total_timesteps`` counts agent-steps (default: the config's budget); ``n_envs`` copies of
        the task are stepped in one batched call.
        """
        from powerzoo.rl.marl import train_shared_policy

        self._require_multi_agent("train_marl_simultaneous")
        self._set_torch_threads()
        started = time.perf_counter()
        run_dir = self._ensure_run_dir()
        budget = total_timesteps or self.config.budget_timesteps()
        self.shared_model = train_shared_policy(
            self.task, self.algorithm, total_timesteps=budget, n_envs=self.config.n_envs, seed=self.config.seed,
            split=self.config.env.split, normalize=self.config.env.normalize, obs_mode=self.config.env.obs_mode,
            algo_kwargs=self.algorithm_kwargs(), task_kwargs=self.config.env.task_kwargs,
            tensorboard_log=str(run_dir / rd.TENSORBOARD_DIR) if self.config.logging.tensorboard else None,
            progress=_progress_enabled(self.config.logging.progress_bar),
        )
        self.models = None
        return self._finish_multi_agent(run_dir, budget, started)

    def _finish_multi_agent(self, run_dir: Path, steps: int, started: float) -> TrainResult:
        self.save(run_dir)
        rd.write_json(run_dir / rd.STATE_FILE, {"status": "finished", "stop_reason": None, "num_timesteps": steps,
                                                "task": self.task, "algorithm": self.algorithm})
        self.result = TrainResult(run_dir, steps, "finished", None, [], time.perf_counter() - started)
        return self.result

    def _make_multi_agent_eval_env(self, split: str) -> Any:
        from powerzoo.envs.make import make_env

        return make_env(self.task, split, framework="auto", normalize=self.config.env.normalize,
                        obs_mode=self.config.env.obs_mode, **self.config.env.task_kwargs)

    def _multi_agent_policy(self, deterministic: bool) -> Any:
        from powerzoo.benchmarks.policies import SB3Policy
        from powerzoo.rl.marl import SharedPolicy

        if self.shared_model is not None:
            return SharedPolicy(self.shared_model, list(self.spec.agents), deterministic=deterministic)
        if self.models is not None:
            return SB3Policy(self.models, deterministic=deterministic)
        raise RuntimeError("no models yet: call train_il(), train_marl_simultaneous() or Trainer.load(...) first")

    def _save_multi_agent(self, path: Path) -> None:
        folder = path / "agents"
        folder.mkdir(parents=True, exist_ok=True)
        if self.shared_model is not None:
            rd.atomic_save(folder / "shared.zip", self.shared_model.save)
        elif self.models is not None:
            for agent, m in self.models.items():
                rd.atomic_save(folder / f"{agent}.zip", m.save)
        else:
            raise RuntimeError("nothing to save: call train_il() or train_marl_simultaneous() first")

    def _load_multi_agent(self, path: Path) -> None:
        cls = algorithm_class(self.algorithm)
        folder = path / "agents"
        if (folder / "shared.zip").is_file():
            self.shared_model = cls.load(folder / "shared.zip", device="cpu")
        else:
            missing = [a for a in self.spec.agents if not (folder / f"{a}.zip").is_file()]
            if missing:
                raise FileNotFoundError(f"{folder} lacks models for agent(s) {missing}")
            self.models = {a: cls.load(folder / f"{a}.zip", device="cpu") for a in self.spec.agents}

    def close(self) -> None:
        """Close the training env and flush the logs."""
        if self.model is not None:
            _flush_logger(self.model)
        if self._train_env is not None:
            self._train_env.close()
            self._train_env = None


# ---- helpers ----------------------------------------------------------------------------------------
def _default_evaluation() -> Any:
    from powerzoo.rl.config import EvaluationConfig

    return EvaluationConfig()


def _progress_enabled(setting: bool | None) -> bool:
    return sys.stderr.isatty() if setting is None else bool(setting)


def _normalized_score(task: str, mean_return: float, split: str) -> float | None:
    try:
        from powerzoo.benchmarks.baselines import normalized_score
    except ImportError:  # pragma: no cover - the module ships with the package
        return None
    try:
        return float(normalized_score(task, mean_return, split))
    except (ValueError, KeyError, FileNotFoundError):
        return None


def _stats_of(vec_normalize: Any) -> dict[str, Any] | None:
    from powerzoo.rl.policy import frozen_obs_stats

    return frozen_obs_stats(vec_normalize)


def _tensorboard_format(folder: Path, purge_step: int | None) -> Any:
    """SB3's TensorBoard writer, created with ``purge_step`` so a resumed run hides orphaned events."""
    from stable_baselines3.common.logger import TensorBoardOutputFormat
    from torch.utils.tensorboard import SummaryWriter

    fmt = TensorBoardOutputFormat.__new__(TensorBoardOutputFormat)
    fmt.writer = SummaryWriter(log_dir=str(folder), purge_step=purge_step)
    fmt._is_closed = False
    return fmt


def _flush_logger(model: Any) -> None:
    for fmt in getattr(model.logger, "output_formats", []):
        writer = getattr(fmt, "writer", None)
        if writer is not None and callable(getattr(writer, "flush", None)):
            writer.flush()


def _rng_state() -> dict[str, Any]:
    import torch

    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def _set_rng_state(state: dict[str, Any]) -> None:
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
