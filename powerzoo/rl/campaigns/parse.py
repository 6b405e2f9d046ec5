"""Read and validate a campaign file and expand it into :class:`~.spec.TrialSpec` trials.

The file format is documented in :mod:`powerzoo.rl.campaigns.spec`. Every trial's run config is
validated here (:class:`~powerzoo.rl.config.TrainConfig`): a bad key fails before training.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from powerzoo.rl.algorithms import algorithm_label
from powerzoo.rl.campaigns.parse_checks import check_keys as _check_keys
from powerzoo.rl.campaigns.parse_checks import fail as _fail
from powerzoo.rl.campaigns.parse_checks import reject_outside as _reject_outside
from powerzoo.rl.campaigns.parse_evaluation import parse_evaluation
from powerzoo.rl.campaigns.spec import (
    RLLIB_PPO,
    SHARING_MODES,
    CampaignError,
    CampaignSpec,
    TrialSpec,
    config_hash,
)
from powerzoo.rl.config import ConfigError, TrainConfig, override_field, whole_number
from powerzoo.rl.names import check_plain_name
from powerzoo.rl.tracks import apply_track, resolve_track

__all__ = ["load_campaign", "parse_campaign"]

_TOP_KEYS = {"name", "tasks", "seeds", "budget", "evaluation", "algorithms", "ray", "track"}
_BUDGET_KEYS = {"total_timesteps", "episodes", "n_envs"}
_ALGO_KEYS = {"tasks", "settings"}
_SETTING_KEYS = {"tasks", "config", "algorithm_kwargs", "overrides", "track"}
_RLLIB_KEYS = {"tasks", "sharing", "training", "num_env_runners", "num_envs_per_env_runner", "env"}
_RAY_KEYS = {"cpus_per_trial", "max_concurrent_trials"}
_CAMPAIGN_OWNED = {"task", "algorithm", "seed", "output_dir", "name"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def load_campaign(path: str | Path) -> CampaignSpec:
    """Read and validate a campaign YAML file (paths inside it are relative to the file).

    Args:
        path: The campaign YAML file.

    Returns:
        The validated campaign; ``CampaignError`` on bad input.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"campaign file {path} not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise CampaignError(f"campaign {path}: not valid YAML: {err}") from None
    return parse_campaign(data, base_dir=path.parent, source=str(path), default_name=path.stem)


def _plain(where: str, value: Any, field: str) -> None:
    """``CampaignError`` unless ``value`` is one plain folder name (it names a folder)."""
    try:
        check_plain_name(value, field)
    except ValueError as err:
        raise _fail(where, f"{err}; it names the output or a trial folder") from None


