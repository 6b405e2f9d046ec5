"""What a checkpoint of a single-agent run holds, and the random state it restores.

A checkpoint folder (``checkpoints/step_<N>/``, :class:`~powerzoo.rl.run_dir.CheckpointStore`)
holds the model, its ``VecNormalize`` statistics (if any), the replay buffer (off-policy
algorithms, if asked), the Python / NumPy / torch RNG state and ``state.json`` (step counter and
the evaluations up to that step).
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.fileio import write_json
from powerzoo.rl import run_dir as rd

__all__ = ["rng_state", "set_rng_state", "write_checkpoint", "STATE_JSON"]

STATE_JSON = "state.json"


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
) -> Path:
    """Write ``checkpoints/step_<N>/`` of ``run_dir`` atomically, keeping the newest ``keep``;
    returns the folder.

    ``evaluations`` after ``num_timesteps`` are left out; ``replay_buffer`` saves the model's replay
    buffer too.
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
            },
        )

    return rd.CheckpointStore(run_dir, keep).write(int(num_timesteps), write)
