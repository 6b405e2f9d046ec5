"""Run configs: one YAML or JSON file that describes a whole training run.

The file is parsed with ``yaml.safe_load`` / ``json`` and validated by pydantic models; nothing in
it is evaluated as code. Unknown and missing fields raise :class:`ConfigError`, which names the
file and the field (``evaluation.freq``); so do values the task rejects (a split it lacks, an
unknown task parameter, an ``obs_mode``, ``forecast_horizon`` or ``reward`` it does not take),
checked from the task's spec before any run folder is written. Minimal file::

    task: battery_arbitrage
    total_timesteps: 100000

Every field, with its default::

    task: battery_arbitrage          # registered task (required)
    algorithm: PPO                   # PPO, A2C, SAC, TD3, DDPG; multi-agent tasks also
                                     # MAPPO, IPPO, MAPPO-L, IPPO-L (powerzoo.rl.mappo; their
                                     # algorithm_kwargs are MAPPOParams fields, vec_normalize
                                     # is off: value normalisation is built in)
    policy: MlpPolicy
    total_timesteps: 100000          # env steps over all parallel envs; or `episodes: N`
    seed: 0                          # 0 .. 2**32 - 1
    n_envs: 1                        # parallel training envs (the native batch size)
    vec_env: native                  # native: one batched numpy call steps all n_envs;
                                     # dummy: n_envs single envs in turn; subproc: one process each
    env:                             # make_env options of the training env
      split: train
      normalize: true                # fixed affine maps: obs ~[-1, 1], actions in [-1, 1]
      obs_mode: null
      forecast_horizon: null
      reward: null                   # preset name or {term: weight}
      task_kwargs: {}
    vec_normalize:                   # SB3 running statistics (null or false: off)
      norm_obs: true
      norm_reward: true
      clip_obs: 10.0
      clip_reward: 10.0
    algorithm_kwargs: {}             # passed to the SB3 constructor (gamma: 0.999 preset on
                                     # tasks of >= 168 steps)
    evaluation:                      # null or false: no evaluation
      split: val
      freq: 10000                    # env steps between evaluations, whatever n_envs (and one
                                     # more at the end; multi-agent runs: only at the end)
      episodes: 8                    # val days, evenly spread over the split
      deterministic: true
      at_start: null                 # also evaluate the untrained model (step 0); null: only
                                     # where it is a controller (residual, behaviour cloning)
    checkpoint:                      # null or false: no checkpoints
      freq: 20000                    # env steps
      keep: 3                        # most recent checkpoints kept
      replay_buffer: true            # off-policy algorithms: save the replay buffer too
    stop_conditions: []              # [{type: reward_threshold, threshold: 1500}, ...]
    logging:
      tensorboard: true
      progress_bar: null             # null: on when stderr is a TTY
      verbose: 0
    output_dir: runs                 # the run folder is created inside it
    name: null                       # run folder name (letters, digits . _ -); default
                                     # <algorithm>-<task>-seed<S>-<timestamp>
    torch_threads: 1                 # torch intra-op threads (small MLPs run fastest on one)
    init_model: null                 # start from a saved model (.zip) instead of scratch
    overwrite: false                 # replace a run folder of the same name (else refused)

Numbers may be written ``1e6`` or ``3e-4`` (strings to YAML 1.1): an exact number is taken as
the number, a fractional one for an integer field is refused naming the field.

Bounds checked before any run folder exists: ``total_timesteps`` (or ``episodes`` × horizon) at
most 10^12 env steps, ``n_envs`` at most 65,536, ``torch_threads`` at most 1,024, and the common
SB3 hyperparameters in ``algorithm_kwargs`` within their ranges (``gamma`` in (0, 1],
``n_steps`` >= 1, ...: :func:`powerzoo.rl.algorithms.check_algorithm_kwargs`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from powerzoo.fileio import atomic_write_text, read_or_corrupt
from powerzoo.rl.algorithms import (
    ALL_ALGORITHMS,
    canonical_algorithm,
    check_algorithm_kwargs,
    is_native,
    numbers_in_kwargs,
    trainer_class,
)
from powerzoo.rl.conditions import CONDITION_TYPES, condition_from_dict
from powerzoo.rl.config_checks import (
    MAX_TIMESTEPS,
    format_errors,
    task_field_problems,
    whole_number,
)
from powerzoo.rl.config_sections import (
    CheckpointConfig,
    ConfigSection,
    EnvConfig,
    EvaluationConfig,
    LoggingConfig,
    VecNormalizeConfig,
)
from powerzoo.rl.names import check_plain_name

__all__ = [
    "ConfigError",
    "TrainConfig",
    "EnvConfig",
    "VecNormalizeConfig",
    "EvaluationConfig",
    "CheckpointConfig",
    "LoggingConfig",
    "RLConfig",
    "override_field",
    "resolve_config",
    "DEFAULT_BUDGET",
    "MAX_TIMESTEPS",
    "MAX_ENVS",
    "MAX_SEED",
    "MAX_TORCH_THREADS",
    "whole_number",
]

MAX_ENVS = 65_536
"""Most parallel training envs (``n_envs``)."""
MAX_SEED = 2**32 - 1
"""Largest ``seed``: numpy's global seed, which SB3 sets from it, takes 0 .. 2**32 - 1."""
MAX_TORCH_THREADS = 1_024
"""Most torch intra-op threads (``torch_threads``)."""


