"""One campaign trial: train with :func:`~powerzoo.rl.trainer.Trainer`, evaluate on the test
split, keep a record.

A trial's folder is ``<out>/trials/<trial_id>/``:

* ``run/``: the Trainer's run folder (config, evaluations on the validation split, best and final
  model);
* ``evaluation/``: the test-split evaluation (``results.csv``, ``episodes.csv``, the episode plot),
  made by :func:`powerzoo.benchmarks.campaign.run_campaign` with the trial's seed as campaign
  seed, so its episodes follow the protocol of ``powerzoo bench`` to the bit;
* ``trial.json``: the record (:func:`run_trial`), written last and atomically: a trial is
  finished exactly when this file exists. A folder without it is the remains of an interrupted
  trial and is removed before the trial runs again (from scratch, so the numbers do not depend on
  where it was interrupted).

The record holds the trial's spec, its config hash, the training and evaluation times (s), its
start and end (``started_at`` / ``finished_at``, seconds since the epoch), the env steps trained,
the model evaluated (``best`` or ``final``), the evaluated day ids, the constraint names, one
row per test episode (the ``episodes.csv`` columns) and the code that ran it (``code``:
:func:`powerzoo.provenance.code_provenance`). The trial runs with one torch thread and one
BLAS thread, so the same seed gives the same numbers in any process (local loop or Ray worker).
"""

from __future__ import annotations

import csv
import functools
import shutil
import time
from pathlib import Path
from typing import Any

from powerzoo.fileio import CorruptFileError, read_json, read_or_corrupt, write_json
from powerzoo.provenance import code_provenance
from powerzoo.rl.campaigns.spec import CampaignSpec, TrialSpec

__all__ = [
    "run_trial",
    "trial_dir",
    "read_record",
    "read_json_object",
    "write_record",
    "prepare_folder",
    "tested_model_steps",
    "base_record",
    "evaluate_policy",
    "one_thread",
    "TRIAL_FILE",
    "TRIALS_DIR",
]

TRIALS_DIR = "trials"
TRIAL_FILE = "trial.json"


def trial_dir(out_dir: str | Path, trial: TrialSpec) -> Path:
    """``<out_dir>/trials/<trial_id>`` (absolute)."""
    return Path(out_dir).resolve() / TRIALS_DIR / trial.trial_id


def tested_model_steps(out_dir: str | Path, trial: TrialSpec, record: dict[str, Any]) -> int | None:
    """Env steps of the model the trial's test evaluation used: the last validation evaluation
    that set a new best (``new_best`` in the run's evaluation log) for ``model: best``, the
    steps trained for ``final``; ``None`` when the log is missing or unreadable."""
    if record.get("model") == "final":
        return int(record["num_timesteps"])
    from powerzoo.rl.evaluation_log import EVAL_CSV

    path = trial_dir(out_dir, trial) / "run" / "evaluation" / EVAL_CSV
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            best = [
                int(float(row["timestep"]))
                for row in csv.DictReader(handle)
                if str(row.get("new_best", "")).strip().lower() in ("true", "1")
            ]
    except (OSError, KeyError, ValueError):
        return None
    return best[-1] if best else None


def read_record(out_dir: str | Path, trial: TrialSpec) -> dict[str, Any] | None:
    """The finished trial's record, ``None`` if it has not finished.

    ``ValueError`` if the folder holds a finished trial with another config under the same id,
    :class:`~powerzoo.fileio.CorruptFileError` if its ``trial.json`` is damaged.

    Args:
        out_dir: The campaign folder.
        trial: The trial.

    Returns:
        The record (config, evaluation, timings), or ``None``.
    """
    path = trial_dir(out_dir, trial) / TRIAL_FILE
    if not path.is_file():
        return None
    record = read_json_object(path, f"delete {path.parent} to run trial {trial.trial_id} again")
    if record.get("config_hash") != trial.config_hash:
        raise ValueError(
            f"{path} holds trial {trial.trial_id} with another config "
            f"(hash {record.get('config_hash')}, "
            f"now {trial.config_hash}); use another --out folder or delete that trial folder"
        )
    return record


def read_json_object(path: Path, remedy: str) -> dict[str, Any]:
    """The JSON object in ``path``; :class:`~powerzoo.fileio.CorruptFileError` naming the file,
    the reason and ``remedy`` (what to do) if it is damaged or holds no object."""
    try:
        data = read_or_corrupt(path, read_json)
    except CorruptFileError as err:
        raise CorruptFileError(path, f"{err.reason}; {remedy}") from err.__cause__
    if not isinstance(data, dict):
        raise CorruptFileError(path, f"a JSON {type(data).__name__}, expected an object; {remedy}")
    return data


def write_record(out_dir: str | Path, record: dict[str, Any]) -> Path:
    """Write a record (e.g. one reported by a Ray worker) as the trial's ``trial.json``."""
    folder = Path(out_dir).resolve() / TRIALS_DIR / record["trial_id"]
    folder.mkdir(parents=True, exist_ok=True)
    return write_json(folder / TRIAL_FILE, record)


