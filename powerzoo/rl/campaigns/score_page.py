"""The benchmark v2 results of a campaign folder: every (task, algorithm/setting) scored as a
submission, the aggregates across tasks per family of learners, and the page.

::

    from powerzoo.rl.campaigns.score_page import write_campaign_scores

    scored = write_campaign_scores("results/benchmark_v2", "docs/results_v2")
    scored.files["page"]              # docs/results_v2/results_v2.md

or ``powerzoo campaign-score results/benchmark_v2 --out docs/results_v2``. Nothing in the
campaign folder is written and nothing is trained or evaluated again; it works while the campaign
runs (a trial counts once its ``trial.json`` exists and passes
:func:`~powerzoo.rl.campaigns.trial.record_problem`; a damaged record is left out with a note).

Where the numbers come from:

* each row: the finished trials of one (task, label) are written as a submission folder
  (:func:`~powerzoo.benchmarks.trial_submission.submission_from_trials`) under
  ``<out>/submissions/<task>__<label>/`` and scored by
  :func:`~powerzoo.benchmarks.submission_score.score_submission`, so
  ``powerzoo score <that folder> --campaign <campaign folder>`` prints the same row; the row adds
  ``label``, ``family`` (:func:`algorithm_family`), ``n_trials_planned``, ``median_env_steps``
  and ``cpu_core_hours`` (training CPU plus test evaluation seconds of its trials / 3600);
* the aggregates: per family, across the tasks with learnable headroom
  (:attr:`~powerzoo.benchmarks.score_v2.TaskReference.learnable_headroom`), the per-run
  performances through :mod:`powerzoo.benchmarks.aggregates` (IQM, mean, median, optimality gap,
  probability of improvement, performance profiles); the mean optimality gap in % of the
  oracle's cost over the cost tasks among them;
* the held-out families (:mod:`powerzoo.rl.campaigns.score_families`): per (task, label) and
  family, the drop against the same trials' twin test days, and the rule's and oracle's drops
  from ``powerzoo families`` outputs (``families_dir``);
* the coverage: trials finished and planned, core-hours spent (each record's ``cpu_seconds``
  plus ``eval_seconds``) and projected (their mean per finished trial times the trials planned).

Scores read the campaign folder's pinned baselines table and budgets where it has them
(:func:`~powerzoo.rl.campaigns.gather.pinned_campaign_files`). The Markdown is written by
:mod:`powerzoo.rl.campaigns.score_page_text`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import BASELINES_FILE, baselines_in_use
from powerzoo.benchmarks.report import csv_text, file_label
from powerzoo.benchmarks.score_v2 import TaskReference, task_reference
from powerzoo.benchmarks.stats import BOOTSTRAP_RESAMPLES
from powerzoo.benchmarks.submission import META_FILE, read_submission
from powerzoo.benchmarks.submission_score import RESULT_COLUMNS, score_submission
from powerzoo.benchmarks.trial_submission import hardware_text, submission_from_trials
from powerzoo.fileio import CorruptFileError, atomic_write_text
from powerzoo.progress import progress_bar
from powerzoo.rl.algorithms import reference_algorithm
from powerzoo.rl.campaigns.gather import pinned_campaign_files
from powerzoo.rl.campaigns.page import CampaignFolder, code_versions, read_campaign_folder
from powerzoo.rl.campaigns.score_aggregates import (
    AGGREGATE_COLUMNS,
    FAMILIES,
    family_aggregates,
)
from powerzoo.rl.campaigns.score_diagnosis import campaign_diagnoses, merged_diagnoses
from powerzoo.rl.campaigns.score_families import (
    FAMILY_COLUMNS,
    campaign_family_rows,
    read_family_tables,
)
from powerzoo.rl.campaigns.score_figures import learning_curve_figures
from powerzoo.rl.campaigns.score_page_text import results_markdown
from powerzoo.rl.campaigns.score_summary import summary_markdown
from powerzoo.rl.campaigns.spec import TrialSpec
from powerzoo.rl.campaigns.trial import trial_dir

__all__ = [
    "FAMILIES",
    "ROW_COLUMNS",
    "AGGREGATE_COLUMNS",
    "CLUSTER_WORKERS",
    "ScoredCampaign",
    "algorithm_family",
    "finished_groups",
    "coverage",
    "family_aggregates",
    "write_campaign_scores",
    "read_machine_speeds",
    "MACHINES_FILE",
]

ROW_COLUMNS = (
    *RESULT_COLUMNS,
    "label",
    "family",
    "n_trials_planned",
    "median_env_steps",
    "min_env_steps",
    "max_env_steps",
    "cpu_core_hours",
)
"""Columns of ``results_v2.csv``: a results table's and the campaign's own."""
CLUSTER_WORKERS = 16
"""Workers of the Ray cluster the page projects the campaign's wall time on (one core each)."""
SUBMISSIONS_DIR = "submissions"
PROFILE_FILE = "performance_profiles.png"
MACHINES_FILE = "machines.jsonl"
"""A campaign folder's log of machine speeds (``benchmarks/machine_speed.py --append``)."""


