"""The plans of the coupled tasks, each for the rest of one row's episode:

* :func:`plan_episode` (the oracle): one LP per episode, the DC-OPF of the transmission case
  joined with the feeders' batteries on LinDistFlow;
* :func:`separate_plan` (``separate``): transmission first, then distribution: the DC-OPF at
  the expected boundary injections (batteries idle) gives each boundary bus's day-ahead LMP,
  then each feeder's batteries are planned alone against that price (price takers);
* :func:`flex_idle_plan` (``flex_idle``): the batteries idle;

and in every one the generators re-dispatched (a DC-OPF per step) against the feeders' exact
head powers under the planned batteries."""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.devices.inverter_battery import inverter_battery_step
from powerzoo.physics.dc_opf import solve_dc_opf
from powerzoo.physics.highs import new_highs
from powerzoo.tasks.feeder import add_voltage_band, unit_variables, voltage_sq_sensitivity

__all__ = ["COST_SEGMENTS", "plan_episode", "separate_plan", "flex_idle_plan"]

COST_SEGMENTS = 16  # secant segments of a quadratic cost curve in the episode LP
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


class _BatteryLP:
    """The batteries' part of a row's episode LP (HiGHS model ``h``): charge, discharge and
    stored energy per step and battery (one copy's), the SOC balance, the settlement of the
    stored energy, the wear and each feeder's soft voltage band (its head voltage moving with its
    own copies' draw, :meth:`~powerzoo.tasks.joint_trans_dist.boundary.Boundary.
    head_sensitivity_pu_per_mw`). :attr:`objective` is that cost ($, every copy)."""

    def __init__(self, h: Any, task: Any, state: Any, row: int, flat: np.ndarray) -> None:
        p, bat, dt = task.params, task.battery, task.spec.dt_h
        n_t, n_b = flat.size, task.n_bat
        cap = bat.energy_capacity_mwh
        self.charge = unit_variables(h, n_t, np.zeros(n_b), bat.power_max_mw)
        self.discharge = unit_variables(h, n_t, np.zeros(n_b), bat.power_max_mw)
        stored = unit_variables(h, n_t, bat.soc_min * cap, bat.soc_max * cap)
        eta_c, eta_d = bat.charge_efficiency, bat.discharge_efficiency
        stored_in = (eta_c * dt) * self.charge - (dt / eta_d) * self.discharge
        h.addConstrs(stored[0] - stored_in[0] == state.soc[row] * cap)
        if n_t > 1:
            h.addConstrs((stored[1:] - stored[:-1] - stored_in[1:]).ravel() == 0.0)
        self.net = self.charge - self.discharge  # [T, n_bat] MW drawn per copy
        copies = task.bat_copies
        deg = bat.degradation_cost_per_mwh
        cost = h.qsum((dt * deg * (self.charge + self.discharge) * copies[None, :]).ravel())
        surplus = unit_variables(h, 1, np.zeros(n_b), np.full(n_b, np.inf))[0]
        deficit = unit_variables(h, 1, np.zeros(n_b), np.full(n_b, np.inf))[0]
        h.addConstrs(stored[n_t - 1] - surplus + deficit == bat.soc_init * cap)
        m = task.settlement_price(state.day_id[row : row + 1])[0].take(task.bat_feeder)
        cost = (
            cost
            - h.qsum(eta_d * (m - deg) * copies * surplus)
            + h.qsum((m + deg) / eta_c * copies * deficit)
        )
        demand = task.demand.take(flat)
        head = task.head_voltage_pu(flat, np.zeros((n_t, n_b)))  # [T, n_feeders]
        dhead = task.boundary_model.head_sensitivity_pu_per_mw()  # [n_feeders]
        for i, (grid, f, bats) in enumerate(
            zip(task.grids, task.feeders, task.bat_slices, strict=True)
        ):
            v2_base = grid.solve(*grid.bus_loads(demand), head_vm_pu=head[:, i]).vm_pu ** 2
            sens = voltage_sq_sensitivity(grid.case, np.asarray(f.battery_buses))
            sens = _drop_tiny(sens + 2.0 * dhead[i])  # the head moves every bus
            bound = np.broadcast_to(np.abs(sens).T @ bat.power_max_mw[bats], v2_base.shape)
            term = add_voltage_band(h, v2_base, self.net[:, bats] @ sens, bound, p.oracle_margin_pu)
            if term is not None:
                cost = cost + term
        self.objective = cost


def _solve(h: Any, task: Any, objective: Any, what: str) -> None:
    import highspy

    h.minimize(objective)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(
            f"{task.spec.task_id} {what} LP failed: {h.modelStatusToString(h.getModelStatus())}"
        )


def _rest_of_episode(task: Any, state: Any, row: int) -> np.ndarray:
    """Calendar steps [H - t0] of the rest of row ``row``'s episode."""
    t0 = int(state.t[row])
    steps = np.arange(task.horizon - t0)
    return task.flat_index(np.full(steps.size, state.day_id[row]), t0 + steps)


def dispatch_against(task: Any, state: Any, row: int, request: np.ndarray) -> np.ndarray:
    """Actions [T, n_agents] (MW) with the batteries asked for ``request`` [T, n_bat] (MW per
    copy, + discharge) over the rest of row ``row``'s episode: the requests stepped through the
    battery model, each feeder's exact flow (at its head voltage) giving its head power, and a
    DC-OPF per step (soft limits at the overload price) dispatching the generators against those
    loads, so the plan is balanced under the exact flows."""
    flat = _rest_of_episode(task, state, row)
    bat, dt = task.battery, task.spec.dt_h
    soc = state.soc[row : row + 1].copy()
    applied = np.empty_like(request)
    for k in range(flat.size):
        result = inverter_battery_step(bat, soc, request[k : k + 1], np.zeros((1, task.n_bat)), dt)
        applied[k], soc = result.p_mw[0], result.soc
    flows, _ = task.feeder_flows(flat, applied, None)
    heads = np.stack([f.info["feeder_p_mw"] for f in flows], axis=1) * task.copies
    loads = task.transmission_loads(task.demand.take(flat), heads)
    dispatch = solve_dc_opf(
        task.case, loads, soft_line_penalty=task.params.overload_penalty_per_mwh
    )
    return np.concatenate([dispatch.gen_p_mw, applied], axis=1)


