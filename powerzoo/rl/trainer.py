"""One face for every trainer: the :class:`TrainerProtocol` and the factories that build trainers.

::

    from powerzoo.rl import Trainer

    trainer = Trainer("battery_arbitrage", algorithm="PPO", total_timesteps=100_000, seed=0)
    result = trainer.train()                       # run folder, evaluations, checkpoints
    trainer.evaluate(split="test")                 # mean/std return, costs, normalised score
    trainer.save("my_model")                       # model + normalisation statistics + config
    Trainer.load("my_model").evaluate()            # a new trainer; trainer.load(path) loads into it
    Trainer.resume("runs/PPO-battery_arbitrage-seed0-20261121-101500")   # after a crash

``Trainer(...)`` is :func:`make_trainer`: it resolves the run config and builds the trainer of the
algorithm's family (:func:`powerzoo.rl.algorithms.trainer_class`):

- SB3 algorithms on single-agent tasks: :class:`~powerzoo.rl.sb3.trainer.SB3Trainer`;
- SB3 algorithms on multi-agent tasks (one shared policy, or independent learners):
  :class:`~powerzoo.rl.sb3.multi_agent.SB3MultiAgentTrainer`;
- ``MAPPO``, ``IPPO``, ``MAPPO-L``, ``IPPO-L`` (multi-agent tasks) and ``PPO-L`` (single-agent
  tasks): :class:`~powerzoo.rl.mappo.trainer.MAPPOTrainer`.
- the reference baselines (:mod:`powerzoo.rl.reference`):
  :class:`~powerzoo.rl.reference.sb3_trainer.ReferenceSB3Trainer` and
  :class:`~powerzoo.rl.reference.mappo_trainer.ReferenceMAPPOTrainer`.

Each is a :class:`~powerzoo.rl.trainer_base.TrainerBase` and satisfies :class:`TrainerProtocol`.
``Trainer.load`` / ``Trainer.resume`` / ``Trainer.from_checkpoint`` read a run folder's config
and build the matching trainer the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from powerzoo.rl import run_dir as rd
from powerzoo.rl.config import TrainConfig, resolve_config
from powerzoo.rl.result import TrainResult
from powerzoo.rl.trainer_base import MODEL_CHOICES, TrainerBase

__all__ = [
    "Trainer",
    "TrainerProtocol",
    "TrainResult",
    "MODEL_CHOICES",
    "make_trainer",
    "load_trainer",
    "resume_trainer",
    "trainer_from_checkpoint",
]


@runtime_checkable
class TrainerProtocol(Protocol):
    """What every PowerZoo trainer offers, whatever trains underneath."""

    @property
    def task(self) -> str:
        """The task's registered name."""
        ...

    @property
    def algorithm(self) -> str:
        """The algorithm's canonical name (``PPO``, ``SAC``, ``MAPPO``, ...)."""
        ...

    def train(
        self, stop_conditions: Sequence[Any] | None = None, steps_per_eval: int | None = None
    ) -> TrainResult:
        """Train until the budget or a stop condition; writes the run folder.

        Args:
            stop_conditions: Conditions of :mod:`powerzoo.rl.conditions` that end training early.
            steps_per_eval: Env steps between evaluations (default: the config's).

        Returns:
            The run's result (run folder, steps, evaluations, why it stopped).
        """
        ...

    def evaluate(
        self,
        split: str = "test",
        n_episodes: int | None = None,
        deterministic: bool = True,
        seed: int = 0,
    ) -> dict[str, Any]:
        """Score the trained policy on a split.

        Args:
            split: Date split of the evaluation episodes.
            n_episodes: Days to run, spread evenly (default: every day of the split).
            deterministic: Act with the policy's mode instead of sampling.
            seed: Seed of the evaluation episodes.

        Returns:
            ``mean_return`` ($ per episode), ``std_return``, ``mean_costs`` (each cost's unit
            per episode), ``normalized_score`` and the other figures of the evaluation.
        """
        ...

    def save(self, path: str | Path) -> Path:
        """Write the trained model(s) and the resolved config.

        Args:
            path: Folder to write.

        Returns:
            The folder written.
        """
        ...

    def load(
        self, path: str | Path, model: str = "final", *, trust_pickle: bool = False
    ) -> TrainerProtocol:
        """Load a saved folder or run folder into this trainer.

        Args:
            path: Folder written by ``save``, or a run folder.
            model: In a run folder, ``"final"``, ``"best"`` or ``"latest"``.
            trust_pickle: Also read an older PowerZoo's pickles (they run code).

        Returns:
            This trainer.
        """
        ...

    def resume(
        self,
        run_dir: str | Path,
        stop_conditions: Sequence[Any] | None = None,
        *,
        trust_pickle: bool = False,
    ) -> TrainerProtocol:
        """Continue a run from its newest checkpoint up to its budget.

        Args:
            run_dir: The run folder.
            stop_conditions: Conditions that end training early.
            trust_pickle: Also read an older PowerZoo's pickles (they run code).

        Returns:
            This trainer.
        """
        ...

    def policy(self, deterministic: bool = True) -> Any:
        """The trained agent(s) behind the benchmark policy interface.

        Args:
            deterministic: Act with the policy's mode instead of sampling.

        Returns:
            A policy with ``reset()`` and ``act(obs, info)``.
        """
        ...


