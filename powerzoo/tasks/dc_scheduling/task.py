"""The ``dc_scheduling`` task: batched state, reset / observe / step and baselines.

The model is described in :mod:`powerzoo.tasks.dc_scheduling`; the spec is in :mod:`.spec`, the
oracle's LP in :mod:`.oracle`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data.workload import JOB_CLASSES, get_workload, workload_scenario_of_split
from powerzoo.devices.cooling import cooling_cop
from powerzoo.devices.job_queue import per_bucket
from powerzoo.physics.radial_sweep import feeder_plan
from powerzoo.tasks.base import StepOutput
from powerzoo.tasks.datacentre.model import DataCentre
from powerzoo.tasks.datacentre.planning import ORACLE_SETPOINT_C, it_power_model, zone_trajectory
from powerzoo.tasks.datacentre.rule import rule_compute_and_cooling
from powerzoo.tasks.datacentre.site import SETPOINT_MIN_C
from powerzoo.tasks.dc_scheduling.oracle import ORACLE_PASSES, line_headroom_mw, solve_day_lp
from powerzoo.tasks.dc_scheduling.spec import (
    CASE,
    CONSTRAINTS,
    DC_POWER_FACTOR,
    EXOGENOUS_OBS,
    GRID_OBS,
    HORIZON,
    QUEUE_OBS,
    SLA_PENALTY_PER_GPUH,
    STEP_MINUTES,
    DCSchedulingParams,
    dc_scheduling_spec,
)
from powerzoo.tasks.feeder import FeederTask, voltage_sq_sensitivity
from powerzoo.tasks.spec import TaskSpec

__all__ = ["DCScheduling", "DCSchedulingState"]


@dataclasses.dataclass
class DCSchedulingState:
    """Batched state; leading axis B. C = 2 job classes, K = 25 deadline buckets."""

    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    zone_temp_c: np.ndarray  # [B] server-zone temperature (deg C)
    queue_cum_gpuh: np.ndarray  # [B, C, K] work due by the end of each bucket (cumulative, GPU-h)
    arrived_gpuh: np.ndarray  # [B, C] work arrived this episode, initial queue included
    served_gpuh: np.ndarray  # [B, C] work done this episode
    dropped_gpuh: np.ndarray  # [B, C] work dropped at its deadline this episode
    carry_allowance_gpuh: np.ndarray  # [B, C] work due after the day that may be left at its end
    due_1h_gpuh: np.ndarray  # [B, C] work due by the end of the current hour
    required_gpus: np.ndarray  # [B, C] least allocation meeting every deadline
    grid_obs: np.ndarray  # [B, 4] last flow: v_min, v at the DC bus, largest loading, DC load (MW)
    flow_demand_pu: np.ndarray  # [B] demand_pu of the last flow
    v_complex_pu: np.ndarray  # [B, n_bus] last flow's voltages (warm start)


class DCScheduling(FeederTask):
    """The ``dc_microgrid`` data centre on the 33-bus feeder: schedule jobs and cooling
    against price and voltage.

    ## Description
    The 2,048-GPU data centre of ``dc_microgrid`` (no PV, battery or diesel) draws its facility
    power from bus 5 (0-based 4) of the IEEE 33-bus feeder ``case33bw`` at power factor 0.95; the
    feeder's other loads are its base load x ``load_scale`` (0.4) x the calendar load shape. One
    exact AC power flow per 30-minute step. Serving the afternoon's work as it comes takes the
    feeder out of its voltage band on many test days; moving loose-deadline training work off the
    peaks keeps it in.

    ## Action
    ``[training_share, finetune_share, cooling_setpoint_c]``: fractions of the GPUs given to each
    job class (scaled down when they sum above 1; the rest are parked) and the zone setpoint in
    [18, 32] deg C.

    ## Observation
    17 entries: time, outdoor temperature, price, ``demand_pu``, zone temperature, the previous
    step's flow (``v_min_pu``, ``dc_bus_v_pu``, ``max_branch_loading``, ``dc_load_mw``) and per job
    class ``queued_gpuh``, ``due_1h_gpuh``, ``required_gpus``.

    ## Reward
    $ per step: ``-(price x (it_mw + cooling_mw) x dt) - 10 $/GPU-h x sla_violation``; terms
    ``[energy_cost, sla_penalty]``. The ``penalized`` preset also charges 1,000 $ per p.u. of
    voltage violation, 2,000 $ per MVAh of overload and 100 $ per K h of overtemperature.

    ## Costs
    ``voltage_violation`` (p.u. outside [0.95, 1.05] summed over buses), ``thermal_overload``
    (MVAh above the line ratings), ``sla_violation`` (GPU-h), ``overtemperature`` (K h above
    27 deg C).

    ## Starting state
    The day's queued work, the zone at ``initial_zone_temp_c``; grid fields from the flow of the
    first step's loads with every GPU parked.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``dc_bus`` (0-based feeder bus, default 4), ``load_scale`` (feeder load, default 0.4),
    ``initial_zone_temp_c``; ``cluster``, ``cooling`` and ``zone`` take the data centre's device
    parameters; ``market`` picks the price model (``powerzoo.data.markets``).

    ## Baselines
    Random; rule-based = the data centre's compute and cooling rule of ``dc_microgrid``, blind to
    the feeder; oracle = a perfect-foresight day plan (one LP on HiGHS, voltage band on LinDistFlow
    around the exact flow), applied under the exact flow.
    """

    task_id = "dc_scheduling"
    Params = DCSchedulingParams
    case_name = CASE

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        super().__init__(split, **task_kwargs)
        p = self.params
        self.workload = get_workload(workload_scenario_of_split(split), STEP_MINUTES)
        self.tan_phi = float(np.tan(np.arccos(DC_POWER_FACTOR)))
        series = self.profiles.series
        self._exogenous = np.stack([series[k] for k in EXOGENOUS_OBS], axis=1).astype(
            np.float32
        )  # [T, 3] observation
        obs = self.spec.observation
        self._obs_dim = obs.dim
        self._s_time, self._s_exo = (
            obs.slot("hour_sin", "hour_cos", "time_remaining"),
            obs.slot(*EXOGENOUS_OBS),
        )
        self._s_zone, self._s_grid = obs.slot("zone_temp_c"), obs.slot(*GRID_OBS)
        self._s_queue = {f: obs.slot(*(f"{j.name}_{f}" for j in JOB_CLASSES)) for f in QUEUE_OBS}
        # warm start of each step's flow: the last flow's voltages moved by the first-order change
        # dv = -Z conj(dS / v) of the DC's and the feeder's load change (common-path impedances Z,
        # p.u.)
        case, plan = self.grid.case, feeder_plan(self.grid.case)
        z = np.zeros((case.n_bus, case.n_bus), dtype=complex)
        z[np.ix_(plan.order, plan.order)] = plan.z_path
        self._z_dc = z[p.dc_bus]  # [n_bus] per p.u. of DC current
        self._z_demand = (
            (self.grid.bus_p_mw - 1j * self.grid.bus_q_mvar) / case.base_mva
        ) @ z  # per unit of demand_pu
        self._dc_conj_s = (1.0 - 1j * self.tan_phi) / case.base_mva  # conj(S) per MW of DC load
        self._feeder_p_mw = float(
            self.grid.bus_p_mw.sum()
        )  # feeder load per unit of demand_pu (MW)
        self._init_step_constants()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_dc", "_inputs")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_step_constants()

    def _init_step_constants(self) -> None:
        """The data centre's step tables and, per calendar step, [temp, price, demand, condenser
        temperature]."""
        p, series = self.params, self.profiles.series
        self._dc = DataCentre(p.cluster, p.cooling, p.zone, self.workload, HORIZON, self.spec.dt_h)
        self._neg_dt, self._sla_price = np.array(-self.spec.dt_h), np.array(-SLA_PENALTY_PER_GPUH)
        temp = series["temp_c"]
        self._inputs = np.ascontiguousarray(
            np.stack(
                [
                    temp,
                    series["price_per_mwh"],
                    series["demand_pu"],
                    self._dc.plant.condenser_temp_c(temp),
                ]
            )
        )

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def spec_for(cls, params: DCSchedulingParams) -> TaskSpec:
        return dc_scheduling_spec(cls.task_id, params)

    # ---- batched model ----------------------------------------------------------------------
    def _flow(
        self, demand: np.ndarray, dc_mw: np.ndarray, v_init: np.ndarray | None
    ) -> tuple[Any, np.ndarray]:
        """Exact power flow of the feeder loads at ``demand`` [B] plus the data centre's ``dc_mw``
        [B],
        and the total net load [B] (MW)."""
        p, q = self.grid.bus_loads(demand)
        bus = self.params.dc_bus
        p[:, bus] += dc_mw
        q[:, bus] += dc_mw * self.tan_phi
        return self.grid.solve(p, q, v_init), demand * self._feeder_p_mw + dc_mw

    def _grid_obs(self, flow: Any, dc_mw: np.ndarray) -> np.ndarray:
        out = np.empty((dc_mw.size, len(GRID_OBS)))
        out[:, 0] = flow.info["v_min_pu"]
        out[:, 1] = flow.vm_pu[:, self.params.dc_bus]
        out[:, 2] = flow.info["max_branch_loading"]
        out[:, 3] = dc_mw
        return out

    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> DCSchedulingState:
        day_id, t, idx = self.first_step(day_id)
        b, dc, p = day_id.size, self._dc, self.params
        cum, allowance = dc.initial_queue(self.split_days[day_id], idx)
        due_1h, required = dc.outlook(cum, t, allowance)
        parked = np.full(b, it_power_model(p.cluster, self.spec.dt_h)[0])
        flow, _ = self._flow(self.grid.demand_pu.take(idx), parked, None)
        zeros = np.zeros(cum.shape[:2])
        demand = self.grid.demand_pu.take(idx)
        return DCSchedulingState(
            day_id,
            t,
            np.full(b, p.initial_zone_temp_c),
            cum,
            cum[:, :, -1].copy(),
            zeros,
            zeros.copy(),
            allowance,
            due_1h,
            required,
            self._grid_obs(flow, parked),
            demand,
            flow.v_complex_pu,
        )

    def observe(self, state: DCSchedulingState) -> np.ndarray:
        t = state.t
        obs = np.empty((t.size, self._obs_dim), dtype=np.float32)
        obs[:, self._s_time] = self.time_obs(t)
        obs[:, self._s_exo] = self._exogenous.take(self.grid.flat_index(state.day_id, t), axis=0)
        obs[:, self._s_zone] = state.zone_temp_c
        obs[:, self._s_grid] = state.grid_obs
        obs[:, self._s_queue["queued_gpuh"]] = state.queue_cum_gpuh[:, :, -1]
        obs[:, self._s_queue["due_1h_gpuh"]] = state.due_1h_gpuh
        obs[:, self._s_queue["required_gpus"]] = state.required_gpus
        return obs

    def step(
        self, state: DCSchedulingState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[DCSchedulingState, StepOutput]:
        dc, t = self._dc, state.t
        idx = self.grid.flat_index(state.day_id, t)
        temp_out, price, demand, condenser_c = self._inputs.take(idx, axis=1)
        gpus, cum, served, it_mw = dc.compute(state.queue_cum_gpuh, action[:, :2])
        setpoint = action[:, 2]
        zone_temp, cooling_mw = dc.cool(state.zone_temp_c, temp_out, condenser_c, setpoint, it_mw)
        facility_mw = it_mw + cooling_mw
        v = state.v_complex_pu
        d_current = (
            (facility_mw - state.grid_obs[:, 3])
            * self._dc_conj_s
            / np.conj(v[:, self.params.dc_bus])
        )
        v_init = (
            v
            - np.multiply.outer(d_current, self._z_dc)
            - np.multiply.outer(demand - state.flow_demand_pu, self._z_demand)
        )
        flow, net_load = self._flow(demand, facility_mw, v_init)
        b = t.size
        costs = np.zeros((b, len(CONSTRAINTS)))
        costs[:, :2] = flow.costs
        dc.overtemperature_kh(zone_temp, out=costs[:, 3])
        q = dc.advance(cum, t, idx, state.carry_allowance_gpuh, state.dropped_gpuh)
        if q.sla_gpuh is not None:
            costs[:, 2] = q.sla_gpuh
        terms = np.empty((b, 2))
        np.multiply(price * facility_mw, self._neg_dt, out=terms[:, 0])
        np.multiply(costs[:, 2], self._sla_price, out=terms[:, 1])
        new_state = DCSchedulingState(
            state.day_id,
            t + 1,
            zone_temp,
            q.cum,
            state.arrived_gpuh + q.arrived,
            state.served_gpuh + served,
            q.dropped_gpuh,
            q.allowance,
            q.due_1h,
            q.required,
            self._grid_obs(flow, facility_mw),
            demand,
            flow.v_complex_pu,
        )
        applied = np.empty_like(action)
        np.multiply(gpus, dc.per_gpu, out=applied[:, :2])
        applied[:, 2] = setpoint
        return new_state, self.feeder_output(
            flow,
            terms[:, 0] + terms[:, 1],
            terms,
            costs,
            applied,
            net_load_mw=net_load,
            price_per_mwh=price,
            demand_pu=demand,
            temp_c=temp_out,
            it_mw=it_mw,
            cooling_mw=cooling_mw,
            dc_load_mw=facility_mw,
            dc_bus_v_pu=new_state.grid_obs[:, 1],
            zone_temp_c=zone_temp,
            **dc.queue_info(gpus, served, new_state.arrived_gpuh, new_state.served_gpuh, q),
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """The data centre's compute and cooling rule
        (:func:`~powerzoo.tasks.datacentre.rule.rule_compute_and_cooling`) from observations
        [B, 17]: [B, 3]."""
        fields = dict(zip(self.spec.observation.names, obs.T.astype(np.float64), strict=True))
        n = self.params.cluster.n_gpus
        training, finetune, setpoint = rule_compute_and_cooling(n, fields)
        return np.stack([training / n, finetune / n, setpoint], axis=1)

    def oracle_plan(self, state: DCSchedulingState) -> np.ndarray:
        """Perfect-foresight actions [B, 48, 3] from ``state`` on: one day plan per row
        (:meth:`oracle_day_plan`).

        Rows before each episode's current step are NaN.
        """
        plans = np.full((state.t.size, HORIZON, self.spec.action.dim), np.nan)
        for row in range(state.t.size):
            t0 = int(state.t[row])
            if t0 < HORIZON:
                plans[row, t0:] = self.oracle_day_plan(state, row)[0]
        return plans

    def oracle_day_plan(
        self, state: DCSchedulingState, row: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """(actions [S, 3], planned facility power [S] MW) of row ``row`` from its step on.

        An LP on HiGHS (:func:`.oracle.solve_day_lp`): the data centre's job-service and cooling
        blocks (:func:`~powerzoo.tasks.datacentre.planning.add_job_service`, ``add_cooling_rows``,
        the setpoint held just under 27 deg C by ``zone_trajectory``), every MWh paid at the price,
        dropped or late work at 10 $/GPU-h; the squared voltages ``v2 = v2_ref + s (P - P_ref)``
        with LinDistFlow sensitivities ``s`` of the DC bus (:func:`voltage_sq_sensitivity`) around
        the exact flow at a reference DC load ``P_ref``, kept in [0.951, 1.049] p.u. by slacks at
        :data:`ORACLE_VOLTAGE_PENALTY`; the lines on the DC's path capped at their headroom over
        the LinDistFlow base flows (slack at 10,000 $/MW). ``P_ref`` is the DC's mean load, then
        (second pass) the first plan's load.
        """
        p, w, dt_h, grid = self.params, self.workload, self.spec.dt_h, self.grid
        t0 = int(state.t[row])
        idx = grid.flat_index(
            state.day_id[row : row + 1], np.arange(t0, HORIZON)
        )  # [S] calendar steps
        temp_out, price, demand, _ = self._inputs[:, idx]
        arrivals = per_bucket(w.arrival_cum_gpuh[idx].astype(np.float64))  # [S, C, K]
        arrivals[0] = per_bucket(state.queue_cum_gpuh[row : row + 1])[
            0
        ]  # queued now, this step's arrivals in
        allowance = state.carry_allowance_gpuh[row] + w.arrival_carry_gpuh[idx[1:]].sum(axis=0)
        setpoint, _, heat_offset = zone_trajectory(
            p, float(state.zone_temp_c[row]), temp_out, ORACLE_SETPOINT_C, SETPOINT_MIN_C, dt_h
        )
        cop = cooling_cop(p.cooling, temp_out, setpoint)
        sens = voltage_sq_sensitivity(grid.case, np.array([p.dc_bus]), self.tan_phi)[
            0
        ]  # [n_bus] per MW
        headroom = line_headroom_mw(grid.case, *grid.bus_loads(demand), p.dc_bus, self.tan_phi)
        p_ref = np.full(idx.size, 1.9)
        for _ in range(ORACLE_PASSES):
            v2_ref = self._flow(demand, p_ref, None)[0].vm_pu ** 2
            shares, p_ref = solve_day_lp(
                p,
                arrivals,
                w.bucket_due_step,
                t0,
                allowance,
                price,
                cop,
                heat_offset,
                v2_ref,
                p_ref,
                sens,
                headroom,
                dt_h,
            )
        return np.column_stack([shares, setpoint]), p_ref
