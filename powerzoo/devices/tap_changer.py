"""Batched on-load tap changer (LTC) of a substation transformer and its automatic voltage
controller (AVC).

The transformer's secondary (the feeder head) sits at ``source_vm_pu x (1 + step_pu x tap)``
with ``tap`` an integer in ``[-n_steps, +n_steps]``: by default +-16 steps of 0.625 %, +-10 %
in 32 steps, the range and step of the standard distribution LTC and of the 32-step line
regulator (IEEE Std C57.131-2012, on-load tap changers; IEEE Std C57.15-2009, step-voltage
regulators: +-10 % in 32 steps of 5/8 %). The source behind the transformer is stiff (1.0 p.u.,
the transmission side; the transformer's own impedance is not modelled, so the head is the
regulated bus itself).

Automatic voltage control
-------------------------
The AVC (the "90-type" relay of the standard, e.g. Beckwith M-2001 or SEL-2431 in their
sequential mode) measures the regulated voltage ``v_reg``: the head, or a chosen bus, optionally
with line-drop compensation (``v_reg = |V_bus - (R + jX) I_head|``, the load-centre voltage
estimated from the head current; off by default, ``ldc_r_pu = ldc_x_pu = 0``). It keeps
``v_reg`` inside the band ``band_centre_pu +- bandwidth_pu / 2``:

* while ``v_reg`` is outside the band, the out-of-band timer runs; once it has run for the time
  delay, the controller moves the tap one step towards the band, and keeps moving one step per
  inter-tap delay until ``v_reg`` is back inside (it stops at the first tap inside the band, not
  at the centre), or the tap reaches its limit;
* back inside the band the timer resets.

Documented values (:class:`TapChangerParams`): band centre 1.025 p.u. (123 V on the 120 V
base) and bandwidth 2 V on 120 V (0.0167 p.u., +-1 V): typical utility settings, ANSI C84.1
Range A (114-126 V at the service) leaving room for the feeder's drop below the band's lower
edge; time delay 45 s (30-60 s is usual for a substation LTC) and 10 s between the steps of a
sequence (the intertap delay of the sequential mode).

Steps of a task
---------------
A task steps in ``step_s`` seconds. The delay in task steps is
``delay_steps = ceil(time_delay_s / step_s)`` (at least 1): with 30-minute steps the 45 s delay
expires within the step in which the voltage leaves the band, so the controller acts in that
step; up to ``1 + floor((step_s - time_delay_s) / intertap_s)`` operations fit in one step (176
at 30 minutes, more than the 32 of the whole range). :func:`avc_step` is the controller's action
of one step on the voltage measured at the step's tap; the feeder layer then solves the flow again
at the new tap and lets the controller continue its sequence within the same step
(:func:`avc_moves`), so a step's flow is the one the controller has settled.

Wear
----
Every tap movement is one operation (``operations`` counts them). A task that makes the tap an
action charges :data:`WEAR_COST_PER_OPERATION` per operation: an oil-type diverter switch is
overhauled every 50,000-100,000 operations (IEEE C57.131 and the makers' maintenance
intervals; vacuum types reach 300,000 and more), an overhaul with the outage it needs costs of
the order of 25,000-50,000 $, so about 0.5 $ per operation (an estimate of the order of
magnitude, a task keyword).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = [
    "WEAR_COST_PER_OPERATION",
    "TapChangerParams",
    "TapChangerState",
    "avc_moves",
    "avc_step",
    "head_vm_pu",
    "regulated_voltage_pu",
    "settled_tap",
    "tap_changer_reset",
    "tap_changer_set",
]

WEAR_COST_PER_OPERATION = 0.5  # $ per tap operation (module docstring)
_min_reduce, _max_reduce = np.minimum.reduce, np.maximum.reduce


@dataclasses.dataclass(frozen=True)
class TapChangerParams:
    """One LTC and its AVC (module docstring for the values and their sources)."""

    n_steps: int = 16  # taps each side of neutral: +-16 (32 steps)
    step_pu: float = 0.00625  # voltage change per tap (0.625 %; +-10 % over the range)
    source_vm_pu: float = 1.0  # the stiff source behind the transformer (p.u.)
    band_centre_pu: float = 1.025  # AVC band centre (123 V on the 120 V base)
    bandwidth_pu: float = 2.0 / 120.0  # AVC band width (2 V on 120 V: +-1 V)
    time_delay_s: float = 45.0  # out-of-band time before the first operation (s)
    intertap_s: float = 10.0  # time between the operations of one sequence (s)
    ldc_r_pu: float = 0.0  # line-drop compensation resistance (p.u. on the system base)
    ldc_x_pu: float = 0.0  # line-drop compensation reactance (p.u. on the system base)

    def __post_init__(self) -> None:
        if not (isinstance(self.n_steps, int) and self.n_steps >= 1):
            raise ValueError(f"n_steps must be an integer >= 1, got {self.n_steps!r}")
        for name in ("step_pu", "source_vm_pu", "band_centre_pu", "bandwidth_pu", "intertap_s"):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not self.time_delay_s >= 0.0:
            raise ValueError(f"time_delay_s must be >= 0 s, got {self.time_delay_s!r}")
        if self.bandwidth_pu <= self.step_pu * self.source_vm_pu:
            raise ValueError(
                "bandwidth_pu must exceed one tap step, or the controller would hunt: "
                f"{self.bandwidth_pu!r} <= {self.step_pu * self.source_vm_pu!r}"
            )

    @property
    def band_pu(self) -> tuple[float, float]:
        """The band's edges ``(low, high)`` (p.u.)."""
        half = 0.5 * self.bandwidth_pu
        return self.band_centre_pu - half, self.band_centre_pu + half

    @property
    def has_ldc(self) -> bool:
        """Whether line-drop compensation is on."""
        return self.ldc_r_pu != 0.0 or self.ldc_x_pu != 0.0

    def delay_steps(self, step_s: float) -> int:
        """Task steps of ``step_s`` seconds the voltage must stay outside the band before the
        first operation: ``ceil(time_delay_s / step_s)``, at least 1."""
        return max(1, math.ceil(self.time_delay_s / float(step_s) - 1e-9))

    def max_operations(self, step_s: float) -> int:
        """Operations the controller can make within one task step of ``step_s`` seconds
        (capped at the whole range, ``2 n_steps``)."""
        room = max(0.0, float(step_s) - self.time_delay_s)
        return int(min(2 * self.n_steps, 1 + math.floor(room / self.intertap_s)))


