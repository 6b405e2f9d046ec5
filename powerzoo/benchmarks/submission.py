"""The submission folder: an outside algorithm's test episodes and what they cost to obtain.

A submission is one algorithm on one task, one run per seed, each run evaluated on the
protocol's episodes (:func:`~powerzoo.benchmarks.baselines.evaluation_protocol`: the baselines
table's split days, episode ``i`` reset with ``env.reset(seed=protocol_seed + i)``). The folder
holds::

    meta.json               {"format": "powerzoo-submission/1", "algorithm": "MyPPO",
                             "task": "opf_118", "split": "test", "seeds": [0, 1, 2, 3, 4],
                             "code_hash": "...", "env_steps": 1000000, "wall_time_s": 300.0,
                             "hardware": "1 core of ...", "tuning_budget": "...",
                             "env_seeds": "protocol"}
    episodes_seed0.csv      episode,day_id,env_seed,return,cost_<name>,... (length optional)
    episodes_seed1.csv      ...

``env_steps`` and ``wall_time_s`` are the training budget of one run (the largest over the
seeds: env steps, and seconds of wall time on ``hardware``). ``split`` defaults to ``test``;
``env_seeds`` to ``"protocol"`` (every seed runs the baselines' env seeds
``protocol_seed + i``, so claims against them are paired on days and env seeds);
``"campaign"`` accepts the seeds PowerZoo's own campaigns evaluate trained runs on,
``seed * 1_000_000 + i`` (:func:`~powerzoo.benchmarks.stats.episode_seed`), paired on days only.
``tuning_budget`` is free text or a JSON object (configurations tried, on which split, steps
each). Each episode file has one row per protocol episode in order: ``return`` in $ per episode
(the system return of a multi-agent task, as
:func:`~powerzoo.benchmarks.evaluation.evaluate_days` reports it) and ``cost_<name>`` the
episode's sum of each constraint cost in its physical unit; every budgeted constraint of the
task needs its column.

:func:`read_submission` checks all of it and raises :class:`SubmissionError`, one line naming
the file, the row and what was expected; :func:`write_submission` writes a folder, and
:func:`~powerzoo.benchmarks.trial_submission.submission_from_trials` one from the trial
records of a PowerZoo campaign.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import difflib
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import evaluation_protocol
from powerzoo.benchmarks.budget_snapshot import budgets_of
from powerzoo.benchmarks.stats import episode_seed
from powerzoo.fileio import atomic_write_text, write_json
from powerzoo.tasks import task_spec

__all__ = [
    "SUBMISSION_FORMAT",
    "META_FILE",
    "META_FIELDS",
    "META_OPTIONAL",
    "ENV_SEED_SCHEMES",
    "EPISODE_FIELDS",
    "SubmissionError",
    "Submission",
    "episodes_file",
    "expected_env_seeds",
    "read_submission",
    "write_submission",
]

SUBMISSION_FORMAT = "powerzoo-submission/1"
META_FILE = "meta.json"
META_FIELDS = (
    "algorithm",
    "task",
    "seeds",
    "code_hash",
    "env_steps",
    "wall_time_s",
    "hardware",
    "tuning_budget",
)
"""Fields ``meta.json`` must have (``format``, ``split``, ``env_seeds`` and ``notes`` are
optional)."""
META_OPTIONAL = ("format", "split", "env_seeds", "notes")
"""Fields ``meta.json`` may have besides :data:`META_FIELDS`; any other is refused (a misspelt
optional field would otherwise fall back to its default unseen)."""
ENV_SEED_SCHEMES = ("protocol", "campaign")
EPISODE_FIELDS = ("episode", "day_id", "env_seed", "return")
"""Columns every episode file has, before its ``cost_<name>`` columns (``length`` optional)."""


class SubmissionError(ValueError):
    """A submission folder that does not follow the format (one line: file, row, problem)."""


def episodes_file(seed: int) -> str:
    """File name of the episodes of seed ``seed``."""
    return f"episodes_seed{int(seed)}.csv"


def expected_env_seeds(scheme: str, seed: int, protocol_seed: int, n_episodes: int) -> list[int]:
    """``env.reset`` seed of each of ``n_episodes`` episodes of run ``seed`` under ``scheme``
    (module docstring)."""
    if scheme == "protocol":
        return [int(protocol_seed) + i for i in range(n_episodes)]
    if scheme == "campaign":
        return [episode_seed(seed, i) for i in range(n_episodes)]
    raise ValueError(f"unknown env seed scheme {scheme!r}; valid: {', '.join(ENV_SEED_SCHEMES)}")


@dataclasses.dataclass(frozen=True)
class Submission:
    """A checked submission folder.

    Attributes:
        folder: The folder.
        meta: ``meta.json`` as read.
        task: Task name.
        split: Split of the protocol.
        seeds: The runs' seeds, in ``meta.json`` order.
        env_seeds: Scheme of the env seeds (:data:`ENV_SEED_SCHEMES`).
        day_ids: The protocol's split day of each episode [D].
        returns: Return of each seed on each episode [S, D] ($ per episode).
        cost_names: Constraint names of the cost columns [K].
        costs: Cost of each seed on each episode [S, D, K] (physical units per episode).
        lengths: Steps of each episode [S, D], ``None`` without a ``length`` column.
    """

    folder: Path
    meta: dict[str, Any]
    task: str
    split: str
    seeds: tuple[int, ...]
    env_seeds: str
    day_ids: tuple[int, ...]
    returns: np.ndarray
    cost_names: tuple[str, ...]
    costs: np.ndarray
    lengths: np.ndarray | None

    @property
    def algorithm(self) -> str:
        """The algorithm's name."""
        return str(self.meta["algorithm"])

    def episode_records(self) -> list[dict[str, Any]]:
        """Every episode as a campaign ``episodes.csv`` row (``seed``, ``episode``, ``day_id``,
        ``return``, ``length``, ``cost_<name>``), seeds in order; ``length`` 0 when unknown."""
        rows = []
        for s, seed in enumerate(self.seeds):
            for i, day in enumerate(self.day_ids):
                row = {
                    "seed": seed,
                    "episode": i,
                    "day_id": day,
                    "return": float(self.returns[s, i]),
                    "length": 0 if self.lengths is None else int(self.lengths[s, i]),
                }
                for k, name in enumerate(self.cost_names):
                    row[f"cost_{name}"] = float(self.costs[s, i, k])
                rows.append(row)
        return rows


