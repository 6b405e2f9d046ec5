"""One algorithm on one task under a campaign's protocol, as a scored submission.

:func:`submission_campaign` takes a campaign file (benchmark v2's, ``campaigns/benchmark_v2.yaml``,
by default in the command line) and keeps its protocol for one task: the compute track, the
task's training budget and parallel envs, the evaluation (split, env seeds, held-out families,
the model kept: the best validation evaluation). It replaces the campaign's algorithms with the
one given: a registered name or an SB3 algorithm class from outside PowerZoo
(``"package.module:Class"``, :func:`powerzoo.rl.entry_points.is_entry_point`), with settings
from run-config fields of its own, a ``powerzoo tune`` folder, or the defaults.
:func:`run_submission` runs its trials (resumable: finished trials are kept), writes the
submission folder from their records
(:func:`powerzoo.benchmarks.trial_submission.submission_from_trials`) and scores it against the
baselines table and budgets the campaign folder pinned
(:mod:`powerzoo.benchmarks.submission_score`), so the row is scored exactly as
``powerzoo score FOLDER --campaign DIR`` scores it again. The trials of an algorithm from
outside record the SHA-256 of its module's source file (the folder's ``code_hash`` names it); a
finished trial whose module has changed since trains again.

Folders under ``out``: ``campaign/`` (the campaign folder: trial records, Ray-free, resumable)
and ``submission/`` (written again from the records on every call).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from powerzoo.rl.algorithms import algorithm_label
from powerzoo.rl.campaigns.parse import parse_campaign
from powerzoo.rl.campaigns.parse_checks import fail
from powerzoo.rl.campaigns.spec import CampaignError, CampaignSpec
from powerzoo.rl.campaigns.trial import TRIAL_FILE, trial_dir
from powerzoo.rl.entry_points import is_entry_point, module_digest

__all__ = [
    "CAMPAIGN_DIR",
    "NOT_GIVEN_TUNING",
    "SUBMISSION_DIR",
    "SubmissionRun",
    "run_submission",
    "submission_campaign",
    "tuned_kwargs",
    "tuning_budget_of",
]

CAMPAIGN_DIR = "campaign"
"""The campaign folder under the output folder."""
SUBMISSION_DIR = "submission"
"""The submission folder under the output folder."""


@dataclasses.dataclass(frozen=True)
class SubmissionRun:
    """What :func:`run_submission` made.

    Attributes:
        campaign_dir: The campaign folder (trial records).
        submission_dir: The submission folder.
        row: The scored row (:func:`powerzoo.benchmarks.submission_score.score_submission`).
        trials: Trials finished / trials of the submission.
        set_aside: Finished trials of the folder set aside (moved to ``campaign/superseded/``)
            and trained again or dropped: another seed list, algorithm or setting than this
            call's, or a module changed since they trained.
    """

    campaign_dir: Path
    submission_dir: Path
    row: dict[str, Any]
    trials: tuple[int, int]
    set_aside: tuple[str, ...] = ()


NOT_GIVEN_TUNING = "not recorded (none given to powerzoo submit)"
"""The submission's ``tuning_budget`` when none is given."""


_SET_BY_SUBMIT = ("seed", "output_dir", "name")  # a preset's are replaced, as a campaign does
# compute beyond the track's one core (workers whose CPU time the clock does not see, a GPU)
_OUTSIDE_THE_TRACK = ("rollout_workers", "rollout_address", "device")
_SET_BY_TRACK = ("total_timesteps", "episodes")


def _config_setting(config: str | Path, task: str, algorithm: str) -> dict[str, Any]:
    """The campaign setting of a ``--config`` file: any run-config fields (its ``task`` and
    ``algorithm``, when given, must be the submission's; the track sets the budget and the
    command the seeds and folders, so a preset's ``total_timesteps`` / ``episodes``, ``seed``,
    ``output_dir`` and ``name`` are dropped; ``init_model`` is refused); ``algorithm_kwargs`` are
    checked against
    ``algorithm`` with the rest when the campaign is parsed."""
    from powerzoo.rl.algorithms import ALL_ALGORITHMS, canonical_algorithm
    from powerzoo.rl.config import read_config_file

    raw = read_config_file(config)
    if not isinstance(raw, Mapping):
        raise ValueError(f"--config {config}: expected a mapping of run-config fields")
    fields = dict(raw)
    if fields.get("task", task) != task:
        raise ValueError(f"--config {config} is a {fields['task']} config, not {task}")
    named = fields.get("algorithm")
    if named is not None and canonical_algorithm(named, ALL_ALGORITHMS) != algorithm:
        raise ValueError(
            f"--config {config} names algorithm {named}, --algo {algorithm}: drop its "
            "`algorithm:` or make them the same"
        )
    if fields.get("init_model"):
        raise ValueError(
            f"--config {config}: init_model not for a submission (every seed trains from scratch)"
        )
    kwargs_given = fields.get("algorithm_kwargs") or {}
    extra = [
        k for k in _OUTSIDE_THE_TRACK if isinstance(kwargs_given, Mapping) and k in kwargs_given
    ]
    if extra:
        raise ValueError(
            f"--config {config}: algorithm_kwargs.{extra[0]} is compute beyond the track's one "
            "core; a submission trains on the track's allowance alone"
        )
    for key in ("task", "algorithm", "init_model", *_SET_BY_SUBMIT, *_SET_BY_TRACK):
        fields.pop(key, None)
    kwargs = fields.pop("algorithm_kwargs", None) or {}
    return {"algorithm_kwargs": dict(kwargs), "overrides": fields}


