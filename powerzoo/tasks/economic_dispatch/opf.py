"""``opf``: multi-agent economic dispatch on any transmission case of the case library.

``make_env("opf", case="case2869pegase", num_envs=256)`` dispatches that network for a day in
half-hours, with the model of ``marl_opf`` / ``opf_118`` (:mod:`powerzoo.tasks.economic_dispatch`:
calendar load shape times the case's bus loads, DC power flow, reward ``-(generation + imbalance
+ regulation + overload cost)`` in $, the mismatch within a regulation band of 1 % of the peak
load settled at 2 x the units' highest marginal cost (:mod:`powerzoo.tasks.balancing`), costs
``thermal_overload`` and ``power_imbalance`` (beyond the band) with budgets of 1 MVAh and 1 MWh a
day). What differs:

* **Any case** (``case=``, default ``"case118"``): the names of
  :func:`powerzoo.physics.cases.load_case`. Cases up to 1,000 buses step on dense shift factors,
  larger ones on the sparse DC power flow (one factorisation per case, no dense branch x bus
  matrix). The case's ratings are checked again with the task's units and re-rated where no
  dispatch keeps them (:mod:`.sced`), so the oracle keeps the overload budget.
* **Agents** (``agents=``): ``"area"`` (default) gives one agent per control area
  (:func:`powerzoo.physics.areas.control_areas`, ``n_areas`` contiguous areas of about equal unit
  counts; one agent per unit stops making sense at thousands of units); ``"unit"`` one agent per
  dispatchable unit. Only units in service with ``Pmax > Pmin`` are dispatched; the others sit at
  ``Pmin``.
* **Action** of an area agent: the output ``p_mw`` of each of its units, in ``[Pmin, Pmax]``, in
  ``slots`` entries (the size of the largest area); an area with fewer units leaves its last
  entries unused (bounds ``[0, 1]``, ignored). A unit agent has one entry.
* **Observation** (every agent the same fields): time (``hour_sin``, ``hour_cos``,
  ``time_remaining``), ``system_load_mw`` and ``system_load_next_mw``, ``area_load_mw`` (the load of
  the agent's buses), ``area_pmin_mw`` / ``area_pmax_mw``, ``prev_imbalance_mw``, then per unit slot
  its ``pmax``, marginal cost and last output (0 in unused slots).
* **Units** with Pmin by technology and ramps (:mod:`.limits`, as ``opf_118``): a setpoint
  outside the step's range is clipped onto it; where the summed Pmin exceed 90 % of the year's
  lowest load they are scaled down to it.
* **Baselines**: random; the SCED of ``opf_118`` (lambda dispatch within the step ranges, then
  PTDF redispatch) on cases up to 1,000 buses, the lambda dispatch alone on larger ones (the
  redispatch works on a dense PTDF); the oracle is the DC-OPF per step within its ramp range
  (:func:`powerzoo.physics.multi_period_opf.solve_ramped_sequence`) with soft line limits at the
  reward's overload price.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from powerzoo.physics.areas import ControlAreas, control_areas, dispatchable_units
from powerzoo.physics.cases import NetworkCase
from powerzoo.tasks.base import StepOutput
from powerzoo.tasks.economic_dispatch import sced
from powerzoo.tasks.economic_dispatch.layout import dispatch_model_fields
from powerzoo.tasks.economic_dispatch.limits import DispatchLimits
from powerzoo.tasks.economic_dispatch.model import (
    DENSE_FLOW_MAX_BUSES,
    DispatchParams,
    DispatchState,
    EconomicDispatch,
)
from powerzoo.tasks.spec import TaskSpec, VectorSpec, padded_action
from powerzoo.tasks.transmission import congestion_ready_case, marginal_cost_per_mwh

__all__ = ["Opf", "OpfParams"]

AGENT_MODES = ("area", "unit")


@dataclasses.dataclass(frozen=True)
class OpfParams(DispatchParams):
    """The numbers of an ``opf`` episode; each is a task keyword (see :class:`DispatchParams`
    for the load scale and prices)."""

    case: str = "case118"  # a name of powerzoo.physics.cases.load_case
    agents: str = "area"  # "area": one agent per control area; "unit": one per unit
    n_areas: int = 8  # control areas (agents="area"), capped at the buses hosting units

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.agents not in AGENT_MODES:
            raise ValueError(f"agents must be one of {AGENT_MODES}, got {self.agents!r}")
        if int(self.n_areas) < 1:
            raise ValueError(f"n_areas must be >= 1, got {self.n_areas!r}")


@functools.lru_cache(maxsize=8)
def _groups(case_name: str, agents: str, n_areas: int) -> ControlAreas:
    """The agents' unit groups of a case: control areas, or one group per dispatchable unit."""
    case = congestion_ready_case(case_name)
    if agents == "area":
        return control_areas(case, n_areas)
    units = dispatchable_units(case)
    return ControlAreas([units[i : i + 1] for i in range(units.size)], np.zeros(case.n_bus))


