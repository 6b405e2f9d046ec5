"""``ReferenceSB3Trainer``: the single-agent reference baselines on Stable-Baselines3.

Built by :func:`powerzoo.rl.Trainer` for ``PPO-RESIDUAL``, ``SAC-RESIDUAL``, ``PPO-SAFE`` and
``BC-PPO`` (names are case-insensitive: ``PPO-residual``). It is the
:class:`~powerzoo.rl.sb3.trainer.SB3Trainer` of the base algorithm with:

- a layer (:mod:`.layers`) between the learner and the env, in the training env (under
  ``VecNormalize``) and in every evaluation env (:meth:`ReferenceSB3Trainer.make_eval_env`),
  so the trained policy (:meth:`~powerzoo.rl.sb3.trainer.SB3Trainer.policy`) acts on the env
  :meth:`make_eval_env` returns, as every trainer's does; the learner acts in [-1, 1];
- ``-RESIDUAL``: the policy's mean starts at 0 (action head zeroed: the untrained policy is the
  rule); ``residual_scale`` in ``algorithm_kwargs`` (default 0.25); ``PPO-RESIDUAL``'s Gaussian
  starts at ``log_std_init = -2`` (std 0.14 of the residual's range) unless ``policy_kwargs``
  sets it: with SB3's 0 the exploration noise alone moves the rule's actions by a quarter of
  their half-range;
- ``BC-PPO``: before PPO, the policy's mean is fitted to the oracle's actions (:mod:`.bc`:
  ``bc_dataset``, ``bc_episodes``, ``bc_epochs``, ``bc_learning_rate``), and its Gaussian starts
  at ``log_std_init = -1`` (std 0.37 of the half-range, not 1) unless ``policy_kwargs`` sets
  it, so the first rollouts stay near the cloned policy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.rl.algorithms import reference_algorithm, split_reference_kwargs
from powerzoo.rl.config import TrainConfig
from powerzoo.rl.reference.bc import BC_DEFAULTS, fit_policy_mean, oracle_arrays
from powerzoo.rl.reference.layers import DEFAULT_RESIDUAL_SCALE
from powerzoo.rl.reference.wrappers import LayerEnv, make_layer, unit_box
from powerzoo.rl.sb3.trainer import SB3Trainer

__all__ = ["ReferenceSB3Trainer", "LayerVecEnv", "LOG_STD_INIT"]

LOG_STD_INIT = {"residual": -2.0, "behaviour_cloning": -1.0}
"""The initial log standard deviation of ``PPO-RESIDUAL`` and ``BC-PPO``'s Gaussian (unless
``policy_kwargs.log_std_init`` is given)."""


def _layer_vec_env_class() -> type:
    """:class:`LayerVecEnv`'s class, built on SB3's ``VecEnvWrapper`` (imported on first use)."""
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class _LayerVecEnv(VecEnvWrapper):
        """An SB3 vector env (PowerZoo's native one, or SB3's of single envs) behind a layer:
        the learner's actions in [-1, 1], the layer's in the env's units."""

        def __init__(self, venv: Any, layer: Any) -> None:
            super().__init__(venv, action_space=unit_box(layer.view.act_dim))
            self.layer = layer
            self._obs: Any = None

        def reset(self) -> Any:
            self._obs = self.venv.reset()
            return self._obs

        def step_async(self, actions: np.ndarray) -> None:
            if self._obs is None:
                raise RuntimeError("call reset() before step()")
            env_actions = self.layer(np.asarray(self._obs), np.asarray(actions, np.float64))
            self.venv.step_async(env_actions.astype(np.float32))

        def step_wait(self) -> Any:
            obs, rewards, dones, infos = self.venv.step_wait()
            self._obs = obs  # rows that ended already hold their next episode's first obs
            return obs, rewards, dones, infos

    return _LayerVecEnv


def LayerVecEnv(venv: Any, layer: Any) -> Any:  # noqa: N802 (a class to its callers)
    """``venv`` (an SB3 ``VecEnv`` in the env's units) behind ``layer`` (:mod:`.layers`).

    Args:
        venv: The vector env (no ``VecNormalize``: the layer reads the env's observations).
        layer: A layer of :func:`~powerzoo.rl.reference.wrappers.make_layer`.

    Returns:
        The wrapped ``VecEnv``.
    """
    return _layer_vec_env_class()(venv, layer)


