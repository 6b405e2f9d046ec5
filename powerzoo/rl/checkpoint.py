"""What a checkpoint holds, the random state it restores, and the config it was written with.

A checkpoint folder (``checkpoints/step_<N>/``, :class:`~powerzoo.rl.run_dir.CheckpointStore`)
of a single-agent SB3 run holds the model, its ``VecNormalize`` statistics (if any), the replay
buffer (off-policy algorithms, if asked), the Python / NumPy / torch RNG state and ``state.json``
(step counter, the evaluations up to that step, the resolved config and its fingerprint). One of
a native multi-agent run holds ``learner.pt``, ``collector.npz``, ``rng.npz`` and ``state.json``.
:func:`check_recorded_config` refuses a ``config.yaml`` that is not the one a run recorded.

Every file is in a format that reads without running code (:mod:`powerzoo.rl.run_dir`): the RNG
and collector states are arrays (:func:`rng_arrays`, :func:`collector_arrays`), the learner state
holds tensors and plain containers only (:func:`torch_plain`). The readers take
``trust_pickle`` for checkpoints an older PowerZoo wrote as pickles.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.envs.introspect import inspect_env
from powerzoo.fileio import read_or_corrupt, write_json
from powerzoo.rl import run_dir as rd
from powerzoo.rl import safe_files as sf
from powerzoo.rl.config import ConfigError, TrainConfig

__all__ = [
    "rng_state",
    "set_rng_state",
    "rng_arrays",
    "rng_from_arrays",
    "read_rng",
    "collector_arrays",
    "collector_from_arrays",
    "runner_state_type",
    "torch_plain",
    "write_checkpoint",
    "write_learner_checkpoint",
    "read_checkpoint_state",
    "read_learner_checkpoint",
    "check_recorded_config",
    "config_differences",
    "STATE_JSON",
    "LEARNER_FILE",
    "COLLECTOR_FILE",
]

STATE_JSON = "state.json"
LEARNER_FILE = "learner.pt"
COLLECTOR_FILE = "collector.npz"
_RNG_KEYS = ("python_version", "python_state", "python_gauss", "numpy_keys", "numpy_pos")
_RNG_KEYS += ("numpy_has_gauss", "numpy_cached_gaussian", "torch")
_EPISODE_KEYS = ("ep_agent_returns", "ep_costs", "ep_selected", "ep_lengths")


def rng_state() -> dict[str, Any]:
    """The global Python, NumPy and torch random states."""
    import torch

    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the random states :func:`rng_state` returned."""
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def rng_arrays(state: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """:func:`rng_state`'s dict as plain arrays (what ``rng.npz`` holds).

    Args:
        state: What :func:`rng_state` returned.

    Returns:
        ``{name: array}``, read back by :func:`rng_from_arrays`.
    """
    version, words, gauss = state["python"]
    name, keys, pos, has_gauss, cached = state["numpy"]
    if name != "MT19937":
        raise ValueError(f"NumPy's global generator is {name}, not MT19937")
    return {
        "python_version": np.int64(version),
        "python_state": np.asarray(words, np.int64),
        "python_gauss": np.asarray([] if gauss is None else [gauss], np.float64),
        "numpy_keys": np.asarray(keys, np.uint32),
        "numpy_pos": np.int64(pos),
        "numpy_has_gauss": np.int64(has_gauss),
        "numpy_cached_gaussian": np.float64(cached),
        "torch": np.asarray(state["torch"].numpy(), np.uint8),
    }


def rng_from_arrays(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The :func:`rng_state` dict back from :func:`rng_arrays`.

    Args:
        arrays: What :func:`rng_arrays` returned (or ``rng.npz`` holds).

    Returns:
        A dict :func:`set_rng_state` takes.
    """
    import torch

    gauss = arrays["python_gauss"]
    return {
        "python": (
            int(arrays["python_version"]),
            tuple(int(w) for w in arrays["python_state"]),
            float(gauss[0]) if gauss.size else None,
        ),
        "numpy": (
            "MT19937",
            np.asarray(arrays["numpy_keys"], np.uint32),
            int(arrays["numpy_pos"]),
            int(arrays["numpy_has_gauss"]),
            float(arrays["numpy_cached_gaussian"]),
        ),
        "torch": torch.from_numpy(np.asarray(arrays["torch"], np.uint8).copy()),
    }


def read_rng(folder: Path, trust_pickle: bool = False) -> dict[str, Any]:
    """The RNG state of checkpoint ``folder`` (``rng.npz``; an older ``rng.pkl`` only with
    ``trust_pickle=True``).

    Args:
        folder: The checkpoint folder.
        trust_pickle: Read an older checkpoint's pickle.

    Returns:
        A dict :func:`set_rng_state` takes.
    """

    def check_old(obj: Any) -> dict[str, Any]:
        if not isinstance(obj, dict) or not {"python", "numpy", "torch"} <= set(obj):
            raise ValueError(f"holds a {type(obj).__name__}, not an RNG state")
        return obj

    return sf.read_versioned(
        folder / rd.RNG_FILE,
        lambda p: rng_from_arrays(sf.read_arrays(p, _RNG_KEYS)),
        check_old,
        trust_pickle,
    )


def _write_rng(folder: Path) -> None:
    sf.write_arrays(folder / rd.RNG_FILE, rng_arrays(rng_state()))


def collector_arrays(state: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A native collector's :meth:`~powerzoo.rl.mappo.collector.Collector.state` as plain arrays
    (what ``collector.npz`` holds).

    The env runner's state (a dataclass of arrays) goes under ``runner_state/<field>``, the
    observations under ``obs/<agent>``, the env generator's state as JSON text.

    Args:
        state: The collector state.

    Returns:
        ``{name: array}``, read back by :func:`collector_from_arrays`.
    """
    runner_state = state["runner_state"]
    out: dict[str, np.ndarray] = {
        f"runner_state/{f.name}": np.asarray(getattr(runner_state, f.name))
        for f in dataclasses.fields(runner_state)
    }
    out["runner_rng"] = np.asarray(json.dumps(state["runner_rng"]))
    obs = state["obs"]
    if isinstance(obs, Mapping):
        out.update({f"obs/{agent}": np.asarray(value) for agent, value in obs.items()})
    else:
        out["obs"] = np.asarray(obs)
    out.update({key: np.asarray(state[key]) for key in _EPISODE_KEYS})
    return out


def collector_from_arrays(arrays: Mapping[str, np.ndarray], state_type: type) -> dict[str, Any]:
    """The collector state back from :func:`collector_arrays`.

    Args:
        arrays: What :func:`collector_arrays` returned (or ``collector.npz`` holds).
        state_type: The env runner's state dataclass (the fields must match).

    Returns:
        A dict :meth:`~powerzoo.rl.mappo.collector.Collector.set_state` takes.
    """
    fields = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("runner_state/")}
    expected = {f.name for f in dataclasses.fields(state_type)}
    if set(fields) != expected:
        raise ValueError(
            f"runner state fields {sorted(fields)} are not those of {state_type.__name__} "
            f"{sorted(expected)}: a checkpoint of another task?"
        )
    obs: Any = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("obs/")}
    if "obs" in arrays:
        obs = arrays["obs"]
    return {
        "runner_state": state_type(**fields),
        "runner_rng": json.loads(str(arrays["runner_rng"])),
        "obs": obs,
        **{key: np.asarray(arrays[key]) for key in _EPISODE_KEYS},
    }