def tuned_kwargs(tuning_dir: str | Path, task: str, algorithm: str) -> dict[str, Any]:
    """The ``algorithm_kwargs`` a ``powerzoo tune`` folder chose (``best_config.yaml``), checked
    to be of ``task`` and ``algorithm`` (``tuning.json``)."""
    folder = Path(tuning_dir)
    summary, best = folder / "tuning.json", folder / "best_config.yaml"
    for path in (summary, best):
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: --tuning takes a powerzoo tune --out folder"
            )
    tuning = json.loads(summary.read_text(encoding="utf-8"))
    if (tuning.get("task"), tuning.get("algorithm")) != (task, algorithm):
        raise ValueError(
            f"{summary} tuned {tuning.get('algorithm')} on {tuning.get('task')}, not {algorithm} "
            f"on {task}"
        )
    chosen = yaml.safe_load(best.read_text(encoding="utf-8")) or {}
    return dict(chosen.get("algorithm_kwargs") or {})


def tuning_budget_of(tuning_dir: str | Path) -> dict[str, Any]:
    """A submission's ``tuning_budget`` from a ``powerzoo tune`` folder's ``tuning.json``: the
    configurations tried, the split chosen on, the budget of each, the search space's SHA-256 and
    the tuning's total CPU time."""
    tuning = json.loads((Path(tuning_dir) / "tuning.json").read_text(encoding="utf-8"))
    keys = ("configurations", "split", "track", "steps_per_configuration", "validation_episodes")
    keys += ("search_space_sha256", "total_cpu_seconds")
    return {"tool": "powerzoo tune", **{k: tuning.get(k) for k in keys}}


