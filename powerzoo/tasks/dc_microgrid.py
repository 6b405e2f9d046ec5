"""``dc_microgrid`` / ``dc_microgrid_safe``: an AI data centre running its own microgrid.

Model (5-minute steps, 288 per episode = one calendar day, single agent)
------------------------------------------------------------------------
* IT load (:mod:`powerzoo.devices.gpu_cluster`): 2,048 GPUs; busy 1.275 kW, allocated but idle
  0.40 kW, parked 0.05 kW per GPU (server share included): 0.1-2.6 MW.
* Job queue (:mod:`powerzoo.devices.job_queue`, arrivals from :mod:`powerzoo.data.workload`):
  ``training`` and ``finetune`` work in GPU-hours per hourly deadline bucket, served
  earliest-deadline-first within each class by the GPUs the agent allocates; work still queued
  when its bucket falls due is dropped (``sla_violation``). Work due after the day may stay
  queued at the episode's end up to the carry allowance of a uniform-progress schedule; the
  excess is behind schedule and also counts as ``sla_violation`` (so deferring work past
  midnight does not pay).
* Cooling (:mod:`powerzoo.devices.cooling`, :mod:`powerzoo.devices.thermal_zone`): the plant
  tracks the zone setpoint (time constant 10 min, capacity 3.5 MW thermal) with a COP that falls
  with outdoor temperature and rises with the setpoint; the zone is one lumped heat capacity
  heated by the IT load and the envelope. ``overtemperature`` = K h above 27 deg C (ASHRAE A1
  recommended upper bound).
* Supply: PV 2 MW (:mod:`powerzoo.devices.pv`), battery 4 MWh / 2 MW
  (:mod:`powerzoo.devices.battery`, efficiencies 0.95, SOC in [0.1, 0.9], 20 $/MWh degradation),
  diesel 2.5 MW with 30 % minimum stable output, 300 $/MWh and 0.75 tCO2/MWh
  (:mod:`powerzoo.devices.diesel`), grid import capped at 1.5 MW at the market price and the
  grid's carbon intensity (:mod:`powerzoo.devices.grid_tie`; ``grid_import_max_mw=0``: islanded).
  Grid import is not an action: it covers the residual load up to the cap; anything left is
  unserved (``power_deficit``, MWh) and a surplus is curtailed (``spill_mw``: PV first). The load
  is still served in the model (ride-through on the UPS), the deficit is only charged as a cost.

Power balance every step (MW):
``supply_mw + deficit_mw = it_mw + cooling_mw + charge_mw`` with
``supply_mw = pv_mw + diesel_mw + discharge_mw + grid_import_mw - spill_mw``.

Action (physical units; ``normalize=True`` maps [-1, 1] affinely onto these bounds)
-----------------------------------------------------------------------------------
``[training_share, finetune_share, cooling_setpoint_c, battery_p_mw, diesel_p_mw]``:
fractions of the GPUs given to each class (scaled down proportionally when they sum above 1;
unallocated GPUs are parked), zone setpoint in [18, 32] deg C, battery power in [-2, 2] MW
(+ = discharge; cut to what the SOC allows), diesel output in [0, 2.5] MW (a request below the
minimum stable output gives the nearest feasible value, 0 or 0.75 MW).
``info["action_applied"]`` reports the shares after scaling and the powers actually delivered.

Reward
------
``info["reward_vector"] = [energy, cost, carbon]`` (all <= 0, per step):
``energy = -(it_mw + cooling_mw) dt`` (MWh), ``cost = -(grid_import_mw * price + diesel_mw * fuel
cost) dt - degradation`` ($), ``carbon = -(grid_import_mw * grid_co2 + diesel_mw * 0.75) dt``
(tCO2). Weights ``w = (1, 0.5, 0.3)``.

* ``dc_microgrid_safe`` (CMDP): ``reward = reward_vector @ w`` exactly (the same matrix-vector
  product ``weights @ info["reward_vector"]`` computes); the three costs are its selected
  constraints, with per-episode thresholds 50 GPU-h, 0.5 K h and 0.25 MWh.
* ``dc_microgrid`` (MDP): ``reward = reward_vector @ w - costs @ penalties`` with penalties
  10 per GPU-h of SLA violation, 100 per K h of overtemperature and 5,000 per MWh unserved
  (a value of lost load of 10,000 $/MWh at the cost weight 0.5).
* Reward presets (``make_env(..., reward=...)``): ``"objective"`` (the weighted vector) and
  ``"penalized"`` (with the penalties), so either variant can be trained on the other's reward.
* Episodes never terminate early; they are truncated after 288 steps.

Costs (non-negative, physical units): ``sla_violation`` (GPU-h of work dropped at its
deadline, plus on the last step the work left behind schedule), ``overtemperature`` (K h above
27 deg C), ``power_deficit`` (MWh unserved).

Observation
-----------
``[hour_sin, hour_cos, time_remaining, temp_c (outdoor), zone_temp_c, pv_cf, price_per_mwh,
grid_co2_t_per_mwh, soc]`` then, per class (training, finetune), ``queued_gpuh``,
``due_1h_gpuh`` (due by the end of the current hour) and ``required_gpus`` (least constant
allocation meeting every deadline and the end-of-day carry allowance, see
:func:`~powerzoo.devices.job_queue.queue_outlook`).

Splits: train / val / test by date; stress splits ``heatwave``, ``low_renewable``,
``load_stress``, ``price_spike`` (transformed weather and prices) and ``workload_shock``
(doubled job arrivals), all on the test days.

Baselines: random; rule-based (:meth:`DCMicrogrid.rule_based_action`); oracle
(:meth:`DCMicrogrid.oracle_plan`): a perfect-foresight MILP over the day on HiGHS (job service
per deadline bucket, battery, diesel on/off with its minimum output, grid import; cooling setpoint
held just under the 27 deg C limit), see :mod:`powerzoo.tasks.dc_microgrid_oracle`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.workload import (
    JOB_CLASSES,
    N_BUCKETS,
    NO_ARRIVAL,
    get_workload,
    workload_scenario_of_split,
)
from powerzoo.devices.battery import BatteryParams, battery_step, feasible_power_mw
from powerzoo.devices.cooling import CoolingParams, cooling_cop
from powerzoo.devices.diesel import DieselParams, diesel_output_mw
from powerzoo.devices.gpu_cluster import GpuClusterParams, allocate_gpus, it_power_mw
from powerzoo.devices.grid_tie import GridTieParams, grid_carbon_intensity, settle
from powerzoo.devices.job_queue import (
    carry_excess,
    drop_due,
    per_bucket,
    queue_outlook,
    serve_edf,
)
from powerzoo.devices.pv import PVParams, pv_power_mw
from powerzoo.devices.thermal_zone import ZoneParams, zone_step
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.dc_microgrid_oracle import DayForesight, DayPlan, solve_day_plan
from powerzoo.tasks.spec import TaskSpec, VectorSpec

__all__ = ["DCMicrogrid", "DCMicrogridSafe", "DCMicrogridState", "DCMicrogridParams", "REWARD_WEIGHTS"]

HORIZON = 288
STEP_MINUTES = 5
PRICE_FLOOR, PRICE_CAP = -1000.0, 10000.0  # $/MWh
SETPOINT_MIN_C, SETPOINT_MAX_C = 18.0, 32.0  # ASHRAE A1: recommended 18-27, allowable up to 32
REWARD_TERMS = ("energy", "cost", "carbon")
REWARD_WEIGHTS = np.array([1.0, 0.5, 0.3])  # energy, cost, carbon
CONSTRAINTS = ("sla_violation", "overtemperature", "power_deficit")
PENALTIES = np.array([10.0, 100.0, 5000.0])  # per GPU-h, per K h, per MWh (dc_microgrid only)
QUEUE_CAP_GPUH, GPUS_CAP = 1e6, 1e8  # observation bounds: far above a day's work (~3e4 GPU-h) x 12 steps/h
THRESHOLDS = {"sla_violation": 50.0, "overtemperature": 0.5, "power_deficit": 0.25}  # per episode

# rule-based controller
RULE_GPU_MARGIN = 1.1  # allocate at least 10 % above the least deadline-meeting rate ...
RULE_DRAIN_H = 4.0  # ... and at least the rate that would empty the class's queue in 4 h
RULE_SETPOINT_C, RULE_RECOVERY_SETPOINT_C, RULE_RECOVERY_ABOVE_C = 26.0, 24.0, 26.5
RULE_LOAD_MARGIN = 1.05  # load estimate inflated 5 % (cooling transients, envelope gains)


@dataclasses.dataclass(frozen=True)
class DCMicrogridParams:
    """Every device of the site (see each device module for units and sources)."""

    cluster: GpuClusterParams = GpuClusterParams()
    cooling: CoolingParams = CoolingParams()
    zone: ZoneParams = ZoneParams()
    pv: PVParams = PVParams()
    # a 2 MW / 4 MWh (2 h) Li-ion system; degradation ~ pack replacement cost / lifetime
    # throughput: 150 $/kWh (BNEF 2023 pack price ~139 $/kWh) / (5,000 cycles x 0.8 DoD x 2
    # MWh of charge + discharge per MWh of capacity and cycle) ~ 19 $/MWh -> 20 $/MWh
    battery: BatteryParams = BatteryParams(
        energy_capacity_mwh=4.0, power_max_mw=2.0, degradation_cost_per_mwh=20.0
    )
    diesel: DieselParams = DieselParams()
    grid: GridTieParams = GridTieParams()
    initial_soc: float = 0.5
    initial_zone_temp_c: float = 24.0

    # task keyword -> (device, field)
    KWARGS: ClassVar[dict[str, tuple[str, str]]] = {
        "n_gpus": ("cluster", "n_gpus"),
        "pv_capacity_mw": ("pv", "capacity_mw"),
        "battery_energy_mwh": ("battery", "energy_capacity_mwh"),
        "battery_power_mw": ("battery", "power_max_mw"),
        "diesel_rated_mw": ("diesel", "rated_mw"),
        "grid_import_max_mw": ("grid", "import_max_mw"),
        "cooling_capacity_mw": ("cooling", "q_max_mw"),
    }

    @classmethod
    def from_kwargs(cls, task_id: str, kwargs: dict[str, Any]) -> DCMicrogridParams:
        """Defaults overridden by task keywords (see ``KWARGS``, plus ``initial_soc``, ``initial_zone_temp_c``)."""
        valid = set(cls.KWARGS) | {"initial_soc", "initial_zone_temp_c"}
        unknown = set(kwargs) - valid
        if unknown:
            raise TypeError(f"{task_id} got unknown parameter(s) {sorted(unknown)}; valid: {', '.join(sorted(valid))}")
        params = cls(**{k: float(v) for k, v in kwargs.items() if k in ("initial_soc", "initial_zone_temp_c")})
        for key, (device, field) in cls.KWARGS.items():
            if key in kwargs:
                value = int(kwargs[key]) if field == "n_gpus" else float(kwargs[key])
                replaced = dataclasses.replace(getattr(params, device), **{field: value})
                params = dataclasses.replace(params, **{device: replaced})
        if not 10.0 <= params.initial_zone_temp_c <= 40.0:
            raise ValueError(f"initial_zone_temp_c must lie in [10, 40] deg C, got {params.initial_zone_temp_c}")
        if not params.battery.soc_min <= params.initial_soc <= params.battery.soc_max:
            raise ValueError(
                f"initial_soc must lie in [{params.battery.soc_min}, {params.battery.soc_max}], got {params.initial_soc}"
            )
        return params


@dataclasses.dataclass
class DCMicrogridState:
    """Batched state; leading axis B. C = 2 job classes, K = 25 deadline buckets."""

    day_id: np.ndarray  # [B] split day index the episode started on (int64)
    t: np.ndarray  # [B] steps elapsed (int64)
    soc: np.ndarray  # [B] battery state of charge (fraction)
    zone_temp_c: np.ndarray  # [B] server-zone temperature (deg C)
    queue_cum_gpuh: np.ndarray  # [B, C, K] work due by the end of each bucket (cumulative, GPU-h)
    arrived_gpuh: np.ndarray  # [B, C] work arrived this episode, initial queue included (GPU-h)
    served_gpuh: np.ndarray  # [B, C] work done this episode (GPU-h)
    dropped_gpuh: np.ndarray  # [B, C] work dropped at its deadline this episode (GPU-h)
    carry_allowance_gpuh: np.ndarray  # [B, C] work due after the day that may be left at its end
    due_1h_gpuh: np.ndarray  # [B, C] derived: work due by the end of the current hour
    required_gpus: np.ndarray  # [B, C] derived: least allocation meeting every deadline


class DCMicrogrid(Task):
    """Data-centre microgrid, MDP form: violation penalties folded into the reward."""

    task_id = "dc_microgrid"
    penalized = True
    gym_id = "powerzoo/DCMicrogrid-v0"

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        super().__init__(self.make_spec(**task_kwargs), split)
        self.params = p = DCMicrogridParams.from_kwargs(self.task_id, task_kwargs)
        p.zone.check_step(self.spec.dt_h)
        self.workload = get_workload(workload_scenario_of_split(split), STEP_MINUTES)
        series = self.profiles.series
        self._temp = series["temp_c"]
        self._pv_cf = series["pv_cf"]
        self._price = series["price_per_mwh"]
        self._co2 = grid_carbon_intensity(p.grid, series["demand_pu"], series["pv_cf"], series["wind_cf"])
        due_step = self.workload.bucket_due_step  # [K]
        steps_left = np.maximum(due_step[None, :] - np.arange(HORIZON + 1)[:, None], 1)
        self._inv_hours_left = 1.0 / (steps_left * self.spec.dt_h)  # [t, K] (1/h), at least one step
        self._steps_per_hour = self.workload.steps_per_hour
        self._weights = REWARD_WEIGHTS.copy()
        self._penalties = PENALTIES.copy()
        self._class_ones = np.ones(len(self.workload.class_names))
        # per calendar step, gathered with one ``take`` per step: [temp, price, co2, pv_mw] for the
        # model and observation columns 3-7 (column 4, the zone temperature, is overwritten)
        self._day_start = self.split_days * self.profiles.steps_per_day
        self._exogenous = np.stack([self._temp, self._price, self._co2, pv_power_mw(p.pv, self._pv_cf)], axis=1)
        self._exogenous_obs = np.stack(
            [self._temp, np.zeros_like(self._temp), self._pv_cf, self._price, self._co2], axis=1
        ).astype(np.float32)
        self._time_obs = self._time_features(np.arange(HORIZON + 1))  # observation columns 0-2 by step

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def make_spec(cls, **task_kwargs: Any) -> TaskSpec:
        p = DCMicrogridParams.from_kwargs(cls.task_id, task_kwargs)
        n = p.cluster.n_gpus
        b_max = p.battery.power_max_mw
        queue_names = tuple(
            f"{job.name}_{k}" for job in JOB_CLASSES for k in ("queued_gpuh", "due_1h_gpuh", "required_gpus")
        )
        weights = dict(zip(REWARD_TERMS, REWARD_WEIGHTS.tolist(), strict=True))
        penalties = dict(zip(CONSTRAINTS, PENALTIES.tolist(), strict=True))
        penalty_doc = " - (" + " + ".join(f"{v:g} * {k}" for k, v in penalties.items()) + ")" if cls.penalized else ""
        return TaskSpec(
            task_id=cls.task_id,
            description=(
                f"AI data centre ({n} GPUs, training and fine-tuning jobs with deadlines) on a microgrid with "
                f"PV, battery, diesel and a {p.grid.import_max_mw:g} MW grid tie: schedule jobs, set cooling and "
                "dispatch storage and diesel over one day. Multi-objective reward [energy, cost, carbon]"
                + ("; violation penalties folded in (MDP)." if cls.penalized else "; costs kept apart (CMDP).")
            ),
            agents=("agent",),
            observation=VectorSpec(
                names=("hour_sin", "hour_cos", "time_remaining", "temp_c", "zone_temp_c", "pv_cf",
                       "price_per_mwh", "grid_co2_t_per_mwh", "soc") + queue_names,
                units=("-", "-", "fraction of horizon", "deg C", "deg C", "fraction", "$/MWh", "tCO2/MWh",
                       "fraction") + ("GPU-h", "GPU-h", "GPUs") * 2,
                low=(-1.0, -1.0, 0.0, -60.0, -60.0, 0.0, PRICE_FLOOR, 0.0, 0.0) + (0.0,) * 6,
                high=(1.0, 1.0, 1.0, 60.0, 100.0, 1.0, PRICE_CAP, 2.0, 1.0) + (QUEUE_CAP_GPUH, QUEUE_CAP_GPUH, GPUS_CAP) * 2,
                nominal_low=(-1.0, -1.0, 0.0, -10.0, 15.0, 0.0, 0.0, 0.0, 0.0) + (0.0,) * 6,
                nominal_high=(1.0, 1.0, 1.0, 45.0, 35.0, 1.0, 150.0, 0.6, 1.0)
                + (20000.0, 2000.0, float(n), 2000.0, 1000.0, float(n)),
            ),
            action=VectorSpec(
                names=("training_share", "finetune_share", "cooling_setpoint_c", "battery_p_mw", "diesel_p_mw"),
                units=("fraction of GPUs", "fraction of GPUs", "deg C", "MW (+ discharge)", "MW"),
                low=(0.0, 0.0, SETPOINT_MIN_C, -b_max, 0.0),
                high=(1.0, 1.0, SETPOINT_MAX_C, b_max, p.diesel.rated_mw),
            ),
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            splits=calendar.BASE_SPLITS + calendar.STRESS_SPLITS + calendar.WORKLOAD_STRESS_SPLITS,
            reward_terms=REWARD_TERMS,
            reward_doc=(
                "reward_vector = [energy, cost, carbon] = -[facility MWh, $ (grid import + diesel fuel + battery "
                "degradation), tCO2 (grid import + diesel)] per step; reward = reward_vector @ (1, 0.5, 0.3)"
                + penalty_doc
            ),
            constraint_names=CONSTRAINTS,
            constraint_units=("GPU-h", "K h", "MWh"),
            selected_constraints=CONSTRAINTS,
            cost_thresholds=dict(THRESHOLDS),
            baselines=("random", "rule_based", "oracle"),
            forecast_series=("price_per_mwh", "pv_cf", "temp_c"),
            reward_presets={"objective": weights, "penalized": {**weights, **penalties}},
            gamma=0.999,
            gym_id=cls.gym_id,
        )

    # ---- batched model ----------------------------------------------------------------------
    def _step_index(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Calendar step index [B] of step ``t`` of episodes started on split days ``day_id``."""
        return self._day_start.take(day_id) + t

    def _time_features(self, t: np.ndarray) -> np.ndarray:
        """Observation columns 0-2 ``[hour_sin, hour_cos, time_remaining]`` [B, 3] at steps ``t``."""
        phase = (2.0 * np.pi / self.profiles.steps_per_day) * t
        out = np.empty((t.size, 3), dtype=np.float32)
        out[:, 0] = np.sin(phase)
        out[:, 1] = np.cos(phase)
        out[:, 2] = 1.0 - t / HORIZON
        return out

    def _class_total(self, x: np.ndarray) -> np.ndarray:
        """Sum over job classes of ``x`` [B, C] (a matrix-vector product: faster than ``sum(axis=1)``)."""
        return x @ self._class_ones

    def _outlook(self, cum: np.ndarray, t: np.ndarray, allowance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(work due by the end of the current hour, required GPUs) at step ``t``, each [B, C]."""
        k_now = np.minimum(t // self._steps_per_hour, N_BUCKETS - 2)
        inv_hours_left = self._inv_hours_left.take(np.minimum(t, HORIZON), axis=0)
        return queue_outlook(cum, inv_hours_left, k_now, allowance)

    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> DCMicrogridState:
        day_id = self.check_day_id(day_id)
        w, p = self.workload, self.params
        t = np.zeros_like(day_id)
        cum = np.cumsum(w.initial_queue_gpuh[self.split_days[day_id]], axis=2)  # [B, C, K]
        idx = self._step_index(day_id, t)
        cum += w.arrival_cum_gpuh.take(idx, axis=0)
        allowance = w.arrival_carry_gpuh.take(idx, axis=0)
        due_1h, required = self._outlook(cum, t, allowance)
        zeros = np.zeros(cum.shape[:2])
        return DCMicrogridState(
            day_id=day_id,
            t=t,
            soc=np.full(day_id.shape, p.initial_soc),
            zone_temp_c=np.full(day_id.shape, p.initial_zone_temp_c),
            queue_cum_gpuh=cum,
            arrived_gpuh=cum[:, :, -1].copy(),
            served_gpuh=zeros,
            dropped_gpuh=zeros.copy(),
            carry_allowance_gpuh=allowance,
            due_1h_gpuh=due_1h,
            required_gpus=required,
        )

    def observe(self, state: DCMicrogridState) -> np.ndarray:
        t = state.t
        try:
            time = self._time_obs.take(t, axis=0)  # precomputed for steps 0..HORIZON
        except IndexError:  # stepped on past the horizon without a reset
            time = self._time_features(t)
        obs = np.empty((t.size, 15), dtype=np.float32)
        obs[:, 0:3] = time
        obs[:, 3:8] = self._exogenous_obs.take(self._step_index(state.day_id, t), axis=0)
        obs[:, 4] = state.zone_temp_c
        obs[:, 8] = state.soc
        obs[:, 9:15:3] = state.queue_cum_gpuh[:, :, -1]
        obs[:, 10:15:3] = state.due_1h_gpuh
        obs[:, 11:15:3] = state.required_gpus
        return obs

    def step(
        self, state: DCMicrogridState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[DCMicrogridState, StepOutput]:
        p, w, dt_h = self.params, self.workload, self.spec.dt_h
        idx = self._step_index(state.day_id, state.t)
        temp_out, price, co2, pv_mw = self._exogenous.take(idx, axis=0).T

        # compute: allocate GPUs, serve the queue earliest-deadline-first
        gpus = allocate_gpus(p.cluster, action[:, :2])
        cum, served = serve_edf(state.queue_cum_gpuh, gpus * dt_h)
        allocated, busy = self._class_total(gpus), self._class_total(served) * (1.0 / dt_h)
        it_mw = it_power_mw(p.cluster, allocated, busy)

        # cooling and zone temperature
        setpoint = action[:, 2]
        zone_temp, q_cool = zone_step(p.zone, state.zone_temp_c, temp_out, setpoint, it_mw, p.cooling.q_max_mw, dt_h)
        cooling_mw = q_cool / cooling_cop(p.cooling, temp_out, setpoint)

        # supply: battery, diesel, then the grid tie settles the residual
        battery = battery_step(p.battery, state.soc, action[:, 3], dt_h)
        diesel_mw = diesel_output_mw(p.diesel, action[:, 4])
        facility_mw = it_mw + cooling_mw
        residual = facility_mw - battery.p_mw - pv_mw - diesel_mw
        grid_mw, deficit_mw, spill_mw = settle(p.grid, residual)

        # objectives (<= 0) and costs (>= 0)
        reward_vector = np.empty((idx.size, 3))
        reward_vector[:, 0] = -facility_mw * dt_h
        reward_vector[:, 1] = -(grid_mw * price + diesel_mw * p.diesel.fuel_cost_per_mwh) * dt_h - (
            p.battery.degradation_cost_per_mwh * (battery.charge_mwh + battery.discharge_mwh)
        )
        reward_vector[:, 2] = -(grid_mw * co2 + diesel_mw * p.diesel.co2_t_per_mwh) * dt_h

        # time advances: work due now is dropped, then the next step's jobs arrive
        t_next = state.t + 1
        dropped = drop_due(cum, t_next, self._steps_per_hour)
        in_day = t_next < HORIZON
        idx_next = np.where(in_day, idx + 1, NO_ARRIVAL)
        arrivals = w.arrival_cum_gpuh.take(idx_next, axis=0)  # [B, C, K] cumulative increments
        cum += arrivals
        arrived = arrivals[:, :, -1]
        allowance = state.carry_allowance_gpuh + w.arrival_carry_gpuh.take(idx_next, axis=0)
        behind = carry_excess(cum, allowance) * ~in_day[:, None]
        due_1h, required = self._outlook(cum, t_next, allowance)

        costs = np.empty((idx.size, 3))
        costs[:, 0] = self._class_total(dropped + behind)
        costs[:, 1] = np.maximum(zone_temp - p.zone.temp_max_c, 0.0) * dt_h
        costs[:, 2] = deficit_mw * dt_h
        reward = reward_vector @ self._weights
        if self.penalized:
            reward = reward - costs @ self._penalties

        new_state = DCMicrogridState(
            day_id=state.day_id,
            t=t_next,
            soc=battery.soc,
            zone_temp_c=zone_temp,
            queue_cum_gpuh=cum,
            arrived_gpuh=state.arrived_gpuh + arrived,
            served_gpuh=state.served_gpuh + served,
            dropped_gpuh=state.dropped_gpuh + dropped,
            carry_allowance_gpuh=allowance,
            due_1h_gpuh=due_1h,
            required_gpus=required,
        )
        applied = np.empty_like(action)
        applied[:, :2] = gpus * (1.0 / p.cluster.n_gpus)
        applied[:, 2] = setpoint
        applied[:, 3] = battery.p_mw
        applied[:, 4] = diesel_mw
        curtailed = np.minimum(spill_mw, pv_mw)
        out = StepOutput(
            reward=reward,
            reward_terms=reward_vector,
            constraint_costs=costs,
            terminated=np.zeros(idx.size, dtype=bool),
            action_applied=applied,
            info={
                "reward_vector": reward_vector,
                "it_mw": it_mw,
                "cooling_mw": cooling_mw,
                "zone_temp_c": zone_temp,
                "temp_c": temp_out,
                "pv_mw": pv_mw,
                "pv_curtailed_mw": curtailed,
                "diesel_mw": diesel_mw,
                "battery_p_mw": battery.p_mw,
                "soc": battery.soc,
                "grid_import_mw": grid_mw,
                "deficit_mw": deficit_mw,
                "spill_mw": spill_mw,
                "price_per_mwh": price,
                "grid_co2_t_per_mwh": co2,
                "gpus_allocated": gpus,
                "gpus_busy": served * (1.0 / dt_h),
                "arrived_gpuh": new_state.arrived_gpuh,
                "served_gpuh": new_state.served_gpuh,
                "dropped_gpuh": new_state.dropped_gpuh,
                "behind_schedule_gpuh": behind,
                "queued_gpuh": cum[:, :, -1],
            },
        )
        return new_state, out

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Deadline-driven GPU shares, thermostat cooling, PV-following battery, diesel on deficit.

        * GPUs: fine-tuning (the class with the earliest deadlines) first, then training, each
          ``max(1.1 x required_gpus, queued_gpuh / 4 h)``: at least the least allocation that
          meets every deadline earliest-deadline-first, and enough to drain the queue in 4 h so
          that work is not left to pile up against the end of the day; the rest are parked.
        * Cooling: setpoint 26 deg C (1 K below the A1 limit), 24 deg C while the zone is above
          26.5 deg C.
        * Battery and diesel: estimated load (IT at the allocation, cooling at the COP, +5 %)
          minus PV and the grid cap is the shortfall ``d``. A surplus (``d < 0``) charges the
          battery; a shortfall is discharged from the battery, and what the battery cannot
          cover is run on the diesel (at least its minimum output, the excess charging the
          battery).
        """
        p, n = self.params, self.params.cluster.n_gpus
        o = dict(zip(self.spec.observation.names, obs.T, strict=True))  # field name -> [B] column

        def gpus_for(job: str) -> np.ndarray:
            return np.maximum(o[f"{job}_required_gpus"] * RULE_GPU_MARGIN, o[f"{job}_queued_gpuh"] / RULE_DRAIN_H)

        ft = np.minimum(gpus_for("finetune"), n)
        tr = np.minimum(gpus_for("training"), n - ft)
        allocated = ft + tr
        setpoint = np.where(o["zone_temp_c"] > RULE_RECOVERY_ABOVE_C, RULE_RECOVERY_SETPOINT_C, RULE_SETPOINT_C)
        it_mw = it_power_mw(p.cluster, allocated, allocated)
        load_mw = it_mw * (1.0 + 1.0 / cooling_cop(p.cooling, o["temp_c"], setpoint)) * RULE_LOAD_MARGIN
        shortfall = load_mw - pv_power_mw(p.pv, o["pv_cf"]) - p.grid.import_max_mw
        p_ch_max, p_dis_max = feasible_power_mw(p.battery, o["soc"], self.spec.dt_h)
        diesel = np.where(
            shortfall > p_dis_max, np.clip(shortfall - p_dis_max, p.diesel.p_min_mw, p.diesel.rated_mw), 0.0
        )
        battery = np.clip(shortfall - diesel, -p_ch_max, p_dis_max)
        return np.stack([tr / n, ft / n, setpoint, battery, diesel], axis=1)

    def oracle_plan(self, state: DCMicrogridState) -> np.ndarray:
        """Perfect-foresight physical actions [B, 288, 5] from ``state`` on (one MILP per row, HiGHS).

        Rows before each episode's current step are NaN. See
        :func:`~powerzoo.tasks.dc_microgrid_oracle.solve_day_plan` for the model.
        """
        plans = np.full((state.t.size, HORIZON, self.spec.action.dim), np.nan)
        for row in range(state.t.size):
            t0 = int(state.t[row])
            if t0 >= HORIZON:
                continue
            plans[row, t0:] = self.oracle_day_plan(state, row).actions
        return plans

    def oracle_day_plan(self, state: DCMicrogridState, row: int = 0) -> DayPlan:
        """The oracle's plan for row ``row`` of ``state``, with its forecast of the (penalised) return."""
        return solve_day_plan(
            self.params, self.day_foresight(state, row), self.spec.dt_h, self._weights, self._penalties,
            setpoint_min_c=SETPOINT_MIN_C,
        )

    def day_foresight(self, state: DCMicrogridState, row: int) -> DayForesight:
        """What the oracle knows at row ``row`` of ``state``: the rest of its day (see :class:`DayForesight`)."""
        w = self.workload
        t0 = int(state.t[row])
        idx = self._step_index(state.day_id[row:row + 1], np.arange(t0, HORIZON))  # [S] calendar steps
        temp_out, price, co2, pv_mw = self._exogenous[idx].T
        arrivals = per_bucket(w.arrival_cum_gpuh[idx].astype(np.float64))  # [S, C, K]
        arrivals[0] = per_bucket(state.queue_cum_gpuh[row:row + 1])[0]  # queued now, this step's arrivals in
        allowance = state.carry_allowance_gpuh[row] + w.arrival_carry_gpuh[idx[1:]].sum(axis=0)
        return DayForesight(
            t0=t0,
            soc=float(state.soc[row]),
            zone_temp_c=float(state.zone_temp_c[row]),
            temp_out_c=temp_out,
            price_per_mwh=price,
            grid_co2_t_per_mwh=co2,
            pv_mw=pv_mw,
            arrivals_gpuh=arrivals,
            carry_allowance_gpuh=allowance,
            bucket_due_step=w.bucket_due_step,
        )


class DCMicrogridSafe(DCMicrogrid):
    """Data-centre microgrid, CMDP form: the reward is the weighted objective only."""

    task_id = "dc_microgrid_safe"
    penalized = False
    gym_id = "powerzoo/DCMicrogridSafe-v0"
