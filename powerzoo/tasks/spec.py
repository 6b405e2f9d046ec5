"""Declarative description of a task: everything an adapter, a trainer or a reader needs to know.

A :class:`TaskSpec` is data only. The generic adapters in :mod:`powerzoo.envs` build spaces,
info keys, normalisation and CMDP costs from it, so they never need to know which task they
are running.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "ActionEntry",
    "padded_action",
    "VectorSpec",
    "AgentGroup",
    "TaskSpec",
    "PRICE_FLOOR",
    "PRICE_CAP",
    "cmdp_fields",
    "mode_spec_fields",
]

PRICE_FLOOR, PRICE_CAP = -1000.0, 10000.0  # $/MWh: space bounds, a wholesale floor and cap


@dataclasses.dataclass(frozen=True)
class VectorSpec:
    """A named real vector (observation or action) with bounds and units.

    ``low`` / ``high`` are the space bounds (may be infinite for unbounded quantities such as
    prices); ``nominal_low`` / ``nominal_high`` are finite typical ranges used to scale the
    vector to about [-1, 1] when ``normalize=True``. For actions both pairs coincide.
    """

    names: tuple[str, ...]
    units: tuple[str, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    nominal_low: tuple[float, ...] | None = None
    nominal_high: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        n = len(self.names)
        for field in ("units", "low", "high"):
            if len(getattr(self, field)) != n:
                raise ValueError(
                    f"VectorSpec.{field} has {len(getattr(self, field))} entries, names has {n}"
                )
        if self.nominal_low is None:
            object.__setattr__(self, "nominal_low", self.low)
        if self.nominal_high is None:
            object.__setattr__(self, "nominal_high", self.high)
        if not (np.all(np.isfinite(self.nominal_low)) and np.all(np.isfinite(self.nominal_high))):
            raise ValueError(f"nominal ranges of {self.names} must be finite")

    @classmethod
    def from_rows(cls, rows: tuple) -> VectorSpec:
        """A spec from rows ``(name, unit, low, high, nominal_low, nominal_high)``, one per
        entry.

        Args:
            rows: One ``(name, unit, low, high, nominal_low, nominal_high)`` tuple per entry.

        Returns:
            The vector spec.
        """
        names, units, low, high, nominal_low, nominal_high = zip(*rows, strict=True)
        return cls(
            names=names,
            units=units,
            low=low,
            high=high,
            nominal_low=nominal_low,
            nominal_high=nominal_high,
        )

    @property
    def dim(self) -> int:
        """Number of entries."""
        return len(self.names)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Space bounds as float32 arrays.

        Returns:
            Low and high bounds [dim], float32 (may be infinite).
        """
        return np.asarray(self.low, np.float32), np.asarray(self.high, np.float32)

    def nominal(self) -> tuple[np.ndarray, np.ndarray]:
        """Nominal (finite) range as float64 arrays.

        Returns:
            Nominal low and high [dim], float64.
        """
        return np.asarray(self.nominal_low, np.float64), np.asarray(self.nominal_high, np.float64)

    def optional_slot(self, *names: str) -> int | slice | None:
        """:meth:`slot` of ``names`` when all of them are in the vector, else ``None`` (a field
        block that only some observation modes have).

        Args:
            *names: Entry names.

        Returns:
            The slot, or ``None`` when a name is missing.
        """
        return self.slot(*names) if set(names) <= set(self.names) else None

    def slot(self, *names: str) -> int | slice:
        """Where ``names`` sit in the vector: an int for one name, else a slice (step allowed).

        Tasks compute their slots once from the spec and fill observations with them
        (``obs[:, self._soc] = ...``), so a field added to the spec moves every writer with it.
        Raises ``ValueError`` for an unknown name or names that are not evenly spaced in order.

        Args:
            *names: Entry names, evenly spaced in the vector.

        Returns:
            The index of one name, or a slice over several.
        """
        missing = [n for n in names if n not in self.names]
        if not names or missing:
            raise ValueError(
                f"unknown field(s) {missing or '(none given)'}; fields: {', '.join(self.names)}"
            )
        positions = [self.names.index(n) for n in names]
        if len(positions) == 1:
            return positions[0]
        step = positions[1] - positions[0]
        if step < 1 or any(b - a != step for a, b in zip(positions, positions[1:], strict=False)):
            raise ValueError(
                f"fields {list(names)} are not evenly spaced in order (positions {positions})"
            )
        return slice(positions[0], positions[-1] + 1, None if step == 1 else step)

    def describe(self) -> list[dict[str, Any]]:
        """One row per entry: its name, unit and bounds.

        Returns:
            Dicts with keys ``name``, ``unit``, ``low``, ``high``.
        """
        return [
            {"name": n, "unit": u, "low": lo, "high": hi}
            for n, u, lo, hi in zip(self.names, self.units, self.low, self.high, strict=True)
        ]