def one_thread() -> Any:
    """Context manager: one torch and one BLAS thread inside (the same numbers in any process)."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    return threadpool_limits(limits=1)


def evaluate_policy(
    campaign: CampaignSpec, trial: TrialSpec, entry: Any, folder: Path
) -> dict[str, Any]:
    """Evaluate one policy entry on the campaign's split with the trial's seed; the record's
    evaluation fields."""
    from powerzoo.benchmarks.campaign import episodes_of, run_campaign

    result = run_campaign(
        [],
        policies=[],
        seeds=[trial.seed],
        split=campaign.split,
        episodes=campaign.episodes,
        extra_policies=[entry],
        out_dir=folder,
        progress=False,
        plots=campaign.plots,
    )
    if not result.rows:
        raise RuntimeError(
            f"trial {trial.trial_id}: the policy could not be evaluated ({'; '.join(result.notes)})"
        )
    row = result.rows[0]
    from powerzoo.benchmarks.baselines import select_days
    from powerzoo.tasks import make_task

    days = select_days(
        make_task(trial.task, campaign.split).n_days, episodes_of(campaign.episodes, trial.task)
    )
    return {
        "days": days,
        "cost_names": list(result.cost_names[trial.task]),
        "episodes": result.episodes,
        "mean_return": row["mean_return"],
        "normalized_score": row["normalized_score"],
        "plots": [str(p) for p in result.plots],
    }


def _trained_entry(trial: TrialSpec, run_dir: Path, model: str) -> tuple[Any, str]:
    from powerzoo.benchmarks.campaign import PolicyEntry
    from powerzoo.rl.run_dir import EVAL_DIR
    from powerzoo.rl.trainer import Trainer

    best = ("best_model.zip", "best_policy.npz")  # SB3 runs, native multi-agent (MAPPO / IPPO) runs
    if model == "best" and not any((run_dir / EVAL_DIR / name).is_file() for name in best):
        model = "final"
    trainer = Trainer.load(run_dir, model=model)
    entry = PolicyEntry(
        label=trial.trial_label,
        task=trial.task,
        make_env=functools.partial(trainer.make_eval_env, objective=True),
        make_policy=lambda env, seed: trainer.policy(True),
        source=f"{trial.trial_id} ({trial.algorithm} {model} model)",
        kind="trained",
    )
    return entry, model


def prepare_folder(out_dir: str | Path, trial: TrialSpec) -> tuple[Path, dict[str, Any] | None]:
    """``(folder, record)``: the finished record if any, else a clean folder (remains of an
    interrupted run removed)."""
    record = read_record(out_dir, trial)
    folder = trial_dir(out_dir, trial)
    if record is None and folder.exists():
        shutil.rmtree(folder)
    return folder, record


def base_record(trial: TrialSpec) -> dict[str, Any]:
    return {
        "trial_id": trial.trial_id,
        "task": trial.task,
        "algorithm": trial.algorithm,
        "setting": trial.setting,
        "seed": trial.seed,
        "config_hash": trial.config_hash,
        "label": trial.label,
        "trial_label": trial.trial_label,
        "code": code_provenance(),
    }


def run_trial(campaign: CampaignSpec, trial: TrialSpec, out_dir: str | Path) -> dict[str, Any]:
    """Train and evaluate one trial (or return its record if it already finished); writes
    ``trial.json``.

    ``rllib_ppo`` trials need the Ray backend (:mod:`powerzoo.integrations.tune`); here they raise
    ``ValueError``.

    Args:
        campaign: The campaign (its evaluation protocol).
        trial: The trial to run.
        out_dir: The campaign folder.

    Returns:
        The trial's record.
    """
    if trial.is_rllib:
        raise ValueError(
            f"trial {trial.trial_id}: rllib_ppo trials run on the Ray backend (--backend ray)"
        )
    folder, record = prepare_folder(out_dir, trial)
    if record is not None:
        return record
    from powerzoo.rl.trainer import Trainer

    with one_thread():
        started_at = time.time()
        started = time.perf_counter()
        trainer = Trainer({**trial.config, "output_dir": str(folder), "name": "run"})
        result = trainer.train()
        train_seconds = time.perf_counter() - started
        trainer.close()
        entry, model = _trained_entry(trial, folder / "run", campaign.model)
        started = time.perf_counter()
        evaluation = evaluate_policy(campaign, trial, entry, folder / "evaluation")
        record = {
            **base_record(trial),
            "status": result.status,
            "num_timesteps": int(result.num_timesteps),
            "train_seconds": train_seconds,
            "eval_seconds": time.perf_counter() - started,
            "started_at": started_at,
            "finished_at": time.time(),
            "model": model,
            "run_dir": str(folder / "run"),
            **evaluation,
        }
    write_json(folder / TRIAL_FILE, record)
    return record