def algorithm_family(algorithm: str) -> str:
    """The family of a campaign algorithm name: ``residual`` / ``safe`` for a learner behind the
    rule or a safety layer, ``bc`` for behaviour cloning then fine-tuning, ``lagrangian`` for the
    ``-L`` learners, ``learner`` for the plain ones (PPO, MAPPO, IPPO, SAC, ...)."""
    reference = reference_algorithm(algorithm)
    if reference is not None:
        if reference.layer is not None:
            return reference.layer
        return "bc" if reference.behaviour_cloning else "learner"
    return "lagrangian" if algorithm.upper().endswith("-L") else "learner"


def finished_groups(folder: CampaignFolder) -> dict[tuple[str, str], list[TrialSpec]]:
    """``{(task, label): finished trials}`` of the campaign, in campaign order; groups without a
    finished trial are absent."""
    groups: dict[tuple[str, str], list[TrialSpec]] = {}
    for trial in folder.campaign.trials:
        if trial.trial_id in folder.records:
            groups.setdefault((trial.task, trial.label), []).append(trial)
    return groups


def _trial_core_seconds(record: dict[str, Any]) -> float:
    """Training CPU seconds (wall seconds for a record without them) plus test evaluation
    seconds of one trial record."""
    train = record.get("cpu_seconds")
    if train is None:
        train = record.get("train_seconds") or 0.0
    return float(train) + float(record.get("eval_seconds") or 0.0)


def _env_steps(record: dict[str, Any]) -> int:
    return int(record.get("env_steps", record["num_timesteps"]))


