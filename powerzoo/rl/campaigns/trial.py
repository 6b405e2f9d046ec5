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
row per test episode (the ``episodes.csv`` columns), the code that ran it (``code``:
:func:`powerzoo.provenance.code_provenance`) and its compute
(:func:`powerzoo.rl.tracks.compute_record`: ``track`` and ``track_budget``, ``env_steps``,
``wall_seconds`` and ``cpu_seconds`` of training, ``stop_reason``, ``hardware``). The trial runs
with one torch thread and one BLAS thread, so the same seed gives the same numbers in any
process (local loop or Ray worker).

A record is checked before it is used (:func:`record_problem`): the fields the tables need are
there, it holds one episode per day of the campaign's evaluation protocol (those days, the
trial's seed) and every return and cost is a finite number. A record that fails is an
:class:`InvalidRecordError`; the campaign, its gather step and the results page leave that trial
out with a one-line warning (:func:`warn_left_out`) instead of averaging it.
"""

from __future__ import annotations

import csv
import functools
import math
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

from powerzoo.fileio import CorruptFileError, read_json, read_or_corrupt, write_json
from powerzoo.provenance import code_provenance
from powerzoo.rl.campaigns.family_episodes import family_problem, run_family_episodes
from powerzoo.rl.campaigns.spec import CampaignSpec, TrialSpec
from powerzoo.rl.tracks import Stopwatch, Track, compute_record

__all__ = [
    "run_trial",
    "trial_dir",
    "read_record",
    "record_problem",
    "protocol_days",
    "InvalidRecordError",
    "warn_left_out",
    "read_json_object",
    "write_record",
    "prepare_folder",
    "tested_model_steps",
    "base_record",
    "evaluate_policy",
    "one_thread",
    "trained_entry",
    "TRIAL_FILE",
    "TRIALS_DIR",
]

TRIALS_DIR = "trials"
TRIAL_FILE = "trial.json"
REQUIRED_FIELDS = (
    "trial_id",
    "config_hash",
    "model",
    "num_timesteps",
    "cost_names",
    "days",
    "episodes",
)
"""Fields of a record the tables read."""


class InvalidRecordError(ValueError):
    """A ``trial.json`` that reads as JSON but is no usable record (:func:`record_problem`).

    The message is one line, ``"<path>: damaged trial record (<reason>)"``; ``path``, ``reason``
    and ``trial_id`` are kept as attributes.
    """

    def __init__(self, path: str | Path, reason: str, trial_id: str) -> None:
        self.path, self.reason, self.trial_id = Path(path), reason, trial_id
        super().__init__(f"{path}: damaged trial record ({reason})")


def warn_left_out(err: InvalidRecordError) -> str:
    """Warn (one line: the file, the reason, the remedy) that ``err``'s trial is left out of the
    tables; returns the reason as the trial's note (``damaged record: <reason>``)."""
    warnings.warn(
        f"{err}; trial {err.trial_id} is left out (delete {err.path.parent} to run it again)",
        RuntimeWarning,
        stacklevel=3,
    )
    return f"damaged record: {err.reason}"


