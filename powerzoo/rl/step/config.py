"""Settings of a :class:`~powerzoo.rl.step.trainer.StepTrainer`, validated by pydantic.

Like the run config (:mod:`powerzoo.rl.config`): unknown fields are refused and every error names
the bad field. Counts take Python or NumPy integers but never ``bool`` or strings; switches take
``bool`` (or NumPy ``bool_``) only, so ``"yes"`` or ``1`` are refused rather than guessed.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

__all__ = ["StepTrainerConfig", "coerce_step_trainer_config", "is_count"]


def is_count(value: Any) -> bool:
    """Whether ``value`` is a Python or NumPy integer (``bool`` excluded)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _count(value: Any) -> Any:
    if is_count(value) and value >= 1:
        return int(value)
    raise ValueError("must be a positive int")


def _switch(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError("must be a bool")


def _optional_switch(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError("must be a bool or None")


def _text(value: Any) -> Any:
    if isinstance(value, str):
        return value
    raise ValueError('must be a str ("episode", an info key, or "" for nothing)')


_Count = Annotated[int, BeforeValidator(_count)]
_Switch = Annotated[bool, BeforeValidator(_switch)]


class StepTrainerConfig(BaseModel):
    """Settings of a :class:`~powerzoo.rl.step.trainer.StepTrainer`; keyword arguments or
    :meth:`from_dict`.

    Attributes:
        timesteps: planned number of calls per mode: size of the progress bars and, for training,
            the horizon of SB3's progress-remaining (learning-rate / clip-range schedules).
        headless: never call ``env.render()``.
        render_interval: render every this many steps (when not ``headless``).
        disable_progressbar: hide the tqdm bars; ``None`` hides them when stderr is not a terminal.
        close_environment_at_exit: close the env(s) at normal interpreter exit (``atexit``).
        environment_info: what is logged to the agent's logger: ``"episode"`` (episode return,
            length and summed constraint costs when an episode ends), another ``info`` key (its
            value at every step where present) or ``""`` (nothing). See
            :mod:`powerzoo.rl.step.trainer`.
        stochastic_evaluation: sample actions in :meth:`StepTrainer.eval` instead of taking the
            deterministic one.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    timesteps: _Count = 100_000
    headless: _Switch = False
    render_interval: _Count = 1
    disable_progressbar: Annotated[bool | None, BeforeValidator(_optional_switch)] = False
    close_environment_at_exit: _Switch = True
    environment_info: Annotated[str, BeforeValidator(_text)] = "episode"
    stochastic_evaluation: _Switch = False

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Names of the config fields.

        Returns:
            The field names, in declaration order.
        """
        return tuple(cls.model_fields)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepTrainerConfig:
        """Build a config from a mapping; unknown keys or bad values raise ``ValueError`` naming the
        field.

        Args:
            data: Config fields by name.

        Returns:
            The validated config.
        """
        if not isinstance(data, Mapping):
            raise ValueError(
                f"StepTrainerConfig.from_dict needs a mapping, got {type(data).__name__}"
            )
        names = cls.field_names()
        unknown = sorted(str(k) for k in data if k not in names)
        if unknown:
            raise ValueError(
                f"unknown StepTrainerConfig field(s) {', '.join(unknown)}; "
                f"valid fields: {', '.join(names)}"
            )
        try:
            return cls.model_validate(dict(data))
        except ValidationError as err:
            raise ValueError(_describe(err)) from None

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain dict (round-trips through :meth:`from_dict`).

        Returns:
            Field name to value.
        """
        return self.model_dump()


def _describe(err: ValidationError) -> str:
    """``StepTrainerConfig.<field> must be ..., got <value>`` for each bad field."""
    parts = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"])
        message = e["msg"].removeprefix("Value error, ")
        parts.append(f"StepTrainerConfig.{field} {message}, got {e['input']!r}")
    return "; ".join(parts)


def coerce_step_trainer_config(
    cfg: StepTrainerConfig | Mapping[str, Any] | None,
) -> StepTrainerConfig:
    """``cfg`` as a :class:`StepTrainerConfig`: ``None`` gives the defaults, a mapping is
    validated."""
    if cfg is None:
        return StepTrainerConfig()
    if isinstance(cfg, StepTrainerConfig):
        return cfg
    if isinstance(cfg, Mapping):
        return StepTrainerConfig.from_dict(cfg)
    raise ValueError(f"cfg must be a StepTrainerConfig, a dict or None, got {type(cfg).__name__}")
