"""Gather a training campaign: the baselines and the trials' test episodes into the tables and
plots of ``bench``.

The baselines are evaluated by :func:`powerzoo.benchmarks.campaign.run_campaign` over the
campaign's seeds; the trained agents were evaluated inside their trials by the same function
(:mod:`powerzoo.rl.campaigns.trial`), one trial seed each. Their episode rows are summarised here
with the same statistics (:func:`~powerzoo.benchmarks.stats.summarize_campaign_episodes`: mean,
IQM, bootstrap 95 % intervals, costs, violation rate; normalised score by
:func:`~powerzoo.benchmarks.stats.score_columns`), so every number is computed as ``bench`` would.

Two tables, because a benchmark reader and a debugging reader want different things:

* ``results.csv`` / ``results.md``: one row per baseline and one per (task, algorithm, setting),
  pooling the test episodes of all its seeds (``policy`` = ``<algorithm>/<setting>``). This is the
  comparison a reader wants: one line per method, the seeds' spread inside its interval (seeds
  are treated like the baselines' seeds: all episodes are pooled and resampled together).
* ``trials.csv`` / ``trials.md``: one row per trial (``policy`` = ``<algorithm>/<setting>/seed<s>``,
  plus ``trial_id``, ``algorithm``, ``setting``, ``seed``, ``num_timesteps``, ``train_seconds``,
  ``model``): which seed failed, how long each took.

``episodes.csv`` holds the baselines' and the trials' episodes (trained rows under the pooled
label, their ``seed`` telling the trials apart); ``return_vs_cost_<task>.png`` has a point per
baseline and per (algorithm, setting); ``episode_<task>_<algorithm>_<setting>.png`` is the episode
plot of its first seed (each trial's own stays in its ``evaluation/`` folder).

Scores read the baseline table the campaign was first gathered against: a copy of the packaged
table kept in the folder (:data:`BASELINE_TABLE_FILE`), so a campaign's numbers stay those of the
tasks it trained on when the package's tasks and table change later (delete the copy to score
against the current table). The budgets are pinned the same way: the folder keeps the per-episode
constraint budgets of its tasks as they were at the first gathering (:data:`TASK_BUDGETS_FILE`,
:mod:`powerzoo.benchmarks.budget_snapshot`), and days over budget and budget-aware scores count
those, not the tasks' budgets now.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.baselines import BASELINES_FILE as PACKAGED_TABLE
from powerzoo.benchmarks.baselines import baseline_table
from powerzoo.benchmarks.budget_snapshot import budgets_of, task_budgets, write_task_budgets
from powerzoo.benchmarks.campaign import run_campaign
from powerzoo.benchmarks.plots import plot_return_vs_cost
from powerzoo.benchmarks.report import (
    SUMMARY_COLUMNS,
    CampaignResult,
    cost_columns,
    csv_text,
    file_label,
    results_markdown,
    summary_row,
    write_csv_tables,
    write_results_markdown,
)
from powerzoo.fileio import atomic_write_text, read_json, write_json
from powerzoo.rl.campaigns.spec import CampaignSpec
from powerzoo.rl.campaigns.trial import (
    TRIAL_FILE,
    InvalidRecordError,
    record_problem,
    trial_dir,
    warn_left_out,
)

__all__ = [
    "gather",
    "evaluate_baselines",
    "pooled_trial_rows",
    "CampaignOutcome",
    "TRIAL_COLUMNS",
    "BASELINES_FILE",
    "BASELINE_TABLE_FILE",
    "TASK_BUDGETS_FILE",
    "pinned_campaign_files",
]

TRIAL_COLUMNS = (
    "trial_id",
    "algorithm",
    "setting",
    "seed",
    "num_timesteps",
    "train_seconds",
    "model",
)
"""Columns of ``trials.csv`` before the ``results.csv`` columns."""
BASELINE_TABLE_FILE = "baseline_table.json"
"""The copy of the baseline table a campaign folder is scored against (module docstring)."""
TASK_BUDGETS_FILE = "task_budgets.json"
"""The per-episode constraint budgets of its tasks a campaign folder is scored against
(``{task: {"selected": [...], "thresholds": {name: budget}}}``, module docstring)."""
BASELINES_FILE = "baselines_record.json"
"""The baselines' evaluation in a campaign folder, reused by the next gathering when nothing it
depends on changed (:func:`evaluate_baselines`)."""


def _baselines_key(campaign: CampaignSpec) -> dict[str, Any]:
    """What the baselines' numbers depend on: the campaign's tasks, baselines, seeds and
    protocol, the budgets they are counted against (:func:`budgets_of`: the folder's pinned ones
    inside :func:`pinned_campaign_files`), and the code and packaged files that compute them
    (every file of the package, the baselines table included) with the numeric libraries'
    versions."""
    from importlib import metadata

    from powerzoo.provenance import PACKAGE_DIR

    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    versions = {}
    for name in ("numpy", "scipy", "highspy", "pandapower"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    budgets = {t: budgets_of(t) for t in campaign.tasks}
    return {
        "tasks": list(campaign.tasks),
        "baselines": list(campaign.baselines),
        "seeds": list(campaign.seeds),
        "split": campaign.split,
        "episodes": campaign.episodes,
        "plots": campaign.plots,
        "budgets": {t: None if b is None else b.to_json() for t, b in budgets.items()},
        "package": digest.hexdigest()[:16],
        "versions": versions,
    }


def evaluate_baselines(
    campaign: CampaignSpec, out_dir: str | Path, progress: bool | None = None
) -> CampaignResult:
    """The baselines' rows, episodes and plots of ``campaign`` in ``out_dir``: those of the last
    gathering when nothing they depend on changed (:func:`_baselines_key`: same tasks, baselines,
    seeds, protocol, package files and numeric libraries; every plot still there), else evaluated
    by :func:`~powerzoo.benchmarks.campaign.run_campaign` and recorded in
    :data:`BASELINES_FILE`. Running a finished campaign again thus evaluates nothing.

    Args:
        campaign: The campaign.
        out_dir: The campaign folder.
        progress: Show progress bars (``None``: when the output is a terminal).

    Returns:
        The baselines' result (the caller adds the trials' rows).
    """
    out = Path(out_dir)
    key = _baselines_key(campaign)
    path = out / BASELINES_FILE
    kept = _read_baselines(path, key, out, campaign.split)
    if kept is not None:
        return kept
    result = run_campaign(
        campaign.tasks,
        policies=campaign.baselines,
        seeds=campaign.seeds,
        split=campaign.split,
        episodes=campaign.episodes,
        out_dir=out,
        progress=progress,
        plots=campaign.plots,
    )
    record = {
        "key": key,
        "rows": result.rows,
        "episodes": result.episodes,
        "notes": result.notes,
        "cost_names": result.cost_names,
        "plots": [p.name for p in result.plots],
        "wall_seconds": result.wall_seconds,
    }
    write_json(path, copy.deepcopy(record), indent=None)
    return result


def _read_baselines(
    path: Path, key: dict[str, Any], out: Path, split: str
) -> CampaignResult | None:
    """The result kept in ``path`` if it was recorded under ``key`` and its plots are in ``out``
    (``None`` otherwise, also for an unreadable file: the baselines are evaluated again)."""
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != json.loads(json.dumps(key)):
        return None
    try:
        plots = [out / name for name in record["plots"]]
        if not all(p.is_file() for p in plots):
            return None
        return CampaignResult(
            out,
            split,
            tuple(key["seeds"]),
            list(record["rows"]),
            list(record["episodes"]),
            list(record["notes"]),
            {task: tuple(names) for task, names in record["cost_names"].items()},
            {},
            plots,
            float(record["wall_seconds"]),
        )
    except (KeyError, TypeError, AttributeError, ValueError):
        return None


@dataclasses.dataclass
class CampaignOutcome:
    """A gathered campaign.

    Attributes:
        result: the pooled table (baselines + one row per task x algorithm x setting), as
            ``bench`` returns it.
        trials: one row per finished trial (``TRIAL_COLUMNS`` + the summary columns).
        records: the trial records (:mod:`powerzoo.rl.campaigns.trial`) by trial id.
        failed: ``{trial_id: error text}`` of trials that did not finish.
    """

    result: CampaignResult
    trials: list[dict[str, Any]]
    records: dict[str, dict[str, Any]]
    failed: dict[str, str]

    def markdown(self) -> str:
        """The tables of ``powerzoo bench`` for this campaign.

        Returns:
            Markdown text.
        """
        return self.result.markdown()


def gather(
    campaign: CampaignSpec,
    records: dict[str, dict[str, Any]],
    out_dir: str | Path,
    failed: dict[str, str] | None = None,
    progress: bool | None = None,
) -> CampaignOutcome:
    """Evaluate the baselines, add the trials' rows, write every table and plot into ``out_dir``.

    A record that fails :func:`~powerzoo.rl.campaigns.trial.record_problem` (fields missing,
    episodes not those of the campaign's protocol, a return or cost not finite) is left out with
    a one-line warning and noted as not finished.

    Args:
        campaign: The campaign.
        records: Finished trial records by trial id.
        out_dir: The campaign folder.
        failed: ``{trial_id: error text}`` of trials that did not finish.
        progress: Show progress bars (``None``: when the output is a terminal).

    Returns:
        The gathered campaign.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = out / BASELINE_TABLE_FILE
    if not table.is_file():
        shutil.copyfile(PACKAGED_TABLE, table)
    if not (out / TASK_BUDGETS_FILE).is_file():
        write_task_budgets(out / TASK_BUDGETS_FILE, campaign.tasks)
    with pinned_campaign_files(out):
        return _gather(campaign, records, out, failed, progress)


@contextlib.contextmanager
def pinned_campaign_files(campaign_dir: str | Path) -> Iterator[None]:
    """Within the block, scores read the campaign folder's baseline table
    (:data:`BASELINE_TABLE_FILE`) and budgets (:data:`TASK_BUDGETS_FILE`), each where the folder
    has it (else the packaged table and the tasks' budgets now).

    Args:
        campaign_dir: The campaign folder.

    Yields:
        Nothing.
    """
    folder = Path(campaign_dir)
    with contextlib.ExitStack() as stack:
        if (folder / BASELINE_TABLE_FILE).is_file():
            stack.enter_context(baseline_table(folder / BASELINE_TABLE_FILE))
        if (folder / TASK_BUDGETS_FILE).is_file():
            stack.enter_context(task_budgets(folder / TASK_BUDGETS_FILE))
        yield


def _gather(
    campaign: CampaignSpec,
    records: dict[str, dict[str, Any]],
    out: Path,
    failed: dict[str, str] | None,
    progress: bool | None,
) -> CampaignOutcome:
    failed = dict(failed or {})
    records = dict(records)
    for trial in campaign.trials:
        problem = trial.trial_id in records and record_problem(
            records[trial.trial_id], trial, campaign
        )
        if problem:
            path = trial_dir(out, trial) / TRIAL_FILE
            del records[trial.trial_id]
            failed[trial.trial_id] = warn_left_out(
                InvalidRecordError(path, problem, trial.trial_id)
            )
    result = evaluate_baselines(campaign, out, progress)
    result.notes.extend(campaign.notes)
    done = [t for t in campaign.trials if t.trial_id in records]
    trial_rows: list[dict[str, Any]] = []
    for trial in done:
        rec = records[trial.trial_id]
        names = tuple(rec["cost_names"])
        result.cost_names.setdefault(trial.task, names)
        source = f"{trial.trial_id} ({rec['model']} model, {rec['num_timesteps']} steps)"
        row = summary_row(
            trial.task,
            trial.trial_label,
            "trained",
            source,
            rec["episodes"],
            rec["days"],
            names,
            campaign.split,
        )
        trial_rows.append(
            {**{k: rec.get(k, getattr(trial, k, None)) for k in TRIAL_COLUMNS}, **row}
        )
    pooled_rows, pooled_episodes = pooled_trial_rows(campaign, records, result.cost_names)
    result.episodes.extend(pooled_episodes)
    for trial in campaign.trials:
        if trial.trial_id not in records:
            failed.setdefault(trial.trial_id, "not run")
    for trial_id, error in failed.items():
        result.notes.append(f"trial {trial_id} did not finish: {error}")
    result.rows.extend(pooled_rows)
    order = {t: i for i, t in enumerate(campaign.tasks)}
    result.rows.sort(
        key=lambda r: order.get(r["task"], len(order))
    )  # stable: baselines, then trained
    write_csv_tables(result)
    write_results_markdown(result)
    _write_trial_tables(result, trial_rows, out)
    if campaign.plots:
        result.plots = [p for p in result.plots if not p.name.startswith("return_vs_cost_")]
        result.plots += _copy_episode_plots(campaign, records, out)
        for task in result.tasks:
            rows = [r for r in result.rows if r["task"] == task]
            path = out / f"return_vs_cost_{file_label(task)}.png"
            result.plots.append(plot_return_vs_cost(rows, task, campaign.split, path))
    return CampaignOutcome(
        result, trial_rows, {t.trial_id: records[t.trial_id] for t in done}, failed
    )


def pooled_trial_rows(
    campaign: CampaignSpec,
    records: dict[str, dict[str, Any]],
    cost_names: dict[str, tuple[str, ...]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(rows, episodes)``: one ``results.csv`` row per (task, algorithm/setting) pooling the
    test episodes of its finished trials (``records`` by trial id; unfinished trials are simply
    absent), and those episodes under the pooled label (their ``seed`` tells the trials apart).

    ``cost_names``: ``{task: constraint names}`` of every task with a finished trial.
    """
    pooled: dict[tuple[str, str], list[dict[str, Any]]] = {}
    days_of: dict[str, list[int]] = {}  # one protocol per task
    for trial in campaign.trials:
        rec = records.get(trial.trial_id)
        if rec is None:
            continue
        episodes = [{**e, "policy": trial.label} for e in rec["episodes"]]
        pooled.setdefault((trial.task, trial.label), []).extend(episodes)
        days_of[trial.task] = rec["days"]
    rows = []
    for (task, label), episodes in pooled.items():
        n_trials = len({e["seed"] for e in episodes})
        source = f"{n_trials} trial(s) of {label}"
        rows.append(
            summary_row(
                task,
                label,
                "trained",
                source,
                episodes,
                days_of[task],
                cost_names[task],
                campaign.split,
            )
        )
    return rows, [e for episodes in pooled.values() for e in episodes]


def _copy_episode_plots(
    campaign: CampaignSpec, records: dict[str, dict[str, Any]], out: Path
) -> list[Path]:
    """``episode_<task>_<algorithm>_<setting>.png``: the first seed's episode plot of each (task,
    algorithm, setting).

    Copied from the trial folder when it is on this machine (a trial on another node keeps its own).
    """
    paths, seen = [], set()
    for trial in campaign.trials:
        key = (trial.task, trial.label)
        if key in seen or trial.trial_id not in records:
            continue
        seen.add(key)
        found = [
            Path(p)
            for p in records[trial.trial_id].get("plots", [])
            if Path(p).name.startswith("episode_")
        ]
        if found and found[0].is_file():
            target = out / f"episode_{file_label(trial.task)}_{file_label(trial.label)}.png"
            shutil.copyfile(found[0], target)
            paths.append(target)
    return paths


def _write_trial_tables(
    result: CampaignResult, trial_rows: list[dict[str, Any]], out: Path
) -> None:
    cost_cols = cost_columns(result.cost_names, ("_mean", "_ci_low", "_ci_high"))
    columns = [*TRIAL_COLUMNS, *SUMMARY_COLUMNS, *cost_cols]
    result.files["trials_csv"] = atomic_write_text(
        out / "trials.csv", csv_text(columns, trial_rows)
    )
    per_trial = dataclasses.replace(result, rows=trial_rows, notes=[], files={}, plots=[])
    text = results_markdown(per_trial).replace(
        "# PowerZoo benchmark campaign", "# PowerZoo campaign: one row per trial", 1
    )
    result.files["trials_md"] = atomic_write_text(out / "trials.md", text)
