"""The ``marl_ev_v2g`` task: batched state, the week's trip tables, reset / observe / step and
baselines.

The model is described in :mod:`powerzoo.tasks.ev_v2g`; the spec is in :mod:`.spec`, the
observation layout in :mod:`.observation`, the rule and the oracle in :mod:`.baselines`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.mobility import sample_trips
from powerzoo.devices.battery import settlement_value
from powerzoo.devices.ev_fleet import departure_goal_kwh, departure_shortfall_kwh, ev_fleet_step
from powerzoo.tasks.base import StepOutput
from powerzoo.tasks.ev_v2g.baselines import peak_hours, rule_powers_kw, solve_week, v2g_pays
from powerzoo.tasks.ev_v2g.observation import FORECAST_STEPS, Slots
from powerzoo.tasks.ev_v2g.spec import (
    CASE,
    EPISODE_DAYS,
    HORIZON,
    STEP_MINUTES,
    EvV2gParams,
    ev_v2g_spec,
    site_buses,
)
from powerzoo.tasks.feeder import FeederTask
from powerzoo.tasks.feeder import row_sum as _row_sum
from powerzoo.tasks.feeder_observation import write_system_fields
from powerzoo.tasks.spec import TaskSpec
from powerzoo.tasks.tariffs import reference_price_per_mwh

__all__ = ["MarlEvV2g", "EvV2gState"]

_NEVER = np.iinfo(np.int16).max  # a trip that never happens (int16 step tables)
# per-car energies and powers (4 mWh resolution at 60 kWh; halves the step's memory traffic)
CAR_FLOAT = np.float32
_min_reduce, _max_reduce = np.minimum.reduce, np.maximum.reduce
_count_nonzero, _dot = np.count_nonzero, np.dot


@dataclasses.dataclass
class EvV2gState:
    """Batched state; every field has leading axis ``B`` (``N`` cars, ``S`` sites, ``D + 1`` days).

    The week's trips are per-day tables (at most one round trip per car and day; day ``D`` is an
    empty day for steps past the horizon); steps are counted from the episode start.
    """

    day_id: np.ndarray  # [B] split day the week started on
    t: np.ndarray  # [B] steps elapsed
    energy_kwh: np.ndarray  # [B, N] battery energy
    goal_kwh: np.ndarray  # [B, N] energy the car should leave with (set on arrival)
    plugged: np.ndarray  # [B, N] bool: at its charger during step t
    departure: np.ndarray  # [B, N] step the car next leaves home (HORIZON: the end of the week)
    leave: np.ndarray  # [B, D+1, N] step the car leaves home that day (NEVER: no trip)
    back: np.ndarray  # [B, D+1, N] step it is plugged in again (NEVER: no trip)
    next_dep: np.ndarray  # [B, D+1, N] first departure on a later day (HORIZON: none)
    drive_kwh: np.ndarray  # [B, D+1, N] battery energy the day's trip draws per step away
    start_kwh: np.ndarray  # [B, S] energy each site's cars held at reset (float64)
    prev_p_mw: np.ndarray  # [B, S] each site's power last step (+ into the feeder)
    vm_pu: np.ndarray  # [B, n_bus] last flow's voltage magnitudes
    feeder_p_mw: np.ndarray  # [B] last flow's head power
    v_complex_pu: np.ndarray  # [B, n_bus] last flow's voltages (warm start)
    ltc_tap: np.ndarray  # [B] the head's tap position (powerzoo.tasks.feeder_ltc)
    ltc_timer: np.ndarray  # [B] steps the regulated voltage has been outside the AVC band
    ltc_operations: np.ndarray  # [B] tap operations since reset


@dataclasses.dataclass(frozen=True)
class _Day:
    """The trip tables at the day of step ``t`` of each row: ``t`` is an int when every row is at
    the
    same step (the tables are then views), else ``[B, 1]``; tables ``[B, N]``."""

    t: Any
    leave: np.ndarray
    back: np.ndarray
    next_dep: np.ndarray
    drive_kwh: np.ndarray

    @property
    def plugged(self) -> np.ndarray:
        """Which cars are at home during step ``t`` [B, N]."""
        return (self.t < self.leave) | (self.t >= self.back)


class MarlEvV2g(FeederTask):
    """EV charging sites on a feeder: meet the drivers' departure targets, buy cheap, sell V2G
    at peaks.

    ## Description
    ``n_evs`` charging sites (default 5) spread over the IEEE 33-bus feeder, each with
    ``vehicles_per_site`` cars (default 84: a fleet of 420) on 7.2 kW bidirectional chargers
    (60 kWh, 92 % each way, V2G down to 20 % SOC, target 80 % at departure), over one week of
    hourly steps; the head's tap changer holds it at 1.019 p.u. Each car's trips are drawn per
    episode from the env's RNG (weekday commutes, fewer weekend trips). Charging every car on
    arrival overloads the trunk at the evening peak.

    ## Action
    Per agent: one power per car, ``ev_j.p_kw`` in [-7.2, 7.2] kW (+ discharge). Only plugged-in
    cars act; a request beyond the battery's limits is cut.

    ## Observation
    Mode ``global`` (default): time, price, ``demand_pu``, feeder head power and voltage extremes,
    every site's plugged share and energy needed, the own block and per car ``plugged_j``,
    ``soc_j``, ``hours_to_departure_j``, ``energy_needed_kwh_j``; also ``local``,
    ``local_plus_forecast`` and ``local_plus_voltage``.

    ## Reward
    Per agent, $ per step: the site's V2G revenue minus its charging cost at the price, minus V2G
    wear (7.5 $/MWh on discharged and recharged energy), and on the week's last step the settlement
    of the energy its cars hold at the week's mean price. A car pack may wear dearer: at 4 x that
    price the oracle discharges 3.2 MWh a week instead of 20.8 and leads the rule by 1,130 $/week
    instead of 1,432 (``benchmarks/v2g_wear_sensitivity.py``): most of its lead is when cars charge.

    ## Costs
    ``departure_shortfall`` (kWh the leaving cars lack of their goal; the episode's end counts as a
    departure), ``voltage_violation`` (p.u.), ``thermal_overload`` (MVAh); weekly budgets = daily
    rates x 7.

    ## Starting state
    Every car at home at midnight with SOC drawn uniform in [0.5, 0.8]; the week's trips drawn from
    the env's RNG.

    ## Episode end
    Truncated after 168 steps (one week); no early termination.

    ## Arguments
    ``n_evs`` (5), ``vehicles_per_site``, ``fleet_vehicles``, ``load_scale`` (0.7),
    ``initial_soc``, ``peak_hours``, ``fleet`` (the cars' parameters), ``market`` (the price
    model, ``powerzoo.data.markets``); the tap changer's ``ltc``, ``ltc_band_centre_pu``,
    ``ltc_bandwidth_pu``, ``ltc_ldc_r_pu``, ``ltc_ldc_x_pu`` (:mod:`powerzoo.tasks.feeder_ltc`).

    ## Baselines
    Random; rule-based: valley filling (each car's need spread evenly over its hours plugged in),
    V2G in the 3 dearest hours of the average day when it pays after wear, never more than 40 %
    of the charger's rating brings back (-91 $/week, every budget kept every test week); oracle:
    one LP on HiGHS for the week (+1,341 $/week). The 35 test weeks start on 7 consecutive days
    of each of the 5 test blocks, so neighbouring weeks share 6 of their 7 days: they are about 5
    independent samples, not 35 (benchmark v2's intervals resample whole test blocks).
    """

    task_id = "marl_ev_v2g"
    Params = EvV2gParams
    case_name = CASE
    ObsSlots = Slots

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        super().__init__(split, **task_kwargs)
        p, case = self.params, self.grid.case
        self.n_sites, self.per_site = p.n_evs, p.vehicles_per_site
        self.n_vehicles = self.n_sites * self.per_site
        self.fleet = p.fleet
        self._year_steps = calendar.N_DAYS * self.profiles.steps_per_day
        self.buses = site_buses(self.n_sites, case.n_bus)
        # [S, n_bus]: sites may share a bus
        self.incidence = np.zeros((self.n_sites, case.n_bus))
        self.incidence[np.arange(self.n_sites), self.buses] = 1.0
        self.locate_neighbours(self.buses)
        self._own_load_mw = self.grid.bus_p_mw[self.buses]
        self._forecast_offsets = np.arange(1, FORECAST_STEPS + 1)
        market = self.profiles.market
        self._peak = peak_hours(p.peak_hours, STEP_MINUTES, market)
        self._reference_price = reference_price_per_mwh(
            self.profiles.steps_per_day, STEP_MINUTES, market
        )

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def spec_for(cls, params: EvV2gParams) -> TaskSpec:
        return ev_v2g_spec(cls.task_id, params)

    # ---- exogenous series -------------------------------------------------------------------
    def flat_index(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Calendar step index of step ``t`` of the week started on split day ``day_id`` (wraps at
        year end)."""
        return (self.grid.day_start.take(day_id) + t) % self._year_steps

    # ---- batched model ----------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> EvV2gState:
        day_id, t, flat = self.first_step(day_id)
        b, n = day_id.size, self.n_vehicles
        trips = sample_trips(rng, self.calendar_day(day_id), EPISODE_DAYS, n)
        soc = rng.uniform(*self.params.initial_soc, size=(b, n))
        energy = (soc * self.fleet.battery_kwh).astype(CAR_FLOAT)
        leave, back, next_dep, drive = self._tables(trips)
        day = _Day(0, leave[:, 0], back[:, 0], next_dep[:, 0], drive[:, 0])
        departure = np.minimum(leave[:, 0], next_dep[:, 0])  # a car can only leave after midnight
        goal = departure_goal_kwh(self.fleet, energy, departure.astype(CAR_FLOAT), self.spec.dt_h)
        p, q = self.grid.bus_loads(self.grid.demand_pu.take(flat))
        flow, ltc = self.grid_reset(p, q)
        return EvV2gState(
            day_id,
            t,
            energy,
            goal,
            day.plugged,
            departure,
            leave,
            back,
            next_dep,
            drive,
            self._site_sum(energy),
            np.zeros((b, self.n_sites)),
            flow.vm_pu,
            flow.info["feeder_p_mw"],
            flow.v_complex_pu,
            ltc.tap,
            ltc.timer,
            ltc.operations,
        )

    def _tables(self, trips: Any) -> tuple[np.ndarray, ...]:
        """Per-day trip tables [B, D+1, N] (see :class:`EvV2gState`) from sampled trips."""
        spd = self.profiles.steps_per_day
        sph = spd / 24.0
        b, d, n = trips.driven.shape
        day0 = np.arange(d)[None, :, None] * spd
        leave_step = day0 + np.rint(trips.leave_h * sph).astype(np.int64)
        back_step = np.maximum(
            day0 + np.rint(trips.return_h * sph).astype(np.int64), leave_step + 1
        )
        leave = np.full((b, d + 1, n), _NEVER, dtype=np.int16)
        back = np.full((b, d + 1, n), _NEVER, dtype=np.int16)
        leave[:, :d] = np.where(trips.driven, leave_step, _NEVER)
        back[:, :d] = np.where(trips.driven, back_step, _NEVER)
        later = np.minimum(leave, HORIZON)[:, ::-1]  # departures, HORIZON where none
        first_from = np.minimum.accumulate(later, axis=1)[
            :, ::-1
        ]  # first departure that day or later
        next_dep = np.full((b, d + 1, n), HORIZON, dtype=np.int16)
        next_dep[:, :d] = first_from[:, 1:]
        drive = np.zeros((b, d + 1, n), dtype=CAR_FLOAT)
        drive[:, :d] = np.where(trips.driven, trips.energy_kwh / (back_step - leave_step), 0.0)
        return leave, back, next_dep, drive

    def day_tables(self, state: EvV2gState, offset: int = 0) -> _Day:
        """The trip tables at the day of step ``t + offset`` of each row (views when all rows are at
        one step)."""
        t = state.t
        spd = self.profiles.steps_per_day
        if t.size == 1:  # one row (its step, without the reductions)
            lo = hi = int(t[0])
        else:
            lo, hi = int(_min_reduce(t)), int(_max_reduce(t))
        if lo == hi:
            at = lo + offset
            d = min(at // spd, EPISODE_DAYS)
            return _Day(
                at, state.leave[:, d], state.back[:, d], state.next_dep[:, d], state.drive_kwh[:, d]
            )
        at = t + offset
        d = np.minimum(at // spd, EPISODE_DAYS)
        rows = np.arange(t.size)
        return _Day(
            at[:, None],
            state.leave[rows, d],
            state.back[rows, d],
            state.next_dep[rows, d],
            state.drive_kwh[rows, d],
        )

    def _site_sum(self, x: np.ndarray) -> np.ndarray:
        """Per-site sums [B, S] (float64) of a per-car array [B, N]."""
        return np.einsum(
            "bsv->bs", x.reshape(x.shape[0], self.n_sites, self.per_site), dtype=np.float64
        )

    def observe(self, state: EvV2gState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations [B, S, obs_dim] (float32) of ``obs_mode`` (default ``global``)."""
        b, n_s, v = state.t.size, self.n_sites, self.per_site
        s, obs, flat = self.begin_agent_observation(state, obs_mode, n_s)
        demand = self.grid.demand_pu.take(flat)
        vm = state.vm_pu
        plugged = state.plugged
        o, c = s.own, s.cars
        cars = obs[:, :, c : c + 4 * v].reshape(b, n_s, 4, v)  # a view: plugged, soc, hours, need
        np.copyto(cars[:, :, 0], plugged.reshape(b, n_s, v))
        np.multiply(
            state.energy_kwh.reshape(b, n_s, v), 1.0 / self.fleet.battery_kwh, out=cars[:, :, 1]
        )
        hours = state.departure - state.t[:, None].astype(np.int16)
        hours *= plugged
        np.multiply(hours.reshape(b, n_s, v), self.spec.dt_h, out=cars[:, :, 2])
        need = np.subtract(state.goal_kwh, state.energy_kwh)
        need *= plugged
        np.copyto(cars[:, :, 3], need.reshape(b, n_s, v), casting="same_kind")
        share = self._site_sum(plugged.astype(CAR_FLOAT)) * (1.0 / v)
        obs[:, :, o] = vm[:, self.buses]
        obs[:, :, o + 1] = state.prev_p_mw
        obs[:, :, o + 2] = demand[:, None] * self._own_load_mw
        obs[:, :, o + 3] = share
        if s.system is not None:
            g = s.system
            write_system_fields(obs, g, demand, state.feeder_p_mw, vm)
            obs[:, :, g + 4 : g + 4 + n_s] = share[:, None, :]
            obs[:, :, g + 4 + n_s : g + 4 + 2 * n_s] = self._site_sum(need)[:, None, :] * 1e-3
        if s.forecast is not None:
            ahead = self.grid.price_per_mwh.take(
                (flat[:, None] + self._forecast_offsets) % self._year_steps
            )
            obs[:, :, s.forecast : s.forecast + FORECAST_STEPS] = ahead[:, None, :]
        if s.neighbours is not None:
            self.write_neighbour_voltages(obs, vm, s.neighbours, s.neighbours + 1)
        return obs

    def step(
        self, state: EvV2gState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[EvV2gState, StepOutput]:
        dt_h = self.spec.dt_h
        b = state.t.size
        flat = self.flat_index(state.day_id, state.t)
        price = self.grid.price_per_mwh.take(flat)
        today = self.day_tables(state)
        plugged = state.plugged
        ev = ev_fleet_step(
            self.fleet,
            state.energy_kwh,
            action.reshape(b, self.n_vehicles),
            plugged,
            today.drive_kwh,
            dt_h,
        )
        site_kw = self._site_sum(ev.p_kw)  # [B, S] + into the feeder
        site_dis_kwh = self._site_sum(ev.discharge_kwh)
        site_mw = site_kw * 1e-3
        p, q = self.grid.bus_loads(self.grid.demand_pu.take(flat))
        p -= _dot(site_mw, self.incidence)  # np.dot: matmul's BLAS call
        flow, ltc, _ = self.grid_step(state, p, q)
        # cars leaving at the start of the next step are checked against their goal; few cars leave
        # or
        # arrive in a step, so both work on the indices of those cars only
        t_next = state.t + 1
        nxt = self.day_tables(state, 1)
        leaving = plugged & (state.departure == nxt.t)
        plugged_next = nxt.plugged
        costs = np.empty((b, 3))
        shortfall = np.zeros_like(ev.energy_kwh)
        departure, goal = state.departure, state.goal_kwh
        if _count_nonzero(leaving):
            idx = np.flatnonzero(leaving)
            short = departure_shortfall_kwh(
                state.goal_kwh.ravel().take(idx), ev.energy_kwh.ravel().take(idx), True
            )
            shortfall.ravel()[idx] = short
            costs[:, 0] = np.bincount(idx // self.n_vehicles, weights=short, minlength=b)
            row, car = np.divmod(idx, self.n_vehicles)
            departure = departure.copy()
            departure[row, car] = today.next_dep[row, car]  # the departure after this trip
        else:
            costs[:, 0] = 0.0
        costs[:, 1:] = flow.costs
        arriving = plugged_next & ~plugged
        if _count_nonzero(arriving):  # the goal for the departure after the car's return
            row, car = np.divmod(np.flatnonzero(arriving), self.n_vehicles)
            steps = departure[row, car] - t_next[row]
            goal = goal.copy()
            goal[row, car] = departure_goal_kwh(
                self.fleet, ev.energy_kwh[row, car], steps.astype(CAR_FLOAT), dt_h
            )
        revenue = price[:, None] * (site_dis_kwh * 1e-3)
        payment = price[:, None] * ((site_dis_kwh - site_kw * dt_h) * 1e-3)
        wear = self.fleet.v2g_wear_per_kwh * site_dis_kwh
        profit = revenue - payment - wear
        terms = np.empty((b, 4))
        terms[:, 0] = _row_sum(revenue)
        terms[:, 1] = -_row_sum(payment)
        terms[:, 2] = -_row_sum(wear)
        terms[:, 3] = 0.0
        end = t_next == HORIZON
        if _count_nonzero(end):  # the week's last step: settle each site's stored energy
            settled = self.settlement(
                state.day_id[end], self._site_sum(ev.energy_kwh[end]), state.start_kwh[end]
            )
            profit[end] += settled
            terms[end, 3] = _row_sum(settled)
        new_state = EvV2gState(
            state.day_id,
            t_next,
            ev.energy_kwh,
            goal,
            plugged_next,
            departure,
            state.leave,
            state.back,
            state.next_dep,
            state.drive_kwh,
            state.start_kwh,
            site_mw,
            flow.vm_pu,
            flow.info["feeder_p_mw"],
            flow.v_complex_pu,
            ltc.tap,
            ltc.timer,
            ltc.operations,
        )
        return new_state, self.feeder_output(
            flow,
            profit,
            terms,
            costs,
            ev.p_kw,
            price_per_mwh=price,
            net_load_mw=_row_sum(p),
            site_p_mw=site_mw,
            agent_profit=profit,
            ev_p_kw=ev.p_kw,
            ev_plugged=plugged,
            ev_energy_kwh=ev.energy_kwh,
            ev_drive_kwh=ev.drive_kwh,
            ev_unserved_drive_kwh=ev.unserved_drive_kwh,
            ev_shortfall_kwh=shortfall,
        )

    def settlement(
        self, day_id: np.ndarray, end_kwh: np.ndarray, start_kwh: np.ndarray
    ) -> np.ndarray:
        """End-of-week settlement ($) [B, S] of each site's cars holding ``end_kwh`` [B, S] after
        ``start_kwh`` at reset: the change valued at the week's mean price, a surplus as sold
        through the chargers (x eta_d), a deficit as bought back (/ eta_c)
        (:func:`powerzoo.devices.battery.settlement_value`; charging carries no wear here)."""
        return settlement_value(
            (end_kwh - start_kwh) * 1e-3,
            self.settlement_price(day_id)[:, None],
            self.fleet.charge_efficiency,
            self.fleet.discharge_efficiency,
            0.0,
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Valley filling to the goal, V2G in the peak hours above a reserve
        (:func:`~powerzoo.tasks.ev_v2g.baselines.rule_powers_kw`), from ``global`` observations
        [B, S, d]: the physical joint action [B, S * V] (kW)."""
        obs = obs.astype(np.float64)
        b, v, s = obs.shape[0], self.per_site, self.obs_slots["global"]
        hour = (
            np.rint(
                np.arctan2(obs[:, 0, s.time.start], obs[:, 0, s.time.start + 1]) * 12 / np.pi
            ).astype(np.int64)
            % 24
        )
        cars = obs[:, :, s.cars : s.cars + 4 * v].reshape(b, self.n_sites, 4, v)
        sell = self._peak[hour] & v2g_pays(self.fleet, obs[:, 0, s.price], self._reference_price)
        p = rule_powers_kw(
            self.fleet,
            cars[:, :, 0] > 0.5,
            cars[:, :, 1] * self.fleet.battery_kwh,
            cars[:, :, 2],
            cars[:, :, 3],
            sell[:, None, None],
            self.spec.dt_h,
        )
        return p.reshape(b, self.n_sites * v)

    def oracle_plan(self, state: EvV2gState) -> np.ndarray:
        """Profit-maximising car powers [B, H, S * V] (kW) with perfect foresight of prices, loads
        and trips:
        one LP per episode on HiGHS (:func:`powerzoo.tasks.ev_v2g.baselines.solve_week`), applied
        under the exact flow."""
        plans = np.zeros((state.t.size, HORIZON, self.n_vehicles))
        for row in range(state.t.size):
            plans[row] = solve_week(self, state, row)
        return plans
