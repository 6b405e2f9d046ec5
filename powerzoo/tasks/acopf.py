"""``acopf_118``: AC optimal power flow on the IEEE 118-bus system, one agent per generator.

Model
-----
* Agents: the case's 54 units (``gen_0`` .. ``gen_53``, the case's order), one per unit as in
  ``opf_118``.  Action per unit: its active set-point ``p_mw`` in ``[Pmin, Pmax]`` and its
  voltage set-point ``vm_pu`` in [0.94, 1.06] p.u. (the case's bus voltage band).  The slack
  unit (``gen_29``, the external grid at bus 69 of the published numbering) takes the losses and
  the mismatch: its ``p_mw`` entry is not read; ``action_applied`` reports its output from the
  flow there instead (so it may lie outside the action bounds).
* Load and network: :mod:`powerzoo.tasks.ac_transmission` (each bus's published P and Q demand x
  1.1 x the calendar demand shape, 30-minute steps; pandapower's case118 with the voltage-class
  branch ratings of the DC tasks), one exact batched AC power flow per step with the units'
  reactive limits enforced as machines meet them: a unit whose voltage set-point asks for
  reactive power beyond its limits is held at the limit and its bus voltage floats (PV -> PQ
  switching, pandapower's ``runpp(enforce_q_lims=True)``); only the slack unit can end outside
  its limits (``reactive_limit``).
* Reward (shared): ``-(generation cost + imbalance cost + overload cost + reactive cost +
  nonconvergence cost)`` in $ per step: the case's polynomial costs of every unit, the slack's at
  its output from the flow, times ``dt``; the slack's output outside its own ``[Pmin, Pmax]`` is
  energy no unit can supply, settled at ``imbalance_price_per_mwh`` (1,000 $/MWh, ``opf_118``'s
  imbalance price); branch overload (MVAh) and reactive output beyond the limits (Mvarh) at
  ``overload_price_per_mvah`` (2,000 $/MVAh, the DC tasks' overload price); a flow that does
  not converge at :data:`NONCONVERGENCE_PENALTY` (100,000 $).
* Costs (CMDP, per-day budgets): ``voltage_violation`` (1 p.u.), ``thermal_overload``
  (1 MVAh), ``reactive_limit`` (1 Mvarh), ``pf_nonconvergence`` (0.5 step: one failed flow
  breaks it), ``power_imbalance`` (1 MWh, the slack's energy outside its limits); all priced in
  the reward too, and kept in their physical units here.  Step info ``overload_mvah``,
  ``reactive_excess_mvarh`` (summed per episode in the baselines table, :attr:`episode_metrics`)
  and ``q_limited_units`` (units held at a limit).  A non-converged flow is flagged
  (``pf_converged``), never raised; its charges are those of
  :mod:`powerzoo.tasks.ac_transmission`.
* Observation (``global``, per agent): time, system load now and next step, own limits (P, Q),
  marginal cost, own last P, Q and bus voltage, last losses, slack output and extreme voltages.
* Baselines: random; rule = what an operator's simple tools do, from the observed load: the
  congestion-aware DC merit order of ``opf_118``
  (:func:`powerzoo.physics.redispatch.rule_dispatch_from_system_load`) for the load plus the last
  observed losses, on branch ratings cut to :data:`RULE_RATING_SHARE` (85 %: the DC flow sees
  MW, the ratings bind MVA); the case's published voltage schedule, each unit that the schedule
  drives outside its reactive limits moved inside, as a regulator at its limit stops holding
  its voltage (:meth:`~powerzoo.tasks.ac_transmission.ACGrid.reactive_limited_setpoints`, a few
  batched AC flows); then the merit order again for the load plus the losses of that AC flow
  less :data:`RULE_SLACK_MARGIN_MW` (2 MW, so the slack, dispatched at its ``Pmin`` of 0, is not
  pushed below it by a loss estimate a step old), its set-points moved likewise.  On the first
  4 test days of the baselines table (then 4 days long) this keeps every budget (reactive excess
  0 Mvarh/day, overload 0 MVAh/day, slack energy outside its limits 0.08 MWh/day; return
  -2,162,363 $/day) where the
  published schedule with the plain merit order broke three (measured on the earlier data:
  7,520 Mvarh/day beyond the reactive limits, 88 % of it units absorbing below ``q_min``;
  417 MVAh/day of overload; 51 MWh/day of slack energy; -2,241,912 $/day).  With the limits
  enforced (measured on the same 4 days) the rule leaves no unit at a limit and its return is
  unchanged, while the published schedule with its network-blind dispatch (the ``naive`` row)
  leaves 19 of the 54 units held at a limit every step (their voltages not held), 0 Mvarh of
  reactive excess and 6.2 MVAh/day of overload (-1,840,299 $/day, over the budget on one day
  of four).  Oracle =
  pandapower's AC-OPF per step (:mod:`powerzoo.tasks.ac_oracle`, about 1 s a step, a minute a
  day on one core: the published baselines use a subset of the test days), scored under this
  task's flow.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.physics.dc_opf import dispatch_cost
from powerzoo.physics.redispatch import rule_dispatch_from_system_load
from powerzoo.tasks.ac_transmission import (
    AC_V_MAX_PU,
    AC_V_MIN_PU,
    BASE_LOAD_SCALE,
    ACGrid,
    ac_grid_costs,
)
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.spec import TaskSpec, VectorSpec, cmdp_fields
from powerzoo.tasks.transmission import (
    OVERLOAD_PRICE_PER_MWH,
    STEP_MINUTES,
    congestion_ready_case,
    marginal_cost_per_mwh,
)

__all__ = ["Acopf118", "AcopfParams", "AcopfState"]

CASE = "case118"
HORIZON = 48
NONCONVERGENCE_PENALTY = 100_000.0  # $ per failed flow, in the reward and the "penalized" preset
RULE_RATING_SHARE = 0.85  # the rule's DC dispatch keeps this share of each branch rating
RULE_SLACK_MARGIN_MW = 2.0  # the rule leaves the slack this much above its AC-flow losses [MW]
_FIELDS = (
    "hour_sin",
    "hour_cos",
    "time_remaining",
    "system_load_mw",
    "system_load_next_mw",
    "own_pmin_mw",
    "own_pmax_mw",
    "own_marginal_cost_per_mwh",
    "own_qmin_mvar",
    "own_qmax_mvar",
    "own_prev_p_mw",
    "own_prev_q_mvar",
    "own_prev_vm_pu",
    "prev_losses_mw",
    "prev_slack_p_mw",
    "prev_v_min_pu",
    "prev_v_max_pu",
)


@dataclasses.dataclass(frozen=True)
class AcopfParams:
    """The task keywords of ``acopf_118``."""

    # bus loads = the case's published base load x this x demand_pu
    load_scale: float = BASE_LOAD_SCALE
    # $/MWh of the slack's output outside its limits
    imbalance_price_per_mwh: float = 1000.0
    # $ per MVAh of branch overload and per Mvarh of reactive output beyond the limits
    overload_price_per_mvah: float = OVERLOAD_PRICE_PER_MWH

    def __post_init__(self) -> None:
        prices = (self.imbalance_price_per_mwh, self.overload_price_per_mvah)
        if not self.load_scale > 0.0 or not min(prices) >= 0.0:
            raise ValueError(
                f"acopf_118: load_scale must be > 0 and imbalance_price_per_mwh, "
                f"overload_price_per_mvah >= 0, got {self.load_scale} and {prices}"
            )


@dataclasses.dataclass
class AcopfState:
    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    prev_p_mw: np.ndarray  # [B, n_gen] last active output (slack: from the flow)
    prev_q_mvar: np.ndarray  # [B, n_gen] last reactive output at each unit's bus
    prev_vm_pu: np.ndarray  # [B, n_gen] last voltage at each unit's bus
    prev_grid: np.ndarray  # [B, 4] last losses [MW], slack output [MW], min / max voltage


class Acopf118(Task):
    """AC-OPF on case118, one agent per generator.

    ## Description
    The 54 units of the IEEE 118-bus case (``gen_0`` .. ``gen_53``) set their active output and
    their voltage set-point every 30 minutes; every step is one exact batched AC power flow. Loads
    are each bus's published P and Q x 1.1 x the calendar demand shape; branches carry the
    voltage-class ratings of ``opf_118`` on their apparent power. The units' reactive limits are
    enforced as machines meet them: a unit asked for reactive power beyond its limits is held at
    the limit and its bus voltage floats (PV -> PQ switching, as pandapower's
    ``runpp(enforce_q_lims=True)``); only the slack unit can end outside its limits.

    ## Action
    Per unit ``[p_mw, vm_pu]``: the active set-point in ``[Pmin, Pmax]`` (MW) and the voltage
    set-point in [0.94, 1.06] p.u. The slack unit (``gen_29``, bus 69 of the published numbering)
    takes the losses and the mismatch: its ``p_mw`` entry is not read, and ``action_applied``
    reports its output from the flow.

    ## Observation
    Mode ``global``, per agent: time, system load now and next step, own limits (P, Q), marginal
    cost, own last P, Q and bus voltage, last losses, slack output and extreme voltages.

    ## Reward
    Shared, $ per step: ``-(generation cost + imbalance cost + overload cost + reactive cost +
    nonconvergence cost)``: the case's polynomial costs of every unit (the slack's at its output
    from the flow) x ``dt``; the slack's output outside its own ``[Pmin, Pmax]`` at 1,000 $/MWh;
    branch overload (MVAh) and reactive output beyond the limits (Mvarh) at 2,000 $/MVAh, the DC
    tasks' overload price; 100,000 $ per flow that does not converge.

    ## Costs
    ``voltage_violation`` (p.u. outside [0.94, 1.06] summed over buses), ``thermal_overload``
    (MVAh), ``reactive_limit`` (Mvarh outside the units' limits), ``pf_nonconvergence`` (steps whose
    flow did not converge: flagged in ``info["pf_converged"]``, never raised) and
    ``power_imbalance`` (MWh of slack output outside its limits), in their physical units. The
    step info carries ``overload_mvah`` and ``reactive_excess_mvarh`` (summed per episode in the
    baselines table) and ``q_limited_units`` (units held at a reactive limit).

    ## Starting state
    Last P and Q of every unit 0, last bus voltages at the case's set-points, last losses those of
    the case's base operating point, at 00:00 of the split day.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``load_scale`` (1.1), ``imbalance_price_per_mwh`` (1,000), ``overload_price_per_mvah``
    (2,000, also per Mvarh of reactive excess).

    ## Baselines
    Random; rule = the congestion-aware DC merit order of ``opf_118`` for the observed load plus the
    last observed losses, on branch ratings cut to 85 % (the DC flow sees MW, the ratings bind
    MVA); the case's published voltage schedule, each unit the schedule drives outside its reactive
    limits moved inside, as a regulator at its limit stops holding its voltage (a few batched AC
    flows); then the merit order again for the load plus that flow's losses less 2 MW (the slack,
    at its ``Pmin``, stays inside its limits) and its set-points moved likewise. On the 16 test
    days of the table it keeps every budget on 15 (the 9th: 1.3 MWh of slack energy outside its
    limits; return -2,290,118 $/day, 0.21 MWh/day on average), where the schedule as published broke
    three (on the earlier data): 7,520 Mvarh/day beyond the reactive limits, 417 MVAh/day of
    overload, 51 MWh/day of slack energy outside its limits (-2,241,912 $/day). With the limits
    enforced the rule holds no unit at a limit and carries 0 Mvarh of reactive excess and 0 MVAh
    of overload (its return unchanged); the published schedule with a network-blind dispatch (the
    naive row) leaves 19 units held at a limit every step. On the table's 16 days the naive row
    costs 160,109 $/day less than the rule but carries 87 MVAh/day of overload and breaks the
    budget on 8 of them: what the rule pays over it buys feasibility, so the rule is the anchor.
    Oracle =
    pandapower's AC-OPF per step (about 1 s a step), scored under this task's flow: the published
    row uses a subset of the test days.
    """

    task_id = "acopf_118"
    Params = AcopfParams
    # step info values the baselines table sums per episode (the card's figures read them)
    episode_metrics = ("reactive_excess_mvarh", "overload_mvah")

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = params = self.make_params(**task_kwargs)
        super().__init__(self.spec_for(params), split)
        self.grid = grid = ACGrid(
            CASE, self.profiles, self.split_days, params.load_scale, self.spec.dt_h, True
        )
        case = self.case = grid.case
        self.n_gen = case.n_gen
        self.marginal_cost = marginal_cost_per_mwh(case)
        self._rule_case = dataclasses.replace(
            case, branch_rate_a_mw=case.branch_rate_a_mw * RULE_RATING_SHARE
        )
        q_limits = grid.observed_q_limits_mvar()
        self._own = np.stack(
            [case.gen_pmin_mw, case.gen_pmax_mw, self.marginal_cost, *q_limits.T], axis=1
        ).astype(np.float32)
        self._slots = {name: i for i, name in enumerate(_FIELDS)}
        self._p_entry = 2 * np.arange(self.n_gen)
        self._vm_entry = self._p_entry + 1
        self._slack_p_entry = 2 * grid.slack_unit
        self._slack_limits = (
            float(case.gen_pmin_mw[grid.slack_unit]),
            float(case.gen_pmax_mw[grid.slack_unit]),
        )
        # what the first step observes of the grid: the case's own losses [MW], min / max voltage
        self._base_grid = grid.base_operating_point()
        self.obs_slots = {"global": None}

    @classmethod
    def spec_for(cls, params: AcopfParams) -> TaskSpec:
        case = congestion_ready_case(CASE)
        n = case.n_gen
        agents = tuple(f"gen_{i}" for i in range(n))
        load_hi = float(case.total_load_mw * params.load_scale * 1.3)
        pmax = float(case.gen_pmax_mw.max())
        mc_hi = float(marginal_cost_per_mwh(case).max()) * 1.5 + 1.0
        rows = (
            ("hour_sin", "-", -1.0, 1.0, -1.0, 1.0),
            ("hour_cos", "-", -1.0, 1.0, -1.0, 1.0),
            ("time_remaining", "fraction", 0.0, 1.0, 0.0, 1.0),
            ("system_load_mw", "MW", 0.0, 1e6, 0.0, load_hi),
            ("system_load_next_mw", "MW", 0.0, 1e6, 0.0, load_hi),
            ("own_pmin_mw", "MW", 0.0, pmax, 0.0, pmax),
            ("own_pmax_mw", "MW", 0.0, pmax, 0.0, pmax),
            ("own_marginal_cost_per_mwh", "$/MWh", 0.0, mc_hi, 0.0, mc_hi),
            ("own_qmin_mvar", "Mvar", -1e4, 1e4, -300.0, 300.0),
            ("own_qmax_mvar", "Mvar", -1e4, 1e4, -300.0, 300.0),
            ("own_prev_p_mw", "MW", -1e6, 1e6, 0.0, pmax),
            ("own_prev_q_mvar", "Mvar", -1e6, 1e6, -300.0, 300.0),
            ("own_prev_vm_pu", "p.u.", 0.0, 10.0, AC_V_MIN_PU, AC_V_MAX_PU),
            ("prev_losses_mw", "MW", -1e6, 1e6, 0.0, 300.0),
            ("prev_slack_p_mw", "MW", -1e6, 1e6, -1000.0, 1000.0),
            ("prev_v_min_pu", "p.u.", 0.0, 10.0, 0.9, 1.1),
            ("prev_v_max_pu", "p.u.", 0.0, 10.0, 0.9, 1.1),
        )
        assert tuple(r[0] for r in rows) == _FIELDS
        observation = VectorSpec.from_rows(rows)
        names, low, high, units = [], [], [], []
        for i, agent in enumerate(agents):
            names += [f"{agent}.p_mw", f"{agent}.vm_pu"]
            low += [float(case.gen_pmin_mw[i]), AC_V_MIN_PU]
            high += [float(case.gen_pmax_mw[i]), AC_V_MAX_PU]
            units += ["MW", "p.u."]
        days = HORIZON * STEP_MINUTES / (24 * 60)
        grid_costs = ac_grid_costs(days, NONCONVERGENCE_PENALTY)
        return TaskSpec(
            task_id=cls.task_id,
            description=(
                f"{n} generator agents set active power and voltage set-points on the IEEE "
                "118-bus system under the exact AC power flow over one day (AC-OPF)."
            ),
            agents=agents,
            observation=observation,
            action=VectorSpec(names=tuple(names), units=tuple(units), low=low, high=high),
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            # no low_renewable: the task reads no PV or wind, so it would be the test split
            splits=calendar.BASE_SPLITS + ("load_stress", "heatwave", "cold_snap"),
            reward_terms=(
                "generation_cost",
                "imbalance_cost",
                "overload_cost",
                "reactive_cost",
                "nonconvergence_cost",
            ),
            reward_doc=(
                "-(generation cost of every unit, the slack's at its output from the AC flow + "
                "the slack's output outside its limits x "
                f"{params.imbalance_price_per_mwh:g} $/MWh + branch overload (MVAh) and "
                f"reactive output beyond the limits (Mvarh) x {params.overload_price_per_mvah:g} "
                f"$/MVAh + {NONCONVERGENCE_PENALTY:g} $ per flow that does not converge) per "
                "step ($), shared by all agents"
            ),
            **cmdp_fields((*grid_costs, ("power_imbalance", "MWh", 1.0 * days, None))),
            baselines=("random", "rule_based", "oracle"),
            obs_modes=("global",),
            obs_mode_specs={"global": observation},
            default_obs_mode="global",
        )

    # ---- batched model ----------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> AcopfState:
        day_id = self.check_day_id(day_id)
        b, n = day_id.size, self.n_gen
        losses, v_min, v_max = self._base_grid
        grid = np.empty((b, 4))
        grid[:] = (losses, 0.0, v_min, v_max)
        return AcopfState(
            day_id,
            np.zeros(b, np.int64),
            np.zeros((b, n)),
            np.zeros((b, n)),
            np.broadcast_to(self.grid.vm_set_pu, (b, n)).copy(),
            grid,
        )

    def observe(self, state: AcopfState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations ``[B, n_gen, 17]`` (float32)."""
        if obs_mode not in (None, "global"):
            raise ValueError(f"unknown obs_mode {obs_mode!r} for acopf_118; valid: global")
        b = state.t.size
        row = np.empty((b, len(_FIELDS)), dtype=np.float32)
        row[:, 0:5] = self.grid.time_and_load(state.day_id, state.t, HORIZON)
        row[:, 13:17] = state.prev_grid
        obs = np.empty((b, self.n_gen, len(_FIELDS)), dtype=np.float32)
        obs[...] = row[:, None, :]
        obs[:, :, 5:10] = self._own
        obs[:, :, 10] = state.prev_p_mw
        obs[:, :, 11] = state.prev_q_mvar
        obs[:, :, 12] = state.prev_vm_pu
        return obs

    def step(
        self, state: AcopfState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[AcopfState, StepOutput]:
        grid, dt = self.grid, self.spec.dt_h
        p = np.array(action[:, self._p_entry], dtype=float)
        vm = np.asarray(action[:, self._vm_entry], dtype=float)
        demand = grid.demand_pu.take(grid.flat_index(state.day_id, state.t))
        flow = grid.solve(demand, p, vm)
        p[:, grid.slack_unit] = flow.slack_p_mw
        lo, hi = self._slack_limits
        outside_mw = np.maximum(np.maximum(flow.slack_p_mw - hi, lo - flow.slack_p_mw), 0.0)
        imbalance_mwh = outside_mw * dt
        generation = dispatch_cost(self.case, p) * dt
        b = state.t.size
        terms = np.empty((b, 5))
        terms[:, 0] = -generation
        terms[:, 1] = -imbalance_mwh * self.params.imbalance_price_per_mwh
        terms[:, 2:4] = flow.costs[:, 1:3] * -self.params.overload_price_per_mvah
        terms[:, 4] = flow.costs[:, 3] * -NONCONVERGENCE_PENALTY
        costs = np.empty((b, 5))
        costs[:, :4] = flow.costs
        costs[:, 4] = imbalance_mwh
        applied = np.array(action, dtype=float)
        applied[:, self._slack_p_entry] = flow.slack_p_mw
        prev_grid = np.stack(
            [flow.losses_mw, flow.slack_p_mw, flow.info["v_min_pu"], flow.info["v_max_pu"]],
            axis=1,
        )
        new_state = AcopfState(
            state.day_id, state.t + 1, p, flow.gen_q_mvar, flow.vm_pu[:, grid.gen_bus], prev_grid
        )
        info = dict(flow.info)
        info["generation_cost"] = generation
        info["total_load_mw"] = demand * grid.bus_p_mw.sum()
        return new_state, StepOutput(
            reward=terms.sum(axis=1),
            reward_terms=terms,
            constraint_costs=costs,
            terminated=np.zeros(b, dtype=bool),
            action_applied=applied,
            info=info,
        )

    # ---- baselines --------------------------------------------------------------------------
    def joint_action(self, p_mw: np.ndarray, vm_pu: np.ndarray) -> np.ndarray:
        """Units' set-points ``[..., n_gen]`` (MW, p.u.) -> the joint action ``[..., 2 n_gen]``."""
        out = np.empty(p_mw.shape[:-1] + (2 * self.n_gen,))
        out[..., self._p_entry] = p_mw
        out[..., self._vm_entry] = vm_pu
        return out

    def _rule_dispatch(self, system_load_mw: np.ndarray, losses_mw: np.ndarray) -> np.ndarray:
        p = rule_dispatch_from_system_load(
            self.case, system_load_mw + np.maximum(losses_mw, 0.0), self.marginal_cost
        )
        vm = np.broadcast_to(self.grid.vm_set_pu, p.shape)
        return self.joint_action(p, vm)

    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """An operator's dispatch with voltage control, from the observed system load
        (see ## Baselines): the congestion-aware DC merit order of the load plus the last
        observed losses, on branch ratings cut to :data:`RULE_RATING_SHARE`; the published
        voltage schedule, each unit it drives outside its reactive limits moved inside
        (:meth:`ACGrid.reactive_limited_setpoints`); then the merit order again for the load
        plus the losses of that AC flow less :data:`RULE_SLACK_MARGIN_MW`, and its set-points
        moved likewise."""
        grid = self.grid
        load = obs[:, 0, self._slots["system_load_mw"]].astype(np.float64)
        losses = obs[:, 0, self._slots["prev_losses_mw"]].astype(np.float64)
        demand = load / grid.bus_p_mw.sum()
        case, mc = self._rule_case, self.marginal_cost
        p = rule_dispatch_from_system_load(case, load + np.maximum(losses, 0.0), mc)
        vm = grid.reactive_limited_setpoints(demand, p, np.broadcast_to(grid.vm_set_pu, p.shape))
        losses = grid.solve(demand, p, vm).losses_mw
        p = rule_dispatch_from_system_load(case, load + losses - RULE_SLACK_MARGIN_MW, mc)
        return self.joint_action(p, grid.reactive_limited_setpoints(demand, p, vm))

    def oracle_plan(self, state: AcopfState) -> np.ndarray:
        """pandapower's AC-OPF of every remaining step, as joint actions ``[B, H, 2 n_gen]``
        (a step whose OPF fails gets the rule's action for that step's load)."""
        from powerzoo.tasks.ac_oracle import opf_net, run_ac_opf, unit_results

        grid = self.grid
        net = opf_net(self.case, grid.network.rate_mva, grid.rate_mva)
        plan = np.zeros((state.t.size, HORIZON, 2 * self.n_gen))
        losses = self._base_grid[0]
        for row in range(state.t.size):
            t0 = int(state.t[row])
            for t in range(t0, HORIZON):
                flat = grid.flat_index(state.day_id[row : row + 1], np.array([t]))
                factor = float(grid.demand_pu.take(flat)[0]) * grid.load_scale
                solved = run_ac_opf(net, factor)
                if solved is None:
                    load = grid.system_load_mw(flat)
                    plan[row, t] = self._rule_dispatch(load, np.array([losses]))[0]
                    continue
                p, vm = unit_results(solved, self.case)
                losses = float(p.sum() - grid.system_load_mw(flat)[0])
                plan[row, t] = self.joint_action(p, vm)
        return plan