DEFAULT_GAMMA = 0.99
"""Discount factor of tasks with short episodes (a day of 48 half-hour steps)."""
LONG_HORIZON_STEPS = 168
"""Episodes of at least this many steps (a week of hours, a day of 5-minute steps) discount with
:data:`LONG_HORIZON_GAMMA`."""
LONG_HORIZON_GAMMA = 0.999


@dataclasses.dataclass(frozen=True)
class AgentGroup:
    """Agents of one kind (batteries, PV inverters, ...): their actions mean the same thing.

    A trainer can build one network per group. Every agent of a task belongs to exactly one
    group; a homogeneous task is the one-group case (:attr:`TaskSpec.groups`).
    """

    name: str
    agents: tuple[str, ...]
    description: str = ""


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """Static description of a task: its agents, spaces, reward, costs, horizon and splits.

    Costs are non-negative and in physical units, in the fixed order ``constraint_names``.
    ``selected_constraints`` define the task's CMDP, with per-episode budgets in
    ``cost_thresholds`` (same units, summed over an episode).
    """

    task_id: str
    description: str
    agents: tuple[str, ...]
    observation: VectorSpec
    action: VectorSpec
    horizon: int
    step_minutes: int
    splits: tuple[str, ...]
    reward_terms: tuple[str, ...]
    reward_doc: str
    constraint_names: tuple[str, ...]
    constraint_units: tuple[str, ...]
    selected_constraints: tuple[str, ...]
    cost_thresholds: dict[str, float]
    baselines: tuple[str, ...]
    forecast_series: tuple[str, ...] = ()
    reward_presets: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    obs_modes: tuple[str, ...] = ()
    # multi-agent tasks: per-agent observation layout of each mode; ``observation`` is the
    # default mode's layout and ``action`` the joint action (agent-major, equal dims per agent)
    obs_mode_specs: dict[str, VectorSpec] = dataclasses.field(default_factory=dict)
    default_obs_mode: str | None = None
    shared_reward: bool = True
    termination_doc: str = "never terminates early; episodes are truncated at the horizon"
    # the discount factor every trainer and adapter uses unless a run sets its own; ``None``:
    # LONG_HORIZON_GAMMA for episodes of at least LONG_HORIZON_STEPS steps (a day-end reward
    # 168-336 steps away keeps about 70-85 % of its weight), else DEFAULT_GAMMA
    gamma: float | None = None
    gym_id: str | None = None
    # heterogeneous multi-agent tasks: agents of each kind (empty: one group with every agent).
    # Every agent's observation has the same length in each mode (kinds fill the fields that
    # apply to them); actions have the same length per agent, with per-agent bounds and names.
    agent_groups: tuple[AgentGroup, ...] = ()
    # the physical joint action of an operator who does nothing, for tasks where "no control" is
    # a policy worth comparing against (storage at zero power, loads served as they come,
    # chargers charging on plug-in); such a task lists "idle" in ``baselines`` and says in
    # ``idle_doc`` what the action means. ``None``: no such action (a dispatch task must set
    # its generators; there is no "nothing" to do).
    idle_action: tuple[float, ...] | None = None
    idle_doc: str = ""
    # what one unit of the reward is: "$" where the reward is money; a reward that weighs other
    # quantities (energy, carbon) names its own unit, explained in ``reward_doc``
    reward_unit: str = "$"

    def __post_init__(self) -> None:
        if self.gamma is None:
            long = self.horizon >= LONG_HORIZON_STEPS
            object.__setattr__(self, "gamma", LONG_HORIZON_GAMMA if long else DEFAULT_GAMMA)
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"{self.task_id}: gamma must be in (0, 1], got {self.gamma}")
        unknown = set(self.selected_constraints) - set(self.constraint_names)
        if unknown:
            raise ValueError(
                f"{self.task_id}: selected constraints {sorted(unknown)} not in constraint_names"
            )
        if set(self.cost_thresholds) != set(self.selected_constraints):
            raise ValueError(
                f"{self.task_id}: cost_thresholds must cover exactly the selected constraints"
            )
        if len(self.constraint_units) != len(self.constraint_names):
            raise ValueError(f"{self.task_id}: one unit per constraint needed")
        if self.action.dim % len(self.agents):
            raise ValueError(
                f"{self.task_id}: joint action dim {self.action.dim} not divisible by the agent "
                "count"
            )
        grouped = [a for group in self.agent_groups for a in group.agents]
        if self.agent_groups and sorted(grouped) != sorted(self.agents):
            raise ValueError(
                f"{self.task_id}: agent_groups must list every agent exactly once, got {grouped}"
            )
        self._check_idle_action()

    def _check_idle_action(self) -> None:
        """``idle_action``, ``idle_doc`` and the ``"idle"`` baseline come together; the action
        has one entry per joint action entry, within its bounds."""
        listed = "idle" in self.baselines
        if self.idle_action is None:
            if listed or self.idle_doc:
                raise ValueError(
                    f"{self.task_id}: an 'idle' baseline or idle_doc needs an idle_action"
                )
            return
        if not listed or not self.idle_doc:
            raise ValueError(
                f"{self.task_id}: a task with an idle_action lists 'idle' in baselines and "
                "says what the action means in idle_doc"
            )
        idle = np.asarray(self.idle_action, dtype=np.float64)
        low = np.asarray(self.action.low, dtype=np.float64)
        high = np.asarray(self.action.high, dtype=np.float64)
        if idle.shape != (self.action.dim,):
            raise ValueError(
                f"{self.task_id}: idle_action has {idle.size} entries, the joint action "
                f"{self.action.dim}"
            )
        if not np.all((idle >= low) & (idle <= high)):
            raise ValueError(f"{self.task_id}: idle_action is outside the action bounds")

    @property
    def agent_mode(self) -> str:
        """``"single"`` for a one-agent task, else ``"multi"``."""
        return "single" if len(self.agents) == 1 else "multi"

    @property
    def groups(self) -> tuple[AgentGroup, ...]:
        """The agent groups (one group named ``"agents"`` for a homogeneous task)."""
        return self.agent_groups or (AgentGroup("agents", self.agents),)

    def group_of(self, agent: str) -> str:
        """Name of the group ``agent`` belongs to.

        Args:
            agent: An agent name of :attr:`agents`.

        Returns:
            The group's name.
        """
        for group in self.groups:
            if agent in group.agents:
                return group.name
        raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(self.agents)}")

    def agent_action_names(self, agent: str) -> tuple[str, ...]:
        """Names of ``agent``'s action entries (its slice of the agent-major joint action).

        Args:
            agent: An agent name of :attr:`agents`.

        Returns:
            The names of its action entries.
        """
        i, d = self.agents.index(agent), self.agent_action_dim
        return self.action.names[i * d : (i + 1) * d]

    @property
    def agent_action_dim(self) -> int:
        """Action entries per agent (the joint action is agent-major)."""
        return self.action.dim // len(self.agents)

    def observation_spec(self, obs_mode: str | None = None) -> VectorSpec:
        """Per-agent observation layout of ``obs_mode`` (default mode when ``None``).

        Args:
            obs_mode: An observation mode of :attr:`obs_modes`, or ``None``.

        Returns:
            The per-agent observation layout.
        """
        if obs_mode is None or obs_mode == self.default_obs_mode or not self.obs_mode_specs:
            if obs_mode is not None and obs_mode not in self.obs_modes:
                raise ValueError(self._bad_mode(obs_mode))
            return self.observation
        if obs_mode not in self.obs_mode_specs:
            raise ValueError(self._bad_mode(obs_mode))
        return self.obs_mode_specs[obs_mode]

    def _bad_mode(self, obs_mode: str) -> str:
        return (
            f"unknown obs_mode {obs_mode!r} for {self.task_id}; valid: "
            f"{', '.join(self.obs_modes) or 'none'}"
        )

    @property
    def dt_h(self) -> float:
        """Step length in hours."""
        return self.step_minutes / 60.0

    @functools.cached_property
    def selected_index(self) -> np.ndarray:
        """Positions of the selected constraints inside ``constraint_names``."""
        return np.asarray(
            [self.constraint_names.index(n) for n in self.selected_constraints], np.int64
        )