@dataclasses.dataclass
class TapChangerState:
    """Batched LTC state; every field is ``[B]`` int64."""

    tap: np.ndarray  # position in [-n_steps, n_steps] (0 = neutral)
    timer: np.ndarray  # consecutive task steps the regulated voltage has been outside the band
    operations: np.ndarray  # tap operations since reset


def head_vm_pu(params: TapChangerParams, tap: np.ndarray) -> np.ndarray:
    """Secondary (feeder head) voltage [B] (p.u.) at tap positions ``tap`` [B]."""
    return params.source_vm_pu * (1.0 + params.step_pu * np.asarray(tap, dtype=np.float64))


def settled_tap(params: TapChangerParams, v_reg_at_neutral_pu: float | None = None) -> int:
    """The tap the AVC settles on when it starts from neutral and the regulated voltage moves
    one step per tap (the head itself): the first tap whose voltage is inside the band (or the
    limit). ``v_reg_at_neutral_pu``: the regulated voltage at neutral (default the source)."""
    v0 = params.source_vm_pu if v_reg_at_neutral_pu is None else float(v_reg_at_neutral_pu)
    moves = avc_moves(params, np.zeros(1, np.int64), np.array([v0]), 2 * params.n_steps)
    return int(moves[0])


def tap_changer_reset(params: TapChangerParams, batch: int, tap: int = 0) -> TapChangerState:
    """State of ``batch`` LTCs at tap ``tap``, timers and operation counts at 0."""
    if abs(int(tap)) > params.n_steps:
        raise ValueError(f"tap {tap} outside +-{params.n_steps}")
    return TapChangerState(
        np.full(batch, int(tap), dtype=np.int64),
        np.zeros(batch, dtype=np.int64),
        np.zeros(batch, dtype=np.int64),
    )