def parse_campaign(
    data: Any, base_dir: str | Path = ".", source: str | None = None, default_name: str = "campaign"
) -> CampaignSpec:
    """Validate a campaign mapping (the parsed YAML) and expand its trials; ``CampaignError`` on
    bad input.

    Args:
        data: The parsed YAML mapping.
        base_dir: Folder that relative paths in ``data`` are resolved against.
        source: Where ``data`` came from, for error messages.
        default_name: The campaign's name when ``data`` gives none.

    Returns:
        The validated campaign.
    """
    from powerzoo.tasks import list_tasks

    where = f"campaign {source}" if source else "campaign"
    if not isinstance(data, Mapping):
        raise _fail(where, f"expected a mapping of keys, got {type(data).__name__}")
    data = _check_keys(where, data, _TOP_KEYS, "(top level)")
    for key in ("tasks", "seeds", "algorithms"):
        if key not in data:
            raise _fail(where, f"missing required key {key!r}")
    name = default_name if data.get("name") is None else str(data["name"])
    if data.get("name") is not None:
        _plain(where, name, "'name'")
    registered = list_tasks()
    tasks = data["tasks"]
    if isinstance(tasks, str):
        tasks = [tasks]
    if not isinstance(tasks, list) or not tasks:
        raise _fail(where, "'tasks' must be a non-empty list of task names")
    _reject_outside(
        where, tasks, registered, "unknown task(s) ", f"; registered: {', '.join(registered)}"
    )
    for task in tasks:
        _plain(where, task, "task name")  # part of each trial's folder name
    if len(set(tasks)) != len(tasks):
        raise _fail(where, f"'tasks' repeats a task: {tasks}")
    seeds = data["seeds"]
    if not isinstance(seeds, list) or not seeds:
        raise _fail(where, "'seeds' must be a non-empty list of integers >= 0")
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds) or len(
        set(seeds)
    ) != len(seeds):
        raise _fail(where, f"'seeds' must be distinct integers >= 0, got {seeds}")

    ev = parse_evaluation(where, data.get("evaluation"), tasks)
    split, episodes, baselines, model = ev.split, ev.episodes, ev.baselines, ev.model

    ray = _check_keys(where, data.get("ray"), _RAY_KEYS, "ray")
    cpus = ray.get("cpus_per_trial", 1)
    if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus <= 0:
        raise _fail(where, f"'ray.cpus_per_trial' must be a positive number, got {cpus!r}")
    concurrent = ray.get("max_concurrent_trials")
    if concurrent is not None and (
        isinstance(concurrent, bool) or not isinstance(concurrent, int) or concurrent < 1
    ):
        raise _fail(
            where,
            f"'ray.max_concurrent_trials' must be a positive integer or null, got {concurrent!r}",
        )

    budget = _budget(where, data.get("budget"), tasks)
    algorithms = data["algorithms"]
    if not isinstance(algorithms, Mapping) or not algorithms:
        raise _fail(
            where, "'algorithms' must be a non-empty mapping {algorithm: {tasks, settings}}"
        )
    notes: list[str] = []
    trials: list[TrialSpec] = []
    for algo_name, entry in algorithms.items():
        algo = _algorithm_name(where, algo_name)
        entry = _check_keys(where, entry, _ALGO_KEYS, f"algorithms.{algo_name}")
        algo_tasks = _algorithm_tasks(where, algo, algo_name, entry.get("tasks"), tasks, notes)
        settings = entry.get("settings") or {"default": {}}
        if not isinstance(settings, Mapping):
            raise _fail(
                where, f"'algorithms.{algo_name}.settings' must be a mapping {{name: setting}}"
            )
        for setting_name, setting in settings.items():
            field = f"algorithms.{algo_name}.settings.{setting_name}"
            if not isinstance(setting_name, str) or not _NAME.match(setting_name):
                raise _fail(where, f"{field}: a setting name takes letters, digits, '.', '_', '-'")
            allowed = _RLLIB_KEYS if algo == RLLIB_PPO else _SETTING_KEYS
            setting = _check_keys(where, setting, allowed, field)
            wanted = setting.get("track", data.get("track"))
            for task in _setting_tasks(where, field, setting.get("tasks"), algo_tasks):
                config = (
                    _rllib_config(where, field, task, setting, budget[task])
                    if algo == RLLIB_PPO
                    else _train_config(
                        where, field, task, algo, setting, budget[task], Path(base_dir)
                    )
                )
                config, track = _with_track(where, field, wanted, algo, config)
                for seed in seeds:
                    cfg = {**config, "seed": int(seed)}
                    trials.append(
                        TrialSpec(
                            f"{task}-{algorithm_label(algo)}-{setting_name}-seed{seed}",
                            task,
                            algo,
                            setting_name,
                            int(seed),
                            cfg,
                            config_hash(cfg),
                            None if track is None else track.to_dict(),
                        )
                    )
    if not trials:
        raise _fail(where, "no trials: no algorithm can train any of the campaign's tasks")
    # seed by seed (stable within a seed): a campaign stopped part-way covers every task and
    # algorithm with its first seeds rather than a few tasks with all of them
    seed_rank = {int(s): i for i, s in enumerate(seeds)}
    trials.sort(key=lambda t: seed_rank[t.seed])
    ids = [t.trial_id for t in trials]
    if len(set(ids)) != len(ids):
        raise _fail(
            where,
            "an algorithm is listed twice (trial ids repeat: "
            f"{sorted({i for i in ids if ids.count(i) > 1})[:3]})",
        )
    return CampaignSpec(
        name,
        tuple(tasks),
        tuple(int(s) for s in seeds),
        split,
        episodes,
        tuple(baselines),
        model,
        ev.plots,
        tuple(trials),
        float(cpus),
        concurrent,
        tuple(notes),
        source,
        ev.env_seeds,
        ev.families,
    )