class ReferenceSB3Trainer(SB3Trainer):
    """Train a single-agent reference baseline (module docstring) with its base SB3 algorithm.

    Args:
        config: A validated run config whose ``algorithm`` is ``PPO-RESIDUAL``,
            ``SAC-RESIDUAL``, ``PPO-SAFE`` or ``BC-PPO``.
    """

    def __init__(self, config: TrainConfig) -> None:
        super().__init__(config)
        self.reference = reference_algorithm(config.algorithm)
        if self.reference is None:
            raise ValueError(f"{config.algorithm} is not a reference baseline")
        self.reference_kwargs, self._base_kwargs = split_reference_kwargs(
            config.algorithm, config.algorithm_kwargs
        )
        self.residual_scale = float(
            self.reference_kwargs.get("residual_scale", DEFAULT_RESIDUAL_SCALE)
        )
        self.bc_stats: dict[str, float] | None = None  # BC-PPO: the fit's MSE before / after

    def algorithm_kwargs(self) -> dict[str, Any]:
        """The base algorithm's constructor arguments (reference keys left out).

        Returns:
            Keyword arguments by name.
        """
        kwargs = {**self._base_kwargs, "gamma": self.gamma}
        kind = "behaviour_cloning" if self.reference.behaviour_cloning else self.reference.layer
        if self.reference.base == "PPO" and kind in LOG_STD_INIT:
            policy_kwargs = dict(kwargs.get("policy_kwargs") or {})
            policy_kwargs.setdefault("log_std_init", LOG_STD_INIT[kind])
            kwargs["policy_kwargs"] = policy_kwargs
        return kwargs

    # ---- envs ------------------------------------------------------------------------------------
    def _plain_env(self, split: str, objective: bool = False) -> Any:
        """The evaluation env without the layer."""
        return super().make_eval_env(split, objective)

    def _layer(self) -> Any:
        probe = self._plain_env(self.config.env.split)
        return make_layer(self.reference.layer, probe, self.residual_scale)

    def _build_train_env(self, seed: int) -> Any:
        venv = super()._build_train_env(seed)
        if self.reference.layer is None:
            return venv
        from stable_baselines3.common.vec_env import VecNormalize

        if not isinstance(venv, VecNormalize):
            return LayerVecEnv(venv, self._layer())
        # the layer reads the env's own observations: it goes under the running statistics
        venv.venv = LayerVecEnv(venv.venv, self._layer())
        venv.action_space = venv.venv.action_space
        return venv

    def make_eval_env(self, split: str, objective: bool = False) -> Any:
        """The evaluation env on ``split`` behind the run's layer (the learner's policy acts on
        it; see :meth:`~powerzoo.rl.sb3.trainer.SB3Trainer.make_eval_env`).

        Args:
            split: Date split of the evaluation episodes.
            objective: Drop a ``reward=`` override (returns are the task's own).

        Returns:
            The evaluation env.
        """
        env = self._plain_env(split, objective)
        if self.reference.layer is None:
            return env
        return LayerEnv(env, self.reference.layer, self.residual_scale)

    # ---- model -----------------------------------------------------------------------------------
    def _ensure_model(self) -> Any:
        fresh = self.model is None and not self.config.init_model
        model = super()._ensure_model()
        if fresh and self.reference.layer == "residual":
            _zero_action_head(model)
        if fresh and self.reference.behaviour_cloning:
            self._clone_oracle(model)
        return model

    def _clone_oracle(self, model: Any) -> None:
        """Fit the policy's mean to the oracle's actions (module docstring of :mod:`.bc`)."""
        own = {**BC_DEFAULTS, **self.reference_kwargs}
        env = self._plain_env(self.config.env.split)
        try:
            obs, actions = oracle_arrays(
                env, own.get("bc_dataset"), int(own["bc_episodes"]), self.config.seed
            )
        finally:
            env.close()
        vec_normalize = model.get_vec_normalize_env()
        if vec_normalize is not None and vec_normalize.norm_obs:
            rms = vec_normalize.obs_rms
            rms.mean = obs.mean(axis=0).astype(np.float64)
            rms.var = obs.var(axis=0).astype(np.float64)
            rms.count = float(len(obs))
            obs = vec_normalize.normalize_obs(obs)
        self.bc_stats = fit_policy_mean(
            model,
            obs,
            actions,
            int(own["bc_epochs"]),
            float(own["bc_learning_rate"]),
            self.config.seed,
        )


def _zero_action_head(model: Any) -> None:
    """Zero the last layer of the policy's mean, so its mean action is 0 everywhere (PPO / A2C:
    ``action_net``; SAC / TD3: the actor's ``mu``)."""
    import torch

    policy = model.policy
    head = getattr(policy, "action_net", None)
    if head is None:
        head = policy.actor.mu
        if isinstance(head, torch.nn.Sequential):  # TD3's mu ends in a tanh
            head = next(m for m in reversed(head) if isinstance(m, torch.nn.Linear))
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