def plan_episode(task: Any, state: Any, row: int) -> np.ndarray:
    """The oracle's actions [H - t0, n_agents] (MW) for the rest of row ``row``'s episode of
    ``task`` (a :class:`~powerzoo.tasks.joint_trans_dist.task.JointTransDist`) from its
    ``state``.

    Stage 1, one LP on HiGHS: minimise ``sum_t dt (c1 . p_t + overload_price x line slack_t)``
    plus the batteries' wear less the settlement of their stored energy and the feeders' soft
    voltage band (:class:`_BatteryLP`), over generator outputs ``p_t`` in ``[Pmin, Pmax]`` and
    the batteries; each feeder's head power is its idle head power (exact flow) plus its
    batteries' net charge, x its copies (losses held at their idle value), the generation meets
    the transmission loads plus the head powers, and every rated branch's DC flow stays within
    its rating plus a priced slack. The costs are linear where the case's are (``c1``; case5)
    and quadratic costs are replaced by their secants over :data:`COST_SEGMENTS` equal segments
    of ``[Pmin, Pmax]`` (case118); every rated branch's flow is planned within ``1 -
    oracle_line_margin`` of its rating. Stage 2: :func:`dispatch_against` the planned batteries.
    """
    p = task.params
    case, dt = task.case, task.spec.dt_h
    flat = _rest_of_episode(task, state, row)
    n_t, n_b = flat.size, task.n_bat
    h = new_highs()
    gen = unit_variables(h, n_t, case.gen_pmin_mw, case.gen_pmax_mw)
    lp = _BatteryLP(h, task, state, row, flat)
    net = lp.net * task.bat_copies[None, :]  # [T, n_bat] MW drawn over every copy
    load = task.transmission_loads(
        task.demand.take(flat), task.idle_head.take(flat, axis=0) * task.copies
    )
    limited = np.flatnonzero(np.isfinite(case.branch_rate_a_mw))
    ptdf_t = _drop_tiny(task.ptdf_t[:, limited])  # [n_bus, n_lim]
    # balance: generation = transmission loads + head powers
    h.addConstrs(gen @ np.ones(case.n_gen) - net @ np.ones(n_b) == load.sum(axis=1))
    objective = _generation_cost(h, case, gen, dt) + lp.objective
    if limited.size:
        # the flow the batteries' net charge adds at each boundary bus [T, n_lim]
        shift = -ptdf_t[task.boundary.take(task.bat_feeder)]  # [n_bat, n_lim]
        flow = gen @ _drop_tiny(task.gsf[:, limited]) + net @ shift - load @ ptdf_t
        slack = unit_variables(h, n_t, np.zeros(limited.size), np.full(limited.size, np.inf))
        rate = case.branch_rate_a_mw[limited] * (1.0 - p.oracle_line_margin)
        h.addConstrs((flow - slack).ravel() <= np.tile(rate, n_t))
        h.addConstrs((flow + slack).ravel() >= -np.tile(rate, n_t))
        objective = objective + h.qsum((dt * p.overload_penalty_per_mwh * slack).ravel())
    _solve(h, task, objective, "oracle")
    request = h.vals(lp.discharge) - h.vals(lp.charge)  # [T, n_bat] MW, + discharge
    return dispatch_against(task, state, row, request)


def separate_plan(task: Any, state: Any, row: int) -> np.ndarray:
    """The ``separate`` baseline's actions [H - t0, n_agents] (MW) for the rest of row
    ``row``'s episode: transmission first, then distribution. The boundary buses' day-ahead
    LMPs (the DC-OPF at the expected injections, batteries idle:
    :meth:`~powerzoo.tasks.joint_trans_dist.task.JointTransDist.boundary_price`) are taken as
    given, each battery's energy is bought and sold at its boundary's LMP in one LP over the
    episode (wear, settlement and the feeders' voltage band as the oracle's, :class:`_BatteryLP`),
    and the generators are re-dispatched against the resulting head powers
    (:func:`dispatch_against`)."""
    dt = task.spec.dt_h
    flat = _rest_of_episode(task, state, row)
    h = new_highs()
    lp = _BatteryLP(h, task, state, row, flat)
    price = task.boundary_price(flat).take(task.bat_feeder, axis=1)  # [T, n_bat]
    pay = h.qsum((dt * price * task.bat_copies[None, :] * lp.net).ravel())
    _solve(h, task, lp.objective + pay, "separate")
    request = h.vals(lp.discharge) - h.vals(lp.charge)
    return dispatch_against(task, state, row, request)


def flex_idle_plan(task: Any, state: Any, row: int) -> np.ndarray:
    """The ``flex_idle`` baseline's actions [H - t0, n_agents] (MW) for the rest of row
    ``row``'s episode: the batteries at 0 MW and the generators at the DC-OPF of each step
    (:func:`dispatch_against`): the transmission's own optimum with the distribution's
    flexibility idle."""
    n_t = task.horizon - int(state.t[row])
    return dispatch_against(task, state, row, np.zeros((n_t, task.n_bat)))