@functools.cache
def _split_day_count(task: str, split: str) -> int:
    """Days of ``split`` an episode of ``task`` can start on (``Task.n_days``), from the task's
    spec where the split is a calendar split (no data loaded), else from the task itself."""
    from powerzoo.data import calendar
    from powerzoo.tasks import make_task, task_spec

    spec = task_spec(task)
    episode_days = -(-spec.horizon * spec.step_minutes // (24 * 60))  # Task.episode_days
    try:
        return int(calendar.split_day_indices(split, episode_days).size)  # Task.n_days
    except ValueError:  # a split of the task's own (tso's line_tightening, ...)
        return make_task(task, split).n_days


def protocol_days(campaign: CampaignSpec, task: str) -> list[int]:
    """The split days the campaign's evaluation protocol tests ``task`` on (every day of the
    split, or ``evaluation.episodes`` of them spread evenly)."""
    from powerzoo.benchmarks.baselines import select_days
    from powerzoo.benchmarks.campaign import episodes_of

    return select_days(_split_day_count(task, campaign.split), episodes_of(campaign.episodes, task))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _short(values: list[Any]) -> str:
    return str(values) if len(values) <= 6 else f"[{', '.join(map(str, values[:6]))}, ...]"


def record_problem(
    record: dict[str, Any], trial: TrialSpec, campaign: CampaignSpec | None = None
) -> str | None:
    """Why ``record`` cannot be used for ``trial``, or ``None`` if it can.

    Checked: the fields of :data:`REQUIRED_FIELDS`, the trial id, one episode row per evaluated
    day (with ``campaign``: the days of its evaluation protocol, :func:`protocol_days`, and with
    ``env_seeds: protocol`` the protocol's env seeds), each row's seed (the trial's) and its
    ``return``, ``length``, ``total_cost`` and ``cost_<name>``
    (finite numbers).
    """
    missing = [name for name in REQUIRED_FIELDS if name not in record]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    if record["trial_id"] != trial.trial_id:
        return f"it holds trial {record['trial_id']!r}"
    names, days, episodes = record["cost_names"], record["days"], record["episodes"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return "cost_names is not a list of names"
    if not isinstance(days, list) or not isinstance(episodes, list):
        return "days or episodes is not a list"
    if not all(isinstance(e, dict) for e in episodes):
        return "an episode row is not an object"
    if campaign is not None:
        expected = protocol_days(campaign, trial.task)
        if len(episodes) != len(expected):
            return (
                f"{len(episodes)} test episode(s), the evaluation protocol asks for "
                f"{len(expected)} ({campaign.split} split, evaluation.episodes: "
                f"{protocol_episodes(campaign, trial.task)})"
            )
        if days != expected:
            return f"evaluated on days {_short(days)}, the protocol's are {_short(expected)}"
    elif len(episodes) != len(days):
        return f"{len(episodes)} test episode(s) for {len(days)} day(s)"
    numbers = ("return", "length", "total_cost", *(f"cost_{name}" for name in names))
    protocol_seed = None
    if campaign is not None and campaign.env_seeds == "protocol":
        from powerzoo.benchmarks.stats import episode_seed

        protocol_seed = episode_seed(campaign.eval_seed(trial), 0)
    for i, row in enumerate(episodes):
        for key in ("seed", "day_id", *numbers):
            if key not in row:
                return f"episode {i} has no {key!r}"
        if row["seed"] != trial.seed:
            return f"episode {i} has seed {row['seed']!r}, the trial's is {trial.seed}"
        if protocol_seed is not None:
            want = protocol_seed + i
            if row.get("env_seed") != want:
                return f"episode {i} has env seed {row.get('env_seed')!r}, the protocol's is {want}"
        for key in numbers:
            if not _finite(row[key]):
                return f"episode {i}: {key} is {row[key]!r}, not a finite number"
    if sorted(row["day_id"] for row in episodes) != sorted(days):
        return f"its episodes' days {_short([row['day_id'] for row in episodes])} are not its days"
    if campaign is not None:
        return family_problem(record, campaign.families_of(trial.task), names)
    return None


def protocol_episodes(campaign: CampaignSpec, task: str) -> int | None:
    """``evaluation.episodes`` for ``task`` (``None``: every day of the split)."""
    from powerzoo.benchmarks.campaign import episodes_of

    return episodes_of(campaign.episodes, task)


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


def read_record(
    out_dir: str | Path, trial: TrialSpec, campaign: CampaignSpec | None = None
) -> dict[str, Any] | None:
    """The finished trial's record, ``None`` if it has not finished.

    ``ValueError`` if the folder holds a finished trial with another config under the same id,
    :class:`~powerzoo.fileio.CorruptFileError` if its ``trial.json`` cannot be read,
    :class:`InvalidRecordError` if it reads but is no usable record (:func:`record_problem`;
    with ``campaign``, its evaluation protocol is checked too).

    Args:
        out_dir: The campaign folder.
        trial: The trial.
        campaign: The campaign (its evaluation protocol), or ``None``.

    Returns:
        The record (config, evaluation, timings), or ``None``.
    """
    path = trial_dir(out_dir, trial) / TRIAL_FILE
    if not path.is_file():
        return None
    record = read_json_object(path, f"delete {path.parent} to run trial {trial.trial_id} again")
    if "config_hash" in record and record["config_hash"] != trial.config_hash:
        raise ValueError(
            f"{path} holds trial {trial.trial_id} with another config "
            f"(hash {record.get('config_hash')}, "
            f"now {trial.config_hash}); use another --out folder or delete that trial folder"
        )
    problem = record_problem(record, trial, campaign)
    if problem is not None:
        raise InvalidRecordError(path, problem, trial.trial_id)
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
    """Evaluate one policy entry on the campaign's split with the trial's evaluation seed
    (:meth:`CampaignSpec.eval_seed`); the record's evaluation fields."""
    from powerzoo.benchmarks.campaign import run_campaign

    eval_seed = campaign.eval_seed(trial)
    result = run_campaign(
        [],
        policies=[],
        seeds=[eval_seed],
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
    days = protocol_days(campaign, trial.task)
    # the rows name the trial's seed; env_seed keeps the env seeds they were tested on
    episodes = [{**e, "seed": trial.seed} for e in result.episodes]
    return {
        "days": days,
        "env_seeds": campaign.env_seeds,
        "cost_names": list(result.cost_names[trial.task]),
        "episodes": episodes,
        "mean_return": row["mean_return"],
        "normalized_score": row["normalized_score"],
        "plots": [str(p) for p in result.plots],
    }


def trained_entry(trial: TrialSpec, run_dir: Path, model: str) -> tuple[Any, str]:
    """The trial's saved model as a policy entry (objective-reward eval env, deterministic
    policy) and the model it loaded: ``"best"`` (the best validation model; ``"final"`` when
    the run kept none) or ``"final"``."""
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


def prepare_folder(
    out_dir: str | Path, trial: TrialSpec, campaign: CampaignSpec | None = None
) -> tuple[Path, dict[str, Any] | None]:
    """``(folder, record)``: the finished record if any (checked against ``campaign``'s
    protocol, :func:`read_record`), else a clean folder (remains of an interrupted run
    removed)."""
    record = read_record(out_dir, trial, campaign)
    folder = trial_dir(out_dir, trial)
    if record is None and folder.exists():
        shutil.rmtree(folder)
    return folder, record


def base_record(trial: TrialSpec) -> dict[str, Any]:
    """The fields every record of ``trial`` starts with: its spec, the code that ran it and, for
    an algorithm from outside (``package.module:Class``), its module's file and SHA-256
    (``algorithm_code``)."""
    from powerzoo.rl.entry_points import is_entry_point, module_digest

    outside = (
        {"algorithm_code": module_digest(trial.algorithm)}
        if is_entry_point(trial.algorithm)
        else {}
    )
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
        **outside,
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
    folder, record = prepare_folder(out_dir, trial, campaign)
    if record is not None:
        return record
    from powerzoo.rl.trainer import Trainer

    with one_thread():
        started_at = time.time()
        watch = Stopwatch()
        trainer = Trainer({**trial.config, "output_dir": str(folder), "name": "run"})
        result = trainer.train()
        train_seconds = watch.wall_s()
        track = None if trial.track is None else Track(**trial.track)
        compute = compute_record(
            track,
            result.env_steps,
            watch,
            trial.config.get("algorithm_kwargs"),
            result.stop_reason,
        )
        trainer.close()
        entry, model = trained_entry(trial, folder / "run", campaign.model)
        started = time.perf_counter()
        evaluation = evaluate_policy(campaign, trial, entry, folder / "evaluation")
        families = campaign.families_of(trial.task)
        if families:
            from powerzoo.benchmarks.stats import episode_seed

            evaluation["families"] = run_family_episodes(
                trial.task,
                families,
                entry.make_env,
                lambda env: entry.make_policy(env, 0),
                evaluation["days"],
                episode_seed(campaign.eval_seed(trial), 0),
                evaluation["cost_names"],
            )
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
            **compute,
            **evaluation,
        }
    write_json(folder / TRIAL_FILE, record)
    return record
