"""Offline RL datasets: collect transitions into HDF5 and read them back.

:class:`DatasetGenerator` rolls a policy out in a PowerZoo env and streams the transitions to an
HDF5 file; :class:`DatasetLoader` opens such a file, checks it and serves whole arrays, episodes
and shuffled minibatches. ``h5py`` is needed (``pip install h5py`` or ``powerzoo[data]``).

HDF5 schema (version 1)
-----------------------
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
``n_episodes``, ``n_steps``, ``mean_return`` / ``std_return`` (team return: summed over agents),
``info_keys``, ``created_utc`` and, where known, ``agents``, ``normalized``,
``observation_fields``, ``action_fields``, ``observation_low`` / ``observation_high`` /
``action_low`` / ``action_high`` (Box bounds, single-agent).

Datasets are gzip-compressed (with the shuffle filter), chunked and resizable: transitions are
buffered in numpy and appended every ``buffer_steps`` steps, so memory does not grow with the
number of episodes. The file is written under a temporary name in the target folder and renamed
into place (``os.replace``) only when complete; an exception or ``KeyboardInterrupt`` removes the
temporary file, so ``save_path`` never holds a partial dataset. (A process killed with SIGKILL
cannot clean up: its ``.<name>.<pid>.<hex>.tmp`` file stays behind, but ``save_path`` is untouched.)

Seeding and reproduction
------------------------
With a single env (Gymnasium, or a multi-agent dict env), episode ``i`` resets with
``env.reset(seed=seed + i)`` and the policy is seeded with ``seed + i`` (``policy.seed``, when it
has one: :class:`~powerzoo.benchmarks.policies.RandomPolicy` seeds its action space). Any episode
is reproduced by a fresh rollout with that seed and the same policy class; :func:`evaluate` with the
same ``seed`` replays exactly the dataset's episodes.

With a native vector env (``make_env(task, num_envs=N)``: the fast path, one batched step for ``N``
episodes) the env is reset once with ``seed``, the policy is seeded once with ``seed``, episodes
auto-reset, and they are stored in the order they finish (ties: lower env index first); the same
call reproduces the same file. Policies act on batched observations there (random and SB3
policies do; the task policies need a single env).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from powerzoo.benchmarks.evaluation import agents_of, env_metadata, rollout, task_of
from powerzoo.benchmarks.policies import Policy, find_normalizer, seed_policy

__all__ = ["DatasetGenerator", "DatasetLoader", "SCHEMA_VERSION", "FORMAT_NAME"]

FORMAT_NAME = "powerzoo-offline"
SCHEMA_VERSION = 1
TRANSITION_KEYS = ("observations", "actions", "rewards", "next_observations", "terminals", "truncations")
EPISODE_KEYS = ("episode_starts", "episode_lengths", "episode_returns")
_FLOAT32_KEYS = frozenset(("observations", "actions", "rewards", "next_observations"))
_CHUNK_BYTES = 128 * 1024  # target size of one HDF5 chunk before compression
DEFAULT_INFO_KEYS = ("constraint_costs", "cost_sum", "is_safe")


def _require_h5py() -> Any:
    try:
        import h5py
    except ImportError as err:  # pragma: no cover - h5py is in powerzoo[data]
        raise ImportError("offline datasets need h5py: pip install h5py (or pip install 'powerzoo[data]')") from err
    return h5py


# ---- collection: step buffer ------------------------------------------------------------------
class _EpisodeBuffer:
    """Step-major transitions of ``B`` parallel episode streams; hands out finished episodes.

    Each call to :meth:`add` appends one step of every stream (arrays with a leading axis ``B``
    when ``batched``, single values otherwise, i.e. ``B = 1``). :meth:`take` returns the finished
    episodes, episode-major in the order they finished, and keeps the unfinished tails.
    """

    def __init__(self, names: Sequence[str], batched: bool) -> None:
        self.names = tuple(names)
        self.batched = batched
        self.steps: list[tuple[Any, ...]] = []  # one tuple per step (one append per step, not one per name)
        self._done_index = (self.names.index("terminals"), self.names.index("truncations"))
        self._row_start: np.ndarray | None = None  # first pending step of each stream's episode

    @property
    def n_pending_steps(self) -> int:
        """Steps held per stream (multiply by ``B`` for transitions)."""
        return len(self.steps)

    def add(self, *values: Any) -> None:
        """Append one step: one value per name, in ``names`` order."""
        if len(values) != len(self.names):
            raise ValueError(f"add() needs {len(self.names)} values ({', '.join(self.names)}), got {len(values)}")
        self.steps.append(values)

    def add_step(self, values: tuple[Any, ...]) -> None:
        """:meth:`add` with the values already in a tuple, unchecked (the collectors' hot path)."""
        self.steps.append(values)

    def take(self, limit: int | None = None) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
        """Finished episodes (at most ``limit``): ``({name: [n_steps, ...]}, lengths[E])`` or ``None``."""
        if not self.steps:
            return None
        columns = zip(*self.steps, strict=True)
        stacked = [np.asarray(c) if self.batched else np.asarray(c)[:, None] for c in columns]
        done = stacked[self._done_index[0]] | stacked[self._done_index[1]]  # [T, B]
        n_steps, n_streams = done.shape
        row_start = np.zeros(n_streams, np.int64) if self._row_start is None else self._row_start
        done &= np.arange(n_steps)[:, None] >= row_start  # ends before a stream's start were taken already
        t_end, rows = np.nonzero(done)  # sorted by step, then stream: the order episodes finish
        if limit is not None:
            t_end, rows = t_end[:limit], rows[:limit]
        if t_end.size == 0:
            return None
        # an episode starts after the previous end in its stream, or where the stream's pending data starts
        by_stream = np.lexsort((t_end, rows))
        r_sorted, t_sorted = rows[by_stream], t_end[by_stream]
        first_in_stream = np.ones(r_sorted.size, bool)
        first_in_stream[1:] = r_sorted[1:] != r_sorted[:-1]
        prev_end = np.concatenate([[0], t_sorted[:-1] + 1])
        t_start = np.empty_like(t_end)
        t_start[by_stream] = np.where(first_in_stream, row_start[r_sorted], prev_end)
        lengths = t_end - t_start + 1
        offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
        steps = np.repeat(t_start, lengths) + np.arange(offsets.size) - offsets
        flat = steps * n_streams + np.repeat(rows, lengths)
        out = {
            name: a.reshape((n_steps * n_streams, *a.shape[2:]))[flat]
            for name, a in zip(self.names, stacked, strict=True)
        }
        new_start = row_start.copy()
        np.maximum.at(new_start, rows, t_end + 1)
        cut = int(new_start.min())
        del self.steps[:cut]
        self._row_start = new_start - cut
        return out, lengths


# ---- collection: HDF5 appender ----------------------------------------------------------------
def _storage_array(name: str, values: np.ndarray) -> np.ndarray:
    """``values`` in the dtype they are stored with (schema table in the module docstring)."""
    kind = values.dtype.kind
    if name in _FLOAT32_KEYS or kind == "f":
        return values.astype(np.float32, copy=False)
    if kind in "biuS":
        return values
    if kind == "U":
        return np.char.encode(values, "utf-8")
    raise TypeError(f"{name}: values of dtype {values.dtype} cannot be stored in HDF5 (numbers, bools or strings only)")


class _HDF5Appender:
    """Appends blocks of whole episodes to chunked, gzip-compressed, resizable datasets."""

    def __init__(self, h5file: Any, compression_level: int) -> None:
        self.file = h5file
        self.compression_level = compression_level
        self.n_steps = 0
        self.n_episodes = 0

    def _append(self, name: str, block: np.ndarray) -> None:
        dataset = self.file.get(name)
        row_shape = block.shape[1:]
        if dataset is None:
            row_bytes = max(1, block.dtype.itemsize * int(np.prod(row_shape, dtype=np.int64)))
            chunk_rows = int(np.clip(_CHUNK_BYTES // row_bytes, 1, 65536))
            dataset = self.file.create_dataset(
                name, shape=(0, *row_shape), maxshape=(None, *row_shape), dtype=block.dtype,
                chunks=(chunk_rows, *row_shape), compression="gzip",
                compression_opts=self.compression_level, shuffle=True,
            )
        elif dataset.shape[1:] != row_shape:
            raise ValueError(f"{name}: rows changed shape from {dataset.shape[1:]} to {row_shape} during collection")
        n = dataset.shape[0]
        dataset.resize(n + block.shape[0], axis=0)
        dataset[n:] = block

    def write_episodes(self, columns: dict[str, np.ndarray], lengths: np.ndarray) -> int:
        """Append a block of whole episodes (episode-major columns); returns the number of episodes."""
        starts_in_block = np.cumsum(lengths) - lengths
        returns = np.add.reduceat(np.asarray(columns["rewards"], dtype=np.float64), starts_in_block, axis=0)
        for name, values in columns.items():
            self._append(name, _storage_array(name, values))
        self._append("episode_starts", (self.n_steps + starts_in_block).astype(np.int64))
        self._append("episode_lengths", lengths.astype(np.int64))
        self._append("episode_returns", returns)
        self.n_steps += int(lengths.sum())
        self.n_episodes += int(lengths.size)
        self.file.flush()
        return int(lengths.size)


# ---- collection ----------------------------------------------------------------------------------
def _is_normalized(env: Any) -> bool | None:
    """Whether ``env`` serves normalised observations / actions (``None`` if it cannot tell)."""
    if isinstance(env, gym.Wrapper):
        return find_normalizer(env) is not None
    for holder in (env, getattr(env, "core", None)):  # native vector env, multi-agent adapters
        if holder is not None and hasattr(holder, "obs_scaler"):
            return holder.obs_scaler is not None
    return False if hasattr(env, "task") else None


class DatasetGenerator:
    """Collect transitions of a policy in ``env`` into an HDF5 offline dataset (module docstring).

    Args:
        env: a PowerZoo env from :func:`powerzoo.rl.make_env`: single-agent Gymnasium env,
            multi-agent dict env (``framework="auto"``), or native vector env (``num_envs=N``,
            single-agent; the fast path).
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
            if mode != gym.vector.AutoresetMode.SAME_STEP:
                raise ValueError(f"DatasetGenerator needs a vector env with same-step autoreset (PowerZoo's), got {mode}")
        elif hasattr(env, "num_envs"):
            raise TypeError(
                f"{type(env).__name__} is not supported; pass make_env(task), make_env(task, framework='auto') "
                "or a single-agent make_env(task, num_envs=N)"
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
        """Roll ``policy`` out for ``n_episodes`` episodes, write ``save_path`` atomically, return its loader.

        ``progress``: show a tqdm bar (default: when stderr is a terminal).
        """
        h5py = _require_h5py()
        from tqdm.auto import tqdm

        if isinstance(n_episodes, bool) or not isinstance(n_episodes, (int, np.integer)) or n_episodes < 1:
            raise ValueError(f"n_episodes must be a positive int, got {n_episodes!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"seed must be an int, got {seed!r}")
        n_episodes, seed = int(n_episodes), int(seed)
        save_path = Path(save_path)
        save_path.parent.mkdir(parents=True, exist_ok=True)
        tmp_path = save_path.with_name(f".{save_path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        show = sys.stderr.isatty() if progress is None else progress
        try:
            with h5py.File(tmp_path, "x", rdcc_nbytes=4 * 1024**2) as h5file:
                appender = _HDF5Appender(h5file, self.compression_level)
                with tqdm(total=n_episodes, unit="ep", desc=f"collect {save_path.name}", disable=not show) as bar:
                    if self.vectorized:
                        self._collect_vector(policy, n_episodes, seed, appender, bar)
                    else:
                        self._collect_episodes(policy, n_episodes, seed, appender, bar)
                self._write_attrs(h5file, appender, policy, seed)
            _fsync(tmp_path)
            os.replace(tmp_path, save_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp_path)
            raise
        return DatasetLoader(save_path)

    # ---- rollouts -----------------------------------------------------------------------------
    def _info_values(self, info: dict[str, Any], copy: bool) -> list[Any]:
        try:
            return [np.array(info[k]) if copy else info[k] for k in self.info_keys]
        except KeyError as err:
            raise ValueError(
                f"info key {err.args[0]!r} is not in the env's step info; available: {', '.join(sorted(info))}"
            ) from None

    def _collect_episodes(self, policy: Policy, n_episodes: int, seed: int, appender: _HDF5Appender, bar: Any) -> None:
        """Single env (Gymnasium or multi-agent dict): episode ``i`` from ``seed + i`` via :func:`rollout`."""
        buffer = _EpisodeBuffer(self._names, batched=False)
        agents = self.agents
        info_keys = self.info_keys
        add_step = buffer.add_step
        f32 = np.float32
        if agents is None:
            action_shape = self.env.action_space.shape

            def as_arrays(obs: Any, action: Any, next_obs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                return (np.array(obs, dtype=f32), np.array(action, dtype=f32).reshape(action_shape),
                        np.array(next_obs, dtype=f32))
        else:
            action_space = self.env.action_space
            action_shapes = [action_space[a].shape for a in agents]

            def as_arrays(obs: Any, action: Any, next_obs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                return (
                    np.stack([np.asarray(obs[a], dtype=f32) for a in agents]),
                    np.stack([np.asarray(action[a], dtype=f32).reshape(s) for a, s in zip(agents, action_shapes, strict=True)]),
                    np.stack([np.asarray(next_obs[a], dtype=f32) for a in agents]),
                )

        def record_step(obs: Any, action: Any, reward: Any, next_obs: Any, terminated: bool, truncated: bool,
                        info: dict[str, Any]) -> None:
            obs_arr, action_arr, next_arr = as_arrays(obs, action, next_obs)
            try:
                add_step((obs_arr, action_arr, reward, next_arr, terminated, truncated, *[info[k] for k in info_keys]))
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

    def _collect_vector(self, policy: Policy, n_episodes: int, seed: int, appender: _HDF5Appender, bar: Any) -> None:
        """Native vector env: reset once with ``seed``, autoreset, keep episodes in finishing order."""
        env = self.env
        buffer = _EpisodeBuffer(self._names, batched=True)
        obs, info = env.reset(seed=seed)
        seed_policy(policy, seed)
        policy.reset()
        action_shape = env.action_space.shape
        finished_pending = 0  # episodes finished in the buffer, not yet written
        while appender.n_episodes < n_episodes:
            action = np.array(policy.act(obs, info), dtype=np.float32).reshape(action_shape)
            out = env.step(action)
            if len(out) != 5:
                raise TypeError("DatasetGenerator needs step() -> (obs, reward, terminated, truncated, info); "
                                "build the env without safe_rl=True")
            next_obs, reward, terminated, truncated, info = out
            done = np.logical_or(terminated, truncated)
            last_obs = next_obs
            if done.any():
                last_obs = np.where(done.reshape((-1,) + (1,) * (next_obs.ndim - 1)), info["final_obs"], next_obs)
                finished_pending += int(done.sum())
            buffer.add(np.array(obs, dtype=np.float32), action, np.array(reward, dtype=np.float64),
                       np.array(last_obs, dtype=np.float32), np.array(terminated, dtype=bool),
                       np.array(truncated, dtype=bool), *self._info_values(info, True))
            needed = n_episodes - appender.n_episodes
            if finished_pending and (finished_pending >= needed or buffer.n_pending_steps * env.num_envs >= self.buffer_steps):
                taken = buffer.take(limit=needed)
                assert taken is not None
                bar.update(appender.write_episodes(*taken))
                finished_pending = 0
            obs = next_obs

    # ---- metadata -----------------------------------------------------------------------------
    def _write_attrs(self, h5file: Any, appender: _HDF5Appender, policy: Policy, seed: int) -> None:
        import powerzoo

        returns = np.asarray(h5file["episode_returns"][()], dtype=np.float64)
        team_returns = returns if returns.ndim == 1 else returns.sum(axis=1)
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
                "env.reset(seed=seed) once and the policy seeded with seed; episodes auto-reset and are stored "
                "in the order they finish" if self.vectorized else
                "episode i: env.reset(seed=seed + i) and the policy seeded with seed + i"
            ),
            "num_envs": int(self.env.num_envs) if self.vectorized else 1,
            "n_episodes": appender.n_episodes,
            "n_steps": appender.n_steps,
            "mean_return": float(team_returns.mean()),
            "std_return": float(team_returns.std()),
            "info_keys": list(self.info_keys),
            "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        normalized = _is_normalized(self.env)
        if normalized is not None:
            attrs["normalized"] = normalized
        if self.agents is not None:
            attrs["agents"] = list(self.agents)
        else:
            attrs.update(self._single_agent_space_attrs())
        h5file.attrs.update(attrs)

    def _single_agent_space_attrs(self) -> dict[str, Any]:
        env = self.env
        obs_space = env.single_observation_space if self.vectorized else env.observation_space
        act_space = env.single_action_space if self.vectorized else env.action_space
        attrs: dict[str, Any] = {}
        for prefix, space in (("observation", obs_space), ("action", act_space)):
            if isinstance(space, gym.spaces.Box):
                attrs[f"{prefix}_low"], attrs[f"{prefix}_high"] = space.low, space.high
        task = task_of(env)
        if task is not None:
            for prefix, vector, space in (("observation", task.spec.observation, obs_space),
                                          ("action", task.spec.action, act_space)):
                if space.shape == (len(vector.names),):
                    attrs[f"{prefix}_fields"] = list(vector.names)
        return attrs


def _fsync(path: Path) -> None:
    """Force ``path``'s bytes to disk before it is renamed into place."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---- reading ------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """HDF5 attribute value as a plain Python value (lists of str, ints, floats, bools)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OSU":
            return [_plain(v) for v in value.tolist()]
        return value
    if isinstance(value, np.generic):
        return value.item()
    return value


class DatasetLoader:
    """Read a PowerZoo offline dataset (module docstring) after checking its schema.

    Whole arrays are properties (``observations``, ``next_observations``, ``actions``, ``rewards``,
    ``terminals``, ``truncations``, ``infos``, ``episode_starts`` / ``episode_lengths`` /
    ``episode_returns``), read on first access and kept. :meth:`episode` reads one episode from
    disk; :meth:`iter_minibatches` serves shuffled minibatches. Use as a context manager, or call
    :meth:`close`, to release the file.

    Raises ``FileNotFoundError`` if ``path`` does not exist and ``ValueError`` naming the path and
    the problem if it is not a readable HDF5 file (truncated, corrupt), not a PowerZoo dataset, or
    has missing or inconsistent datasets.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        h5py = _require_h5py()
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"offline dataset {self.path} not found")
        try:
            self._file = h5py.File(self.path, "r")
        except OSError as err:
            raise ValueError(
                f"{self.path} cannot be opened as HDF5 (truncated, corrupt or not an HDF5 file): {err}"
            ) from None
        try:
            self._check_schema()
        except BaseException:
            self._file.close()
            raise

    # ---- schema check ------------------------------------------------------------------------
    def _fail(self, problem: str) -> ValueError:
        return ValueError(f"{self.path}: {problem}")

    def _check_schema(self) -> None:
        f, attrs = self._file, self._file.attrs
        found = _plain(attrs.get("format"))
        if found != FORMAT_NAME:
            raise self._fail(
                f"an HDF5 file but not a PowerZoo offline dataset (attribute format={found!r}, expected "
                f"{FORMAT_NAME!r}); top-level entries: {sorted(f.keys())}"
            )
        version = int(attrs.get("schema_version", -1))
        if version > SCHEMA_VERSION:
            raise self._fail(f"schema version {version} is newer than this PowerZoo reads ({SCHEMA_VERSION}); upgrade powerzoo")
        missing = [k for k in TRANSITION_KEYS + EPISODE_KEYS if k not in f]
        missing += [f"attribute {k}" for k in ("n_steps", "n_episodes") if k not in attrs]
        if missing:
            raise self._fail(f"missing {', '.join(missing)} (schema version {SCHEMA_VERSION} needs "
                             f"{', '.join(TRANSITION_KEYS + EPISODE_KEYS)} and attributes n_steps, n_episodes)")
        n_steps, n_episodes = int(attrs["n_steps"]), int(attrs["n_episodes"])
        expected = dict.fromkeys((*TRANSITION_KEYS, *(f"infos/{k}" for k in self.info_keys)), n_steps)
        expected.update(dict.fromkeys(EPISODE_KEYS, n_episodes))
        for name, rows in expected.items():
            found_rows = f[name].shape[0] if f[name].shape else 0
            if found_rows != rows:
                which = "n_episodes" if name in EPISODE_KEYS else "n_steps"
                raise self._fail(f"{name} has {found_rows} rows, expected {rows} ({which}); the file is inconsistent")
            try:
                if rows:
                    f[name][rows - 1]  # decompress the last chunk: catches damaged data early
            except (OSError, RuntimeError) as err:
                raise self._fail(f"{name} cannot be read (truncated or corrupt file): {err}") from None
        lengths = self.episode_lengths
        if int(lengths.sum()) != n_steps or not np.array_equal(self.episode_starts, np.cumsum(lengths) - lengths):
            raise self._fail("episode_starts / episode_lengths do not tile the transitions; the file is inconsistent")

    # ---- metadata ----------------------------------------------------------------------------
    @cached_property
    def attrs(self) -> dict[str, Any]:
        """Root attributes (task, split, policy, seed, n_episodes, n_steps, mean/std return, ...)."""
        return {k: _plain(v) for k, v in self._file.attrs.items()}

    @property
    def n_steps(self) -> int:
        """Number of transitions."""
        return int(self._file.attrs["n_steps"])

    @property
    def n_episodes(self) -> int:
        """Number of episodes."""
        return int(self._file.attrs["n_episodes"])

    @property
    def agents(self) -> list[str] | None:
        """Agent names (order of the agent axis), ``None`` for single-agent datasets."""
        return self.attrs.get("agents")

    @property
    def info_keys(self) -> list[str]:
        """Info keys stored under ``infos/``."""
        return sorted(self._file["infos"].keys()) if "infos" in self._file else []

    def __len__(self) -> int:
        return self.n_steps

    def __repr__(self) -> str:
        a = self.attrs
        return (f"DatasetLoader({str(self.path)!r}: task={a.get('task')!r}, split={a.get('split')!r}, "
                f"policy={a.get('policy')!r}, {self.n_episodes} episodes, {self.n_steps} steps)")

    # ---- whole arrays ------------------------------------------------------------------------
    def _read(self, name: str) -> np.ndarray:
        return self._file[name][()]

    @cached_property
    def observations(self) -> np.ndarray:
        return self._read("observations")

    @cached_property
    def next_observations(self) -> np.ndarray:
        return self._read("next_observations")

    @cached_property
    def actions(self) -> np.ndarray:
        return self._read("actions")

    @cached_property
    def rewards(self) -> np.ndarray:
        return self._read("rewards")

    @cached_property
    def terminals(self) -> np.ndarray:
        return self._read("terminals")

    @cached_property
    def truncations(self) -> np.ndarray:
        return self._read("truncations")

    @cached_property
    def infos(self) -> dict[str, np.ndarray]:
        return {k: self._read(f"infos/{k}") for k in self.info_keys}

    @cached_property
    def episode_starts(self) -> np.ndarray:
        return self._read("episode_starts")

    @cached_property
    def episode_lengths(self) -> np.ndarray:
        return self._read("episode_lengths")

    @cached_property
    def episode_returns(self) -> np.ndarray:
        return self._read("episode_returns")

    # ---- episodes and minibatches ------------------------------------------------------------
    def episode(self, index: int) -> dict[str, Any]:
        """Episode ``index`` (negative counts from the end): the transition arrays and ``infos``."""
        if not -self.n_episodes <= index < self.n_episodes:
            raise IndexError(f"episode {index} out of range; the dataset has {self.n_episodes} episodes")
        start = int(self.episode_starts[index])
        rows = slice(start, start + int(self.episode_lengths[index]))
        out: dict[str, Any] = {k: self._file[k][rows] for k in TRANSITION_KEYS}
        out["infos"] = {k: self._file[f"infos/{k}"][rows] for k in self.info_keys}
        return out

    def iter_minibatches(
        self, batch_size: int, seed: int | None = 0, shuffle: bool = True, drop_last: bool = False
    ) -> Iterator[dict[str, Any]]:
        """One pass over the transitions in minibatches of ``batch_size`` (shuffled by ``seed``).

        Each batch is a dict of the transition arrays plus ``infos``; the whole dataset is read
        into memory on the first call.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        arrays = {k: getattr(self, k) for k in TRANSITION_KEYS}
        infos = self.infos
        order = np.random.default_rng(seed).permutation(self.n_steps) if shuffle else np.arange(self.n_steps)
        for first in range(0, self.n_steps, batch_size):
            idx = order[first : first + batch_size]
            if drop_last and idx.size < batch_size:
                return
            batch: dict[str, Any] = {k: a[idx] for k, a in arrays.items()}
            batch["infos"] = {k: a[idx] for k, a in infos.items()}
            yield batch

    # ---- export ------------------------------------------------------------------------------
    def to_minari(self, dataset_id: str, **kwargs: Any) -> Any:
        """Export to a local Minari dataset (single-agent only); needs the optional ``minari`` package.

        Minari stores ``T + 1`` observations per episode (the last ``next_observation`` appended).
        ``kwargs`` go to ``minari.create_dataset_from_buffers`` (``author``, ``description``, ...).
        """
        try:
            import minari
            from minari.data_collector import EpisodeBuffer
        except ImportError as err:
            raise ImportError("to_minari needs the optional package minari: pip install minari") from err
        if self.agents is not None:
            raise ValueError(f"{self.path}: Minari datasets are single-agent; this one has agents {self.agents}")
        attrs = self.attrs
        if "observation_low" not in attrs or "action_low" not in attrs:
            raise ValueError(f"{self.path}: no Box bounds stored (observation_low / action_low); cannot build Minari spaces")
        obs_space = gym.spaces.Box(np.asarray(attrs["observation_low"]), np.asarray(attrs["observation_high"]), dtype=np.float32)
        act_space = gym.spaces.Box(np.asarray(attrs["action_low"]), np.asarray(attrs["action_high"]), dtype=np.float32)
        buffers = []
        for i in range(self.n_episodes):
            ep = self.episode(i)
            buffers.append(EpisodeBuffer(
                id=i,
                observations=np.concatenate([ep["observations"], ep["next_observations"][-1:]]),
                actions=ep["actions"],
                rewards=ep["rewards"],
                terminations=ep["terminals"],
                truncations=ep["truncations"],
            ))
        kwargs.setdefault("algorithm_name", attrs.get("policy"))
        return minari.create_dataset_from_buffers(
            dataset_id, buffer=buffers, observation_space=obs_space, action_space=act_space, **kwargs
        )

    # ---- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close the HDF5 file (arrays already read stay usable)."""
        self._file.close()

    def __enter__(self) -> DatasetLoader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
