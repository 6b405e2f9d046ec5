"""Trained SB3 models behind the benchmark policy interface (``act(obs, info)``).

:class:`ModelPolicy` is a single-agent model with its frozen observation statistics;
:class:`SharedPolicy` is one model acting for every agent of a multi-agent dict env (one-hot
agent id appended, the layout of :class:`~powerzoo.rl.sb3.marl.AgentsAsVecEnv`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from powerzoo.benchmarks.policies import SB3Policy
from powerzoo.benchmarks.sb3_policy import predict_action

__all__ = ["ModelPolicy", "SharedPolicy", "frozen_obs_stats"]


def frozen_obs_stats(vec_normalize: Any) -> dict[str, Any] | None:
    """A copy of a ``VecNormalize``'s observation statistics (``None`` if it does not normalise
    obs).

    The copy does not change when training goes on, so an evaluation uses one fixed normaliser.
    """
    if vec_normalize is None or not getattr(vec_normalize, "norm_obs", False):
        return None
    rms = vec_normalize.obs_rms
    return {
        "mean": np.array(rms.mean, dtype=np.float64, copy=True),
        "var": np.array(rms.var, dtype=np.float64, copy=True),
        "clip_obs": float(vec_normalize.clip_obs),
        "epsilon": float(vec_normalize.epsilon),
    }


class ModelPolicy(SB3Policy):
    """``act(obs, info)`` of an SB3 model fed with observations normalised by frozen statistics.

    ``obs_stats`` is :func:`frozen_obs_stats`'s dict (or ``None``: observations pass unchanged),
    applied as SB3's ``VecNormalize`` does: ``clip((obs - mean) / sqrt(var + eps), ±clip_obs)``.
    """

    def __init__(
        self, model: Any, obs_stats: dict[str, Any] | None = None, deterministic: bool = True
    ) -> None:
        super().__init__(model, deterministic=deterministic)
        self.obs_stats = copy.deepcopy(obs_stats)

    def normalize_obs(self, obs: Any) -> Any:
        """Observation as the model saw it in training."""
        s = self.obs_stats
        if s is None:
            return obs
        scaled = (np.asarray(obs, dtype=np.float64) - s["mean"]) / np.sqrt(s["var"] + s["epsilon"])
        return np.clip(scaled, -s["clip_obs"], s["clip_obs"]).astype(np.float32)

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        return super().act(self.normalize_obs(obs), info)


class SharedPolicy:
    """A model trained by :func:`~powerzoo.rl.sb3.marl.train_shared_policy` acting for every agent
    of a dict env.

    ``act(obs, info)`` appends each agent's one-hot id (the order of ``agents``, which must be the
    training env's ``possible_agents``) and predicts all agents in one batched call.
    """

    def __init__(self, model: Any, agents: Sequence[str], deterministic: bool = True) -> None:
        if not callable(getattr(model, "predict", None)):
            raise TypeError(f"SharedPolicy needs a model with .predict(obs, ...), got {model!r}")
        self.model, self.agents, self.deterministic = model, list(agents), bool(deterministic)
        self._ids = np.eye(len(self.agents), dtype=np.float32)
        self._index = {a: i for i, a in enumerate(self.agents)}
        shape = getattr(getattr(model, "observation_space", None), "shape", None)
        if shape is not None and (len(shape) != 1 or shape[0] <= len(self.agents)):
            raise ValueError(
                f"model observations have shape {shape}; "
                f"a shared policy over {len(self.agents)} agents "
                "expects 1-D observations ending with the one-hot agent id"
            )
        self.name = f"shared_{type(model).__name__.lower()}"

    def seed(self, seed: int) -> None:
        """Seed the model's sampling (only matters with ``deterministic=False``)."""
        if not self.deterministic and callable(getattr(self.model, "set_random_seed", None)):
            self.model.set_random_seed(seed)

    def reset(self) -> None:
        return None

    def act(self, obs: Mapping[str, Any], info: Any = None) -> dict[str, Any]:
        present = [a for a in obs if a in self._index]
        unknown = set(obs) - set(present)
        if unknown:
            raise ValueError(
                f"SharedPolicy was built for agents {self.agents}; got unknown {sorted(unknown)}"
            )
        rows = np.stack([np.asarray(obs[a], dtype=np.float32).reshape(-1) for a in present])
        ids = self._ids[[self._index[a] for a in present]]
        actions = predict_action(
            self.model, np.concatenate([rows, ids], axis=1), deterministic=self.deterministic
        )
        return {a: actions[i] for i, a in enumerate(present)}
