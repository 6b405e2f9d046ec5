"""What a checkpoint holds, the random state it restores, and the config it was written with.

A checkpoint folder (``checkpoints/step_<N>/``, :class:`~powerzoo.rl.run_dir.CheckpointStore`)
of a single-agent SB3 run holds the model, its ``VecNormalize`` statistics (if any), the replay
buffer (off-policy algorithms, if asked), the Python / NumPy / torch RNG state and ``state.json``
(step counter, the evaluations up to that step, the resolved config and its fingerprint). One of
a native multi-agent run holds ``learner.pt``, ``collector.pkl``, ``rng.pkl`` and ``state.json``.
:func:`check_recorded_config` refuses a ``config.yaml`` that is not the one a run recorded.
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.fileio import write_json
from powerzoo.rl import run_dir as rd
from powerzoo.rl.config import ConfigError, TrainConfig

__all__ = [
    "rng_state",
    "set_rng_state",
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
COLLECTOR_FILE = "collector.pkl"


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


def write_checkpoint(
    run_dir: Path,
    keep: int,
    model: Any,
    num_timesteps: int,
    evaluations: Sequence[dict[str, Any]],
    replay_buffer: bool,
    record: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``checkpoints/step_<N>/`` of ``run_dir`` atomically, keeping the newest ``keep``;
    returns the folder.

    ``evaluations`` after ``num_timesteps`` are left out; ``replay_buffer`` saves the model's replay
    buffer too; ``record`` (the config fingerprint and config) goes into ``state.json``.
    """

    def write(folder: Path) -> None:
        model.save(folder / rd.MODEL_FILE)
        vec_normalize = model.get_vec_normalize_env()
        if vec_normalize is not None:
            vec_normalize.save(str(folder / rd.VECNORM_FILE))
        if replay_buffer:
            model.save_replay_buffer(folder / rd.REPLAY_FILE)
        (folder / rd.RNG_FILE).write_bytes(pickle.dumps(rng_state()))
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
    """Write a native multi-agent checkpoint (``learner.pt``, ``collector.pkl``, ``rng.pkl``,
    ``state.json`` holding ``state``) atomically, keeping the newest ``keep``; returns it."""
    import torch

    def write(folder: Path) -> None:
        torch.save(learner_state, folder / LEARNER_FILE)
        (folder / COLLECTOR_FILE).write_bytes(pickle.dumps(collector_state))
        (folder / rd.RNG_FILE).write_bytes(pickle.dumps(rng_state()))
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


def read_learner_checkpoint(config: TrainConfig, folder: Path) -> tuple[Any, Any, Any, Any]:
    """Every file of a native multi-agent checkpoint, read before anything is restored:
    ``(state, learner state, collector state, RNG state)``."""
    state = read_checkpoint_state(config, folder, ("num_timesteps", "iterations", "evaluations"))
    return (
        state,
        rd.read_torch(folder / LEARNER_FILE),
        rd.read_pickle(folder / COLLECTOR_FILE),
        rd.read_pickle(folder / rd.RNG_FILE),
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
