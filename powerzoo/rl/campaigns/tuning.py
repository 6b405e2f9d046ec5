"""Equal tuning budgets on the validation split: sample N settings from a published search space,
train each on the same compute budget, pick the best on ``val``.

:func:`tune` samples ``configurations`` settings of ``algorithm_kwargs`` from the algorithm's
entry in the search-space file (:data:`SEARCH_SPACES_FILE`, format in its header), trains each
with the same seed on the same budget (a compute track of :mod:`powerzoo.rl.tracks`, by default
``S``: 5 minutes on one core; or a fixed number of env steps), evaluates the final model on the
selection split (``val``; the test split is refused, :func:`~powerzoo.rl.selection.
require_selection_split`) and keeps the best: the highest mean validation return among the
settings whose mean cost per episode keeps every budget of the task
(:func:`~powerzoo.benchmarks.score_v2.mean_within_budget`, the score's own check); when none
does, the one nearest its budgets (smallest largest ``E[C] / d``). The same number of
configurations for every algorithm is the default (:data:`DEFAULT_CONFIGURATIONS`), so every
algorithm gets the same tuning budget.

Sampling is seeded (``sampler_seed``) and the loop is sequential, so a tuning run is
reproducible up to the wall-clock stop of track S. Training runs with one torch and one BLAS
thread (:func:`~powerzoo.rl.campaigns.trial.one_thread`) and without periodic evaluations (the
whole budget trains). The output folder holds::

    tuning.csv          one row per configuration: its sampled values, the validation return
                        and mean costs, within the budgets, env steps, wall and CPU seconds
    best_config.yaml    the best configuration as a run config (`powerzoo train -c`)
    tuning.json         the tuning budget (configurations, split, track or steps, seeds,
                        search-space file and hash, seconds, hardware) and the best row
    runs/config<i>/     each configuration's run folder; its result.json marks it finished, so
                        an interrupted tuning run resumes where it stopped
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from powerzoo.fileio import atomic_write_text, read_json, write_json
from powerzoo.rl.selection import require_selection_split
from powerzoo.rl.tracks import Stopwatch, Track, compute_record, hardware_info, resolve_track

__all__ = [
    "SEARCH_SPACES_FILE",
    "DEFAULT_CONFIGURATIONS",
    "load_search_space",
    "sample_configurations",
    "tune",
    "TUNING_CSV",
    "BEST_CONFIG",
    "TUNING_JSON",
]

SEARCH_SPACES_FILE = (
    Path(__file__).resolve().parents[3] / "configs" / "tuning" / "search_spaces.yaml"
)
"""The published search spaces (the repository's ``configs/tuning/search_spaces.yaml``)."""
DEFAULT_CONFIGURATIONS = 8
"""Configurations sampled per algorithm unless told otherwise: the same for every algorithm."""
TUNING_CSV, BEST_CONFIG, TUNING_JSON, RESULT_FILE = (
    "tuning.csv",
    "best_config.yaml",
    "tuning.json",
    "result.json",
)
_KINDS = ("log_uniform", "uniform", "choice")


def _check_parameter(algorithm: str, name: str, spec: Any) -> dict[str, Any]:
    where = f"search space of {algorithm}, {name}"
    if not isinstance(spec, Mapping) or len(spec) != 1 or next(iter(spec)) not in _KINDS:
        raise ValueError(f"{where}: give one of {', '.join(_KINDS)}, got {spec!r}")
    kind, values = next(iter(spec.items()))
    if not isinstance(values, list) or not values:
        raise ValueError(f"{where}: {kind} takes a non-empty list, got {values!r}")
    if kind != "choice":
        if len(values) != 2 or not all(isinstance(v, (int, float)) for v in values):
            raise ValueError(f"{where}: {kind} takes [low, high], got {values!r}")
        low, high = (float(v) for v in values)
        if not low < high or (kind == "log_uniform" and low <= 0):
            raise ValueError(f"{where}: {kind} needs 0 < low < high (log) or low < high")
    return {kind: list(values)}


def load_search_space(algorithm: str, path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The search space of ``algorithm``: ``{parameter: {kind: values}}`` in file order, with
    ``same_as`` resolved and a reference baseline falling back to its base algorithm's entry.

    Args:
        algorithm: An algorithm name (any case).
        path: The search-space YAML file (default :data:`SEARCH_SPACES_FILE`).

    Returns:
        The parameters and their distributions; ``ValueError`` for an algorithm the file lacks
        or a malformed entry, ``FileNotFoundError`` without the file.
    """
    from powerzoo.rl.algorithms import base_algorithm

    path = Path(SEARCH_SPACES_FILE if path is None else path)
    if not path.is_file():
        raise FileNotFoundError(f"no search-space file at {path} (pass one with --space)")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    name = str(algorithm).upper()
    if name not in data:
        name = base_algorithm(name)
    if name not in data:
        raise ValueError(f"{path}: no search space for {algorithm}; it has {', '.join(data)}")
    seen: list[str] = []
    space: dict[str, dict[str, Any]] = {}
    while name is not None:
        if name in seen or name not in data or not isinstance(data[name], Mapping):
            raise ValueError(f"{path}: search space {name!r} is missing or loops ({seen})")
        seen.append(name)
        entry = dict(data[name])
        parent = entry.pop("same_as", None)
        space = {**{k: _check_parameter(name, k, v) for k, v in entry.items()}, **space}
        name = None if parent is None else str(parent).upper()
    return space


def _draw(rng: np.random.Generator, spec: Mapping[str, Any]) -> Any:
    kind, values = next(iter(spec.items()))
    if kind == "choice":
        return values[int(rng.integers(len(values)))]
    low, high = float(values[0]), float(values[1])
    value = (
        math.exp(rng.uniform(math.log(low), math.log(high)))
        if kind == "log_uniform"
        else (rng.uniform(low, high))
    )
    return float(f"{value:.4g}")  # four significant digits: readable, and exact in YAML


def sample_configurations(
    space: Mapping[str, Mapping[str, Any]], n: int, seed: int = 0
) -> list[dict[str, Any]]:
    """``n`` settings drawn independently from ``space`` (floats kept to 4 significant digits);
    the same ``seed`` draws the same settings.

    Args:
        space: ``{parameter: {kind: values}}`` (:func:`load_search_space`).
        n: Number of settings.
        seed: Seed of the sampler.

    Returns:
        One ``{parameter: value}`` per setting (dotted names not yet nested).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of configurations must be a positive integer, got {n!r}")
    rng = np.random.default_rng(seed)
    return [{name: _draw(rng, spec) for name, spec in space.items()} for _ in range(n)]


def _nested(flat: Mapping[str, Any], into: Mapping[str, Any]) -> dict[str, Any]:
    """``into`` with each dotted name of ``flat`` set at its nested place (new dicts)."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in into.items()}
    for name, value in flat.items():
        head, _, rest = name.partition(".")
        if rest:
            out[head] = _nested({rest: value}, out.get(head) or {})
        else:
            out[head] = value
    return out


def _run_config(
    base: Mapping[str, Any],
    values: Mapping[str, Any],
    track: Track | None,
    steps: int | None,
    seed: int,
    folder: Path,
    name: str,
) -> dict[str, Any]:
    from powerzoo.rl.tracks import apply_track

    config = {
        **base,
        "algorithm_kwargs": _nested(values, base.get("algorithm_kwargs") or {}),
        "seed": int(seed),
        "evaluation": None,
        "checkpoint": None,
        "logging": {"tensorboard": False, "progress_bar": False, "verbose": 0},
        "torch_threads": 1,
        "output_dir": str(folder),
        "name": name,
    }
    if track is not None:
        return apply_track(config, track)
    return {**config, "total_timesteps": int(steps), "episodes": None}


def _base_config(task: str, algorithm: str, config: str | Path | None, n_envs: int) -> dict:
    from powerzoo.rl.config import TrainConfig

    if config is None:
        return {"task": task, "algorithm": algorithm, "n_envs": int(n_envs)}
    data = TrainConfig.from_file(config).to_dict()
    if data["task"] != task:
        raise ValueError(f"{config} is a {data['task']} config, not {task}")
    for key in ("output_dir", "name", "seed"):
        data.pop(key, None)
    return {**data, "algorithm": algorithm}


def _train_and_score(
    config: dict[str, Any], split: str, episodes: int | None, track: Track | None
) -> dict[str, Any]:
    """Train one configuration, evaluate its final model on ``split``; the row's numbers."""
    from powerzoo.benchmarks.budget_snapshot import budgets_of
    from powerzoo.benchmarks.score_v2 import budget_ratios, mean_within_budget
    from powerzoo.rl.campaigns.trial import one_thread
    from powerzoo.rl.trainer import Trainer

    with one_thread():
        watch = Stopwatch()
        trainer = Trainer(config)
        result = trainer.train()
        compute = compute_record(
            track,
            result.num_timesteps,
            watch,
            config.get("algorithm_kwargs"),
            result.stop_reason,
        )
        summary = trainer.evaluate(split=split, n_episodes=episodes, seed=0)
        trainer.close()
    names = list(summary["mean_costs"])
    means = np.asarray([[summary["mean_costs"][n] for n in names]])
    budgets = budgets_of(config["task"])
    ratios = budget_ratios(means, names, budgets)
    return {
        "val_return": float(summary["mean_return"]),
        "val_episodes": int(summary["episodes"]),
        "within_budget": bool(mean_within_budget(means, names, budgets)),
        "max_budget_ratio": max(ratios.values()) if ratios else None,
        **{f"cost_{n}": float(summary["mean_costs"][n]) for n in names},
        **compute,
    }


def _plain(data: Any) -> str:
    """``data`` as canonical JSON text (tuples and lists alike), to compare records."""
    return json.dumps(data, sort_keys=True, default=str)


def _best(rows: Sequence[Mapping[str, Any]]) -> int:
    """Index of the best row: the highest return within the budgets, else the nearest them."""
    within = [i for i, r in enumerate(rows) if r["within_budget"]]
    if within:
        return max(within, key=lambda i: rows[i]["val_return"])
    return min(
        range(len(rows)),
        key=lambda i: (rows[i]["max_budget_ratio"] or 0.0, -rows[i]["val_return"]),
    )


def _table(rows: Sequence[Mapping[str, Any]], params: Sequence[str], best: int) -> str:
    costs = sorted({k for r in rows for k in r if k.startswith("cost_")})
    columns = [
        "config",
        "best",
        *params,
        "val_return",
        "val_episodes",
        "within_budget",
        "max_budget_ratio",
        *costs,
        "env_steps",
        "wall_seconds",
        "cpu_seconds",
        "stop_reason",
    ]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for i, row in enumerate(rows):
        writer.writerow({**row["values"], **row, "config": i, "best": i == best})
    return buffer.getvalue()


def tune(
    task: str,
    algorithm: str,
    configurations: int = DEFAULT_CONFIGURATIONS,
    split: str = "val",
    out_dir: str | Path | None = None,
    *,
    track: Any = "S",
    steps: int | None = None,
    episodes: int | None = 16,
    seed: int = 0,
    sampler_seed: int = 0,
    n_envs: int = 8,
    config: str | Path | None = None,
    space_file: str | Path | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Sample ``configurations`` settings of ``algorithm`` for ``task``, train each on the same
    budget, evaluate on ``split`` and write the table and the best configuration (module
    docstring).

    Args:
        task: A registered task.
        algorithm: An algorithm that can train it.
        configurations: Settings sampled (the same for every algorithm by default).
        split: The selection split (``val``); ``"test"`` is refused (``ValueError``, one line).
        out_dir: The output folder (default ``tuning/<task>-<algorithm>``).
        track: Compute track of each configuration (``"S"``, ``"L"`` or a smoke mapping of
            :func:`~powerzoo.rl.tracks.resolve_track`); ignored when ``steps`` is given.
        steps: A fixed budget of env steps per configuration instead of a track.
        episodes: Validation days per evaluation, evenly spread (``None``: every day).
        seed: Training seed of every configuration.
        sampler_seed: Seed of the sampler.
        n_envs: Parallel training envs (without ``config``).
        config: A run config to start from (its ``algorithm_kwargs`` under the sampled ones).
        space_file: The search-space file (default :data:`SEARCH_SPACES_FILE`).
        progress: Print one line per finished configuration.

    Returns:
        The ``tuning.json`` record (``best`` holds the best row).
    """
    from powerzoo.rl.config import TrainConfig

    split = require_selection_split(split, "tuning")
    budget_track = None if steps is not None else resolve_track(track)
    if budget_track is None and steps is None:
        raise ValueError("give a compute track (S or L) or a number of env steps per config")
    if steps is not None and (isinstance(steps, bool) or int(steps) < 1):
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    space_path = Path(SEARCH_SPACES_FILE if space_file is None else space_file)
    space = load_search_space(algorithm, space_path)
    values = sample_configurations(space, configurations, sampler_seed)
    out = Path(out_dir or Path("tuning") / f"{task}-{str(algorithm).upper()}").resolve()
    runs = out / "runs"
    base = _base_config(task, str(algorithm).upper(), config, n_envs)
    configs = [
        _run_config(base, v, budget_track, steps, seed, runs, f"config{i}")
        for i, v in enumerate(values)
    ]
    resolved = [TrainConfig.from_dict(c, source=None).to_dict() for c in configs]  # fail early
    watch, rows = Stopwatch(), []
    for i, (v, cfg) in enumerate(zip(values, resolved, strict=True)):
        done = runs / f"config{i}" / RESULT_FILE
        row = read_json(done) if done.is_file() else None
        if (
            row is None
            or _plain(row.get("values")) != _plain(v)
            or _plain(row.get("config")) != _plain(cfg)
        ):
            if (runs / f"config{i}").exists():  # remains of an interrupted or other run
                shutil.rmtree(runs / f"config{i}")
            row = {
                "values": v,
                "config": cfg,
                **_train_and_score(cfg, split, episodes, budget_track),
            }
            write_json(done, row)
        rows.append(row)
        if progress:
            print(
                f"config {i}: val return {row['val_return']:,.2f}"
                f"{'' if row['within_budget'] else ' (over budget)'}, "
                f"{row['env_steps']:,} env steps in {row['wall_seconds']:.1f} s",
                flush=True,
            )
    best = _best(rows)
    atomic_write_text(out / TUNING_CSV, _table(rows, list(space), best))
    best_config = {k: v for k, v in rows[best]["config"].items() if k not in ("output_dir", "name")}
    header = (
        f"# the best of {len(rows)} configurations of {best_config['algorithm']} on {task}, "
        f"chosen on the {split} split by powerzoo tune (tuning.json)\n"
    )
    atomic_write_text(out / BEST_CONFIG, header + yaml.safe_dump(best_config, sort_keys=False))
    record = {
        "task": task,
        "algorithm": best_config["algorithm"],
        "split": split,
        "configurations": len(rows),
        "track": None if budget_track is None else budget_track.to_dict(),
        "steps_per_configuration": None if steps is None else int(steps),
        "validation_episodes": episodes,
        "seed": int(seed),
        "sampler_seed": int(sampler_seed),
        "search_space_file": str(space_path),
        "search_space_sha256": hashlib.sha256(space_path.read_bytes()).hexdigest(),
        "search_space": space,
        "total_env_steps": int(sum(r["env_steps"] for r in rows)),
        "total_wall_seconds": float(sum(r["wall_seconds"] for r in rows)),
        "total_cpu_seconds": float(sum(r["cpu_seconds"] for r in rows)),
        "this_call_wall_seconds": watch.wall_s(),
        "hardware": hardware_info(str(base.get("algorithm_kwargs", {}).get("device", "cpu"))),
        "best_index": best,
        "best": {k: v for k, v in rows[best].items() if k != "config"},
    }
    write_json(out / TUNING_JSON, record)
    return record