ActionEntry = tuple[str, str, float, float]
"""One action entry: ``(name, unit, low, high)``."""


def padded_action(entries_by_agent: dict[str, list[ActionEntry]], slots: int) -> VectorSpec:
    """The joint action of agents with up to ``slots`` entries each (agents of different sizes,
    e.g. control areas of different unit counts): each agent's entries, then unused entries
    ``<agent>.unused_<k>`` (unit ``-``, bounds [0, 1], ignored by the task) up to ``slots``.
    Agent-major, in the mapping's order.

    Args:
        entries_by_agent: Each agent's action entries, in agent order.
        slots: Entries per agent after padding (at least the largest agent's count).

    Returns:
        The joint action spec.
    """
    names, units, low, high = [], [], [], []
    for agent, entries in entries_by_agent.items():
        if len(entries) > slots:
            raise ValueError(f"{agent} has {len(entries)} action entries, more than {slots}")
        for name, unit, lo, hi in entries:
            names.append(name)
            units.append(unit)
            low.append(float(lo))
            high.append(float(hi))
        for k in range(len(entries), slots):
            names.append(f"{agent}.unused_{k}")
            units.append("-")
            low.append(0.0)
            high.append(1.0)
    return VectorSpec(tuple(names), tuple(units), tuple(low), tuple(high))


