"""``voltage_control_118``: volt/var control of the IEEE 118-bus system against its losses.

The problem an operator of a meshed grid solves once the market has set the active dispatch:
choose the voltage set-points of the units' automatic voltage regulators so that every bus stays
in its band and every unit inside its reactive limits, at the least active losses.

Model
-----
* Active dispatch (given, not controlled): each step the units' active set-points are the
  congestion-aware DC merit order of ``opf_118`` / ``acopf_118``'s rule
  (:func:`powerzoo.physics.redispatch.rule_dispatch_from_system_load`) for the system load x
  (1 + :data:`LOSS_ALLOWANCE`), the case's own loss share at its published operating point
  (133 MW on 4,242 MW, 3.1 %); the slack unit takes the actual losses.  The dispatch is AC
  secure: its branch ratings are tightened against the AC flow
  (:func:`~powerzoo.tasks.ac_transmission.ac_secure_rating_share`, once per process at the 31
  demands of :data:`SECURE_DEMAND_PU`, which span every split) until, under the rule's
  set-points, no branch carries more than 94 % of its rating (12 branches tightened, to 60-99 %
  of their ratings).  It depends on the
  calendar only (one day is computed at once, 49 rows, and cached), so every policy meets the
  same dispatch.
* Agents: the control areas of :func:`powerzoo.physics.areas.control_areas` (``n_areas``,
  default 8: 8, 4, 8, 9, 5, 6, 8 and 6 units); every unit belongs to the area of its bus.
  ``n_areas=54`` gives one agent per unit.  Action of an area agent: the voltage set-point
  ``vm_pu`` in [0.94, 1.06] p.u. of each of its units, in ``slots`` entries (the largest area);
  a smaller area leaves its last entries unused (bounds [0, 1], ignored), as in the ``opf``
  task.  The slack unit's entry is its bus voltage (the angle reference), as for every unit.
  case118's 14 shunts are fixed admittances in the published case (no switched steps), so the
  set-points are the only control.
* Load and network: :mod:`powerzoo.tasks.ac_transmission` (each bus's published P and Q x 1.1 x
  the calendar demand shape, 30-minute steps), one exact batched AC power flow per step.
* Reward (shared): ``-(active losses x dt x price)`` in $ per step; the price is the step's
  merit-order marginal cost, the marginal cost (:func:`marginal_cost_per_mwh`) of the most
  expensive unit above its ``Pmin`` in the network-blind merit order of the same load (the
  system lambda; 32-35 $/MWh through a day on case118).  A flow that does not converge is
  charged losses of :data:`NONCONVERGED_LOSS_FRACTION` (20 %) of the system load, about twice
  the worst losses random set-points reach (270 MW), so failing is never cheaper than a solution.
* Costs, as defined in :mod:`powerzoo.tasks.ac_transmission`, all selected: ``voltage_violation``
  (budget 1 p.u. a day), ``thermal_overload`` (1 MVAh), ``reactive_limit`` (1 Mvarh),
  ``pf_nonconvergence`` (0.5 step: one failed flow breaks it).  Before the dispatch was secured
  its overload (407 MVAh/day under the rule on 4 test days) was reported only.  Reactive limits
  are reported, not enforced (keeping the units inside them is the agents' constraint).  Step
  info ``overload_mvah`` and ``reactive_excess_mvarh`` are summed per episode in the baselines
  table.  Non-convergence is flagged (``pf_converged``), never raised.
* Observation (``global``, per agent): time, system load now and next step, the step's price,
  last losses and extreme voltages, then per unit slot its scheduled ``p_mw`` this step, its
  reactive limits, its last reactive output and its last bus voltage (0 in unused slots).
* Baselines: random; rule = the case's own voltage schedule (the published ``vm_pu`` of each
  unit, what an operator runs without an optimiser), each unit that the schedule drives outside
  its reactive limits moved inside, as a regulator at its limit stops holding its voltage: a unit
  absorbing below ``q_min`` is raised, one above ``q_max`` lowered
  (:meth:`~powerzoo.tasks.ac_transmission.ACGrid.reactive_limited_setpoints`: a few batched AC
  flows of the observed load and dispatch, about two to settle).  On the first 4 test days of
  the baselines table (then 4 days long) it leaves 0 Mvarh/day beyond the limits, 0 MVAh/day
  of overload and no bus outside the band, at a loss cost of -86,806 $/day (-90,474 with the
  dispatch before it was secured), where the published schedule leaves 7,551 Mvarh/day;
  oracle = pandapower's AC-OPF per step with every unit's P fixed at the dispatch and a cost on
  the slack's output only, i.e. minimum losses (:func:`powerzoo.tasks.ac_oracle.run_ac_opf`,
  0.7-1.7 s a step, about a minute a day on one core), scored under this task's flow.
  pandapower limits branch current (the rating at 1 p.u.), so the OPF runs on the ratings over
  1.06 p.u. (the apparent power inside the ratings at any voltage of the band), or, where that
  has no solution, on the ratings themselves; a step where both fail gets the rule's
  set-points.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.physics.areas import ControlAreas, control_areas
from powerzoo.physics.redispatch import merit_order_dispatch, rule_dispatch_from_system_load
from powerzoo.tasks.ac_transmission import (
    AC_V_MAX_PU,
    AC_V_MIN_PU,
    BASE_LOAD_SCALE,
    ACGrid,
    ac_grid_costs,
    ac_secure_rating_share,
)
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.spec import TaskSpec, VectorSpec, cmdp_fields, padded_action
from powerzoo.tasks.transmission import (
    STEP_MINUTES,
    congestion_ready_case,
    marginal_cost_per_mwh,
)

__all__ = [
    "LOSS_ALLOWANCE",
    "NONCONVERGED_LOSS_FRACTION",
    "VoltageControl118",
    "VoltageControlParams",
    "VoltageControlState",
    "merit_order_price_per_mwh",
]

CASE = "case118"
HORIZON = 48
LOSS_ALLOWANCE = 133.17 / 4242.0  # case118's losses / load at its published operating point
SECURE_DEMAND_PU = np.linspace(0.40, 1.15, 31)  # demands the ratings are secured at (all splits)
NONCONVERGED_LOSS_FRACTION = 0.20  # losses charged to a failed flow, share of the system load
_GLOBAL = (
    ("hour_sin", "-", -1.0, 1.0),
    ("hour_cos", "-", -1.0, 1.0),
    ("time_remaining", "fraction", 0.0, 1.0),
    ("system_load_mw", "MW", 0.0, 5000.0),
    ("system_load_next_mw", "MW", 0.0, 5000.0),
    ("price_per_mwh", "$/MWh", 0.0, 60.0),
    ("prev_losses_mw", "MW", 0.0, 300.0),
    ("prev_v_min_pu", "p.u.", 0.9, 1.1),
    ("prev_v_max_pu", "p.u.", 0.9, 1.1),
)
_SLOT = (
    ("p_mw", "MW", 0.0, 800.0),
    ("qmin_mvar", "Mvar", -300.0, 300.0),
    ("qmax_mvar", "Mvar", -300.0, 300.0),
    ("prev_q_mvar", "Mvar", -300.0, 300.0),
    ("prev_vm_pu", "p.u.", AC_V_MIN_PU, AC_V_MAX_PU),
)


@dataclasses.dataclass(frozen=True)
class VoltageControlParams:
    """The task keywords of ``voltage_control_118``."""

    # bus loads = the case's published base load x this x demand_pu
    load_scale: float = BASE_LOAD_SCALE
    # control areas (agents), capped at the 54 unit buses; 54 = one agent per unit
    n_areas: int = 8

    def __post_init__(self) -> None:
        if not self.load_scale > 0.0 or int(self.n_areas) < 1:
            raise ValueError(
                f"voltage_control_118: load_scale must be > 0 and n_areas >= 1, got "
                f"{self.load_scale} and {self.n_areas}"
            )


@dataclasses.dataclass
class VoltageControlState:
    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    prev_q_mvar: np.ndarray  # [B, n_gen] last reactive output at each unit's bus
    prev_vm_pu: np.ndarray  # [B, n_gen] last voltage at each unit's bus
    prev_grid: np.ndarray  # [B, 3] last losses [MW], min / max bus voltage [p.u.]


def merit_order_price_per_mwh(
    case: Any, system_load_mw: np.ndarray, marginal_cost: np.ndarray
) -> np.ndarray:
    """System lambda [$/MWh] per load ``[B]`` [MW]: the marginal cost of the most expensive
    unit above its ``Pmin`` in the network-blind merit order (the cheapest unit's if none)."""
    p = merit_order_dispatch(case, system_load_mw, marginal_cost)
    above = p > case.gen_limits_mw[0] + 1e-9
    mc = np.where(above, marginal_cost, -np.inf).max(axis=1)
    return np.where(np.isfinite(mc), mc, marginal_cost.min())


def _dispatch_load_mw(demand_pu: np.ndarray, load_scale: float) -> np.ndarray:
    """The load [MW] the given dispatch serves at system demand ``demand_pu``: the grid's
    load with the case's loss share on top."""
    return (
        demand_pu * congestion_ready_case(CASE).bus_pd_mw.sum() * load_scale * (1 + LOSS_ALLOWANCE)
    )


_SECURE_SHARES: dict[float, np.ndarray] = {}


def _secure_share(grid: ACGrid) -> np.ndarray:
    """The rating shares of the AC-secure given dispatch (one per load scale and process)."""
    key = grid.load_scale
    if key not in _SECURE_SHARES:
        load = _dispatch_load_mw(SECURE_DEMAND_PU, key)
        mc = marginal_cost_per_mwh(grid.case)
        _SECURE_SHARES[key] = ac_secure_rating_share(
            grid, SECURE_DEMAND_PU, lambda case: rule_dispatch_from_system_load(case, load, mc)
        )
    return _SECURE_SHARES[key]


@functools.lru_cache(maxsize=1024)
def _day_dispatch(
    demand_key: bytes, load_scale: float, share_key: bytes
) -> tuple[np.ndarray, np.ndarray]:
    """Given dispatch ``[49, n_gen]`` [MW] and price ``[49]`` [$/MWh] of one day's demand
    shape (``demand_key``: its 49 float64 values; always one batch of 49, so bit-identical) on
    the case's ratings scaled by ``share_key`` (float64 per branch)."""
    case = congestion_ready_case(CASE)
    mc = marginal_cost_per_mwh(case)
    load = _dispatch_load_mw(np.frombuffer(demand_key, dtype=np.float64), load_scale)
    share = np.frombuffer(share_key, dtype=np.float64)
    secure = dataclasses.replace(case, branch_rate_a_mw=case.branch_rate_a_mw * share)
    p = rule_dispatch_from_system_load(secure, load, mc)
    return p, merit_order_price_per_mwh(case, load, mc)


@functools.lru_cache(maxsize=8)
def _groups(n_areas: int) -> ControlAreas:
    return control_areas(congestion_ready_case(CASE), n_areas)


def _unit_slots(n_areas: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Every unit's agent and slot ``[n_gen]`` (ascending unit order per area), and slots."""
    case = congestion_ready_case(CASE)
    area = _groups(n_areas).bus_area[case.gen_bus]
    slot = np.empty(case.n_gen, dtype=np.int64)
    for a in np.unique(area):
        members = np.flatnonzero(area == a)
        slot[members] = np.arange(members.size)
    return area, slot, int(slot.max()) + 1


class VoltageControl118(Task):
    """Volt/var control of case118 by control-area agents.

    ## Description
    The voltage problem an operator of a meshed grid solves once the market has set the active
    dispatch: choose the voltage set-points of the units' regulators so that every bus stays in its
    band and every unit inside its reactive limits, at the least active losses. Each step the units'
    active outputs are given (``opf_118``'s congestion-aware DC merit order for the load x 1.031,
    the case's own loss share, on branch ratings tightened against the AC flow until no branch
    carries more than 94 % of its rating under the rule; the slack takes the actual losses), the
    same for every policy; one exact AC power flow per 30-minute step.

    ## Action
    An area agent: the voltage set-point ``vm_pu`` in [0.94, 1.06] p.u. of each of its units, in
    ``slots`` entries (the largest area); a smaller area leaves its last entries unused (bounds
    [0, 1], ignored). case118's shunts are fixed, so the set-points are the only control.

    ## Observation
    Mode ``global``, per agent: time, system load now and next, the step's price, last losses and
    extreme voltages, then per unit slot its scheduled ``p_mw``, reactive limits, last reactive
    output and last bus voltage (0 in unused slots).

    ## Reward
    Shared, $ per step: ``-(active losses x dt x price)``, the price being the step's merit-order
    marginal cost (32-35 $/MWh through a day). A flow that does not converge is charged losses of
    20 % of the load, so failing is never cheaper than a solution.

    ## Costs
    ``voltage_violation`` (p.u.), ``thermal_overload`` (MVAh), ``reactive_limit`` (Mvarh, outside
    the units' limits: reported, not enforced) and ``pf_nonconvergence`` (steps), all budgeted.
    Step info ``overload_mvah`` and ``reactive_excess_mvarh`` are summed per episode in the
    baselines table.

    ## Starting state
    Last reactive outputs 0, last bus voltages at the case's voltage schedule, at 00:00 of the
    split day; the task secures the dispatch's ratings once per process (a few seconds) and the
    first reset computes the given dispatch of every split day (about 0.1 s a day, cached per
    process).

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``n_areas`` (8; 54 gives one agent per unit), ``load_scale`` (1.1).

    ## Baselines
    Random; rule = the case's published voltage schedule, each unit that it drives outside its
    reactive limits moved inside (raised if absorbing below ``q_min``, lowered if above ``q_max``,
    a few batched AC flows), as a regulator at its limit stops holding its voltage: on the 16
    test days of the table 0 Mvarh/day beyond the limits, 0 MVAh/day of overload (407 before the
    dispatch was secured, on 4 days), no bus outside the band, -91,727 $/day of losses, where the
    schedule held as published leaves 6,901 Mvarh/day (-93,893 $/day; the oracle -81,510, 11.1 %
    above the rule); oracle = pandapower's AC-OPF per step with
    every unit's P fixed at the dispatch and a cost on the slack's output only (minimum losses),
    on the ratings over 1.06 p.u. (pandapower limits current), scored under this task's flow.
    """

    task_id = "voltage_control_118"
    Params = VoltageControlParams
    # step info values the baselines table sums per episode (the card's figures read them)
    episode_metrics = ("reactive_excess_mvarh", "overload_mvah")

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = params = self.make_params(**task_kwargs)
        super().__init__(self.spec_for(params), split)
        self.grid = grid = ACGrid(
            CASE, self.profiles, self.split_days, params.load_scale, self.spec.dt_h
        )
        self.case = grid.case
        self.n_gen = self.case.n_gen
        self.n_agents = len(self.spec.agents)
        area, slot, self.n_slots = _unit_slots(int(params.n_areas))
        self._unit_entry = area * self.n_slots + slot  # [n_gen] joint action entry of each unit
        self._unused = np.setdiff1d(np.arange(self.spec.action.dim), self._unit_entry)
        self._slot_unit = np.full((self.n_agents, self.n_slots), -1)
        self._slot_unit[area, slot] = np.arange(self.n_gen)
        self._slot_used = self._slot_unit >= 0
        self._gather = np.maximum(self._slot_unit, 0)
        q_lim = grid.observed_q_limits_mvar()
        self._slot_q = np.where(self._slot_used[..., None], q_lim[self._gather], 0.0)
        # given dispatch and price of every split day, filled a day at a time on first use
        n_days = self.split_days.size
        self._p_table = np.zeros((n_days, HORIZON + 1, self.n_gen))
        self._price_table = np.zeros((n_days, HORIZON + 1))
        self._filled = np.zeros(n_days, dtype=bool)
        self._base_grid = grid.base_operating_point()  # losses [MW], min / max voltage [p.u.]
        self._share_key = _secure_share(grid).tobytes()
        self.obs_slots = {"global": None}

    @classmethod
    def spec_for(cls, params: VoltageControlParams) -> TaskSpec:
        n_areas = int(params.n_areas)
        groups = _groups(n_areas)
        area, slot, slots = _unit_slots(n_areas)
        agents = tuple(f"area_{a}" for a in range(groups.n_areas))
        rows = list(_GLOBAL)
        for k in range(slots):
            rows += [(f"unit_{k}_{name}", unit, lo, hi) for name, unit, lo, hi in _SLOT]
        names, units, lo, hi = zip(*rows, strict=True)
        wide = {"-": None, "fraction": None, "p.u.": (0.0, 10.0)}  # else +-1e6
        bounds = [wide.get(u, (-1e6, 1e6)) or (a, b) for u, a, b in zip(units, lo, hi, strict=True)]
        observation = VectorSpec(
            names=names,
            units=units,
            low=tuple(b[0] for b in bounds),
            high=tuple(b[1] for b in bounds),
            nominal_low=lo,
            nominal_high=hi,
        )
        entry = {(int(a), int(s)): g for g, (a, s) in enumerate(zip(area, slot, strict=True))}
        action = padded_action(
            {
                agent: [
                    (f"{agent}.gen_{entry[a, k]}.vm_pu", "p.u.", AC_V_MIN_PU, AC_V_MAX_PU)
                    for k in range(slots)
                    if (a, k) in entry
                ]
                for a, agent in enumerate(agents)
            },
            slots,
        )
        days = HORIZON * STEP_MINUTES / (24 * 60)
        grid_costs = ac_grid_costs(days)
        return TaskSpec(
            task_id=cls.task_id,
            description=(
                f"{len(agents)} control-area agents set the voltage set-points of the 54 units of "
                "the IEEE 118-bus system under the exact AC power flow, the active dispatch given, "
                "to keep voltages and reactive limits at the least losses over one day."
            ),
            agents=agents,
            observation=observation,
            action=action,
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            splits=calendar.BASE_SPLITS + ("load_stress", "heatwave", "cold_snap"),  # no PV/wind
            reward_terms=("loss_cost",),
            reward_doc=(
                "-(active losses from the AC flow x dt x the step's merit-order marginal cost) "
                f"per step ($; a failed flow is charged {NONCONVERGED_LOSS_FRACTION:g} x the "
                "system load as losses), shared by all agents"
            ),
            **cmdp_fields(grid_costs),
            baselines=("random", "rule_based", "oracle"),
            obs_modes=("global",),
            obs_mode_specs={"global": observation},
            default_obs_mode="global",
        )

    # ---- the given dispatch -----------------------------------------------------------------
    def _fill_days(self, day_id: np.ndarray) -> None:
        grid = self.grid
        for d in np.unique(day_id[~self._filled[day_id]]):
            flat = grid.flat_index(np.full(HORIZON + 1, d), np.arange(HORIZON + 1))
            demand = np.ascontiguousarray(grid.demand_pu.take(flat), dtype=np.float64)
            p, price = _day_dispatch(demand.tobytes(), grid.load_scale, self._share_key)
            self._p_table[d], self._price_table[d] = p, price
            self._filled[d] = True

    def dispatch(self, state: VoltageControlState) -> tuple[np.ndarray, np.ndarray]:
        """The given active set-points ``[B, n_gen]`` [MW] and price ``[B]`` [$/MWh] of the
        current step (past the horizon: the step after the last)."""
        t = np.minimum(state.t, HORIZON)
        return self._p_table[state.day_id, t], self._price_table[state.day_id, t]

    # ---- batched model ----------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> VoltageControlState:
        day_id = self.check_day_id(day_id)
        self._fill_days(day_id)
        b, n = day_id.size, self.n_gen
        grid = np.empty((b, 3))
        grid[:] = self._base_grid
        return VoltageControlState(
            day_id,
            np.zeros(b, np.int64),
            np.zeros((b, n)),
            np.broadcast_to(self.grid.vm_set_pu, (b, n)).copy(),
            grid,
        )

    def observe(self, state: VoltageControlState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations ``[B, n_agents, obs_dim]`` (float32)."""
        if obs_mode not in (None, "global"):
            raise ValueError(f"unknown obs_mode {obs_mode!r} for {self.task_id}; valid: global")
        b, n_g = state.t.size, len(_GLOBAL)
        p, price = self.dispatch(state)
        obs = np.zeros((b, self.n_agents, self.spec.observation.dim), dtype=np.float32)
        obs[:, :, 0:5] = self.grid.time_and_load(state.day_id, state.t, HORIZON)[:, None, :]
        obs[:, :, 5] = price[:, None]
        obs[:, :, 6:9] = state.prev_grid[:, None, :]
        per_slot = obs[:, :, n_g:].reshape(b, self.n_agents, self.n_slots, len(_SLOT))
        used = self._slot_used
        per_slot[:, :, :, 0] = np.where(used, p[:, self._gather], 0.0)
        per_slot[:, :, :, 1:3] = self._slot_q
        per_slot[:, :, :, 3] = np.where(used, state.prev_q_mvar[:, self._gather], 0.0)
        per_slot[:, :, :, 4] = np.where(used, state.prev_vm_pu[:, self._gather], 0.0)
        return obs

    def step(
        self, state: VoltageControlState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[VoltageControlState, StepOutput]:
        grid, dt = self.grid, self.spec.dt_h
        vm = np.asarray(action, dtype=float)[:, self._unit_entry]
        p, price = self.dispatch(state)
        demand = grid.demand_pu.take(grid.flat_index(state.day_id, state.t))
        flow = grid.solve(demand, p, vm)
        converged = flow.info["pf_converged"]
        load_mw = demand * grid.bus_p_mw.sum()
        losses = np.where(converged, flow.losses_mw, NONCONVERGED_LOSS_FRACTION * load_mw)
        loss_cost = losses * dt * price
        applied = np.array(action, dtype=float)
        applied[:, self._unused] = 0.0
        prev_grid = np.stack([flow.losses_mw, flow.info["v_min_pu"], flow.info["v_max_pu"]], axis=1)
        new_state = VoltageControlState(
            state.day_id, state.t + 1, flow.gen_q_mvar, flow.vm_pu[:, grid.gen_bus], prev_grid
        )
        info = dict(flow.info)
        info["loss_cost"] = loss_cost
        info["price_per_mwh"] = price
        info["total_load_mw"] = load_mw
        b = state.t.size
        return new_state, StepOutput(
            reward=-loss_cost,
            reward_terms=-loss_cost[:, None],
            constraint_costs=flow.costs,
            terminated=np.zeros(b, dtype=bool),
            action_applied=applied,
            info=info,
        )

    # ---- baselines --------------------------------------------------------------------------
    def joint_action(self, vm_pu: np.ndarray) -> np.ndarray:
        """Units' voltage set-points ``[..., n_gen]`` (p.u.) -> the joint action
        ``[..., n_agents x slots]`` (unused entries 0)."""
        vm_pu = np.asarray(vm_pu, dtype=float)
        out = np.zeros(vm_pu.shape[:-1] + (self.spec.action.dim,))
        out[..., self._unit_entry] = vm_pu
        return out

    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """The case's published voltage schedule, each unit that it drives outside its reactive
        limits moved until it is inside (:meth:`ACGrid.reactive_limited_setpoints`, a few AC
        flows of the observed load and dispatch), as regulators at a limit do."""
        grid, b = self.grid, obs.shape[0]
        n_g = len(_GLOBAL)
        per_slot = obs[:, :, n_g:].reshape(b, self.n_agents * self.n_slots, len(_SLOT))
        p = per_slot[:, self._unit_entry, 0].astype(np.float64)
        demand = obs[:, 0, 3].astype(np.float64) / grid.bus_p_mw.sum()
        vm = np.broadcast_to(grid.vm_set_pu, (b, self.n_gen))
        return self.joint_action(grid.reactive_limited_setpoints(demand, p, vm))

    def oracle_plan(self, state: VoltageControlState) -> np.ndarray:
        """pandapower's minimum-loss AC-OPF of every remaining step (units' P fixed at the
        dispatch), as joint actions ``[B, H, act_dim]``: on branch current limits of the ratings
        over 1.06 p.u. (the apparent power inside the ratings at any voltage of the band), or
        where that has no solution on the ratings themselves; a step where both fail gets the
        rule's set-points."""
        from powerzoo.tasks.ac_oracle import opf_net, run_ac_opf, unit_results

        grid = self.grid
        nets = [
            opf_net(self.case, grid.network.rate_mva, rate, minimise="losses")
            for rate in (grid.rate_mva / AC_V_MAX_PU, grid.rate_mva)
        ]
        b = state.t.size
        plan = np.zeros((b, HORIZON, self.spec.action.dim))
        for row in range(b):
            day = state.day_id[row : row + 1]
            for t in range(int(state.t[row]), HORIZON):
                flat = grid.flat_index(day, np.array([t]))
                demand = float(grid.demand_pu.take(flat)[0])
                p = self._p_table[day[0], t]
                for net in nets:
                    solved = run_ac_opf(net, demand * grid.load_scale, fixed_p_mw=p, case=self.case)
                    if solved is not None:
                        plan[row, t] = self.joint_action(unit_results(solved, self.case)[1])
                        break
                else:
                    vm = grid.reactive_limited_setpoints(
                        np.array([demand]), p[None], grid.vm_set_pu[None]
                    )
                    plan[row, t] = self.joint_action(vm[0])
        return plan