def _set_aside(campaign: CampaignSpec, campaign_dir: Path) -> list[str]:
    """The finished trials in ``campaign_dir`` this campaign does not hold with the same config
    (another seed, algorithm or setting): taking the folder over sets them aside."""
    wanted = {t.trial_id: t.config_hash for t in campaign.trials}
    out = []
    for path in sorted((campaign_dir / "trials").glob(f"*/{TRIAL_FILE}")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if wanted.get(path.parent.name) != record.get("config_hash"):
            out.append(path.parent.name)
    return out


def _changed_code(campaign: CampaignSpec, campaign_dir: Path) -> list[str]:
    """The finished trials of an algorithm from outside whose module has changed since they
    trained (another SHA-256 of its source file than their record's): they train again."""
    changed = []
    for trial in campaign.trials:
        path = trial_dir(campaign_dir, trial) / TRIAL_FILE
        if not (is_entry_point(trial.algorithm) and path.is_file()):
            continue
        try:
            recorded = json.loads(path.read_text(encoding="utf-8")).get("algorithm_code") or {}
        except (OSError, ValueError):
            continue  # the campaign's own checks name a damaged record
        if recorded.get("sha256") != module_digest(trial.algorithm)["sha256"]:
            changed.append(trial.trial_id)
    return changed


def _read_base(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(
            f"campaign file {path} not found (--campaign; a relative path is read from the "
            "working folder: run from the clone's root, or give the file's path)"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise CampaignError(f"campaign {path}: not valid YAML: {err}") from None
    if not isinstance(data, Mapping):
        raise CampaignError(f"campaign {path}: expected a mapping of keys")
    return dict(data)


def _task_budget(where: str, budget: Any, task: str) -> dict[str, Any]:
    """The base campaign's budget section for ``task`` alone (its ``per_task`` entry merged)."""
    if budget is None:
        return {}
    if not isinstance(budget, Mapping):
        raise fail(where, "'budget' must be a mapping")
    per_task = budget.get("per_task") or {}
    if not isinstance(per_task, Mapping):
        raise fail(where, "'budget.per_task' must be a mapping")
    own = {k: v for k, v in budget.items() if k != "per_task"}
    return {**own, **dict(per_task.get(task) or {})}


def submission_campaign(
    task: str,
    algorithm: str,
    *,
    campaign_file: str | Path,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    config: str | Path | None = None,
    cpu_seconds: float | None = None,
    tuning_dir: str | Path | None = None,
) -> CampaignSpec:
    """The campaign that trains ``algorithm`` on ``task`` under ``campaign_file``'s protocol.

    Args:
        task: A task of the campaign file.
        algorithm: A registered algorithm name or an entry point ``"package.module:Class"``.
        campaign_file: The campaign YAML whose track, budget and evaluation are kept.
        seeds: Training seeds (one trial each).
        config: A run config (YAML/JSON) for the algorithm's settings; default: the run
            config defaults (the campaign's budget and track still apply).
        cpu_seconds: A smaller allowance than the track's, in seconds (a smoke run: its records
            are marked as not the standard track); counted in CPU time.
        tuning_dir: A ``powerzoo tune`` output folder of this task and algorithm: its chosen
            ``algorithm_kwargs`` (``best_config.yaml``) are the setting's (named ``tuned``);
            the campaign's protocol (evaluation, envs, track) stays.

    Returns:
        The validated campaign (``CampaignError`` on bad input, before anything runs).
    """
    from powerzoo.rl.algorithms import ALL_ALGORITHMS, canonical_algorithm

    algorithm = canonical_algorithm(algorithm, ALL_ALGORITHMS)  # any case; an entry point as is
    path = Path(campaign_file)
    base = _read_base(path)
    where = f"campaign {path}"
    tasks = base.get("tasks") or []
    if task not in tasks:
        raise fail(where, f"has no task {task!r}; its tasks: {', '.join(map(str, tasks))}")
    track = base.get("track")
    if cpu_seconds is not None:
        if track is None:
            raise fail(where, "has no compute track, so --cpu-seconds has nothing to shorten")
        named = {"name": track} if isinstance(track, str) else dict(track)
        track = {**named, "clock": "cpu", "wall_clock_s": float(cpu_seconds)}
    setting: dict[str, Any] = {}
    setting_name = "default"
    if config is not None and tuning_dir is not None:
        raise ValueError("give --config or --tuning, not both (a tuning's choice is its config)")
    if tuning_dir is not None:
        setting = {"algorithm_kwargs": tuned_kwargs(tuning_dir, task, algorithm)}
        setting_name = "tuned"
    if config is not None:
        setting = _config_setting(config, task, algorithm)
        # two config files are two settings (their rows are two rows of a results table)
        content = json.dumps(setting, sort_keys=True, default=str).encode()
        setting_name = f"config-{hashlib.sha256(content).hexdigest()[:8]}"
    data = {
        "name": f"submit-{algorithm_label(algorithm)}-{task}",
        "tasks": [task],
        "seeds": [int(s) for s in seeds],
        "track": track,
        "budget": _task_budget(where, base.get("budget"), task),
        "evaluation": base.get("evaluation"),
        "algorithms": {algorithm: {"tasks": [task], "settings": {setting_name: setting}}},
        "ray": {"cpus_per_trial": 1, "max_concurrent_trials": 1},
    }
    return parse_campaign(
        data,
        base_dir=path.parent,
        source=f"{path} for {algorithm} on {task}",
        default_name="submit",
    )


def run_submission(
    campaign: CampaignSpec,
    out: str | Path,
    *,
    tuning_budget: Any = None,
    progress: bool | None = None,
    n_resamples: int | None = None,
) -> SubmissionRun:
    """Run ``campaign``'s unfinished trials locally, write the submission folder from their
    records and score it against the baselines table and budgets the campaign folder pinned.

    Args:
        campaign: From :func:`submission_campaign` (one task, one algorithm/setting).
        out: The output folder (``campaign/`` and ``submission/`` inside).
        tuning_budget: The submission's ``tuning_budget`` (default: :data:`NOT_GIVEN_TUNING`).
        progress: Progress bars (``None``: when stderr is a terminal).
        n_resamples: Bootstrap resamples of the score's intervals (default: the page's).

    Returns:
        The folders and the scored row.
    """
    from powerzoo.benchmarks.submission import read_submission
    from powerzoo.benchmarks.submission_score import score_submission
    from powerzoo.benchmarks.trial_submission import submission_from_trials
    from powerzoo.rl.campaigns.gather import pinned_campaign_files
    from powerzoo.rl.campaigns.local import run_local
    from powerzoo.rl.campaigns.trial import read_record

    root = Path(out)
    campaign_dir = root / CAMPAIGN_DIR
    changed = _changed_code(campaign, campaign_dir)
    set_aside = _set_aside(campaign, campaign_dir)
    run_local(campaign, campaign_dir, progress=progress, update=True, rerun=changed)
    finished = [t for t in campaign.trials if read_record(campaign_dir, t, campaign) is not None]
    if not finished:
        raise RuntimeError(f"no trial of {campaign.name} finished; see {campaign_dir}")
    submission_dir = root / SUBMISSION_DIR
    if submission_dir.exists():
        shutil.rmtree(submission_dir)  # written from the records every time
    submission_from_trials(
        [trial_dir(campaign_dir, t) for t in finished],
        submission_dir,
        tuning_budget=tuning_budget or NOT_GIVEN_TUNING,
    )

    scoring = {} if n_resamples is None else {"n_resamples": n_resamples}
    with pinned_campaign_files(campaign_dir):
        row = score_submission(read_submission(submission_dir), **scoring)
    return SubmissionRun(
        campaign_dir,
        submission_dir,
        row,
        (len(finished), len(campaign.trials)),
        tuple(sorted({*set_aside, *changed})),
    )
