"""Native on-policy training: MAPPO / IPPO and their Lagrangian variants (torch), and PPO-L on
single-agent tasks (:mod:`~powerzoo.rl.mappo.one_agent`: the task's one agent).

Modules, in reading order: :mod:`~powerzoo.rl.mappo.hparams` (names and hyperparameters),
:mod:`~powerzoo.rl.mappo.networks` (actor, critic, value normaliser, joint noise),
:mod:`~powerzoo.rl.mappo.buffer` (rollout arrays and GAE), :mod:`~powerzoo.rl.mappo.ppo` (the
plain PPO step and epochs), the variants that prepare what it trains on
(:mod:`~powerzoo.rl.mappo.exploration`: independent or joint exploration;
:mod:`~powerzoo.rl.mappo.lagrangian`: multipliers and cost advantages;
:mod:`~powerzoo.rl.mappo.counterfactual`: the counterfactual baseline),
:mod:`~powerzoo.rl.mappo.algorithm` (networks per group, acting, the update),
:mod:`~powerzoo.rl.mappo.collector` (batched rollouts on the native multi-agent vector env),
:mod:`~powerzoo.rl.mappo.remote` (the same rollouts from Ray actors,
``algorithm_kwargs: {rollout_workers: K}``), :mod:`~powerzoo.rl.mappo.policy` (the exported,
torch-free policy) and :mod:`~powerzoo.rl.mappo.trainer` (run folder, evaluation, checkpoints,
resume).

Use it through :class:`powerzoo.rl.Trainer`::

    Trainer("marl_opf", algorithm="MAPPO", total_timesteps=200_000, n_envs=64).train()

Nothing heavy is imported until an attribute is asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

from powerzoo.rl.mappo.hparams import NATIVE_MARL_ALGORITHMS, MAPPOParams

_LAZY = {
    "MAPPOTrainer": "powerzoo.rl.mappo.trainer",
    "MAPPOPolicy": "powerzoo.rl.mappo.policy",
    "MultiAgentPPO": "powerzoo.rl.mappo.algorithm",
    "compute_gae": "powerzoo.rl.mappo.buffer",
}

__all__ = ["NATIVE_MARL_ALGORITHMS", "MAPPOParams", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'powerzoo.rl.mappo' has no attribute {name!r}")