def _budget(where: str, section: Any, tasks: list[str]) -> dict[str, dict[str, Any]]:
    """``{task: {total_timesteps | episodes, n_envs}}`` from the campaign's ``budget`` section."""
    section = _check_keys(where, section, _BUDGET_KEYS | {"per_task"}, "budget")
    per_task = section.pop("per_task", None) or {}
    if not isinstance(per_task, Mapping):
        raise _fail(where, "'budget.per_task' must be a mapping {task: {total_timesteps, n_envs}}")
    _reject_outside(where, per_task, tasks, "'budget.per_task' names task(s) outside 'tasks': ")
    out = {}
    for task in tasks:
        merged = {
            **section,
            **_check_keys(where, per_task.get(task), _BUDGET_KEYS, f"budget.per_task.{task}"),
        }
        for key, value in merged.items():
            try:  # total_timesteps: 1e6 (a string to YAML 1.1) is 1,000,000
                value = merged[key] = whole_number(value)
            except ValueError:
                pass
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise _fail(where, f"'budget.{key}' must be a positive integer, got {value!r}")
        if "total_timesteps" in merged and "episodes" in merged:
            raise _fail(where, f"budget of {task}: give total_timesteps or episodes, not both")
        out[task] = merged
    return out


def _with_track(where: str, field: str, value: Any, algo: str, config: dict) -> tuple[dict, Any]:
    """``(config, track)``: ``config`` on the setting's compute track (``value``), if any."""
    try:
        if value is not None and algo == RLLIB_PPO:
            raise ValueError("rllib_ppo trials take no track (give budget steps)")
        track = resolve_track(value)
        return (config, None) if track is None else (apply_track(config, track), track)
    except ValueError as err:
        raise _fail(where, f"{field}: {err}") from None


def _algorithm_name(where: str, name: Any) -> str:
    from powerzoo.rl.algorithms import ALL_ALGORITHMS, entry_point_class, is_entry_point

    if isinstance(name, str) and name.lower() == RLLIB_PPO:
        return RLLIB_PPO
    if is_entry_point(name):  # an SB3 algorithm class from outside: checked before any trial
        try:
            entry_point_class(name)
        except ValueError as err:
            raise _fail(where, str(err)) from None
        return name
    if isinstance(name, str) and name.upper() in ALL_ALGORITHMS:
        return name.upper()
    raise _fail(
        where,
        f"unknown algorithm {name!r}; valid: {', '.join(ALL_ALGORITHMS)}, {RLLIB_PPO}, or an "
        "SB3 algorithm class from outside as 'package.module:Class'",
    )


def _can_train(algo: str, task: str) -> bool:
    from powerzoo.rl.algorithms import algorithms_for, is_entry_point
    from powerzoo.tasks import task_spec

    spec = task_spec(task)
    if algo == RLLIB_PPO:
        return spec.agent_mode == "multi"
    return is_entry_point(algo) or algo in algorithms_for(spec)


def _algorithm_tasks(
    where: str, algo: str, name: str, listed: Any, tasks: list[str], notes: list[str]
) -> list[str]:
    if listed is None:
        fit = [t for t in tasks if _can_train(algo, t)]
        notes.extend(
            f"{t}: no {algo} trials ({algo} cannot train this task)" for t in tasks if t not in fit
        )
        return fit
    if isinstance(listed, str):
        listed = [listed]
    if not isinstance(listed, list) or not listed:
        raise _fail(
            where, f"'algorithms.{name}.tasks' must be a non-empty list of the campaign's tasks"
        )
    _reject_outside(
        where, listed, tasks, f"'algorithms.{name}.tasks' names task(s) outside 'tasks': "
    )
    bad = [t for t in listed if not _can_train(algo, t)]
    if bad:
        raise _fail(
            where,
            f"'algorithms.{name}.tasks': {algo} cannot train {', '.join(bad)}"
            + (" (rllib_ppo is for multi-agent tasks)" if algo == RLLIB_PPO else ""),
        )
    return list(dict.fromkeys(listed))


def _setting_tasks(where: str, field: str, listed: Any, algo_tasks: list[str]) -> list[str]:
    """The tasks a setting trains: its own ``tasks`` (a subset of the algorithm's) or all."""
    if listed is None:
        return algo_tasks
    if isinstance(listed, str):
        listed = [listed]
    if not isinstance(listed, list) or not listed:
        raise _fail(where, f"'{field}.tasks' must be a non-empty list of the algorithm's tasks")
    _reject_outside(
        where, listed, algo_tasks, f"'{field}.tasks' names task(s) the algorithm does not train: "
    )
    return [t for t in algo_tasks if t in listed]


