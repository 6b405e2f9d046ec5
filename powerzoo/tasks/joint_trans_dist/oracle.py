"""The perfect-foresight plan of the coupled tasks: one LP per episode (DC-OPF of the
transmission case joined with the feeders' batteries on LinDistFlow), then the generators
re-dispatched against the feeders' exact head power."""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.devices.inverter_battery import inverter_battery_step
from powerzoo.physics.dc_opf import solve_dc_opf
from powerzoo.physics.highs import new_highs
from powerzoo.tasks.feeder import add_voltage_band, unit_variables, voltage_sq_sensitivity

__all__ = ["COST_SEGMENTS", "plan_episode"]

COST_SEGMENTS = 4  # secant segments of a quadratic cost curve in the episode LP
SMALL_MATRIX_VALUE = 1e-9  # HiGHS drops (with a warning) constraint coefficients this small


def _drop_tiny(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with the entries HiGHS would drop (``|x| <= 1e-9``, its ``small_matrix_value``)
    set to 0, so that adding the rows raises no warning (case118's shift factors have some)."""
    return np.where(np.abs(matrix) <= SMALL_MATRIX_VALUE, 0.0, matrix)


def _generation_cost(h: Any, case: Any, gen: Any, dt: float) -> Any:
    """The LP's generation cost ($) of outputs ``gen`` [T, n_gen] (HiGHS variables, MW) over
    steps of ``dt`` hours: ``c1 x p`` (the constant ``c0`` left out), or, where any unit's cost
    is quadratic, its secants over :data:`COST_SEGMENTS` equal segments above ``Pmin``."""
    c1, c2 = case.gen_c1_per_mwh, case.gen_c2_per_mw2h
    if not np.any(c2 > 0.0):
        return h.qsum((dt * c1[None, :] * gen).ravel())
    n_t, k = gen.shape[0], COST_SEGMENTS
    pmin, pmax = case.gen_pmin_mw, case.gen_pmax_mw
    width = (pmax - pmin) / k  # [n_gen]
    seg = [unit_variables(h, n_t, np.zeros(case.n_gen), width) for _ in range(k)]
    total = seg[0]
    for part in seg[1:]:
        total = total + part
    h.addConstrs((gen - total).ravel() == np.tile(pmin, n_t))
    cost = None
    for j, part in enumerate(seg):  # the secant of c2 p^2 + c1 p over segment j
        slope = c1 + c2 * (2.0 * pmin + (2 * j + 1) * width)
        term = h.qsum((dt * slope[None, :] * part).ravel())
        cost = term if cost is None else cost + term
    return cost


def plan_episode(task: Any, state: Any, row: int) -> np.ndarray:
    """Actions [H - t0, n_agents] (MW) for the rest of row ``row``'s episode of ``task`` (a
    :class:`~powerzoo.tasks.joint_trans_dist.task.JointTransDist`) from its ``state``.

    Stage 1, one LP on HiGHS: minimise ``sum_t dt (c1 . p_t + overload_price x line slack_t +
    wear x battery throughput_t)`` less the settlement of the stored energy, plus the feeders'
    soft voltage band (:func:`powerzoo.tasks.feeder.add_voltage_band`), over generator outputs
    ``p_t`` in ``[Pmin, Pmax]``, battery charge and discharge in ``[0, P]`` and stored energy
    within the SOC bounds; each feeder's head power is its idle head power (exact flow) plus
    its batteries' net charge (losses held at their idle value), the generation meets the
    transmission loads plus the head powers, and every rated branch's DC flow stays within its
    rating plus a priced slack. The costs are linear where the case's are (``c1``; case5) and
    quadratic costs are replaced by their secants over :data:`COST_SEGMENTS` equal segments of
    ``[Pmin, Pmax]`` (case118). Stage 2: the batteries' plan is stepped through the battery
    model, each feeder's exact flow gives its head power, and a DC-OPF per step (soft limits at
    the overload price) dispatches the generators against those loads, so the plan is balanced
    under the exact flows.
    """
    import highspy

    p = task.params
    case, dt = task.case, task.spec.dt_h
    t0 = int(state.t[row])
    steps = np.arange(task.horizon - t0)
    flat = task.flat_index(np.full(steps.size, state.day_id[row]), t0 + steps)
    demand = task.demand.take(flat)
    base = demand[:, None] * task.bus_load_scale  # [T, n_bus] transmission loads
    n_t, n_b = steps.size, task.n_bat
    bat = task.battery
    cap = bat.energy_capacity_mwh
    h = new_highs()
    gen = unit_variables(h, n_t, case.gen_pmin_mw, case.gen_pmax_mw)
    charge = unit_variables(h, n_t, np.zeros(n_b), bat.power_max_mw)
    discharge = unit_variables(h, n_t, np.zeros(n_b), bat.power_max_mw)
    stored = unit_variables(h, n_t, bat.soc_min * cap, bat.soc_max * cap)
    stored_in = (bat.charge_efficiency * dt) * charge - (dt / bat.discharge_efficiency) * discharge
    h.addConstrs(stored[0] - stored_in[0] == state.soc[row] * cap)
    if n_t > 1:
        h.addConstrs((stored[1:] - stored[:-1] - stored_in[1:]).ravel() == 0.0)
    net = charge - discharge  # [T, n_bat] MW drawn from the feeders
    penalty = None
    heads_idle = task.idle_head.take(flat, axis=0)  # [T, n_feeders]
    load = base.copy()
    limited = np.flatnonzero(np.isfinite(case.branch_rate_a_mw))
    ptdf_t = _drop_tiny(task.ptdf_t[:, limited])  # [n_bus, n_lim]
    # the flow the batteries' net charge adds at each boundary bus [T, n_lim]
    battery_flow = None
    for i, (grid, f, bats) in enumerate(
        zip(task.grids, task.feeders, task.bat_slices, strict=True)
    ):
        load[:, f.boundary_bus] += heads_idle[:, i]
        k = bats.stop - bats.start
        part = net[:, bats] @ np.outer(np.ones(k), -ptdf_t[f.boundary_bus])
        battery_flow = part if battery_flow is None else battery_flow + part
        v2_base = grid.solve(*grid.bus_loads(demand)).vm_pu ** 2
        sens = _drop_tiny(voltage_sq_sensitivity(grid.case, np.asarray(f.battery_buses)))
        bound = np.broadcast_to(np.abs(sens).T @ bat.power_max_mw[bats], v2_base.shape)
        term = add_voltage_band(h, v2_base, net[:, bats] @ sens, bound, p.oracle_margin_pu)
        if term is not None:
            penalty = term if penalty is None else penalty + term
    # balance: generation = transmission loads + head powers
    h.addConstrs(gen @ np.ones(case.n_gen) - net @ np.ones(n_b) == load.sum(axis=1))
    objective = _generation_cost(h, case, gen, dt)
    if limited.size:
        flow = gen @ _drop_tiny(task.gsf[:, limited]) + battery_flow - load @ ptdf_t  # [T, n_lim]
        slack = unit_variables(h, n_t, np.zeros(limited.size), np.full(limited.size, np.inf))
        rate = case.branch_rate_a_mw[limited]
        h.addConstrs((flow - slack).ravel() <= np.tile(rate, n_t))
        h.addConstrs((flow + slack).ravel() >= -np.tile(rate, n_t))
        objective = objective + h.qsum((dt * p.overload_penalty_per_mwh * slack).ravel())
    deg = bat.degradation_cost_per_mwh
    objective = objective + h.qsum((dt * deg * (charge + discharge)).ravel())
    surplus = unit_variables(h, 1, np.zeros(n_b), np.full(n_b, np.inf))[0]
    deficit = unit_variables(h, 1, np.zeros(n_b), np.full(n_b, np.inf))[0]
    h.addConstrs(stored[n_t - 1] - surplus + deficit == bat.soc_init * cap)
    m = float(task.settlement_price(state.day_id[row : row + 1])[0])
    eta_c, eta_d = bat.charge_efficiency, bat.discharge_efficiency
    objective = (
        objective - h.qsum(eta_d * (m - deg) * surplus) + h.qsum((m + deg) / eta_c * deficit)
    )
    h.minimize(objective if penalty is None else objective + penalty)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(
            f"{task.spec.task_id} oracle LP failed: {h.modelStatusToString(h.getModelStatus())}"
        )
    request = h.vals(discharge) - h.vals(charge)  # [T, n_bat] MW, + discharge
    # stage 2: the batteries as the model applies them, the exact head powers, the DC-OPF
    soc = state.soc[row : row + 1].copy()
    applied = np.empty_like(request)
    for k in range(n_t):
        result = inverter_battery_step(bat, soc, request[k : k + 1], np.zeros((1, n_b)), dt)
        applied[k], soc = result.p_mw[0], result.soc
    flows = task.feeder_flows(demand, applied, None)
    heads = np.stack([f.info["feeder_p_mw"] for f in flows], axis=1)
    dispatch = solve_dc_opf(
        case, task.transmission_loads(demand, heads), soft_line_penalty=p.overload_penalty_per_mwh
    )
    return np.concatenate([dispatch.gen_p_mw, applied], axis=1)