def _opf_spec(case: NetworkCase, groups: ControlAreas, params: OpfParams) -> TaskSpec:
    agents = tuple(
        [f"area_{a}" for a in range(groups.n_areas)]
        if params.agents == "area"
        else [f"gen_{int(u[0])}" for u in groups.units]
    )
    slots = groups.max_units
    pmax_all = float(case.gen_pmax_mw[np.isfinite(case.gen_pmax_mw)].max())
    mc_hi = float(marginal_cost_per_mwh(case).max()) * 1.5 + 1.0
    load_hi = float(abs(case.total_load_mw) * params.load_scale * 1.3) or 1.0
    pmax_total = float(case.gen_pmax_mw[case.gen_in_service].sum())
    fields = [
        ("hour_sin", "-", -1.0, 1.0),
        ("hour_cos", "-", -1.0, 1.0),
        ("time_remaining", "fraction", 0.0, 1.0),
        ("system_load_mw", "MW", 0.0, load_hi),
        ("system_load_next_mw", "MW", 0.0, load_hi),
        ("area_load_mw", "MW", 0.0, load_hi),
        ("area_pmin_mw", "MW", 0.0, pmax_total),
        ("area_pmax_mw", "MW", 0.0, pmax_total),
        ("prev_imbalance_mw", "MW", -pmax_total, pmax_total),
    ]
    for k in range(slots):
        fields += [
            (f"unit_{k}_pmax_mw", "MW", 0.0, pmax_all),
            (f"unit_{k}_marginal_cost_per_mwh", "$/MWh", 0.0, mc_hi),
            (f"unit_{k}_prev_p_mw", "MW", 0.0, pmax_all),
        ]
    names, units, lo, hi = zip(*fields, strict=True)
    unbounded = ["load" in k or "imbalance" in k for k in names]
    observation = VectorSpec(
        names=names,
        units=units,
        low=tuple(-1e6 if u else v for u, v in zip(unbounded, lo, strict=True)),
        high=tuple(1e6 if u else v for u, v in zip(unbounded, hi, strict=True)),
        nominal_low=lo,
        nominal_high=hi,
    )
    action = padded_action(
        {
            agent: [
                (f"{agent}.gen_{g}.p_mw", "MW", case.gen_pmin_mw[g], case.gen_pmax_mw[g])
                for g in members.tolist()
            ]
            for agent, members in zip(agents, groups.units, strict=True)
        },
        slots,
    )
    return TaskSpec(
        task_id="opf",
        description=(
            f"{len(agents)} {params.agents} agents dispatch {case.name} ({case.n_bus} buses, "
            f"{sum(u.size for u in groups.units)} dispatchable units, DC power flow) over one day."
        ),
        agents=agents,
        observation=observation,
        action=action,
        **dispatch_model_fields(params, 48, case),
        obs_modes=("global",),
        obs_mode_specs={"global": observation},
        default_obs_mode="global",
    )


