"""``MAPPOTrainer``: MAPPO / IPPO (and ``-L``) runs with the run folder of the single ``Trainer``.

Built by :class:`powerzoo.rl.Trainer` when ``algorithm`` is one of ``MAPPO``, ``IPPO``,
``MAPPO-L``, ``IPPO-L``, or ``PPO-L`` on a single-agent task (trained as one agent,
:mod:`.one_agent`); it takes the resolved run config (:class:`powerzoo.rl.config.TrainConfig`)
as is. One iteration = ``n_steps`` batched steps of ``n_envs`` envs (``n_steps * n_envs`` env
steps; every agent acts in each), the multiplier step (``-L``), GAE and the PPO epochs. Budgets,
evaluation and checkpoint frequencies count env steps and are checked between iterations, so a
run ends on the first iteration boundary at or past its budget. With ``rollout_workers > 0`` in
``algorithm_kwargs`` the rollouts come from Ray actors (:mod:`.remote`): same rollouts, weights and
checkpoints as in-process collection; :meth:`MAPPOTrainer.close` stops the actors.

Run folder (as :mod:`powerzoo.rl.run_dir`, with a policy file instead of SB3 zips)::

    config.yaml, run_state.json, tensorboard/
    evaluation/evaluation_metrics.csv   one row per evaluation: return, costs, per-agent returns,
                                        multipliers (-L)
    evaluation/best_policy.npz          best evaluated policy (+ best_model.json); -L runs: the best
                                        return among evaluations within every cost budget, if any
    checkpoints/step_<N>/               learner.pt, collector.npz, rng.npz, state.json
    policy.npz, learner.pt              final policy (torch-free) and learner state (tensors only)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from powerzoo.envs.make import make_env
from powerzoo.fileio import atomic_save
from powerzoo.rl import run_dir as rd
from powerzoo.rl import safe_files as sf
from powerzoo.rl.budget import warn_rounded_budget
from powerzoo.rl.checkpoint import (
    COLLECTOR_FILE,
    LEARNER_FILE,
    read_learner_checkpoint,
    set_rng_state,
    torch_plain,
    write_learner_checkpoint,
)
from powerzoo.rl.conditions import TrainingProgress, describe_condition, first_met
from powerzoo.rl.config import TrainConfig
from powerzoo.rl.mappo import evaluation as mappo_evaluation
from powerzoo.rl.mappo.algorithm import GroupLayout, MultiAgentPPO
from powerzoo.rl.mappo.collector import Collector, EpisodeBatch
from powerzoo.rl.mappo.evaluation import BEST_POLICY_FILE, rank, read_best_policy
from powerzoo.rl.mappo.hparams import algorithm_flags, check_params
from powerzoo.rl.mappo.init_action import idle_actions, start_actors_at
from powerzoo.rl.mappo.one_agent import make_native_env
from powerzoo.rl.mappo.policy import POLICY_FILE, MAPPOPolicy
from powerzoo.rl.result import TrainResult
from powerzoo.rl.tracks import on_a_clock
from powerzoo.rl.trainer_base import TrainerBase, holds_run_dir

__all__ = ["MAPPOTrainer", "LEARNER_FILE", "BEST_POLICY_FILE", "COLLECTOR_FILE"]


class MAPPOTrainer(TrainerBase):
    """Train, evaluate, save, load and resume a native multi-agent PPO run (see the module
    docstring).

    Args:
        config: a validated run config whose ``algorithm`` is a native multi-agent one.
    """

    def __init__(self, config: TrainConfig) -> None:
        super().__init__(config)
        spec = self.spec
        self.centralised, self.lagrangian = algorithm_flags(config.algorithm)
        self.params = check_params(dict(config.algorithm_kwargs))
        self.cost_gamma = self.params.cost_gamma or self.gamma
        self.cost_names = tuple(spec.selected_constraints) if self.lagrangian else ()
        if self.lagrangian and not self.cost_names:
            raise ValueError(
                f"{config.algorithm} needs selected costs; {spec.task_id} selects none (use "
                f"{config.algorithm[:-2]})"
            )
        if self.params.rollout_workers > config.n_envs:
            raise ValueError(
                f"rollout_workers ({self.params.rollout_workers}) must be <= "
                f"n_envs ({config.n_envs}): "
                f"each worker holds a block of the n_envs envs"
            )
        self.learner: MultiAgentPPO | None = None
        self.env: Any = None
        self.collector: Collector | None = None
        self.num_timesteps, self.iterations = 0, 0
        self._writer: Any = None
        self._next_eval: int | None = None
        self._last_checkpoint = 0
        self._loaded_policy: MAPPOPolicy | None = None

    def algorithm_kwargs(self) -> dict[str, Any]:
        """The resolved hyperparameters (gamma filled in).

        Returns:
            Keyword arguments by name.
        """
        return {**self.params.to_dict(), "gamma": self.gamma, "cost_gamma": self.cost_gamma}

    # ---- envs and learner ------------------------------------------------------------------------
    def _env_kwargs(self) -> dict[str, Any]:
        env = self.config.env
        out = {"normalize": env.normalize, "obs_mode": env.obs_mode, "reward": env.reward}
        if env.forecast_horizon is not None:  # single-agent tasks only (the config checks it)
            out["forecast_horizon"] = env.forecast_horizon
        return {**out, **env.task_kwargs}

    def get_env(self) -> Any:
        """The training env with ``n_envs`` rows (built on first use): the native multi-agent
        vector env, or on a single-agent task (``PPO-L``) its vector env as one agent
        (:func:`~powerzoo.rl.mappo.one_agent.make_native_env`).

        Returns:
            The training env.
        """
        if self.env is None:
            self.env = make_native_env(
                self.task, self.config.env.split, self.config.n_envs, **self._env_kwargs()
            )
        return self.env

    def make_eval_env(self, split: str, objective: bool = False) -> Any:
        """A dict env (``framework="auto"``; the Gymnasium env of a single-agent task) on ``split``
        with the training env's options, in physical units.

        The exported policy applies the training env's normalisation itself (:mod:`.policy`), so
        it is evaluated on the env of the baselines table. ``objective=True`` drops a
        ``reward=`` override (returns are the task's own objective).

        Args:
            split: Date split of the evaluation episodes.
            objective: Drop a ``reward=`` override (returns are the task's own, $ per episode).

        Returns:
            The evaluation env.
        """
        kwargs = {**self._env_kwargs(), "normalize": False}
        if objective:
            kwargs["reward"] = None
        return make_env(self.task, split, framework="auto", **kwargs)

    def _affine_maps(self) -> tuple[Any, Any]:
        """The training env's observation / action normalisation as the exported policy needs
        them."""
        from powerzoo.envs.introspect import inspect_env

        facts = inspect_env(self.get_env())
        obs = None if facts.obs_scaler is None else (facts.obs_scaler.mid, facts.obs_scaler.half)
        if facts.action_scaler is None:
            return obs, None
        d, index = self.spec.agent_action_dim, {a: i for i, a in enumerate(self.spec.agents)}
        mid = facts.action_scaler.mid.reshape(len(index), d)
        half = facts.action_scaler.half.reshape(len(index), d)
        actions = {}
        for name, layout in self.learner.layouts.items():
            rows = [index[a] for a in layout.agents]
            actions[name] = (mid[rows], half[rows])
        return obs, actions

    def _ensure_learner(self) -> MultiAgentPPO:
        if self.learner is None:
            if self.config.torch_threads is not None:
                torch.set_num_threads(self.config.torch_threads)
            torch.manual_seed(self.config.seed)
            np.random.seed(self.config.seed)
            env = self.get_env()
            layouts = {}
            for group, agents in env.agent_groups.items():
                low = np.stack([env.single_action_space(a).low for a in agents])
                high = np.stack([env.single_action_space(a).high for a in agents])
                obs_dim = env.single_observation_space(agents[0]).shape[0]
                layouts[group] = GroupLayout(agents, obs_dim, low.shape[1], low, high)
            thresholds = [self.spec.cost_thresholds[c] for c in self.cost_names]
            self.learner = MultiAgentPPO(
                layouts,
                env.single_state_space.shape[0],
                self.params,
                self.centralised,
                self.cost_names,
                thresholds,
            )
            if self.params.init_action == "idle":
                start_actors_at(self.learner, idle_actions(self.spec, env, layouts))
        return self.learner

    def _new_collector(self) -> Any:
        """In-process :class:`Collector`, or Ray actors' (:mod:`.remote`) when
        ``rollout_workers > 0``."""
        if self.params.rollout_workers == 0:
            return Collector(self.get_env(), self._ensure_learner())
        from powerzoo.rl.mappo.remote import RemoteCollector

        return RemoteCollector(
            self._ensure_learner(),
            self.task,
            self.config.env.split,
            self._env_kwargs(),
            self.config.n_envs,
            self.params.rollout_workers,
            self.params.rollout_address,
        )

    def _write_state(self, status: str, stop_reason: str | None = None, **extra: Any) -> None:
        super()._write_state(status, stop_reason, iterations=self.iterations, **extra)

    def _log(self, scalars: dict[str, float]) -> None:
        if self._writer is not None:
            for key, value in scalars.items():
                self._writer.add_scalar(key, value, self.num_timesteps)

    # ---- training --------------------------------------------------------------------------------
    @holds_run_dir
    def train(
        self, stop_conditions: Sequence[Any] | None = None, steps_per_eval: int | None = None
    ) -> TrainResult:
        """Train until the budget (``total_timesteps`` env steps) or a stop condition; writes the
        run folder.

        With evaluation configured, the policy is evaluated every ``evaluation.freq`` env steps
        (``steps_per_eval`` overrides it) and once more at the end. Calling it again after the
        budget is reached returns at once.

        Args:
            stop_conditions: Conditions of :mod:`powerzoo.rl.conditions` that end training early.
            steps_per_eval: Env steps between evaluations (overrides ``evaluation.freq``).

        Returns:
            The run's result (run folder, steps, evaluations, why it stopped).
        """
        from powerzoo.progress import progress_bar

        started = time.perf_counter()
        cfg = self.config
        self._planned_run_dir()  # FileExistsError before anything is built
        self._ensure_learner()  # everything that can fail before the folder exists
        ev = cfg.evaluation
        eval_freq = steps_per_eval or (ev.freq if ev is not None else None)
        eval_env = eval_days = None
        if eval_freq is not None:
            from powerzoo.benchmarks.baselines import select_days
            from powerzoo.envs.introspect import task_of

            eval_env = self.make_eval_env(ev.split if ev is not None else "val")
            eval_days = select_days(task_of(eval_env).n_days, ev.episodes if ev is not None else 8)
        run_dir = self._ensure_run_dir()
        if self.collector is None:
            self.collector = self._new_collector()
            self.collector.reset(cfg.seed)
        if cfg.logging.tensorboard and self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(
                log_dir=str(run_dir / rd.TENSORBOARD_DIR), purge_step=self._purge_step
            )
        if eval_freq is not None and self._next_eval is None:
            self._next_eval = (self.num_timesteps // eval_freq + 1) * eval_freq
        if eval_env is not None and not (self.num_timesteps or self.evaluations):
            mappo_evaluation.evaluate_at_start(self, eval_env, eval_days)
        conditions = cfg.stop_condition_objects() + list(stop_conditions or [])
        budget, stop_reason = cfg.budget_timesteps(), None
        bar = progress_bar(
            progress=cfg.logging.progress_bar,
            total=budget,
            initial=min(self.num_timesteps, budget),
            desc=f"training {self.algorithm}",
            unit="step",
            dynamic_ncols=True,
        )
        n_steps, n_envs = self.params.n_steps, self.collector.n_envs
        words = f"n_steps x n_envs = {n_steps} x {n_envs}"
        if not on_a_clock(cfg.stop_conditions):  # a track's cap is not a budget
            warn_rounded_budget(self.algorithm, budget, self.num_timesteps, n_steps * n_envs, words)
        if self.num_timesteps < budget:
            self._write_state("running")
        try:
            while self.num_timesteps < budget:
                if (
                    cfg.checkpoint is not None
                    and self.num_timesteps - self._last_checkpoint >= cfg.checkpoint.freq
                ):
                    self._save_checkpoint()
                self._iteration()
                bar.update(min(self.num_timesteps, budget) - bar.n)
                if eval_freq is not None and self.num_timesteps >= self._next_eval:
                    while self._next_eval <= self.num_timesteps:
                        self._next_eval += eval_freq
                    mappo_evaluation.evaluate_now(self, eval_env, eval_days)
                met = first_met(
                    conditions,
                    TrainingProgress(
                        self.num_timesteps, [r["mean_return"] for r in self.evaluations]
                    ),
                )
                if met is not None:
                    stop_reason = describe_condition(met)
                    break
        finally:
            bar.close()
        if eval_env is not None and (
            not self.evaluations or self.evaluations[-1]["timestep"] != self.num_timesteps
        ):
            mappo_evaluation.evaluate_now(self, eval_env, eval_days)
        status = "stopped" if stop_reason else "finished"
        if cfg.checkpoint is not None:
            self._save_checkpoint()
        self.save(run_dir)
        self._write_state(status, stop_reason)
        if self._writer is not None:
            self._writer.flush()
        return self._result(status, stop_reason, started)

    def _iteration(self) -> dict[str, float]:
        """Collect one rollout, step the multipliers, compute GAE, run the PPO epochs, log."""
        learner, collector, p = self.learner, self.collector, self.params
        t0 = time.perf_counter()
        rollout, episodes, last_v, last_cv = collector.collect(p.n_steps)
        t1 = time.perf_counter()
        multipliers = learner.update_multipliers(
            episodes.mean_episode_selected_costs(self.spec.horizon) if self.lagrangian else None
        )
        rollout.finish(last_v, last_cv, self.gamma, p.gae_lambda, self.cost_gamma)
        learner.set_progress(self.num_timesteps / max(self.config.budget_timesteps(), 1))
        stats = learner.update(rollout)
        t2 = time.perf_counter()
        steps = p.n_steps * collector.n_envs
        self.num_timesteps += steps
        self.iterations += 1
        scalars = {f"train/{k}": v for k, v in stats.items()}
        scalars["train/learning_rate"] = float(
            next(iter(learner.actor_optims.values())).param_groups[0]["lr"]
        )
        scalars.update(self._episode_scalars(episodes))
        for name, value in zip(self.cost_names, multipliers, strict=True):
            scalars[f"lagrangian/lambda_{name}"] = float(value)
        scalars["time/collect_steps_per_s"] = steps / max(t1 - t0, 1e-9)
        scalars["time/steps_per_s"] = steps / max(t2 - t0, 1e-9)
        self._log(scalars)
        return scalars

    def _episode_scalars(self, episodes: EpisodeBatch) -> dict[str, float]:
        out: dict[str, float] = {}
        if len(episodes.returns):
            out["rollout/ep_return_mean"] = float(episodes.returns.mean())
            out["rollout/ep_len_mean"] = float(episodes.lengths.mean())
            for name, value in zip(
                self.spec.constraint_names, episodes.costs.mean(axis=0), strict=True
            ):
                out[f"rollout/ep_cost_{name}_mean"] = float(value)
        if self.lagrangian:
            for name, value in zip(
                self.cost_names,
                episodes.mean_episode_selected_costs(self.spec.horizon),
                strict=True,
            ):
                out[f"lagrangian/episode_cost_{name}"] = float(value)
        return out

    # ---- evaluation ------------------------------------------------------------------------------
    def policy(self, deterministic: bool = True) -> MAPPOPolicy:
        """The trained actors as a torch-free :class:`MAPPOPolicy`
        (``act(obs_dict) -> action_dict``).

        Args:
            deterministic: Act with each actor's mean instead of sampling.

        Returns:
            The exported policy.
        """
        if self.learner is None:
            if self._loaded_policy is None:
                raise RuntimeError("no policy yet: call train() or Trainer.load(...) first")
            return self._loaded_policy.with_mode(deterministic)
        env = self.config.env
        meta = {
            "task": self.task,
            "algorithm": self.algorithm,
            "normalize": env.normalize,
            "obs_mode": env.obs_mode,
            "task_kwargs": dict(env.task_kwargs),
            "num_timesteps": self.num_timesteps,
        }
        return self.learner.export_policy(deterministic, meta, *self._affine_maps())

    _rank = staticmethod(rank)  # the order of evaluations for the best policy

    # ---- checkpoints, save, load, resume ---------------------------------------------------------
    def _save_checkpoint(self) -> Path:
        """``checkpoints/step_<N>/``: learner, collector (episodes, RNG), global RNG, counters."""
        if self._writer is not None:  # a killed run keeps what was logged up to this step
            self._writer.flush()
        learner_state, collector_state = self.learner.full_state(), self.collector.state()
        counters = {
            "num_timesteps": self.num_timesteps,
            "iterations": self.iterations,
            "next_eval": self._next_eval,
            "evaluations": [r for r in self.evaluations if r["timestep"] <= self.num_timesteps],
            **self._config_record(),
        }

        self._last_checkpoint, keep = self.num_timesteps, self.config.checkpoint.keep
        folder = write_learner_checkpoint(
            self.run_dir, keep, self.num_timesteps, learner_state, collector_state, counters
        )
        self._write_state("running")
        return folder

    def save(self, path: str | Path) -> Path:
        """Write ``policy.npz`` (torch-free), ``learner.pt`` and the resolved config into folder
        ``path``.

        Args:
            path: Folder to write (created if missing).

        Returns:
            The folder written.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if self.learner is None:
            raise RuntimeError("nothing to save: call train() first")
        self.policy().save(path / POLICY_FILE)
        state = torch_plain(self.learner.full_state())
        atomic_save(path / LEARNER_FILE, lambda p: torch.save(state, p))
        if not (path / rd.CONFIG_FILE).exists() or path != self.run_dir:
            self.config.to_file(path / rd.CONFIG_FILE)
        return path

    def _load_files(self, path: Path, model: str) -> None:
        """Read the saved policy into this fresh trainer: ``final`` (``policy.npz`` + learner),
        ``best`` (``evaluation/best_policy.npz``) or ``latest`` (newest readable checkpoint's
        learner). A damaged file raises :class:`~powerzoo.fileio.CorruptFileError` naming it."""
        run_state = rd.read_run_state(path)
        if model == "best":
            file = path / rd.EVAL_DIR / BEST_POLICY_FILE
            if not file.is_file():
                raise FileNotFoundError(f"{file} not found (model='best')")
            self._loaded_policy = read_best_policy(file, self.get_env())
        elif model == "latest":
            found = rd.CheckpointStore(path).restore(self._read_checkpoint)
            if found is None:
                raise FileNotFoundError(f"{path} has no checkpoint")
            self._ensure_learner().load_full_state(found[1][1])
            self.num_timesteps = int(found[1][0]["num_timesteps"])
        else:
            if not (path / LEARNER_FILE).is_file():
                raise FileNotFoundError(f"{path} has no {LEARNER_FILE}")
            learner = sf.read_torch(path / LEARNER_FILE, self._trust_pickle)
            self._ensure_learner().load_full_state(learner)
        if (path / rd.STATE_FILE).is_file():
            self.run_dir = path
            if model == "final":
                self.num_timesteps = int((run_state or {}).get("num_timesteps", 0))

    def _read_checkpoint(self, folder: Path) -> tuple[Any, Any, Any, Any]:
        return read_learner_checkpoint(self.config, folder, self.get_env(), self._trust_pickle)

    def restore_checkpoint(self, run_dir: str | Path) -> MAPPOTrainer:
        """Position this fresh trainer at the newest readable checkpoint of ``run_dir``: learner,
        env episodes, RNG and counters restored (a damaged checkpoint is named in a warning and
        the next newest is used).

        Args:
            run_dir: The run folder.

        Returns:
            This trainer.
        """
        run_dir = Path(run_dir)
        found = rd.CheckpointStore(run_dir).restore(self._read_checkpoint)
        if found is None:
            raise FileNotFoundError(f"{run_dir} has no checkpoint to resume from")
        state, learner_state, collector_state, rng = found[1]
        self._ensure_learner().load_full_state(learner_state)
        self.collector = self._new_collector()
        self.collector.reset(self.config.seed)
        self.collector.set_state(collector_state)
        set_rng_state(rng)
        self.num_timesteps, self.iterations = int(state["num_timesteps"]), int(state["iterations"])
        self._next_eval = state.get("next_eval")
        self._last_checkpoint = self.num_timesteps
        self.evaluations = list(state["evaluations"])
        self.run_dir = run_dir
        self._purge_step = self.num_timesteps + 1
        return self

    def close(self) -> None:
        """Flush and close the TensorBoard writer; stop remote rollout workers."""
        if self.collector is not None and hasattr(self.collector, "close"):
            self.collector.close()
            self.collector = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
