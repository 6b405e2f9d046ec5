"""The HDF5 layout of a PowerZoo offline dataset (schema version 1): names, dtypes, attributes.

``N`` transitions, ``E`` episodes, stored episode after episode (each episode contiguous).
Multi-agent datasets keep an agent axis ``A`` (agents in ``attrs["agents"]`` order).

=====================  =====================================  ===================================
dataset                shape, dtype                           meaning
=====================  =====================================  ===================================
``observations``       [N, obs_dim] or [N, A, obs_dim] f32    observation the action was taken on
``next_observations``  same                                   observation after the step (the
                                                              episode's last one at its end)
``actions``            [N, act_dim] or [N, A, act_dim] f32    action passed to ``env.step``
``rewards``            [N] or [N, A] f32                      reward of the step (per agent)
``terminals``          [N] bool                               ``terminated`` (``__all__``)
``truncations``        [N] bool                               ``truncated`` (``__all__``)
``infos/<key>``        [N, ...]                               ``info[key]`` of the step (floats
                                                              as f32, strings as bytes); the
                                                              first agent's info (shared keys)
``episode_starts``     [E] int64                              index of each episode's first step
``episode_lengths``    [E] int64                              steps per episode
``episode_returns``    [E] or [E, A] f64                      undiscounted return (per agent)
=====================  =====================================  ===================================

Root attributes: ``format`` (``"powerzoo-offline"``), ``schema_version``, ``powerzoo_version``,
``task``, ``split``, ``policy``, ``seed``, ``seeding`` (the rule, in words), ``num_envs``,
``n_episodes``, ``n_steps``, ``mean_return`` / ``std_return`` (the system return, as
:func:`~powerzoo.benchmarks.evaluation.evaluate` reports it: under a shared reward each agent's
return), ``mean_team_return`` (summed over agents),
``info_keys``, ``created_utc`` and, where known, ``agents``, ``normalized``,
``observation_fields``, ``action_fields``, ``observation_low`` / ``observation_high`` /
``action_low`` / ``action_high`` (Box bounds, single-agent).

Datasets are gzip-compressed (with the shuffle filter), chunked and resizable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "FORMAT_NAME",
    "SCHEMA_VERSION",
    "TRANSITION_KEYS",
    "EPISODE_KEYS",
    "FLOAT32_KEYS",
    "DEFAULT_INFO_KEYS",
    "require_h5py",
    "storage_array",
]

FORMAT_NAME = "powerzoo-offline"
"""Value of the root attribute ``format``."""
SCHEMA_VERSION = 1
"""Version of the layout above; readers refuse newer files."""
TRANSITION_KEYS = (
    "observations",
    "actions",
    "rewards",
    "next_observations",
    "terminals",
    "truncations",
)
"""Datasets with one row per transition."""
EPISODE_KEYS = ("episode_starts", "episode_lengths", "episode_returns")
"""Datasets with one row per episode."""
FLOAT32_KEYS = frozenset(("observations", "actions", "rewards", "next_observations"))
"""Transition datasets always stored as float32."""
DEFAULT_INFO_KEYS = ("constraint_costs", "cost_sum", "is_safe")
"""Step-info keys stored by default."""


def require_h5py() -> Any:
    """The ``h5py`` module, or an ``ImportError`` naming the pip command."""
    try:
        import h5py
    except ImportError as err:  # pragma: no cover - h5py is in powerzoo[data]
        raise ImportError(
            "offline datasets need h5py: pip install h5py (or pip install 'powerzoo[data]')"
        ) from err
    return h5py


def storage_array(name: str, values: np.ndarray) -> np.ndarray:
    """``values`` of dataset ``name`` in the dtype they are stored with (table above)."""
    kind = values.dtype.kind
    if name in FLOAT32_KEYS or kind == "f":
        return values.astype(np.float32, copy=False)
    if kind in "biuS":
        return values
    if kind == "U":
        return np.char.encode(values, "utf-8")
    raise TypeError(
        f"{name}: values of dtype {values.dtype} cannot be stored in HDF5 "
        "(numbers, bools or strings only)"
    )
