"""SB3 on the native vector env: ``n_envs`` episodes of a single-agent task in one numpy call per
step.

SB3's ``DummyVecEnv`` steps ``n_envs`` Python envs one after the other and deep-copies their info
dicts; ``SubprocVecEnv`` pays for processes and pickling. :class:`NativeVecEnv` is an SB3
``VecEnv`` whose sub-envs are the rows of the native batched env (``make_env(task,
num_envs=N, autoreset_mode="same_step")``), so one SB3 step is one batched step::

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor, VecNormalize
    from powerzoo.rl.sb3.native_vec_env import NativeVecEnv

    venv = VecNormalize(VecMonitor(NativeVecEnv.make("battery_arbitrage", 64, normalize=True)))
    PPO("MlpPolicy", venv, n_steps=64).learn(100_000)

:func:`make_native_vec_env` builds that (with ``VecMonitor`` for SB3's ``ep_rew_mean``) from a
run config's env options; the :func:`~powerzoo.rl.trainer.Trainer` uses it by default
(``vec_env: native``). :class:`BatchedVecEnv` holds what every SB3 ``VecEnv`` over one batched
PowerZoo env shares (attribute access, seeds and options of the next reset).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env import VecEnv, VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from powerzoo.envs.make import make_env

__all__ = [
    "BatchedVecEnv",
    "NativeVecEnv",
    "make_native_vec_env",
    "DEFAULT_INFO_KEYS",
    "merge_reset_options",
]

DEFAULT_INFO_KEYS: tuple[str, ...] = ("constraint_costs", "cost_sum", "is_safe", "reward_terms")
"""Keys of the native step info copied into each sub-env's info dict by default.

