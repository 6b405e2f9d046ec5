"""Behaviour cloning of the oracle: its offline dataset, and an SB3 policy's mean fitted to it.

``BC-PPO`` (:class:`~powerzoo.rl.reference.sb3_trainer.ReferenceSB3Trainer`) starts PPO from a
policy whose Gaussian mean was regressed onto the oracle's actions:

1. the dataset: an HDF5 file of :mod:`powerzoo.benchmarks.offline` (``bc_dataset``, e.g. from
   ``powerzoo collect TASK --policy oracle --split train``), or ``bc_episodes`` oracle episodes
   of the training split collected here with
   :class:`~powerzoo.benchmarks.offline.DatasetGenerator` (into a temporary file); its
   observations and actions must be in the training env's units (``normalized`` attribute);
2. the observation statistics of the run's ``VecNormalize`` (if it normalises observations)
   start at the dataset's mean and variance, and the observations are normalised with them,
   as the policy will see them;
3. :func:`fit_policy_mean`: the actor (features, policy network, action head) minimises the
   mean squared error between its mean action and the oracle's action clipped to the action
   box, with Adam over ``bc_epochs`` passes of shuffled minibatches.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.offline import DatasetGenerator, DatasetLoader
from powerzoo.benchmarks.policies import OraclePolicy
from powerzoo.envs.introspect import inspect_env

__all__ = [
    "BC_DEFAULTS",
    "collect_oracle_dataset",
    "read_oracle_dataset",
    "oracle_arrays",
    "fit_policy_mean",
    "policy_mean",
]

BC_DEFAULTS = {"bc_episodes": 64, "bc_epochs": 50, "bc_learning_rate": 1e-3}
"""Behaviour cloning's defaults: oracle episodes collected, passes over them, Adam step size."""
_BATCH = 256  # transitions per gradient step


def collect_oracle_dataset(env: Any, n_episodes: int, path: str | Path, seed: int = 0) -> Path:
    """Roll the oracle out in ``env`` for ``n_episodes`` episodes into the HDF5 file ``path``.

    Args:
        env: A single-agent PowerZoo env (the training env's options and split).
        n_episodes: Episodes recorded (episode ``i`` resets with ``seed + i``).
        path: The dataset file to write.
        seed: Seed of the first episode.

    Returns:
        ``path``.
    """
    DatasetGenerator(env).collect(OraclePolicy(env), int(n_episodes), path, seed=seed)
    return Path(path)


def read_oracle_dataset(path: str | Path, env: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(observations [N, obs_dim], actions [N, act_dim])`` of the dataset in ``path``,
    checked against ``env`` (same task, the same units, the same shapes).

    Args:
        path: A dataset of :mod:`powerzoo.benchmarks.offline`.
        env: The env the policy will act in (without a reference layer).

    Returns:
        float32 arrays in the env's units.
    """
    facts = inspect_env(env)
    with DatasetLoader(path) as data:
        attrs = data.attrs
        problems = []
        if attrs.get("task") != facts.task_id:
            problems.append(f"task {attrs.get('task')!r}, not {facts.task_id!r}")
        if "normalized" in attrs and bool(attrs["normalized"]) != facts.normalized:
            problems.append(
                f"normalized={bool(attrs['normalized'])}, the run's env {facts.normalized}"
            )
        obs, actions = np.asarray(data.observations), np.asarray(data.actions)
    if obs.shape[1:] != env.observation_space.shape:
        problems.append(f"observations {obs.shape[1:]}, the env's {env.observation_space.shape}")
    if actions.shape[1:] != env.action_space.shape:
        problems.append(f"actions {actions.shape[1:]}, the env's {env.action_space.shape}")
    if problems:
        raise ValueError(f"bc_dataset {path}: {'; '.join(problems)}")
    return obs.astype(np.float32), actions.astype(np.float32)


def oracle_arrays(
    env: Any, dataset: str | Path | None, n_episodes: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The oracle's ``(observations, actions)`` in ``env``'s units: read from ``dataset``, or
    collected into a temporary file when it is ``None``.

    Args:
        env: The single-agent env the policy will act in (its options and split).
        dataset: An offline dataset file, or ``None``.
        n_episodes: Episodes to collect when ``dataset`` is ``None``.
        seed: Seed of the first collected episode.

    Returns:
        float32 arrays ``[N, obs_dim]`` and ``[N, act_dim]``.
    """
    if dataset is not None:
        return read_oracle_dataset(dataset, env)
    with tempfile.TemporaryDirectory(prefix="powerzoo-bc-") as folder:
        path = collect_oracle_dataset(env, n_episodes, Path(folder) / "oracle.h5", seed)
        return read_oracle_dataset(path, env)


def policy_mean(model: Any, obs: Any) -> Any:
    """The Gaussian mean of an SB3 actor-critic policy (``model.policy``) for a tensor of
    normalised observations."""
    policy = model.policy
    features = policy.extract_features(obs, policy.pi_features_extractor)
    return policy.action_net(policy.mlp_extractor.forward_actor(features))


def fit_policy_mean(
    model: Any,
    obs: np.ndarray,
    actions: np.ndarray,
    epochs: int = BC_DEFAULTS["bc_epochs"],
    learning_rate: float = BC_DEFAULTS["bc_learning_rate"],
    seed: int = 0,
) -> dict[str, float]:
    """Regress the mean of ``model``'s policy onto ``actions`` (clipped to the action box).

    Args:
        model: An SB3 PPO / A2C model (an actor-critic policy with ``action_net``).
        obs: Observations [N, obs_dim] as the policy sees them (normalised).
        actions: Target actions [N, act_dim] in the env's units.
        epochs: Passes over the data.
        learning_rate: Adam step size.
        seed: Seed of the minibatch order.

    Returns:
        ``mse_before`` and ``mse_after``: mean squared error of the mean action to the targets
        (the action's units squared), before and after fitting.
    """
    import torch

    space = model.action_space
    target = torch.as_tensor(np.clip(actions, space.low, space.high), dtype=torch.float32)
    x = torch.as_tensor(np.asarray(obs, np.float32))
    policy = model.policy
    params = [
        *policy.pi_features_extractor.parameters(),
        *policy.mlp_extractor.policy_net.parameters(),
        *policy.action_net.parameters(),
    ]
    optimiser = torch.optim.Adam(params, lr=float(learning_rate))
    rng = np.random.default_rng(seed)

    def mse() -> float:
        with torch.no_grad():
            return float(((policy_mean(model, x) - target) ** 2).mean())

    before = mse()
    policy.set_training_mode(True)
    for _ in range(int(epochs)):
        order = torch.as_tensor(rng.permutation(len(x)))
        for start in range(0, len(x), _BATCH):
            rows = order[start : start + _BATCH]
            loss = ((policy_mean(model, x[rows]) - target[rows]) ** 2).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    policy.set_training_mode(False)
    return {"mse_before": before, "mse_after": mse()}
