"""The results page of a campaign folder, built from what is on disk: nothing is trained or
evaluated again.

::

    from powerzoo.rl.campaigns.page import write_results_page

    page = write_results_page("results/benchmark", "docs/results")
    page.index                        # docs/results/index.md

or ``powerzoo campaign-report results/benchmark --out docs/results``. It works on a finished
campaign and on one still running or interrupted: a trial counts once its ``trial.json`` exists,
and the page lists the others.

Where the numbers come from:

* baselines (random, rule-based, oracle, ...): the packaged baselines table
  (:mod:`powerzoo.benchmarks.baselines`), whose rows keep each test episode's return and costs;
  the gather step of ``powerzoo campaign`` evaluates them again over every campaign seed, this
  page takes the table's seed as it is. Besides the campaign's baselines the page shows the
  table's ``idle`` row wherever the task has one (the operator doing nothing,
  :class:`~powerzoo.benchmarks.policies.IdlePolicy`), so a trained row that does worse than
  doing nothing shows as such;
* trained rows: one per (task, algorithm, setting), pooling the test episodes of its finished
  seeds (:func:`~powerzoo.rl.campaigns.gather.pooled_trial_rows`, as ``results.csv``);
* learning curves: each finished trial's validation log (``run/evaluation/evaluation_metrics.csv``);
* compute time: each record's training and evaluation seconds and its end time.

Both kinds of rows go through :func:`~powerzoo.benchmarks.report.summary_row`, so the mean
return, its bootstrap interval, the normalised and budget-aware scores and the share of days over
budget are those of ``results.csv``. The Markdown is written by
:mod:`powerzoo.rl.campaigns.page_text`.
"""

from __future__ import annotations

import csv
import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import baseline_rows
from powerzoo.benchmarks.budget_snapshot import budgets_of
from powerzoo.benchmarks.plots import LearningCurve, plot_learning_curves, plot_return_vs_costs
from powerzoo.benchmarks.report import (
    CampaignResult,
    file_label,
    summary_row,
    write_csv_tables,
)
from powerzoo.benchmarks.stats import bootstrap_ci
from powerzoo.fileio import CorruptFileError, atomic_write_text, read_json
from powerzoo.rl.campaigns.gather import pinned_campaign_files, pooled_trial_rows
from powerzoo.rl.campaigns.local import CAMPAIGN_FILE
from powerzoo.rl.campaigns.spec import CampaignSpec
from powerzoo.rl.campaigns.trial import (
    InvalidRecordError,
    read_json_object,
    read_record,
    trial_dir,
    warn_left_out,
)
from powerzoo.rl.evaluation_log import EVAL_CSV
from powerzoo.tasks import task_spec

__all__ = [
    "CampaignFolder",
    "ResultsPage",
    "read_campaign_folder",
    "table_baseline_rows",
    "learning_curves",
    "trial_times",
    "campaign_timing",
    "code_versions",
    "write_results_page",
    "CLUSTER_WORKERS",
]

CLUSTER_WORKERS = (16, 64)
"""Cluster sizes (trials running at once, one core each) the page estimates the campaign's time
for."""


@dataclasses.dataclass
class CampaignFolder:
    """A campaign folder as it is now.

    Attributes:
        out_dir: the folder (absolute).
        campaign: the campaign its ``campaign.json`` describes.
        records: the finished trials' records by trial id.
        missing: ``{trial_id: why}`` of every other trial (not started, in progress or
            interrupted, failed, damaged record).
    """

    out_dir: Path
    campaign: CampaignSpec
    records: dict[str, dict[str, Any]]
    missing: dict[str, str]


@dataclasses.dataclass
class ResultsPage:
    """What :func:`write_results_page` wrote.

    Attributes:
        index: ``index.md``, the page.
        summary: ``summary.md``, one row per task (for the README).
        rows: every table row (baselines and pooled trained rows, ``results.csv`` columns).
        plots: every PNG written.
        folder: the campaign folder read.
    """

    index: Path
    summary: Path
    rows: list[dict[str, Any]]
    plots: list[Path]
    folder: CampaignFolder