def _fail(where: Path | str, problem: str) -> SubmissionError:
    return SubmissionError(f"{where}: {problem}")


def _read_meta(folder: Path) -> dict[str, Any]:
    path = folder / META_FILE
    if not folder.is_dir():
        raise _fail(folder, "not a folder (a submission is a folder with meta.json)")
    if not path.is_file():
        raise _fail(path, "missing (every submission folder needs meta.json)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _fail(path, f"not valid JSON ({err})") from None
    if not isinstance(meta, dict):
        raise _fail(path, "must hold a JSON object")
    missing = [k for k in META_FIELDS if k not in meta]
    if missing:
        raise _fail(path, f"missing field(s) {', '.join(missing)}")
    unknown = [k for k in meta if k not in META_FIELDS + META_OPTIONAL]
    if unknown:
        close = difflib.get_close_matches(unknown[0], META_FIELDS + META_OPTIONAL, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise _fail(
            path,
            f"unknown field(s) {', '.join(unknown)}{hint}; fields: "
            f"{', '.join(META_FIELDS + META_OPTIONAL)}",
        )
    if meta.get("format", SUBMISSION_FORMAT) != SUBMISSION_FORMAT:
        raise _fail(path, f"format {meta['format']!r}, expected {SUBMISSION_FORMAT!r}")
    for key in ("algorithm", "task", "code_hash", "hardware"):
        if not isinstance(meta[key], str) or not meta[key].strip():
            raise _fail(path, f"{key} must be a non-empty string, got {meta[key]!r}")
    seeds = meta["seeds"]
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
        or len(set(seeds)) != len(seeds)
    ):
        raise _fail(path, f"seeds must be a non-empty list of distinct ints >= 0, got {seeds!r}")
    steps = meta["env_steps"]
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise _fail(path, f"env_steps must be an int >= 0, got {steps!r}")
    wall = meta["wall_time_s"]
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not math.isfinite(wall):
        raise _fail(path, f"wall_time_s must be a finite number of seconds, got {wall!r}")
    if wall < 0:
        raise _fail(path, f"wall_time_s must be >= 0, got {wall!r}")
    tuning = meta["tuning_budget"]
    if not isinstance(tuning, (str, dict)) or not tuning:
        raise _fail(path, "tuning_budget must be a non-empty string or JSON object")
    if isinstance(tuning, dict) and str(tuning.get("split", "")).strip().lower() == "test":
        raise _fail(
            path,
            "tuning_budget: settings chosen on the test split are refused (the test split "
            "scores; tune on val)",
        )
    scheme = meta.get("env_seeds", "protocol")
    if scheme not in ENV_SEED_SCHEMES:
        raise _fail(path, f"env_seeds {scheme!r}, expected one of {', '.join(ENV_SEED_SCHEMES)}")
    if not isinstance(meta.get("split", "test"), str):
        raise _fail(path, f"split must be a string, got {meta['split']!r}")
    return meta


def _number(path: Path, row: int, column: str, text: str, integer: bool = False) -> float:
    """The value of one cell; a one-line error for a blank, a non-number or NaN / inf."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise _fail(path, f"row {row}: {column} {text!r} is not a number") from None
    if math.isnan(value):
        raise _fail(path, f"row {row}: {column} is NaN")
    if math.isinf(value):
        raise _fail(path, f"row {row}: {column} is infinite")
    if integer and value != int(value):
        raise _fail(path, f"row {row}: {column} {text!r} is not an integer")
    return value


def _cost(path: Path, row: int, name: str, text: str) -> float:
    """One episode's cost: a finite number >= 0 (a constraint cost measures a violation)."""
    value = _number(path, row, f"cost_{name}", text)
    if value < 0:
        raise _fail(
            path, f"row {row}: cost_{name} {text} is negative (a cost is a violation, >= 0)"
        )
    return value


def _protocol_problem(task: str, split: str, err: Exception) -> str:
    """Why ``task`` on ``split`` has no evaluation protocol, in one line."""
    try:
        from powerzoo.tasks import list_tasks, task_spec

        if task not in list_tasks():
            return f"task {task!r} is not a registered task"
        splits = list(getattr(task_spec(task), "splits", None) or ())
    except (ImportError, KeyError, ValueError):
        splits = []
    if splits and split not in splits:
        return f"split {split!r} is not a split of {task} ({', '.join(splits)})"
    return (
        f"task {task!r} on {split!r}: {err} (a submission is scored on a split the baselines "
        "were measured on: test)"
    )


def _column_problem(header: Sequence[str], task: str, constraints: Sequence[str]) -> str | None:
    """What is wrong with an episode file's columns, if anything: a required column missing, or
    one the format does not have (a typo, a pandas index, a cost the task does not have)."""
    missing = [c for c in EPISODE_FIELDS if c not in header]
    if missing:
        return f"no column(s) {', '.join(missing)} (header: {','.join(header)})"
    known = [*EPISODE_FIELDS, "length"]
    for column in header:
        if column in known:
            continue
        if column.startswith("cost_"):
            if column[len("cost_") :] not in constraints:
                return (
                    f"column {column}: {task} has no constraint {column[len('cost_') :]!r} "
                    f"(its constraints, in env.unwrapped.constraint_names() order: "
                    f"{', '.join(constraints)})"
                )
            continue
        if not column.strip() or column.startswith("Unnamed"):
            return f"an unnamed column {column!r} (a pandas index? write with index=False)"
        close = difflib.get_close_matches(column, [*known, *(f"cost_{c}" for c in constraints)], 1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"unknown column {column!r}{hint}; the columns are {', '.join(EPISODE_FIELDS)}, "
            "length (optional) and cost_<constraint>"
        )
    return None


def _constraint_names(task: str, budgets: Any) -> list[str]:
    """The constraints a cost column may name: the task's, in the order of its costs, and those
    of the budgets scored against (a pinned campaign's task may have had others)."""
    try:
        names = list(task_spec(task).constraint_names)
    except (KeyError, ValueError):
        names = []
    if budgets is not None:
        names += [
            n for n in (*budgets.selected_constraints, *budgets.cost_thresholds) if n not in names
        ]
    return names


def _check_lengths(path: Path, task: str, lengths: Sequence[float]) -> None:
    """A ``length`` is informative (the score does not read it) but must be possible: from 1 to
    the task's horizon (an episode of a task run with other options may be shorter)."""
    try:
        horizon = int(task_spec(task).horizon)
    except (KeyError, ValueError):
        return
    for i, length in enumerate(lengths):
        if not 1 <= int(length) <= horizon:
            raise _fail(
                path,
                f"row {i}: length {int(length)}, not between 1 and {horizon} (the horizon of "
                f"{task} in steps)",
            )


def _read_episodes(
    path: Path, task: str, constraints: Sequence[str]
) -> tuple[list[str], list[dict[str, str]]]:
    if not path.is_file():
        raise _fail(path, "missing (meta.json lists its seed)")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not a column name
    except UnicodeDecodeError:
        raise _fail(path, "not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    header = list(reader.fieldnames or [])
    problem = _column_problem(header, task, constraints)
    if problem is not None:
        raise _fail(path, problem)
    rows = list(reader)
    for i, row in enumerate(rows):
        if None in row or any(v is None for v in row.values()):
            raise _fail(path, f"row {i}: {len(header)} columns expected")
    return header, rows


def read_submission(folder: str | Path) -> Submission:
    """Read and check a submission folder (module docstring) against the protocol of the
    baselines table in use and the task's budgets in use.

    Args:
        folder: The submission folder.

    Returns:
        The checked :class:`Submission`.

    Raises:
        SubmissionError: One line naming the file (and row) and the problem: missing file,
            missing field or column, a column the format does not have (a misspelling, a
            pandas index, a cost of no constraint of the task), seeds with different cost
            columns (the odd file out named), episodes not on the protocol's days or env
            seeds, a value that is not a finite number.
    """
    root = Path(folder)
    meta = _read_meta(root)
    task, split = meta["task"], meta.get("split", "test")
    try:
        protocol = evaluation_protocol(task, split)
    except (ValueError, KeyError) as err:
        raise _fail(root / META_FILE, _protocol_problem(task, split, err)) from None
    days = [int(d) for d in protocol["day_ids"]]
    seeds = tuple(int(s) for s in meta["seeds"])
    scheme = meta.get("env_seeds", "protocol")
    stray = sorted(
        p.name
        for p in root.glob("episodes_seed*.csv")
        if p.name not in {episodes_file(s) for s in seeds}
    )
    if stray:
        raise _fail(root / stray[0], f"not a seed of meta.json (seeds {list(seeds)})")
    budgets = budgets_of(task)
    budgeted = [] if budgets is None else list(budgets.selected_constraints)
    constraints = _constraint_names(task, budgets)
    files = {seed: _read_episodes(root / episodes_file(seed), task, constraints) for seed in seeds}
    columns_of = {
        seed: [c[len("cost_") :] for c in header if c.startswith("cost_")]
        for seed, (header, _) in files.items()
    }
    for seed, names in columns_of.items():
        absent = [n for n in budgeted if n not in names]
        if absent:
            raise _fail(
                root / episodes_file(seed),
                f"no column cost_{absent[0]} (a budgeted constraint of {task})",
            )
    # the cost columns most seeds have are the reference: the odd file out is the one named
    counts = collections.Counter(tuple(names) for names in columns_of.values())
    cost_names = list(counts.most_common(1)[0][0]) if counts else []
    for seed, names in columns_of.items():
        if names != cost_names:
            raise _fail(
                root / episodes_file(seed),
                f"cost columns {names}, the other seeds have {cost_names}",
            )
    returns, costs, lengths = [], [], []
    for seed in seeds:
        path = root / episodes_file(seed)
        header, rows = files[seed]
        names = cost_names
        if len(rows) != len(days):
            raise _fail(
                path,
                f"{len(rows)} episodes, expected {len(days)} (the protocol's days of {task} on "
                f"{split})",
            )
        env_seeds = expected_env_seeds(scheme, seed, protocol["seed"], len(days))
        for i, row in enumerate(rows):
            for column, want in (("episode", i), ("day_id", days[i]), ("env_seed", env_seeds[i])):
                got = _number(path, i, column, row[column], integer=True)
                if int(got) != want:
                    raise _fail(
                        path,
                        f"row {i}: {column} {int(got)}, expected {want} (protocol of {task} on "
                        f"{split}, env seeds {scheme!r})",
                    )
        returns.append([_number(path, i, "return", r["return"]) for i, r in enumerate(rows)])
        costs.append(
            [[_cost(path, i, n, r[f"cost_{n}"]) for n in names] for i, r in enumerate(rows)]
        )
        if "length" in header:
            lengths.append(
                [_number(path, i, "length", r["length"], True) for i, r in enumerate(rows)]
            )
            _check_lengths(path, task, lengths[-1])
    names = tuple(cost_names)
    return Submission(
        folder=root,
        meta=meta,
        task=task,
        split=split,
        seeds=seeds,
        env_seeds=scheme,
        day_ids=tuple(days),
        returns=np.asarray(returns, dtype=np.float64),
        cost_names=names,
        costs=np.asarray(costs, dtype=np.float64).reshape(len(seeds), len(days), len(names)),
        lengths=np.asarray(lengths, dtype=np.int64) if len(lengths) == len(seeds) else None,
    )


def _cell(value: Any) -> str:
    return repr(float(value)) if isinstance(value, (float, np.floating)) else str(value)


def write_submission(
    folder: str | Path,
    meta: Mapping[str, Any],
    episodes: Mapping[int, Sequence[Mapping[str, Any]]],
) -> Path:
    """Write a submission folder: ``meta.json`` (``format`` added) and one episode file per seed.

    Args:
        folder: The folder (created; existing files of the same names are replaced).
        meta: The ``meta.json`` fields (module docstring).
        episodes: ``{seed: episode rows}``, each row with ``episode``, ``day_id``, ``env_seed``,
            ``return``, ``cost_<name>`` (and optionally ``length``); floats written with
            ``repr`` (exact round trip).

    Returns:
        The folder.
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    write_json(root / META_FILE, {"format": SUBMISSION_FORMAT, **meta})
    for seed, rows in episodes.items():
        first = rows[0] if rows else {}
        columns = [*EPISODE_FIELDS]
        columns += ["length"] if "length" in first else []
        columns += [k for k in first if k.startswith("cost_")]
        lines = [",".join(columns)]
        lines += [",".join(_cell(row[c]) for c in columns) for row in rows]
        atomic_write_text(root / episodes_file(seed), "\n".join(lines) + "\n")
    return root
