"""What the AC transmission tasks share (``acopf_118``, ``voltage_control_118``): a meshed case
under the exact AC power flow, its calendar loads, one batched flow per step and its costs.

Network and loads
-----------------
The network is pandapower's model of the case (:func:`powerzoo.physics.ac_network.ac_network`:
lines, transformers, shunts, the units' voltage set-points and reactive limits); the branch
ratings are the voltage-class ratings of the DC tasks
(:func:`powerzoo.tasks.transmission.congestion_ready_case`; pandapower's case118 rates every
branch at 9,900 MVA), applied to the apparent power ``max(|S_from|, |S_to|)``.  Every bus draws
its published demand, active and reactive (each bus keeps its power factor), times the calendar
load shape of the data layer times ``load_scale`` (:data:`BASE_LOAD_SCALE`, as the DC tasks)::

    p_load[b, bus] = bus_pd_mw[bus] * load_scale * demand_pu(day, t)   (q_load alike)

Power flow
----------
One batched Newton / chord AC power flow per step
(:func:`powerzoo.physics.ac_pf.ac_power_flow`, validated against pandapower's ``runpp`` to
1e-6 p.u.): the units' active set-points and voltage set-points are the PV buses' data; the
slack unit takes the losses and the mismatch (its output is the flow's balance at the slack
bus).  A grid built with ``enforce_q_lims=True`` (``acopf_118``) enforces the units' reactive
limits as machines do: a unit whose set-point asks for reactive power beyond its limits is held
at the limit and stops holding its voltage (PV -> PQ switching, pandapower's
``runpp(enforce_q_lims=True)``), so only the slack unit can end outside its limits; otherwise
(``voltage_control_118``, where keeping the units inside their limits is the agents' constraint)
the limits are reported, not enforced.  The rule-based baselines move the set-points into the
limits either way (:meth:`ACGrid.reactive_limited_setpoints`, on flows without switching).

Costs (per step, all >= 0)
--------------------------
* ``voltage_violation`` [p.u.]: ``sum over buses of max(0.94 - v, 0) + max(v - 1.06, 0)``
  (the feeder tasks' measure, with the case's own band: case118 limits every bus to
  [0.94, 1.06] p.u.);
* ``thermal_overload`` [MVAh]: ``sum over branches of max(|S| - S_rated, 0) x dt``;
* ``reactive_limit`` [Mvarh]: reactive output of the voltage-controlling units outside their
  summed limits at each PV / slack bus, ``sum max(q - q_max, q_min - q, 0) x dt`` (with the
  limits enforced: the slack unit's only);
* ``pf_nonconvergence`` [steps]: 1 for a row whose flow did not converge.

A row whose flow does not converge (only far from any sensible operating point, e.g. voltage
set-points at opposite ends of their range next to each other) never raises: it is flagged in
``pf_converged``, charged ``pf_nonconvergence = 1`` and ``voltage_violation =
NONCONVERGED_VOLTAGE_PU_PER_BUS x n_bus`` (as if every bus had collapsed 0.1 p.u. outside the
band, the feeder tasks' rule), no overload nor reactive cost, zero losses, and the slack's output
is taken as the lossless balance (load - the other units' output); its voltages are the last
iterate (finite), not a solution.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from powerzoo.data.profiles import Profiles
from powerzoo.physics.ac_network import ACNetwork, ac_network
from powerzoo.physics.ac_pf import ac_power_flow
from powerzoo.physics.network import NetworkCase
from powerzoo.tasks.feeder import NONCONVERGED_VOLTAGE_PU_PER_BUS, time_features
from powerzoo.tasks.transmission import (
    BASE_LOAD_SCALE,
    OVERLOAD_PRICE_PER_MWH,
    congestion_ready_case,
)

__all__ = [
    "SECURE_LOADING",
    "ac_secure_rating_share",
    "AC_V_MIN_PU",
    "AC_V_MAX_PU",
    "AC_GRID_COSTS",
    "AC_GRID_COST_UNITS",
    "ACGrid",
    "ac_grid_costs",
    "ACStep",
    "BASE_LOAD_SCALE",
]

AC_V_MIN_PU, AC_V_MAX_PU = 0.94, 1.06  # case118's bus voltage limits (every bus)
Q_LIMIT_PASSES = 6  # AC flows the rules spend moving set-points into the reactive limits
Q_LIMIT_MARGIN_MVAR = 1.0  # how far inside a limit such a move aims [Mvar]
SECURE_LOADING = 0.94  # a secured dispatch loads a branch to at most this share (1 / 1.06 p.u.)
SECURE_PASSES = 10  # DC dispatches and AC flows ac_secure_rating_share may spend
AC_GRID_COSTS = ("voltage_violation", "thermal_overload", "reactive_limit", "pf_nonconvergence")
AC_GRID_COST_UNITS = (
    "p.u. (sum over buses, per step)",
    "MVAh (sum over branches)",
    "Mvarh (sum over voltage-controlling buses)",
    "steps",
)


def ac_grid_costs(
    days: float, nonconvergence_penalty: float | None = None
) -> tuple[tuple[str, str, float, float | None], ...]:
    """The AC tasks' grid costs for :func:`~powerzoo.tasks.spec.cmdp_fields`: name, unit,
    per-episode budget (1 p.u., 1 MVAh, 1 Mvarh and half a failed step a day, times ``days``) and
    ``penalized`` preset weight (1,000 $ per p.u., the overload price per MVAh and per Mvarh,
    ``nonconvergence_penalty`` $ per failed flow)."""
    return tuple(
        zip(
            AC_GRID_COSTS,
            AC_GRID_COST_UNITS,
            (1.0 * days, 1.0 * days, 1.0 * days, 0.5 * days),
            (1000.0, OVERLOAD_PRICE_PER_MWH, OVERLOAD_PRICE_PER_MWH, nonconvergence_penalty),
            strict=True,
        )
    )


class ACStep:
    """One batched AC flow and what the tasks take from it (arrays with leading axis ``B``)."""

    __slots__ = ("vm_pu", "gen_q_mvar", "slack_p_mw", "losses_mw", "costs", "info", "loading")

    def __init__(self, vm_pu, gen_q_mvar, slack_p_mw, losses_mw, costs, info, loading) -> None:
        self.vm_pu = vm_pu  # [B, n_bus] voltage magnitudes [p.u.]
        self.gen_q_mvar = gen_q_mvar  # [B, n_gen] reactive output of each unit's bus [Mvar]
        self.slack_p_mw = slack_p_mw  # [B] the slack unit's active output [MW]
        self.losses_mw = losses_mw  # [B] generation - load [MW] (0 where the flow failed)
        self.costs = costs  # [B, 4] AC_GRID_COSTS
        self.info = info  # grid info keys, each [B]
        self.loading = loading  # [B, n_branch] apparent power / rating (0 unrated, NaN failed)


class ACGrid:
    """A meshed case with its calendar loads and the step's AC flow.

    ``profiles`` / ``split_days``: the split's profiles and calendar days
    (:class:`powerzoo.tasks.base.Task`); ``step_hours``: the step length [h] of the energy
    costs; ``enforce_q_lims``: hold units at their reactive limits in every flow (PV -> PQ
    switching; module docstring).  Units are indexed as in the case (:attr:`case`,
    ``case.gen_bus``); exactly one of them (:attr:`slack_unit`) sits at the slack bus.
    """

    def __init__(
        self,
        case_name: str,
        profiles: Profiles,
        split_days: np.ndarray,
        load_scale: float,
        step_hours: float,
        enforce_q_lims: bool = False,
    ) -> None:
        self.network: ACNetwork = ac_network(case_name)
        self.enforce_q_lims = bool(enforce_q_lims)
        self.case: NetworkCase = congestion_ready_case(case_name)
        net, case = self.network, self.case
        if net.n_bus != case.n_bus or not np.array_equal(net.branch_from, case.branch_from_bus):
            raise ValueError(f"{case_name}: the AC and DC models order buses or branches apart")
        if np.unique(case.gen_bus).size != case.n_gen:
            raise ValueError(f"{case_name}: two units share a bus (one voltage set-point each)")
        self.gen_bus = case.gen_bus
        self.slack_bus = int(case.slack_bus)
        self.slack_unit = int(np.flatnonzero(case.gen_bus == self.slack_bus)[0])
        self.other_units = np.flatnonzero(np.arange(case.n_gen) != self.slack_unit)
        self._other_bus = case.gen_bus[self.other_units]
        self.load_scale = float(load_scale)
        self.step_hours = float(step_hours)
        self.steps_per_day = profiles.steps_per_day
        self.demand_pu = profiles.series["demand_pu"]
        self.day_start = split_days * profiles.steps_per_day
        self.bus_p_mw = case.bus_pd_mw * self.load_scale  # bus demand per unit of demand_pu
        self.bus_q_mvar = -net.q_mvar * self.load_scale
        self.rate_mva = np.where(np.isfinite(case.branch_rate_a_mw), case.branch_rate_a_mw, np.inf)
        self.vm_set_pu = net.vm_pu[case.gen_bus]  # the case's voltage set-points
        self.q_max_mvar = net.q_max_mvar[case.gen_bus]
        self.q_min_mvar = net.q_min_mvar[case.gen_bus]
        self.nonconverged_voltage_pu = NONCONVERGED_VOLTAGE_PU_PER_BUS * case.n_bus
        self.q_v_sensitivity_mvar = self._q_v_sensitivity_mvar()
        self._time_tables: dict[int, np.ndarray] = {}  # [horizon + 1, 3] time features per horizon

    def _q_v_sensitivity_mvar(self) -> np.ndarray:
        """``[n_gen, n_gen]`` [Mvar/p.u.]: how each unit's reactive output moves with the units'
        voltages [p.u.], the other buses' voltages free and their reactive injections held: the
        decoupled flow's ``dQ = -B dV`` (``B = Im(Y_bus) x base_mva``) reduced to the unit buses
        (Schur complement over the other buses), at 1 p.u."""
        net = self.network
        n = net.n_internal
        y = np.diag(net.y_shunt.astype(complex))
        f, t = net.branch_from, net.branch_to
        np.add.at(y, (f, f), net.y_ff)
        np.add.at(y, (t, t), net.y_tt)
        np.add.at(y, (f, t), net.y_ft)
        np.add.at(y, (t, f), net.y_tf)
        b = -y.imag * net.base_mva
        g = net.bus_internal[self.gen_bus]
        rest = np.setdiff1d(np.arange(n), g)
        b_gl = b[np.ix_(g, rest)]
        return b[np.ix_(g, g)] - b_gl @ np.linalg.solve(b[np.ix_(rest, rest)], b_gl.T)

    def reactive_limited_setpoints(
        self,
        demand_pu: np.ndarray,
        gen_p_mw: np.ndarray,
        gen_vm_pu: np.ndarray,
        passes: int = Q_LIMIT_PASSES,
        margin_mvar: float = Q_LIMIT_MARGIN_MVAR,
    ) -> np.ndarray:
        """Voltage set-points [B, n_gen] (p.u.) moved from ``gen_vm_pu`` until every unit's
        reactive output is inside its limits, as a regulator at its limit stops holding its
        voltage.  Per pass one batched AC flow (:meth:`solve`, inputs as there); the units
        outside their limits then move their set-points together so that, to first order
        (:attr:`q_v_sensitivity_mvar`), each lands ``margin_mvar`` [Mvar] inside its limit while
        every other unit keeps its set-point: a unit absorbing below ``q_min`` is raised, one
        above ``q_max`` lowered.  Set-points stay in [0.94, 1.06] p.u.; at most ``passes``
        flows; a row whose flow fails keeps its last set-points."""
        vm = np.array(gen_vm_pu, dtype=float)
        q_lo, q_hi = self.q_min_mvar + margin_mvar, self.q_max_mvar - margin_mvar
        sens = self.q_v_sensitivity_mvar
        eye = np.eye(sens.shape[0])
        held = np.zeros(vm.shape, dtype=bool)  # units that met a limit: they hold its reactive
        q_held = np.zeros(vm.shape)
        for _ in range(passes):
            flow = self.solve(demand_pu, gen_p_mw, vm, enforce_q_lims=False)
            q = flow.gen_q_mvar
            out = (q < self.q_min_mvar) | (q > self.q_max_mvar)
            out[~flow.info["pf_converged"]] = False
            if not out.any():
                break
            q_held = np.where(out & ~held, np.clip(q, q_lo, q_hi), q_held)
            held |= out
            target = np.where(held, q_held - q, 0.0)
            target[~flow.info["pf_converged"]] = 0.0
            system = np.where(held[:, :, None], sens, eye)
            step = np.linalg.solve(system, target[:, :, None])[:, :, 0]
            vm = np.clip(vm + step, AC_V_MIN_PU, AC_V_MAX_PU)
        return vm

    def base_operating_point(self) -> tuple[float, float, float]:
        """The case at its own loading: active losses [MW] of its AC flow and the lowest and
        highest bus voltage of its data [p.u.] (the units' set-points, the base solution
        elsewhere); what the tasks observe before their first step."""
        net = self.network
        losses = float(ac_power_flow(net, net.p_mw, net.q_mvar).p_mw.sum())
        return losses, float(np.nanmin(net.vm_pu)), float(np.nanmax(net.vm_pu))

    def observed_q_limits_mvar(self) -> np.ndarray:
        """Each unit's reactive limits ``[n_gen, 2]`` (min, max) [Mvar] as observed: a unit
        without a limit shows +-9,999 Mvar."""
        return np.clip(np.stack([self.q_min_mvar, self.q_max_mvar], axis=1), -9999.0, 9999.0)

    def time_and_load(self, day_id: np.ndarray, t: np.ndarray, horizon: int) -> np.ndarray:
        """The observation's ``[hour_sin, hour_cos, time_remaining, system_load_mw,
        system_load_next_mw]`` [B, 5] (float32) at step ``t`` [B] of episodes of ``horizon``
        steps started on split days ``day_id`` [B]: the system load [MW] now and a step later."""
        out = np.empty((t.size, 5), dtype=np.float32)
        table = self._time_tables.get(horizon)
        if table is None:
            steps = np.arange(horizon + 1)
            table = self._time_tables[horizon] = time_features(steps, self.steps_per_day, horizon)
        try:
            out[:, 0:3] = table.take(t, axis=0)
        except IndexError:  # stepped past the horizon without a reset
            out[:, 0:3] = time_features(t, self.steps_per_day, horizon)
        flat = self.flat_index(day_id[:, None], t[:, None] + np.arange(2))
        out[:, 3:5] = self.system_load_mw(flat)
        return out

    def flat_index(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Calendar step index [B] of step ``t`` of split day ``day_id`` (wrapping the year)."""
        return (self.day_start.take(day_id) + t) % self.demand_pu.size

    def system_load_mw(self, flat: np.ndarray) -> np.ndarray:
        """System active load [MW] at calendar steps ``flat`` (any shape)."""
        return self.demand_pu.take(flat) * self.bus_p_mw.sum()

    def solve(
        self,
        demand_pu: np.ndarray,
        gen_p_mw: np.ndarray,
        gen_vm_pu: np.ndarray,
        bus_p_mw: np.ndarray | None = None,
        bus_q_mvar: np.ndarray | None = None,
        enforce_q_lims: bool | None = None,
    ) -> ACStep:
        """The AC flow at system demand ``demand_pu`` [B] with the units' active set-points
        ``gen_p_mw`` [B, n_gen] (MW; the slack unit's entry is not read) and voltage set-points
        ``gen_vm_pu`` [B, n_gen] (p.u.); ``bus_p_mw`` / ``bus_q_mvar`` [B, n_bus]: further net
        injections (MW / Mvar, e.g. inverter-based units); ``enforce_q_lims``: hold the units
        at their reactive limits (default: the grid's :attr:`enforce_q_lims`).  Info keys, each
        ``[B]``: ``pf_converged``, ``losses_mw``, ``slack_p_mw``, ``v_min_pu``, ``v_max_pu``,
        ``max_branch_loading``, ``overload_mvah`` and ``reactive_excess_mvarh`` (the step's
        ``thermal_overload`` and ``reactive_limit`` costs) and ``q_limited_units`` (units held at
        a reactive limit)."""
        b = demand_pu.shape[0]
        d = demand_pu[:, None]
        p = d * -self.bus_p_mw
        q = d * -self.bus_q_mvar
        p[:, self._other_bus] += gen_p_mw[:, self.other_units]
        if bus_p_mw is not None:
            p += bus_p_mw
        if bus_q_mvar is not None:
            q += bus_q_mvar
        vm = np.broadcast_to(self.network.vm_pu, (b, self.case.n_bus)).copy()
        vm[:, self.gen_bus] = gen_vm_pu
        if enforce_q_lims is None:
            enforce_q_lims = self.enforce_q_lims
        flow = ac_power_flow(self.network, p, q, vm, enforce_q_lims=enforce_q_lims)
        converged = flow.converged
        v = flow.vm_pu
        dt = self.step_hours
        costs = np.empty((b, 4))
        outside = np.maximum(np.maximum(AC_V_MIN_PU - v, v - AC_V_MAX_PU), 0.0)
        costs[:, 0] = outside.sum(axis=1)
        s_from = np.hypot(flow.p_from_mw, flow.q_from_mvar)
        s_to = np.hypot(flow.p_to_mw, flow.q_to_mvar)
        mva = np.maximum(s_from, s_to)
        costs[:, 1] = np.maximum(mva - self.rate_mva, 0.0).sum(axis=1) * dt
        gen_q = flow.gen_q_mvar[:, self.gen_bus]
        beyond = np.maximum(np.maximum(gen_q - self.q_max_mvar, self.q_min_mvar - gen_q), 0.0)
        costs[:, 2] = beyond.sum(axis=1) * dt
        costs[:, 3] = 0.0
        slack_p = flow.p_mw[:, self.slack_bus] - p[:, self.slack_bus]
        losses = flow.p_mw.sum(axis=1)
        if not converged.all():
            failed = ~converged
            costs[failed] = (self.nonconverged_voltage_pu, 0.0, 0.0, 1.0)
            slack_p = np.where(failed, -p.sum(axis=1), slack_p)  # the lossless balance
            losses = np.where(failed, 0.0, losses)
            gen_q = np.where(failed[:, None], 0.0, gen_q)
        info = {
            "pf_converged": converged,
            "losses_mw": losses,
            "slack_p_mw": slack_p,
            "v_min_pu": v.min(axis=1),
            "v_max_pu": v.max(axis=1),
            "max_branch_loading": (mva / self.rate_mva).max(axis=1),
            "overload_mvah": costs[:, 1].copy(),
            "reactive_excess_mvarh": costs[:, 2].copy(),
            "q_limited_units": flow.n_q_limited.astype(float),
        }
        loading = mva / self.rate_mva
        loading[~converged] = np.nan
        return ACStep(v, gen_q, slack_p, losses, costs, info, loading)