def read_campaign_folder(out_dir: str | Path) -> CampaignFolder:
    """Read ``out_dir``'s ``campaign.json`` and every finished trial record; nothing is written.

    ``FileNotFoundError`` without ``campaign.json``; a damaged ``campaign.json`` is a
    :class:`~powerzoo.fileio.CorruptFileError`. A damaged ``trial.json`` does not stop the page:
    that trial is listed as missing with the reason (one that reads but fails
    :func:`~powerzoo.rl.campaigns.trial.record_problem` also with a one-line warning).
    """
    out = Path(out_dir).resolve()
    path = out / CAMPAIGN_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"no {CAMPAIGN_FILE} in {out}; pass the --out folder of `powerzoo campaign`"
        )
    data = read_json_object(path, "it is written by `powerzoo campaign`; run it again")
    campaign = CampaignSpec.from_dict(data)
    records: dict[str, dict[str, Any]] = {}
    missing: dict[str, str] = {}
    for trial in campaign.trials:
        try:
            record = read_record(out, trial, campaign)
        except InvalidRecordError as err:  # left out with a warning, listed as missing
            missing[trial.trial_id] = warn_left_out(err)
            continue
        except (CorruptFileError, ValueError) as err:
            missing[trial.trial_id] = f"record not readable: {err}"
            continue
        if record is not None:
            records[trial.trial_id] = record
            continue
        folder = trial_dir(out, trial)
        error = folder / "error.txt"
        if error.is_file():
            lines = error.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            missing[trial.trial_id] = "failed: " + (lines[-1][:200] if lines else "no message")
        elif folder.is_dir():
            missing[trial.trial_id] = "in progress or interrupted"
        else:
            missing[trial.trial_id] = "not started"
    return CampaignFolder(out, campaign, records, missing)


def _cost_names(folder: CampaignFolder, task: str) -> tuple[str, ...]:
    for trial in folder.campaign.trials:
        if trial.task == task and trial.trial_id in folder.records:
            return tuple(folder.records[trial.trial_id]["cost_names"])
    return tuple(task_spec(task).constraint_names)


def table_baseline_rows(
    task: str, split: str, cost_names: tuple[str, ...], policies: tuple[str, ...] = ()
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(rows, episodes)`` of the baselines table's policies on ``task`` / ``split`` (those in
    ``policies`` when given), from the table's per-episode returns and costs, without running
    anything; ``([], [])`` when the table has no rows for the task.

    Each row is :func:`~powerzoo.benchmarks.report.summary_row` of the table's episodes (seed:
    the table's; length: its mean length), ``kind="baseline"``.
    """
    try:
        table = baseline_rows(task, split)
    except (ValueError, FileNotFoundError):
        return [], []
    rows, episodes = [], []
    for policy, entry in table.items():
        if policies and policy not in policies:
            continue
        costs = entry.get("episode_costs") or {}
        if any(name not in costs for name in cost_names):
            continue  # a table row without per-episode costs cannot be summarised
        seed = int(entry["seed"])
        mine = [
            {
                "task": task,
                "policy": policy,
                "seed": seed,
                "episode": i,
                "day_id": int(day),
                "env_seed": seed + i,
                "return": float(ret),
                "length": entry["mean_length"],
                "total_cost": float(sum(costs[name][i] for name in cost_names)),
                **{f"cost_{name}": float(costs[name][i]) for name in cost_names},
            }
            for i, (day, ret) in enumerate(zip(entry["day_ids"], entry["returns"], strict=True))
        ]
        source = f"baselines table ({entry.get('date', 'undated')})"
        rows.append(
            summary_row(task, policy, "baseline", source, mine, entry["day_ids"], cost_names, split)
        )
        episodes += mine
    return rows, episodes


def _read_curve_csv(path: Path) -> dict[int, float]:
    """``{timestep: validation mean return}`` of one ``evaluation_metrics.csv``."""
    with path.open(newline="", encoding="utf-8") as handle:
        return {int(r["timestep"]): float(r["mean_return"]) for r in csv.DictReader(handle)}


def learning_curves(folder: CampaignFolder, task: str) -> list[LearningCurve]:
    """One :class:`~powerzoo.benchmarks.plots.LearningCurve` per (algorithm, setting) of
    ``task``: each finished trial's validation mean return ($ per episode) against env steps;
    at each evaluated step the mean over the seeds evaluated there and its 95 % bootstrap
    interval over them (:func:`~powerzoo.benchmarks.stats.bootstrap_ci`). Trials without a
    readable log are left out."""
    by_label: dict[str, list[dict[int, float]]] = {}
    for trial in folder.campaign.trials:
        if trial.task != task or trial.trial_id not in folder.records:
            continue
        path = trial_dir(folder.out_dir, trial) / "run" / "evaluation" / EVAL_CSV
        try:
            by_label.setdefault(trial.label, []).append(_read_curve_csv(path))
        except (OSError, KeyError, ValueError):
            continue
    curves = []
    for label, logs in by_label.items():
        steps = sorted({s for log in logs for s in log})
        if not steps:
            continue
        values = [np.asarray([log[s] for log in logs if s in log]) for s in steps]
        intervals = np.asarray([bootstrap_ci(v) for v in values]).reshape(-1, 2)
        curves.append(
            LearningCurve(
                label,
                np.asarray(steps),
                np.asarray([v.mean() for v in values]),
                intervals[:, 0],
                intervals[:, 1],
                np.asarray([v.size for v in values]),
            )
        )
    return curves


def _run_state_time(folder: Path) -> float | None:
    """End of training (s since the epoch) from the run's ``run_state.json`` (local time)."""
    try:
        stamp = read_json(folder / "run" / "run_state.json")["updated"]
        return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
    except (OSError, KeyError, ValueError, TypeError):
        return None


