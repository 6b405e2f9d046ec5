"""``marl_ev_v2g``: EV charging sites on the IEEE 33-bus feeder charge for their drivers and sell
V2G energy.

Model (multi-agent, per-agent reward, 60-minute steps, 168 per episode = one week from midnight)
---------------------------------------------------------------------------------------------------
* Feeder: ``case33bw`` with an exact AC power flow every step (:mod:`powerzoo.tasks.feeder`); bus
  loads = the case's base load x ``load_scale = 0.7`` x the calendar load shape ``demand_pu``
  (as ``marl_der_arbitrage``). A week that runs past 31 December wraps to January.
* Agents ``site_0 .. site_{n-1}`` (``n_evs`` of them, default 5): charging sites, each with
  ``vehicles_per_site`` cars (default ``round(100 / n_evs)``, so the fleet stays about 100 cars)
  on 7.2 kW bidirectional chargers (:mod:`powerzoo.devices.ev_fleet`: 60 kWh batteries, 92 %
  each way, V2G down to 20 % SOC, charging up to 90 %, departure target 80 %). Site ``i`` sits
  at 0-based bus ``1 + floor((i + 0.5) * 32 / n)``, spread evenly over the 32 load buses in case
  order (n = 5: buses 4, 10, 17, 23, 29: the trunk, its far end and the three laterals); more
  than 32 sites share buses.
* Sizing (measured on every hour of the 77 test days, ``tests/test_ev_v2g.py`` checks it): one
  7.2 kW car moves the feeder's lowest voltage by at most 0.0006 p.u. and five of them, one per
  site, by 0.001 p.u.: outside the agents' control. So each site has 20 cars: every car charging
  at full power (720 kW in all) lowers the lowest voltage by 0.019 to 0.021 p.u. (0.016 to 0.018
  with 20 sites of 5 cars), every car discharging raises it by 0.011 to 0.013 p.u. With the fleet
  idle the lowest voltage falls below 0.95 p.u. on 44 of the 77 test days (late morning and
  early evening), so charging at the evening peak costs voltage.
* Trips (:mod:`powerzoo.data.mobility`): per episode, each car's trips of the week are drawn from
  the env's RNG (weekday commutes, fewer and shorter weekend trips, on the calendar's own
  weekends and holidays); starting SOC uniform in [0.5, 0.8]. Cars are home at midnight. A car
  leaves at the start of the hour its trip starts and is plugged in again from the hour it is
  back; its trip energy is drawn evenly over the hours away.
* Action per agent: one power per car of the site, ``ev_j.p_kw`` in [-7.2, 7.2] kW (- charge,
  + discharge). Only plugged-in cars act: an away car's entry is ignored, a request beyond the
  battery's limits is cut (``info["action_applied"]`` and ``info["ev_p_kw"]`` hold what was
  applied).
* Reward, **per agent**: the site's V2G revenue minus its charging cost at the data layer's
  ``price_per_mwh`` (``price x (discharged - charged kWh) / 1000``, $ per step);
  ``info["reward_terms"]`` holds the team sums ``[v2g_revenue, charging_cost]`` and
  ``info["agent_profit"]`` the per-site split.
* Costs (all selected, >= 0 per step): ``departure_shortfall`` (kWh the cars leaving this step
  lack of their goal, summed: the goal is 80 % SOC, or what charging at full power since the
  car's arrival could reach if that is less, so the shortfall is charging that was not done;
  the end of the episode counts as a departure of every car at home, so a fleet cannot be
  emptied into the grid at the end), ``voltage_violation`` (p.u.) and ``thermal_overload``
  (MVA) as in the other feeder tasks. Per-episode thresholds 5 kWh, 0.5 p.u., 0.5 MVA.
* Observation modes (per agent; grid values from the previous step's flow, at reset from the
  first step's loads with the fleet idle): ``local``: time, price, own block ``own_v_pu,
  own_prev_p_mw, own_bus_load_mw, own_plugged_share`` and per car ``plugged_j``, ``soc_j``,
  ``hours_to_departure_j`` and ``energy_needed_kwh_j`` (goal - energy, < 0 when above the goal;
  both 0 while away); ``global`` (default): ``local`` + ``demand_pu, feeder_p_mw, v_min_pu,
  v_max_pu`` and every site's plugged share and energy needed; ``local_plus_forecast``:
  ``local`` + the price of the next 6 hours; ``local_plus_voltage``: ``local`` + the voltages of
  the neighbouring buses.
* Baselines: random; rule-based: every car charges at full power from arrival until it reaches
  its goal, and in the 3 dearest hours of the average day (train days: 17-20 h) it discharges
  whatever lies above a reserve (50 % SOC, and never more than full-power charging can bring
  back before departure), charging back afterwards (:meth:`MarlEvV2g.rule_based_action`);
  oracle: one LP on HiGHS for the week (:mod:`powerzoo.tasks.ev_v2g.baselines`). Team return
  ($/week) on the 77 test weeks (``benchmarks/compute_baselines.py``): random -234.1 with 16,054
  kWh of shortfall a week (it spends less only because it sends the cars off empty), rule-based
  -246.4 with no shortfall and 0.54 p.u.-steps of voltage violation, oracle +40.0 with no
  shortfall and 0.07.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.mobility import sample_trips
from powerzoo.devices.ev_fleet import (
    EVFleetParams,
    departure_goal_kwh,
    departure_shortfall_kwh,
    ev_fleet_step,
)
from powerzoo.tasks.base import StepOutput
from powerzoo.tasks.ev_v2g.baselines import peak_hours, rule_powers_kw, solve_week
from powerzoo.tasks.ev_v2g.observation import FORECAST_STEPS, Slots, observation_modes
from powerzoo.tasks.feeder import GRID_COST_UNITS, GRID_COSTS, FeederTask, child_buses
from powerzoo.tasks.spec import TaskSpec, VectorSpec

__all__ = ["MarlEvV2g", "EvV2gParams", "EvV2gState", "site_buses"]

HORIZON = 168
STEP_MINUTES = 60
EPISODE_DAYS = 7
CASE = "case33bw"
MAX_SITES, MAX_VEHICLES_PER_SITE = 64, 200  # bounds of the task keywords
_NEVER = np.iinfo(np.int16).max  # a trip that never happens (int16 step tables)
# per-car energies and powers (4 mWh resolution at 60 kWh; halves the step's memory traffic)
CAR_FLOAT = np.float32
_min_reduce, _max_reduce = np.minimum.reduce, np.maximum.reduce


def site_buses(n_sites: int, n_bus: int = 33) -> np.ndarray:
    """0-based buses of ``n_sites`` charging sites, spread evenly over the load buses 1..n_bus-1."""
    return 1 + np.floor((np.arange(n_sites) + 0.5) * (n_bus - 1) / n_sites).astype(np.int64)


def _check_count(name: str, value: Any, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"marl_ev_v2g: {name} must be an integer, got {value!r}")
    if not 1 <= value <= high:
        raise ValueError(f"marl_ev_v2g: {name} must lie in [1, {high}], got {value}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class EvV2gParams:
    """The numbers of a ``marl_ev_v2g`` episode; each is a task keyword."""

    # charging sites (agents), spread evenly over the feeder's load buses
    n_evs: int = 5
    # cars per site; None: the default fleet (``fleet_vehicles``) split over the sites
    vehicles_per_site: int | None = None
    # cars of the default fleet when vehicles_per_site is not given
    fleet_vehicles: int = 100
    # bus loads = the case's base load x this x demand_pu
    load_scale: float = 0.7
    # range of the cars' state of charge at reset (fraction), drawn uniformly
    initial_soc: tuple[float, float] = (0.5, 0.8)
    # the rule sells V2G in this many dearest hours of the average day
    peak_hours: int = 3
    # the cars: 60 kWh batteries on 7.2 kW bidirectional chargers (EVFleetParams' defaults)
    fleet: EVFleetParams = EVFleetParams()

    def __post_init__(self) -> None:
        n = _check_count("n_evs", self.n_evs, MAX_SITES)
        object.__setattr__(self, "n_evs", n)
        per_site = self.vehicles_per_site
        v = (
            max(1, round(self.fleet_vehicles / n))
            if per_site is None
            else _check_count("vehicles_per_site", per_site, MAX_VEHICLES_PER_SITE)
        )
        object.__setattr__(self, "vehicles_per_site", v)


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
    prev_p_mw: np.ndarray  # [B, S] each site's power last step (+ into the feeder)
    vm_pu: np.ndarray  # [B, n_bus] last flow's voltage magnitudes
    feeder_p_mw: np.ndarray  # [B] last flow's head power
    v_complex_pu: np.ndarray  # [B, n_bus] last flow's voltages (warm start)


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
    at peaks."""

    task_id = "marl_ev_v2g"
    horizon = HORIZON
    Params = EvV2gParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = p = self.make_params(**task_kwargs)
        super().__init__(self.make_spec(**task_kwargs), split)
        self.n_sites, self.per_site = p.n_evs, p.vehicles_per_site
        self.n_vehicles = self.n_sites * self.per_site
        self.fleet = p.fleet
        self._year_steps = calendar.N_DAYS * self.profiles.steps_per_day
        case = self.setup_feeder(CASE, p.load_scale, Slots.of).case
        self.buses = site_buses(self.n_sites, case.n_bus)
        # [S, n_bus]: sites may share a bus
        self.incidence = np.zeros((self.n_sites, case.n_bus))
        self.incidence[np.arange(self.n_sites), self.buses] = 1.0
        self.upstream_bus = case.bus_parent[self.buses]
        self._children = child_buses(case, self.buses)
        self._own_load_mw = self.grid.bus_p_mw[self.buses]
        self._forecast_offsets = np.arange(1, FORECAST_STEPS + 1)
        self._peak = peak_hours(p.peak_hours, STEP_MINUTES)

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def spec_for(cls, params: EvV2gParams) -> TaskSpec:
        n, v, fleet = params.n_evs, params.vehicles_per_site, params.fleet
        agents = tuple(f"site_{i}" for i in range(n))
        modes = {
            mode: VectorSpec.from_rows(fields)
            for mode, fields in observation_modes(n, v, fleet, HORIZON).items()
        }
        p = fleet.charge_max_kw
        return TaskSpec(
            task_id=cls.task_id,
            description=(
                f"{n} EV charging sites of {v} cars with 7.2 kW V2G chargers on the IEEE 33-bus "
                "feeder (exact AC "
                "power flow) over a week of stochastic commutes: each site pays for its charging "
                "and earns V2G "
                "revenue, must send every car off with its target charge and keep the feeder in "
                "limits."
            ),
            agents=agents,
            observation=modes["global"],
            action=VectorSpec(
                names=tuple(f"{a}.ev_{j}.p_kw" for a in agents for j in range(v)),
                units=("kW (+ discharge)",) * (n * v),
                low=(-p,) * (n * v),
                high=(fleet.discharge_max_kw,) * (n * v),
            ),
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            splits=calendar.BASE_SPLITS
            + ("load_stress", "heatwave", "low_renewable", "price_spike"),
            reward_terms=("v2g_revenue", "charging_cost"),
            reward_doc=(
                "per agent: own price x (discharged - charged kWh) / 1000 ($ per step); "
                "reward_terms are the team sums"
            ),
            constraint_names=("departure_shortfall", *GRID_COSTS),
            constraint_units=("kWh (sum over leaving cars)", *GRID_COST_UNITS),
            selected_constraints=("departure_shortfall", *GRID_COSTS),
            cost_thresholds={
                "departure_shortfall": 5.0,
                "voltage_violation": 0.5,
                "thermal_overload": 0.5,
            },
            baselines=("random", "rule_based", "oracle"),
            reward_presets={
                "profit": {},
                "penalized": {
                    "departure_shortfall": 1.0,
                    "voltage_violation": 1000.0,
                    "thermal_overload": 1000.0,
                },
            },
            obs_modes=tuple(modes),
            obs_mode_specs=modes,
            default_obs_mode="global",
            shared_reward=False,
            gamma=0.999,
            termination_doc=(
                "never terminates early; episodes are truncated at the horizon (the end of the "
                "week)"
            ),
        )

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
        flow = self.grid.solve(p, q)
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
            np.zeros((b, self.n_sites)),
            flow.vm_pu,
            flow.info["feeder_p_mw"],
            flow.v_complex_pu,
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
        lo = int(_min_reduce(t))
        if lo == int(_max_reduce(t)):
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
            obs[:, :, g] = demand[:, None]
            obs[:, :, g + 1] = state.feeder_p_mw[:, None]
            obs[:, :, g + 2] = _min_reduce(vm, axis=1)[:, None]
            obs[:, :, g + 3] = _max_reduce(vm, axis=1)[:, None]
            obs[:, :, g + 4 : g + 4 + n_s] = share[:, None, :]
            obs[:, :, g + 4 + n_s : g + 4 + 2 * n_s] = self._site_sum(need)[:, None, :] * 1e-3
        if s.forecast is not None:
            ahead = self.grid.price_per_mwh.take(
                (flat[:, None] + self._forecast_offsets) % self._year_steps
            )
            obs[:, :, s.forecast : s.forecast + FORECAST_STEPS] = ahead[:, None, :]
        if s.neighbours is not None:
            obs[:, :, s.neighbours] = vm[:, self.upstream_bus]
            for i, kids in enumerate(self._children):
                obs[:, i, s.neighbours + 1] = _min_reduce(vm[:, kids], axis=1)
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
        p, q = self.grid.bus_loads(self.grid.demand_pu.take(flat))
        p -= (site_kw * 1e-3) @ self.incidence
        flow = self.grid.solve(p, q, state.v_complex_pu)
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
        if leaving.any():
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
        if arriving.any():  # the goal for the departure after the car's return
            row, car = np.divmod(np.flatnonzero(arriving), self.n_vehicles)
            steps = departure[row, car] - t_next[row]
            goal = goal.copy()
            goal[row, car] = departure_goal_kwh(
                self.fleet, ev.energy_kwh[row, car], steps.astype(CAR_FLOAT), dt_h
            )
        revenue = price[:, None] * (site_dis_kwh * 1e-3)
        payment = price[:, None] * ((site_dis_kwh - site_kw * dt_h) * 1e-3)
        profit = revenue - payment
        terms = np.empty((b, 2))
        terms[:, 0] = revenue.sum(axis=1)
        terms[:, 1] = -payment.sum(axis=1)
        site_mw = site_kw * 1e-3
        new_state = dataclasses.replace(
            state,
            t=t_next,
            energy_kwh=ev.energy_kwh,
            goal_kwh=goal,
            plugged=plugged_next,
            departure=departure,
            prev_p_mw=site_mw,
            vm_pu=flow.vm_pu,
            feeder_p_mw=flow.info["feeder_p_mw"],
            v_complex_pu=flow.v_complex_pu,
        )
        return new_state, self.feeder_output(
            flow,
            profit,
            terms,
            costs,
            ev.p_kw,
            price_per_mwh=price,
            net_load_mw=p.sum(axis=1),
            site_p_mw=site_mw,
            agent_profit=profit,
            ev_p_kw=ev.p_kw,
            ev_plugged=plugged,
            ev_energy_kwh=ev.energy_kwh,
            ev_drive_kwh=ev.drive_kwh,
            ev_unserved_drive_kwh=ev.unserved_drive_kwh,
            ev_shortfall_kwh=shortfall,
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Charge to the goal from arrival, V2G in the peak hours above a reserve (module
        docstring),
        from ``global`` observations [B, S, d]: the physical joint action [B, S * V] (kW)."""
        obs = obs.astype(np.float64)
        b, v, s = obs.shape[0], self.per_site, self.obs_slots["global"]
        hour = (
            np.rint(
                np.arctan2(obs[:, 0, s.time.start], obs[:, 0, s.time.start + 1]) * 12 / np.pi
            ).astype(np.int64)
            % 24
        )
        cars = obs[:, :, s.cars : s.cars + 4 * v].reshape(b, self.n_sites, 4, v)
        p = rule_powers_kw(
            self.fleet,
            cars[:, :, 0] > 0.5,
            cars[:, :, 1] * self.fleet.battery_kwh,
            cars[:, :, 2],
            cars[:, :, 3],
            self._peak[hour][:, None, None],
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
