"""A trained SB3 model with its frozen observation statistics, behind the benchmark policy interface."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from powerzoo.benchmarks.policies import SB3Policy

__all__ = ["ModelPolicy", "frozen_obs_stats"]


def frozen_obs_stats(vec_normalize: Any) -> dict[str, Any] | None:
    """A copy of a ``VecNormalize``'s observation statistics (``None`` if it does not normalise obs).

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

    def __init__(self, model: Any, obs_stats: dict[str, Any] | None = None, deterministic: bool = True) -> None:
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
