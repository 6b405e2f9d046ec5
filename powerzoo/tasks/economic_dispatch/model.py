"""The per-unit dispatch model of ``marl_opf`` (case5), ``opf_118`` and ``opf_118_7d`` (case118,
:mod:`.presets`, :mod:`.week`): one agent per unit, DC power flow through the case's PTDF, units
with Pmin by technology and ramps (:mod:`.limits`) clipped into each step's range, the balancing
settlement of :mod:`powerzoo.tasks.balancing`, line overload priced in the reward. The task
documentation is :class:`EconomicDispatch`'s docstring.

Line limits: case5 keeps its published ratings (400 MW on 1-2, 240 MW on 4-5). pandapower's
case118 rates every branch at 9,900 MW, so its branches are rated by voltage class from published
conductor data (:mod:`powerzoo.physics.line_ratings`). At ``opf_118``'s load (1.4 x the case's
published loads x the daily shape) the 345/138 kV transformer 8-5 binds under the oracle in about
40 % of the test half-hours (6 % at the unit-commitment tasks' 1.1), with no overload left.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix

from powerzoo.data import calendar
from powerzoo.physics.cases import NetworkCase
from powerzoo.physics.dc_opf import cost_coefficients
from powerzoo.physics.dc_power_flow import (
    generation_shift_matrix,
    overload_limits_mw,
    ptdf_matrix,
)
from powerzoo.physics.dc_sparse import dc_factor
from powerzoo.physics.redispatch import merit_order_dispatch
from powerzoo.scratch import ROW_BLOCK, Scratch, row_blocks
from powerzoo.tasks.balancing import RegulationBand
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.economic_dispatch import sced
from powerzoo.tasks.economic_dispatch.layout import (
    FORECAST_STEPS,
    DispatchParams,
    _dispatch_spec,
    _ObsSlots,
    regulation_price_of,
)
from powerzoo.tasks.economic_dispatch.limits import DispatchLimits
from powerzoo.tasks.spec import TaskSpec
from powerzoo.tasks.transmission import marginal_cost_per_mwh

__all__ = ["EconomicDispatch", "DispatchParams", "DispatchState"]

# cases up to this many buses keep dense shift factors on the step path (one small GEMM per step);
# larger ones solve the sparse DC power flow
DENSE_FLOW_MAX_BUSES = 1000
# a branch within this of its rating is at its limit (info "congested"): agents' float32 actions
# move a flow at the rating by up to about 1e-4 MW
CONGESTED_TOL_MW = 0.01


# from this many rows a step's [rows, n_branch] temporaries are reused work arrays
_SCRATCH_FROM_ROWS = 64
_add_reduce, _max_reduce = np.add.reduce, np.maximum.reduce  # ndarray.sum / max, no wrapper

LOAD_SCALE = DispatchParams.load_scale
OVERLOAD_PENALTY = DispatchParams.overload_penalty_per_mwh


@dataclasses.dataclass
class DispatchState:
    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    prev_p_mw: np.ndarray  # [B, n_gen] last dispatch
    prev_imbalance_mw: np.ndarray  # [B] last mismatch (generation - load)
    energy_left_mwh: np.ndarray  # [B] energy left to the energy-limited unit (0 without one)


class EconomicDispatch(Task):
    """Shared model of the dispatch tasks; subclasses choose the case, load and horizon.

    ## Description
    Multi-agent economic dispatch on a DC network: one agent per generator sets its output every
    30 minutes to serve the load at the least cost without overloading the lines, as an
    operator's real-time security-constrained economic dispatch (SCED) does. Every unit is
    committed (on) all episode, with its Pmin by technology and its ramp rate. Loads are each
    bus's case demand x the calendar demand shape x the load scale (1.1 on case5, 1.4 on
    case118). case5 keeps its published ratings; case118's branches are rated by voltage class
    from published conductor data, so its dispatch is congested.

    ## Model
    Units (:mod:`powerzoo.tasks.economic_dispatch.limits`, the size-class rule of the ``tso``
    unit data): mid (150-400 MW) units run at 35 % of Pmax at least, base (>= 400 MW) units at
    40 %, fast-start peaking units (< 150 MW) from 0; ramps of 10, 2 and 1 % of Pmax per
    minute. Where the summed Pmin exceed 90 % of the year's lowest load they are scaled down
    to it (case5: x 0.72; case118 at 1.4: none). A setpoint outside the step's range ``[max(Pmin,
    p_prev - ramp), min(Pmax, p_prev + ramp)]`` is clipped onto it (``action_applied``;
    ``info["n_limited_units"]``, ``info["dispatch_adjusted_mw"]``). DC power flow through the
    case's PTDF; the slack bus takes the whole mismatch ``sum(p) - load``. Regulation reserve
    absorbs it up to a band of 1 % of the split year's peak load (10.9 MW on case5, 59.1 MW on
    case118), as automatic generation control does; only the energy beyond the band is a
    balance violation. Line overload is priced at 2,000 $/MWh (PJM's default
    transmission-constraint penalty factor), so the reward's optimum is the network-aware
    DC-OPF, not the network-blind dispatch. ``info["congested"]``: 1.0 on a step with a branch
    within 0.01 MW of its rating (summed per episode in the baseline rows).

    ## Action
    Per agent: the unit's output ``p_mw`` in ``[Pmin, Pmax]`` (MW), clipped into the step's ramp
    range.

    ## Observation
    Mode ``global`` (default): time, system load now and next step, own limits, marginal cost and
    last output, last imbalance; ``local``: time, own bus load, own limits, marginal cost, last
    output; ``local_plus_forecast``: ``local`` + the system load of the next 4 steps.

    ## Reward
    Shared by all agents, $ per step: ``-(generation + imbalance + regulation + overload cost)``
    with the case's polynomial costs x ``dt``; the mismatch within the band is settled at the
    regulation price (2 x the units' highest marginal cost: 80 $/MWh on case5, 560 on case118, so
    under-generating never pays), beyond it at 1,000 $/MWh.

    ## Costs
    ``thermal_overload`` (MVAh above the ratings summed over branches; under DC flow MVAh = MWh)
    and ``power_imbalance`` (MWh beyond the regulation band, ``max(|mismatch| - R, 0) x dt``);
    budgets 1 MVAh and 1 MWh a day, times the episode's days. ``info["regulation_mwh"]``: the
    energy within the band.

    ## Starting state
    At 00:00 of the split day, no imbalance, every unit at the rule's dispatch (without ramp
    limits) of the load of the half-hour before (the previous day's 23:30): a feasible dispatch
    within every unit's ``[Pmin, Pmax]`` that keeps the ratings.

    ## Episode end
    Truncated at the horizon (48 steps, or 336 for a week); no early termination.

    ## Arguments
    ``load_scale`` (1.1; 1.4 on ``opf_118`` / ``opf_118_7d``), ``imbalance_price_per_mwh``
    (1,000), ``overload_penalty_per_mwh`` (2,000), ``regulation_share`` (0.01),
    ``regulation_price_per_mwh`` (``None``: 2 x the highest marginal cost).

    ## Baselines
    Random; the rule, an operator's SCED (:mod:`powerzoo.tasks.economic_dispatch.sced`): the
    equal-incremental-cost dispatch of the observed load within every unit's step range, then
    redispatch by PTDF sensitivities within the same range until no line is overloaded; naive:
    the same equal-incremental-cost dispatch, the network ignored; oracle: the DC-OPF of each
    step on HiGHS within its ramp range from the step before, soft line limits at the reward's
    overload price.
    """

    task_id: str = ""
    case_name: str = ""
    horizon: int = 48
    description: str = ""
    # step info summed per episode in the baseline rows: the steps with a branch at its rating
    episode_metrics: tuple[str, ...] = ("congested",)

    Params = DispatchParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = params = self.make_params(**task_kwargs)
        super().__init__(self.make_spec(**task_kwargs), split)
        load_scale = params.load_scale
        self.case, self.limits = self.limited_network(params)
        self.marginal_cost = marginal_cost_per_mwh(self.case)
        demand = self.profiles.series["demand_pu"]
        self._demand = demand[: calendar.N_DAYS * self.profiles.steps_per_day]  # wrap by modulo
        self._own = np.stack(
            [self.case.gen_pmin_mw, self.case.gen_pmax_mw, self.marginal_cost], axis=1
        )
        self._gen_bus_load_share = self.case.bus_pd_mw[self.case.gen_bus]
        # constants of the per-step model and observation, worked out once
        self._day_start = self.split_days * self.profiles.steps_per_day
        self._bus_load_scale = self.case.bus_pd_mw * load_scale  # bus load per unit of demand
        self._gen_bus_load_scale = self._gen_bus_load_share * load_scale
        # system load per calendar step
        self._system_load = self._demand * (self.case.total_load_mw * load_scale)
        # the balancing settlement: a regulation band of a share of the split year's peak load
        self.regulation = RegulationBand(
            params.regulation_share * float(self._system_load.max()),
            regulation_price_of(params, self.case),
            params.imbalance_price_per_mwh,
        )
        self._own_obs = self._own.astype(np.float32)
        self._time_obs = self._time_features(np.arange(self.spec.horizon + 1))  # 0..horizon
        rate = self.case.branch_rate_a_mw
        self._rating = np.where(np.isfinite(rate), rate, np.inf)
        # |flow| from which a branch counts as congested: within CONGESTED_TOL_MW of its rating
        self._congested_above = self._rating - CONGESTED_TOL_MW
        self._case_constants()  # the step's constants of dispatch_cost and line_overload_mw
        # large cases: in-service units to their buses (sparse), the system load per unit of
        # demand, and the branch limits as columns for the branch-major reductions
        on = np.flatnonzero(self.case.gen_in_service)
        self._unit_to_bus = csr_matrix(
            (np.ones(on.size), (self.case.gen_bus[on], on)),
            shape=(self.case.n_bus, self.case.n_gen),
        )
        self._total_load_scale = float(self._bus_load_scale.sum())
        self._limit_col, self._rating_col = self._limit[:, None], self._rating[:, None]
        self._congested_col = self._congested_above[:, None]
        # the DC power flow in two parts, flow = p @ gsf - demand * load_flow (bus loads are one
        # demand series times fixed shares, so their flow is one vector per unit of demand);
        # above DENSE_FLOW_MAX_BUSES buses the sparse solve of dc_power_flow instead
        self._gsf: np.ndarray | None = None
        self._load_flow: np.ndarray | None = None
        if self.case.n_bus <= DENSE_FLOW_MAX_BUSES:
            self._gsf = generation_shift_matrix(self.case)  # [n_gen, n_branch]
            self._load_flow = ptdf_matrix(self.case) @ self._bus_load_scale  # MW per unit demand
        self._scratch = Scratch()  # the step's [B, n_branch] temporaries, reused
        self._dt_h, self._n_gen = self.spec.dt_h, self.case.n_gen
        self._next_two = np.arange(2)
        self._forecast_offsets = np.arange(1, FORECAST_STEPS + 1)
        self._build_observation()
        self._system_load_slot = self.spec.observation.slot("system_load_mw")
        self._prev_p_slot = self.spec.observation.optional_slot("own_prev_p_mw")
        # each split day's starting dispatch (sced.initial_dispatch)
        self._initial_p = sced.initial_dispatch(self, self._gsf is not None)

    def _case_constants(self) -> None:
        """The case's cost coefficients and overload limits (``dispatch_cost``,
        ``line_overload_mw``), worked out again only when ``self.case`` has been replaced."""
        if getattr(self, "_constants_of", None) is not self.case:
            self._c2, self._c1, self._c0 = cost_coefficients(self.case)
            self._limit, self._constants_of = overload_limits_mw(self.case), self.case

    @classmethod
    def limited_network(cls, params: DispatchParams) -> tuple[NetworkCase, DispatchLimits]:
        """The task's case with its line ratings and unit limits
        (:func:`~powerzoo.tasks.economic_dispatch.sced.limited_case`), and those limits."""
        return sced.limited_case(cls.case_name, float(params.load_scale))

    @property
    def initial_pmax_mw(self) -> np.ndarray:
        """Upper bounds [n_gen] MW of the initial dispatch (the units' Pmax)."""
        return self.case.gen_pmax_mw

    def _build_observation(self) -> None:
        """Work out where each field block of every observation mode sits."""
        self.build_obs_slots(_ObsSlots.of)

    @classmethod
    def spec_for(cls, params: DispatchParams) -> TaskSpec:
        case = cls.limited_network(params)[0]
        return _dispatch_spec(cls.task_id, case, cls.horizon, cls.description, None, params)

    # ---- exogenous load ---------------------------------------------------------------------
    def _demand_index(self, state: DispatchState, offset: int | np.ndarray = 0) -> np.ndarray:
        """Calendar step index [B, k] of steps ``t + offset`` (wrapping around the year)."""
        now = self._day_start.take(state.day_id)
        now += state.t
        offsets = offset if type(offset) is np.ndarray else np.atleast_1d(offset)
        return (now[:, None] + offsets) % self._demand.size

    def _demand_at(self, state: DispatchState, offset: int | np.ndarray = 0) -> np.ndarray:
        return self._demand.take(self._demand_index(state, offset))  # [B, k]

    def _demand_now(self, state: DispatchState) -> np.ndarray:
        """The current step's demand [B, 1] (per unit): :meth:`_demand_at` at offset 0."""
        now = self._day_start.take(state.day_id)
        now += state.t
        now %= self._demand.size
        return self._demand.take(now)[:, None]

    def bus_load_mw(self, state: DispatchState) -> np.ndarray:
        """Bus demand [B, n_bus] of the current step."""
        return self._demand_at(state) * self._bus_load_scale

    def _time_features(self, t: np.ndarray) -> np.ndarray:
        """``[hour_sin, hour_cos, time_remaining]`` [B, 3] (float32) at steps ``t`` [B]."""
        steps = self.profiles.steps_per_day
        phase = 2.0 * np.pi * (t % steps) / steps
        out = np.empty((t.size, 3), dtype=np.float32)
        out[:, 0] = np.sin(phase)
        out[:, 1] = np.cos(phase)
        out[:, 2] = 1.0 - t / self.spec.horizon
        return out

    # ---- batched model ----------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> DispatchState:
        day_id = self.check_day_id(day_id)
        b = day_id.size
        return DispatchState(
            day_id,
            np.zeros(b, np.int64),
            self._initial_p[day_id],
            np.zeros(b),
            np.full(b, self.energy_budget_mwh),
        )

    def observe(self, state: DispatchState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations [B, n_gen, obs_dim] (float32), written field block by field
        block."""
        slots = self.slots_of_mode(obs_mode)
        b, n = state.t.size, self._n_gen
        try:
            time = self._time_obs.take(state.t, axis=0)  # precomputed for steps 0..horizon
        except IndexError:  # stepped on past the horizon without a reset
            time = self._time_features(state.t)
        # the fields every agent shares go into one row per env, spread over the agents in one
        # pass; then the per-agent columns (fewer strided passes over the large [B, n, d] array)
        row = self._scratch("obs_row", (b, slots.width), np.float32)
        row[:, slots.time] = time
        if slots.system_load is not None:
            row[:, slots.system_load] = self._system_load.take(
                self._demand_index(state, self._next_two)
            )
        if slots.prev_imbalance is not None:
            row[:, slots.prev_imbalance] = state.prev_imbalance_mw
        if slots.forecast is not None:
            row[:, slots.forecast] = self._system_load.take(
                self._demand_index(state, self._forecast_offsets)
            )
        if slots.energy_left is not None:
            row[:, slots.energy_left] = state.energy_left_mwh
        obs = np.empty((b, n, slots.width), dtype=np.float32)
        obs[...] = row[:, None, :]
        obs[:, :, slots.own] = self._own_obs
        obs[:, :, slots.prev_p] = state.prev_p_mw
        if slots.bus_load is not None:
            obs[:, :, slots.bus_load] = self._demand_at(state) * self._gen_bus_load_scale
        return obs

    def step(
        self, state: DispatchState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[DispatchState, StepOutput]:
        dt_h = self._dt_h
        self._case_constants()
        requested = action
        lo, hi = self.step_range(state)  # ramps, Pmin, energy left (limits.py)
        action = np.minimum(np.maximum(requested, lo), hi)
        limited = action != requested
        demand = self._demand_now(state)  # [B, 1]
        total_load, overload_mw, loading, n_congested = self._network_terms(action, demand)
        total_generation = _add_reduce(action, axis=1)
        imbalance_mw = total_generation - total_load
        balance = self.regulation.settle(imbalance_mw, dt_h)
        # dispatch_cost with its constants worked out once
        b = action.shape[0]
        work = self._scratch("squares", action.shape) if b >= _SCRATCH_FROM_ROWS else None
        squares = np.multiply(action, action, out=work)
        generation = (squares @ self._c2 + action @ self._c1 + self._c0) * dt_h
        overload_mvah = overload_mw * dt_h  # |S| = |P| under DC power flow
        # filled column by column: cheaper than np.stack at small B
        terms = np.empty((b, 4))
        terms[:, 0] = -generation
        terms[:, 1] = -balance.imbalance_cost
        terms[:, 2] = -balance.regulation_cost
        terms[:, 3] = -(overload_mvah * self.params.overload_penalty_per_mwh)
        costs = np.empty((b, 2))
        costs[:, 0] = overload_mvah
        costs[:, 1] = balance.imbalance_mwh  # beyond the regulation band
        new_state = DispatchState(
            state.day_id,
            state.t + 1,
            action,
            imbalance_mw,
            self.energy_after(state, action),
        )
        return new_state, StepOutput(
            reward=_add_reduce(terms, axis=1),
            reward_terms=terms,
            constraint_costs=costs,
            terminated=np.zeros(b, dtype=bool),
            action_applied=action,
            info={
                "total_load_mw": total_load,
                "total_generation_mw": total_generation,
                "slack_p_mw": -imbalance_mw,  # balancing power the slack bus supplies
                "imbalance_mw": imbalance_mw,
                "regulation_mwh": balance.regulation_mwh,  # within the band
                "generation_cost": generation,
                "max_branch_loading": loading,
                "n_congested_branches": n_congested,
                "congested": (n_congested > 0).astype(np.float64),  # a branch at its rating
                "n_limited_units": _add_reduce(limited, axis=1),  # setpoints moved into range
                "dispatch_adjusted_mw": _add_reduce(np.abs(action - requested), axis=1),
                "losses_mw": np.zeros(b),  # DC power flow is lossless
                "pf_converged": ~np.zeros(b, dtype=bool),  # np.ones without its wrapper
            },
        )

    # ---- unit limits ------------------------------------------------------------------------
    energy_budget_mwh = 0.0  # energy of the energy-limited unit per episode (none here)

    def step_range(self, state: DispatchState) -> tuple[np.ndarray, np.ndarray]:
        """Each unit's feasible output range ``(lo, hi)`` [B, n_gen] MW this step: Pmin, Pmax and
        the ramps from its last output (:meth:`DispatchLimits.step_range`)."""
        return self.limits.step_range(state.prev_p_mw)

    def energy_after(self, state: DispatchState, p_mw: np.ndarray) -> np.ndarray:
        """Energy left [B] MWh to the energy-limited unit after dispatch ``p_mw`` (none: 0)."""
        return state.energy_left_mwh

    def energy_left_of(self, state: DispatchState, row: int) -> dict[int, float] | None:
        """``{unit: MWh}`` left to the energy-limited units of episode ``row`` (none here)."""
        return None

    def step_range_from_obs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The step range ``(lo, hi)`` [B, n_gen] MW from the default-mode observations (the
        units' last outputs ``own_prev_p_mw``), as the rule and the naive policy see it."""
        prev = obs[:, :, self._prev_p_slot].astype(np.float64)
        return self.limits.step_range(prev)

    def bus_loads_ahead(self, state: DispatchState, row: int, steps: int) -> np.ndarray:
        """Bus loads [steps, n_bus] MW of episode ``row``'s next ``steps`` steps."""
        one = DispatchState(
            state.day_id[row : row + 1],
            state.t[row : row + 1],
            state.prev_p_mw[row : row + 1],
            state.prev_imbalance_mw[row : row + 1],
            state.energy_left_mwh[row : row + 1],
        )
        return self._demand_at(one, np.arange(steps))[0][:, None] * self._bus_load_scale

    def _network_terms(
        self, action: np.ndarray, demand: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(total load [B] MW, overload [B] MW, max branch loading [B], congested branches [B])``
        of dispatch ``action`` [B, n_gen] MW under ``demand`` [B, 1] (per unit).

        Large batches run in :func:`~powerzoo.scratch.row_blocks` of ``ROW_BLOCK`` rows, so the
        DC flow's [rows, n_branch] temporaries stay in the CPU caches at any batch size."""
        b = action.shape[0]
        if b <= ROW_BLOCK:
            return self._block_terms(action, demand)
        terms = [self._block_terms(action[rows], demand[rows]) for rows in row_blocks(b)]
        total_load, overload_mw, loading, n_congested = (
            np.concatenate(t) for t in zip(*terms, strict=True)
        )
        return total_load, overload_mw, loading, n_congested

    def _block_terms(
        self, action: np.ndarray, demand: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_network_terms` of at most ``ROW_BLOCK`` rows; from 64 rows the temporaries are
        work arrays reused between steps (below, looking them up costs more than a new array)."""
        if self._gsf is None:  # large case: one sparse solve, everything bus/branch-major
            return self._sparse_network_terms(action, demand[:, 0])
        k = action.shape[0]
        if k < _SCRATCH_FROM_ROWS:
            load, flow, load_flow, over, loading, congested = (None,) * 6
        else:
            n_bus, n_branch = self.case.n_bus, self.case.n_branch
            work, m = self._scratch, min(ROW_BLOCK, max(k, _SCRATCH_FROM_ROWS))
            load = work("load", (m, n_bus))[:k]
            flow, load_flow, over, loading = (
                work(name, (m, n_branch))[:k] for name in ("flow", "load_flow", "over", "loading")
            )
            congested = work("congested", (m, n_branch), bool)[:k]
        total_load = _add_reduce(np.multiply(demand, self._bus_load_scale, out=load), axis=1)
        flow = np.matmul(action, self._gsf, out=flow)
        np.subtract(flow, np.multiply(demand, self._load_flow, out=load_flow), out=flow)
        # line_overload_mw with its limits worked out once
        over = np.abs(flow, out=over)
        np.subtract(over, self._limit, out=over)
        overload_mw = _add_reduce(np.maximum(over, 0.0, out=over), axis=1)
        abs_flow = np.abs(flow, out=flow)
        loading = _max_reduce(np.divide(abs_flow, self._rating, out=loading), axis=1)
        congested = np.greater_equal(abs_flow, self._congested_above, out=congested)
        return total_load, overload_mw, loading, _add_reduce(congested, axis=1)

    def _sparse_network_terms(
        self, gen_p_mw: np.ndarray, demand: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(total load, overload [MW], max loading, congested branches)``, each ``[k]``, of
        dispatch ``gen_p_mw`` ``[k, n_gen]`` under ``demand`` ``[k]`` (per unit) on a large case:
        injections bus-major ``[n_bus, k]`` (a sparse unit-to-bus product), flows branch-major
        ``[n_branch, k]``, every reduction down the buses or branches (no transposed copy)."""
        injection = self._unit_to_bus @ gen_p_mw.T  # [n_bus, k]
        injection -= np.multiply.outer(self._bus_load_scale, demand)
        flows = dc_factor(self.case).flows_branch_major_mw(injection, bus_major=True)
        abs_flow = np.abs(flows, out=flows)
        loading = (abs_flow / self._rating_col).max(axis=0)
        congested = (abs_flow >= self._congested_col).sum(axis=0)
        abs_flow -= self._limit_col
        overload = np.maximum(abs_flow, 0.0, out=abs_flow).sum(axis=0)
        return demand * self._total_load_scale, overload, loading, congested

    # ---- baselines --------------------------------------------------------------------------
    def merit_order_dispatch(self, total_load_mw: np.ndarray) -> np.ndarray:
        """Units at Pmin, then loaded cheapest first until ``total_load_mw`` [B] is met: [B, n_gen].

        Network-blind and without ramps
        (:func:`powerzoo.physics.redispatch.merit_order_dispatch`).
        """
        return merit_order_dispatch(self.case, total_load_mw, self.marginal_cost)

    def rule_range(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The units' ranges ``(lo, hi)`` [B, n_gen] MW the rule dispatches within: the step
        range seen in the observations."""
        return self.step_range_from_obs(obs)

    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """An operator's SCED on the observed system load (``global`` mode): the
        equal-incremental-cost dispatch within every unit's step range (Pmin, Pmax, ramps from
        its last output), then redispatch by PTDF sensitivities within the same range until no
        line is overloaded (:func:`~powerzoo.tasks.economic_dispatch.sced.sced_dispatch`)."""
        system_load = obs[:, 0, self._system_load_slot].astype(np.float64)
        lo, hi = self.rule_range(obs)
        return sced.sced_dispatch(self.case, system_load, lo, hi, self.marginal_cost)

    def oracle_plan(self, state: DispatchState) -> np.ndarray:
        """The DC-OPF of every remaining step within its ramp range from the step before
        (:func:`~powerzoo.tasks.economic_dispatch.sced.ramped_plan`) [B, H, n_gen]."""
        return sced.ramped_plan(self, state)