def _build(config: TrainConfig) -> TrainerBase:
    return config.build()


def make_trainer(
    task_or_config: Any,
    algorithm: str | None = None,
    total_timesteps: int | None = None,
    seed: int | None = None,
    **kwargs: Any,
) -> TrainerBase:
    """The trainer for a task or run config (envs and models are built on first use).

    Args:
        task_or_config: a task name, a :class:`~powerzoo.rl.config.TrainConfig`, a dict of config
            fields, or a YAML/JSON run-config path.
        algorithm: ``"PPO"``, ``"A2C"``, ``"SAC"``, ``"TD3"``, ``"DDPG"`` or, on multi-agent
            tasks, ``"MAPPO"``, ``"IPPO"``, ``"MAPPO-L"``, ``"IPPO-L"``, or on single-agent
            tasks ``"PPO-L"``, or a reference baseline (``"PPO-residual"``, ``"SAC-residual"``,
            ``"PPO-safe"``, ``"BC-PPO"``; ``"MAPPO-residual"``, ``"MAPPO-safe"``;
            :mod:`powerzoo.rl.reference`) (default from the config, else PPO).
        total_timesteps: training budget in env steps (default from the config, else 100,000).
        seed: seeds the model, the training envs and the evaluation (default 0).
        **kwargs: other config fields (``n_envs=8``, ``evaluation={...}``, ``output_dir=...``),
            ``make_env`` options (``normalize``, ``split``, ``reward``, ...), or algorithm
            arguments (``learning_rate=1e-3``, ``gamma=0.999``); unknown names raise
            ``ValueError``.

    Returns:
        The SB3, multi-agent SB3 or native MAPPO trainer the algorithm and task call for.
    """
    overrides = {"algorithm": algorithm, "total_timesteps": total_timesteps, "seed": seed}
    return _build(resolve_config(task_or_config, {**overrides, **kwargs}))


def _run_config(path: Path) -> TrainConfig:
    if not (path / rd.CONFIG_FILE).is_file():
        raise FileNotFoundError(
            f"{path} has no {rd.CONFIG_FILE}: not a PowerZoo model or run folder"
        )
    return TrainConfig.from_file(path / rd.CONFIG_FILE)


