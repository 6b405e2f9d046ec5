"""Collecting a dataset: roll a policy out in a PowerZoo env and stream its transitions to HDF5.

Seeding and reproduction
------------------------
With a single env (Gymnasium, or a multi-agent PettingZoo / dict env), episode ``i`` resets with
``env.reset(seed=seed + i)`` and the policy is seeded with ``seed + i`` (``policy.seed``, when it
has one: :class:`~powerzoo.benchmarks.policies.RandomPolicy` seeds its action space). Any episode
is reproduced by a fresh rollout with that seed and the same policy class;
:func:`~powerzoo.benchmarks.evaluation.evaluate` with the same ``seed`` replays exactly the
dataset's episodes.

With a native vector env (``make_env(task, num_envs=N)``: the fast path, one batched step for ``N``
episodes) the env is reset once with ``seed``, the policy is seeded once with ``seed``, episodes
auto-reset, and they are stored in the order they finish (ties: lower env index first); the same
call reproduces the same file. Policies act on batched observations there (random and SB3
policies do; the task policies need a single env).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from powerzoo.benchmarks.evaluation import rollout
from powerzoo.benchmarks.offline.buffer import EpisodeBuffer
from powerzoo.benchmarks.offline.load import DatasetLoader
from powerzoo.benchmarks.offline.schema import (
    DEFAULT_INFO_KEYS,
    FORMAT_NAME,
    SCHEMA_VERSION,
    TRANSITION_KEYS,
)
from powerzoo.benchmarks.offline.writer import HDF5Appender, write_hdf5_atomically
from powerzoo.benchmarks.policies import Policy, seed_policy
from powerzoo.envs.introspect import agent_spaces, agents_of, env_metadata, inspect_env
from powerzoo.progress import progress_bar

__all__ = ["DatasetGenerator"]


class DatasetGenerator:
    """Collect transitions of a policy in ``env`` into an HDF5 offline dataset (module docstring).

    Args:
        env: a PowerZoo env from :func:`powerzoo.envs.make.make_env`: single-agent Gymnasium env,
            multi-agent PettingZoo Parallel env (``framework="pettingzoo"``) or dict env
            (``framework="auto"``), or native vector env (``num_envs=N``, single-agent; the
            fast path).
        info_keys: step-info keys stored as ``infos/<key>`` (numbers, bools, strings).
        buffer_steps: transitions buffered in memory before they are appended to the file.
        compression_level: gzip level 0-9.
    """

    def __init__(
        self,
        env: Any,
        info_keys: Sequence[str] = DEFAULT_INFO_KEYS,
        *,
        buffer_steps: int = 10_000,
        compression_level: int = 4,
    ) -> None:
        if isinstance(info_keys, str) or not all(isinstance(k, str) for k in info_keys):
            raise TypeError(f"info_keys must be a list of info key names, got {info_keys!r}")
        if int(buffer_steps) < 1:
            raise ValueError(f"buffer_steps must be >= 1, got {buffer_steps}")
        if not 0 <= int(compression_level) <= 9:
            raise ValueError(f"compression_level must be in 0..9, got {compression_level}")
        self.env = env
        self.info_keys = tuple(info_keys)
        self.buffer_steps = int(buffer_steps)
        self.compression_level = int(compression_level)
        self.agents = agents_of(env)
        self.vectorized = isinstance(env, gym.vector.VectorEnv)
        if self.vectorized:
            mode = env.metadata.get("autoreset_mode")
            if mode != gym.vector.AutoresetMode.SAME_STEP and not hasattr(env, "autoreset_as"):
                raise ValueError(
                    f"DatasetGenerator needs a vector env with same-step autoreset (PowerZoo's "
                    f"make_env(task, num_envs=N)), got {mode}"
                )
        elif hasattr(env, "num_envs"):
            raise TypeError(
                f"{type(env).__name__} is not supported; pass make_env(task), make_env(task, "
                "framework='pettingzoo' or 'auto') or a single-agent make_env(task, num_envs=N)"
            )
        self._names = TRANSITION_KEYS + tuple(f"infos/{k}" for k in self.info_keys)

    # ---- public ------------------------------------------------------------------------------
    def collect(
        self,
        policy: Policy,
        n_episodes: int,
        save_path: str | os.PathLike[str],
        seed: int = 0,
        *,
        progress: bool | None = None,
    ) -> DatasetLoader:
        """Roll ``policy`` out for ``n_episodes`` episodes, write ``save_path`` atomically, return
        its loader.

        ``save_path`` never holds a partial dataset: the file is written under a temporary name and
        renamed into place when complete
        (:func:`~powerzoo.benchmarks.offline.writer.write_hdf5_atomically`). ``progress``: show a
        progress bar (``None``: only when stderr is a terminal).

        Args:
            policy: Anything with ``reset()`` and ``act(obs, info)``.
            n_episodes: Episodes to record.
            save_path: The HDF5 file to write.
            seed: Seed of episode 0 (episode ``i`` resets with ``seed + i``).
            progress: Show a progress bar (``None``: only on a terminal).

        Returns:
            A loader of the file written.
        """
        if (
            isinstance(n_episodes, bool)
            or not isinstance(n_episodes, (int, np.integer))
            or n_episodes < 1
        ):
            raise ValueError(f"n_episodes must be a positive int, got {n_episodes!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"seed must be an int, got {seed!r}")
        n_episodes, seed = int(n_episodes), int(seed)
        name = Path(save_path).name

        def fill(h5file: Any) -> None:
            appender = HDF5Appender(h5file, self.compression_level)
            with progress_bar(
                total=n_episodes, unit="ep", desc=f"collect {name}", progress=progress
            ) as bar:
                if self.vectorized:
                    self._collect_vector(policy, n_episodes, seed, appender, bar)
                else:
                    self._collect_episodes(policy, n_episodes, seed, appender, bar)
            h5file.attrs.update(self._attrs(h5file, appender, policy, seed))

        return DatasetLoader(write_hdf5_atomically(save_path, fill))

    # ---- rollouts -----------------------------------------------------------------------------
    def _info_values(self, info: dict[str, Any], copy: bool) -> list[Any]:
        try:
            return [np.array(info[k]) if copy else info[k] for k in self.info_keys]
        except KeyError as err:
            raise ValueError(
                f"info key {err.args[0]!r} is not in the env's step info; "
                f"available: {', '.join(sorted(info))}"
            ) from None

    def _collect_episodes(
        self, policy: Policy, n_episodes: int, seed: int, appender: HDF5Appender, bar: Any
    ) -> None:
        """Single env (Gymnasium or multi-agent dict): episode
        ``i`` from ``seed + i`` via :func:`rollout`."""
        buffer = EpisodeBuffer(self._names, batched=False)
        agents = self.agents
        info_keys = self.info_keys
        add_step = buffer.add_step
        f32 = np.float32
        if agents is None:
            action_shape = self.env.action_space.shape

            def as_arrays(
                obs: Any, action: Any, next_obs: Any
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                return (
                    np.array(obs, dtype=f32),
                    np.array(action, dtype=f32).reshape(action_shape),
                    np.array(next_obs, dtype=f32),
                )
        else:
            spaces = agent_spaces(self.env.action_space, agents)
            action_shapes = [spaces[a].shape for a in agents]

            def as_arrays(
                obs: Any, action: Any, next_obs: Any
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                return (
                    np.stack([np.asarray(obs[a], dtype=f32) for a in agents]),
                    np.stack(
                        [
                            np.asarray(action[a], dtype=f32).reshape(s)
                            for a, s in zip(agents, action_shapes, strict=True)
                        ]
                    ),
                    np.stack([np.asarray(next_obs[a], dtype=f32) for a in agents]),
                )

        def record_step(
            obs: Any,
            action: Any,
            reward: Any,
            next_obs: Any,
            terminated: bool,
            truncated: bool,
            info: dict[str, Any],
        ) -> None:
            obs_arr, action_arr, next_arr = as_arrays(obs, action, next_obs)
            try:
                add_step(
                    (
                        obs_arr,
                        action_arr,
                        reward,
                        next_arr,
                        terminated,
                        truncated,
                        *[info[k] for k in info_keys],
                    )
                )
            except KeyError:
                self._info_values(info, False)  # raises the ValueError naming the missing key
                raise

        for i in range(n_episodes):
            rollout(self.env, policy, seed=seed + i, seed_policy_too=True, on_step=record_step)
            if buffer.n_pending_steps >= self.buffer_steps or i == n_episodes - 1:
                taken = buffer.take()
                assert taken is not None  # every rollout ends an episode
                appender.write_episodes(*taken)
            bar.update(1)

    def _collect_vector(
        self, policy: Policy, n_episodes: int, seed: int, appender: HDF5Appender, bar: Any
    ) -> None:
        """Native vector env: reset once with ``seed``, autoreset, keep episodes in finishing order.

        A PowerZoo vector env in another autoreset mode collects in same-step mode (restored after).
        """
        env = self.env
        if env.metadata.get("autoreset_mode") != gym.vector.AutoresetMode.SAME_STEP:
            with env.autoreset_as("same_step"):
                self._collect_same_step(policy, n_episodes, seed, appender, bar)
        else:
            self._collect_same_step(policy, n_episodes, seed, appender, bar)

    def _collect_same_step(
        self, policy: Policy, n_episodes: int, seed: int, appender: HDF5Appender, bar: Any
    ) -> None:
        env = self.env
        buffer = EpisodeBuffer(self._names, batched=True)
        obs, info = env.reset(seed=seed)
        seed_policy(policy, seed)
        policy.reset()
        action_shape = env.action_space.shape
        finished_pending = 0  # episodes finished in the buffer, not yet written
        while appender.n_episodes < n_episodes:
            action = np.array(policy.act(obs, info), dtype=np.float32).reshape(action_shape)
            out = env.step(action)
            if len(out) != 5:
                raise TypeError(
                    "DatasetGenerator needs step() -> (obs, reward, terminated, truncated, info); "
                    "build the env without safe_rl=True"
                )
            next_obs, reward, terminated, truncated, info = out
            done = np.logical_or(terminated, truncated)
            last_obs = next_obs
            if done.any():
                last_obs = np.where(
                    done.reshape((-1,) + (1,) * (next_obs.ndim - 1)), info["final_obs"], next_obs
                )
                finished_pending += int(done.sum())
            buffer.add(
                np.array(obs, dtype=np.float32),
                action,
                np.array(reward, dtype=np.float64),
                np.array(last_obs, dtype=np.float32),
                np.array(terminated, dtype=bool),
                np.array(truncated, dtype=bool),
                *self._info_values(info, True),
            )
            needed = n_episodes - appender.n_episodes
            if finished_pending and (
                finished_pending >= needed
                or buffer.n_pending_steps * env.num_envs >= self.buffer_steps
            ):
                taken = buffer.take(limit=needed)
                assert taken is not None
                bar.update(appender.write_episodes(*taken))
                finished_pending = 0
            obs = next_obs

    # ---- metadata -----------------------------------------------------------------------------
    def _attrs(
        self, h5file: Any, appender: HDF5Appender, policy: Policy, seed: int
    ) -> dict[str, Any]:
        """Root attributes of the finished file (schema
        in :mod:`powerzoo.benchmarks.offline.schema`)."""
        import powerzoo

        returns = np.asarray(h5file["episode_returns"][()], dtype=np.float64)
        team_returns = returns if returns.ndim == 1 else returns.sum(axis=1)
        facts = inspect_env(self.env)
        shared = facts is not None and bool(getattr(facts.spec, "shared_reward", False))
        # the system return, as evaluate reports it: under a shared reward each agent's return
        system_returns = returns.mean(axis=1) if returns.ndim == 2 and shared else team_returns
        meta = env_metadata(self.env)
        attrs: dict[str, Any] = {
            "format": FORMAT_NAME,
            "schema_version": SCHEMA_VERSION,
            "powerzoo_version": powerzoo.__version__,
            "task": meta["task"] or "",
            "split": meta["split"] or "",
            "policy": str(getattr(policy, "name", type(policy).__name__)),
            "seed": seed,
            "seeding": (
                "env.reset(seed=seed) once and the policy seeded with seed; "
                "episodes auto-reset and are stored in the order they finish"
                if self.vectorized
                else "episode i: env.reset(seed=seed + i) and the policy seeded with seed + i"
            ),
            "num_envs": int(self.env.num_envs) if self.vectorized else 1,
            "n_episodes": appender.n_episodes,
            "n_steps": appender.n_steps,
            "mean_return": float(system_returns.mean()),
            "std_return": float(system_returns.std()),
            "mean_team_return": float(team_returns.mean()),
            "info_keys": list(self.info_keys),
            "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"
            ),
        }
        facts = inspect_env(self.env)
        if facts is not None:
            attrs["normalized"] = facts.normalized
        if self.agents is not None:
            attrs["agents"] = list(self.agents)
        else:
            attrs.update(self._single_agent_space_attrs(facts))
        return attrs

    def _single_agent_space_attrs(self, facts: Any) -> dict[str, Any]:
        """Box bounds of the spaces and, when the spaces are the task's vectors,
        their field names."""
        env = self.env
        obs_space = env.single_observation_space if self.vectorized else env.observation_space
        act_space = env.single_action_space if self.vectorized else env.action_space
        attrs: dict[str, Any] = {}
        for prefix, space in (("observation", obs_space), ("action", act_space)):
            if isinstance(space, gym.spaces.Box):
                attrs[f"{prefix}_low"], attrs[f"{prefix}_high"] = space.low, space.high
        if facts is not None:
            for prefix, vector, space in (
                ("observation", facts.spec.observation, obs_space),
                ("action", facts.spec.action, act_space),
            ):
                if space.shape == (len(vector.names),):
                    attrs[f"{prefix}_fields"] = list(vector.names)
        return attrs
