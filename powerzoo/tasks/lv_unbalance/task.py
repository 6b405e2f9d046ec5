"""The ``lv_unbalance`` task: batched state, reset / observe / step, and its baselines' entry
points. The model is described in :mod:`powerzoo.tasks.lv_unbalance`; the homes and their data in
:mod:`.homes`, the feeder's costs in :mod:`.network`, the spec in :mod:`.spec`, the rule in
:mod:`.rule` and the oracle in :mod:`.oracle`."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.devices.ev_fleet import departure_shortfall_kwh, ev_fleet_step
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.lv_unbalance.homes import (
    EXPORT_PER_KWH,
    HORIZON,
    LOAD_POWER_FACTOR,
    UNMET_PER_KWH,
    build_homes,
    charging_sessions,
)
from powerzoo.tasks.lv_unbalance.network import FlowCosts, lv_network
from powerzoo.tasks.lv_unbalance.oracle import plan_day
from powerzoo.tasks.lv_unbalance.rule import rule_action
from powerzoo.tasks.lv_unbalance.spec import (
    HOME_FIELDS,
    HOMES_PER_GROUP,
    N_GROUPS,
    N_HOMES,
    LvUnbalanceParams,
    lv_unbalance_spec,
)
from powerzoo.tasks.spec import TaskSpec

__all__ = ["LvUnbalance", "LvUnbalanceState"]

_LOAD_Q_PER_KW = float(np.tan(np.arccos(LOAD_POWER_FACTOR)))


@dataclasses.dataclass
class LvUnbalanceState:
    """Batched state; every field has leading axis ``B`` (``E`` cars, ``N`` homes)."""

    day_id: np.ndarray  # [B] split day the episode started on (at noon)
    t: np.ndarray  # [B] steps elapsed
    energy_kwh: np.ndarray  # [B, E] battery energy (the arrival energy until the car is back)
    arrive: np.ndarray  # [B, E] first step plugged in
    depart: np.ndarray  # [B, E] step the car leaves (HORIZON: stays to the end)
    goal_kwh: np.ndarray  # [B, E] energy it should leave with
    v_pu: np.ndarray  # [B, N] last flow's customer voltages
    vuf_pct: np.ndarray  # [B, N] last flow's unbalance factors
    loading: np.ndarray  # [B] last flow's largest branch loading


class LvUnbalance(Task):
    """PV curtailment, inverter reactive power and home charging on the European LV feeder.

    ## Description
    The IEEE European LV test feeder (800 kVA 11/0.416 kV transformer, 55 single-phase homes on
    905 cable sections), solved with an exact three-phase unbalanced flow every 30-minute step,
    noon to noon. 33 homes have rooftop PV (3.5-6.5 kW) and 22 a 7.4 kW home charger, each on
    the home's own phase and clustered the way adoption is: 60 % of each on phase A, 25 % on B,
    15 % on C. Left alone, the midday export lifts phase A's far customers above 1.1 p.u. and
    loads the trunk's phase A past its rating; the evening's charging on arrival overloads it
    again and takes the voltage unbalance factor past EN 50160's 2 %. The agents must curtail,
    use reactive power and move charging into the night, when it is also cheaper, spread so that
    phase A's draw stays within the trunk's rating and the unbalance limit.

    ## Model
    Households: the feeder's 100 daily profiles, a different one per home and day, scaled by the
    season; which homes have PV and a charger: a fixed draw, phase by phase
    (:mod:`powerzoo.tasks.lv_unbalance.homes`); PV: the calendar's ``pv_cf``; cars: commuting
    trips from :mod:`powerzoo.data.mobility`, one charging session per car and episode (plugged
    in from its return, or from noon, to its next-morning departure). Cable ratings from
    published buried-cable data carried over by resistance
    (:mod:`powerzoo.tasks.lv_unbalance.network`). Agents ``group_0..4``: 11 consecutive homes of
    the feeder's load file each.

    ## Action
    Per agent, padded to 23 entries: for each of its PV homes ``home_NN.pv_limit`` (active
    output cap, p.u. of the rating, [0, 1]) and ``home_NN.q_kvar`` (reactive power, + inject,
    within 44 % of the rating), then for each charger ``home_NN.ev_kw`` in [0, 7.4] kW
    (cut to what the battery takes; nothing while the car is away); ``unused_k`` entries are
    ignored.

    ## Observation
    Mode ``local``: time (hour sine and cosine, time remaining), the tariff, the feeder's
    lowest and highest customer voltage, largest unbalance factor and branch loading (last
    flow), then per home of the group ``load_kw``, ``pv_available_kw``, ``v_pu`` (own phase,
    last flow), ``ev_plugged``, ``ev_need_kwh`` (goal minus energy) and ``ev_hours_left``.

    ## Reward
    Team, $ per step: minus each home's import at the time-of-use tariff (0.15 / 0.25 /
    0.40 $/kWh), plus its export at 0.05 $/kWh, minus 0.60 $/kWh for the energy a car lacks of
    its goal when it leaves.

    ## Costs
    ``voltage_violation`` (p.u. outside [0.9, 1.1] summed over the customers' own phases, per
    step), ``voltage_unbalance`` (percentage points of VUF above 2 % summed over the customers'
    buses), ``thermal_overload`` (each phase's apparent power ``|V| x |I|`` above its rating
    ``I_rated x V_nominal``, summed over the phases of every cable and of the transformer, times
    the step length, MVAh); per-episode budgets 0.1, 0.5 and 0.5. On the test days left alone
    the highest customer voltage reaches 1.17 p.u. (above 1.1 on 91 % of the days, at midday),
    the most loaded cable carries up to 3.0 times its rating (2.0 on the median day), 7.9 MVAh
    of overload on the median day (15.6 at most; 61 % of it between 18:00 and midnight, 32 %
    from the midday export), and the day's largest unbalance factor is 1.26 % at least, 1.99 %
    on the median day and 3.27 % at most: above 2 % on 48 % of the days, nearly all between
    16:00 and midnight. The unbalance budget (0.5, a few buses a little past the limit for a
    step or two) sits where the days part: idle's ``voltage_unbalance`` is 0 on 52 % of them,
    2.4 at the upper quartile and 99.5 at most, so it is over on 38.5 % of the days.

    ## Starting state
    Noon of a split day; every car's session drawn from the env's RNG; grid fields from the
    flow of the first step with PV at full output and no charging.

    ## Episode end
    Truncated after 48 steps (noon to noon); no early termination. Cars still plugged in at the
    end are settled as departing.

    ## Arguments
    ``pv_share`` (0.6), ``ev_share`` (0.4), ``phase_shares`` ((0.6, 0.25, 0.15): the share of
    the PV systems and of the chargers on phases A, B, C), ``pv_kw_low`` (3.5), ``pv_kw_high``
    (6.5), ``charger_kw`` (7.4), ``start_soc_low`` (0.3), ``start_soc_high`` (0.7),
    ``oracle_margin_pu`` (0.004).

    ## Baselines
    Measured on the 65 test days (``benchmarks/compute_baselines.py``), mean return per day:
    random -263.5 $, over a budget on 95.4 % of the days (the cable ratings on 93.8 %, the
    voltage band on 64.6 %, unbalance on 3.1 %); idle (PV at full output, unity power factor,
    charging on arrival at full power) -279.3 $, over a budget on 98.5 % of the days (the cable
    ratings on 98.5 %, the voltage band at midday on 89.2 %, unbalance in the evening on
    38.5 %); rule-based: IEEE 1547-2018 category B volt-var and volt-watt curves on each
    inverter's last measured voltage and charging on arrival at full power, -285.4 $, over a
    budget on 98.5 % (the cable ratings on 98.5 %, the voltage band on 81.5 %, unbalance on
    58.5 %: the curves pull the midday voltage down but leave the charging peak, and the
    reactive power they inject on phase A's low evening voltage turns its phasor on these
    resistive cables and adds to the unbalance); oracle: a perfect-foresight plan of the day, a
    sequence of LPs on HiGHS over voltage and sequence-voltage sensitivities from the exact
    flow, checked with the exact flow, -149.7 $, within every budget on every day (charging
    moved into the cheap night within the trunk's rating, PV curtailed to the band; its largest
    unbalance factor 0.9 % to 1.5 % a day, at most 0.0004 MVAh of overload), about 1.5 s a day
    on one core.
    """

    task_id = "lv_unbalance"
    Params = LvUnbalanceParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = self.make_params(**task_kwargs)
        super().__init__(self.spec_for(self.params), split)
        p = self.params
        self.homes = _homes(p, calendar.scenario_of_split(split))
        self.net = lv_network()
        self.fleet = p.fleet
        names = self.spec.action.names
        self._pv_limit = np.array(
            [names.index(f"home_{h:02d}.pv_limit") for h in self.homes.pv_homes]
        )
        self._pv_q = np.array([names.index(f"home_{h:02d}.q_kvar") for h in self.homes.pv_homes])
        self._ev = np.array([names.index(f"home_{h:02d}.ev_kw") for h in self.homes.ev_homes])
        obs = self.spec.observation
        self._home0 = obs.slot(f"home0_{HOME_FIELDS[0][0]}")
        self._feeder0 = obs.slot("v_min_pu")
        # per step of the day from noon: hour features and the tariff
        t = np.arange(HORIZON + 1)
        phase = 2.0 * np.pi * ((t + 24) % 48) / 48.0
        self._time = np.stack([np.sin(phase), np.cos(phase), 1.0 - t / HORIZON], axis=1)
        self._tariff = np.append(self.homes.tariff, self.homes.tariff[0])

    @classmethod
    def spec_for(cls, params: LvUnbalanceParams) -> TaskSpec:
        return lv_unbalance_spec(cls.task_id, params, _homes(params))

    # ---- helpers ----------------------------------------------------------------------------
    def exogenous(self, day_id: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Household load [B, N] and available PV [B, n_pv] (kW) at steps ``t`` of the episodes
        started on split days ``day_id``."""
        flat = self.homes.flat(self.calendar_day(day_id), np.minimum(t, HORIZON - 1))
        load = self.homes.load_kw[flat]
        pv = self.homes.pv_cf[flat][:, None] * self.homes.pv_kw
        return load, pv

    def net_demand(
        self, load: np.ndarray, pv_kw: np.ndarray, q_kvar: np.ndarray, ev_kw: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Net demand of every home ``(p_kw, q_kvar)`` [B, N] from its household load, PV
        output, inverter reactive power (+ inject) and charging."""
        p = load.copy()
        q = load * _LOAD_Q_PER_KW
        p[:, self.homes.pv_homes] -= pv_kw
        q[:, self.homes.pv_homes] -= q_kvar
        p[:, self.homes.ev_homes] += ev_kw
        return p, q

    def flow(self, p: np.ndarray, q: np.ndarray) -> FlowCosts:
        """The exact flow's customer voltages, unbalance, loading and the costs of one step."""
        return self.net.costs(self.net.solve(p, q), self.spec.dt_h)

    # ---- batched model ----------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> LvUnbalanceState:
        day_id = self.check_day_id(day_id)
        b = day_id.size
        t = np.zeros(b, dtype=np.int64)
        s = charging_sessions(
            rng,
            self.calendar_day(day_id),
            self.homes.n_ev,
            self.fleet,
            self.params.start_soc_low,
            self.params.start_soc_high,
        )
        load, pv = self.exogenous(day_id, t)
        fc = self.flow(
            *self.net_demand(load, pv, np.zeros_like(pv), np.zeros((b, self.homes.n_ev)))
        )
        return LvUnbalanceState(
            day_id, t, s.energy_kwh, s.arrive, s.depart, s.goal_kwh, fc.v_pu, fc.vuf_pct, fc.loading
        )

    def observe(self, state: LvUnbalanceState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations [B, 5, obs_dim] (float32)."""
        self.spec.observation_spec(obs_mode)  # ValueError for an unknown mode
        b = state.t.size
        t = np.minimum(state.t, HORIZON)
        obs = np.zeros((b, N_GROUPS, self.spec.observation.dim), dtype=np.float32)
        obs[:, :, :3] = self._time[t][:, None, :]
        obs[:, :, 3] = self._tariff[t][:, None]
        f = self._feeder0
        obs[:, :, f] = state.v_pu.min(axis=1)[:, None]
        obs[:, :, f + 1] = state.v_pu.max(axis=1)[:, None]
        obs[:, :, f + 2] = state.vuf_pct.max(axis=1)[:, None]
        obs[:, :, f + 3] = state.loading[:, None]
        load, pv = self.exogenous(state.day_id, state.t)
        per_home = np.zeros((b, N_HOMES, len(HOME_FIELDS)))
        per_home[:, :, 0] = load
        per_home[:, self.homes.pv_homes, 1] = pv
        per_home[:, :, 2] = state.v_pu
        plugged = (state.t[:, None] >= state.arrive) & (state.t[:, None] < state.depart)
        ev = self.homes.ev_homes
        per_home[:, ev, 3] = plugged
        per_home[:, ev, 4] = np.where(
            plugged, np.maximum(state.goal_kwh - state.energy_kwh, 0.0), 0.0
        )
        hours = (state.depart - state.t[:, None]) * self.spec.dt_h
        per_home[:, ev, 5] = np.where(plugged, hours, 0.0)
        width = HOMES_PER_GROUP * len(HOME_FIELDS)
        obs[:, :, self._home0 : self._home0 + width] = per_home.reshape(b, N_GROUPS, width)
        return obs

    def step(
        self, state: LvUnbalanceState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[LvUnbalanceState, StepOutput]:
        dt = self.spec.dt_h
        b = state.t.size
        load, avail = self.exogenous(state.day_id, state.t)
        pv = np.minimum(avail, action[:, self._pv_limit] * self.homes.pv_kw)
        q = action[:, self._pv_q]
        plugged = (state.t[:, None] >= state.arrive) & (state.t[:, None] < state.depart)
        cars = ev_fleet_step(
            self.fleet,
            state.energy_kwh,
            -action[:, self._ev],
            plugged,
            np.zeros_like(state.energy_kwh),
            dt,
        )
        charge = -cars.p_kw
        p, qn = self.net_demand(load, pv, q, charge)
        fc = self.flow(p, qn)
        tariff = self._tariff[np.minimum(state.t, HORIZON - 1)]
        imported = np.maximum(p, 0.0).sum(axis=1) * dt
        exported = np.maximum(-p, 0.0).sum(axis=1) * dt
        leaving = state.t[:, None] + 1 == state.depart
        short = departure_shortfall_kwh(state.goal_kwh, cars.energy_kwh, leaving)
        terms = np.empty((b, 3))
        terms[:, 0] = -tariff * imported
        terms[:, 1] = EXPORT_PER_KWH * exported
        terms[:, 2] = -UNMET_PER_KWH * short.sum(axis=1)
        applied = np.array(action, dtype=np.float64)
        applied[:, self._ev] = charge
        new = LvUnbalanceState(
            state.day_id,
            state.t + 1,
            cars.energy_kwh,
            state.arrive,
            state.depart,
            state.goal_kwh,
            fc.v_pu,
            fc.vuf_pct,
            fc.loading,
        )
        out = StepOutput(
            reward=terms.sum(axis=1),
            reward_terms=terms,
            constraint_costs=fc.costs,
            terminated=np.zeros(b, dtype=bool),
            action_applied=applied,
            info={
                "v_min_pu": fc.v_pu.min(axis=1),
                "v_max_pu": fc.v_pu.max(axis=1),
                "vuf_max_pct": fc.vuf_pct.max(axis=1),
                "loading_max": fc.loading,
                "head_kw": fc.head_kw,
                "curtailed_kwh": (avail - pv).sum(axis=1) * dt,
                "charged_kwh": charge.sum(axis=1) * dt,
                "shortfall_kwh": short.sum(axis=1),
                "converged": fc.converged.astype(np.float64),
            },
        )
        return new, out

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Volt-var and volt-watt on each inverter's last measured voltage, charging on
        arrival at full power (:func:`~powerzoo.tasks.lv_unbalance.rule.rule_action`), from
        observations [B, 5, d]: the joint action [B, act_dim]."""
        return rule_action(self, obs)

    def oracle_plan(self, state: LvUnbalanceState) -> np.ndarray:
        """Perfect-foresight joint actions [B, H, act_dim] (:func:`.oracle.plan_day`, one
        episode at a time)."""
        plans = np.zeros((state.t.size, HORIZON, self.spec.action.dim))
        for row in range(state.t.size):
            plans[row] = plan_day(self, state, row)
        return plans


def _homes(params: LvUnbalanceParams, scenario: str = "base"):
    return build_homes(
        tuple(int(x) for x in lv_network().home_phase),
        params.pv_share,
        params.ev_share,
        params.phase_shares,
        params.pv_kw_low,
        params.pv_kw_high,
        scenario,
    )
