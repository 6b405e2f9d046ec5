"""The sections of a run config (:mod:`powerzoo.rl.config`): the training env, SB3's
``VecNormalize``, evaluation during training, checkpoints and logging, each a pydantic model that
refuses unknown fields."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_serializer,
)

from powerzoo.rl.config_checks import number_for_field

__all__ = [
    "ConfigSection",
    "EnvConfig",
    "VecNormalizeConfig",
    "EvaluationConfig",
    "CheckpointConfig",
    "LoggingConfig",
]


class ConfigSection(BaseModel):
    """A config section: unknown fields refused, numbers written as text (``1e6``) read."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_written_as_text(cls, value: Any, info: ValidationInfo) -> Any:
        """``total_timesteps: 1e6`` (a string to YAML 1.1) and ``1e6`` as a float are the
        whole number 1,000,000; ``1.5`` for an integer field is refused naming the field."""
        field = cls.model_fields.get(info.field_name or "")
        return value if field is None else number_for_field(field.annotation, value)


class EnvConfig(ConfigSection):
    """``make_env`` options of the training env (the evaluation env copies them)."""

    split: str = "train"
    normalize: bool = True
    obs_mode: str | None = None
    forecast_horizon: int | None = Field(default=None, ge=1)
    reward: str | dict[str, float] | None = None
    task_kwargs: dict[str, Any] = Field(default_factory=dict)


class VecNormalizeConfig(ConfigSection):
    """SB3 ``VecNormalize``: running observation / return statistics of the training envs."""

    norm_obs: bool = True
    norm_reward: bool = True
    clip_obs: float = Field(default=10.0, gt=0)
    clip_reward: float = Field(default=10.0, gt=0)


class EvaluationConfig(ConfigSection):
    """Periodic evaluation on a separate env (val split by default)."""

    split: str = "val"
    freq: int = Field(default=10_000, ge=1)
    episodes: int = Field(default=8, ge=1)
    deterministic: bool = True
    at_start: bool | None = None  # None: evaluates_at_start decides by the algorithm

    @model_serializer(mode="wrap")
    def _unset_at_start_left_out(self, handler: Any) -> dict[str, Any]:
        """An unset ``at_start`` is not written, so configs (and the campaign trials' config
        hashes) read as they did before the field existed."""
        return {k: v for k, v in handler(self).items() if k != "at_start" or v is not None}


class CheckpointConfig(ConfigSection):
    """Periodic atomic checkpoints (model, normalisation statistics, RNG, counters)."""

    freq: int = Field(default=20_000, ge=1)
    keep: int = Field(default=3, ge=1)
    replay_buffer: bool = True


class LoggingConfig(ConfigSection):
    """TensorBoard, progress bar and SB3 verbosity."""

    tensorboard: bool = True
    progress_bar: bool | None = None
    verbose: int = Field(default=0, ge=0, le=2)
