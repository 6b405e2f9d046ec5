"""Rule-based baseline of the unit-commitment tasks: priority-list commitment, then
congestion-aware economic dispatch.

Commitment for ``(1 + margin) x max(load now, load next)`` in the priority order (full-load
average cost) within the minimum up / down times; then the economic dispatch of the committed
units within their ramp bounds (:func:`powerzoo.physics.redispatch.redispatch`); while a branch
stays overloaded, the cheapest free unit that relieves it and whose Pmin fits under the load is
committed too, up to ``MAX_EXTRA_UNITS`` per step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.devices.thermal_unit import priority_list_commitment
from powerzoo.physics.dc_power_flow import ptdf_matrix
from powerzoo.physics.redispatch import redispatch
from powerzoo.tasks.unit_commitment.spec import RESERVE_MARGIN

__all__ = ["MAX_EXTRA_UNITS", "RELIEF", "rule_based_action"]

MAX_EXTRA_UNITS = 6  # units committed per step to relieve congestion
RELIEF = 0.05  # MW of relief per MW injected for a unit to count as relieving a branch


def rule_based_action(task: Any, obs: np.ndarray) -> np.ndarray:
    """Actions [B, 2n] (``[p_mw, on]`` per unit) of the rule (module docstring) for ``task`` (a
    :class:`~powerzoo.tasks.unit_commitment.task.UnitCommitment`) from its observations ``obs``."""
    load, load_next, on, time_steps, p_prev, first = task.unit_obs(
        np.asarray(obs, dtype=np.float64)
    )
    f = task.fleet
    must_on = on & (time_steps < f.min_up_steps)
    must_off = ~on & (time_steps < f.min_down_steps)
    target = (1.0 + RESERVE_MARGIN) * np.maximum(load, load_next)
    want = priority_list_commitment(task.priority_order, f.pmax_mw, target, must_on, must_off)
    p = np.empty(want.shape)
    for row in range(want.shape[0]):  # redispatch takes one set of unit limits per call
        p[row] = _secure_dispatch(
            task, load[row], on[row], p_prev[row], want[row], must_off[row], first[row]
        )
    action = np.empty(want.shape + (2,))
    action[:, :, 0] = p
    action[:, :, 1] = want
    return action.reshape(want.shape[0], -1)


def _secure_dispatch(
    task: Any,
    load: float,
    on: np.ndarray,
    p_prev: np.ndarray,
    want: np.ndarray,
    must_off: np.ndarray,
    first: bool,
) -> np.ndarray:
    """Congestion-aware dispatch [n] of the units ``want`` (updated in place): while a branch
    stays overloaded, the cheapest unit that may start and whose injection relieves it
    (PTDF sensitivity below ``-RELIEF``) and whose Pmin still fits under the load is committed
    too, at most ``MAX_EXTRA_UNITS`` times."""
    f = task.fleet
    ptdf = ptdf_matrix(task.case)
    bus_load = load * task.case.bus_pd_mw / task.case.bus_pd_mw.sum()
    for _ in range(MAX_EXTRA_UNITS + 1):
        lo, hi = f.dispatch_range(
            on[None], p_prev[None], want[None], (want & ~on)[None], np.array([first])
        )
        limited = dataclasses.replace(task.case, gen_pmin_mw=lo[0], gen_pmax_mw=hi[0])
        result = redispatch(limited, bus_load[None], task.marginal_cost, ptdf=ptdf)
        over = np.abs(result.branch_flow_mw[0, task.limited]) - task.rating
        worst = int(np.argmax(over))
        if over[worst] <= 1e-6:
            break
        relief = np.sign(result.branch_flow_mw[0, task.limited[worst]]) * task.gen_flow[:, worst]
        # ... and whose minimum output still fits under the load (no forced over-generation)
        can = ~want & ~must_off & (relief < -RELIEF) & (lo[0].sum() + f.pmin_mw <= load)
        if not can.any():
            break
        cheapest = task.priority_order[can[task.priority_order]][0]
        want[cheapest] = True
    return result.gen_p_mw[0]
