"""Rule-based baseline of the unit-commitment tasks: priority-list commitment with deliverable
reserve, then congestion-aware economic dispatch.

Commitment, in the priority order (full-load average cost) within the minimum up / down times:
units until the output they can reach this step (a starting unit: its start-up output; an on
unit: one ramp above its last output) covers ``max(load now, load next)`` plus the reserve
requirement; then, while their 10-minute response (``reserve_ramp_mw``) falls short of the
requirement, the units with the cheapest no-load cost per MW of response whose Pmin still fits
under the load; a unit above its shut-down ramp limit is kept on (and, if the list would switch
it off, dispatched down to that limit, so that it can stop at a later step). Dispatch: the
economic dispatch of the committed units within their ramp bounds
(:func:`powerzoo.physics.redispatch.redispatch`), each unit held ``x`` times its 10-minute
response below Pmax, ``x`` the share of the committed response the requirement needs (so the
deliverable reserve meets it; relaxed as far as the load needs where the held units cannot
serve it); while a branch stays overloaded, the cheapest free unit that relieves it and whose
Pmin fits under the load is committed too, up to ``MAX_EXTRA_UNITS`` per step. With the
contingency term (``tso``) the requirement is first the margin of the load; while the N-1
row fails (some committed unit's output ``p_k`` is above the other units' deliverable reserve
``sum_{g != k} r_g``, i.e. the summed reserve is below ``max_k (p_k + r_k)``), the commitment
and dispatch are redone (at most ``CONTINGENCY_PASSES`` times) for a requirement
``RESERVE_PAD`` above the larger of the two, counting each unit's response at most ``Pmax -
Pmin`` (what it delivers from its minimum output: a peaking unit's 10-minute ramp spans its
whole rating, so its full response overstates what it can hold). Measured on the baselines
table's 16 ``tso`` test days: no step short by the N-1 row (742 of 768 before the rule checked
that row).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.devices.thermal_unit import priority_list_commitment, reserve_requirement_mw
from powerzoo.physics.dc_power_flow import ptdf_matrix
from powerzoo.physics.redispatch import redispatch
from powerzoo.tasks.unit_commitment.spec import RESERVE_MARGIN

__all__ = [
    "CONTINGENCY_PASSES",
    "MAX_EXTRA_UNITS",
    "RELIEF",
    "RESERVE_PAD",
    "rule_based_action",
    "unit_step_limits",
]

MAX_EXTRA_UNITS = 6  # units committed per step to relieve congestion
RELIEF = 0.05  # MW of relief per MW injected for a unit to count as relieving a branch
CONTINGENCY_PASSES = 3  # commitment and dispatch redone at most this often for the N-1 term
RESERVE_PAD = 0.05  # a redone pass aims this fraction above the requirement it missed


def unit_step_limits(task: Any, obs: np.ndarray) -> dict[str, np.ndarray]:
    """What binds each unit this step, from ``task``'s observations ``obs``: the fields of
    ``task.unit_obs`` (``load``, ``load_next`` [B] MW, ``on``, ``time_steps``, ``p_prev``,
    ``first``) and ``locked_on`` / ``must_on`` / ``must_off`` (minimum times, shut-down ramp),
    ``peak`` [B] (the larger of this and the next load), ``reach`` [B, n] MW (a starting unit its
    start-up output, an on unit one ramp above its last output, Pmax on the first step) and
    ``response`` [B, n] MW (its 10-minute reserve within that reach)."""
    names = ("load", "load_next", "on", "time_steps", "p_prev", "first")
    u = dict(zip(names, task.unit_obs(np.asarray(obs, dtype=np.float64)), strict=True))
    f, on = task.fleet, u["on"]
    u["locked_on"] = on & (u["time_steps"] < f.min_up_steps)
    u["must_on"] = u["locked_on"] | f.shutdown_blocked(on, u["p_prev"])
    u["must_off"] = ~on & (u["time_steps"] < f.min_down_steps)
    u["peak"] = np.maximum(u["load"], u["load_next"])
    reach = np.where(on, np.minimum(f.pmax_mw, u["p_prev"] + f.ramp_up_step_mw), f.startup_max_mw)
    u["reach"] = np.where(u["first"][:, None] & on, f.pmax_mw, reach)
    u["response"] = np.minimum(f.reserve_ramp_mw, u["reach"])
    return u


def rule_based_action(task: Any, obs: np.ndarray) -> np.ndarray:
    """Actions [B, 2n] (``[p_mw, on]`` per unit) of the rule (module docstring) for ``task`` (a
    :class:`~powerzoo.tasks.unit_commitment.task.UnitCommitment`) from its observations ``obs``."""
    u = unit_step_limits(task, obs)
    load, on, p_prev, first = u["load"], u["on"], u["p_prev"], u["first"]
    locked_on, must_on, must_off, peak = u["locked_on"], u["must_on"], u["must_off"], u["peak"]
    reach, response = u["reach"], u["response"]
    f, order = task.fleet, task.priority_order
    # units on above their shut-down ramp limit that the list would switch off: ramp them down
    margin = RESERVE_MARGIN * peak
    free_list = priority_list_commitment(
        order, reach, peak + margin, locked_on, must_off, response, margin
    )
    stopping = must_on & ~locked_on & ~free_list
    p = np.empty(on.shape)
    want = np.empty(on.shape, dtype=bool)
    # the N-1 passes count a unit's response at most Pmax - Pmin, what it delivers from its
    # minimum output (a peaking unit's 10-minute ramp spans its whole rating)
    n1_response = np.minimum(response, f.pmax_mw - f.pmin_mw)
    n1_ramp = np.minimum(f.reserve_ramp_mw, f.pmax_mw - f.pmin_mw)
    for row in range(on.shape[0]):  # redispatch takes one set of unit limits per call
        required = float(margin[row])
        unit_response, ramp = response[row], f.reserve_ramp_mw
        for _ in range(1 + CONTINGENCY_PASSES * task.contingency_reserve):
            want[row] = priority_list_commitment(
                order,
                reach[row : row + 1],
                peak[row : row + 1] + required,
                must_on[row : row + 1],
                must_off[row : row + 1],
            )[0]
            _add_response(task, want[row], unit_response, required, load[row], must_off[row])
            share = min(1.0, required / max(want[row] @ ramp, 1e-9))
            hold = share * f.reserve_ramp_mw
            upper = f.pmax_mw - hold
            upper = np.where(stopping[row], f.shutdown_max_mw, upper)
            p[row] = _secure_dispatch(
                task, load[row], on[row], p_prev[row], want[row], must_off[row], first[row], upper
            )
            unit_reserve = f.deliverable_reserve_mw(want[row : row + 1], p[row : row + 1])
            need = reserve_requirement_mw(
                load[row : row + 1],
                p[row : row + 1],
                RESERVE_MARGIN,
                task.contingency_reserve,
                unit_reserve,
            )
            have = unit_reserve.sum()
            if have >= need[0] - 1e-6:
                break
            required = max(required, float(need[0])) * (1.0 + RESERVE_PAD)
            unit_response, ramp = n1_response[row], n1_ramp
    action = np.empty(want.shape + (2,))
    action[:, :, 0] = p
    action[:, :, 1] = want
    return action.reshape(want.shape[0], -1)


def _add_response(
    task: Any,
    want: np.ndarray,
    response: np.ndarray,
    required: float,
    load: float,
    must_off: np.ndarray,
) -> None:
    """Commit (in place in ``want`` [n]) further units, cheapest no-load cost per MW of 10-minute
    ``response`` [n] first, until the committed response reaches ``required`` MW; a unit whose
    Pmin would push the committed minimum output above ``load`` is skipped."""
    f = task.fleet
    missing = required - want @ response
    floor = want @ f.pmin_mw
    for g in task.reserve_order:
        if missing <= 0.0:
            break
        if want[g] or must_off[g] or response[g] <= 0.0 or floor + f.pmin_mw[g] > load:
            continue
        want[g] = True
        missing -= response[g]
        floor += f.pmin_mw[g]


def _secure_dispatch(
    task: Any,
    load: float,
    on: np.ndarray,
    p_prev: np.ndarray,
    want: np.ndarray,
    must_off: np.ndarray,
    first: bool,
    upper: np.ndarray,
) -> np.ndarray:
    """Congestion-aware dispatch [n] of the units ``want`` (updated in place), each at most
    ``upper`` [n] MW where its ramp bounds allow: while a branch stays overloaded, the cheapest
    unit that may start and whose injection relieves it (PTDF sensitivity below ``-RELIEF``) and
    whose Pmin still fits under the load is committed too, at most ``MAX_EXTRA_UNITS`` times."""
    f = task.fleet
    ptdf = ptdf_matrix(task.case)
    bus_load = load * task.case.bus_pd_mw / task.case.bus_pd_mw.sum()
    for _ in range(MAX_EXTRA_UNITS + 1):
        lo, hi = f.dispatch_range(
            on[None], p_prev[None], want[None], (want & ~on)[None], np.array([first])
        )
        held = np.maximum(lo, np.minimum(hi, upper))
        if held.sum() < load:  # the holds cannot serve the load: relaxed as far as it takes
            short = min((load - held.sum()) / max((hi - held).sum(), 1e-9), 1.0)
            held += short * (hi - held)
        hi = held
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