def trial_times(folder: CampaignFolder) -> dict[str, dict[str, float]]:
    """``{trial_id: {"seconds", "start", "end"}}`` of every finished trial: training plus test
    evaluation seconds, and its end (s since the epoch): the record's ``finished_at``, else the
    run's last state update plus the evaluation seconds, else ``trial.json``'s modification
    time; start = end - seconds."""
    out = {}
    for trial_id, rec in folder.records.items():
        seconds = float(rec.get("train_seconds") or 0.0) + float(rec.get("eval_seconds") or 0.0)
        where = trial_dir(folder.out_dir, folder.campaign.trial(trial_id))
        end = rec.get("finished_at")
        if end is None:
            trained = _run_state_time(where)
            end = (
                trained + float(rec.get("eval_seconds") or 0.0)
                if trained is not None
                else (where / "trial.json").stat().st_mtime
            )
        out[trial_id] = {"seconds": seconds, "start": float(end) - seconds, "end": float(end)}
    return out


def campaign_timing(
    folder: CampaignFolder, workers: tuple[int, ...] = CLUSTER_WORKERS
) -> dict[str, Any]:
    """Compute time of the campaign from its finished trials (seconds).

    Returns ``finished`` (trials), ``trial_seconds`` (their sum), ``wall_seconds`` (first start
    to last end here), ``parallelism`` (their ratio), ``estimated_missing`` (trials without a
    time, each estimated by the mean of finished trials of the same task, algorithm and
    setting, else task and algorithm, else task, else any task), ``estimated_from`` (how many
    estimates each of those levels gave), ``total_seconds`` (finished plus estimated),
    ``left_seconds`` (the estimates' sum: trial time still to run), ``longest``
    (``(trial_id, seconds)``, estimates included: no cluster finishes sooner), ``cluster``
    (``{N: max(total / N, longest)}`` for ``N`` workers of one core) and ``code``
    (:func:`code_versions`).
    Empty dict without a finished trial.
    """
    times = trial_times(folder)
    if not times:
        return {}
    seconds = {t: v["seconds"] for t, v in times.items()}
    specs = {t.trial_id: t for t in folder.campaign.trials}
    keys = {
        "the same task, algorithm and setting": lambda t: (t.task, t.algorithm, t.setting),
        "the same task and algorithm": lambda t: (t.task, t.algorithm),
        "the same task": lambda t: (t.task,),
        "all finished trials": lambda t: (),
    }
    estimated: dict[str, float] = {}
    levels = dict.fromkeys(keys, 0)
    for trial_id in folder.missing:
        trial = specs[trial_id]
        for level, key in keys.items():
            same = [s for t, s in seconds.items() if key(specs[t]) == key(trial)]
            if same:
                estimated[trial_id] = float(np.mean(same))
                levels[level] += 1
                break
    total = sum(seconds.values()) + sum(estimated.values())
    longest = max({**seconds, **estimated}.items(), key=lambda kv: kv[1])
    wall = max(v["end"] for v in times.values()) - min(v["start"] for v in times.values())
    return {
        "finished": len(times),
        "trial_seconds": sum(seconds.values()),
        "wall_seconds": wall,
        "parallelism": sum(seconds.values()) / wall if wall > 0 else None,
        "estimated_missing": len(estimated),
        "estimated_from": {level: n for level, n in levels.items() if n},
        "total_seconds": total,
        "left_seconds": sum(estimated.values()),
        "longest": longest,
        "cluster": {n: max(total / n, longest[1]) for n in workers},
        "code": code_versions(folder),
    }


def code_versions(folder: CampaignFolder) -> list[dict[str, Any]]:
    """Which code produced the finished trials: one entry per source hash of the package
    (``source_hash``; ``None`` for records written before trials kept their code), with its
    ``commits`` (sorted, ``None`` left out) and ``trials`` (how many), most trials first."""
    groups: dict[str | None, dict[str, Any]] = {}
    for record in folder.records.values():
        code = record.get("code") or {}
        entry = groups.setdefault(
            code.get("source_hash"),
            {"source_hash": code.get("source_hash"), "commits": set(), "trials": 0},
        )
        entry["trials"] += 1
        if code.get("commit"):
            entry["commits"].add(code["commit"])
    out = [{**e, "commits": sorted(e["commits"])} for e in groups.values()]
    return sorted(out, key=lambda e: (-e["trials"], e["source_hash"] or ""))


