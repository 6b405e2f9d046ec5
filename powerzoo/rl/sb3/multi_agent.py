"""``SB3MultiAgentTrainer``: SB3 algorithms on a multi-agent task, as one shared policy or as
independent learners, with the run folder of the single-agent trainer.

Built by :func:`powerzoo.rl.Trainer` for an SB3 algorithm on a multi-agent task.
:meth:`~SB3MultiAgentTrainer.train` trains one shared policy
(:meth:`~SB3MultiAgentTrainer.train_marl_simultaneous`); :meth:`~SB3MultiAgentTrainer.train_il`
trains one model per agent, round-robin. The trained models are kept in ``shared_model`` or
``models`` and saved under ``agents/``. With evaluation configured, the trained agents are
evaluated once at the end (``evaluation/evaluation_metrics.csv``). The loops themselves are in
:mod:`powerzoo.rl.sb3.marl`.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from powerzoo.envs.make import make_env
from powerzoo.fileio import atomic_save, write_json
from powerzoo.rl import run_dir as rd
from powerzoo.rl.algorithms import algorithm_class
from powerzoo.rl.config import TrainConfig
from powerzoo.rl.result import TrainResult
from powerzoo.rl.sb3 import files
from powerzoo.rl.trainer_base import TrainerBase, holds_run_dir

__all__ = ["SB3MultiAgentTrainer", "SHARED_MODEL_FILE"]

SHARED_MODEL_FILE = "shared.zip"
IL_ROUNDS = 4
"""Rounds of :meth:`SB3MultiAgentTrainer.train_il` when not given."""


class SB3MultiAgentTrainer(TrainerBase):
    """Train, evaluate, save and load SB3 agents on a multi-agent task.

    Args:
        config: a validated run config naming an SB3 algorithm and a multi-agent task.
    """

    RESUMABLE = False  # only the final models are kept: no checkpoint to resume from

    def __init__(self, config: TrainConfig) -> None:
        super().__init__(config)
        if not self.is_multi_agent:
            raise ValueError(
                f"SB3MultiAgentTrainer is for multi-agent tasks; {self.task} is single-agent: "
                "build its trainer with powerzoo.rl.Trainer"
            )
        self.models: dict[str, Any] | None = None  # independent learners: one model per agent
        self.shared_model: Any = None  # one shared policy
        self._trained_steps = 0

    @property
    def num_timesteps(self) -> int:
        """Agent-steps trained by the last call of a training loop."""
        return self._trained_steps

    def algorithm_kwargs(self) -> dict[str, Any]:
        """SB3 constructor arguments: the config's, with the task's discount factor by default.

        Returns:
            Keyword arguments by name.
        """
        # a deep copy: SB3 writes into the dicts it is given (A2C puts its optimizer class into
        # policy_kwargs), and the config's must stay as written
        return {**copy.deepcopy(self.config.algorithm_kwargs), "gamma": self.gamma}

    def train(
        self, stop_conditions: Sequence[Any] | None = None, steps_per_eval: int | None = None
    ) -> TrainResult:
        """Train one shared policy (:meth:`train_marl_simultaneous`) for the config's budget.

        The loop runs to its budget or until a stop condition is met (the config's and
        ``stop_conditions``: a step limit, counted in env steps, or a track's clock; there are no
        evaluations before the end, so a condition on evaluation returns never fires), and
        evaluates once at the end.

        Args:
            stop_conditions: Conditions besides the config's
                (:mod:`powerzoo.rl.conditions` objects or their dicts).
            steps_per_eval: Refused (``ValueError``) unless ``None``: this loop evaluates only
                at the end.

        Returns:
            The run's result.
        """
        if steps_per_eval is not None:
            raise ValueError(
                f"steps_per_eval: {self.algorithm} on a multi-agent task evaluates once, at the "
                "end; use MAPPO or IPPO to evaluate during training"
            )
        return self.train_marl_simultaneous(stop_conditions=stop_conditions)

    def restore_checkpoint(self, run_dir: str | Path) -> SB3MultiAgentTrainer:
        """Refused: SB3 multi-agent runs keep only their final models, no checkpoints.

        Args:
            run_dir: The run folder.

        Returns:
            Never returns; raises ``ValueError``.
        """
        raise ValueError(
            f"{run_dir} is an SB3 multi-agent run: it keeps only its final models "
            f"({rd.AGENTS_DIR}/), no checkpoints to resume from; train it again or use MAPPO"
        )

    def get_env(self) -> Any:
        """Refused: the multi-agent loops build their own envs (one per agent, or a batched one).

        Returns:
            Never returns; raises ``ValueError``.
        """
        raise ValueError(
            f"get_env is for single-agent tasks; {self.task} is multi-agent: the training loops "
            "(train_il(), train_marl_simultaneous()) build their envs; make_eval_env(split) gives "
            "an evaluation env"
        )

    def make_eval_env(self, split: str, objective: bool = False) -> Any:
        """The dict env (``framework="auto"``) on ``split`` with the training env's
        ``normalize``, ``obs_mode`` and ``task_kwargs``; returns are always the task's own.

        Args:
            split: Date split of the evaluation episodes.
            objective: Drop a ``reward=`` override (returns are the task's own, $ per episode).

        Returns:
            The evaluation env.
        """
        return self._multi_agent_eval_env(split)

    def policy(self, deterministic: bool = True) -> Any:
        """The trained agents behind the benchmark policy interface (``act(obs, info)``).

        Args:
            deterministic: Act with the policy's mode instead of sampling.

        Returns:
            A policy with ``reset()`` and ``act(obs, info)``.
        """
        self._set_torch_threads()
        return self._multi_agent_policy(deterministic)

    def save(self, path: str | Path) -> Path:
        """Save the model(s) (``agents/``) and the resolved config into folder ``path``.

        Args:
            path: Folder to write (created if missing).

        Returns:
            The folder written.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self._save_multi_agent(path)
        if not (path / rd.CONFIG_FILE).exists() or path != self.run_dir:
            self.config.to_file(path / rd.CONFIG_FILE)
        return path

    def _load_files(self, path: Path, model: str) -> None:
        """Read ``agents/`` of ``path`` (``final`` and ``best`` both: the final models)."""
        if model == "latest":
            raise FileNotFoundError(
                f"{path} is a multi-agent run: it keeps only its final models "
                f"({rd.AGENTS_DIR}/), no checkpoints; use model='final'"
            )
        self._load_multi_agent(path)
        if (path / rd.STATE_FILE).is_file():
            self.run_dir = path

    def _start_multi_agent_run(self, what: str) -> tuple[float, Any, Path]:
        """Checks, torch threads, the final-evaluation env and the run folder, in that order.

        The evaluation env is built before the folder so a bad config leaves no folder behind.
        Returns (start time, evaluation env, run folder).
        """
        self._set_torch_threads()
        started = time.perf_counter()
        self._planned_run_dir()
        eval_env = self._final_eval_env()
        run_dir = self._ensure_run_dir()
        self._write_state("running")  # until finished (or interrupted: no checkpoint to resume)
        return started, eval_env, run_dir

    def _loop_kwargs(self, run_dir: Path) -> dict[str, Any]:
        """The keywords both training loops take from the config: seed, training env, SB3
        arguments, progress bar and TensorBoard folder (``run_dir/tensorboard`` or ``None``)."""
        env, logging = self.config.env, self.config.logging
        return {
            "seed": self.config.seed,
            "split": env.split,
            "normalize": env.normalize,
            "obs_mode": env.obs_mode,
            "algo_kwargs": self.algorithm_kwargs(),
            "task_kwargs": env.task_kwargs,
            "progress": logging.progress_bar,
            "tensorboard_log": str(run_dir / rd.TENSORBOARD_DIR) if logging.tensorboard else None,
        }

    @holds_run_dir
    def train_il(
        self, rounds: int | None = None, steps_per_round: int | None = None
    ) -> TrainResult:
        """Independent learners: one SB3 model per agent, trained round-robin, the others frozen.

        The budget ``total_timesteps`` is split into ``rounds`` rounds (default 4) of
        ``steps_per_round`` steps per agent. Models are saved in the run folder. A config with
        ``stop_conditions`` is refused (``ValueError``): the rounds run to the budget.

        Args:
            rounds: Round-robin rounds (default 4).
            steps_per_round: Env steps per agent per round (default: the budget split over
                the rounds and agents).

        Returns:
            The run's result.
        """
        from powerzoo.rl.sb3.marl.loops import train_independent_learners

        if self.config.stop_conditions:  # refused rather than ignored
            raise ValueError(
                "stop_conditions: independent learners train their rounds to the budget and "
                "take none; train the shared policy (train()) or MAPPO / IPPO to stop early"
            )
        started, eval_env, run_dir = self._start_multi_agent_run("train_il")
        n_agents = len(self.spec.agents)
        rounds = rounds or IL_ROUNDS
        steps_per_round = steps_per_round or max(
            1, self.config.budget_timesteps() // (rounds * n_agents)
        )
        self.models = train_independent_learners(
            self.task,
            self.algorithm,
            rounds=rounds,
            steps_per_round=steps_per_round,
            **self._loop_kwargs(run_dir),
        )
        self.shared_model = None
        self.agents_per_step = 1  # each agent's view steps an env of its own
        # what the agents learnt (a learn call runs whole rollouts), not what was asked
        steps = sum(int(model.num_timesteps) for model in self.models.values())
        return self._finish_multi_agent(run_dir, steps, started, eval_env)

    @holds_run_dir
    def train_marl_simultaneous(
        self, total_timesteps: int | None = None, stop_conditions: Sequence[Any] | None = None
    ) -> TrainResult:
        """All agents learn at once: one shared SB3 policy (one-hot agent id in the observation).

        ``total_timesteps`` counts agent-steps (default: the config's budget); ``n_envs`` copies of
        the task are stepped in one batched call.

        Args:
            total_timesteps: Budget in agent-steps (default: the config's).
            stop_conditions: Conditions besides the config's (a step limit counts env steps).

        Returns:
            The run's result.
        """
        from powerzoo.rl.conditions import condition_from_dict
        from powerzoo.rl.sb3.callbacks import StopConditionCallback
        from powerzoo.rl.sb3.marl.loops import train_shared_policy
        from powerzoo.rl.tracks import on_a_clock

        extra = [
            condition_from_dict(c) if isinstance(c, dict) else c for c in stop_conditions or []
        ]
        started, eval_env, run_dir = self._start_multi_agent_run("train_marl_simultaneous")
        budget = total_timesteps or self.config.budget_timesteps()
        # the stop conditions (a track's clock among them) end learn early; there are no
        # evaluations during training, so a condition on evaluation returns never fires
        stop_cb = StopConditionCallback(
            self.config.stop_condition_objects() + extra,
            lambda: [],
            agents_per_step=len(self.spec.agents),
        )
        self.shared_model = train_shared_policy(
            self.task,
            self.algorithm,
            total_timesteps=budget,
            n_envs=self.config.n_envs,
            callback=stop_cb,
            budget_is_cap=on_a_clock(self.config.stop_conditions),
            **self._loop_kwargs(run_dir),
        )
        self.models = None
        self.agents_per_step = len(self.spec.agents)  # one sample per agent and env step
        # what the policy learnt: SB3 runs whole rollouts, past an unstopped budget
        steps = int(self.shared_model.num_timesteps)
        return self._finish_multi_agent(run_dir, steps, started, eval_env, stop_cb.stop_reason)

    def _final_eval_env(self) -> Any:
        """The evaluation env of :meth:`_evaluate_at_end` (``None`` without evaluation), built
        before the run folder; ``evaluation.at_start: true`` is refused (one evaluation only)."""
        ev = self.config.evaluation
        if ev is not None and ev.at_start:
            raise ValueError(
                f"evaluation.at_start: {self.algorithm} on a multi-agent task evaluates once, at "
                "the end (its best model is the final one); use MAPPO or IPPO to evaluate during "
                "training"
            )
        return None if ev is None else self._multi_agent_eval_env(ev.split)

    def _evaluate_at_end(self, run_dir: Path, steps: int, eval_env: Any) -> list[dict[str, Any]]:
        """Evaluate the trained agents once (``evaluation.episodes`` days of ``evaluation.split``).

        Multi-agent training has no periodic evaluation; this writes the same
        ``evaluation/evaluation_metrics.csv`` (one row) and ``best_model.json`` as a single-agent
        run. The best model is the final one (``agents/``).
        """
        from powerzoo.benchmarks.baselines import select_days
        from powerzoo.benchmarks.evaluation import evaluate_days
        from powerzoo.envs.introspect import task_of
        from powerzoo.rl.evaluation_log import evaluation_row, write_evaluation_csv

        ev = self.config.evaluation
        days = select_days(task_of(eval_env).n_days, ev.episodes)
        started = time.perf_counter()
        summary = evaluate_days(
            self._multi_agent_policy(ev.deterministic), eval_env, days, seed=self.config.seed
        )
        row = {**evaluation_row(summary, steps, time.perf_counter() - started), "new_best": True}
        write_evaluation_csv(run_dir / rd.EVAL_DIR, [row])
        write_json(
            run_dir / rd.EVAL_DIR / "best_model.json",
            {
                "timestep": steps,
                "mean_return": row["mean_return"],
                "day_ids": days,
                "seed": self.config.seed,
                "deterministic": ev.deterministic,
                "model": f"{rd.AGENTS_DIR}/ (the final models)",
            },
        )
        return [row]

    def _finish_multi_agent(
        self,
        run_dir: Path,
        steps: int,
        started: float,
        eval_env: Any,
        stop_reason: str | None = None,
    ) -> TrainResult:
        self._trained_steps = steps
        self.save(run_dir)
        self.evaluations = (
            [] if eval_env is None else self._evaluate_at_end(run_dir, steps, eval_env)
        )
        status = "stopped" if stop_reason else "finished"
        self._write_state(status, stop_reason)
        return self._result(status, stop_reason, started)

    def _multi_agent_eval_env(self, split: str) -> Any:
        """The dict env (``framework="auto"``) on ``split`` with the training env's normalize /
        obs_mode / task_kwargs."""
        env = self.config.env
        return make_env(
            self.task,
            split,
            framework="auto",
            normalize=env.normalize,
            obs_mode=env.obs_mode,
            **env.task_kwargs,
        )

    def _multi_agent_policy(self, deterministic: bool) -> Any:
        from powerzoo.benchmarks.policies import SB3Policy
        from powerzoo.rl.sb3.policy import SharedPolicy

        if self.shared_model is not None:
            return SharedPolicy(
                self.shared_model, list(self.spec.agents), deterministic=deterministic
            )
        if self.models is not None:
            return SB3Policy(self.models, deterministic=deterministic)
        raise RuntimeError(
            "no models yet: call train_il(), train_marl_simultaneous() or Trainer.load(...) first"
        )

    def _save_multi_agent(self, path: Path) -> None:
        """Write ``path/agents/``: ``shared.zip`` or one ``<agent>.zip`` per agent."""
        folder = path / rd.AGENTS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        if self.shared_model is not None:
            atomic_save(folder / SHARED_MODEL_FILE, self.shared_model.save)
        elif self.models is not None:
            for agent, m in self.models.items():
                atomic_save(folder / f"{agent}.zip", m.save)
        else:
            raise RuntimeError(
                "nothing to save: call train_il() or train_marl_simultaneous() first"
            )

    def _load_multi_agent(self, path: Path) -> None:
        """Read what :meth:`_save_multi_agent` wrote into ``shared_model`` or ``models``.

        Each model is built from the run config on the spaces of the training env (the shared
        policy's or each agent's view) and only its parameters are read from the zip
        (:func:`powerzoo.rl.sb3.files.read_model`); with ``trust_pickle``, SB3's ``load``."""
        cls = algorithm_class(self.algorithm)
        folder = path / rd.AGENTS_DIR
        kwargs = {"seed": self.config.seed, **self.algorithm_kwargs(), "device": "cpu"}

        def read(file: Path, spaces: Any) -> Any:  # a damaged zip raises CorruptFileError
            return files.read_model(
                file,
                lambda: files.new_model(cls, "MlpPolicy", kwargs, spaces=spaces()),
                lambda p: cls.load(p, device="cpu"),
                self._trust_pickle,
            )

        if (folder / SHARED_MODEL_FILE).is_file():
            self.shared_model = read(folder / SHARED_MODEL_FILE, self._shared_spaces)
        else:
            missing = [a for a in self.spec.agents if not (folder / f"{a}.zip").is_file()]
            if missing:
                raise FileNotFoundError(f"{folder} lacks models for agent(s) {missing}")
            spaces: dict[str, Any] = {}  # built once, on first use

            def agent_spaces(agent: str) -> Any:
                spaces.update(spaces or self._agent_spaces())
                return spaces[agent]

            self.models = {
                a: read(folder / f"{a}.zip", lambda a=a: agent_spaces(a)) for a in self.spec.agents
            }

    def _shared_spaces(self) -> tuple[Any, Any]:
        """Observation and action spaces of the shared policy (one-hot agent id appended)."""
        from powerzoo.rl.sb3.marl.adapters import AgentsAsVecEnv

        env = self.config.env
        native = make_env(
            self.task,
            env.split,
            normalize=env.normalize,
            obs_mode=env.obs_mode,
            num_envs=1,
            **env.task_kwargs,
        )
        vec = AgentsAsVecEnv(native)
        return vec.observation_space, vec.action_space

    def _agent_spaces(self) -> dict[str, tuple[Any, Any]]:
        """Observation and action spaces of each independent learner."""
        env = self.config.env
        pz = make_env(
            self.task,
            env.split,
            framework="pettingzoo",
            normalize=env.normalize,
            obs_mode=env.obs_mode,
            **env.task_kwargs,
        )
        return {a: (pz.observation_space(a), pz.action_space(a)) for a in self.spec.agents}