They are the ones PowerZoo's SB3 callbacks read (``ConstraintCostCallback`` and the step
trainer's episode statistics read ``constraint_costs``), plus the per-step cost sum, the safety
flag and the reward terms. SB3's own keys (``TimeLimit.truncated``, ``terminal_observation``;
``episode`` from ``VecMonitor``) are always set. Pass ``info_keys="all"`` for every key, at a
cost per step that grows with the number of keys.
"""

# info keys of the native env that describe the batch, not a row (SAME_STEP bookkeeping)
_BATCH_KEYS = frozenset({"final_obs", "_final_obs", "final_info", "_final_info"})


def merge_reset_options(options: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """One ``reset(options=...)`` for a batch from SB3's per-env options (``VecEnv.set_options``).

    A key must be set for every env or for none; equal values stay one value, different ones
    become a per-env list (``[{"day_id": 3}, {"day_id": 5}]`` -> ``{"day_id": [3, 5]}``).
    Returns ``None`` when no env has options.
    """
    keys = sorted({key for option in options for key in option})
    if not keys:
        return None
    merged: dict[str, Any] = {}
    for key in keys:
        missing = [i for i, option in enumerate(options) if key not in option]
        if missing:
            raise ValueError(
                f"reset option {key!r} is set for some sub-envs but not for env(s) {missing[:8]}; "
                "the sub-envs of a batched env reset together: set it for every env "
                "(set_options(dict) sets all of them)"
            )
        values = [option[key] for option in options]
        first = values[0]
        merged[key] = (
            first if all(v is first or np.array_equal(v, first) for v in values) else values
        )
    return merged


class BatchedVecEnv(VecEnv):
    """Shared part of SB3 ``VecEnv`` s whose sub-envs are rows (or agents) of one batched env
    ``self.env``.

    The sub-envs share one object, so ``get_attr`` / ``env_method`` read or call it once and
    repeat the result per index, and ``set_attr`` sets it for all of them (a strict subset of
    indices raises). ``env_is_wrapped`` is ``False``: there is no per-env Gymnasium wrapper.
    """

    env: Any

    def _count(self, indices: VecEnvIndices) -> int:
        return len(list(self._get_indices(indices)))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """``attr_name`` of the batched env, once per index (``render_mode`` is ``None`` if
        unset)."""
        value = (
            getattr(self.env, attr_name, None)
            if attr_name == "render_mode"
            else getattr(self.env, attr_name)
        )
        return [value] * self._count(indices)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set ``attr_name`` on the batched env (shared by every sub-env)."""
        if self._count(indices) != self.num_envs:
            raise ValueError(
                f"set_attr({attr_name!r}) on some sub-envs only: "
                f"the {self.num_envs} sub-envs share one batched env; "
                "pass indices=None to set it for all of them"
            )
        setattr(self.env, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Call ``method_name`` once on the batched env (shared by every sub-env) and repeat the
        result."""
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [result] * self._count(indices)

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        return [False] * self._count(indices)

    def close(self) -> None:
        self.env.close()

    def _take_reset_args(self) -> tuple[int | list[int] | None, dict[str, Any] | None]:
        """Seed and options of the next batched reset from ``seed()`` / ``set_options()`` (used
        once).

        The seed is ``None`` (nothing set), the int of a one-env batch, or the list of per-env
        seeds.
        """
        seeds, options = list(self._seeds), list(self._options)
        self._reset_seeds()
        self._reset_options()
        if all(s is None for s in seeds):
            seed: int | list[int] | None = None
        elif any(s is None for s in seeds):
            raise ValueError(
                f"seeds of the next reset are set for some sub-envs only ({seeds}); "
                "use seed(int) to seed all of them"
            )
        else:
            seed = int(seeds[0]) if len(seeds) == 1 else [int(s) for s in seeds]
        return seed, merge_reset_options(options)


class NativeVecEnv(BatchedVecEnv):
    """SB3 ``VecEnv`` over a native single-agent vector env: sub-env ``i`` is row ``i`` of ``env``.

    Args:
        env: ``make_env(task, num_envs=N, autoreset_mode="same_step", ...)`` (any Gymnasium
            ``VectorEnv`` with Box spaces that autoresets in the same step, with
            ``info["final_obs"]``, works). :meth:`make` builds it from a task name.
        info_keys: keys of the batched step info copied into each sub-env's info dict (default
            :data:`DEFAULT_INFO_KEYS`; ``"all"``: every key). [B] arrays become Python scalars,
            [B, k] arrays their row (a view, like the single env's arrays).

    ``step_wait`` returns ``(obs [N, d] float32, rewards [N] float32, dones [N] bool, infos)``
    with SB3's semantics: a done row already holds the next episode's first observation,
    ``infos[i]["terminal_observation"]`` holds the last one, ``infos[i]["TimeLimit.truncated"]``
    is true when the episode was cut by the horizon rather than terminated. ``seed(s)`` seeds
    the next ``reset()`` (per-env seeds ``s, s+1, ...`` go to the batched env as one list; a
    one-env batch gets the int), ``set_options`` its options (:func:`merge_reset_options`:
    ``{"day_id": k}`` for all, or one ``day_id`` per env).
    """

    def __init__(self, env: Any, info_keys: Sequence[str] | str | None = None) -> None:
        if getattr(env, "metadata", {}).get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise ValueError(
                "NativeVecEnv needs a vector env that autoresets in the same step "
                "(SB3's semantics); build it with "
                "make_env(task, num_envs=N, autoreset_mode='same_step') "
                "or use NativeVecEnv.make(task, N)"
            )
        obs_space, act_space = env.single_observation_space, env.single_action_space
        if not (isinstance(obs_space, gym.spaces.Box) and isinstance(act_space, gym.spaces.Box)):
            raise ValueError(
                "NativeVecEnv needs Box observation and action spaces, "
                f"got {obs_space} and {act_space}"
            )
        if isinstance(info_keys, str) and info_keys != "all":
            raise ValueError(
                f"info_keys must be a sequence of info keys, None or 'all', got {info_keys!r}"
            )
        self.env = env
        self.info_keys: tuple[str, ...] | None = (
            None if info_keys == "all" else tuple(info_keys or DEFAULT_INFO_KEYS)
        )
        self._explicit_keys = info_keys is not None and info_keys != "all"
        self._checked_keys = False
        self._actions: np.ndarray | None = None
        self._obs_dtype = obs_space.dtype
        self.last_constraint_costs: np.ndarray | None = None  # [B, n_constraints] of the last step
        super().__init__(int(env.num_envs), obs_space, act_space)

    @classmethod
    def make(
        cls,
        task: Any,
        n_envs: int,
        split: str = "train",
        *,
        info_keys: Sequence[str] | str | None = None,
        **env_options: Any,
    ) -> NativeVecEnv:
        """``NativeVecEnv(make_env(task, split, num_envs=n_envs, autoreset_mode="same_step",
        **env_options))``."""
        return cls(
            make_env(task, split, num_envs=n_envs, autoreset_mode="same_step", **env_options),
            info_keys=info_keys,
        )

    # ---- per-env infos ----------------------------------------------------------------------
    def _columns(self, info: Mapping[str, Any], at_step: bool) -> tuple[list[str], list[Any]]:
        """The copied keys and, per key, its value for every row (one pass over the keys)."""
        if self.info_keys is None:
            keys = [k for k in info if k not in _BATCH_KEYS]
        else:
            keys = [k for k in self.info_keys if k in info]
            if at_step and self._explicit_keys and not self._checked_keys:
                missing = sorted(set(self.info_keys) - set(keys))
                if missing:
                    raise ValueError(
                        f"info_keys {missing} are not in the step info; available: "
                        f"{', '.join(sorted(set(info) - _BATCH_KEYS))}"
                    )
                self._checked_keys = True
        n = self.num_envs
        columns: list[Any] = []
        for key in keys:
            value = info[key]
            if isinstance(value, np.ndarray) and value.ndim >= 1 and len(value) == n:
                columns.append(value.tolist() if value.ndim == 1 else list(value))
            else:  # a value for the whole batch (names, scalars)
                columns.append([value] * n)
        return keys, columns

    def _infos(self, info: Mapping[str, Any], timeouts: list[bool] | None) -> list[dict[str, Any]]:
        at_step = timeouts is not None
        keys, columns = self._columns(info, at_step)
        if at_step:
            keys, columns = [*keys, "TimeLimit.truncated"], [*columns, timeouts]
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for key, column in zip(
            keys, columns, strict=True
        ):  # by key: cheaper than a dict(zip()) per row
            for row_info, value in zip(infos, column, strict=True):
                row_info[key] = value
        return infos

    # ---- VecEnv API -------------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        seed, options = self._take_reset_args()
        obs, info = self.env.reset(seed=seed, options=options)
        self.reset_infos = self._infos(info, None)
        return np.array(obs, dtype=self._obs_dtype)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_async must be called before step_wait")
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        terminated, truncated = (
            np.asarray(terminated, dtype=bool),
            np.asarray(truncated, dtype=bool),
        )
        dones = terminated | truncated
        self.last_constraint_costs = info.get("constraint_costs")
        infos = self._infos(info, (truncated & ~terminated).tolist())
        if dones.any():
            final = np.array(
                info["final_obs"], dtype=self._obs_dtype
            )  # own copy: rows outlive the step
            for i in np.flatnonzero(dones).tolist():
                infos[i]["terminal_observation"] = final[i]
        return (
            np.array(obs, dtype=self._obs_dtype),
            np.asarray(rewards, dtype=np.float32),
            dones,
            infos,
        )

    # ---- task metadata (the native env's) ----------------------------------------------------
    def constraint_names(self) -> tuple[str, ...]:
        """Order of ``info["constraint_costs"]``."""
        return tuple(self.env.constraint_names())

    def reward_term_names(self) -> tuple[str, ...]:
        """Order of ``info["reward_terms"]``."""
        return tuple(self.env.reward_term_names())


def make_native_vec_env(
    task: Any,
    n_envs: int,
    env_options: Mapping[str, Any] | None = None,
    *,
    seed: int | None = None,
    monitor: bool = True,
    info_keys: Sequence[str] | str | None = None,
) -> VecEnv:
    """The training ``VecEnv`` of a single-agent task on the native batched env.

    Args:
        task: task name (or task config, as for ``make_env``).
        n_envs: batch size (sub-envs stepped in one numpy call).
        env_options: ``make_env`` options as in a run config's ``env`` section (``split``,
            ``normalize``, ``forecast_horizon``, ``reward``, ``task_kwargs``, ...).
        seed: seeds the first ``reset`` (``VecEnv.seed``: env ``i`` gets ``seed + i``).
        monitor: wrap in SB3's ``VecMonitor`` (episode return and length in ``info["episode"]``,
            which SB3 logs as ``rollout/ep_rew_mean`` / ``ep_len_mean``).
        info_keys: see :class:`NativeVecEnv`.
    """
    options = dict(env_options or {})
    task_kwargs = dict(options.pop("task_kwargs", None) or {})
    split = options.pop("split", "train")
    if options.get("obs_mode") is None:
        options.pop("obs_mode", None)
    venv: VecEnv = NativeVecEnv.make(
        task, n_envs, split, info_keys=info_keys, **options, **task_kwargs
    )
    if seed is not None:
        venv.seed(seed)
    return VecMonitor(venv) if monitor else venv
