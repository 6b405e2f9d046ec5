"""The SB3 files of a run folder, in formats that read without running code.

* ``vecnormalize.npz`` (and ``evaluation/best_vecnormalize.npz``): a ``VecNormalize``'s running
  statistics and settings as arrays (:func:`write_vecnormalize`, :func:`read_vecnormalize`),
  turned back into a ``VecNormalize`` around a fresh env by :func:`vecnormalize_from_stats`.
* ``replay_buffer.npz``: an off-policy model's replay buffer as arrays
  (:func:`write_replay_buffer`, :func:`read_replay_buffer`).
* ``model.zip``: SB3's own file. Its ``data`` member holds cloudpickled objects (spaces, the
  policy class, schedules), so :func:`read_model` never decodes them: the caller builds the
  model from the run config and only the parameters (``policy.pth`` and the other ``.pth``
  members, ``torch.load(weights_only=True)``) and plain JSON counters are read from the zip.

Each reader takes ``trust_pickle``: with it, the pickles of an older PowerZoo
(``vecnormalize.pkl``, ``replay_buffer.pkl``) are read, and :func:`read_model` loads the zip
with SB3's ``load`` (which unpickles ``data``).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.fileio import CorruptFileError, read_or_corrupt
from powerzoo.rl import run_dir as rd
from powerzoo.rl import safe_files as sf

__all__ = [
    "VECNORM_KEYS",
    "vecnormalize_stats",
    "vecnormalize_from_stats",
    "obs_stats",
    "write_vecnormalize",
    "read_vecnormalize",
    "write_replay_buffer",
    "read_replay_buffer",
    "write_model_files",
    "new_model",
    "read_model",
]

VECNORM_KEYS = (
    "obs_mean",
    "obs_var",
    "obs_count",
    "ret_mean",
    "ret_var",
    "ret_count",
    "clip_obs",
    "clip_reward",
    "gamma",
    "epsilon",
    "norm_obs",
    "norm_reward",
)
"""What ``vecnormalize.npz`` holds."""

_REPLAY_ARRAYS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
_COUNTERS = ("num_timesteps", "_n_updates", "_episode_num")  # plain JSON in the zip's ``data``


# ---- VecNormalize statistics ----------------------------------------------------------------
def vecnormalize_stats(vec_normalize: Any) -> dict[str, np.ndarray]:
    """A ``VecNormalize``'s statistics and settings as arrays (copies).

    Args:
        vec_normalize: A ``VecNormalize`` with Box observations.

    Returns:
        ``{name: array}`` for each of :data:`VECNORM_KEYS`.
    """
    obs, ret = vec_normalize.obs_rms, vec_normalize.ret_rms
    if isinstance(obs, dict):
        raise TypeError("VecNormalize statistics of dict observations are not supported")
    return {
        "obs_mean": np.array(obs.mean, np.float64),
        "obs_var": np.array(obs.var, np.float64),
        "obs_count": np.float64(obs.count),
        "ret_mean": np.array(ret.mean, np.float64),
        "ret_var": np.array(ret.var, np.float64),
        "ret_count": np.float64(ret.count),
        "clip_obs": np.float64(vec_normalize.clip_obs),
        "clip_reward": np.float64(vec_normalize.clip_reward),
        "gamma": np.float64(vec_normalize.gamma),
        "epsilon": np.float64(vec_normalize.epsilon),
        "norm_obs": np.bool_(vec_normalize.norm_obs),
        "norm_reward": np.bool_(vec_normalize.norm_reward),
    }


def vecnormalize_from_stats(venv: Any, stats: Mapping[str, np.ndarray]) -> Any:
    """A training ``VecNormalize`` around ``venv`` that goes on from ``stats``.

    Args:
        venv: The vector env to wrap.
        stats: What :func:`vecnormalize_stats` (or :func:`read_vecnormalize`) returned.

    Returns:
        The ``VecNormalize``.
    """
    from stable_baselines3.common.vec_env import VecNormalize

    vec_normalize = VecNormalize(
        venv,
        training=True,
        norm_obs=bool(stats["norm_obs"]),
        norm_reward=bool(stats["norm_reward"]),
        clip_obs=float(stats["clip_obs"]),
        clip_reward=float(stats["clip_reward"]),
        gamma=float(stats["gamma"]),
        epsilon=float(stats["epsilon"]),
    )
    for rms, prefix in ((vec_normalize.obs_rms, "obs"), (vec_normalize.ret_rms, "ret")):
        rms.mean = np.array(stats[f"{prefix}_mean"], np.float64)
        rms.var = np.array(stats[f"{prefix}_var"], np.float64)
        rms.count = float(stats[f"{prefix}_count"])
    return vec_normalize


def obs_stats(stats: Mapping[str, np.ndarray] | None) -> dict[str, Any] | None:
    """The frozen observation statistics :class:`~powerzoo.rl.sb3.policy.ModelPolicy` applies
    (``None`` when observations are not normalised).

    Args:
        stats: What :func:`read_vecnormalize` returned, or ``None``.

    Returns:
        ``mean``, ``var``, ``clip_obs``, ``epsilon``; or ``None``.
    """
    if stats is None or not bool(stats["norm_obs"]):
        return None
    return {
        "mean": np.array(stats["obs_mean"], np.float64),
        "var": np.array(stats["obs_var"], np.float64),
        "clip_obs": float(stats["clip_obs"]),
        "epsilon": float(stats["epsilon"]),
    }


def write_vecnormalize(path: str | Path, vec_normalize: Any) -> Path:
    """Write a ``VecNormalize``'s statistics (or :func:`vecnormalize_stats`'s dict) to the
    ``.npz`` file ``path``, atomically.

    Args:
        path: The file to write.
        vec_normalize: A ``VecNormalize`` or its statistics.

    Returns:
        The path written.
    """
    stats = (
        vec_normalize if isinstance(vec_normalize, Mapping) else vecnormalize_stats(vec_normalize)
    )
    return sf.write_arrays(path, stats)


def _stats_of_pickle(obj: Any) -> dict[str, np.ndarray]:
    from stable_baselines3.common.vec_env import VecNormalize

    if not isinstance(obj, VecNormalize):
        raise ValueError(f"holds a {type(obj).__name__}, not VecNormalize statistics")
    return vecnormalize_stats(obj)


def read_vecnormalize(path: str | Path, trust_pickle: bool = False) -> dict[str, np.ndarray]:
    """The statistics in ``path`` (``.npz``; the ``.pkl`` of an older PowerZoo beside it only with
    ``trust_pickle=True``).

    Args:
        path: ``vecnormalize.npz`` (or ``best_vecnormalize.npz``).
        trust_pickle: Read an older ``VecNormalize`` pickle.

    Returns:
        ``{name: array}`` for each of :data:`VECNORM_KEYS`.

    Raises:
        FileNotFoundError: Neither file exists.
        CorruptFileError: The file is damaged or holds something else than the statistics.
        PickleRefusedError: Only the older pickle exists and ``trust_pickle`` is off.
    """
    return sf.read_versioned(
        path,
        lambda p: {k: v for k, v in sf.read_arrays(p, VECNORM_KEYS).items() if k in VECNORM_KEYS},
        _stats_of_pickle,
        trust_pickle,
    )


# ---- replay buffer --------------------------------------------------------------------------
def write_replay_buffer(path: str | Path, buffer: Any) -> Path:
    """Write an SB3 ``ReplayBuffer``'s contents (arrays, position, fill flag) to ``path``.

    Args:
        path: The ``.npz`` file to write.
        buffer: The model's ``replay_buffer``.

    Returns:
        The path written.
    """
    arrays = {
        name: getattr(buffer, name)
        for name in _REPLAY_ARRAYS
        if isinstance(getattr(buffer, name, None), np.ndarray)
    }
    if "observations" not in arrays:
        raise TypeError(f"{type(buffer).__name__} is not supported (dict observations?)")
    return sf.write_arrays(path, {**arrays, "pos": np.int64(buffer.pos), "full": bool(buffer.full)})


def read_replay_buffer(path: str | Path, model: Any, trust_pickle: bool = False) -> None:
    """Fill ``model.replay_buffer`` from ``path`` (written by :func:`write_replay_buffer`; the
    ``.pkl`` of an older PowerZoo only with ``trust_pickle=True``).

    Args:
        path: ``replay_buffer.npz``.
        model: An off-policy SB3 model built with the same buffer size and spaces.
        trust_pickle: Read an older replay-buffer pickle.
    """
    path = Path(path)

    def fill(p: Path) -> None:
        arrays = sf.read_arrays(p, ("observations", "pos", "full"))
        buffer = model.replay_buffer
        for name in _REPLAY_ARRAYS:
            target = getattr(buffer, name, None)
            if not isinstance(target, np.ndarray):
                continue
            if name not in arrays or arrays[name].shape != target.shape:
                got = arrays[name].shape if name in arrays else "nothing"
                raise ValueError(f"{name}: {got}, the model's buffer holds {target.shape}")
            target[...] = arrays[name]
        buffer.pos, buffer.full = int(arrays["pos"]), bool(arrays["full"])

    def fill_old(obj: Any) -> None:
        from stable_baselines3.common.buffers import ReplayBuffer

        if not isinstance(obj, ReplayBuffer):
            raise ValueError(f"holds a {type(obj).__name__}, not a replay buffer")
        obj.device = model.device
        model.replay_buffer = obj

    sf.read_versioned(path, lambda p: read_or_corrupt(p, fill), fill_old, trust_pickle)


# ---- models ---------------------------------------------------------------------------------
def write_model_files(folder: Path, model: Any, replay_buffer: bool) -> None:
    """Write an SB3 model's checkpoint files into ``folder``: ``model.zip``, its
    ``vecnormalize.npz`` (if it normalises) and, with ``replay_buffer``, ``replay_buffer.npz``.

    Args:
        folder: The checkpoint folder being filled.
        model: The SB3 model.
        replay_buffer: Save its replay buffer too (off-policy algorithms).
    """
    model.save(folder / rd.MODEL_FILE)
    vec_normalize = model.get_vec_normalize_env()
    if vec_normalize is not None:
        write_vecnormalize(folder / rd.VECNORM_FILE, vec_normalize)
    if replay_buffer:
        write_replay_buffer(folder / rd.REPLAY_FILE, model.replay_buffer)


def new_model(
    cls: type,
    policy: str,
    kwargs: Mapping[str, Any],
    env: Any = None,
    spaces: tuple[Any, Any] | None = None,
) -> Any:
    """An SB3 model of class ``cls`` built from settings, as SB3's ``load`` builds one, with
    fresh parameters.

    Args:
        cls: The SB3 algorithm class.
        policy: The policy name (``MlpPolicy``).
        kwargs: Constructor arguments (the run config's).
        env: The env it trains on, or ``None`` for a model that only acts.
        spaces: ``(observation space, action space)`` when ``env`` is ``None``.

    Returns:
        The model.
    """
    model = cls(policy, env, _init_setup_model=False, **kwargs)
    if env is None:
        if spaces is None:
            raise ValueError("new_model needs an env or its spaces")
        model.observation_space, model.action_space = spaces
        model.n_envs = 1
        if getattr(model, "target_entropy", None) == "auto":  # SAC reads it off the env
            model.target_entropy = float(-np.prod(model.action_space.shape).astype(np.float32))
    model._setup_model()
    return model


def _parameters(path: Path) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
    """``(state dicts, torch variables, plain counters)`` of an SB3 zip, unpickling nothing."""
    from stable_baselines3.common.save_util import load_from_zip_file

    # load_data=False: the cloudpickled ``data`` is not decoded; .pth files: weights_only=True
    _, params, variables = load_from_zip_file(path, device="cpu", load_data=False)
    with zipfile.ZipFile(path) as archive:
        data = json.loads(archive.read("data").decode())
    counters = {
        key: data[key] for key in _COUNTERS if isinstance(data, dict) and type(data.get(key)) is int
    }
    return params, variables, counters


def read_model(
    path: str | Path,
    build: Callable[[], Any],
    load: Callable[[Path], Any],
    trust_pickle: bool = False,
) -> Any:
    """An SB3 model from the zip ``path``.

    By default ``build()`` makes the model from the run config and only its parameters (with
    the optimisers' states and torch variables) and step counters are read from the zip, without
    unpickling anything; with ``trust_pickle=True``, ``load(path)`` (SB3's ``load``).

    Args:
        path: The model zip.
        build: Makes the model the run config describes (:func:`new_model`).
        load: SB3's ``cls.load`` with the caller's arguments.
        trust_pickle: Load the zip with SB3's ``load``, which unpickles its ``data``.

    Returns:
        The model.

    Raises:
        CorruptFileError: The zip is damaged, or its parameters do not fit the built model.
        PickleRefusedError: A parameter file holds more than tensors.
    """
    path = rd.check_zip(path)
    if trust_pickle:
        return read_or_corrupt(path, load)
    params, variables, counters = sf.read_weights_only(
        path, _parameters, "its parameter files hold pickled Python objects besides tensors"
    )
    model = build()
    try:
        model.set_parameters(params, exact_match=True, device="cpu")
        for name, value in (variables or {}).items():
            if value is not None:
                _set_attr(model, f"{name}.data", value.data)
    except (RuntimeError, ValueError, KeyError, AttributeError) as err:
        reason = " ".join(str(err).split())
        raise CorruptFileError(
            path, f"its parameters do not fit the model the run config describes: {reason}"
        ) from None
    if getattr(model, "use_sde", False):
        model.policy.reset_noise()
    for key, value in counters.items():
        setattr(model, key, value)
    return model


def _set_attr(obj: Any, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for name in parents:
        obj = getattr(obj, name)
    setattr(obj, last, value)