def read_diagnoses(path: str | Path) -> dict[str, str]:
    """The ``task: text`` mapping of a diagnoses file (YAML): why no trained row of a task
    reaches the rule within its budgets, as measured. ``ValueError`` naming the file if it is not
    such a mapping."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"{path}: cannot read the diagnoses file ({err})") from err
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"{path}: a diagnoses file maps task names to text (task: why ...)")
    return {k: " ".join(v.split()) for k, v in data.items()}


def write_results_page(
    campaign_dir: str | Path,
    out_dir: str | Path,
    *,
    plots: bool = True,
    diagnoses: dict[str, str] | None = None,
    preface: str | None = None,
) -> ResultsPage:
    """Write the results page of the campaign folder ``campaign_dir`` into ``out_dir``.

    ``diagnoses``: per task, the measured reason no trained row reaches the rule within the
    budgets (:func:`read_diagnoses`), printed under the summary and in the task's section.
    ``preface``: Markdown printed under the page's title, before anything generated (what a
    reader must know first, e.g. that the tasks have changed since the campaign ran).

    Files: ``index.md`` (summary, compute time, per task its table, return-against-cost plot
    and learning curves, missing trials), ``summary.md`` (one row per task), ``results.csv`` /
    ``episodes.csv`` (the page's rows and episodes, :mod:`powerzoo.benchmarks.report` columns),
    ``return_vs_cost_<task>.png`` and ``learning_curves_<task>.png`` (with ``plots``).
    Nothing in ``campaign_dir`` is written. Scores read the folder's copy of the baseline table
    (``baseline_table.json``, :mod:`powerzoo.rl.campaigns.gather`) and days over budget, scores
    and budget columns its task budgets (``task_budgets.json``,
    :mod:`powerzoo.benchmarks.budget_snapshot`) where it has them; a folder from before campaigns
    kept them is read against the packaged table and the tasks' budgets now.
    """
    with pinned_campaign_files(campaign_dir):
        return _write_results_page(campaign_dir, out_dir, plots, diagnoses, preface)


def _write_results_page(
    campaign_dir: str | Path,
    out_dir: str | Path,
    plots: bool,
    diagnoses: dict[str, str] | None,
    preface: str | None,
) -> ResultsPage:
    from powerzoo.rl.campaigns.page_text import index_markdown, summary_markdown

    folder = read_campaign_folder(campaign_dir)
    campaign = folder.campaign
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("return_vs_cost_*.png"), *out.glob("learning_curves_*.png")]:
        stale.unlink()  # figures of an earlier report whose trials are gone must not linger
    cost_names = {task: _cost_names(folder, task) for task in campaign.tasks}
    trained, trained_episodes = pooled_trial_rows(campaign, folder.records, cost_names)
    rows, episodes, images = [], [], {}
    shown = tuple(dict.fromkeys((*campaign.baselines, "idle"))) if campaign.baselines else ()
    for task in campaign.tasks:
        base, base_episodes = table_baseline_rows(task, campaign.split, cost_names[task], shown)
        task_rows = base + [r for r in trained if r["task"] == task]
        rows += task_rows
        episodes += base_episodes + [e for e in trained_episodes if e["task"] == task]
        if plots and task_rows:
            pinned = budgets_of(task)
            budgets = {
                n: np.inf if pinned is None or pinned.budget(n) is None else pinned.budget(n)
                for n in cost_names[task]
            }
            images[task] = [
                plot_return_vs_costs(
                    task_rows,
                    task,
                    campaign.split,
                    out / f"return_vs_cost_{file_label(task)}.png",
                    budgets,
                )
            ]
            curves = learning_curves(folder, task)
            if curves:
                path = out / f"learning_curves_{file_label(task)}.png"
                images[task].append(plot_learning_curves(curves, task, path))
    result = CampaignResult(
        out, campaign.split, campaign.seeds, rows, episodes, [], cost_names, {}, [], 0.0
    )
    write_csv_tables(result)
    timing = campaign_timing(folder)
    diagnoses = dict(diagnoses or {})
    unknown = sorted(set(diagnoses) - set(campaign.tasks))
    if unknown:
        raise ValueError(f"diagnoses for tasks the campaign does not hold: {', '.join(unknown)}")
    summary = atomic_write_text(out / "summary.md", summary_markdown(folder, rows, diagnoses))
    index = atomic_write_text(
        out / "index.md",
        index_markdown(folder, rows, cost_names, timing, images, diagnoses, preface),
    )
    return ResultsPage(
        index, summary, rows, [p for paths in images.values() for p in paths], folder
    )