def runner_state_type(env: Any, seed: int) -> type:
    """The state dataclass of ``env``'s task runner (a checkpoint's collector state is rebuilt as
    one); ``env`` is reset with ``seed`` first if it never was.

    Args:
        env: The native training env.
        seed: Its reset seed.

    Returns:
        The dataclass.
    """
    runner = inspect_env(env).runner
    if runner.state is None:
        env.reset(seed=seed)
    return type(runner.state)


def torch_plain(obj: Any) -> Any:
    """``obj`` with every NumPy array and number turned into a tensor or a Python number, so
    that ``torch.load(weights_only=True)`` reads it back.

    Args:
        obj: Nested dicts, lists and tuples of tensors, arrays and numbers.

    Returns:
        The same structure, torch-native.
    """
    import torch

    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.array(obj, copy=True))
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return type(obj)((key, torch_plain(value)) for key, value in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(torch_plain(value) for value in obj)
    return obj


def write_checkpoint(
    run_dir: Path,
    keep: int,
    write_model: Callable[[Path], None],
    num_timesteps: int,
    evaluations: Sequence[dict[str, Any]],
    record: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``checkpoints/step_<N>/`` of ``run_dir`` atomically, keeping the newest ``keep``;
    returns the folder.

    ``write_model(folder)`` writes the model's files (the SB3 trainer's:
    :func:`powerzoo.rl.sb3.files.write_model_files`); the RNG state and ``state.json`` are
    added. ``evaluations`` after ``num_timesteps`` are left out; ``record`` (the config
    fingerprint and config) goes into ``state.json``.
    """

    def write(folder: Path) -> None:
        write_model(folder)
        _write_rng(folder)
        write_json(
            folder / STATE_JSON,
            {
                "num_timesteps": int(num_timesteps),
                "evaluations": [r for r in evaluations if r["timestep"] <= num_timesteps],
                **(record or {}),
            },
        )

    return rd.CheckpointStore(run_dir, keep).write(int(num_timesteps), write)


def write_learner_checkpoint(
    run_dir: Path,
    keep: int,
    num_timesteps: int,
    learner_state: Any,
    collector_state: Any,
    state: Mapping[str, Any],
) -> Path:
    """Write a native multi-agent checkpoint (``learner.pt``, ``collector.npz``, ``rng.npz``,
    ``state.json`` holding ``state``) atomically, keeping the newest ``keep``; returns it."""
    import torch

    def write(folder: Path) -> None:
        torch.save(torch_plain(learner_state), folder / LEARNER_FILE)
        sf.write_arrays(folder / COLLECTOR_FILE, collector_arrays(collector_state))
        _write_rng(folder)
        write_json(folder / STATE_JSON, dict(state))

    return rd.CheckpointStore(run_dir, keep).write(int(num_timesteps), write)


def read_checkpoint_state(
    config: TrainConfig, folder: Path, keys: Sequence[str] = ("num_timesteps", "evaluations")
) -> dict[str, Any]:
    """``state.json`` of checkpoint ``folder`` (must hold ``keys``), checked against ``config``
    (:func:`check_recorded_config`); :class:`~powerzoo.fileio.CorruptFileError` if damaged."""
    state = rd.read_state(folder / STATE_JSON, keys)
    config_file = folder.parent.parent / rd.CONFIG_FILE
    check_recorded_config(config, config_file, state, folder / STATE_JSON)
    return state


def read_learner_checkpoint(
    config: TrainConfig, folder: Path, env: Any, trust_pickle: bool = False
) -> tuple[Any, Any, Any, Any]:
    """Every file of a native multi-agent checkpoint, read before anything is restored:
    ``(state, learner state, collector state, RNG state)``.

    Args:
        config: The run config (checked against the one recorded).
        folder: The checkpoint folder.
        env: The run's native training env (its runner's state type rebuilds the collector
            state: :func:`runner_state_type`).
        trust_pickle: Read an older checkpoint's pickles too.

    Returns:
        The four states.
    """
    state = read_checkpoint_state(config, folder, ("num_timesteps", "iterations", "evaluations"))
    state_type = runner_state_type(env, config.seed)
    collector = sf.read_versioned(
        folder / COLLECTOR_FILE,
        lambda p: read_or_corrupt(
            p, lambda q: collector_from_arrays(sf.read_arrays(q), state_type)
        ),
        None,
        trust_pickle,
    )
    return (
        state,
        sf.read_torch(folder / LEARNER_FILE, trust_pickle),
        collector,
        read_rng(folder, trust_pickle),
    )


def config_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``"field (recorded X, now Y)"`` for each field (dotted, ``env.split``) whose value differs
    between two config dicts (:meth:`TrainConfig.to_dict`)."""

    def flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(value, Mapping) and value:
                out.update(flat(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out

    a, b = flat(recorded), flat(current)
    missing = object()
    return [
        f"{key} (recorded {a.get(key)!r}, now {b.get(key)!r})"
        for key in sorted(set(a) | set(b))
        if a.get(key, missing) != b.get(key, missing)
    ]


def check_recorded_config(
    config: TrainConfig, config_file: Path, record: Mapping[str, Any] | None, where: Path
) -> None:
    """Refuse ``config`` (read from ``config_file``) if it is not the config that ``record``
    (``run_state.json`` or a checkpoint's ``state.json``, read from ``where``) was written with.

    ``ConfigError`` names the file and the fields that differ; a record without a fingerprint
    (a run of an older PowerZoo) is accepted.
    """
    recorded = None if record is None else record.get("config_fingerprint")
    if recorded is None or recorded == config.fingerprint():
        return
    fields = config_differences(record.get("config") or {}, config.to_dict())
    raise ConfigError(
        f"{config_file}: not the config this run was trained with (recorded in {where}); "
        f"fields that differ: {', '.join(fields) or 'unknown'}. Restore it (the recorded config "
        f"is under 'config' in {where.name}) or train a new run"
    )
