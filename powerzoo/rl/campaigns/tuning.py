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
whole budget trains). With ``campaign=`` each configuration is trained and scored as that
campaign trains its trials instead (its track, envs and periodic validation evaluations; the
best of them is the configuration's score, :mod:`~powerzoo.rl.campaigns.tuning_campaign`), and
``preset=True`` trains the untuned setting beside them, so the table shows what tuning gains over
it. The output folder holds::

    tuning.csv          one row per configuration: its sampled values, the validation return
                        and mean costs, within the budgets, env steps, wall and CPU seconds
    best_config.yaml    the best configuration as a run config (`powerzoo train -c`)
    tuning.json         the tuning budget (configurations, split, track or steps, seeds,
                        search-space file and hash, seconds, hardware) and the best row
    runs/config<i>/     each configuration's run folder (runs/preset/ for the preset); its
                        result.json marks it finished, so an interrupted run resumes there
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from powerzoo.fileio import atomic_write_text, read_json, write_json
from powerzoo.rl.algorithms import ALL_ALGORITHMS, algorithm_label, canonical_algorithm
from powerzoo.rl.campaigns.tuning_space import (
    SEARCH_SPACES_FILE,
    load_search_space,
    sample_configurations,
)
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

DEFAULT_CONFIGURATIONS = 8
"""Configurations sampled per algorithm unless told otherwise: the same for every algorithm."""
TUNING_CSV, BEST_CONFIG, TUNING_JSON, RESULT_FILE = (
    "tuning.csv",
    "best_config.yaml",
    "tuning.json",
    "result.json",
)
PRESET = "preset"
"""The name of the base configuration's line (``tune(preset=True)``) and its run folder."""


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
    budget: Track | int | None,
    seed: int,
    folder: Path,
    name: str,
) -> dict[str, Any]:
    """One configuration's run config: ``values`` over the base's ``algorithm_kwargs``, trained
    on ``budget`` (a track, a number of env steps, or ``None``: the base's own budget and
    periodic evaluation, as a campaign trains it)."""
    from powerzoo.rl.tracks import apply_track

    config = {
        **base,
        "algorithm_kwargs": _nested(values, base.get("algorithm_kwargs") or {}),
        "seed": int(seed),
        "checkpoint": None,
        "logging": {"tensorboard": False, "progress_bar": False, "verbose": 0},
        "torch_threads": 1,
        "output_dir": str(folder),
        "name": name,
    }
    if budget is None:
        return config
    config["evaluation"] = None
    if isinstance(budget, Track):
        return apply_track(config, budget)
    return {**config, "total_timesteps": int(budget), "episodes": None}


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
    config: dict[str, Any],
    split: str,
    episodes: int | None,
    track: Track | None,
    model: str = "final",
) -> dict[str, Any]:
    """Train one configuration and score it on ``split``: its final model evaluated there, or
    with ``model="best"`` the best of its periodic evaluations (the model a campaign keeps,
    :func:`~powerzoo.rl.campaigns.tuning_campaign.selected_evaluation`); the row's numbers."""
    from powerzoo.benchmarks.budget_snapshot import budgets_of
    from powerzoo.benchmarks.score_v2 import budget_ratios, mean_within_budget
    from powerzoo.rl.campaigns.trial import one_thread
    from powerzoo.rl.campaigns.tuning_campaign import selected_evaluation
    from powerzoo.rl.trainer import Trainer

    with one_thread():
        watch = Stopwatch()
        trainer = Trainer(config)
        result = trainer.train()
        compute = compute_record(
            track,
            result.env_steps,
            watch,
            config.get("algorithm_kwargs"),
            result.stop_reason,
        )
        if model == "best":
            chosen = selected_evaluation(Path(config["output_dir"]) / config["name"])
        else:
            summary = trainer.evaluate(split=split, n_episodes=episodes, seed=0)
            chosen = {
                "val_return": float(summary["mean_return"]),
                "val_episodes": int(summary["episodes"]),
                "mean_costs": summary["mean_costs"],
            }
        trainer.close()
    costs = chosen.pop("mean_costs")
    names = list(costs)
    means = np.asarray([[costs[n] for n in names]])
    budgets = budgets_of(config["task"])
    ratios = budget_ratios(means, names, budgets)
    return {
        **chosen,
        "within_budget": bool(mean_within_budget(means, names, budgets)),
        "max_budget_ratio": max(ratios.values()) if ratios else None,
        **{f"cost_{n}": float(costs[n]) for n in names},
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


def _table(
    rows: Sequence[Mapping[str, Any]],
    params: Sequence[str],
    best: int,
    preset: Mapping[str, Any] | None = None,
) -> str:
    """``tuning.csv``: one line per sampled configuration, then the preset's (``config`` =
    ``preset``, never the best) when it was trained too."""
    every = [*rows, *([preset] if preset is not None else [])]
    costs = sorted({k for r in every for k in r if k.startswith("cost_")})
    selected = ["selected_step"] if any("selected_step" in r for r in every) else []
    columns = [
        "config",
        "best",
        *params,
        "val_return",
        "val_episodes",
        *selected,
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
    if preset is not None:
        writer.writerow({**preset, "config": PRESET, "best": False})
    return buffer.getvalue()


def _without_place(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run config without where its run folder goes (a tuning folder may move)."""
    return {k: v for k, v in config.items() if k not in ("output_dir", "name")}


def _trained_row(
    folder: Path,
    values: Mapping[str, Any],
    config: dict[str, Any],
    score: Any,
) -> tuple[dict[str, Any], bool]:
    """The row of the configuration trained in ``folder`` and whether it was kept: read from its
    ``result.json`` when a run of the same values and config finished there (wherever the
    tuning folder was then), else trained (the remains of an interrupted run removed).
    ``ValueError`` when ``folder`` holds a finished run of other settings: another tuning's."""
    done = folder / RESULT_FILE
    row = read_json(done) if done.is_file() else None
    if row is not None:
        same = _plain(row.get("values")) == _plain(values) and _plain(
            _without_place(row.get("config") or {})
        ) == _plain(_without_place(config))
        if same:
            return {**row, "config": config}, True
        raise ValueError(
            f"{folder.parent.parent} holds another tuning ({folder.name} was trained with other "
            "settings); give another --out, or remove that folder to start over"
        )
    if folder.exists():  # remains of an interrupted run
        shutil.rmtree(folder)
    row = {"values": dict(values), "config": config, **score(config)}
    write_json(done, row)
    return row, False


def _progress_line(
    name: str, row: Mapping[str, Any], split: str, kept: bool, steps: int | None
) -> str:
    """One configuration's line: its return on ``split``, its env steps (against the ``steps``
    asked when it trained more: whole rollouts), and whether an earlier run gave it."""
    asked = (
        f" ({steps:,} asked: it trains whole rollouts)"
        if steps is not None and row["env_steps"] != steps
        else ""
    )
    return (
        f"{name}: {split} return {row['val_return']:,.2f}"
        f"{'' if row['within_budget'] else ' (over budget)'}, "
        f"{row['env_steps']:,} env steps{asked} in {row['wall_seconds']:.1f} s"
        f"{', kept from an earlier run' if kept else ''}"
    )


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
    campaign: str | Path | None = None,
    setting: str | None = None,
    preset: bool = False,
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
        track: Compute track of each configuration (``"S"``, ``"L"`` or a mapping of
            :func:`~powerzoo.rl.tracks.resolve_track`, e.g. ``{"name": "S", "clock": "cpu"}``);
            ignored when ``steps`` is given.
        steps: A fixed budget of env steps per configuration instead of a track.
        episodes: Validation days per evaluation, evenly spread (``None``: every day).
        seed: Training seed of every configuration.
        sampler_seed: Seed of the sampler.
        n_envs: Parallel training envs (without ``config``).
        config: A run config to start from (its ``algorithm_kwargs`` under the sampled ones).
        space_file: The search-space file (default :data:`SEARCH_SPACES_FILE`).
        campaign: A campaign file: start from the run config it trains ``algorithm`` on
            ``task`` with (its track, envs and periodic validation evaluation) and score each
            configuration as it selects its model (:mod:`~powerzoo.rl.campaigns.
            tuning_campaign`); ``track``, ``steps``, ``config``, ``n_envs`` and ``episodes``
            then come from the campaign.
        setting: The campaign's setting of ``algorithm`` on ``task`` (when it has several).
        preset: Also train the base configuration itself (no sampled values) under the same
            budget and protocol, reported as the ``preset`` line and ``gain_over_preset``, never
            chosen (the tuning budget stays ``configurations``).
        progress: Print one line per finished configuration.

    Returns:
        The ``tuning.json`` record (``best`` holds the best row).
    """
    from powerzoo.rl.config import TrainConfig
    from powerzoo.rl.tracks import Track

    split = require_selection_split(split, "tuning")
    start = None
    if campaign is not None:
        given = [n for n, v in (("steps", steps), ("config", config)) if v is not None]
        if given:
            raise ValueError(f"{' and '.join(given)} come from the campaign file; leave them out")
        from powerzoo.rl.campaigns.tuning_campaign import campaign_base

        start = campaign_base(campaign, task, algorithm, setting)
        split = str((start.config.get("evaluation") or {}).get("split", split))
        budget_track = None if start.track is None else Track(**start.track)
    elif setting is not None:
        raise ValueError("a setting names one of a campaign's settings: give the campaign too")
    else:
        budget_track = None if steps is not None else resolve_track(track)
        if budget_track is None and steps is None:
            raise ValueError("give a compute track (S or L) or a number of env steps per config")
        if steps is not None and (isinstance(steps, bool) or int(steps) < 1):
            raise ValueError(f"steps must be a positive integer, got {steps!r}")
    space_path = Path(SEARCH_SPACES_FILE if space_file is None else space_file)
    space = load_search_space(algorithm, space_path)
    values = sample_configurations(space, configurations, sampler_seed)
    algorithm = canonical_algorithm(algorithm, ALL_ALGORITHMS)  # an entry point as written
    out = Path(out_dir or Path("tuning") / f"{task}-{algorithm_label(algorithm)}").resolve()
    runs = out / "runs"
    if start is not None:
        base, budget, model = start.config, None, start.model
    else:
        base = _base_config(task, algorithm, config, n_envs)
        budget, model = (budget_track if steps is None else int(steps)), "final"
    names = [f"config{i}" for i in range(len(values))] + ([PRESET] if preset else [])
    values = values + ([{}] if preset else [])
    configs = [
        TrainConfig.from_dict(_run_config(base, v, budget, seed, runs, n), source=None).to_dict()
        for v, n in zip(values, names, strict=True)
    ]  # every configuration resolved before any trains: a bad one fails early

    def score(cfg: dict[str, Any]) -> dict[str, Any]:
        return _train_and_score(cfg, split, episodes, budget_track, model)

    if progress:
        allowance = (
            f"{int(steps):,} env steps"
            if steps is not None
            else "the campaign's allowance"
            if budget_track is None
            else f"track {budget_track.name} ({budget_track.wall_clock_s:g} s)"
        )
        print(
            f"tuning {algorithm} on {task}: {len(names) - int(preset)} configuration(s)"
            f"{' and the preset' if preset else ''}, {allowance} each, chosen on {split}; "
            f"writing {out}",
            flush=True,
        )
    watch, rows = Stopwatch(), []
    for v, cfg, name in zip(values, configs, names, strict=True):
        row, kept = _trained_row(runs / name, v, cfg, score)
        rows.append(row)
        if progress:
            print(_progress_line(name, row, split, kept, steps), flush=True)
    preset_row = rows.pop() if preset else None
    best = _best(rows)
    atomic_write_text(out / TUNING_CSV, _table(rows, list(space), best, preset_row))
    best_config = {k: v for k, v in rows[best]["config"].items() if k not in ("output_dir", "name")}
    header = (
        f"# the best of {len(rows)} configurations of {best_config['algorithm']} on {task}, "
        f"chosen on the {split} split by powerzoo tune (tuning.json)\n"
    )
    atomic_write_text(out / BEST_CONFIG, header + yaml.safe_dump(best_config, sort_keys=False))
    every = rows + ([preset_row] if preset_row is not None else [])
    record = {
        "task": task,
        "algorithm": best_config["algorithm"],
        "split": split,
        "configurations": len(rows),
        "track": None if budget_track is None else budget_track.to_dict(),
        "steps_per_configuration": None if steps is None else int(steps),
        "validation_episodes": (episodes if model == "final" else int(rows[best]["val_episodes"])),
        "model": model,
        "campaign": None
        if start is None
        else {"file": start.source, "setting": start.setting, "model": start.model},
        "seed": int(seed),
        "sampler_seed": int(sampler_seed),
        "search_space_file": str(space_path),
        "search_space_sha256": hashlib.sha256(space_path.read_bytes()).hexdigest(),
        "search_space": space,
        "total_env_steps": int(sum(r["env_steps"] for r in every)),
        # what each configuration (and the preset) trained: a fixed budget of env steps is
        # rounded up to whole rollouts, which differ between configurations
        "env_steps_range": [
            int(min(r["env_steps"] for r in every)),
            int(max(r["env_steps"] for r in every)),
        ],
        "total_wall_seconds": float(sum(r["wall_seconds"] for r in every)),
        "total_cpu_seconds": float(sum(r["cpu_seconds"] for r in every)),
        "this_call_wall_seconds": watch.wall_s(),
        "hardware": hardware_info(str(base.get("algorithm_kwargs", {}).get("device", "cpu"))),
        "best_index": best,
        "best": {k: v for k, v in rows[best].items() if k != "config"},
        "preset": None
        if preset_row is None
        else {k: v for k, v in preset_row.items() if k != "config"},
        "gain_over_preset": None
        if preset_row is None
        else float(rows[best]["val_return"] - preset_row["val_return"]),
    }
    write_json(out / TUNING_JSON, record)
    return record