def cmdp_fields(
    costs: Sequence[tuple[str, str, float, float | None]], objective: str = "objective"
) -> dict[str, Any]:
    """The cost keywords of a :class:`TaskSpec` whose every cost is a selected constraint.

    ``costs`` holds one row ``(name, unit, threshold, penalty)`` per cost, in the order of the
    step's cost vector: ``threshold`` is the per-episode budget (the cost's unit summed over an
    episode), ``penalty`` the weight of the cost in the ``"penalized"`` reward preset ($ per unit
    of the cost; ``None``: not in that preset). The other preset, named ``objective``, is the
    task's reward as it is.

    Args:
        costs: One ``(name, unit, threshold, penalty)`` row per cost.
        objective: Name of the reward preset that is the task's own reward.

    Returns:
        Keyword arguments of :class:`TaskSpec` (costs, thresholds, reward presets).
    """
    names = tuple(row[0] for row in costs)
    return {
        "constraint_names": names,
        "constraint_units": tuple(row[1] for row in costs),
        "selected_constraints": names,
        "cost_thresholds": {name: threshold for name, _, threshold, _ in costs},
        "reward_presets": {
            objective: {},
            "penalized": {name: weight for name, _, _, weight in costs if weight is not None},
        },
    }


def mode_spec_fields(fields_by_mode: dict[str, tuple], default: str) -> dict[str, Any]:
    """The observation keywords of a :class:`TaskSpec` with several per-agent observation modes.

    ``fields_by_mode`` maps each mode, in order, to its rows ``(name, unit, low, high,
    nominal_low, nominal_high)`` (:meth:`VectorSpec.from_rows`); ``default`` is the mode that
    ``observation`` holds.

    Args:
        fields_by_mode: Each mode's observation rows, in mode order.
        default: The default mode (a key of ``fields_by_mode``).

    Returns:
        Keyword arguments of :class:`TaskSpec` (observation and its modes).
    """
    modes = {mode: VectorSpec.from_rows(rows) for mode, rows in fields_by_mode.items()}
    return {
        "observation": modes[default],
        "obs_modes": tuple(modes),
        "obs_mode_specs": modes,
        "default_obs_mode": default,
    }
