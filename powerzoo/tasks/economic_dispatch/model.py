"""Multi-agent economic dispatch on DC networks: ``marl_opf`` (case5), ``opf_118``, ``opf_118_7d``
(case118).

Model
-----
* Agents: one per generator (5 on case5, 54 on case118). Action: the unit's output ``p_mw`` in
  ``[Pmin, Pmax]`` (physical MW; with ``normalize=True`` the [-1, 1] action is mapped once to
  that range).
* Load: each bus's case demand times the calendar demand shape of the data layer,
  ``load_mw = bus_pd_mw * demand_pu(t) * 1.1`` (the case's base load at about 91 % of the annual
  peak), 30-minute steps.
* Physics: DC power flow through the case's PTDF. The mismatch ``sum(p) - load`` is taken by
  the slack bus in the flows, whole.
* Balancing settlement (:mod:`powerzoo.tasks.balancing`): regulation reserve absorbs a mismatch
  up to the band ``R = regulation_share x peak load`` (1 % of the split year's peak system load:
  10.9 MW on case5, 46.4 MW on case118, test split), settled at ``regulation_price_per_mwh``
  (default 2 x the units' highest marginal cost: 80 $/MWh on case5, 560 $/MWh on case118, so
  lowering any unit's output inside the band never pays); the part beyond ``R`` is the
  ``power_imbalance`` cost, settled at ``imbalance_price`` (1,000 $/MWh), either sign. Before
  this band every MW of mismatch was a violation: the 1 MWh/day budget then asked every unit's
  output to be right to about 0.01 % (``benchmarks/imbalance_precision.py``).
* Reward (shared by all agents): ``-(generation + imbalance + regulation + overload cost)`` in $
  per step, with generation cost from the case's polynomial costs times ``dt`` and overload cost
  = ``thermal_overload`` x ``overload_penalty_per_mwh`` (2,000 $/MWh, PJM's default
  transmission-constraint penalty factor; ISOs clear their markets with 1,000-3,500 $/MWh), so
  the reward's optimum is the network-aware DC-OPF, not the network-blind merit order.
* Costs: ``thermal_overload`` (MVAh: overload energy above the ratings summed over branches,
  ``sum_k max(|S_k| - S_rated_k, 0) x dt``; under DC power flow ``|S| = |P|``, so MVAh = MWh;
  kept as a CMDP cost as well as priced in the reward) and ``power_imbalance``
  (MWh = ``max(|mismatch| - R, 0) x dt``); budgets 1 MVAh and 1 MWh a day, times the episode's
  days (7 on ``opf_118_7d``). ``info["regulation_mwh"]``: the energy within the band.
* Line limits: case5 keeps its published ratings (400 MW on 1-2, 240 MW on 4-5). pandapower's
  case118 rates every branch at 9,900 MW, so congestion could never occur; its branches are
  rated by voltage class from published conductor data (138 kV lines at up to 216.8 MVA, 345 kV
  at up to 1,207 MVA, both derated for length by the St. Clair curve; 345 kV transformers at
  300 MVA; :mod:`powerzoo.physics.line_ratings`). Measured on the ``opf_118`` test split: the
  oracle's dispatch is congested (one branch binding, the 345/138 kV transformer 8-5) in 6.2 %
  of the half-hours (20.0 % on ``load_stress``), with no overload left.
* Observation modes (per agent, ``env.observation_fields(agent)``): ``global`` (default: time,
  system load now and next step, own limits, marginal cost and last output, last imbalance),
  ``local`` (time, own bus load, own limits, marginal cost, last output),
  ``local_plus_forecast`` (``local`` + system load for the next 4 steps).
* Baselines: random; merit order (units loaded cheapest first to meet the load, network
  ignored) with congestion relief by PTDF redispatch; oracle (DC-OPF per step on HiGHS with
  soft line limits at the reward's overload price, so it maximises the reward itself).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix

from powerzoo.data import calendar
from powerzoo.physics.cases import NetworkCase, load_case
from powerzoo.physics.dc_opf import dispatch_cost, line_overload_mw, solve_dc_opf
from powerzoo.physics.dc_power_flow import (
    generation_shift_matrix,
    ptdf_matrix,
)
from powerzoo.physics.dc_sparse import dc_factor
from powerzoo.physics.redispatch import merit_order_dispatch, rule_dispatch_from_system_load
from powerzoo.scratch import ROW_BLOCK, Scratch, row_blocks
from powerzoo.tasks.balancing import RegulationBand
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.economic_dispatch.layout import (
    FORECAST_STEPS,
    DispatchParams,
    _dispatch_spec,
    _ObsSlots,
    regulation_price_of,
)
from powerzoo.tasks.spec import TaskSpec
from powerzoo.tasks.transmission import (
    congestion_ready_case,
    marginal_cost_per_mwh,
)

__all__ = ["MarlOpf", "Opf118", "Opf118Week", "DispatchParams", "DispatchState"]

# cases up to this many buses keep dense shift factors on the step path (one small GEMM per step);
# larger ones solve the sparse DC power flow
DENSE_FLOW_MAX_BUSES = 1000


LOAD_SCALE = DispatchParams.load_scale
OVERLOAD_PENALTY = DispatchParams.overload_penalty_per_mwh


@dataclasses.dataclass
class DispatchState:
    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    prev_p_mw: np.ndarray  # [B, n_gen] last dispatch
    prev_imbalance_mw: np.ndarray  # [B] last mismatch (generation - load)


class EconomicDispatch(Task):
    """Shared model of the dispatch tasks; subclasses choose the case and horizon.

    ## Description
    Multi-agent economic dispatch on a DC network: one agent per generator sets its output every
    30 minutes to serve the load at the least cost without overloading the lines. Loads are each
    bus's case demand x the calendar demand shape x 1.1 (the case's base load at about 91 % of the
    annual peak). case5 keeps its published ratings; case118's branches are rated by voltage class
    from published conductor data, so its dispatch is congested.

    ## Model
    DC power flow through the case's PTDF; the slack bus takes the whole mismatch ``sum(p) - load``.
    Regulation reserve absorbs it up to a band of 1 % of the split year's peak load (10.9 MW on
    case5, 46.4 MW on case118), as automatic generation control does; only the energy beyond the
    band is a balance violation. Line overload is priced at 2,000 $/MWh (PJM's default
    transmission-constraint penalty factor), so the reward's optimum is the network-aware DC-OPF,
    not the network-blind merit order.

    ## Action
    Per agent: the unit's output ``p_mw`` in ``[Pmin, Pmax]`` (MW).

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
    Every unit's last output 0 and no imbalance, at 00:00 of the split day.

    ## Episode end
    Truncated at the horizon (48 steps, or 336 for a week); no early termination.

    ## Arguments
    ``load_scale`` (1.1), ``imbalance_price_per_mwh`` (1,000), ``overload_penalty_per_mwh``
    (2,000), ``regulation_share`` (0.01), ``regulation_price_per_mwh`` (``None``: 2 x the highest
    marginal cost).

    ## Baselines
    Random; merit order (units loaded cheapest first to meet the load) with congestion relief by
    PTDF redispatch; oracle = a DC-OPF per step on HiGHS with soft line limits at the reward's
    overload price.
    """

    task_id: str = ""
    case_name: str = ""
    horizon: int = 48
    description: str = ""

    Params = DispatchParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = params = self.make_params(**task_kwargs)
        super().__init__(self.make_spec(**task_kwargs), split)
        load_scale = params.load_scale
        self.case = self.network()
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
        self._time_obs = self._time_features(
            np.arange(self.spec.horizon + 1)
        )  # by step, 0..horizon
        rate = self.case.branch_rate_a_mw
        self._rating = np.where(np.isfinite(rate), rate, np.inf)
        self._congested_above = (
            self._rating - 1e-6
        )  # |flow| from which a branch counts as congested
        # large cases: in-service units to their buses (sparse), the system load per unit of
        # demand, and the branch limits as columns for the branch-major reductions
        on = np.flatnonzero(self.case.gen_in_service)
        self._unit_to_bus = csr_matrix(
            (np.ones(on.size), (self.case.gen_bus[on], on)),
            shape=(self.case.n_bus, self.case.n_gen),
        )
        self._total_load_scale = float(self._bus_load_scale.sum())
        limited = self.case.branch_in_service & np.isfinite(rate)
        self._limit_col = np.where(limited, rate, np.inf)[:, None]
        self._rating_col, self._congested_col = (
            self._rating[:, None],
            self._congested_above[:, None],
        )
        # the DC power flow in two parts, flow = p @ gsf - demand * load_flow (bus loads are one
        # demand series times fixed shares, so their flow is one vector per unit of demand);
        # above DENSE_FLOW_MAX_BUSES buses the sparse solve of dc_power_flow instead
        self._gsf: np.ndarray | None = None
        self._load_flow: np.ndarray | None = None
        if self.case.n_bus <= DENSE_FLOW_MAX_BUSES:
            self._gsf = generation_shift_matrix(self.case)  # [n_gen, n_branch]
            self._load_flow = ptdf_matrix(self.case) @ self._bus_load_scale  # MW per unit demand
        self._scratch = Scratch()  # the step's [B, n_branch] temporaries, reused
        self._next_two = np.arange(2)
        self._forecast_offsets = np.arange(1, FORECAST_STEPS + 1)
        self._build_observation()
        self._system_load_slot = self.spec.observation.slot("system_load_mw")

    def network(self) -> NetworkCase:
        """The task's case, with its line ratings (:func:`congestion_ready_case`)."""
        return congestion_ready_case(self.case_name)

    def _build_observation(self) -> None:
        """Work out where each field block of every observation mode sits."""
        self.build_obs_slots(_ObsSlots.of)

    @classmethod
    def spec_for(cls, params: DispatchParams) -> TaskSpec:
        return _dispatch_spec(
            cls.task_id, load_case(cls.case_name), cls.horizon, cls.description, None, params
        )

    # ---- exogenous load ---------------------------------------------------------------------
    def _demand_index(self, state: DispatchState, offset: int | np.ndarray = 0) -> np.ndarray:
        """Calendar step index [B, k] of steps ``t + offset`` (wrapping around the year)."""
        now = self._day_start.take(state.day_id) + state.t
        return (now[:, None] + np.atleast_1d(offset)) % self._demand.size

    def _demand_at(self, state: DispatchState, offset: int | np.ndarray = 0) -> np.ndarray:
        return self._demand.take(self._demand_index(state, offset))  # [B, k]

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
            day_id, np.zeros(b, np.int64), np.zeros((b, self.case.n_gen)), np.zeros(b)
        )

    def observe(self, state: DispatchState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations [B, n_gen, obs_dim] (float32), written field block by field
        block."""
        slots = self.slots_of_mode(obs_mode)
        b, n = state.t.size, self.case.n_gen
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
        dt_h = self.spec.dt_h
        demand = self._demand_at(state)  # [B, 1]
        total_load, overload_mw, loading, n_congested = self._network_terms(action, demand)
        total_generation = action.sum(axis=1)
        imbalance_mw = total_generation - total_load
        balance = self.regulation.settle(imbalance_mw, dt_h)
        generation = (
            dispatch_cost(self.case, action, work=self._scratch("squares", action.shape)) * dt_h
        )
        overload_mvah = overload_mw * dt_h  # |S| = |P| under DC power flow
        # filled column by column: cheaper than np.stack at small B
        terms = np.empty((state.t.size, 4))
        terms[:, 0] = -generation
        terms[:, 1] = -balance.imbalance_cost
        terms[:, 2] = -balance.regulation_cost
        terms[:, 3] = -(overload_mvah * self.params.overload_penalty_per_mwh)
        costs = np.empty((state.t.size, 2))
        costs[:, 0] = overload_mvah
        costs[:, 1] = balance.imbalance_mwh  # beyond the regulation band
        new_state = DispatchState(state.day_id, state.t + 1, action.copy(), imbalance_mw)
        return new_state, StepOutput(
            reward=terms.sum(axis=1),
            reward_terms=terms,
            constraint_costs=costs,
            terminated=np.zeros(state.t.size, dtype=bool),
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
                "losses_mw": np.zeros(state.t.size),  # DC power flow is lossless
                "pf_converged": np.ones(state.t.size, dtype=bool),
            },
        )

    def _network_terms(
        self, action: np.ndarray, demand: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(total load [B] MW, overload [B] MW, max branch loading [B], congested branches [B])``
        of dispatch ``action`` [B, n_gen] MW under ``demand`` [B, 1] (per unit).

        The DC power flow and its [rows, n_branch] temporaries run in
        :func:`~powerzoo.scratch.row_blocks`
        through work arrays of one block's size, so they stay in the CPU caches at any batch size.
        """
        b, n_bus, n_branch = action.shape[0], self.case.n_bus, self.case.n_branch
        work, m = self._scratch, min(b, ROW_BLOCK)
        total_load, overload_mw, loading = np.empty(b), np.empty(b), np.empty(b)
        n_congested = np.empty(b, dtype=np.int64)
        for rows in row_blocks(b):
            k = rows.stop - rows.start
            d = demand[rows]
            if self._gsf is None:  # large case: one sparse solve, everything bus/branch-major
                terms = self._sparse_network_terms(action[rows], d[:, 0])
                total_load[rows], overload_mw[rows], loading[rows], n_congested[rows] = terms
                continue
            total_load[rows] = np.multiply(
                d, self._bus_load_scale, out=work("load", (m, n_bus))[:k]
            ).sum(axis=1)
            flow = np.matmul(action[rows], self._gsf, out=work("flow", (m, n_branch))[:k])
            np.subtract(
                flow,
                np.multiply(d, self._load_flow, out=work("load_flow", (m, n_branch))[:k]),
                out=flow,
            )
            overload_mw[rows] = line_overload_mw(
                self.case, flow, out=work("overload", (m, n_branch))[:k]
            ).sum(axis=1)
            abs_flow = np.abs(flow, out=flow)
            loading[rows] = np.divide(
                abs_flow, self._rating, out=work("loading", (m, n_branch))[:k]
            ).max(axis=1)
            congested = np.greater_equal(
                abs_flow, self._congested_above, out=work("congested", (m, n_branch), bool)[:k]
            )
            n_congested[rows] = congested.sum(axis=1)
        return total_load, overload_mw, loading, n_congested

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

        Network-blind (:func:`powerzoo.physics.redispatch.merit_order_dispatch`); the rule-based
        baseline adds congestion relief on top of it.
        """
        return merit_order_dispatch(self.case, total_load_mw, self.marginal_cost)

    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Congestion-aware merit order on the observed system load (``global`` mode,
        ``system_load_mw``).

        Merit order first, then redispatch by PTDF sensitivities until no line is overloaded
        (:func:`powerzoo.physics.redispatch.rule_dispatch_from_system_load`): what an operator
        does without an optimiser. It never overloads a line where the DC-OPF could avoid it.
        """
        system_load = obs[:, 0, self._system_load_slot].astype(np.float64)
        return rule_dispatch_from_system_load(self.case, system_load, self.marginal_cost)

    def oracle_plan(self, state: DispatchState) -> np.ndarray:
        """DC-OPF dispatch for every remaining step of each episode [B, H, n_gen]."""
        h = self.spec.horizon
        plan = np.zeros((state.t.size, h, self.case.n_gen))
        for row in range(state.t.size):
            t0 = int(state.t[row])
            one = DispatchState(
                state.day_id[row : row + 1],
                np.array([t0]),
                state.prev_p_mw[row : row + 1],
                state.prev_imbalance_mw[row : row + 1],
            )
            demand = self._demand_at(one, np.arange(h - t0))[0]
            loads = demand[:, None] * self._bus_load_scale
            penalty = self.params.overload_penalty_per_mwh
            result = solve_dc_opf(self.case, loads, soft_line_penalty=penalty)
            plan[row, t0:] = result.gen_p_mw
        return plan


class MarlOpf(EconomicDispatch):
    """Preset ``marl_opf``: the dispatch model on the PJM 5-bus case (case5, published ratings of
    400 MW on branch 1-2 and 240 MW on 4-5), five generator agents, one day.
    """

    task_id = "marl_opf"
    case_name = "case5"
    horizon = 48
    description = (
        "Five generator agents dispatch the PJM 5-bus system (DC power flow) over one day."
    )


class Opf118(EconomicDispatch):
    """Preset ``opf_118``: the dispatch model on the IEEE 118-bus case, 54 generator agents,
    one day; branches rated by voltage class (binding: the oracle's dispatch is congested in
    about a fifth of the test half-hours).
    """

    task_id = "opf_118"
    case_name = "case118"
    horizon = 48
    description = (
        "54 generator agents dispatch the IEEE 118-bus system with binding line limits over one "
        "day."
    )


class Opf118Week(EconomicDispatch):
    """Preset ``opf_118_7d``: ``opf_118`` over a week (336 half-hours); cost budgets x 7."""

    task_id = "opf_118_7d"
    case_name = "case118"
    horizon = 336
    description = (
        "54 generator agents dispatch the IEEE 118-bus system with binding line limits over one "
        "week."
    )
