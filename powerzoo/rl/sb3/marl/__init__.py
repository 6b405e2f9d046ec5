"""Multi-agent training with Stable-Baselines3: independent learners and one shared policy.

PowerZoo's multi-agent tasks (``marl_opf``, ``opf_118``, ``opf_118_7d``) give every agent its own
observation and action; SB3 trains single-agent policies. The bridge, by job:

* :mod:`~powerzoo.rl.sb3.marl.adapters`: :class:`SingleAgentView` (one agent, the others frozen) and
  :class:`AgentsAsVecEnv` (every agent of ``N`` batched copies as one SB3 ``VecEnv``);
* :mod:`~powerzoo.rl.sb3.marl.loops`: :func:`train_independent_learners` (one model per agent,
  round-robin) and :func:`train_shared_policy` (one policy for all agents, parameter sharing);
* :mod:`~powerzoo.rl.sb3.marl.reward_scale`: rewards rescaled for learning only;
* :class:`SharedPolicy` (in :mod:`powerzoo.rl.sb3.policy`): the shared model acting on the dict env.

The loops accept :data:`ALGORITHMS` (``PPO, A2C, SAC, TD3``), the multi-agent subset of the one
registry :mod:`powerzoo.rl.algorithms`.
"""

from __future__ import annotations

from powerzoo.rl.algorithms import MULTI_AGENT_ALGORITHMS as ALGORITHMS
from powerzoo.rl.sb3.marl.adapters import AgentsAsVecEnv, SingleAgentView
from powerzoo.rl.sb3.marl.loops import (
    ON_POLICY_ROLLOUT,
    SHARED_LOG_STD_INIT,
    train_independent_learners,
    train_shared_policy,
)
from powerzoo.rl.sb3.marl.reward_scale import scale_rewards
from powerzoo.rl.sb3.policy import SharedPolicy

__all__ = [
    "ALGORITHMS",
    "SingleAgentView",
    "AgentsAsVecEnv",
    "SharedPolicy",
    "train_independent_learners",
    "train_shared_policy",
    "scale_rewards",
    "ON_POLICY_ROLLOUT",
    "SHARED_LOG_STD_INIT",
]