class Opf(EconomicDispatch):
    """Economic dispatch of any case by area or unit agents.

    ``make_env("opf", case="case2869pegase", num_envs=256)`` dispatches that network for a day with
    the dispatch model of ``marl_opf`` / ``opf_118``.

    ## Description
    The dispatch model on any transmission case of the case library (``case=``, default
    ``"case118"``). Cases up to 1,000 buses step on dense shift factors, larger ones on the sparse
    DC power flow. By default one agent dispatches each control area (``n_areas`` contiguous areas
    of about equal unit counts); ``agents="unit"`` gives one agent per dispatchable unit.

    ## Action
    An area agent: the output ``p_mw`` of each of its units in ``[Pmin, Pmax]`` (Pmin by
    technology, as ``opf_118``), clipped into the step's ramp range, in ``slots`` entries (the
    largest area); an area with fewer units leaves its last entries unused (bounds [0, 1],
    ignored). A unit agent has one entry.

    ## Observation
    Every agent the same fields: time, system load now and next, the area's load and limits, the
    last imbalance, then per unit slot its ``pmax``, marginal cost and last output (0 in unused
    slots).

    ## Reward
    Shared, $ per step: ``-(generation + imbalance + regulation + overload cost)``, as
    ``marl_opf``: the mismatch within the regulation band (1 % of the split year's peak load;
    46.4 MW on case118) at 2 x the units' highest marginal cost (560 $/MWh on case118), beyond it
    at 1,000 $/MWh.

    ## Costs
    ``thermal_overload`` (MVAh) and ``power_imbalance`` (MWh beyond the regulation band), budgets
    1 MVAh and 1 MWh a day; ``info["regulation_mwh"]``: the energy within the band.

    ## Starting state
    At 00:00 of the split day, no imbalance, every unit at the rule's dispatch (without ramp
    limits) of the load of the half-hour before.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``case`` (a case name of ``powerzoo.physics.cases.load_case``), ``agents`` (``"area"`` or
    ``"unit"``), ``n_areas`` (8), and the dispatch keywords ``load_scale``,
    ``imbalance_price_per_mwh``, ``overload_penalty_per_mwh``, ``regulation_share``,
    ``regulation_price_per_mwh``.

    ## Baselines
    Random; the SCED of ``opf_118`` (equal-incremental-cost dispatch within the step ranges, then
    PTDF redispatch) on cases up to 1,000 buses, the equal-incremental-cost dispatch alone on
    larger ones; oracle = the DC-OPF of each step within its ramp range, soft line limits at the
    overload price.
    """

    task_id = "opf"
    horizon = 48
    Params = OpfParams

    @classmethod
    def limited_network(cls, params: OpfParams) -> tuple[NetworkCase, DispatchLimits]:
        return sced.limited_case(params.case, float(params.load_scale))

    @classmethod
    def spec_for(cls, params: OpfParams) -> TaskSpec:
        groups = _groups(params.case, params.agents, int(params.n_areas))
        return _opf_spec(cls.limited_network(params)[0], groups, params)

    def _build_observation(self) -> None:
        p = self.params
        self.groups = groups = _groups(p.case, p.agents, int(p.n_areas))
        n_agents, slots = groups.n_areas, groups.max_units
        self.n_slots = slots
        # joint action entry of every dispatchable unit, and the unit behind every used entry
        members = np.concatenate(groups.units)
        agent_of = np.repeat(np.arange(n_agents), [u.size for u in groups.units])
        position = np.concatenate([np.arange(u.size) for u in groups.units])
        self._unit_entry = agent_of * slots + position  # [n_dispatchable]
        self._dispatchable = members
        pmin, _ = self.case.gen_limits_mw
        self._fixed_p = pmin.copy()  # units that cannot be dispatched sit at Pmin
        self._movable = np.zeros(self.case.n_gen, dtype=bool)
        self._movable[members] = True
        self._unused = np.setdiff1d(np.arange(n_agents * slots), self._unit_entry)
        # per-slot constant observation columns [n_agents, slots]: pmax, marginal cost
        self._slot_unit = np.full((n_agents, slots), -1)
        self._slot_unit[agent_of, position] = members
        used = self._slot_unit >= 0
        self._slot_used = used
        self._slot_const = np.zeros((n_agents, slots, 2), np.float32)
        self._slot_const[used, 0] = self.case.gen_pmax_mw[members]
        self._slot_const[used, 1] = self.marginal_cost[members]
        on_bus_area = groups.bus_area
        self._area_share = np.zeros((self.case.n_bus, n_agents))
        if p.agents == "area":
            self._area_share[np.arange(self.case.n_bus), on_bus_area] = 1.0
        else:  # a unit agent's "area" is its own bus
            self._area_share[self.case.gen_bus[members], np.arange(n_agents)] = 1.0
        self._area_load_scale = self._bus_load_scale @ self._area_share  # [n_agents] MW / pu
        self._area_limits = np.stack(
            [
                np.array([pmin[u].sum() for u in groups.units]),
                np.array([self.case.gen_pmax_mw[u].sum() for u in groups.units]),
            ],
            axis=1,
        ).astype(np.float32)
        self.obs_slots = {"global": None}

    # ---- joint action <-> unit dispatch ---------------------------------------------------------
    def unit_dispatch(self, action: np.ndarray) -> np.ndarray:
        """Joint action ``[B, n_agents x slots]`` -> every unit's output ``[B, n_gen]`` [MW]
        (units that cannot be dispatched at ``Pmin``)."""
        action = np.asarray(action, dtype=float)
        p = np.broadcast_to(self._fixed_p, (action.shape[0], self.case.n_gen)).copy()
        p[:, self._dispatchable] = action[:, self._unit_entry]
        return p

    def joint_action(self, gen_p_mw: np.ndarray) -> np.ndarray:
        """Every unit's output ``[..., n_gen]`` -> the joint action ``[..., n_agents x slots]``
        (unused entries 0)."""
        gen_p_mw = np.asarray(gen_p_mw, dtype=float)
        out = np.zeros(gen_p_mw.shape[:-1] + (self.spec.action.dim,))
        out[..., self._unit_entry] = gen_p_mw[..., self._dispatchable]
        return out

    # ---- batched model --------------------------------------------------------------------------
    def observe(self, state: DispatchState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations ``[B, n_agents, obs_dim]`` (float32)."""
        if obs_mode not in (None, "global"):
            raise ValueError(f"unknown obs_mode {obs_mode!r} for opf; valid: global")
        b, n = state.t.size, len(self.spec.agents)
        try:
            time = self._time_obs.take(state.t, axis=0)
        except IndexError:
            time = self._time_features(state.t)
        obs = np.zeros((b, n, self.spec.observation.dim), dtype=np.float32)
        obs[:, :, 0:3] = time[:, None, :]
        obs[:, :, 3:5] = self._system_load.take(self._demand_index(state, self._next_two))[
            :, None, :
        ]
        obs[:, :, 5] = self._demand_at(state) * self._area_load_scale
        obs[:, :, 6:8] = self._area_limits
        obs[:, :, 8] = state.prev_imbalance_mw[:, None]
        per_slot = obs[:, :, 9:].reshape(b, n, self.n_slots, 3)
        per_slot[:, :, :, 0:2] = self._slot_const
        prev = state.prev_p_mw[:, np.maximum(self._slot_unit, 0)]  # [B, n_agents, slots]
        per_slot[:, :, :, 2] = np.where(self._slot_used, prev, 0.0)
        return obs

    def step(
        self, state: DispatchState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[DispatchState, StepOutput]:
        new_state, out = super().step(state, self.unit_dispatch(action), rng)
        return new_state, dataclasses.replace(
            out, action_applied=self.joint_action(new_state.prev_p_mw)
        )

    # ---- baselines ------------------------------------------------------------------------------
    def step_range_from_obs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every unit's step range ``(lo, hi)`` [B, n_gen] MW from the observed last outputs
        (``unit_k_prev_p_mw``); the units that are not dispatched sit at their Pmin."""
        b = obs.shape[0]
        prev = np.broadcast_to(self._fixed_p, (b, self.case.n_gen)).copy()
        per_slot = obs[:, :, 9:].reshape(b, len(self.spec.agents), self.n_slots, 3)
        used = self._slot_used
        prev[:, self._slot_unit[used]] = per_slot[:, used, 2].astype(np.float64)
        lo, hi = self.limits.step_range(prev)
        fixed = ~self._movable
        lo[:, fixed] = hi[:, fixed] = self._fixed_p[fixed]
        return lo, hi

    @property
    def initial_pmax_mw(self) -> np.ndarray:
        """Upper bounds [n_gen] MW of the initial dispatch: Pmax, Pmin for the units that are
        not dispatched."""
        return np.where(self._movable, self.case.gen_pmax_mw, self._fixed_p)

    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """The SCED of ``opf_118`` (the lambda dispatch within the step ranges, then PTDF
        redispatch) on cases up to ``DENSE_FLOW_MAX_BUSES`` buses, the lambda dispatch alone on
        larger ones, on the observed system load, as a joint action."""
        if self.case.n_bus <= DENSE_FLOW_MAX_BUSES:
            return self.joint_action(super().rule_based_action(obs))
        system_load = obs[:, 0, self._system_load_slot].astype(np.float64)
        lo, hi = self.rule_range(obs)
        return self.joint_action(sced.lambda_dispatch(self.case, system_load, lo, hi))

    def oracle_plan(self, state: DispatchState) -> np.ndarray:
        """DC-OPF dispatch of every remaining step, as joint actions ``[B, H, act_dim]``."""
        return self.joint_action(super().oracle_plan(state))

    def describe_areas(self) -> dict[str, Any]:
        """Agents and the units (positions in the case) each one dispatches."""
        return {a: u.tolist() for a, u in zip(self.spec.agents, self.groups.units, strict=True)}
