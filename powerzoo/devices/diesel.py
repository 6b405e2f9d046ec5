"""Batched diesel generator: minimum stable output, fuel cost, CO2, start-up cost and minimum
run and down times.

* ``rated_mw = 2.5``: one 2.5 MW standby/prime genset, a common size for data-centre backup.
* ``min_stable_fraction = 0.3``: manufacturers advise against running below about 30 % load
  (wet stacking); a request below ``p_min`` gives the nearest feasible output, 0 or ``p_min``.
* ``fuel_cost_per_mwh = 300``: about 0.27 l of diesel per kWh near rated load (typical 2 MW
  genset data sheets) at about 1.1 $/l.
* ``co2_t_per_mwh = 0.75``: 2.68 kg CO2 per litre of diesel (US EPA, "Emission Factors for
  Greenhouse Gas Inventories": 10.21 kg CO2 per US gallon) x 0.27 l/kWh = 0.72-0.75 t/MWh.

* ``start_up_cost = 50`` $ per start: the fuel of cranking and of the warm-up before the set
  takes load (about 10 l, ~11 $) plus the wear a start adds to the starter, the batteries and
  the engine (cold-start wear, later overhaul), a few tens of $ for a set of this size.
* ``min_up_h = 1``: once started, a set runs for at least an hour. Makers advise against short
  runs: the engine should reach its operating temperature under load (light, short runs cause
  wet stacking), and standby-set test routines run for 30-60 min under load.
* ``min_down_h = 1``: once stopped (after its cool-down run), a set stays off for an hour; with
  the minimum run this caps the set at 12 starts a day.

:class:`DieselCommitment` steps the on/off status under the minimum times; ramp limits and
part-load efficiency losses are not modelled.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

__all__ = [
    "DieselCommitment",
    "DieselGenerator",
    "DieselParams",
    "DieselStep",
    "diesel_output_mw",
]


@dataclasses.dataclass(frozen=True)
class DieselParams:
    """Diesel generator rating, fuel cost and emission factor (sources in the module docstring).

    ``rated_mw`` (MW), ``min_stable_fraction`` (of the rating), ``fuel_cost_per_mwh`` ($/MWh of
    output), ``co2_t_per_mwh`` (t CO2/MWh of output), ``start_up_cost`` ($ per start),
    ``min_up_h`` and ``min_down_h`` (h: least run once started, least rest once stopped).
    """

    rated_mw: float = 2.5
    min_stable_fraction: float = 0.3
    fuel_cost_per_mwh: float = 300.0
    co2_t_per_mwh: float = 0.75
    start_up_cost: float = 50.0
    min_up_h: float = 1.0
    min_down_h: float = 1.0

    def __post_init__(self) -> None:
        if self.rated_mw <= 0.0:
            raise ValueError(f"rated_mw must be positive, got {self.rated_mw}")
        if not 0.0 <= self.min_stable_fraction <= 1.0:
            raise ValueError(
                f"min_stable_fraction must be in [0, 1], got {self.min_stable_fraction}"
            )
        if self.fuel_cost_per_mwh < 0.0 or self.co2_t_per_mwh < 0.0:
            raise ValueError("fuel cost and CO2 factor must be non-negative")
        if self.start_up_cost < 0.0:
            raise ValueError(f"start_up_cost must be non-negative, got {self.start_up_cost}")
        if self.min_up_h < 0.0 or self.min_down_h < 0.0:
            raise ValueError(
                f"min_up_h and min_down_h must be non-negative, got {self.min_up_h}, "
                f"{self.min_down_h}"
            )

    def min_steps(self, dt_h: float) -> tuple[int, int]:
        """Minimum run and down times in whole steps of ``dt_h`` hours (rounded up).

        Args:
            dt_h: Step length, hours.

        Returns:
            Minimum run and minimum down time, in steps.
        """
        return (
            int(np.ceil(self.min_up_h / dt_h - 1e-9)),
            int(np.ceil(self.min_down_h / dt_h - 1e-9)),
        )

    @property
    def p_min_mw(self) -> float:
        """Minimum stable output (MW)."""
        return self.rated_mw * self.min_stable_fraction


class DieselGenerator:
    """The generator's output rule: the one implementation behind :func:`diesel_output_mw`.

    Below half the minimum output the output is ``max(request, p_min) * False = +0.0``
    (``max(request, p_min) >= 0``), otherwise ``max(request, p_min)``: the nearest feasible
    output, without a ``where``. ``float64_constants=True`` (the default) makes the thresholds
    0-d float64 arrays (numpy converts a Python float operand on every call, which dominates on
    small batches): for float64 batches. ``False`` keeps them Python floats, so numpy's
    Python-scalar rules apply and a float32 batch stays float32: what :func:`diesel_output_mw`
    uses.

    Args:
        params: The generator's ratings.
        float64_constants: Hold the thresholds as float64 arrays (for float64 batches).
    """

    def __init__(self, params: DieselParams, *, float64_constants: bool = True) -> None:
        const = (lambda x: np.array(x, np.float64)) if float64_constants else (lambda x: x)
        p_min = params.p_min_mw
        self.p_min_mw, self.half_p_min_mw = const(p_min), const(0.5 * p_min)

    def output_mw(self, request_mw: np.ndarray) -> np.ndarray:
        """Output [B] (MW) for requests [B] in [0, rated]: below ``p_min`` the nearest of 0 and
        ``p_min``.

        Args:
            request_mw: Requested output [B], MW.

        Returns:
            Output [B], MW.
        """
        return np.maximum(request_mw, self.p_min_mw) * (request_mw >= self.half_p_min_mw)


class DieselStep:
    """What :meth:`DieselCommitment.step` returns (plain attributes, each [B])."""

    __slots__ = ("output_mw", "on", "steps_in_state", "started")

    def __init__(
        self, output_mw: np.ndarray, on: np.ndarray, steps_in_state: np.ndarray, started: np.ndarray
    ) -> None:
        self.output_mw = output_mw  # output over the step (MW)
        self.on = on  # running during the step (bool)
        self.steps_in_state = steps_in_state  # steps run (or rested) in a row, this step included
        self.started = started  # started at this step (bool): one start-up cost


class DieselCommitment:
    """The set's on/off status under its minimum run and down times, at a fixed step ``dt_h``.

    State per row: ``on`` (bool) and ``steps_in_state`` (int: steps run, or rested, in a row).
    A request at or above half the minimum output asks for the set on, a lower one for it off
    (as :class:`DieselGenerator`). A set that has run fewer than ``min_up`` steps stays on (at
    least at its minimum output); one that has rested fewer than ``min_down`` steps stays off.
    Each off-to-on switch is one start (``start_up_cost``). The state a set starts a day in is
    :meth:`initial_state`: off and free to start.
    """

    def __init__(self, params: DieselParams, dt_h: float) -> None:
        self.params, self.dt_h = params, float(dt_h)
        self.min_up_steps, self.min_down_steps = params.min_steps(dt_h)
        self.p_min_mw = np.array(params.p_min_mw, np.float64)
        self.half_p_min_mw = np.array(0.5 * params.p_min_mw, np.float64)
        self._min_up = np.array(self.min_up_steps, np.int64)
        self._min_down = np.array(self.min_down_steps, np.int64)
        self._one, self._zero = np.array(1, np.int64), np.array(0, np.int64)
        self._dt_h = np.array(self.dt_h, np.float64)
        # equal minimum times (the default): one bound for either status, without a ``where``
        self._same_min_steps = self.min_up_steps == self.min_down_steps

    def initial_state(self, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
        """``(on, steps_in_state)`` [B] of a set that is off and may start at once."""
        return np.zeros(n_rows, dtype=bool), np.full(n_rows, self.min_down_steps, np.int64)

    def _min_steps(self, on: np.ndarray) -> np.ndarray:
        """Least steps [B] (or 0-d, when the minimum run and down times are equal) in the status
        ``on`` [B] before it may change."""
        if self._same_min_steps:
            return self._min_up
        return np.where(on, self._min_up, self._min_down)

    def locked(self, on: np.ndarray, steps_in_state: np.ndarray) -> np.ndarray:
        """[B] bool: the set must keep its status this step (minimum run or down time)."""
        return steps_in_state < self._min_steps(on)

    def hold_h(self, on: np.ndarray, steps_in_state: np.ndarray) -> np.ndarray:
        """Hours [B] until the set may change status (0: free now)."""
        left = self._min_steps(on) - steps_in_state
        return np.maximum(left, self._zero) * self._dt_h

    def step(
        self, on: np.ndarray, steps_in_state: np.ndarray, request_mw: np.ndarray
    ) -> DieselStep:
        """The step of requests ``request_mw`` [B] (MW, within ``[0, rated]``) from the state
        ``(on, steps_in_state)``: output, new state and the starts (see the class docstring)."""
        wants_on = request_mw >= self.half_p_min_mw
        locked = self.locked(on, steps_in_state)
        # no row held by its minimum times (the usual step): the request decides alone
        on_next = np.where(locked, on, wants_on) if np.count_nonzero(locked) else wants_on
        output = np.maximum(request_mw, self.p_min_mw) * on_next
        # one more step in an unchanged status, else the first (steps x False + 1 = 1)
        steps_next = steps_in_state * (on_next == on) + self._one
        return DieselStep(output, on_next, steps_next, on_next > on)  # started: off -> on


@functools.lru_cache(maxsize=16, typed=True)
def _generator(params: DieselParams) -> DieselGenerator:
    """The function's :class:`DieselGenerator` (the parameters' own values as constants)."""
    return DieselGenerator(params, float64_constants=False)


def diesel_output_mw(params: DieselParams, request_mw: np.ndarray) -> np.ndarray:
    """Output [B] (MW) for requests [B] in [0, rated]: below ``p_min`` the nearest of 0 and
    ``p_min``."""
    return np.asarray(_generator(params).output_mw(request_mw))  # an array for a scalar request too