def load_trainer(
    path: str | Path, model: str = "final", *, trust_pickle: bool = False
) -> TrainerBase:
    """A new trainer holding the model saved in ``path`` (a saved folder or a run folder).

    ``Trainer.load(path)`` is this function; ``trainer.load(path)`` on an existing trainer loads
    into that trainer instead (:meth:`~powerzoo.rl.trainer_base.TrainerBase.load`). Loading runs
    no code from the folder unless ``trust_pickle=True`` (:mod:`powerzoo.rl.run_dir`).

    Args:
        path: a folder written by ``save`` or a run folder (``config.yaml`` inside).
        model: in a run folder, ``"final"``, ``"best"`` (best evaluated) or ``"latest"``
            (newest checkpoint).
        trust_pickle: also read the pickles of a folder an older PowerZoo wrote (and SB3 zips
            with SB3's ``load``): for folders from trusted sources only.

    Returns:
        The trainer, ready to evaluate or train further.
    """
    path = Path(path)
    if model not in MODEL_CHOICES:
        raise ValueError(f"model must be one of {MODEL_CHOICES}, got {model!r}")
    return _build(_run_config(path)).load(path, model, trust_pickle=trust_pickle)


def trainer_from_checkpoint(run_dir: str | Path, *, trust_pickle: bool = False) -> TrainerBase:
    """A trainer positioned at the newest checkpoint of ``run_dir``, ready to ``train`` on.

    Args:
        run_dir: The run folder.
        trust_pickle: also read the pickles of a checkpoint an older PowerZoo wrote.

    Returns:
        The trainer.
    """
    run_dir = Path(run_dir)
    if not (run_dir / rd.CONFIG_FILE).is_file():
        raise FileNotFoundError(f"{run_dir} is not a run folder (no {rd.CONFIG_FILE})")
    trainer = _build(_run_config(run_dir))
    trainer._trust_pickle = trust_pickle
    return trainer.restore_checkpoint(run_dir)


def resume_trainer(
    run_dir: str | Path,
    stop_conditions: Sequence[Any] | None = None,
    *,
    trust_pickle: bool = False,
) -> TrainerBase:
    """Continue the run in ``run_dir`` from its newest checkpoint up to its budget.

    Model, normalisation statistics, replay buffer, step counter, RNG state, evaluation history
    and the TensorBoard run continue; a run stopped by a stop condition is returned as is. The
    result is in ``trainer.result``. The run folder is locked meanwhile: a second ``resume`` (or
    a ``train`` under its name) gets ``RunFolderBusyError`` naming the holder.

    Args:
        run_dir: The run folder.
        stop_conditions: Conditions of :mod:`powerzoo.rl.conditions` that end training early.
        trust_pickle: also read the pickles of a run folder an older PowerZoo wrote (trusted
            folders only).

    Returns:
        The trainer, after training.
    """
    run_dir = Path(run_dir)
    if not (run_dir / rd.CONFIG_FILE).is_file():
        raise FileNotFoundError(f"{run_dir} is not a run folder (no {rd.CONFIG_FILE})")
    return _build(_run_config(run_dir)).resume(run_dir, stop_conditions, trust_pickle=trust_pickle)


def Trainer(  # noqa: N802 (the documented name of the factory)
    task_or_config: Any,
    algorithm: str | None = None,
    total_timesteps: int | None = None,
    seed: int | None = None,
    **kwargs: Any,
) -> TrainerBase:
    """Build the trainer of a task or run config: :func:`make_trainer` under its documented name.

    ``Trainer.load(path, model=...)``, ``Trainer.resume(run_dir)`` and
    ``Trainer.from_checkpoint(run_dir)`` are :func:`load_trainer`, :func:`resume_trainer` and
    :func:`trainer_from_checkpoint`.

    Args:
        task_or_config: A task name, a ``TrainConfig``, a dict of config fields or a run-config
            path.
        algorithm: Algorithm name (default from the config, else PPO).
        total_timesteps: Training budget in env steps.
        seed: Seed of the model, the training envs and the evaluation.
        **kwargs: Other config fields, ``make_env`` options or algorithm arguments.

    Returns:
        The trainer (see :func:`make_trainer`).
    """
    return make_trainer(task_or_config, algorithm, total_timesteps, seed, **kwargs)


Trainer.load = load_trainer  # type: ignore[attr-defined]
Trainer.resume = resume_trainer  # type: ignore[attr-defined]
Trainer.from_checkpoint = trainer_from_checkpoint  # type: ignore[attr-defined]