def _base_config(where: str, field: str, task: str, config: Any, base_dir: Path) -> dict[str, Any]:
    if config is None:
        return {"task": task}
    if isinstance(config, Mapping):
        if task not in config:
            return {"task": task}
        config = config[task]
    path = Path(config)
    if not path.is_absolute():
        path = base_dir / path
    try:
        data = TrainConfig.from_file(path).to_dict()
    except (ConfigError, FileNotFoundError) as err:
        raise _fail(where, f"{field}.config: {err}") from None
    if data["task"] != task:
        raise _fail(
            where,
            f"{field}.config: {path} is a {data['task']} config, not {task} (give {{task: path}} "
            "per task)",
        )
    return data


def _train_config(
    where: str,
    field: str,
    task: str,
    algo: str,
    setting: dict[str, Any],
    budget: dict[str, Any],
    base_dir: Path,
) -> dict[str, Any]:
    """The resolved, validated run-config dict of one (task, algorithm, setting), seed and folder
    left out."""
    data = _base_config(where, field, task, setting.get("config"), base_dir)
    data.update(task=task, algorithm=algo)
    if budget:
        if "total_timesteps" in budget or "episodes" in budget:
            data["total_timesteps"], data["episodes"] = (
                budget.get("total_timesteps"),
                budget.get("episodes"),
            )
        if "n_envs" in budget:
            data["n_envs"] = budget["n_envs"]
    overrides = setting.get("overrides") or {}
    if not isinstance(overrides, Mapping):
        raise _fail(where, f"{field}.overrides must be a mapping of run-config fields")
    owned = sorted(set(overrides) & _CAMPAIGN_OWNED)
    if owned:
        raise _fail(
            where,
            f"{field}.overrides: {', '.join(owned)} set by the campaign "
            "(tasks, algorithms, seeds, --out)",
        )
    for key, value in overrides.items():
        override_field(data, key, value)
    kwargs = setting.get("algorithm_kwargs") or {}
    if not isinstance(kwargs, Mapping):
        raise _fail(where, f"{field}.algorithm_kwargs must be a mapping")
    data["algorithm_kwargs"] = {**(data.get("algorithm_kwargs") or {}), **kwargs}
    logging = {**(data.get("logging") or {}), "tensorboard": False, "progress_bar": False}
    data.update(
        checkpoint=None,
        logging=logging,
        torch_threads=1,
        init_model=data.get("init_model"),
        output_dir="runs",
        name=None,
    )
    if "checkpoint" in overrides:
        data["checkpoint"] = overrides["checkpoint"]
    try:
        resolved = TrainConfig.from_dict({**data, "seed": 0}, source=None).to_dict()
    except ConfigError as err:
        raise _fail(where, f"{field} on {task}: {str(err).removeprefix('config: ')}") from None
    for key in ("seed", "output_dir", "name"):
        resolved.pop(key)
    return resolved


def _rllib_config(
    where: str, field: str, task: str, setting: dict[str, Any], budget: dict[str, Any]
) -> dict[str, Any]:
    sharing = setting.get("sharing", "shared")
    if sharing not in SHARING_MODES:
        raise _fail(
            where, f"{field}.sharing must be one of {', '.join(SHARING_MODES)}, got {sharing!r}"
        )
    if "total_timesteps" not in budget:
        raise _fail(where, f"budget of {task}: rllib_ppo trials need total_timesteps (env steps)")
    for key in ("training", "env"):
        if not isinstance(setting.get(key) or {}, Mapping):
            raise _fail(where, f"{field}.{key} must be a mapping")
    runners = setting.get("num_env_runners", 0)
    per_runner = setting.get("num_envs_per_env_runner", 1)
    if (
        not isinstance(runners, int)
        or runners < 0
        or not isinstance(per_runner, int)
        or per_runner < 1
    ):
        raise _fail(
            where, f"{field}: num_env_runners must be >= 0 and num_envs_per_env_runner >= 1"
        )
    return {
        "task": task,
        "algorithm": RLLIB_PPO,
        "sharing": sharing,
        "total_timesteps": int(budget["total_timesteps"]),
        "training": dict(setting.get("training") or {}),
        "env": dict(setting.get("env") or {}),
        "num_env_runners": runners,
        "num_envs_per_env_runner": per_runner,
    }
