"""The unit-commitment model shared by ``marl_uc`` and ``tso`` (state, reset / observe / step, the
observation layouts), described in :mod:`powerzoo.tasks.unit_commitment`."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.devices.thermal_unit import (
    balance_dispatch,
    merit_order_within,
    priority_list_commitment,
    reserve_requirement_mw,
    reserve_shortfall_mw,
)
from powerzoo.physics.dc_power_flow import gen_bus_matrix, ptdf_matrix
from powerzoo.tasks.balancing import RegulationBand
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.spec import TaskSpec
from powerzoo.tasks.transmission import (
    OVERLOAD_PRICE_PER_MWH,
    STEP_MINUTES,
    congestion_ready_case,
    marginal_cost_per_mwh,
)
from powerzoo.tasks.unit_commitment.branches import BranchTerms
from powerzoo.tasks.unit_commitment.rule import rule_based_action
from powerzoo.tasks.unit_commitment.spec import (
    IMBALANCE_PRICE,
    RESERVE_MARGIN,
    TIME_IN_STATE_CAP_H,
    MarlUcParams,
    UCParams,
    marl_uc_spec,
    tso_spec,
    uc_case,
    uc_fleet,
)

__all__ = ["UCState", "UnitCommitment", "MarlUc", "Tso"]

HORIZON = 48
_FREE_STEPS = 10_000  # time in state at the episode start: every minimum time has passed
_add_reduce = np.add.reduce  # ndarray.sum without its Python-level wrapper (the same values)
_NOW_AND_NEXT = np.arange(2)  # the steps whose load is observed


@dataclasses.dataclass
class UCState:
    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    on: np.ndarray  # [B, n] bool, status during the last step
    time_in_state: np.ndarray  # [B, n] int, steps spent in that status
    p_mw: np.ndarray  # [B, n] last output
    prev_imbalance_mw: np.ndarray  # [B] last mismatch (generation - load)


class UnitCommitment(Task):
    """Shared batched model of ``marl_uc`` and ``tso``; subclasses choose the case and the balance.

    ## Description
    Unit commitment and dispatch on a DC network in 30-minute steps over a day: the units' on/off
    status and output, with minimum up and down times, ramps, start-up, shut-down and no-load costs
    (derived by size class; the case gives Pmax and the cost curve), 10-minute spinning reserve and
    the line limits of the dispatch tasks.

    ## Action
    Per unit ``[p_mw, on]``: an output setpoint in ``[0, Pmax]`` and the requested status (on if
    ``on > 0.5``). Switches that would break a minimum up or down time, or a stop from above the
    shut-down ramp limit, are overridden (``info["commitment_overridden"]``); setpoints are clipped
    to the step's output bounds (Pmin/Pmax, ramps; an off unit gives 0).

    ## Observation
    Time, load now and next, committed capacity, last imbalance; per unit its limits, average
    cost, ramp, status, time in status, whether it may switch, last output.

    ## Reward
    $ per step: ``-(fuel + no-load + start-up + shut-down cost + |imbalance| x 1,000 $/MWh + line
    overload x 2,000 $/MWh)``; ``marl_uc`` settles the mismatch within a regulation band (1 % of
    the split year's peak load, 10.9 MW) at 80 $/MWh (2 x the highest marginal cost) apart.

    ## Costs
    ``thermal_overload`` (MVAh), ``reserve_shortfall`` (MWh short of 10 % of the load; ``tso``
    also of the N-1 row ``sum_{g != k} r_g >= p_k`` for every online ``k``), ``power_imbalance``
    (MWh; ``marl_uc``: beyond the band, ``info["regulation_mwh"]`` within it).

    ## Starting state
    The units a priority list commits for the first step's load plus reserve, free to switch, at
    the merit-order dispatch of that load; no ramp limit on the first step.

    ## Episode end
    Truncated after 48 steps (one day). As in a one-day UC, the units' state at the end (on or
    off, time left of their minimum up or down time) carries no value or obligation into the
    next day, for the env and the oracle's MILP alike.

    ## Arguments
    ``load_scale`` (1.1); ``marl_uc``: ``regulation_share`` (0.01), ``regulation_price_per_mwh``.

    ## Baselines
    Random; rule = priority-list commitment for the load plus reserve within the minimum times,
    then congestion-aware economic dispatch of the committed units; oracle = a day-ahead UC MILP
    with perfect foresight on HiGHS, replayed in the env.
    """

    task_id: str = ""
    case_name: str = ""
    balance: bool = False  # True: setpoints balanced by headroom (tso); False: to the slack
    # True: the N-1 row too, sum_{g != k} r_g >= p_k for every online unit k (tso)
    contingency_reserve: bool = False
    Params = UCParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = params = self.make_params(**task_kwargs)
        spec = self.make_spec(**task_kwargs)
        calendar.check_split(split, spec.splits)
        # line_tightening reads the test days' base profiles; only the ratings change
        super().__init__(spec, "test" if split == "line_tightening" else split)
        self.split = split
        self.case = uc_case(self.case_name, split)
        self.fleet = uc_fleet(self.case)
        n = self.case.n_gen
        demand = self.profiles.series["demand_pu"]
        self._demand = demand[: calendar.N_DAYS * self.profiles.steps_per_day]
        self._day_start = self.split_days * self.profiles.steps_per_day
        # bus load per unit of demand [n_bus]
        self.bus_load_scale = self.case.bus_pd_mw * params.load_scale
        self.load_scale = float(self.bus_load_scale.sum())  # system load per unit of demand
        self.regulation = self._regulation_band(float(self._demand.max()) * self.load_scale)
        ptdf = ptdf_matrix(self.case)
        limited = self.case.limited_branches
        self.limited = limited
        # [n, n_lim]
        self.gen_flow = np.ascontiguousarray((gen_bus_matrix(self.case) @ ptdf.T)[:, limited])
        self.load_flow_pu = self.bus_load_scale @ ptdf.T[:, limited]  # [n_lim] per unit of demand
        self.rating = self.case.branch_rate_a_mw[limited]
        self._branch_terms = BranchTerms(self.gen_flow, self.load_flow_pu, self.rating)
        self.marginal_cost = marginal_cost_per_mwh(self.case)
        self.merit_order = np.argsort(self.marginal_cost, kind="stable")
        self.priority_order = np.argsort(self.fleet.average_cost_per_mwh(), kind="stable")
        # the rule's order for spinning reserve: no-load cost per MW of 10-minute response
        self.reserve_order = np.argsort(
            self.fleet.no_load_cost_per_h / np.maximum(self.fleet.reserve_ramp_mw, 1e-9),
            kind="stable",
        )
        self._time_obs = self._time_features(np.arange(HORIZON + 1))
        self._dt_h = self.spec.dt_h  # h per step, read once (the spec's is a property)
        self._steps_per_h = 1.0 / self._dt_h
        self._time_cap_steps = TIME_IN_STATE_CAP_H * self._steps_per_h
        self._n = n
        obs = self.spec.observation
        self._sys = obs.slot(
            "system_load_mw", "system_load_next_mw", "committed_capacity_mw", "prev_imbalance_mw"
        )
        self._time = obs.slot("hour_sin", "hour_cos", "time_remaining")
        self._init_obs_slots()

    def _init_obs_slots(self) -> None:
        """Where the unit fields sit in the observation (subclasses)."""

    def _regulation_band(self, peak_load_mw: float) -> RegulationBand:
        """No regulation band (``tso``: the committed units' headroom already balanced what it
        could, so every MWh left is a violation at the imbalance price)."""
        return RegulationBand(0.0, 0.0, IMBALANCE_PRICE)

    @classmethod
    def spec_for(cls, params: UCParams) -> TaskSpec:
        case = congestion_ready_case(cls.case_name)
        if cls.task_id == "marl_uc":
            return marl_uc_spec(case, uc_fleet(case), params, HORIZON, STEP_MINUTES)
        return tso_spec(case, uc_fleet(case), params.load_scale, HORIZON, STEP_MINUTES)

    # ---- exogenous load ---------------------------------------------------------------------
    def demand_pu(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Demand per unit [B, k] of steps ``t`` [B, k] of the episodes starting on ``day_id``
        [B]."""
        return self._demand.take((self._day_start.take(day_id)[:, None] + t) % self._demand.size)

    def system_load_mw(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        """System load [B, k] in MW of steps ``t`` [B, k]."""
        return self.demand_pu(day_id, t) * self.load_scale

    def _time_features(self, t: np.ndarray) -> np.ndarray:
        steps = self.profiles.steps_per_day
        phase = 2.0 * np.pi * (t % steps) / steps
        return np.stack([np.sin(phase), np.cos(phase), 1.0 - t / HORIZON], axis=1).astype(
            np.float32
        )

    # ---- batched model ----------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> UCState:
        day_id = self.check_day_id(day_id)
        b = day_id.size
        load = self.system_load_mw(day_id, np.zeros((b, 1), np.int64))[:, 0]
        none = np.zeros((b, self._n), dtype=bool)
        f = self.fleet
        reserve = RESERVE_MARGIN * load
        on = priority_list_commitment(
            self.priority_order, f.pmax_mw, load + reserve, none, none, f.reserve_ramp_mw, reserve
        )
        p = merit_order_within(on * f.pmin_mw, on * f.pmax_mw, load, self.merit_order)
        return UCState(
            day_id,
            np.zeros(b, np.int64),
            on,
            np.full((b, self._n), _FREE_STEPS, np.int64),
            p,
            np.zeros(b),
        )

    def _time_at(self, t: np.ndarray) -> np.ndarray:
        """Time features [B, 3] at steps ``t`` [B] (from the table of steps 0..horizon)."""
        try:
            return self._time_obs.take(t, axis=0)
        except IndexError:  # stepped on past the horizon without a reset
            return self._time_features(t)

    def _system_obs(self, state: UCState) -> np.ndarray:
        """``[load, load next, committed capacity, prev imbalance]`` [B, 4] (MW)."""
        sys = np.empty((state.t.size, 4))
        sys[:, :2] = self.system_load_mw(state.day_id, state.t[:, None] + _NOW_AND_NEXT)
        sys[:, 2] = state.on @ self.fleet.pmax_mw
        sys[:, 3] = state.prev_imbalance_mw
        return sys

    def step(
        self, state: UCState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[UCState, StepOutput]:
        b, n, f = state.t.size, self._n, self.fleet
        act = action.reshape(b, n, 2)
        setpoint = act[:, :, 0]
        want_on = act[:, :, 1] > 0.5
        blocked = f.shutdown_blocked(state.on, state.p_mw)  # once: the commitment's and the info's
        on_new, start, stop, overridden = f.commit(
            state.on, state.time_in_state, want_on, state.p_mw, blocked
        )
        stop_refused = ~want_on & blocked
        lo, hi = f.dispatch_range(state.on, state.p_mw, on_new, start, state.t == 0)
        demand = self._demand.take(
            (self._day_start.take(state.day_id) + state.t) % self._demand.size
        )
        load = demand * self.load_scale
        if self.balance:
            p, imbalance = balance_dispatch(setpoint, lo, hi, load)
        else:
            p = np.minimum(np.maximum(setpoint, lo), hi)
            imbalance = _add_reduce(p, axis=1) - load
        overload, loading, n_congested = self._branch_terms(p, demand)
        on_f = on_new.astype(np.float64)
        unit_reserve = f.deliverable_reserve_mw(on_f, p)  # [B, n]; N-1: see the requirement
        reserve, n_1 = _add_reduce(unit_reserve, axis=1), self.contingency_reserve
        required = reserve_requirement_mw(load, p, RESERVE_MARGIN, n_1, unit_reserve)
        shortfall = reserve_shortfall_mw(reserve, required)
        capacity = on_f @ f.pmax_mw
        dt_h = self._dt_h
        balance = self.regulation.settle(imbalance, dt_h)
        # costs first, negated at once below; marl_uc has regulation_cost after imbalance_cost
        terms = np.empty((b, len(self.spec.reward_terms)))
        terms[:, 0] = (p * p) @ f.c2_step + p @ f.c1_step
        terms[:, 1] = on_f @ f.no_load_step
        terms[:, 2] = start @ f.startup_cost
        terms[:, 3] = stop @ f.shutdown_cost
        terms[:, 4] = balance.imbalance_cost
        if terms.shape[1] == 7:
            terms[:, 5] = balance.regulation_cost
        terms[:, -1] = OVERLOAD_PRICE_PER_MWH * overload * dt_h
        np.negative(terms, out=terms)
        costs = np.empty((b, 3))
        costs[:, 0] = overload * dt_h
        costs[:, 1] = shortfall * dt_h
        costs[:, 2] = balance.imbalance_mwh  # marl_uc: beyond the regulation band
        applied = np.empty((b, n, 2))
        applied[:, :, 0] = p
        applied[:, :, 1] = on_f
        new_state = UCState(
            state.day_id,
            state.t + 1,
            on_new,
            f.advance_time(state.time_in_state, start | stop),
            p,
            imbalance,
        )
        return new_state, StepOutput(
            reward=_add_reduce(terms, axis=1),
            reward_terms=terms,
            constraint_costs=costs,
            terminated=np.zeros(b, dtype=bool),
            action_applied=applied.reshape(b, 2 * n),
            info={
                "total_load_mw": load,
                "total_generation_mw": load + imbalance,
                "slack_p_mw": -imbalance,  # balancing power the slack bus supplies
                "imbalance_mw": imbalance,
                "regulation_mwh": balance.regulation_mwh,  # within the band (marl_uc)
                "committed_capacity_mw": capacity,
                "headroom_mw": capacity - load,  # committed capacity - load (not all deliverable)
                "reserve_mw": reserve,  # deliverable in 10 minutes, summed over the units
                # on that sum: 10 % of the load (tso: and max_k p_k + r_k, the N-1 row)
                "reserve_requirement_mw": required,
                "n_committed": _add_reduce(on_new, axis=1),
                "n_starts": _add_reduce(start, axis=1),
                "n_stops": _add_reduce(stop, axis=1),
                "commitment_overridden": overridden,
                "n_commitment_overridden": _add_reduce(overridden, axis=1),
                "shutdown_refused": stop_refused,  # stop requested above the shut-down ramp
                "n_shutdown_refused": _add_reduce(stop_refused, axis=1),
                # setpoints -> applied outputs
                "dispatch_adjusted_mw": _add_reduce(np.abs(p - setpoint), axis=1),
                "max_branch_loading": loading,
                "n_congested_branches": n_congested,
                "losses_mw": np.zeros(b),  # DC power flow is lossless
                "pf_converged": np.ones(b, dtype=bool),
            },
        )

    # ---- rule-based baseline ----------------------------------------------------------------
    def unit_obs(self, obs: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(load now [B], load next [B], on [B, n], time in state [B, n] steps, last output
        [B, n], first step [B])`` from observations."""
        raise NotImplementedError

    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Priority-list commitment + congestion-aware economic dispatch
        (:mod:`powerzoo.tasks.unit_commitment.rule`) [B, 2n]."""
        return rule_based_action(self, obs)

    # ---- oracle -------------------------------------------------------------------------------
    def oracle_plan(self, state: UCState) -> np.ndarray:
        """Day-ahead UC MILP schedule ``[B, horizon, 2n]`` (``[p_mw, on]`` per unit) from ``state``.

        One MILP per episode on HiGHS (:func:`powerzoo.tasks.unit_commitment.oracle.solve_uc_day`),
        with perfect foresight of the remaining steps' loads; rows before ``state.t`` are zero.
        """
        from powerzoo.tasks.unit_commitment.oracle import solve_uc_day

        plan = np.zeros((state.t.size, HORIZON, 2 * self._n))
        for row in range(state.t.size):
            t0 = int(state.t[row])
            steps = np.arange(t0, HORIZON)[None]
            demand = self.demand_pu(state.day_id[row : row + 1], steps)[0]
            result = solve_uc_day(
                self,
                demand,
                state.on[row],
                state.time_in_state[row],
                state.p_mw[row],
                free_first=t0 == 0,
            )
            plan[row, t0:, 0::2] = result.p_mw
            plan[row, t0:, 1::2] = result.on
        return plan


class MarlUc(UnitCommitment):
    """Preset ``marl_uc``: five unit agents on the PJM 5-bus case. The clipped setpoints are applied
    as they are and the slack bus takes the mismatch (within the regulation band at the regulation
    price, beyond it ``power_imbalance``, priced in the reward); the reserve requirement is 10 % of
    the load (no N-1 term: no commitment of this fleet could cover the loss of its 520 or 600 MW
    unit). The reward is shared by the five agents.

    ## Baselines
    Random; rule = priority-list commitment for the load plus reserve within the minimum times,
    then congestion-aware economic dispatch of the committed units; oracle = a day-ahead UC MILP
    with perfect foresight on HiGHS, replayed in the env. The rule plans one step at a time,
    within the ramp and minimum-time limits its own earlier steps left, and that does not keep
    this case's budgets: per test day it leaves 3.80 MVAh of line overload (budget 1), spread
    over the day, 1.10 MWh of reserve shortfall at the evening ramp (steps 35-38) and 0.78 MWh
    of imbalance beyond the regulation band at the morning ramp (steps 6-11), over a budget on
    80 % of the test days. No baseline but the oracle keeps the budgets here, so the benchmark's
    anchor is over budget (its page marks it).
    """

    task_id = "marl_uc"
    case_name = "case5"
    balance = False
    Params = MarlUcParams

    def _regulation_band(self, peak_load_mw: float) -> RegulationBand:
        """A band of ``regulation_share`` x ``peak_load_mw`` (the split year's peak load)."""
        p = self.params
        return RegulationBand(
            p.regulation_share * peak_load_mw, p.regulation_price_on(self.case), IMBALANCE_PRICE
        )

    def _init_obs_slots(self) -> None:
        obs = self.spec.observation
        self._own_static = obs.slot(
            "own_pmin_mw", "own_pmax_mw", "own_average_cost_per_mwh", "own_ramp_mw"
        )
        self._own_dyn = obs.slot("own_on", "own_time_in_state_h", "own_can_switch", "own_prev_p_mw")
        local = self.spec.observation_spec("local")
        self._local = {
            "time": local.slot("hour_sin", "hour_cos", "time_remaining"),
            "bus": local.slot("own_bus_load_mw"),
            "static": local.slot(
                "own_pmin_mw", "own_pmax_mw", "own_average_cost_per_mwh", "own_ramp_mw"
            ),
            "dyn": local.slot("own_on", "own_time_in_state_h", "own_can_switch", "own_prev_p_mw"),
            "dim": local.dim,
        }
        self._gen_bus_load_scale = self.bus_load_scale[self.case.gen_bus]
        f = self.fleet
        static = np.stack(
            [f.pmin_mw, f.pmax_mw, f.average_cost_per_mwh(), f.ramp_up_step_mw], axis=1
        )
        self._static_obs = static.astype(np.float32)
        # every unit's minimum up and down times agree (as in each size class): one [n] row of
        # least steps in either status, without a ``where`` per observation
        same = np.array_equal(f.min_up_steps, f.min_down_steps)
        self._min_steps = f.min_up_steps if same else None

    def observe(self, state: UCState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations [B, n, obs_dim] (float32) of mode ``global`` (default) or
        ``local``."""
        if obs_mode not in (None, "global", "local"):
            raise ValueError(f"unknown obs_mode {obs_mode!r} for marl_uc; valid: global, local")
        f = self.fleet
        b, n = state.t.size, self._n
        time = self._time_at(state.t)
        dyn = np.empty((b, n, 4))
        dyn[:, :, 0] = state.on
        dyn[:, :, 1] = np.minimum(state.time_in_state, self._time_cap_steps) * self._dt_h
        min_steps = (  # least steps in the current status before a switch
            self._min_steps
            if self._min_steps is not None
            else np.where(state.on, f.min_up_steps, f.min_down_steps)
        )
        dyn[:, :, 2] = state.time_in_state >= min_steps
        dyn[:, :, 3] = state.p_mw
        if obs_mode == "local":
            slots = self._local
            obs = np.empty((b, n, slots["dim"]), dtype=np.float32)
            obs[:, :, slots["time"]] = time[:, None, :]
            demand = self.demand_pu(state.day_id, state.t[:, None])  # [B, 1]
            obs[:, :, slots["bus"]] = demand * self._gen_bus_load_scale
            obs[:, :, slots["static"]] = self._static_obs
            obs[:, :, slots["dyn"]] = dyn
            return obs
        obs = np.empty((b, n, self.spec.observation.dim), dtype=np.float32)
        obs[:, :, self._time] = time[:, None, :]
        obs[:, :, self._sys] = self._system_obs(state)[:, None, :]
        obs[:, :, self._own_static] = self._static_obs
        obs[:, :, self._own_dyn] = dyn
        return obs

    def unit_obs(self, obs: np.ndarray) -> tuple[np.ndarray, ...]:
        sys = obs[:, 0, self._sys]
        dyn = obs[:, :, self._own_dyn]
        time_steps = np.rint(dyn[:, :, 1] * self._steps_per_h).astype(np.int64)
        first = obs[:, 0, self._time][:, 2] > 1.0 - 1e-6
        return sys[:, 0], sys[:, 1], dyn[:, :, 0] > 0.5, time_steps, dyn[:, :, 3], first


class Tso(UnitCommitment):
    """Preset ``tso``: one operator commits and dispatches the 54 units of the IEEE 118-bus
    case. The clipped setpoints are balanced by the committed units in proportion to their
    headroom, as automatic generation control would; only what their bounds cannot absorb remains as
    ``power_imbalance`` (reported, not selected). The reserve covers 10 % of the load and the N-1
    row: the loss of any online unit ``k`` is covered by the other online units' reserve,
    ``sum_{g != k} r_g >= p_k``. Stress split ``line_tightening``: every rating x 0.8.
    """

    task_id = "tso"
    case_name = "case118"
    balance = True
    contingency_reserve = True

    def _init_obs_slots(self) -> None:
        obs, n = self.spec.observation, self._n
        self._on = obs.slot(*(f"gen_{i}.on" for i in range(n)))
        self._tis = obs.slot(*(f"gen_{i}.time_in_state_h" for i in range(n)))
        self._prev_p = obs.slot(*(f"gen_{i}.prev_p_mw" for i in range(n)))

    def observe(self, state: UCState) -> np.ndarray:
        """Observation [B, obs_dim] (float32): time, system block, then on / time in state / last
        output per unit."""
        obs = np.empty((state.t.size, self.spec.observation.dim), dtype=np.float32)
        obs[:, self._time] = self._time_at(state.t)
        obs[:, self._sys] = self._system_obs(state)
        obs[:, self._on] = state.on
        obs[:, self._tis] = np.minimum(state.time_in_state, self._time_cap_steps) * self._dt_h
        obs[:, self._prev_p] = state.p_mw
        return obs

    def unit_obs(self, obs: np.ndarray) -> tuple[np.ndarray, ...]:
        time_steps = np.rint(obs[:, self._tis] * self._steps_per_h).astype(np.int64)
        sys = obs[:, self._sys]
        first = obs[:, self._time][:, 2] > 1.0 - 1e-6
        return sys[:, 0], sys[:, 1], obs[:, self._on] > 0.5, time_steps, obs[:, self._prev_p], first
