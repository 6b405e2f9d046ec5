"""RL entry points: ``make_env``, ``Trainer`` (SB3, native MAPPO / IPPO), run configs, step trainer.

``make_env`` is imported eagerly; everything that needs torch / Stable-Baselines3 (``Trainer``,
``StepTrainer``, ...) is imported on first attribute access, so ``import powerzoo.rl`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from powerzoo.envs.make import make_env
from powerzoo.rl.sb3 import compat as _sb3_compat

_sb3_compat.install()

_LAZY = {
    "Trainer": "powerzoo.rl.trainer",
    "TrainerProtocol": "powerzoo.rl.trainer",
    "make_trainer": "powerzoo.rl.trainer",
    "load_trainer": "powerzoo.rl.trainer",
    "resume_trainer": "powerzoo.rl.trainer",
    "TrainResult": "powerzoo.rl.result",
    "SB3Trainer": "powerzoo.rl.sb3.trainer",
    "SB3MultiAgentTrainer": "powerzoo.rl.sb3.multi_agent",
    "TrainConfig": "powerzoo.rl.config",
    "RLConfig": "powerzoo.rl.config",
    "ConfigError": "powerzoo.rl.config",
    "StepTrainer": "powerzoo.rl.step.trainer",
    "StepTrainerConfig": "powerzoo.rl.step.trainer",
    "MaxSteps": "powerzoo.rl.conditions",
    "RewardThreshold": "powerzoo.rl.conditions",
    "NoImprovement": "powerzoo.rl.conditions",
    "Plateau": "powerzoo.rl.conditions",
    "WallClock": "powerzoo.rl.conditions",
    "CpuTime": "powerzoo.rl.conditions",
    "MAPPOTrainer": "powerzoo.rl.mappo.trainer",
    "MAPPOPolicy": "powerzoo.rl.mappo.policy",
}

__all__ = ["make_env", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'powerzoo.rl' has no attribute {name!r}")
