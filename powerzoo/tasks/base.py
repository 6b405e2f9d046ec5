"""The batched task contract.

A task is parameters (fixed at construction: ratings, profiles, the split's start days) plus
three functions over a leading batch dimension ``B``:

* ``reset(rng, day_id[B]) -> state``: start episodes on days ``day_id`` of the split;
* ``observe(state) -> obs[B, obs_dim]`` in physical units (``spec.observation`` order);
* ``step(state, action[B, act_dim], rng) -> (state, StepOutput)`` with a physical action
  already inside the action bounds.

State is a small dataclass of arrays with leading axis ``B`` (no per-env objects), so the
adapters can batch, slice and merge it generically. Tasks never see Gymnasium or PettingZoo.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.markets import DEFAULT_MARKET
from powerzoo.data.profiles import Profiles, get_profiles
from powerzoo.tasks.spec import TaskSpec

__all__ = [
    "Task",
    "NoParams",
    "StepOutput",
    "merge_state",
    "state_rows",
    "concat_states",
    "concat_outputs",
    "task_keywords",
]


@dataclasses.dataclass(frozen=True)
class NoParams:
    """The parameters of a task that has none to set."""


def task_keywords(params_class: type) -> tuple[str, ...]:
    """The task keywords a parameters class accepts.

    Its ``KEYWORDS`` class attribute when it names them itself (a class whose keywords reach into
    nested device parameters), else the names of its dataclass fields.

    Args:
        params_class: A task's parameters class (:attr:`Task.Params`).

    Returns:
        The keyword names, in declaration order.
    """
    named = getattr(params_class, "KEYWORDS", None)
    if named is not None:
        return tuple(named)
    return tuple(f.name for f in dataclasses.fields(params_class) if f.init)


@dataclasses.dataclass
class StepOutput:
    """What a task step returns besides the new state; arrays have leading axis ``B``."""

    reward: np.ndarray  # [B] the objective, weighted sum of reward_terms
    reward_terms: np.ndarray  # [B, n_terms] in spec.reward_terms order
    constraint_costs: np.ndarray  # [B, n_constraints] >= 0, spec.constraint_names order
    terminated: np.ndarray  # [B] bool, real terminal events only
    action_applied: np.ndarray  # [B, act_dim] physical action after the physics' own limits
    info: dict[str, np.ndarray]  # task-specific per-step quantities, each [B] or [B, k]


def merge_state(state: Any, mask: np.ndarray, fresh: Any) -> Any:
    """Return ``state`` with rows where ``mask`` is true taken from ``fresh`` (same batch size).

    Args:
        state: Batched state dataclass (arrays with a leading batch axis B).
        mask: Boolean rows [B] to replace.
        fresh: State of the same type and batch size to take those rows from.

    Returns:
        A new state of the same type.
    """
    values = {}
    for field in dataclasses.fields(state):
        old, new = getattr(state, field.name), getattr(fresh, field.name)
        m = mask.reshape((-1,) + (1,) * (old.ndim - 1))
        values[field.name] = np.where(m, new, old)
    return type(state)(**values)


def state_rows(state: Any, rows: slice) -> Any:
    """The rows ``rows`` of a batched state (views of its arrays).

    Args:
        state: Batched state dataclass.
        rows: The rows to keep.

    Returns:
        A state of the same type whose arrays are views.
    """
    return type(state)(**{f.name: getattr(state, f.name)[rows] for f in dataclasses.fields(state)})


def concat_states(parts: list[Any]) -> Any:
    """One state from the states of consecutive row blocks (in order).

    Args:
        parts: States of consecutive row blocks, in order.

    Returns:
        A state of the same type holding every row.
    """
    return type(parts[0])(
        **{
            f.name: np.concatenate([getattr(part, f.name) for part in parts])
            for f in dataclasses.fields(parts[0])
        }
    )


def concat_outputs(parts: list[StepOutput]) -> StepOutput:
    """One :class:`StepOutput` from those of consecutive row blocks (in order).

    Args:
        parts: Step outputs of consecutive row blocks, in order.

    Returns:
        The step output of every row.
    """
    return StepOutput(
        **{
            f.name: np.concatenate([getattr(part, f.name) for part in parts])
            for f in dataclasses.fields(StepOutput)
            if f.name != "info"
        },
        info={key: np.concatenate([part.info[key] for part in parts]) for key in parts[0].info},
    )


class Task(abc.ABC):
    """Base class of every task: holds the spec, the split's profiles and start days.

    Subclasses implement :meth:`make_spec` (a classmethod, so the registry can describe a task
    without building it) and the batched model methods below.

    Args:
        spec: The task's spec (from :meth:`make_spec`).
        split: Date split the episodes start from (``"train"``, ``"val"``, ``"test"`` or one of
            the spec's stress splits).
    """

    task_id: ClassVar[str]

    Params: ClassVar[type] = NoParams
    """The task's frozen parameters dataclass; the task keywords of :func:`make_task` and
    :meth:`make_spec` are its fields (or its ``KEYWORDS``), each defaulting to the published
    setting. Values are checked by the class itself (``__post_init__`` or ``from_keywords``).
    A ``market`` field (a task that reads ``price_per_mwh``) picks the price model of
    :attr:`profiles` (:mod:`powerzoo.data.markets`), when the subclass sets :attr:`params` before
    calling ``Task.__init__``."""

    step_block_rows: int | None = None
    """Rows per ``step`` (and ``reset``) call in the batched runner: larger batches are stepped and
    reset in blocks of this many rows (states and outputs concatenated), so a wide step's work
    arrays stay in the CPU caches. ``None``: the whole batch in one call. Only for tasks whose
    step and reset draw no random numbers (the blocks would change the order of the draws) and
    treat rows independently."""

    def __init__(self, spec: TaskSpec, split: str = "train") -> None:
        self.spec = spec
        calendar.check_split(split, spec.splits)
        self.split = split
        market = getattr(getattr(self, "params", None), "market", DEFAULT_MARKET)
        self.profiles: Profiles = get_profiles(
            calendar.scenario_of_split(split), self.spec.step_minutes, market
        )
        try:
            self.split_days: np.ndarray = calendar.split_day_indices(split, self.episode_days)
        except ValueError as exc:
            raise ValueError(f"{spec.task_id}, split {split!r}: {exc}") from None

    @property
    def episode_days(self) -> int:
        """Calendar days an episode spans: ``ceil(horizon * step_minutes / 1440)``."""
        return -(-self.spec.horizon * self.spec.step_minutes // (24 * 60))

    @classmethod
    def make_spec(cls, **task_kwargs: Any) -> TaskSpec:
        """The task's spec for the given task keywords (defaults when none are given).

        Args:
            **task_kwargs: Task parameters (fields of :attr:`Params`).

        Returns:
            The task's spec.
        """
        return cls.spec_for(cls.make_params(**task_kwargs))

    @classmethod
    @abc.abstractmethod
    def spec_for(cls, params: Any) -> TaskSpec:
        """The task's spec for parameters ``params`` (an instance of :attr:`Params`).

        Args:
            params: An instance of :attr:`Params`.

        Returns:
            The task's spec.
        """

    @classmethod
    def make_params(cls, **task_kwargs: Any) -> Any:
        """The task's :attr:`Params` with ``task_kwargs`` in place of the defaults.

        An unknown keyword raises ``TypeError`` naming it and listing the valid ones. A parameters
        class with a ``from_keywords`` classmethod builds itself from the keywords (to map them
        onto nested fields); any other is called with them.

        Args:
            **task_kwargs: Task parameters (fields of :attr:`Params`).

        Returns:
            An instance of :attr:`Params`.
        """
        valid = task_keywords(cls.Params)
        unknown = sorted(set(task_kwargs) - set(valid))
        if unknown:
            name = getattr(cls, "task_id", cls.__name__)
            raise TypeError(
                f"{name} got unknown parameter(s) {unknown}; valid: "
                + (", ".join(valid) if valid else f"none, {name} takes no task parameters")
            )
        build = getattr(cls.Params, "from_keywords", cls.Params)
        return build(**task_kwargs)

    # ---- split handling -------------------------------------------------------------------
    @property
    def n_days(self) -> int:
        """Number of days an episode of this split can start on (whole episode and its buffer day
        inside the split, see :func:`powerzoo.data.calendar.split_day_indices`)."""
        return int(self.split_days.size)

    def check_day_id(self, day_id: np.ndarray) -> np.ndarray:
        """Validate day indices within the split; raise ``ValueError`` when out of range.

        Args:
            day_id: Split day indices [B].

        Returns:
            The indices as int64 [B].
        """
        day_id = np.asarray(day_id)
        if day_id.dtype.kind not in "iu":
            raise ValueError(f"day_id must be an integer, got {day_id!r}")
        if np.any(day_id < 0) or np.any(day_id >= self.n_days):
            raise ValueError(
                f"day_id {day_id.tolist()} out of range for split '{self.split}' of "
                f"{self.spec.task_id}: valid 0..{self.n_days - 1}"
            )
        return day_id.astype(np.int64)

    def calendar_day(self, day_id: np.ndarray) -> np.ndarray:
        """Day-of-year index of split day ``day_id``.

        Args:
            day_id: Split day indices [B].

        Returns:
            Day-of-year indices [B] into the year of profiles.
        """
        return self.split_days[day_id]

    # ---- the batched model ----------------------------------------------------------------
    @abc.abstractmethod
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> Any:
        """Initial state for episodes starting on split days ``day_id`` [B].

        Args:
            rng: The batch's random generator.
            day_id: Split day index of each episode [B].

        Returns:
            The task's batched state dataclass.
        """

    @abc.abstractmethod
    def observe(self, state: Any) -> np.ndarray:
        """Observation [B, obs_dim] in physical units.

        Args:
            state: The task's batched state.

        Returns:
            Observations [B, obs_dim] in the units of the observation fields.
        """

    @abc.abstractmethod
    def step(
        self, state: Any, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[Any, StepOutput]:
        """Advance one step under physical actions [B, act_dim] within bounds.

        Args:
            state: The task's batched state.
            action: Physical actions [B, act_dim], within the action bounds.
            rng: The batch's random generator.

        Returns:
            The next state and the step's :class:`StepOutput` (reward in $, costs, info).
        """

    def time_index(self, state: Any) -> np.ndarray:
        """Steps elapsed in the episode [B] (the adapters truncate at ``spec.horizon``).

        Default: the state's ``t`` field; override if a task's state names it otherwise.

        Args:
            state: The task's batched state.

        Returns:
            Steps elapsed [B], int.
        """
        return state.t

    def episode_day(self, state: Any) -> np.ndarray:
        """Split day index [B] each episode started on (default: the state's ``day_id`` field).

        Args:
            state: The task's batched state.

        Returns:
            Split day indices [B], int.
        """
        return state.day_id

    # ---- observation modes ----------------------------------------------------------------
    def build_obs_slots(self, slots_of: Callable[[Any], Any]) -> None:
        """:attr:`obs_slots`: ``slots_of`` (a ``VectorSpec -> slots`` function) of every
        observation mode's layout, worked out once.

        Args:
            slots_of: Maps a ``VectorSpec`` to its slots.
        """
        self.obs_slots = {
            mode: slots_of(self.spec.observation_spec(mode)) for mode in self.spec.obs_modes
        }

    def slots_of_mode(self, obs_mode: str | None) -> Any:
        """The :attr:`obs_slots` of ``obs_mode`` (``None``: the default mode); ``ValueError``
        naming the valid modes for an unknown one.

        Args:
            obs_mode: Observation mode name, or ``None`` for the spec's default.

        Returns:
            The slots ``slots_of`` made for that mode's layout.
        """
        mode = obs_mode or self.spec.default_obs_mode
        try:
            return self.obs_slots[mode]
        except KeyError:
            raise ValueError(
                f"unknown obs_mode {mode!r} for {self.spec.task_id}; "
                f"valid: {', '.join(self.obs_slots)}"
            ) from None

    # ---- exogenous look-ahead (forecast wrapper) ------------------------------------------
    def forecast(self, state: Any, horizon: int) -> np.ndarray:
        """Next ``horizon`` values of each ``spec.forecast_series`` [B, n_series * horizon].

        Perfect forecasts of the exogenous series for steps ``t+1 .. t+horizon`` (series-major).

        Args:
            state: The task's batched state.
            horizon: Steps ahead.

        Returns:
            Forecast values [B, n_series * horizon] in each series' units.
        """
        day = self.calendar_day(self.episode_day(state))
        t = self.time_index(state) + 1
        parts = [self.profiles.window(name, day, t, horizon) for name in self.spec.forecast_series]
        return np.concatenate(parts, axis=1) if parts else np.zeros((day.size, 0))

    def forecast_range(self, horizon: int, nominal: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Bounds (or nominal range) of each forecast entry, from the matching observation field.

        Args:
            horizon: Steps ahead.
            nominal: Give the nominal range (for normalisation) instead of the hard bounds.

        Returns:
            Low and high arrays [n_series * horizon].
        """
        lo, hi = self.spec.observation.nominal() if nominal else self.spec.observation.bounds()
        idx = [self.spec.observation.names.index(n) for n in self.spec.forecast_series]
        return np.repeat(lo[idx], horizon), np.repeat(hi[idx], horizon)

    # ---- baselines (optional) -------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Physical action [B, act_dim] of the task's rule-based controller from observations.

        Args:
            obs: Observations [B, obs_dim] in physical units.

        Returns:
            Physical actions [B, act_dim].
        """
        raise NotImplementedError(f"{self.spec.task_id} defines no rule-based policy")

    def idle_action(self, obs: np.ndarray) -> np.ndarray:
        """Physical action [B, act_dim] of an operator who does nothing (``spec.idle_action``,
        described in ``spec.idle_doc``), the same on every step.

        Args:
            obs: Observations [B, obs_dim] in physical units (only their batch size is read).

        Returns:
            Physical actions [B, act_dim].
        """
        idle = self.spec.idle_action
        if idle is None:
            raise NotImplementedError(f"{self.spec.task_id} defines no idle (no-control) action")
        return np.tile(np.asarray(idle, dtype=np.float64), (np.shape(obs)[0], 1))

    def oracle_plan(self, state: Any) -> np.ndarray:
        """Perfect-foresight physical actions [B, horizon, act_dim] from an initial state.

        Args:
            state: The task's batched state at reset.

        Returns:
            Physical actions [B, horizon, act_dim].
        """
        raise NotImplementedError(f"{self.spec.task_id} defines no oracle")
