"""``ReferenceMAPPOTrainer``: the multi-agent reference baselines on the native trainer.

Built by :func:`powerzoo.rl.Trainer` for ``MAPPO-RESIDUAL`` and ``MAPPO-SAFE`` on multi-agent
tasks. It is the :class:`~powerzoo.rl.mappo.trainer.MAPPOTrainer` of ``MAPPO`` (its
``algorithm_kwargs`` are :class:`~powerzoo.rl.mappo.hparams.MAPPOParams` fields, plus
``residual_scale`` for the residual) with a layer (:mod:`.layers`) between the actors and the
env:

- the training env is the multi-agent vector env behind
  :class:`~powerzoo.rl.reference.wrappers.LayerAgentVecEnv`: every agent's actor acts in
  [-1, 1]; the layer turns the joint action into the env's (the rule gives the joint action and
  each agent's residual moves its own slice; or the joint action is projected onto the step's
  bounds);
- the evaluation env (:meth:`ReferenceMAPPOTrainer.make_eval_env`) is the dict env behind
  :class:`~powerzoo.rl.reference.wrappers.LayerDictEnv`, and the exported policy gives the
  actors' [-1, 1] actions, so the policy acts on the env :meth:`make_eval_env` returns;
- ``MAPPO-RESIDUAL``: every actor's output layer starts at 0 (the untrained policy is the rule).

Rollouts run in this process (``rollout_workers`` must be 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from powerzoo.rl.algorithms import reference_algorithm, split_reference_kwargs
from powerzoo.rl.config import TrainConfig
from powerzoo.rl.mappo.algorithm import MultiAgentPPO
from powerzoo.rl.mappo.trainer import MAPPOTrainer
from powerzoo.rl.reference.layers import DEFAULT_RESIDUAL_SCALE
from powerzoo.rl.reference.wrappers import wrap_env

__all__ = ["ReferenceMAPPOTrainer"]


class ReferenceMAPPOTrainer(MAPPOTrainer):
    """Train a multi-agent reference baseline (module docstring) with the native MAPPO learner.

    Args:
        config: A validated run config whose ``algorithm`` is ``MAPPO-RESIDUAL`` or
            ``MAPPO-SAFE``.
    """

    def __init__(self, config: TrainConfig) -> None:
        reference = reference_algorithm(config.algorithm)
        if reference is None or reference.layer is None:
            raise ValueError(f"{config.algorithm} is not a native reference baseline")
        own, base_kwargs = split_reference_kwargs(config.algorithm, config.algorithm_kwargs)
        # the learner is the base algorithm's; the run (folder, name, config file) is this one's
        super().__init__(
            config.model_copy(update={"algorithm": reference.base, "algorithm_kwargs": base_kwargs})
        )
        self.config = config
        self.reference = reference
        self.residual_scale = float(own.get("residual_scale", DEFAULT_RESIDUAL_SCALE))
        if self.params.rollout_workers:
            raise ValueError(
                f"{config.algorithm} collects its rollouts in this process: set rollout_workers 0"
            )
        if self.params.init_action == "idle":
            raise ValueError(
                f"{config.algorithm}: init_action 'idle' is the env's action, not the learner's "
                "behind the layer; use init_action 'center'"
            )

    def get_env(self) -> Any:
        """The training env behind the run's layer (built on first use).

        Returns:
            The wrapped multi-agent vector env.
        """
        if self.env is None:
            self.env = wrap_env(super().get_env(), self.reference.layer, self.residual_scale)
        return self.env

    def make_eval_env(self, split: str, objective: bool = False) -> Any:
        """The dict env on ``split`` (physical units) behind the run's layer.

        Args:
            split: Date split of the evaluation episodes.
            objective: Drop a ``reward=`` override (returns are the task's own).

        Returns:
            The evaluation env.
        """
        env = super().make_eval_env(split, objective)
        return wrap_env(env, self.reference.layer, self.residual_scale)

    def _affine_maps(self) -> tuple[Any, Any]:
        """The observation map of the training env; no action map: the exported policy gives the
        actors' [-1, 1] actions, which the evaluation env's layer takes."""
        return super()._affine_maps()[0], None

    def _ensure_learner(self) -> MultiAgentPPO:
        fresh = self.learner is None
        learner = super()._ensure_learner()
        if fresh and self.reference.layer == "residual":
            with torch.no_grad():
                for actor in learner.actors.values():
                    actor.mean[-1].weight.zero_()
                    actor.mean[-1].bias.zero_()
        return learner

    def restore_checkpoint(self, run_dir: str | Path) -> ReferenceMAPPOTrainer:
        """As :meth:`MAPPOTrainer.restore_checkpoint`; the layer then reads the restored
        observations.

        Args:
            run_dir: The run folder.

        Returns:
            This trainer.
        """
        super().restore_checkpoint(run_dir)
        self.get_env().last_obs = self.collector.obs
        return self
