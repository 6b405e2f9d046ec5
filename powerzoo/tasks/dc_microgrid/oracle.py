"""Perfect-foresight reference plan of one ``dc_microgrid`` day: a MILP solved by HiGHS (highspy).

Given the state at step ``t0`` and the rest of the day's weather, prices, grid carbon intensity
and job arrivals, :func:`solve_day_plan` chooses, for every remaining step, the GPUs serving each
deadline bucket of each job class, battery charge and discharge, diesel output and grid import,
to maximise the penalised reward of ``dc_microgrid`` (weighted ``[energy, cost, carbon]`` minus
the violation penalties). Model, per step ``j`` (length ``dt`` h):

* Jobs, IT power and cooling: the data centre's blocks (:mod:`powerzoo.tasks.datacentre.planning`,
  shared with ``dc_scheduling``): GPU-h served per class and deadline bucket, dropped and
  behind-schedule work, the GPU capacity, busy planned GPUs, the setpoint held at
  :data:`ORACLE_SETPOINT_C` (just under the 27 deg C limit) and the cooling power
  ``max(it + offset, 0) / COP`` as an LP constraint.
* Supply: ``pv + diesel + discharge - charge + import - spill + deficit = it + cooling``;
  SOC bounds with the battery's efficiencies; diesel ``0`` or in ``[p_min, rated]``; import up
  to the grid cap. (A planned deficit would be throttled work in the env; at 5,000 per MWh
  no plan makes one where the supply allows.) The env never spills power it imports, nor runs
  the plant harder than its setpoint asks: where an import pays (a negative price), a spill is
  charged a little more than the import earns (left out of the forecast) and the cooling row
  holds with equality (a binary where the plant may idle).
* Diesel status (:func:`add_diesel_commitment`): one binary per block of steps, so that every
  run and rest lasts its minimum time (1 h), a status inherited from before the plan held for
  what is left of its own; 50 $ per start.
* End of the day: the stored energy's change against the day's start is settled at the day's
  mean price, a surplus at ``eta_d (m - wear)`` and a deficit at ``(m + wear) / eta_c`` per
  MWh (one column each), as in the env.

The plan is a reference, not a proof of optimality: the fixed setpoint forgoes pre-cooling, and
the env's plant may clip cooling at zero in cold weather (the realised return is then a little
better than planned). It is the same plan for ``dc_microgrid_safe``: no violation is worth its
penalty, so the CMDP thresholds are met with room to spare.

The model (~19,000 columns, ~11,000 rows for a whole day; 24 binaries) is assembled as numpy blocks
(:class:`~powerzoo.tasks.datacentre.sparse_model.SparseModel`) and passed to HiGHS in two calls.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from powerzoo.devices.cooling import cooling_cop
from powerzoo.tasks.datacentre.planning import (
    ORACLE_SETPOINT_C,
    add_cooling_rows,
    add_job_service,
    it_power_model,
    plan_shares,
    zone_trajectory,
)
from powerzoo.tasks.datacentre.site import DCMicrogridParams
from powerzoo.tasks.datacentre.sparse_model import SparseModel

__all__ = [
    "DayForesight",
    "DayPlan",
    "ORACLE_SETPOINT_C",
    "add_diesel_commitment",
    "solve_day_plan",
]

# supply planned above the load (MW), for the share margin's extra load (~1.5e-6 MW) and float32
# round-off (~1e-7 MW): the env imports that much less, or spills it, instead of running a deficit
SUPPLY_MARGIN_MW = 1e-5
MIP_TIME_LIMIT_S = 60.0
MIP_REL_GAP = 1e-5
# where an import pays (a negative price), a spill is charged (1 + this) x what the import earns
SPILL_CHARGE_MARGIN = 1e-3


@dataclasses.dataclass(frozen=True)
class DayForesight:
    """Everything the plan knows, from step ``t0`` to the end of the day (S = horizon - t0 steps).

    ``arrivals_gpuh[j, c, k]``: work of class ``c`` due by the end of bucket ``k`` that is queued
    when step ``t0 + j`` is served; row 0 is the current queue, later rows are new arrivals.
    """

    t0: int
    soc: float  # battery SOC now (fraction)
    zone_temp_c: float  # server-zone temperature now (deg C)
    temp_out_c: np.ndarray  # [S] outdoor temperature (deg C)
    price_per_mwh: np.ndarray  # [S] grid import price ($/MWh)
    grid_co2_t_per_mwh: np.ndarray  # [S] grid carbon intensity (tCO2/MWh)
    pv_mw: np.ndarray  # [S] available PV power (MW)
    diesel_on: bool  # the diesel ran during the last step
    diesel_steps: int  # steps the diesel has run, or rested, in a row
    settlement_price_per_mwh: float  # the day's mean price: the battery's end energy is settled
    stored_start_mwh: float  # energy stored at the start of the day (MWh, storage side)
    arrivals_gpuh: np.ndarray  # [S, C, K] work per bucket (GPU-h), see above
    carry_allowance_gpuh: np.ndarray  # [C] last-bucket work that may be left at the day's end
    bucket_due_step: np.ndarray  # [K] episode step at which each bucket's leftover is dropped


@dataclasses.dataclass(frozen=True)
class DayPlan:
    """Physical actions [S, 5] (the env's action layout) and the MILP's forecast of the reward."""

    actions: np.ndarray
    predicted_return: float  # sum of the penalised reward over the remaining steps
    predicted_zone_temp_c: np.ndarray  # [S] zone temperature after each step (deg C)
    status: str  # HiGHS's model status: optimal, or a time limit with a feasible solution


def solve_day_plan(
    params: DCMicrogridParams,
    foresight: DayForesight,
    dt_h: float,
    weights: np.ndarray,
    penalties: np.ndarray,
    setpoint_min_c: float,
    setpoint_c: float = ORACLE_SETPOINT_C,
) -> DayPlan:
    """Best plan of the rest of the day under perfect foresight (see the module docstring).

    ``weights`` are the reward weights of ``[energy, cost, carbon]``; ``penalties`` those of
    ``[sla_violation (per GPU-h), overtemperature (per K h), power_deficit (per MWh)]``;
    ``setpoint_min_c`` the lowest setpoint (deg C), used only to cool a zone that starts above
    ``setpoint_c``; ``dt_h`` the step length (h). Raises ``RuntimeError`` when HiGHS finds no
    feasible plan.
    """
    cl, bat, dsl, grid = params.cluster, params.battery, params.diesel, params.grid
    w_energy, w_cost, w_carbon = (float(v) for v in weights)
    pen_sla, pen_temp, pen_deficit = (float(v) for v in penalties)
    arrivals = np.asarray(foresight.arrivals_gpuh, dtype=float)
    n_steps = arrivals.shape[0]
    t0 = foresight.t0
    price, co2 = foresight.price_per_mwh, foresight.grid_co2_t_per_mwh

    setpoint, zone_temp, heat_offset = zone_trajectory(
        params, foresight.zone_temp_c, foresight.temp_out_c, setpoint_c, setpoint_min_c, dt_h
    )
    cop = cooling_cop(params.cooling, foresight.temp_out_c, setpoint)
    it_base_mw, mw_per_gpuh = it_power_model(cl, dt_h)

    model = SparseModel()
    # supply side, one column per step
    energy_cost = w_energy * dt_h  # per MWh of facility energy
    charge = model.columns(
        n_steps, 0.0, bat.power_max_mw, w_cost * bat.degradation_cost_per_mwh * dt_h
    )
    discharge = model.columns(
        n_steps, 0.0, bat.power_max_mw, w_cost * bat.degradation_cost_per_mwh * dt_h
    )
    stored = model.columns(
        n_steps, bat.soc_min * bat.energy_capacity_mwh, bat.soc_max * bat.energy_capacity_mwh
    )
    diesel = model.columns(
        n_steps,
        0.0,
        dsl.rated_mw,
        (w_cost * dsl.fuel_cost_per_mwh + w_carbon * dsl.co2_t_per_mwh) * dt_h,
    )
    diesel_on = model.columns(n_steps, 0.0, 1.0)  # one binary per block of steps, see below
    start = model.columns(n_steps, 0.0, 1.0, w_cost * dsl.start_up_cost)
    stop = model.columns(n_steps, 0.0, 1.0)
    import_cost = (w_cost * price + w_carbon * co2) * dt_h  # per MW imported for a step
    grid_import = model.columns(n_steps, 0.0, grid.import_max_mw, import_cost)
    # the env's grid tie imports the residual or spills it, never both. Where an import pays (a
    # negative price outweighing the carbon), a spill is charged a little more than the import
    # earns, so that the plan never buys power only to spill it; the charge is left out of the
    # forecast (a plan that must spill there, its battery full and its work done, may then not be
    # quite the best one, but the env pays what it forecasts)
    spill_charge = np.maximum(-(1.0 + SPILL_CHARGE_MARGIN) * import_cost, 0.0)
    spill = model.columns(n_steps, 0.0, np.inf, spill_charge)
    deficit = model.columns(n_steps, 0.0, np.inf, pen_deficit * dt_h)
    cooling = model.columns(n_steps, 0.0, np.inf, energy_cost)

    served_by_class, served_groups = add_job_service(
        model,
        arrivals,
        foresight.bucket_due_step,
        t0,
        foresight.carry_allowance_gpuh,
        energy_cost * mw_per_gpuh,
        pen_sla,
        cl.n_gpus,
        dt_h,
    )
    add_cooling_rows(model, params, cooling, served_groups, cop, heat_offset, dt_h)
    # the plant draws what it removes at the setpoint, max(it + offset, 0) / COP, and no more:
    # where running it harder would pay (an import that earns more than the energy weight costs,
    # or a spill charged more), the row above becomes an equality, with a binary per step for
    # the plant idling where, the cluster parked, the envelope alone could take the heat away
    cheap = np.flatnonzero(energy_cost < spill_charge)
    if cheap.size:
        floor = it_base_mw + heat_offset[cheap]  # heat to remove with every GPU parked (MW)
        sure, clip = cheap[floor >= 0.0], cheap[floor < 0.0]
        model.rows(
            [(cooling[sure], cop[sure])],
            -np.inf,
            floor[floor >= 0.0],
            [served_groups[j] for j in sure],
            -mw_per_gpuh,
        )
        if clip.size:
            running = model.columns(clip.size, 0.0, 1.0, integer=True)
            # running: cooling * cop <= it + offset; idle: cooling = 0 (and so it + offset <= 0)
            model.rows(
                [(cooling[clip], cop[clip]), (running, -floor[floor < 0.0])],
                -np.inf,
                0.0,
                [served_groups[j] for j in clip],
                -mw_per_gpuh,
            )
            model.rows(
                [(cooling[clip], cop[clip]), (running, -params.cooling.q_max_mw)], -np.inf, 0.0
            )
    # power balance: diesel + discharge - charge + import - spill + deficit - cooling - it_var =
    # it_base - pv
    balance = [
        (diesel, 1.0),
        (discharge, 1.0),
        (charge, -1.0),
        (grid_import, 1.0),
        (spill, -1.0),
        (deficit, 1.0),
        (cooling, -1.0),
    ]
    rhs = it_base_mw + SUPPLY_MARGIN_MW - foresight.pv_mw
    model.rows(balance, rhs, rhs, served_groups, -mw_per_gpuh)
    # battery energy: e[j] - e[j-1] - eta_c dt ch + dt / eta_d dis = 0 (e[-1] = soc0 * capacity)
    e0 = foresight.soc * bat.energy_capacity_mwh
    storage = [
        (charge, -bat.charge_efficiency * dt_h),
        (discharge, dt_h / bat.discharge_efficiency),
    ]
    model.rows([(stored[:1], 1.0)] + [(c[:1], v) for c, v in storage], e0, e0)
    if n_steps > 1:
        model.rows(
            [(stored[1:], 1.0), (stored[:-1], -1.0)] + [(c[1:], v) for c, v in storage], 0.0, 0.0
        )
    # diesel: p_min on <= diesel <= rated on
    model.rows([(diesel, 1.0), (diesel_on, -dsl.p_min_mw)], 0.0, np.inf)
    model.rows([(diesel, 1.0), (diesel_on, -dsl.rated_mw)], -np.inf, 0.0)
    add_diesel_commitment(model, params, foresight, diesel_on, start, stop, dt_h)
    # the battery's energy at the day's end against its start, settled at the day's mean price
    bat_range = (bat.soc_max - bat.soc_min) * bat.energy_capacity_mwh  # bounds the columns
    price_m, wear = foresight.settlement_price_per_mwh, bat.degradation_cost_per_mwh
    surplus = model.columns(
        1, 0.0, bat_range, -w_cost * bat.discharge_efficiency * (price_m - wear)
    )
    shortage = model.columns(1, 0.0, bat_range, w_cost * (price_m + wear) / bat.charge_efficiency)
    model.rows(
        [(stored[-1:], 1.0), (surplus, -1.0), (shortage, 1.0)],
        foresight.stored_start_mwh,
        foresight.stored_start_mwh,
    )

    highs, v, status = model.solve(
        "dc_microgrid", t0, time_limit=MIP_TIME_LIMIT_S, mip_rel_gap=MIP_REL_GAP
    )

    actions = np.empty((n_steps, 5))
    actions[:, :2] = plan_shares(v, served_by_class, cl.n_gpus, dt_h)
    actions[:, 2] = setpoint
    actions[:, 3] = v[discharge] - v[charge]
    actions[:, 4] = np.where(v[diesel_on] > 0.5, np.maximum(v[diesel], dsl.p_min_mw), 0.0)

    overtemp_kh = np.maximum(zone_temp - params.zone.temp_max_c, 0.0).sum() * dt_h
    it_energy = it_base_mw * dt_h * n_steps * w_energy
    objective = highs.getInfo().objective_function_value - spill_charge @ v[spill]
    predicted = -(float(objective) + it_energy + pen_temp * overtemp_kh)
    return DayPlan(
        actions=actions, predicted_return=predicted, predicted_zone_temp_c=zone_temp, status=status
    )


def add_diesel_commitment(
    model: SparseModel,
    params: DCMicrogridParams,
    foresight: DayForesight,
    on: np.ndarray,
    start: np.ndarray,
    stop: np.ndarray,
    dt_h: float,
) -> None:
    """The diesel's status rows of a day plan.

    The status ``on`` [S] (columns in [0, 1]) is one binary per block of steps: a first block
    of the steps the status now must still hold (its minimum run or down time not yet over),
    held at that status, then blocks of ``L = max(min_up, min_down, 1)`` steps; so every run
    and every rest of the plan lasts at least its minimum time. ``start`` and ``stop`` [S]
    (columns in [0, 1], integral once ``on`` is, under the start-up cost) count the switches:
    ``on[j] - on[j-1] = start[j] - stop[j]`` from the status now. (Per-step binaries with
    minimum-time window rows found the same optimum on test days 0 and 1, three to six times
    slower: 18-34 s a day against 5 s.)
    """
    n_steps = on.size
    min_up, min_down = params.diesel.min_steps(dt_h)
    length = max(min_up, min_down, 1)
    was_on, held = float(foresight.diesel_on), int(foresight.diesel_steps)
    first = min(max((min_up if was_on else min_down) - held, 0), n_steps)  # steps to hold
    steps = np.arange(n_steps)
    block_of = np.where(steps < first, 0, (steps - first) // length + (first > 0))
    on_block = model.columns(int(block_of[-1]) + 1, 0.0, 1.0, integer=True)
    model.rows([(on, 1.0), (on_block[block_of], -1.0)], 0.0, 0.0)
    if first:
        model.rows([(on_block[:1], 1.0)], was_on, was_on)
    model.rows([(on[:1], 1.0), (start[:1], -1.0), (stop[:1], 1.0)], was_on, was_on)
    if n_steps > 1:
        model.rows([(on[1:], 1.0), (on[:-1], -1.0), (start[1:], -1.0), (stop[1:], 1.0)], 0.0, 0.0)