def regulated_voltage_pu(
    params: TapChangerParams,
    v_bus_pu: np.ndarray,
    head_current_pu: np.ndarray | None = None,
) -> np.ndarray:
    """The voltage the AVC regulates [B] (p.u.): ``|v_bus_pu|`` (complex or magnitude [B], the
    regulated bus), less the line-drop compensation ``(ldc_r_pu + j ldc_x_pu) x head_current_pu``
    (complex [B], the current leaving the head, p.u. on the system base) when it is on."""
    if not params.has_ldc:
        return np.abs(v_bus_pu)
    if head_current_pu is None:
        raise ValueError("line-drop compensation needs the head current")
    return np.abs(v_bus_pu - complex(params.ldc_r_pu, params.ldc_x_pu) * head_current_pu)


def avc_moves(
    params: TapChangerParams, tap: np.ndarray, v_reg_pu: np.ndarray, max_operations: int
) -> np.ndarray:
    """Signed tap moves [B] (int64) that bring the regulated voltage ``v_reg_pu`` [B] (p.u.,
    measured at taps ``tap`` [B]) inside the band, at most ``max_operations`` each and within the
    tap limits; each tap moves the regulated voltage by ``step_pu x source_vm_pu``. 0 where it is
    inside."""
    lo, hi = params.band_pu
    per_tap = params.step_pu * params.source_vm_pu
    v = np.asarray(v_reg_pu, dtype=np.float64)
    up = np.ceil((lo - v) / per_tap - 1e-9)  # > 0 only below the band
    down = np.ceil((v - hi) / per_tap - 1e-9)  # > 0 only above it
    need = np.where(v < lo, up, np.where(v > hi, -down, 0.0)).astype(np.int64)
    need = np.clip(need, -max_operations, max_operations)
    tap = np.asarray(tap, dtype=np.int64)
    return np.clip(tap + need, -params.n_steps, params.n_steps) - tap


def avc_step(
    params: TapChangerParams,
    state: TapChangerState,
    v_reg_pu: np.ndarray,
    step_s: float,
) -> tuple[TapChangerState, np.ndarray]:
    """One task step (``step_s`` seconds) of the AVC on the regulated voltage ``v_reg_pu`` [B]
    measured at the state's taps: the out-of-band timer counts the step, and where it has reached
    :meth:`TapChangerParams.delay_steps` the tap moves towards the band
    (:func:`avc_moves`, up to :meth:`TapChangerParams.max_operations`). Returns the new state and
    the moves [B] (int64, signed)."""
    lo, hi = params.band_pu
    v = np.asarray(v_reg_pu, dtype=np.float64)
    if v.size == 1:  # one row: its value (the reductions' result, without their calls)
        lowest = highest = v.reshape(1)[0]
    elif v.size:
        lowest, highest = _min_reduce(v), _max_reduce(v)
    else:
        lowest, highest = np.nan, np.nan
    if lowest >= lo and highest <= hi:  # every row inside the band (a NaN is not)
        held = np.zeros(v.shape, dtype=np.int64)  # no timer runs, no tap moves
        return TapChangerState(
            state.tap.astype(np.int64), held, state.operations.astype(np.int64)
        ), held.copy()
    outside = (v < lo) | (v > hi)
    timer = np.where(outside, state.timer + 1, 0)
    moves = avc_moves(params, state.tap, v, params.max_operations(step_s))
    moves = np.where(timer >= params.delay_steps(step_s), moves, 0)
    timer = np.where(moves != 0, 0, timer)
    new = TapChangerState(state.tap + moves, timer, state.operations + np.abs(moves))
    return new, moves


def tap_changer_set(
    params: TapChangerParams, state: TapChangerState, target: np.ndarray
) -> tuple[TapChangerState, np.ndarray]:
    """Move the taps to ``target`` [B] (tap positions, rounded to the nearest integer and
    clipped to +-``n_steps``): the tap as an action, the AVC bypassed. Every step moved is one
    operation. Returns the new state and the moves [B] (int64, signed)."""
    t = np.asarray(target, dtype=np.float64)
    if not np.all(np.isfinite(t)):
        raise ValueError("tap targets must be finite")
    goal = np.clip(np.rint(t), -params.n_steps, params.n_steps).astype(np.int64)
    moves = goal - state.tap
    return TapChangerState(
        goal, np.zeros_like(state.timer), state.operations + np.abs(moves)
    ), moves
