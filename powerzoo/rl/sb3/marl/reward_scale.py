"""Reward scale of the multi-agent loops: the learner sees rescaled rewards, the env does not
change.

The dispatch tasks pay shared rewards of ``-1e3`` to ``-1e6`` $ per step. Value targets of that
size swamp the gradient (SB3 clips the norm of the joint policy/value gradient), so both loops
rescale rewards for learning only, through ``reward_scale``: ``"auto"`` (default) divides them by a
running estimate of the discounted return's standard deviation (SB3's
``VecNormalize(norm_obs=False, norm_reward=True)``); a number multiplies them by that fixed factor
(``1.0`` = raw rewards). Observations are not touched, so the trained models act directly on
``make_env(task, normalize=True)`` envs with no statistics to carry along.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

__all__ = ["ScaleReward", "scale_rewards"]


class ScaleReward(VecEnvWrapper):
    """Multiplies rewards by a fixed factor (observations and infos untouched)."""

    def __init__(self, venv: VecEnv, scale: float) -> None:
        super().__init__(venv)
        self.scale = float(scale)

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        return obs, rewards * self.scale, dones, infos


def scale_rewards(venv: VecEnv, reward_scale: float | str, gamma: float) -> VecEnv:
    """``venv`` wrapped so the learner sees rescaled rewards (module docstring); ``gamma`` discounts
    the running return of ``"auto"``."""
    if isinstance(reward_scale, str):
        if reward_scale != "auto":
            raise ValueError(
                f"reward_scale must be 'auto' or a positive number, got {reward_scale!r}"
            )
        return VecNormalize(
            venv, norm_obs=False, norm_reward=True, gamma=gamma, clip_reward=np.inf
        )  # no clipping
    if not np.isfinite(reward_scale) or reward_scale <= 0:
        raise ValueError(f"reward_scale must be 'auto' or a positive number, got {reward_scale!r}")
    return venv if reward_scale == 1.0 else ScaleReward(venv, reward_scale)
