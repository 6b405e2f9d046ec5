"""Export of a single-agent PowerZoo dataset to a
local Minari dataset (optional ``minari`` package)."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np

from powerzoo.fileio import check_plain_name

__all__ = ["to_minari", "dataset_env_spec", "check_dataset_id"]


def check_dataset_id(dataset_id: Any) -> str:
    """``dataset_id`` if each of its ``/``-separated parts is a plain folder name
    (:func:`powerzoo.fileio.check_plain_name`, the rule of run names), else ``ValueError``
    naming the id and the part."""
    if not isinstance(dataset_id, str):
        raise ValueError(f"dataset id must be a string, got {dataset_id!r}")
    for part in dataset_id.split("/"):
        check_plain_name(part, f"dataset id {dataset_id!r}: part")
    return dataset_id


def to_minari(dataset: Any, dataset_id: str, **kwargs: Any) -> Any:
    """Export ``dataset`` (a :class:`~powerzoo.benchmarks.offline.load.DatasetLoader`) as Minari
    ``dataset_id``.

    Single-agent datasets with Box bounds only. Minari stores ``T + 1`` observations per episode
    (the last ``next_observation`` appended). ``kwargs`` go to
    ``minari.create_dataset_from_buffers`` (``author``, ``description``, ...); ``algorithm_name``
    defaults to the dataset's policy and ``env`` to the task's registered Gymnasium id with the
    dataset's split and normalisation, so ``minari.load_dataset(dataset_id).recover_environment()``
    rebuilds the env. ``dataset_id`` (``[namespace/]name-v<N>``) becomes folders under Minari's
    dataset root: each ``/``-separated part must be a plain folder name
    (:func:`check_dataset_id`), so no id writes outside it.
    """
    check_dataset_id(dataset_id)
    try:
        import minari
        from minari.data_collector import EpisodeBuffer
    except ImportError as err:
        raise ImportError(
            "to_minari needs the optional package minari: pip install minari"
        ) from err
    if dataset.agents is not None:
        raise ValueError(
            f"{dataset.path}: Minari datasets are single-agent; "
            f"this one has agents {dataset.agents}"
        )
    attrs = dataset.attrs
    if "observation_low" not in attrs or "action_low" not in attrs:
        raise ValueError(
            f"{dataset.path}: no Box bounds stored (observation_low / action_low); "
            "cannot build Minari spaces"
        )
    obs_space = gym.spaces.Box(
        np.asarray(attrs["observation_low"]),
        np.asarray(attrs["observation_high"]),
        dtype=np.float32,
    )
    act_space = gym.spaces.Box(
        np.asarray(attrs["action_low"]), np.asarray(attrs["action_high"]), dtype=np.float32
    )
    buffers = []
    for i in range(dataset.n_episodes):
        ep = dataset.episode(i)
        buffers.append(
            EpisodeBuffer(
                id=i,
                observations=np.concatenate([ep["observations"], ep["next_observations"][-1:]]),
                actions=ep["actions"],
                rewards=ep["rewards"],
                terminations=ep["terminals"],
                truncations=ep["truncations"],
            )
        )
    kwargs.setdefault("algorithm_name", attrs.get("policy"))
    if "env" not in kwargs:
        kwargs["env"] = dataset_env_spec(attrs)
    return minari.create_dataset_from_buffers(
        dataset_id, buffer=buffers, observation_space=obs_space, action_space=act_space, **kwargs
    )


def dataset_env_spec(attrs: dict[str, Any]) -> gym.envs.registration.EnvSpec | None:
    """The Gymnasium spec that rebuilds a dataset's env (task id, split, normalisation), or
    ``None``.

    ``None`` when the task has no registered Gymnasium id (multi-agent tasks).
    """
    from powerzoo.envs.registration import register_envs
    from powerzoo.tasks import list_tasks, task_spec

    task = str(attrs.get("task", ""))
    env_id = task_spec(task).gym_id if task in list_tasks() else None
    if env_id is None:
        return None
    register_envs()
    spec = copy.deepcopy(gym.spec(env_id))
    spec.kwargs = {
        **spec.kwargs,
        "split": str(attrs.get("split") or "train"),
        "normalize": bool(attrs.get("normalized", False)),
    }
    return spec
