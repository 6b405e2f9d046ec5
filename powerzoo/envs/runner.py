"""The engine under every adapter: one task, a batch of ``B`` episodes, explicit RNG.

The Gymnasium env is this runner with ``B = 1`` and the native vector env is it with ``B = N``,
so action checking, truncation, autoreset bookkeeping and the CMDP info keys exist once. The
action rule (:func:`conform_action`) and the reset options (:func:`reset_options`) are the ones
every adapter applies, the multi-agent ones included.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.scratch import keep_freed_memory, row_blocks
from powerzoo.tasks.base import (
    StepOutput,
    Task,
    concat_outputs,
    concat_states,
    merge_state,
    state_rows,
)
from powerzoo.tasks.spec import TaskSpec

__all__ = [
    "TaskRunner",
    "CostLayout",
    "cost_info",
    "conform_action",
    "squeezed_shape",
    "short_repr",
    "few_names",
    "non_finite_entry",
    "reset_options",
    "start_day_option",
]

RESET_OPTIONS = ("day_id",)
PETTINGZOO_PROBE = "options"  # the reset option PettingZoo's API tests pass (dropped)
_NUMBER_KINDS = "fiu"  # numpy dtype kinds accepted in actions: float, signed and unsigned int
_KIND_NAMES = {"b": "bool", "c": "complex", "U": "str", "S": "bytes", "O": "object"}


_add_reduce = np.add.reduce  # ndarray.sum / np.any without their Python-level wrappers
_or_reduce = np.logical_or.reduce
_minimum, _maximum = np.minimum, np.maximum
_TUNE_ALLOCATOR_FROM = 64  # batch size from which the runner asks glibc to keep freed memory
_ZERO = np.zeros(())  # 0-d: numpy converts a Python float operand on every call


class CostLayout:
    """What :func:`cost_info` needs from a spec, worked out once per runner (not once per step).

    ``info(costs)`` builds the CMDP info keys (``constraint_costs``, ``cost_sum``, the selected
    constraints' costs and sum, ``is_safe``, one ``cost_<name>`` per constraint) from a cost
    array [B, n_constraints]; it is the only place they are built.
    """

    def __init__(self, spec: TaskSpec) -> None:
        self.selected_names = spec.selected_constraints
        self.selected_index = spec.selected_index
        # the usual case: every constraint selected, in order (no gather, the sums coincide)
        self.select_all = bool(
            np.array_equal(self.selected_index, np.arange(len(spec.constraint_names)))
        )
        self.cost_keys = tuple(f"cost_{name}" for name in spec.constraint_names)

    def info(self, costs: np.ndarray) -> dict[str, Any]:
        """The CMDP info keys of one step, every value [B] or [B, k]."""
        cost_sum = _add_reduce(costs, axis=1)
        if self.select_all:
            selected, selected_sum = costs.copy(), cost_sum.copy()
        else:
            selected = costs.take(self.selected_index, axis=1)
            selected_sum = _add_reduce(selected, axis=1)
        return {
            "constraint_costs": costs,
            "cost_sum": cost_sum,
            "selected_constraint_costs": selected,
            "selected_cost_sum": selected_sum,
            "is_safe": ~_or_reduce(costs > _ZERO, axis=1),
            **dict(
                zip(self.cost_keys, costs.T, strict=True)
            ),  # column i of costs (views) as cost_<name i>
        }


def cost_info(task: Task, costs: np.ndarray) -> dict[str, Any]:
    """CMDP info keys from a cost array [B, n_constraints] (see :class:`CostLayout`)."""
    return CostLayout(task.spec).info(costs)


def reset_options(options: Any, valid: tuple[str, ...] = RESET_OPTIONS) -> dict[str, Any]:
    """A copy of ``reset``'s ``options`` after checking them: a dict (or ``None``) of known keys.

    Anything but a dict raises ``TypeError``; a key outside ``valid`` raises ``ValueError``
    listing the valid keys (a misspelt ``"dayid"`` would otherwise start a random day). The one
    exception is the key ``"options"``, which is dropped: PettingZoo's API tests
    (``parallel_api_test``, ``api_test``) call ``reset(options={"options": 1})`` only to check
    that ``reset`` takes options.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(
            f"reset options must be a dict such as {{'day_id': 3}} (valid keys: "
            f"{', '.join(valid)}), got {type(options).__name__} {options!r}"
        )
    options = {key: value for key, value in options.items() if key != PETTINGZOO_PROBE}
    unknown = [key for key in options if key not in valid]
    if unknown:
        raise ValueError(
            f"unknown reset option(s) {sorted(map(str, unknown))}; valid: {', '.join(valid)}"
        )
    return options


def start_day_option(options: Any, day_id: Any = None) -> Any:
    """The start day asked for by ``reset(options={"day_id": k})`` or the ``day_id=k`` shortcut.

    ``options`` is checked by :func:`reset_options` (not a dict, or an unknown key, raises).
    """
    options = reset_options(options)
    if day_id is not None:
        options["day_id"] = day_id
    return options.get("day_id")


def few_names(names: Any, shown: int = 3) -> str:
    """``a, b, c`` for a one-line message, cut to the first ``shown`` and a count when there are
    more (``a, b, c, ... 510 in all``): a large case has thousands of entries or agents."""
    names = [str(n) for n in names]
    if len(names) > shown:
        return f"{', '.join(names[:shown])}, ... {len(names)} in all"
    return ", ".join(names)


def _fields(names: tuple[str, ...]) -> str:
    """The action's entry names as `` (a, b, c)`` for a message (empty without names; the first
    three and a count when there are more)."""
    return f" ({few_names(names)})" if names else ""


def short_repr(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters (and its length said) for a one-line
    message: a batch of actions printed whole runs to megabytes."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def non_finite_entry(what: str, values: np.ndarray, names: tuple[str, ...] = ()) -> str:
    """One short line on the NaN / inf entries of ``values``: the first one's index, its entry
    name (``names`` index the last axis) and value, and how many there are; no array dump."""
    bad = np.argwhere(~np.isfinite(values))
    first = tuple(int(i) for i in bad[0]) if bad.size else ()
    name = f" ({names[first[-1]]})" if first and first[-1] < len(names) else ""
    value = values[first] if first else values
    return (
        f"{what}[{', '.join(map(str, first))}]{name} is {value} in physical units "
        f"({len(bad)} of {values.size} entries are NaN or inf)"
    )


@functools.lru_cache(maxsize=256)
def squeezed_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with its axes of length 1 dropped (cached: an env meets few shapes)."""
    return tuple(n for n in shape if n != 1)


def conform_action(
    action: Any,
    shape: tuple[int, ...],
    what: str,
    names: tuple[str, ...] = (),
) -> np.ndarray:
    """``action`` as a float64 array of ``shape``, by the one rule every adapter applies.

    * numbers only: float or int entries (any width); ``None``, bool, complex, string, object
      and ragged actions raise ``ValueError`` (a bool or a string would otherwise be read as
      0/1 or parsed as a number);
    * the shape must be ``shape`` once every axis of length 1 is dropped from both: ``[1, d]``,
      ``[d, 1]`` and ``[1, d, 1]`` stand for ``[d]``, a scalar for ``[1]``, and ``[N]`` for
      ``[N, 1]``; anything else (``[2, 2]`` for ``[4]``, ``[d, N]`` for ``[N, d]``) raises
      ``ValueError``. Dropping or adding axes of length 1 never reorders the entries.

    ``what`` names the action in messages (``"battery_arbitrage: action"``); ``names`` lists its
    entries.
    """
    if action is None:
        raise ValueError(f"{what} is None; expected numbers of shape {shape}{_fields(names)}")
    if type(action) is np.ndarray:
        array = action
    else:
        try:
            array = np.asarray(action)
        except (TypeError, ValueError) as err:  # ragged nested lists
            raise ValueError(
                f"{what} must be an array of numbers of shape {shape}{_fields(names)}, "
                f"got {short_repr(action)}"
            ) from err
    kind = array.dtype.kind
    if kind not in _NUMBER_KINDS:
        shown = repr(action) if array.size <= 12 else f"of shape {array.shape}"
        raise ValueError(
            f"{what} must be numeric (float or int), got {_KIND_NAMES.get(kind, array.dtype)} "
            f"values {shown}; expected numbers of shape {shape}{_fields(names)}"
        )
    if array.shape != shape:
        if squeezed_shape(array.shape) != squeezed_shape(shape):
            raise ValueError(
                f"{what} has shape {array.shape}, expected {shape}{_fields(names)} "
                "(axes of length 1 may be added or dropped, nothing else)"
            )
        array = array.reshape(shape)
    return array.astype(np.float64, copy=False)


class TaskRunner:
    """Batched episodes of one task: reset, checked step, truncation, partial reset."""

    def __init__(self, task: Task, num_envs: int = 1) -> None:
        if (
            isinstance(num_envs, bool)
            or not isinstance(num_envs, (int, np.integer))
            or num_envs < 1
        ):
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        self.task = task
        self.spec = task.spec
        self.num_envs = int(num_envs)
        if self.num_envs >= _TUNE_ALLOCATOR_FROM:
            # large batches: reuse freed temporaries instead of faulting pages back in
            keep_freed_memory()
        self.act_low, self.act_high = (a.astype(np.float64) for a in task.spec.action.bounds())
        # the bounds as [1, act_dim] rows: the same shape as a single env's action (a broadcast
        # costs numpy about twice an element-wise call on equal shapes)
        self._low_row, self._high_row = self.act_low[None], self.act_high[None]
        self._horizon = np.array(
            self.spec.horizon
        )  # 0-d: numpy converts a Python int operand on every call
        self.rng = np.random.default_rng()
        self.state: Any = None
        self.cost_layout = CostLayout(task.spec)
        self._blocks_for: int | None = None  # the block size self._blocks was worked out for
        self._blocks: list[slice] | None = None
        self._layout: dict[str, tuple[tuple[int, ...], np.dtype]] | None = None
        self._action_shape = (self.num_envs, self.spec.action.dim)
        self._what = f"{self.spec.task_id}: action"
        # the action shape a user sends: [act_dim] to a single env, [B, act_dim] to a batch
        self._user_shape = self._action_shape[1:] if self.num_envs == 1 else self._action_shape

    # ---- seeding and reset ------------------------------------------------------------------
    def seed(self, seed: int | None) -> None:
        """Re-seed the runner's generator (``None``: fresh OS entropy)."""
        self.rng = np.random.default_rng(seed)

    def _day_ids(self, n: int, day_id: Any) -> np.ndarray:
        if day_id is None:
            return self.rng.integers(0, self.task.n_days, size=n)
        day_id = np.asarray(day_id)
        if day_id.ndim == 0:
            day_id = np.full(n, day_id)
        if day_id.shape != (n,):
            raise ValueError(
                f"day_id must be an int or an array of {n} ints, got shape {day_id.shape}"
            )
        return self.task.check_day_id(day_id)

    def reset(self, day_id: Any = None) -> np.ndarray:
        """Start all ``B`` episodes (on ``day_id`` if given, else on days drawn from the split)."""
        self.state = self._task_reset(self._day_ids(self.num_envs, day_id))
        return self.task.observe(self.state)

    def reset_done(self, done: np.ndarray, day_id: Any = None) -> None:
        """Restart the episodes flagged in ``done`` [B] (autoreset, or a masked reset).

        Start days are ``day_id`` (an int or [B] ints) or drawn for every row, so the RNG stream
        does not depend on which rows ended; the fresh state is kept only where ``done``.
        """
        fresh = self._task_reset(self._day_ids(self.num_envs, day_id))
        self.state = merge_state(self.state, done, fresh)

    def _row_blocks(self) -> list[slice] | None:
        """The row blocks of ``Task.step_block_rows`` for this batch, or ``None`` for one piece
        (kept until the task's block size changes: the batch never does)."""
        block = self.task.step_block_rows
        if block != self._blocks_for:
            n = self.num_envs
            self._blocks = None if block is None or n <= block else row_blocks(n, block)
            self._blocks_for = block
        return self._blocks

    def _task_reset(self, day_ids: np.ndarray) -> Any:
        """``task.reset`` of every row, in row blocks where the task asks for them."""
        blocks = self._row_blocks()
        if blocks is None:
            return self.task.reset(self.rng, day_ids)
        return concat_states([self.task.reset(self.rng, day_ids[rows]) for rows in blocks])

    def reset_info(self) -> dict[str, Any]:
        """Info returned by ``reset``: the keys of a step's info, numeric, with every step
        quantity a 0 placeholder.

        ``day_id`` and ``step`` describe the new episode, and ``is_safe`` is ``True`` (no cost
        has been incurred: every cost is 0). Everything else, costs, reward terms, actions and
        the task's own per-step quantities (a SOC, a price, ...), is 0, since no step happened:
        the starting state is in the observation. Same keys at reset and step let recorders
        (Minari's ``DataCollector``, Gymnasium's vector wrappers) treat infos as one table.
        """
        info = {
            key: np.zeros((self.num_envs, *shape), dtype)
            for key, (shape, dtype) in self._info_layout().items()
        }
        info["is_safe"] = ~_or_reduce(info["constraint_costs"] > _ZERO, axis=1)
        info["day_id"] = self.task.episode_day(self.state)
        info["step"] = self.task.time_index(self.state)
        return info

    def _info_layout(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Shape (after the batch axis) and dtype of every step-info key, from one step on a copy.

        Worked out once: a zero action (clipped into bounds) on a copy of the current state with
        a throwaway generator, so the episodes and the runner's random stream are untouched.
        """
        if self._layout is None:
            action = np.zeros(self._action_shape).clip(self.act_low, self.act_high)
            _, out = self.task.step(copy.deepcopy(self.state), action, np.random.default_rng(0))
            info = self._step_info(out, action, np.zeros(self.num_envs, dtype=bool))
            self._layout = {
                key: (np.shape(value)[1:], np.asarray(value).dtype) for key, value in info.items()
            }
        return self._layout

    def current_dates(self) -> np.ndarray:
        """Calendar date of each running episode [B] (``numpy.datetime64[D]``)."""
        return calendar.DATES[self.task.calendar_day(self.task.episode_day(self.state))]

    # ---- stepping ---------------------------------------------------------------------------
    def check_action(self, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """Validate a physical action batch [B, act_dim]; clip into bounds.

        Returns the clipped action (float64) and a [B] flag of rows that were clipped. The
        action's form follows :func:`conform_action` (numbers only; axes of length 1 may be
        added or dropped, so a single env takes ``[act_dim]``); NaN/inf raise ``ValueError``.
        """
        expected = self._action_shape
        # conformed to the shape a user sends (a single env's [act_dim]), the exact match being
        # the cheap case, then viewed as the batch [B, act_dim]
        action = conform_action(action, self._user_shape, self._what, self.spec.action.names)
        if self.num_envs == 1:
            action = action.reshape(expected)
        # NaN passes through the clip and +-inf is clipped to a bound, so a non-finite entry
        # always shows up as "changed": the finiteness check only runs when something changed
        clipped = _minimum(
            _maximum(action, self._low_row), self._high_row
        )  # np.clip's values, without its wrapper
        changed = clipped != action
        if not _or_reduce(changed, axis=None):  # "any" without ndarray.any's Python wrapper
            return clipped, np.zeros(expected[0], dtype=bool)
        if not np.isfinite(action).all():
            shown = action[0] if self.num_envs == 1 else action  # a single env's [act_dim]
            raise ValueError(non_finite_entry(self._what, shown, self.spec.action.names))
        return clipped, _or_reduce(changed, axis=1)

    def step(
        self, action: Any, observe: bool = True
    ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One batched step; returns obs (``None`` if not ``observe``), reward, terminated,
        truncated, info."""
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        physical, clipped = self.check_action(action)
        blocks = self._row_blocks()
        if blocks is None:
            self.state, out = self.task.step(self.state, physical, self.rng)
        else:  # row blocks that fit the caches (Task.step_block_rows)
            parts = [
                self.task.step(state_rows(self.state, rows), physical[rows], self.rng)
                for rows in blocks
            ]
            self.state = concat_states([state for state, _ in parts])
            out = concat_outputs([output for _, output in parts])
        step = self.task.time_index(self.state)
        truncated = (step >= self._horizon) & ~out.terminated
        info = self._step_info(out, physical, clipped, step)
        obs = self.task.observe(self.state) if observe else None
        return obs, out.reward, out.terminated, truncated, info

    def _step_info(
        self,
        out: StepOutput,
        requested: np.ndarray,
        clipped: np.ndarray,
        step: np.ndarray | None = None,
    ) -> dict[str, Any]:
        """The step's info: the task's keys, the CMDP keys, the actions, ``day_id`` and
        ``step`` (``task.time_index`` of the new state, when the caller has it already)."""
        return {  # one dict display: the keys in this order, a later value replacing an earlier one
            **out.info,
            **self.cost_layout.info(out.constraint_costs),
            "reward_terms": out.reward_terms,
            "action_requested": requested,
            "action_applied": out.action_applied,
            "action_clipped": clipped,
            "day_id": self.task.episode_day(self.state),
            "step": self.task.time_index(self.state) if step is None else step,
        }