def read_machine_speeds(out_dir: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``out_dir/MACHINES_FILE`` (``[]`` without one); a line that is not a
    JSON object is a :class:`~powerzoo.fileio.CorruptFileError` naming it."""
    path = Path(out_dir) / MACHINES_FILE
    if not path.is_file():
        return []
    lines = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorruptFileError(path, f"line {number}: not JSON, {exc.msg}") from None
        if not isinstance(item, dict):
            raise CorruptFileError(path, f"line {number}: not a JSON object")
        lines.append(item)
    return lines


def coverage(folder: CampaignFolder, workers: int = CLUSTER_WORKERS) -> dict[str, Any]:
    """How much of the campaign has finished and what it cost.

    Args:
        folder: The campaign folder as read.
        workers: Workers (one core each) of the cluster the projection is divided over.

    Returns:
        ``planned`` / ``finished`` (trials), ``per_seed`` (``{seed: (finished, planned)}``),
        ``core_hours`` (finished trials' training CPU plus test evaluation hours),
        ``without_cpu_seconds`` (records counted at wall seconds instead), ``wall_hours`` (their
        training wall plus test evaluation hours, as the machine ran them), ``projected_core_hours``
        (mean per finished trial x planned; ``None`` before one finished), ``cluster_hours``
        (``projected / workers``), ``workers``, ``machines`` (``{machine: trials}``),
        ``machine_speeds`` (the lines of the folder's ``machines.jsonl``, oldest first: each
        machine's speed measured by ``benchmarks/machine_speed.py`` when the campaign started on
        it; empty without the file), ``code``
        (:func:`~powerzoo.rl.campaigns.page.code_versions`) and
        ``left_out`` (``{trial_id: why}`` of trials that failed or whose record is damaged).
    """
    campaign = folder.campaign
    per_seed = {
        seed: (
            sum(1 for t in campaign.trials if t.seed == seed and t.trial_id in folder.records),
            sum(1 for t in campaign.trials if t.seed == seed),
        )
        for seed in campaign.seeds
    }
    seconds = [_trial_core_seconds(r) for r in folder.records.values()]
    projected = None if not seconds else float(np.mean(seconds)) * len(campaign.trials) / 3600
    machines: dict[str, int] = {}
    for record in folder.records.values():
        machine = hardware_text(record.get("hardware"))
        machines[machine] = machines.get(machine, 0) + 1
    idle = ("not started", "in progress or interrupted")
    return {
        "planned": len(campaign.trials),
        "finished": len(folder.records),
        "per_seed": per_seed,
        "core_hours": sum(seconds) / 3600,
        "wall_hours": sum(
            float(r.get("wall_seconds") or r.get("train_seconds") or 0.0)
            + float(r.get("eval_seconds") or 0.0)
            for r in folder.records.values()
        )
        / 3600,
        "without_cpu_seconds": sum(1 for r in folder.records.values() if "cpu_seconds" not in r),
        "projected_core_hours": projected,
        "cluster_hours": None if projected is None else projected / workers,
        "workers": workers,
        "machines": machines,
        "machine_speeds": read_machine_speeds(folder.out_dir),
        "code": code_versions(folder),
        "left_out": {t: why for t, why in folder.missing.items() if why not in idle},
    }


def _clear_submission(folder: Path) -> None:
    """Remove the files an earlier run wrote into a submission folder (a seed whose record is
    gone must not linger)."""
    for path in [folder / META_FILE, *folder.glob("episodes_seed*.csv")]:
        path.unlink(missing_ok=True)


def _score_group(
    folder: CampaignFolder, trials: Sequence[TrialSpec], where: Path, n_resamples: int
) -> dict[str, Any]:
    """The ``results_v2.csv`` row of one (task, label): its finished trials written as the
    submission folder ``where`` and scored."""
    _clear_submission(where)
    submission_from_trials([trial_dir(folder.out_dir, t) for t in trials], where)
    row = score_submission(read_submission(where), n_resamples=n_resamples)
    records = [folder.records[t.trial_id] for t in trials]
    steps = [_env_steps(r) for r in records]
    first = trials[0]
    planned = [t for t in folder.campaign.trials if (t.task, t.label) == (first.task, first.label)]
    return {
        **row,
        "label": first.label,
        "family": algorithm_family(first.algorithm),
        "n_trials_planned": len(planned),
        "median_env_steps": float(np.median(steps)),
        "min_env_steps": min(steps),
        "max_env_steps": max(steps),
        "cpu_core_hours": sum(_trial_core_seconds(r) for r in records) / 3600,
    }


@dataclasses.dataclass
class ScoredCampaign:
    """What :func:`write_campaign_scores` wrote.

    Attributes:
        folder: The campaign folder as read.
        rows: One row per (task, label) with a finished trial (:data:`ROW_COLUMNS`).
        references: Each campaign task's reference (``None`` where the baselines table cannot
            score it), by task.
        aggregates: The family aggregates (:func:`family_aggregates`).
        coverage: :func:`coverage` of the folder.
        files: ``results_csv``, ``aggregates_csv``, ``families_csv``, ``page``, ``summary``
            (``summary_v2.md``, :mod:`~powerzoo.rl.campaigns.score_summary`), ``curves``
            (``{task: learning-curve PNG}``, :mod:`~powerzoo.rl.campaigns.score_figures`),
            ``profiles``
            (``None`` when no family has a run on a task with learnable headroom) and
            ``submissions`` (the folder of the submission folders).
        family_rows: The held-out family rows (:data:`~powerzoo.rl.campaigns.score_families.
            FAMILY_COLUMNS`).
        families_dir: The baselines' ``powerzoo families`` outputs read (``None``: not given).
    """

    folder: CampaignFolder
    rows: list[dict[str, Any]]
    references: dict[str, TaskReference | None]
    aggregates: list[dict[str, Any]]
    coverage: dict[str, Any]
    files: dict[str, Path | None]
    family_rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    families_dir: Path | None = None


def _references(folder: CampaignFolder) -> dict[str, TaskReference | None]:
    out: dict[str, TaskReference | None] = {}
    for task in folder.campaign.tasks:
        try:
            out[task] = task_reference(task, folder.campaign.split)
        except (ValueError, FileNotFoundError, KeyError):
            out[task] = None
    return out


def _csv_cells(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its lists and dicts as JSON text (as a results table keeps them)."""
    return {k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()}


def _remove_stale(submissions: Path, keep: set[str]) -> None:
    """Clear the submission folders of groups no longer scored (their trials' records gone)."""
    if not submissions.is_dir():
        return
    for stale in submissions.iterdir():
        if stale.is_dir() and stale.name not in keep and (stale / META_FILE).is_file():
            _clear_submission(stale)
            if not any(stale.iterdir()):
                stale.rmdir()


def write_campaign_scores(
    campaign_dir: str | Path,
    out_dir: str | Path,
    *,
    diagnoses: dict[str, str] | None = None,
    families_dir: str | Path | None = None,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    progress: bool | None = None,
    command: str | None = None,
) -> ScoredCampaign:
    """Score every (task, label) of a campaign folder with a finished trial and write the
    benchmark v2 results into ``out_dir`` (module docstring).

    Files: ``submissions/<task>__<label>/`` (one submission folder per row), ``results_v2.csv``
    (:data:`ROW_COLUMNS`), ``aggregates_v2.csv`` (:data:`AGGREGATE_COLUMNS`), ``families_v2.csv``
    (:data:`~powerzoo.rl.campaigns.score_families.FAMILY_COLUMNS`), ``performance_profiles.png``,
    ``results_v2.md`` (the page) and ``summary_v2.md`` (one row per task, README's table).

    Args:
        campaign_dir: A ``powerzoo campaign`` output folder (read only).
        out_dir: Folder to write (created).
        diagnoses: ``{task: text}``: why no row of a task is above its anchor yet, as measured
            (:func:`~powerzoo.rl.campaigns.page.read_diagnoses`); added after the diagnosis
            the records give (:mod:`~powerzoo.rl.campaigns.score_diagnosis`).
        families_dir: A folder of ``powerzoo families`` outputs (:func:`~powerzoo.rl.campaigns.
            score_families.read_family_tables`): the rule's and oracle's drops on each family.
        n_resamples: Bootstrap resamples of every interval.
        progress: Progress bar over the (task, label) groups (``None``: on a terminal).
        command: The command line the page says made it (default: ``powerzoo campaign-score
            <campaign_dir> --out <out_dir>``).

    Returns:
        The :class:`ScoredCampaign`.

    Raises:
        FileNotFoundError: No ``campaign.json`` in ``campaign_dir``, or no ``powerzoo families``
            output in ``families_dir``.
        ValueError: No finished trial, ``n_resamples < 1``, a campaign not tested on the
            protocol's env seeds, or diagnoses of a task the campaign does not hold.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    tables = None if families_dir is None else read_family_tables(families_dir)
    with pinned_campaign_files(campaign_dir):
        folder = read_campaign_folder(campaign_dir)
        campaign = folder.campaign
        if campaign.env_seeds != "protocol":
            days = "" if campaign.episodes is None else " (on evaluation.episodes days)"
            raise ValueError(
                f"{folder.out_dir}: campaign {campaign.name} tests each trial on its own env "
                f"seeds{days}, not the baselines table's days and env seeds; campaign-score "
                "scores a campaign run with evaluation.env_seeds: protocol (and no "
                "evaluation.episodes); `powerzoo campaign-report` summarises this one"
            )
        unknown = sorted(set(diagnoses or {}) - set(campaign.tasks))
        if unknown:
            raise ValueError(
                f"diagnoses for tasks the campaign does not hold: {', '.join(unknown)}"
            )
        groups = finished_groups(folder)
        if not groups:
            raise ValueError(
                f"{folder.out_dir}: no finished trial yet (0 of {len(campaign.trials)}); "
                "nothing to score"
            )
        out = Path(out_dir).resolve()
        submissions = out / SUBMISSIONS_DIR
        names = {key: f"{key[0]}__{file_label(key[1])}" for key in groups}
        _remove_stale(submissions, set(names.values()))
        rows = []
        bar = progress_bar(groups.items(), progress=progress, desc="scoring", unit="row")
        for key, trials in bar:
            bar.set_postfix_str(f"{key[0]} {key[1]}", refresh=False)
            rows.append(_score_group(folder, trials, submissions / names[key], n_resamples))
        references = _references(folder)
        learnable = {t: ref is not None and ref.learnable_headroom for t, ref in references.items()}
        measured = campaign_diagnoses(folder.out_dir, groups, rows, learnable)
        diagnoses = merged_diagnoses(measured, diagnoses or {})
        records = {k: [folder.records[t.trial_id] for t in v] for k, v in groups.items()}
        family_rows = campaign_family_rows(campaign.tasks, records, tables, n_resamples)
        table = baselines_in_use()
        baselines = {
            "file": table.name,
            "pinned": table != BASELINES_FILE,
            "sha256": hashlib.sha256(table.read_bytes()).hexdigest()[:16],
        }
    aggregates, png = family_aggregates(rows, n_resamples, out / PROFILE_FILE)
    if png is None:
        (out / PROFILE_FILE).unlink(missing_ok=True)
    scored = ScoredCampaign(
        folder,
        rows,
        references,
        aggregates,
        {**coverage(folder), "baselines": baselines},
        {
            "results_csv": atomic_write_text(
                out / "results_v2.csv", csv_text(ROW_COLUMNS, [_csv_cells(r) for r in rows])
            ),
            "aggregates_csv": atomic_write_text(
                out / "aggregates_v2.csv",
                csv_text(AGGREGATE_COLUMNS, [_csv_cells(r) for r in aggregates]),
            ),
            "families_csv": atomic_write_text(
                out / "families_v2.csv",
                csv_text(FAMILY_COLUMNS, [_csv_cells(r) for r in family_rows]),
            ),
            "profiles": png,
            "submissions": submissions,
        },
        family_rows,
        None if families_dir is None else Path(families_dir),
    )
    if command is None:
        command = f"powerzoo campaign-score {campaign_dir} --out {out_dir}"
    scored.files["curves"] = learning_curve_figures(folder, out)  # type: ignore[assignment]
    text = results_markdown(scored, n_resamples, command, diagnoses or {})
    scored.files["page"] = atomic_write_text(out / "results_v2.md", text)
    summary = summary_markdown(scored, measured)
    scored.files["summary"] = atomic_write_text(out / "summary_v2.md", summary)
    return scored