def ac_secure_rating_share(
    grid: ACGrid,
    demand_pu: np.ndarray,
    dispatch: Callable[[NetworkCase], np.ndarray],
    loading: float = SECURE_LOADING,
    passes: int = SECURE_PASSES,
) -> np.ndarray:
    """Per-branch shares ``[n_branch]`` of the ratings that a DC dispatch must respect for its
    AC flows to load no branch above ``loading`` of its rating (an operator's security margin).

    ``dispatch(case)``: the units' active set-points ``[B, n_gen]`` [MW] at the system demands
    ``demand_pu`` ``[B]`` (p.u. of the grid's base load) of a DC dispatch on ``case`` (the
    grid's case with its ratings scaled); each pass dispatches on the ratings scaled so far, runs
    the AC flow of the grid's rule voltage schedule (the case's set-points moved into the
    reactive limits, :meth:`ACGrid.reactive_limited_setpoints`) and scales every branch above
    ``loading`` by ``loading`` / its largest loading over the rows, until none is above (at most
    ``passes`` passes; the last shares are returned either way)."""
    case = grid.case
    share = np.ones(case.n_branch)
    schedule = np.broadcast_to(grid.vm_set_pu, (demand_pu.size, case.n_gen))
    for _ in range(passes):
        scaled = dataclasses.replace(case, branch_rate_a_mw=case.branch_rate_a_mw * share)
        p = dispatch(scaled)
        vm = grid.reactive_limited_setpoints(demand_pu, p, schedule)
        worst = np.nanmax(grid.solve(demand_pu, p, vm).loading, axis=0)
        over = worst > loading
        if not over.any():
            break
        share[over] *= loading / worst[over]
    return share