class ConfigError(ValueError):
    """A run config that cannot be used; the message names the file (if any) and the field."""


def _false_to_none(value: Any) -> Any:
    return None if value is False else value


class TrainConfig(ConfigSection):
    """A whole training run; see the module docstring for the file format."""

    task: str
    algorithm: str = "PPO"
    policy: str = "MlpPolicy"
    total_timesteps: int | None = Field(default=None, ge=1, le=MAX_TIMESTEPS)
    episodes: int | None = Field(default=None, ge=1)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    n_envs: int = Field(default=1, ge=1, le=MAX_ENVS)
    vec_env: Literal["native", "dummy", "subproc"] = "native"
    env: EnvConfig = Field(default_factory=EnvConfig)
    vec_normalize: VecNormalizeConfig | None = Field(default_factory=VecNormalizeConfig)
    algorithm_kwargs: dict[str, Any] = Field(default_factory=dict)
    evaluation: EvaluationConfig | None = Field(default_factory=EvaluationConfig)
    checkpoint: CheckpointConfig | None = Field(default_factory=CheckpointConfig)
    stop_conditions: list[dict[str, Any]] = Field(default_factory=list)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    output_dir: str = "runs"
    name: str | None = None
    torch_threads: int | None = Field(default=1, ge=1, le=MAX_TORCH_THREADS)
    init_model: str | None = None
    overwrite: bool = False

    _source: str | None = None  # file the config came from (for error messages)

    @field_validator("vec_normalize", "evaluation", "checkpoint", mode="before")
    @classmethod
    def _allow_false(cls, value: Any) -> Any:
        return _false_to_none(value)

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        from powerzoo.tasks.registry import get_task_class

        get_task_class(value)
        return value

    @field_validator("algorithm")
    @classmethod
    def _known_algorithm(cls, value: str) -> str:
        return canonical_algorithm(value, ALL_ALGORITHMS)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        return None if value is None else check_plain_name(value, "the run name")

    @model_validator(mode="before")
    @classmethod
    def _numeric_algorithm_kwargs(cls, data: Any) -> Any:
        # `learning_rate: 3e-4` is the string "3e-4" to YAML 1.1: the number it writes
        if isinstance(data, Mapping) and isinstance(data.get("algorithm_kwargs"), Mapping):
            kwargs = numbers_in_kwargs(str(data.get("algorithm", "PPO")), data["algorithm_kwargs"])
            data = {**data, "algorithm_kwargs": kwargs}
        return data

    @model_validator(mode="before")
    @classmethod
    def _native_marl_defaults(cls, data: Any) -> Any:
        # the native trainer normalises values itself: SB3's VecNormalize does not apply
        if isinstance(data, Mapping) and is_native(data.get("algorithm", "")):
            data = {**data, "vec_normalize": None}
        return data

    @field_validator("stop_conditions")
    @classmethod
    def _valid_conditions(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, spec in enumerate(value):
            try:
                condition_from_dict(spec)
            except ValueError as err:
                raise ValueError(f"[{i}]: {err} (types: {', '.join(CONDITION_TYPES)})") from None
        return value

    @model_validator(mode="after")
    def _budget_and_kwargs(self) -> TrainConfig:
        if (self.total_timesteps is None) == (self.episodes is None):
            raise ValueError(
                "give exactly one of total_timesteps or episodes (the training budget)"
            )
        check_algorithm_kwargs(self.algorithm, self.algorithm_kwargs, n_envs=self.n_envs)
        return self

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> TrainConfig:
        """Validate ``data`` (a mapping); errors name ``source`` and the offending field.

        Args:
            data: Config fields (a mapping, as read from a file).
            source: Where ``data`` came from, for error messages (a file name).

        Returns:
            The validated config; ``ConfigError`` naming the field otherwise.
        """
        where = f"config {source}" if source else "config"
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
        try:
            config = cls.model_validate(data)
        except ValidationError as err:
            raise ConfigError(f"{where}: {format_errors(err, TrainConfig)}") from None
        except ValueError as err:  # raised by validators outside pydantic's wrapping
            raise ConfigError(f"{where}: {err}") from None
        problems = task_field_problems(config)
        if problems:
            raise ConfigError(f"{where}: {'; '.join(problems)}")
        config._source = source
        return config

    @classmethod
    def from_file(cls, path: str | Path) -> TrainConfig:
        """Read and validate a YAML (``.yaml``/``.yml``) or JSON (``.json``) run config.

        Args:
            path: A ``.yaml``, ``.yml`` or ``.json`` file.

        Returns:
            The validated config.
        """
        return cls.from_dict(read_config_file(path), source=str(path))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (the resolved config saved in a run folder).

        Returns:
            Field name to value (nested sections as dicts).
        """
        return self.model_dump(mode="json")

    def fingerprint(self) -> str:
        """A short hash (16 hex digits) of the resolved fields that shape the run's results.

        A run records it (``run_state.json``, each checkpoint's ``state.json``) so that a
        ``config.yaml`` changed or cut afterwards is refused on resume and load. How a run is
        executed is left out (:data:`EXECUTION_FIELDS`: threads, logging, rollout workers give
        the same numbers), so a run can be resumed with more or fewer workers.

        Returns:
            16 hexadecimal digits.
        """
        data = self.to_dict()
        for dotted in EXECUTION_FIELDS:
            *parents, key = dotted.split(".")
            section = data
            for parent in parents:
                section = section.get(parent) or {}
            section.pop(key, None)
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def to_file(self, path: str | Path) -> Path:
        """Write the resolved config as YAML (or JSON for a ``.json`` path), atomically.

        Args:
            path: File to write (``.json`` for JSON, else YAML).

        Returns:
            The path written.
        """
        path = Path(path)
        data = self.to_dict()
        text = (
            json.dumps(data, indent=2)
            if path.suffix.lower() == ".json"
            else yaml.safe_dump(data, sort_keys=False)
        )
        return atomic_write_text(path, text)

    # ---- derived values ------------------------------------------------------------------------
    def budget_timesteps(self) -> int:
        """Training budget in env steps (``episodes`` × the task's horizon when given in
        episodes).

        Returns:
            The budget in env steps.
        """
        if self.total_timesteps is not None:
            return self.total_timesteps
        from powerzoo.tasks.registry import task_spec

        return int(self.episodes) * task_spec(self.task, **self.env.task_kwargs).horizon

    def stop_condition_objects(self) -> list[Any]:
        """The ``stop_conditions`` as condition objects (:mod:`powerzoo.rl.conditions`).

        Returns:
            One condition object per entry.
        """
        return [condition_from_dict(spec) for spec in self.stop_conditions]

    def build(self) -> Any:
        """The trainer of this config (:func:`powerzoo.rl.Trainer` builds the same one); its envs
        and model are built on first use.

        Returns:
            The trainer.
        """
        from powerzoo.tasks.registry import task_spec

        multi_agent = task_spec(self.task, **self.env.task_kwargs).agent_mode == "multi"
        return trainer_class(self.algorithm, multi_agent)(self)

    def run(
        self, stop_conditions: list[Any] | None = None, steps_per_eval: int | None = None
    ) -> Any:
        """Build the trainer and train until the budget or a stop condition; returns its result.

        Args:
            stop_conditions: Extra conditions of :mod:`powerzoo.rl.conditions`.
            steps_per_eval: Env steps between evaluations (overrides ``evaluation.freq``).

        Returns:
            The run's :class:`~powerzoo.rl.result.TrainResult`.
        """
        return self.build().train(stop_conditions=stop_conditions, steps_per_eval=steps_per_eval)


RLConfig = TrainConfig
"""Another name of :class:`TrainConfig` (both names are in use)."""

# how a run executes, not its numbers: left out of the fingerprint
EXECUTION_FIELDS = ("torch_threads", "logging", "overwrite", "algorithm_kwargs.rollout_workers")
EXECUTION_FIELDS += ("algorithm_kwargs.rollout_address",)

DEFAULT_BUDGET = 100_000
"""Env steps trained when neither ``total_timesteps`` nor ``episodes`` is given to a ``Trainer``."""


def read_config_file(path: str | Path) -> Any:
    """The parsed content of a YAML or JSON run-config file, not yet validated;
    ``FileNotFoundError`` without the file, :class:`ConfigError` naming it when it does not
    parse."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} not found")
    text = read_or_corrupt(path, lambda p: p.read_text(encoding="utf-8"))
    try:
        return json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        kind = "JSON" if path.suffix.lower() == ".json" else "YAML"
        problem = " ".join(str(err).split())
        raise ConfigError(f"config {path}: not valid {kind}: {problem}") from None


def resolve_config(task_or_config: Any, overrides: dict[str, Any]) -> TrainConfig:
    """A validated :class:`TrainConfig` from a task name / dict / file / config plus keyword
    overrides.

    Keywords that are config fields set them, ``make_env`` options (``split``, ``normalize``, ...)
    go to ``env``, anything else goes to ``algorithm_kwargs`` (and must be an SB3 argument). A
    dict for a section updates that section (``evaluation={"freq": 500}`` keeps the file's
    ``evaluation.split`` and ``episodes``); ``None`` / ``False`` turns a section off.
    ``algorithm`` / ``total_timesteps`` / ``seed`` set to ``None`` are ignored. Errors name the
    config file (if any) and the field.
    """
    if isinstance(task_or_config, TrainConfig):
        data, source = task_or_config.to_dict(), task_or_config._source
    elif isinstance(task_or_config, Mapping):
        data, source = dict(task_or_config), None
    elif isinstance(task_or_config, (str, Path)) and Path(task_or_config).suffix.lower() in (
        ".yaml",
        ".yml",
        ".json",
    ):
        raw, source = read_config_file(task_or_config), str(task_or_config)
        if overrides.get("algorithm") is not None and isinstance(raw, Mapping):
            # the file's algorithm_kwargs are checked against the algorithm that will train them
            raw = {**raw, "algorithm": overrides["algorithm"]}
        data = TrainConfig.from_dict(raw, source=source).to_dict()
    elif isinstance(task_or_config, str):
        data, source = {"task": task_or_config}, None
    else:
        raise TypeError(
            "Trainer needs a task name, a TrainConfig, a dict or a config file path, "
            f"got {task_or_config!r}"
        )
    env_fields = set(EnvConfig.model_fields)
    for key, value in overrides.items():
        if value is None and key in ("algorithm", "total_timesteps", "seed"):
            continue
        if key in TrainConfig.model_fields:
            override_field(data, key, value)
        elif key in env_fields:
            data["env"] = {**(data.get("env") or {}), key: value}
        else:
            data["algorithm_kwargs"] = {**(data.get("algorithm_kwargs") or {}), key: value}
    if data.get("total_timesteps") is None and data.get("episodes") is None:
        data["total_timesteps"] = DEFAULT_BUDGET
    if overrides.get("total_timesteps") is not None:
        data["episodes"] = None
    return TrainConfig.from_dict(data, source=source)


def override_field(data: dict[str, Any], key: str, value: Any) -> None:
    """Set field ``key`` of the run-config dict ``data`` to ``value``; a mapping for a section
    (``env``, ``evaluation``, ...) updates the section instead, except ``algorithm_kwargs``,
    which is replaced whole."""
    section = data.get(key)
    merge = (
        isinstance(value, Mapping) and isinstance(section, Mapping) and key != "algorithm_kwargs"
    )
    data[key] = {**section, **value} if merge else value
