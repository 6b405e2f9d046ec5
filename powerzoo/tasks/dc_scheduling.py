"""``dc_scheduling``: the ``dc_microgrid`` data centre on a bus of the IEEE 33-bus feeder,
scheduling its jobs.

Model (single agent, 30-minute steps, 48 per episode = one calendar day)
------------------------------------------------------------------------
* Data centre: the one of ``dc_microgrid`` (:mod:`powerzoo.tasks.dc_microgrid`: 2,048 GPUs,
  training and fine-tuning jobs with hourly deadline buckets served earliest-deadline-first,
  cooling plant tracking the zone setpoint, lumped server zone), stepped by the same model
  (:class:`~powerzoo.tasks.datacentre.model.DataCentre`) at 30-minute steps, with the
  workload of :mod:`powerzoo.data.workload` drawn at that resolution. No local generation: no
  PV, battery or diesel; the facility power ``it_mw + cooling_mw`` is drawn from the feeder.
* Feeder: ``case33bw`` with one exact AC power flow per step (:mod:`powerzoo.tasks.feeder`);
  bus loads = the case's base load x ``LOAD_SCALE = 0.4`` x the calendar load shape
  ``demand_pu``; the data centre at 0-based bus ``DC_BUS = 4`` (1-based 5, on the main trunk)
  at power factor 0.95 lagging.
* Sizing: the data centre draws 0.1 MW with every GPU parked, about 1.9 MW on average and up to
  3.3 MW with every GPU busy; the rest of the feeder peaks at 1.3 MW on an average test day (1.5
  MW at most). Held at a constant 1.5 MW the DC keeps every test day in band (lowest voltage
  0.952 p.u.); at 2.0 MW the band is left at the peaks of 28 of the 77 test days, at 2.5 MW on 76
  (0.33 p.u.-steps a day of ``voltage_violation``); with every GPU busy (3.3 MW) on all of them
  (3.3 p.u.-steps a day, lowest voltage 0.932) and the trunk lines overload (5.2 MVA-steps a day
  of ``thermal_overload``). The rule-based baseline, which serves work as it comes (the
  submission peak at 14:00 meets the feeder's midday peak), leaves the band on 51 test days; the
  oracle, moving loose-deadline training work off the peaks, on none, without dropping work. A
  heavier feeder (``load_scale=0.5``) or a bus further out (``dc_bus=5``) makes the band
  unreachable on some days without dropping work.
* Action (physical units; ``normalize=True`` maps [-1, 1] onto them):
  ``[training_share, finetune_share, cooling_setpoint_c]``: fractions of the GPUs given to
  each class (scaled down proportionally when they sum above 1; the rest are parked) and the
  zone setpoint in [18, 32] deg C. ``info["action_applied"]`` reports the shares after scaling.
* Reward ($ per step): ``-(price x (it_mw + cooling_mw) x dt) - 10 $/GPU-h x sla_violation``;
  terms ``[energy_cost, sla_penalty]`` (both <= 0). 10 $/GPU-h is a few times the on-demand
  rental price of a data-centre GPU (a missed deadline costs a customer credit).
* Costs (all >= 0, per step): ``voltage_violation`` (p.u., sum over buses), ``thermal_overload``
  (MVA, sum over branches), as the feeder tasks define them; ``sla_violation`` (GPU-h dropped
  at its deadline, plus at the day's end the work behind schedule) and ``overtemperature``
  (K h above 27 deg C), as ``dc_microgrid`` defines them. CMDP thresholds per episode: 0.2 p.u.,
  0.5 MVA, 50 GPU-h, 0.5 K h. Preset ``"penalized"`` also charges 1,000 $ per p.u. of voltage
  violation, 1,000 $ per MVA of overload and 100 $ per K h of overtemperature.
* Observation (17): time, ``temp_c``, ``price_per_mwh``, ``demand_pu``, ``zone_temp_c``, the
  previous step's flow (``v_min_pu``, ``dc_bus_v_pu``, ``max_branch_loading``, ``dc_load_mw``;
  at reset the flow of the first step's loads with every GPU parked) and, per job class,
  ``queued_gpuh``, ``due_1h_gpuh``, ``required_gpus`` (as in ``dc_microgrid``).
* Splits: train / val / test by date; stress splits ``load_stress``, ``heatwave``,
  ``price_spike`` and ``workload_shock`` (doubled job arrivals).
* Baselines: random; rule-based = ``dc_microgrid``'s compute and cooling rule
  (:func:`~powerzoo.tasks.dc_microgrid.rule.rule_compute_and_cooling`: each class gets at least
  1.1 x the least deadline-meeting allocation and enough to drain its queue in 4 h, fine-tuning
  first; thermostat at 26 deg C, 24 while the zone is above 26.5), blind to the feeder; oracle =
  a perfect-foresight day plan, one LP on HiGHS built from the ``dc_microgrid`` oracle's job and
  cooling blocks (:mod:`powerzoo.tasks.dc_microgrid.oracle`) with the voltage band on LinDistFlow
  around the exact flow, and line ratings, as soft rows, then applied under the exact flow.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.workload import JOB_CLASSES, get_workload, workload_scenario_of_split
from powerzoo.devices.cooling import CoolingParams, cooling_cop
from powerzoo.devices.gpu_cluster import GpuClusterParams
from powerzoo.devices.job_queue import per_bucket
from powerzoo.devices.thermal_zone import ZoneParams
from powerzoo.physics.radial_pf import lindistflow
from powerzoo.physics.radial_sweep import feeder_plan
from powerzoo.tasks.base import StepOutput
from powerzoo.tasks.datacentre.model import DataCentre
from powerzoo.tasks.datacentre.site import SETPOINT_MAX_C, SETPOINT_MIN_C, DCMicrogridParams
from powerzoo.tasks.dc_microgrid.oracle import (
    ORACLE_SETPOINT_C,
    SparseModel,
    add_cooling_rows,
    add_job_service,
    it_power_model,
    plan_shares,
    zone_trajectory,
)
from powerzoo.tasks.dc_microgrid.rule import rule_compute_and_cooling
from powerzoo.tasks.feeder import (
    GRID_COST_UNITS,
    GRID_COSTS,
    ORACLE_BAND_MARGIN_PU,
    ORACLE_VOLTAGE_PENALTY,
    V_MIN_PU,
    FeederTask,
    voltage_sq_sensitivity,
)
from powerzoo.tasks.spec import TaskSpec, VectorSpec

__all__ = ["DCScheduling", "DCSchedulingParams", "DCSchedulingState", "DC_BUS", "LOAD_SCALE"]

HORIZON = 48
STEP_MINUTES = 30
CASE = "case33bw"
LOAD_SCALE = 0.4
DC_BUS = 4
DC_POWER_FACTOR = 0.95
SLA_PENALTY_PER_GPUH = 10.0
PENALIZED = {"voltage_violation": 1000.0, "thermal_overload": 1000.0, "overtemperature": 100.0}
CONSTRAINTS = (*GRID_COSTS, "sla_violation", "overtemperature")
THRESHOLDS = {
    "voltage_violation": 0.2,
    "thermal_overload": 0.5,
    "sla_violation": 50.0,
    "overtemperature": 0.5,
}
PRICE_FLOOR, PRICE_CAP = -1000.0, 10000.0
QUEUE_CAP_GPUH, GPUS_CAP = 1e6, 1e8  # observation bounds, far above a day's work
ORACLE_THERMAL_PENALTY = 10_000.0  # $ per MW planned above a line's headroom
ORACLE_PASSES = 2  # LPs per plan: the second is linearised around the first plan's exact flow
ORACLE_LINE_VOLTAGE_PU = 0.95  # lines planned at |S| <= rating x 0.95 (I = S / V at a low voltage)
_EXOGENOUS = ("temp_c", "price_per_mwh", "demand_pu")
_GRID = ("v_min_pu", "dc_bus_v_pu", "max_branch_loading", "dc_load_mw")
_QUEUE = ("queued_gpuh", "due_1h_gpuh", "required_gpus")


@dataclasses.dataclass(frozen=True)
class DCSchedulingParams:
    """The data centre (the ``dc_microgrid`` site's cluster, cooling and zone) and where it sits on
    the feeder."""

    cluster: GpuClusterParams = DCMicrogridParams.cluster
    cooling: CoolingParams = DCMicrogridParams.cooling
    zone: ZoneParams = DCMicrogridParams.zone
    initial_zone_temp_c: float = DCMicrogridParams.initial_zone_temp_c
    dc_bus: int = DC_BUS
    load_scale: float = LOAD_SCALE

    def __post_init__(self) -> None:
        if (
            isinstance(self.dc_bus, bool)
            or not isinstance(self.dc_bus, (int, np.integer))
            or not 1 <= self.dc_bus <= 32
        ):
            raise ValueError(
                "dc_bus must be a 0-based bus index of case33bw in 1..32 (0 is the head), "
                f"got {self.dc_bus!r}"
            )
        if not (np.isfinite(self.load_scale) and self.load_scale > 0.0):
            raise ValueError(f"load_scale must be a positive number, got {self.load_scale!r}")


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
    """The ``dc_microgrid`` data centre on the 33-bus feeder: schedule jobs and cooling against
    price and voltage."""

    task_id = "dc_scheduling"
    horizon = HORIZON

    Params = DCSchedulingParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = p = self.make_params(**task_kwargs)
        super().__init__(self.make_spec(**task_kwargs), split)
        self.setup_feeder(CASE, p.load_scale)
        self.workload = get_workload(workload_scenario_of_split(split), STEP_MINUTES)
        self.tan_phi = float(np.tan(np.arccos(DC_POWER_FACTOR)))
        series = self.profiles.series
        self._exogenous = np.stack([series[k] for k in _EXOGENOUS], axis=1).astype(
            np.float32
        )  # [T, 3] observation
        obs = self.spec.observation
        self._obs_dim = obs.dim
        self._s_time, self._s_exo = (
            obs.slot("hour_sin", "hour_cos", "time_remaining"),
            obs.slot(*_EXOGENOUS),
        )
        self._s_zone, self._s_grid = obs.slot("zone_temp_c"), obs.slot(*_GRID)
        self._s_queue = {f: obs.slot(*(f"{j.name}_{f}" for j in JOB_CLASSES)) for f in _QUEUE}
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
        p = params
        n = float(p.cluster.n_gpus)
        queue = tuple(f"{j.name}_{f}" for j in JOB_CLASSES for f in _QUEUE)
        names = (
            "hour_sin",
            "hour_cos",
            "time_remaining",
            *_EXOGENOUS,
            "zone_temp_c",
            *_GRID,
            *queue,
        )
        units = (
            "-",
            "-",
            "fraction of horizon",
            "deg C",
            "$/MWh",
            "p.u. of annual peak",
            "deg C",
            "p.u.",
            "p.u.",
            "I / I_rated",
            "MW",
        ) + ("GPU-h", "GPU-h", "GPUs") * 2
        low = (-1.0, -1.0, 0.0, -60.0, PRICE_FLOOR, 0.0, -60.0, 0.0, 0.0, 0.0, 0.0) + (0.0,) * 6
        high = (1.0, 1.0, 1.0, 60.0, PRICE_CAP, 2.0, 100.0, 1.2, 1.2, 1000.0, 20.0) + (
            QUEUE_CAP_GPUH,
            QUEUE_CAP_GPUH,
            GPUS_CAP,
        ) * 2
        nominal_low = (-1.0, -1.0, 0.0, -10.0, 0.0, 0.0, 15.0, 0.9, 0.9, 0.0, 0.0) + (0.0,) * 6
        nominal_high = (1.0, 1.0, 1.0, 45.0, 150.0, 1.0, 35.0, 1.0, 1.0, 1.0, 3.5) + (
            20000.0,
            2000.0,
            n,
            2000.0,
            1000.0,
            n,
        )
        return TaskSpec(
            task_id=cls.task_id,
            description=(
                f"The dc_microgrid AI data centre ({p.cluster.n_gpus} GPUs, training and "
                "fine-tuning jobs with "
                f"deadlines, cooling) at bus {p.dc_bus + 1} (1-based) of the IEEE 33-bus feeder "
                "(exact AC power flow), no local "
                "generation: schedule the jobs and the cooling setpoint against the energy price "
                "and SLA penalties, "
                "within the feeder's voltage band and line ratings."
            ),
            agents=("agent",),
            observation=VectorSpec(names, units, low, high, nominal_low, nominal_high),
            action=VectorSpec(
                names=("training_share", "finetune_share", "cooling_setpoint_c"),
                units=("fraction of GPUs", "fraction of GPUs", "deg C"),
                low=(0.0, 0.0, SETPOINT_MIN_C),
                high=(1.0, 1.0, SETPOINT_MAX_C),
            ),
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            splits=calendar.BASE_SPLITS
            + ("load_stress", "heatwave", "price_spike")
            + calendar.WORKLOAD_STRESS_SPLITS,
            reward_terms=("energy_cost", "sla_penalty"),
            reward_doc=(
                f"-(price x facility MWh) - {SLA_PENALTY_PER_GPUH:g} $/GPU-h x sla_violation per "
                "step ($); "
                "terms [energy_cost, sla_penalty]"
            ),
            constraint_names=CONSTRAINTS,
            constraint_units=(*GRID_COST_UNITS, "GPU-h", "K h"),
            selected_constraints=CONSTRAINTS,
            cost_thresholds=dict(THRESHOLDS),
            baselines=("random", "rule_based", "oracle"),
            forecast_series=_EXOGENOUS,
            reward_presets={"objective": {}, "penalized": dict(PENALIZED)},
            gamma=0.99,
            gym_id="powerzoo/DCScheduling-v0",
        )

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
        out = np.empty((dc_mw.size, len(_GRID)))
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
            gpus_allocated=gpus,
            gpus_busy=served * dc.per_dt,
            arrived_gpuh=new_state.arrived_gpuh,
            served_gpuh=new_state.served_gpuh,
            dropped_gpuh=q.dropped_gpuh,
            behind_schedule_gpuh=q.behind,
            queued_gpuh=q.cum[:, :, -1],
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """``dc_microgrid``'s compute and cooling rule (module docstring) from observations [B, 17]:
        [B, 3]."""
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

        An LP on HiGHS: ``dc_microgrid``'s job-service and cooling blocks
        (:func:`~powerzoo.tasks.dc_microgrid.oracle.add_job_service`, ``add_cooling_rows``, the
        setpoint held just under 27 deg C by ``zone_trajectory``), every MWh paid at the price,
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
        headroom = self._line_headroom_mw(demand)
        p_ref = np.full(idx.size, 1.9)
        for _ in range(ORACLE_PASSES):
            v2_ref = self._flow(demand, p_ref, None)[0].vm_pu ** 2
            shares, p_ref = _solve_day(
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

    def _line_headroom_mw(self, demand: np.ndarray) -> np.ndarray:
        """Most DC power [S] (MW, at its power factor) the lines from the head to its bus carry
        within
        ``rating x ORACLE_LINE_VOLTAGE_PU`` over the LinDistFlow flows of the feeder loads."""
        case, bus = self.grid.case, self.params.dc_bus
        path = []
        while case.bus_parent_branch[bus] >= 0:
            path.append(case.bus_parent_branch[bus])
            bus = case.bus_parent[bus]
        p, q = self.grid.bus_loads(demand)
        flows = lindistflow(case, p, q)
        pb, qb = flows.branch_p_mw[:, path], flows.branch_q_mvar[:, path]
        limit = case.branch_rating_mva[path] * ORACLE_LINE_VOLTAGE_PU
        # (pb + P)^2 + (qb + t P)^2 = limit^2, the larger root
        a, half_b = 1.0 + self.tan_phi**2, pb + self.tan_phi * qb
        disc = half_b**2 - a * (pb**2 + qb**2 - limit**2)
        return np.maximum((np.sqrt(np.maximum(disc, 0.0)) - half_b) / a, 0.0).min(axis=1)


def _solve_day(
    params: DCSchedulingParams,
    arrivals: np.ndarray,
    bucket_due_step: np.ndarray,
    t0: int,
    allowance: np.ndarray,
    price: np.ndarray,
    cop: np.ndarray,
    heat_offset: np.ndarray,
    v2_ref: np.ndarray,
    p_ref: np.ndarray,
    sens: np.ndarray,
    headroom: np.ndarray,
    dt_h: float,
) -> tuple[np.ndarray, np.ndarray]:
    """GPU shares [S, 2] and facility power [S] (MW) of one LP (see
    :meth:`DCScheduling.oracle_day_plan`)."""
    n_steps = price.size
    it_base, mw_per_gpuh = it_power_model(params.cluster, dt_h)
    model = SparseModel()
    cooling = model.columns(n_steps, 0.0, np.inf, price * dt_h)
    served_by_class, groups = add_job_service(
        model,
        arrivals,
        bucket_due_step,
        t0,
        allowance,
        price * dt_h * mw_per_gpuh,
        SLA_PENALTY_PER_GPUH,
        params.cluster.n_gpus,
        dt_h,
    )
    add_cooling_rows(model, params, cooling, groups, cop, heat_offset, dt_h)
    # facility power P = it_base + mw_per_gpuh sum x + cooling: v2_ref + s (P - P_ref) + slack >= lo
    lo = (V_MIN_PU + ORACLE_BAND_MARGIN_PU) ** 2
    swing = (
        np.abs(sens) * params.cluster.p_max_mw * 1.5
    )  # the largest change of v2 the plan can make
    for bus in np.flatnonzero(np.any(v2_ref - swing < lo, axis=0)):
        steps = np.flatnonzero(v2_ref[:, bus] - swing[bus] < lo)
        s = sens[bus]
        slack = model.columns(steps.size, 0.0, np.inf, ORACLE_VOLTAGE_PENALTY)
        rhs = lo - v2_ref[steps, bus] + s * (p_ref[steps] - it_base)
        model.rows(
            [(cooling[steps], s), (slack, 1.0)],
            rhs,
            np.inf,
            [groups[j] for j in steps],
            s * mw_per_gpuh,
        )
    # lines: P - slack <= headroom
    slack = model.columns(n_steps, 0.0, np.inf, ORACLE_THERMAL_PENALTY * dt_h)
    model.rows([(cooling, 1.0), (slack, -1.0)], -np.inf, headroom - it_base, groups, mw_per_gpuh)
    highs = model.to_highs()
    highs.run()
    status = highs.modelStatusToString(highs.getModelStatus())
    solution = highs.getSolution()
    if not solution.value_valid:
        raise RuntimeError(f"dc_scheduling oracle: HiGHS found no plan from step {t0} ({status})")
    v = np.asarray(solution.col_value)
    served = np.array([sum(v[c].sum() for c in step) for step in served_by_class])
    return plan_shares(
        v, served_by_class, params.cluster.n_gpus, dt_h
    ), it_base + mw_per_gpuh * served + v[cooling]
