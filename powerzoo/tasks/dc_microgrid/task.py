"""The ``dc_microgrid`` / ``dc_microgrid_safe`` task: batched state, reset / observe / step.

The model is described in :mod:`powerzoo.tasks.dc_microgrid`; the spec and observation layout
are in :mod:`.spec`, the site's devices in :mod:`powerzoo.tasks.datacentre.site`, the baselines
in :mod:`.rule` and :mod:`.oracle`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data.workload import get_workload, workload_scenario_of_split
from powerzoo.devices.battery import BatteryDispatch, settlement_value
from powerzoo.devices.diesel import DieselCommitment
from powerzoo.devices.grid_tie import GridTie, grid_carbon_intensity
from powerzoo.devices.job_queue import per_bucket
from powerzoo.devices.pv import pv_power_mw
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.datacentre.model import DataCentre
from powerzoo.tasks.datacentre.site import SETPOINT_MIN_C, DCMicrogridParams
from powerzoo.tasks.dc_microgrid.oracle import DayForesight, DayPlan, solve_day_plan
from powerzoo.tasks.dc_microgrid.rule import rule_based_action
from powerzoo.tasks.dc_microgrid.spec import (
    EXOGENOUS_OBS,
    HORIZON,
    PENALTIES,
    REWARD_WEIGHTS,
    STEP_MINUTES,
    ObservationSlots,
    dc_microgrid_spec,
)
from powerzoo.tasks.spec import TaskSpec

__all__ = ["DCMicrogrid", "DCMicrogridState"]


@dataclasses.dataclass
class DCMicrogridState:
    """Batched state; leading axis B. C = 2 job classes, K = 25 deadline buckets."""

    day_id: np.ndarray  # [B] split day index the episode started on (int64)
    t: np.ndarray  # [B] steps elapsed (int64)
    soc: np.ndarray  # [B] battery state of charge (fraction)
    diesel_on: np.ndarray  # [B] the diesel ran during the last step (bool)
    diesel_steps: np.ndarray  # [B] steps the diesel has run, or rested, in a row (int64)
    zone_temp_c: np.ndarray  # [B] server-zone temperature (deg C)
    queue_cum_gpuh: np.ndarray  # [B, C, K] work due by the end of each bucket (cumulative, GPU-h)
    arrived_gpuh: np.ndarray  # [B, C] work arrived this episode, initial queue included (GPU-h)
    served_gpuh: np.ndarray  # [B, C] work done this episode (GPU-h)
    dropped_gpuh: np.ndarray  # [B, C] work dropped at its deadline this episode (GPU-h)
    carry_allowance_gpuh: np.ndarray  # [B, C] work due after the day that may be left at its end
    due_1h_gpuh: np.ndarray  # [B, C] derived: work due by the end of the current hour
    required_gpus: np.ndarray  # [B, C] derived: least allocation meeting every deadline


class DCMicrogrid(Task):
    """Data-centre microgrid, MDP form: violation penalties folded into the reward.

    ## Description
    An AI data centre on its own microgrid, 5-minute steps: 2,048 GPUs serving training and
    fine-tuning jobs with hourly deadlines, cooling plant and server zone, 2 MW PV, a 4 MWh / 2 MW
    battery, a 2.5 MW diesel set and a 1.5 MW grid tie that covers the rest of the demand up to its
    cap. Derivations: the ``powerzoo.tasks.dc_microgrid`` module docstring.
    ## Action
    ``[training_share, finetune_share, cooling_setpoint_c, battery_p_mw, diesel_p_mw]``: GPU
    shares per job class (scaled down when they sum above 1), zone setpoint in [18, 32] deg C,
    battery power in [-2, 2] MW (+ discharge), diesel output in [0, 2.5] MW (minimum stable output,
    start cost and minimum run and down times of 1 h apply).
    ## Observation
    Time, outdoor and zone temperature, PV capacity factor, price, grid carbon intensity, SOC,
    diesel status and hold time; per job class the queued work, the work due within the hour and
    the least GPU allocation meeting every deadline.
    ## Reward
    ``info["reward_vector"] = [energy (MWh), cost ($), carbon (tCO2)]`` weighted by
    ``(1, 0.5, 25.5)`` (carbon at 51 $/tCO2; the last step's cost holds the battery's settlement at
    the day's mean price), minus penalties of 10 per GPU-h late, 100 per K h too hot and 5,000 per
    MWh unserved.
    ## Costs
    ``sla_violation`` (GPU-h dropped at its deadline, plus the work behind schedule at the day's
    end), ``overtemperature`` (K h above 27 deg C), ``power_deficit`` (MWh unserved).
    ## Starting state
    SOC 0.5, diesel off, zone at ``initial_zone_temp_c``, the day's queued work.
    ## Episode end
    Truncated after 288 steps (one day); no early termination.
    ## Arguments
    Site ratings: ``n_gpus``, ``pv_capacity_mw``, ``battery_energy_mwh``, ``battery_power_mw``,
    ``diesel_rated_mw``, ``grid_import_max_mw`` (0: islanded), ``cooling_capacity_mw``,
    ``initial_soc``, ``initial_zone_temp_c``; ``market`` picks the price model
    (``powerzoo.data.markets``).
    """

    task_id = "dc_microgrid"
    penalized = True
    gym_id = "powerzoo/DCMicrogrid-v0"

    Params = DCMicrogridParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = p = self.make_params(**task_kwargs)
        super().__init__(self.make_spec(**task_kwargs), split)
        p.zone.check_step(self.spec.dt_h)
        self.workload = get_workload(workload_scenario_of_split(split), STEP_MINUTES)
        series = self.profiles.series
        self._temp = series["temp_c"]
        self._pv_cf = series["pv_cf"]
        self._price = series["price_per_mwh"]
        self._co2 = grid_carbon_intensity(
            p.grid, series["demand_pu"], series["pv_cf"], series["wind_cf"]
        )
        self._weights = REWARD_WEIGHTS.copy()
        self._penalties = PENALTIES.copy()
        self._obs_dim = self.spec.observation.dim
        self._slots = ObservationSlots.of(self.spec.observation)
        # per calendar step, gathered with one ``take`` per step: [temp, price, co2, pv_mw] for the
        # model and the EXOGENOUS_OBS fields of the observation
        self._day_start = self.split_days * self.profiles.steps_per_day
        self._exogenous = np.stack(
            [self._temp, self._price, self._co2, pv_power_mw(p.pv, self._pv_cf)], axis=1
        )
        exogenous_obs = {
            "temp_c": self._temp,
            "zone_temp_c": np.zeros_like(self._temp),
            "pv_cf": self._pv_cf,
            "price_per_mwh": self._price,
            "grid_co2_t_per_mwh": self._co2,
        }
        self._exogenous_obs = np.stack(
            [exogenous_obs[name] for name in EXOGENOUS_OBS], axis=1
        ).astype(np.float32)
        self._time_obs = self._time_features(np.arange(HORIZON + 1))  # TIME_OBS fields by step
        # the price the battery's end-of-day energy is settled at: the mean of its day's prices
        self._day_mean_price = self._price[
            self._day_start[:, None] + np.arange(HORIZON)[None, :]
        ].mean(axis=1)
        self._init_step_constants()

    # built by _init_step_constants from the parameters and data: left out of pickles (several of
    # them are views of the shared workload, which pickles by reference), rebuilt on unpickling
    _STEP_TABLES = (
        "_dc",
        "_inv_hours_left",
        "_battery",
        "_diesel",
        "_grid",
        "_neg_dt",
        "_fuel_cost",
        "_diesel_co2",
        "_degradation_cost",
        "_start_up_cost",
        "_import_max",
        "_last_step",
        "_soc_start",
        "_capacity",
        "_step_inputs",
        "_obs_base",
        "_obs_day_row",
        "_obs_step_row",
    )

    def __getstate__(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key not in self._STEP_TABLES}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_step_constants()

    def _init_step_constants(self) -> None:
        """What :meth:`step` and :meth:`observe` need, worked out once.

        At B = 1 a step costs what its ~140 numpy calls cost (about 0.4 us each, three times
        that on a strided or broadcast operand), so: the devices hold their constants as 0-d
        arrays (numpy converts a Python float operand on every call); the data centre
        (:class:`.datacentre.DataCentre`) tabulates the queue's outlook and skips the drop/carry
        bookkeeping on the 11 steps in 12 where nothing falls due; the condenser temperature
        (weather only) is tabulated; the observation's time and weather fields come from one
        table row per (split day, step). Each shortcut gives the same bits as the plain formula
        (``tests/envs/test_speed_paths.py`` checks the step against it).
        """
        p, w, dt_h = self.params, self.workload, self.spec.dt_h

        def f64(x: float) -> np.ndarray:
            return np.array(x, np.float64)

        self._dc = DataCentre(p.cluster, p.cooling, p.zone, w, HORIZON, dt_h)
        self._inv_hours_left = (
            self._dc.inv_hours_left
        )  # [t, K] (1/h) until each bucket is due, at least one step
        self._battery = BatteryDispatch(p.battery, dt_h)
        self._diesel = DieselCommitment(p.diesel, dt_h)
        self._grid = GridTie(p.grid)
        # -(x) * dt == x * (-dt) exactly, so the reward terms fold their sign into the constant
        self._neg_dt = f64(-dt_h)
        self._fuel_cost, self._diesel_co2 = (
            f64(p.diesel.fuel_cost_per_mwh),
            f64(p.diesel.co2_t_per_mwh),
        )
        self._degradation_cost = f64(p.battery.degradation_cost_per_mwh)
        self._start_up_cost = f64(p.diesel.start_up_cost)
        self._import_max = f64(p.grid.import_max_mw)
        self._last_step = np.array(HORIZON - 1, np.int64)
        self._soc_start, self._capacity = (
            f64(p.initial_soc),
            f64(p.battery.energy_capacity_mwh),
        )
        # rows [temp, price, co2, pv_mw, condenser temperature] x calendar step: contiguous per
        # series
        self._step_inputs = np.ascontiguousarray(
            np.concatenate([self._exogenous.T, self._dc.plant.condenser_temp_c(self._temp)[None]])
        )
        # observation rows by (split day, step 0..HORIZON): the time and exogenous fields filled in
        days, steps = np.arange(self.n_days), np.arange(HORIZON + 1)
        base = np.zeros((self.n_days, HORIZON + 1, self._obs_dim), np.float32)
        base[:, :, self._slots.time] = self._time_obs[None]
        base[:, :, self._slots.exogenous] = self._exogenous_obs[
            self._day_start[:, None] + steps[None, :]
        ]
        self._obs_base = base.reshape(-1, self._obs_dim)
        self._obs_day_row, self._obs_step_row = (
            days * (HORIZON + 1),
            steps,
        )  # the latter raises past the horizon

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def spec_for(cls, params: DCMicrogridParams) -> TaskSpec:
        return dc_microgrid_spec(cls.task_id, params, cls.penalized, cls.gym_id)

    # ---- batched model ----------------------------------------------------------------------
    def _step_index(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Calendar step index [B] of step ``t`` of episodes started on split days ``day_id``."""
        return self._day_start.take(day_id) + t

    def _time_features(self, t: np.ndarray) -> np.ndarray:
        """The TIME_OBS fields ``[hour_sin, hour_cos, time_remaining]`` [B, 3] at steps ``t``."""
        phase = (2.0 * np.pi / self.profiles.steps_per_day) * t
        out = np.empty((t.size, 3), dtype=np.float32)
        out[:, 0] = np.sin(phase)
        out[:, 1] = np.cos(phase)
        out[:, 2] = 1.0 - t / HORIZON
        return out

    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> DCMicrogridState:
        day_id = self.check_day_id(day_id)
        p = self.params
        t = np.zeros_like(day_id)
        cum, allowance = self._dc.initial_queue(
            self.split_days[day_id], self._step_index(day_id, t)
        )
        due_1h, required = self._dc.outlook(cum, t, allowance)
        zeros = np.zeros(cum.shape[:2])
        diesel_on, diesel_steps = self._diesel.initial_state(day_id.size)
        return DCMicrogridState(
            day_id=day_id,
            t=t,
            soc=np.full(day_id.shape, p.initial_soc),
            diesel_on=diesel_on,
            diesel_steps=diesel_steps,
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
        t, slots = state.t, self._slots
        try:  # the time and exogenous fields, precomputed for steps 0..HORIZON
            obs = self._obs_base.take(
                self._obs_day_row.take(state.day_id) + self._obs_step_row.take(t), axis=0
            )
        except IndexError:  # stepped on past the horizon without a reset
            obs = np.empty((t.size, self._obs_dim), dtype=np.float32)
            obs[:, slots.time] = self._time_features(t)
            obs[:, slots.exogenous] = self._exogenous_obs.take(
                self._step_index(state.day_id, t), axis=0
            )
        obs[:, slots.zone_temp_c] = state.zone_temp_c
        obs[:, slots.soc] = state.soc
        obs[:, slots.diesel_on] = state.diesel_on
        obs[:, slots.diesel_hold_h] = self._diesel.hold_h(state.diesel_on, state.diesel_steps)
        obs[:, slots.queued_gpuh] = state.queue_cum_gpuh[:, :, -1]
        obs[:, slots.due_1h_gpuh] = state.due_1h_gpuh
        obs[:, slots.required_gpus] = state.required_gpus
        return obs

    def step(
        self, state: DCMicrogridState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[DCMicrogridState, StepOutput]:
        # the constant operands are 0-d arrays and the shortcuts are exact: see _init_step_constants
        dc = self._dc
        t = state.t
        idx = self._day_start.take(state.day_id) + t  # calendar step
        n_rows = idx.size
        temp_out, price, co2, pv_mw, condenser_c = self._step_inputs.take(idx, axis=1)

        # compute: allocate GPUs, serve the queue earliest-deadline-first; cooling and zone
        # temperature
        gpus, cum, served, it_mw = dc.compute(state.queue_cum_gpuh, action[:, :2])
        setpoint = action[:, 2]
        zone_temp, cooling_mw, plant = dc.cool_parts(
            state.zone_temp_c, temp_out, condenser_c, setpoint, it_mw
        )

        facility_mw = energy_mw = it_mw + cooling_mw  # what the facility asks for (and uses)

        # supply: the diesel (on/off under its minimum times), the battery (charging only from
        # what the site has left after its load), then the grid tie settles the residual
        diesel = self._diesel.step(state.diesel_on, state.diesel_steps, action[:, 4])
        diesel_mw = diesel.output_mw
        p_ch_max, p_dis_max = self._battery.feasible_power_mw(state.soc)
        headroom = pv_mw + diesel_mw + self._import_max - facility_mw
        p_ch_max = np.minimum(p_ch_max, np.maximum(headroom, dc.zero))
        soc, battery_mw, charge_mwh, discharge_mwh = self._battery.apply_power(
            state.soc, action[:, 3].clip(-p_ch_max, p_dis_max)
        )
        residual = facility_mw - battery_mw - pv_mw - diesel_mw
        grid_mw, deficit_mw, spill_mw = self._grid.settle(residual)
        if np.count_nonzero(deficit_mw):  # supply short of the demand: the GPUs are throttled
            short = deficit_mw > dc.zero
            supply_mw = pv_mw + diesel_mw + battery_mw + grid_mw
            cut = dc.within_supply(  # on the plant's point of this step (COP, zone terms)
                state.queue_cum_gpuh, gpus, served, it_mw, state.zone_temp_c, plant, supply_mw
            )
            if np.count_nonzero(short) == n_rows:  # all short (a single env): the cut step as is
                cum, served, it_mw, zone_temp, cooling_mw = cut
            else:
                cum = np.where(short[:, None, None], cut[0], cum)
                served = np.where(short[:, None], cut[1], served)
                it_mw, zone_temp, cooling_mw = (
                    np.where(short, new, old)
                    for new, old in zip(cut[2:], (it_mw, zone_temp, cooling_mw), strict=True)
                )
            energy_mw = it_mw + cooling_mw  # what the throttled facility uses

        # objectives (<= 0, but for the end-of-day settlement and grid energy bought at a negative
        # price) and costs (>= 0)
        reward_vector = np.empty((n_rows, 3))
        neg_dt = self._neg_dt
        np.multiply(energy_mw, neg_dt, out=reward_vector[:, 0])
        wear_starts = self._degradation_cost * (charge_mwh + discharge_mwh)  # >= +0: x + 0.0 is x
        if np.count_nonzero(diesel.started):  # start-up costs only where the diesel starts
            wear_starts = wear_starts + self._start_up_cost * diesel.started
        np.subtract(
            (grid_mw * price + diesel_mw * self._fuel_cost) * neg_dt,
            wear_starts,
            out=reward_vector[:, 1],
        )
        settlement = np.zeros(n_rows)
        last = t == self._last_step
        if np.count_nonzero(last):  # the day ends: the battery's energy is settled
            stored_change_mwh = (soc - self._soc_start) * self._capacity
            bat = self.params.battery
            settlement = np.where(
                last,
                settlement_value(
                    stored_change_mwh,
                    self._day_mean_price.take(state.day_id),
                    bat.charge_efficiency,
                    bat.discharge_efficiency,
                    bat.degradation_cost_per_mwh,
                ),
                settlement,
            )
            reward_vector[:, 1] = np.where(
                last, reward_vector[:, 1] + settlement, reward_vector[:, 1]
            )
        np.multiply(grid_mw * co2 + diesel_mw * self._diesel_co2, neg_dt, out=reward_vector[:, 2])
        costs = np.zeros((n_rows, 3))
        dc.overtemperature_kh(zone_temp, out=costs[:, 1])
        np.multiply(deficit_mw, dc.dt, out=costs[:, 2])

        # time advances: work due now is dropped, then the next step's jobs arrive
        q = dc.advance(cum, t, idx, state.carry_allowance_gpuh, state.dropped_gpuh)
        if q.sla_gpuh is not None:
            costs[:, 0] = q.sla_gpuh
        reward = reward_vector @ self._weights
        if self.penalized:
            reward = reward - costs @ self._penalties

        new_state = DCMicrogridState(
            day_id=state.day_id,
            t=q.t_next,
            soc=soc,
            diesel_on=diesel.on,
            diesel_steps=diesel.steps_in_state,
            zone_temp_c=zone_temp,
            queue_cum_gpuh=q.cum,
            arrived_gpuh=state.arrived_gpuh + q.arrived,
            served_gpuh=state.served_gpuh + served,
            dropped_gpuh=q.dropped_gpuh,
            carry_allowance_gpuh=q.allowance,
            due_1h_gpuh=q.due_1h,
            required_gpus=q.required,
        )
        applied = action.copy(order="K")  # the setpoint is applied as asked
        np.multiply(gpus, dc.per_gpu, out=applied[:, :2])
        applied[:, 3] = battery_mw
        applied[:, 4] = diesel_mw
        out = StepOutput(
            reward=reward,
            reward_terms=reward_vector,
            constraint_costs=costs,
            terminated=np.zeros(n_rows, dtype=bool),
            action_applied=applied,
            info={
                "reward_vector": reward_vector,
                "it_mw": it_mw,
                "cooling_mw": cooling_mw,
                "zone_temp_c": zone_temp,
                "temp_c": temp_out,
                "pv_mw": pv_mw,
                "pv_curtailed_mw": np.minimum(spill_mw, pv_mw),
                "diesel_mw": diesel_mw,
                "diesel_started": diesel.started,
                "battery_p_mw": battery_mw,
                "soc": soc,
                "grid_import_mw": grid_mw,
                "deficit_mw": deficit_mw,
                "spill_mw": spill_mw,
                "price_per_mwh": price,
                "grid_co2_t_per_mwh": co2,
                "storage_settlement": settlement,
                **dc.queue_info(gpus, served, new_state.arrived_gpuh, new_state.served_gpuh, q),
            },
        )
        return new_state, out

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Physical actions [B, 5] of the rule-based controller (see
        :func:`.rule.rule_based_action`)."""
        fields = dict(
            zip(self.spec.observation.names, obs.T, strict=True)
        )  # field name -> [B] column
        return rule_based_action(self.params, fields, self.spec.dt_h)

    def oracle_plan(self, state: DCMicrogridState) -> np.ndarray:
        """Perfect-foresight physical actions [B, 288, 5] from ``state`` on (one MILP per row,
        HiGHS).

        Rows before each episode's current step are NaN. See
        :func:`~powerzoo.tasks.dc_microgrid.oracle.solve_day_plan` for the model.
        """
        plans = np.full((state.t.size, HORIZON, self.spec.action.dim), np.nan)
        for row in range(state.t.size):
            t0 = int(state.t[row])
            if t0 >= HORIZON:
                continue
            plans[row, t0:] = self.oracle_day_plan(state, row).actions
        return plans

    def oracle_day_plan(self, state: DCMicrogridState, row: int = 0) -> DayPlan:
        """The oracle's plan for row ``row`` of ``state``, with its forecast of the (penalised)
        return."""
        return solve_day_plan(
            self.params,
            self.day_foresight(state, row),
            self.spec.dt_h,
            self._weights,
            self._penalties,
            setpoint_min_c=SETPOINT_MIN_C,
        )

    def day_foresight(self, state: DCMicrogridState, row: int) -> DayForesight:
        """What the oracle knows at row ``row`` of ``state``: the rest of its day (see
        :class:`DayForesight`)."""
        w = self.workload
        t0 = int(state.t[row])
        idx = self._step_index(
            state.day_id[row : row + 1], np.arange(t0, HORIZON)
        )  # [S] calendar steps
        temp_out, price, co2, pv_mw = self._exogenous[idx].T
        arrivals = per_bucket(w.arrival_cum_gpuh[idx].astype(np.float64))  # [S, C, K]
        arrivals[0] = per_bucket(state.queue_cum_gpuh[row : row + 1])[
            0
        ]  # queued now, this step's arrivals in
        allowance = state.carry_allowance_gpuh[row] + w.arrival_carry_gpuh[idx[1:]].sum(axis=0)
        return DayForesight(
            t0=t0,
            soc=float(state.soc[row]),
            zone_temp_c=float(state.zone_temp_c[row]),
            temp_out_c=temp_out,
            price_per_mwh=price,
            grid_co2_t_per_mwh=co2,
            pv_mw=pv_mw,
            diesel_on=bool(state.diesel_on[row]),
            diesel_steps=int(state.diesel_steps[row]),
            settlement_price_per_mwh=float(self._day_mean_price[state.day_id[row]]),
            stored_start_mwh=self.params.initial_soc * self.params.battery.energy_capacity_mwh,
            arrivals_gpuh=arrivals,
            carry_allowance_gpuh=allowance,
            bucket_due_step=w.bucket_due_step,
        )
