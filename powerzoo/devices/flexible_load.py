"""Batched fleet of flexible loads: curtail (energy lost) and shift (energy paid back later).

Every array is ``[B, n_units]`` unless said otherwise. Each step the task gives the base
demand ``p_base_mw >= 0`` of every unit: the load the unit actually has at its bus this step
(for instance the bus's demand times the unit's flexible share), so curtailment can never take
more than the load that is there. Two actions, as fractions of that base demand:

* **curtail** ``c`` in ``[0, curtail_max]``: ``c * p_base_mw * dt_h`` MWh is not served and not
  recovered (``curtailed_mwh``, for the task to price as unserved energy);
* **shift** ``s`` in ``[0, shift_max]``: ``s * p_base_mw * dt_h`` MWh is deferred
  (``shifted_mwh``) into a backlog and **paid back evenly over the next ``m`` steps**, with
  ``m = min(payback_steps, steps_remaining)`` and ``steps_remaining`` the number of steps of
  the episode still to come after this one. So every deferred MWh is back within the payback
  window *and* before the episode ends; on the last step (``steps_remaining == 0``) nothing can
  be shifted: the request is refused and reported as ``shift_refused_mwh``.

Power drawn from the bus: ``p_mw = p_base_mw * (1 - c - s) + payback_mwh / dt_h``, and
reactive power follows it at the unit's power factor, ``q_mvar = p_mw * tan(acos(pf))``: curtailed
and shifted load take their reactive power with them. Over an episode run to its end,
``sum(shifted_mwh) == sum(payback_mwh)`` per unit (up to float round-off) and nothing is left in
the backlog. Payback is not itself curtailable or shiftable.

State (:class:`FlexibleLoadState`): ``due_mwh [B, payback_steps, n_units]``, the energy to be
paid back in each of the next ``payback_steps`` steps (slot 0 = the next step taken), and
``backlog_mwh [B, n_units]`` = its sum over the slots. :func:`flexible_load_reset` gives the empty
state.

Default parameters (an aggregate of residential and commercial demand response at one bus):
``curtail_max = 0.3`` and ``shift_max = 0.3`` (up to 30 % of a unit's load can be interrupted
and 30 % deferred in a step, so at least 40 % of it is always served);
``payback_steps = 4`` (2 h at 30-min steps: deferred heating, cooling and process load comes back
within a few hours); ``power_factor = 0.85`` lagging (the load power factor of the 141-bus
feeder, and the aggregate P/S of case33bw's 3.715 MW + 2.300 Mvar). Set ``power_factor`` per
unit to its bus's own P / |S| when the case's loads differ.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from powerzoo.devices._per_unit import unit_arrays

__all__ = [
    "FlexibleLoadParams",
    "FlexibleLoadState",
    "FlexibleLoadStep",
    "flexible_load_reset",
    "flexible_load_step",
    "payback_matrix",
]


@dataclasses.dataclass(frozen=True, eq=False)
class FlexibleLoadParams:
    """Limits of a fleet of ``n_units`` flexible loads.

    ``curtail_max``, ``shift_max`` and ``power_factor`` take a scalar (the same for every unit)
    or one value per unit, and become read-only float64 arrays ``[n_units]``; ``payback_steps``
    is one integer for the fleet. ``n_units`` is taken from the per-unit sequences when not
    given (1 when all are scalars).
    """

    curtail_max: npt.ArrayLike = 0.3  # largest curtailed fraction of the base demand
    shift_max: npt.ArrayLike = 0.3  # largest shifted fraction of the base demand
    power_factor: npt.ArrayLike = 0.85  # lagging, in (0, 1]
    payback_steps: int = 4  # shifted energy is paid back within this many steps
    n_units: int | None = None
    tan_phi: np.ndarray = dataclasses.field(
        init=False, repr=False
    )  # Mvar per MW, derived from power_factor
    slot_column: np.ndarray = dataclasses.field(
        init=False, repr=False
    )  # arange(payback_steps)[:, None], derived

    def __post_init__(self) -> None:
        values = {
            "curtail_max": self.curtail_max,
            "shift_max": self.shift_max,
            "power_factor": self.power_factor,
        }
        arrays, n_units = unit_arrays("FlexibleLoadParams", values, self.n_units)
        for name in ("curtail_max", "shift_max"):
            bad = np.flatnonzero((arrays[name] < 0.0) | (arrays[name] > 1.0))
            if bad.size:
                raise ValueError(
                    f"FlexibleLoadParams unit {bad[0]}: {name} must be in [0, 1], got "
                    f"{arrays[name][bad[0]]}"
                )
        bad = np.flatnonzero(arrays["curtail_max"] + arrays["shift_max"] > 1.0)
        if bad.size:
            i = bad[0]
            raise ValueError(
                f"FlexibleLoadParams unit {i}: curtail_max + shift_max = "
                f"{arrays['curtail_max'][i] + arrays['shift_max'][i]} "
                "exceeds 1; a unit cannot give up more than its whole load"
            )
        pf = arrays["power_factor"]
        bad = np.flatnonzero((pf <= 0.0) | (pf > 1.0))
        if bad.size:
            raise ValueError(
                f"FlexibleLoadParams unit {bad[0]}: power_factor must be in (0, 1], got "
                f"{pf[bad[0]]}"
            )
        k = self.payback_steps
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"FlexibleLoadParams.payback_steps must be an integer >= 1, got {k!r}")
        tan_phi = np.sqrt(1.0 - pf * pf) / pf
        slot_column = np.arange(int(k))[:, None]
        for array in (tan_phi, slot_column):
            array.setflags(write=False)
        for name, value in (*arrays.items(), ("tan_phi", tan_phi), ("slot_column", slot_column)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "payback_steps", int(k))
        object.__setattr__(self, "n_units", n_units)


@dataclasses.dataclass(frozen=True)
class FlexibleLoadState:
    """Deferred energy of a fleet; merge rows with :func:`powerzoo.tasks.base.merge_state`."""

    due_mwh: (
        np.ndarray
    )  # [B, payback_steps, n_units] energy paid back in each of the next steps (slot 0 = next)
    backlog_mwh: (
        np.ndarray
    )  # [B, n_units] deferred energy not yet paid back (= due_mwh.sum(axis=1))


@dataclasses.dataclass(frozen=True)
class FlexibleLoadStep:
    """Result of one step; ``state`` is the state after it, every other field ``[B, n_units]``
    float64."""

    state: FlexibleLoadState
    p_mw: np.ndarray  # active power drawn from the bus: base - curtailed - shifted + payback
    q_mvar: np.ndarray  # reactive power drawn: p_mw * tan_phi
    curtail_fraction: np.ndarray  # curtailment applied, in [0, curtail_max]
    shift_fraction: np.ndarray  # shift applied, in [0, shift_max] (0 on the last step)
    curtailed_mwh: np.ndarray  # energy not served and lost this step (>= 0)
    shifted_mwh: np.ndarray  # energy deferred this step (>= 0)
    payback_mwh: np.ndarray  # deferred energy served this step (>= 0)
    shift_refused_mwh: np.ndarray  # shift asked for when no step was left to pay it back (>= 0)


def flexible_load_reset(params: FlexibleLoadParams, batch_size: int) -> FlexibleLoadState:
    """The empty state (no backlog) for ``batch_size`` environments."""
    return FlexibleLoadState(
        due_mwh=np.zeros((batch_size, params.payback_steps, params.n_units)),
        backlog_mwh=np.zeros((batch_size, params.n_units)),
    )


def flexible_load_step(
    params: FlexibleLoadParams,
    state: FlexibleLoadState,
    p_base_mw: npt.ArrayLike,
    curtail_fraction: npt.ArrayLike,
    shift_fraction: npt.ArrayLike,
    dt_h: float,
    steps_remaining: int | npt.ArrayLike,
) -> FlexibleLoadStep:
    """Serve one step of ``dt_h`` hours.

    ``p_base_mw`` (MW, >= 0), ``curtail_fraction`` and ``shift_fraction`` are ``[B, n_units]``
    (fractions are cut to their limits); ``steps_remaining`` is the number of steps of the
    episode after this one (0 on the last step), an int or an integer array ``[B]``
    (``horizon - 1 - t`` for step index ``t``). Inputs must be finite (the env checks actions).

    Args:
        params: The loads' parameters.
        state: The loads' state (energy owed by earlier shifts).
        p_base_mw: Baseline demand [B, n_units], MW.
        curtail_fraction: Share of demand curtailed [B, n_units].
        shift_fraction: Share of demand shifted to later steps [B, n_units].
        dt_h: Step length, hours.
        steps_remaining: Steps of the episode after this one (int or [B]).

    Returns:
        New state, power drawn (MW, Mvar), curtailed, shifted and paid-back energy (MWh).
    """
    p_base_mw = np.asarray(p_base_mw, dtype=np.float64)
    curtail = np.asarray(curtail_fraction, dtype=np.float64)
    shift = np.asarray(shift_fraction, dtype=np.float64)
    due = state.due_mwh
    shape = state.backlog_mwh.shape
    if p_base_mw.shape != shape or curtail.shape != shape or shift.shape != shape:
        raise ValueError(
            f"flexible_load_step: p_base_mw {p_base_mw.shape}, curtail_fraction {curtail.shape} "
            "and "
            f"shift_fraction {shift.shape} must all be [B, n_units] = {shape} (the state's shape)"
        )
    curtail = curtail.clip(0.0, params.curtail_max)
    shift = shift.clip(0.0, params.shift_max)

    # payback window of the energy shifted now: the next m steps, m = min(k, steps left)
    window = np.minimum(np.asarray(steps_remaining), params.payback_steps)
    if window.ndim:
        if window.shape != (due.shape[0],):
            raise ValueError(
                f"flexible_load_step: steps_remaining {window.shape} must be an int or [B] with "
                f"B={due.shape[0]}"
            )
        window = window[:, None]  # [B, 1], against [B, n_units]
    if window.size == 1:  # the smallest window (read directly for a scalar or one row)
        shortest = window.item()
    else:
        shortest = int(window.min()) if window.size else params.payback_steps
    # (where every window is open the masks below are all True: their products are skipped)
    shift_applied = shift if shortest > 0 else np.where(window > 0, shift, 0.0)

    base_mwh = p_base_mw * dt_h
    curtailed_mwh = curtail * base_mwh
    shifted_mwh = shift_applied * base_mwh
    payback_mwh = due[:, 0]
    # the schedule moves one step forward, and the energy shifted now adds an equal share to
    # each of the first m slots (mask [B, k, 1] or [k, 1] against the share [B, 1, n_units])
    share_mwh = shifted_mwh / (window if shortest >= 1 else np.maximum(window, 1))
    new_due = np.empty(due.shape)  # C order: the slot sum below adds the slots in order
    new_due[:, :-1] = due[:, 1:]
    new_due[:, -1] = 0.0
    if shortest >= params.payback_steps:  # every slot of every row in the window
        new_due += share_mwh[:, None, :]
    else:
        in_window = params.slot_column < (window[:, None] if window.ndim else window)
        new_due += share_mwh[:, None, :] * in_window
    if params.n_units > 1:  # one reduction adds the slots in order, as the loop does
        backlog_mwh = np.add.reduce(new_due, axis=1)
    else:  # (a last axis of 1 would make the slots the reduction's inner loop: pairwise sums)
        backlog_mwh = new_due[:, 0].copy()
        for slot in range(1, params.payback_steps):
            backlog_mwh += new_due[:, slot]

    p_mw = p_base_mw * (1.0 - curtail - shift_applied) + payback_mwh / dt_h
    return FlexibleLoadStep(
        state=FlexibleLoadState(due_mwh=new_due, backlog_mwh=backlog_mwh),
        p_mw=p_mw,
        q_mvar=p_mw * params.tan_phi,
        curtail_fraction=curtail,
        shift_fraction=shift_applied,
        curtailed_mwh=curtailed_mwh,
        shifted_mwh=shifted_mwh,
        payback_mwh=payback_mwh,
        shift_refused_mwh=(shift - shift_applied) * base_mwh,
    )


def payback_matrix(t0: int, horizon: int, payback_steps: int) -> np.ndarray:
    """``W`` [T, T], T = horizon - t0: payback MW at step ``t`` per MW shifted at step ``tau``.

    ``1 / m`` for the ``m = min(payback_steps, steps left)`` steps after ``tau``, as
    :func:`flexible_load_step` pays it back (a planner's linear model of the device).
    """
    t = horizon - t0
    w = np.zeros((t, t))
    for tau in range(t):
        m = min(payback_steps, horizon - 1 - (t0 + tau))
        w[tau + 1 : tau + 1 + m, tau] = 1.0 / max(m, 1)
    return w
