"""Units with limits in the dispatch tasks: Pmin by technology, ramp rates, the step's range.

Every dispatch task (``marl_opf``, ``opf_118``, ``opf_118_7d``, ``opf``) dispatches units that
are committed (on) for the whole episode, as a real-time security-constrained economic dispatch
(SCED) does: unit commitment is the ``tso`` / ``marl_uc`` tasks' decision, not this one's.

The rule (:func:`dispatch_limits`) is the size-class rule of the unit-commitment tasks
(:data:`powerzoo.devices.thermal_unit.UNIT_CLASSES`, applied by
:func:`~powerzoo.devices.thermal_unit.fleet_from_case`), with two dispatch-specific readings:

* **Pmin by technology.** Mid (150-400 MW) units run at 35 % of Pmax at least, base (>= 400 MW)
  units at 40 %. Peaking units (< 150 MW: combustion turbines with 1 h minimum up and down times
  that start within one half-hour step) are fast-start units: an operator's dispatch moves them
  between off and full output, so their Pmin in the dispatch is 0 (as the ISOs' real-time
  dispatch relaxes a fast-start unit's Pmin when it prices it). A unit whose case gives a larger
  Pmin keeps it. Because every unit is on all episode, the fleet's summed Pmin must fit under the
  lowest load it serves: where the summed Pmin is above :data:`MUST_RUN_SHARE` (90 %) of the
  lowest system load of the data year (the calendar demand shape's minimum times the case's
  load), every Pmin is scaled down to that share (``DispatchLimits.pmin_scale``; 1 on case118
  at the ``opf_118`` load, 0.72 on ``marl_opf``'s case5).
* **Ramp rates** by class, per minute of Pmax: peaking 10 %, mid 2 %, base 1 %; per 30-minute
  step a base unit moves by 30 % of its rating, a mid unit by 60 %, a peaking unit across its
  whole range.

The step's feasible range of unit ``g`` is ``[max(Pmin, p_prev - ramp), min(Pmax, p_prev +
ramp)]`` around its last output ``p_prev`` (:meth:`DispatchLimits.step_range`); the env clips a
setpoint outside it onto it. The first step's ``p_prev`` is the task's initial dispatch (the
model's docstring).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from powerzoo.devices.thermal_unit import UNIT_CLASSES, fleet_from_case
from powerzoo.physics.network import NetworkCase

__all__ = ["FAST_START_CLASSES", "MUST_RUN_SHARE", "DispatchLimits", "dispatch_limits"]

FAST_START_CLASSES = ("peaking",)
"""Size classes whose units start within a step: Pmin 0 in the dispatch."""
MUST_RUN_SHARE = 0.9
"""The committed fleet's summed Pmin is at most this share of the year's lowest system load."""
assert all(c in {u.name for u in UNIT_CLASSES} for c in FAST_START_CLASSES)


@dataclasses.dataclass(frozen=True, eq=False)
class DispatchLimits:
    """Each unit's output limits and ramp per step (arrays ``[n_gen]``, MW)."""

    pmin_mw: np.ndarray
    pmax_mw: np.ndarray
    ramp_up_mw: np.ndarray  # per step
    ramp_down_mw: np.ndarray  # per step
    unit_class: tuple[str, ...]
    pmin_scale: float  # the factor the class Pmin were scaled by to fit the lowest load

    def step_range(self, prev_p_mw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The step's feasible output range ``(lo, hi)`` [B, n_gen] MW around the last outputs
        ``prev_p_mw`` [B, n_gen] MW (module docstring).

        Args:
            prev_p_mw: Last outputs [B, n_gen], MW.

        Returns:
            Lower and upper bounds [B, n_gen], MW.
        """
        lo = np.maximum(prev_p_mw - self.ramp_down_mw, self.pmin_mw)
        np.minimum(lo, self.pmax_mw, out=lo)
        hi = np.minimum(prev_p_mw + self.ramp_up_mw, self.pmax_mw)
        np.maximum(hi, lo, out=hi)
        return lo, hi

    def with_units(self, case: NetworkCase) -> NetworkCase:
        """``case`` with these Pmin (the DC-OPF, the redispatch and the merit order read the
        case's limits)."""
        return dataclasses.replace(case, gen_pmin_mw=self.pmin_mw.copy())


def dispatch_limits(case: NetworkCase, lowest_load_mw: float, dt_h: float) -> DispatchLimits:
    """The limits of ``case``'s units in a dispatch with steps of ``dt_h`` hours whose system
    load never falls below ``lowest_load_mw`` (module docstring).

    Args:
        case: The network case (its Pmax, and its Pmin where larger than the class's).
        lowest_load_mw: The lowest system load the episode can see, MW.
        dt_h: Step length, hours.

    Returns:
        The units' limits.
    """
    pmax = np.asarray(case.gen_pmax_mw, dtype=np.float64)
    rating = np.maximum(pmax, 0.0)
    zero = np.zeros_like(rating)
    fleet = fleet_from_case(rating, zero, zero, dt_h)
    fast = np.isin(np.asarray(fleet.unit_class), FAST_START_CLASSES)
    pmin = np.where(fast, 0.0, fleet.pmin_mw)
    published = np.asarray(case.gen_pmin_mw, dtype=np.float64)
    pmin = np.where(case.gen_in_service, np.maximum(pmin, published), published)
    must_run = float(pmin[case.gen_in_service].clip(min=0.0).sum())
    cap = MUST_RUN_SHARE * max(float(lowest_load_mw), 0.0)
    scale = min(1.0, cap / must_run) if must_run > 0.0 else 1.0
    pmin = np.where(pmin > 0.0, pmin * scale, pmin)
    pmin = np.minimum(pmin, pmax)
    span = np.maximum(pmax - pmin, 0.0)
    ramp = np.where(rating > 0.0, np.minimum(fleet.ramp_up_step_mw, span), span)
    ramp = np.where(fast, span, ramp)  # a fast-start unit crosses its range in a step
    return DispatchLimits(
        pmin_mw=pmin,
        pmax_mw=pmax.copy(),
        ramp_up_mw=ramp,
        ramp_down_mw=ramp.copy(),
        unit_class=fleet.unit_class,
        pmin_scale=scale,
    )
