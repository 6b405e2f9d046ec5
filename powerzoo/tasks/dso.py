"""``dso``: a distribution system operator steers six flexible loads on the IEEE 33-bus feeder.

Model (single agent, 30-minute steps, 48 per episode = one calendar day)
------------------------------------------------------------------------
* Feeder: Baran & Wu's 33-bus 12.66 kV feeder (``case33bw``, tie lines open), exact AC power
  flow every step (:mod:`powerzoo.tasks.feeder`). Bus loads: the case's base load x
  ``load_scale = 0.55`` x the calendar load shape ``demand_pu`` (peak 1.0).
* Six flexible loads (:mod:`powerzoo.devices.flexible_load`) at 0-based buses
  ``FLEX_BUSES = (13, 17, 24, 29, 31, 32)`` (1-based 14, 18, 25, 30, 32, 33: the far ends of the
  main trunk and of the laterals, where voltage sags first). Each is an aggregate of flexible
  commercial / residential demand of ``flex_peak_mw = 0.12`` MW at ``demand_pu = 1`` (following
  the same calendar shape), power factor 0.85, on top of its bus's published load. Per step up
  to half of it (``flex_max_fraction = 0.5``) can be curtailed (lost, priced at the value of
  lost load) and up to half shifted, so together they can take the whole unit off for a step:
  deferred energy is paid back evenly over the next ``payback_steps = 8`` steps (4 h), and
  always before the day ends.
* Sizing (measured on the 65 test days): without control the flexible loads push the far-end
  buses below 0.95 p.u. at the daily peaks on 61 of them (0.60 p.u.-steps of
  ``voltage_violation`` per day on average, above the 0.5 p.u. budget on 22 days; under
  ``load_stress`` on all 65, 2.16 a day); the oracle's plan brings that to 0.005 (7 days, lowest
  voltage 0.945 p.u., within the budget on every day). So the controls matter, and they cost:
  curtailment is paid at the value of lost load, shifting only moves the peak when it is short.
  The lines keep headroom at these loads (largest loading 0.67 of a rating on the test days, 0.78
  under ``load_stress``): the binding limit of this task is the voltage band, and
  ``thermal_overload`` only fires far beyond the feeder's design load. (The load scale was 0.5 on
  the earlier load shape, whose winter peaks left the band on 76 of 77 test days; on the current
  shape 0.5 left it on 47 of 65 and within the budget on average.)
* Action (12, physical fractions of each unit's current demand): ``[load_k.curtail,
  load_k.shift]`` for k = 0..5, each in ``[0, 0.5]``. Shifting on the last step is refused (the
  energy could not come back within the day); ``info["action_applied"]`` shows what was applied.
* Reward ($ per step): ``-(price x losses x dt + VOLL x curtailed MWh)`` with the value of lost
  load ``VOLL = 1,000 $/MWh`` (25x the mean price), so curtailing everything never pays; shifting
  is free in the reward (its price is the payback it brings back later). Terms:
  ``[loss_cost, curtailment_cost]`` (both <= 0).
* Costs (CMDP, both selected): ``voltage_violation`` (p.u. outside [0.95, 1.05] summed over
  buses, per step), ``thermal_overload`` (MVAh: overload energy above the line ratings summed
  over branches, ``sum_k max(|S_k| - S_rated_k, 0) x dt``); per-episode thresholds 0.5 p.u. and
  0.25 MVAh. Reward presets: ``"objective"`` (the reward) and ``"penalized"`` (minus 1,000 $ per
  p.u. of voltage violation and 2,000 $ per MVAh of overload).
* Observation (33): ``[hour_sin, hour_cos, time_remaining, demand_pu, price_per_mwh, v_min_pu,
  v_max_pu, p_loss_mw, feeder_p_mw, load_k_v_pu (6), load_k_base_mw (6), load_k_due_next_mwh (6),
  load_k_backlog_mwh (6)]``. Grid fields (voltages, losses, head power) are from the previous
  step's power flow (at reset: the flow of the first step's loads without control);
  ``load_k_base_mw`` is the unit's demand this step (what the fractions apply to), ``due_next``
  the payback it draws this step whatever the action, ``backlog`` all deferred energy not yet
  paid back.
* Splits: train / val / test by date, stress splits ``load_stress`` (demand x 1.15),
  ``heatwave`` (May-September heat events, more demand), ``cold_snap`` (December-March cold
  events, more heating demand) and ``price_spike`` (evening price spikes).
* Baselines (65 test days, ``benchmarks/compute_baselines.py``): random (-2,748 $/day,
  0.21 p.u. violation); rule-based = no control (all fractions 0: -62 $/day, 0.60 p.u., over the
  budget on 22 days); oracle =
  a perfect-foresight day plan, one LP on HiGHS (:func:`_solve_day`) with voltages on LinDistFlow
  linearised around the exact flow of the day's uncontrolled loads, then applied under the exact
  flow (-919 $/day, 0.005 p.u., within the budget every day). The oracle pays lost load to keep
  the band, so the unconstrained no-control return lies above it (plain normalised score 1.47;
  on the budget-aware reading of :mod:`powerzoo.benchmarks.cmdp_score`, 0.92): judge a policy
  on its return *and* its costs. Idle (``spec.idle_action``: the operator doing nothing) is the
  same action as the rule, so its row is the rule's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.markets import DEFAULT_MARKET, check_market
from powerzoo.devices.flexible_load import (
    FlexibleLoadParams,
    FlexibleLoadState,
    flexible_load_reset,
    flexible_load_step,
    payback_matrix,
)
from powerzoo.physics.highs import new_highs
from powerzoo.scratch import ROW_BLOCK
from powerzoo.tasks.base import StepOutput
from powerzoo.tasks.feeder import (
    FeederTask,
    add_voltage_band,
    grid_cost_rows,
    unit_variables,
    voltage_sq_sensitivity,
)
from powerzoo.tasks.feeder_observation import SYSTEM_FIELDS, TIME_PRICE_FIELDS
from powerzoo.tasks.spec import TaskSpec, VectorSpec, cmdp_fields
from powerzoo.tasks.transmission import OVERLOAD_PRICE_PER_MWH

__all__ = ["Dso", "DsoParams", "DsoState", "FLEX_BUSES"]

HORIZON = 48
STEP_MINUTES = 30
CASE = "case33bw"
FLEX_BUSES = (13, 17, 24, 29, 31, 32)  # 0-based; the far ends of the trunk and the laterals


@dataclasses.dataclass(frozen=True)
class DsoParams:
    """The numbers of a ``dso`` episode; each is a task keyword."""

    # bus loads = the case's base load x this x demand_pu: the feeder at 55 % of its design load
    load_scale: float = 0.55
    # flexible demand of each unit at demand_pu = 1 (MW), on top of its bus's published load
    flex_peak_mw: float = 0.12
    # curtail_max and shift_max of every unit (fraction of its demand per step)
    flex_max_fraction: float = 0.5
    # steps over which deferred energy is paid back evenly (8 x 30 min = 4 h)
    payback_steps: int = 8
    # power factor of the flexible demand (commercial / residential aggregate)
    flex_power_factor: float = 0.85
    # value of lost load ($/MWh), 25x the mean price: curtailing everything never pays
    voll_per_mwh: float = 1000.0
    # "penalized" preset: $ per p.u. of voltage violation
    penalty_per_pu: float = 1000.0
    # "penalized" preset: $ per MVAh of thermal overload (the transmission tasks' overload price)
    penalty_per_mvah: float = OVERLOAD_PRICE_PER_MWH
    # the price model (powerzoo.data.markets.MARKETS)
    market: str = DEFAULT_MARKET

    def __post_init__(self) -> None:
        check_market(self.market)


_N = len(FLEX_BUSES)
_GRID_FIELDS = ("v_min_pu", "v_max_pu", "p_loss_mw", "feeder_p_mw")


def _unit_names(kind: str) -> tuple[str, ...]:
    return tuple(f"load_{k}_{kind}" for k in range(_N))


def _unit_rows(kind: str, unit: str, *bounds: float) -> tuple:
    """One observation row per flexible unit: (name, unit, low, high, nominal_low,
    nominal_high)."""
    return tuple((name, unit, *bounds) for name in _unit_names(kind))


@dataclasses.dataclass
class DsoState:
    """Batched state; every field has leading axis ``B``."""

    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    due_mwh: np.ndarray  # [B, payback_steps, 6] payback schedule of the flexible loads
    backlog_mwh: np.ndarray  # [B, 6] deferred energy not yet paid back
    grid_obs: (
        np.ndarray
    )  # [B, 4 + 6] last flow: v_min, v_max, p_loss, feeder_p, v at the flexible buses
    v_complex_pu: np.ndarray  # [B, n_bus] last flow's voltages (warm start)


class Dso(FeederTask):
    """Flexible-load control on the 33-bus feeder against losses, lost load and voltage
    limits.

    ## Description
    A distribution system operator steers six flexible loads on Baran & Wu's 33-bus 12.66 kV feeder
    (``case33bw``), with one exact AC power flow per 30-minute step. Bus loads are the case's base
    load x ``load_scale`` (0.55) x the calendar load shape; each flexible load (0.12 MW at peak,
    power factor 0.85) sits at a far end of the trunk or a lateral (1-based buses 14, 18, 25, 30,
    32, 33), where the voltage sags first. Without control the far-end buses leave the band at the
    daily peaks on most test days.

    ## Action
    12 entries, ``[load_k.curtail, load_k.shift]`` for k = 0..5, fractions of each unit's current
    demand in [0, 0.5]. Curtailed energy is lost; shifted energy is paid back evenly over the next 8
    steps (4 h), always before the day ends (shifting on the last step is refused).

    ## Observation
    33 entries: time, ``demand_pu``, price, the previous step's flow (``v_min_pu``, ``v_max_pu``,
    ``p_loss_mw``, ``feeder_p_mw``) and per unit its bus voltage, its demand this step, the payback
    due next step and the backlog of deferred energy.

    ## Reward
    $ per step: ``-(price x losses x dt + VOLL x curtailed MWh)`` with the value of lost load
    ``VOLL = 1,000 $/MWh``; shifting is free in the reward. Terms ``[loss_cost,
    curtailment_cost]``. The ``penalized`` preset also charges 1,000 $ per p.u. of voltage
    violation and 2,000 $ per MVAh of overload.

    ## Costs
    ``voltage_violation`` (p.u. outside [0.95, 1.05] summed over buses, per step) and
    ``thermal_overload`` (MVAh above the line ratings, summed over branches).

    ## Starting state
    No backlog; grid fields from the flow of the first step's loads without control.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``load_scale``, ``flex_peak_mw``, ``flex_max_fraction``, ``payback_steps``,
    ``flex_power_factor``, ``voll_per_mwh``; ``penalty_per_pu`` and ``penalty_per_mvah`` weight the
    ``penalized`` preset; ``market`` picks the price model (``powerzoo.data.markets``).

    ## Baselines
    Random; rule-based = no control (all fractions 0); oracle = a perfect-foresight day plan, one
    LP on HiGHS with voltages on LinDistFlow around the exact flow, applied under the exact flow.
    The oracle pays for lost load to hold the band, so the no-control rule earns more on the
    objective: judge a policy on its return and its costs.
    """

    step_block_rows = ROW_BLOCK  # the power flow's [n_bus, rows] work arrays stay in the caches

    task_id = "dso"
    Params = DsoParams
    case_name = CASE

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        super().__init__(split, **task_kwargs)
        p = self.params
        self.flex = FlexibleLoadParams(
            curtail_max=p.flex_max_fraction,
            shift_max=p.flex_max_fraction,
            power_factor=p.flex_power_factor,
            payback_steps=p.payback_steps,
            n_units=_N,
        )
        self.flex_buses = np.asarray(FLEX_BUSES)
        self.flex_peak_mw = np.full(_N, p.flex_peak_mw)
        obs = self.spec.observation
        self._obs_dim = obs.dim
        self._s_time = obs.slot("hour_sin", "hour_cos", "time_remaining")
        self._s_demand, self._s_price = obs.slot("demand_pu"), obs.slot("price_per_mwh")
        self._s_grid = obs.slot(*_GRID_FIELDS, *_unit_names("v_pu"))
        self._s_base = obs.slot(*_unit_names("base_mw"))
        self._s_due = obs.slot(*_unit_names("due_next_mwh"))
        self._s_backlog = obs.slot(*_unit_names("backlog_mwh"))
        if not (isinstance(self._s_grid, slice) and self._s_grid.step is None):
            raise AssertionError("grid fields must be contiguous in the dso observation")
        self._curtail, self._shift = slice(0, 2 * _N, 2), slice(1, 2 * _N, 2)

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def spec_for(cls, params: DsoParams) -> TaskSpec:
        p = params
        flex_hi = p.flex_peak_mw * 1.5  # demand_pu peaks at 1.0 (1.15 in load_stress)
        due_hi = flex_hi * p.flex_max_fraction * STEP_MINUTES / 60.0
        backlog_hi = due_hi * p.payback_steps  # every deferred MWh due at once bounds any slot
        _, feeder_p, v_min, v_max = SYSTEM_FIELDS
        rows = (
            *TIME_PRICE_FIELDS[:3],
            ("demand_pu", "p.u. of annual peak", 0.0, 2.0, 0.0, 1.0),
            TIME_PRICE_FIELDS[3],
            v_min,
            v_max,
            ("p_loss_mw", "MW", 0.0, 2.0, 0.0, 0.2),
            feeder_p,
            *_unit_rows("v_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
            *_unit_rows("base_mw", "MW", 0.0, flex_hi, 0.0, p.flex_peak_mw),
            *_unit_rows("due_next_mwh", "MWh", 0.0, backlog_hi, 0.0, due_hi),
            *_unit_rows("backlog_mwh", "MWh", 0.0, backlog_hi, 0.0, due_hi * p.payback_steps),
        )
        actions = tuple(f"load_{k}.{kind}" for k in range(_N) for kind in ("curtail", "shift"))
        return TaskSpec(
            task_id=cls.task_id,
            description=(
                "A distribution operator curtails and shifts six flexible loads on the IEEE "
                "33-bus feeder "
                "(exact AC power flow) to keep voltages in [0.95, 1.05] p.u.; reward is minus "
                "the cost of "
                "losses and of lost load."
            ),
            agents=("agent",),
            observation=VectorSpec.from_rows(rows),
            action=VectorSpec(
                names=actions,
                units=("fraction of the unit's demand",) * (2 * _N),
                low=(0.0,) * (2 * _N),
                high=(p.flex_max_fraction,) * (2 * _N),
            ),
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            splits=calendar.BASE_SPLITS + ("load_stress", "heatwave", "cold_snap", "price_spike"),
            reward_terms=("loss_cost", "curtailment_cost"),
            reward_doc=(
                f"-(price x network losses x dt + {p.voll_per_mwh:g} $/MWh x curtailed energy) "
                "per step ($); "
                f"shifted energy is paid back within {p.payback_steps * STEP_MINUTES / 60:g} h at "
                "no cost"
            ),
            **cmdp_fields(grid_cost_rows(0.5, 0.25, p.penalty_per_pu, p.penalty_per_mvah)),
            baselines=("random", "rule_based", "oracle", "idle"),
            idle_action=(0.0,) * (2 * _N),
            idle_doc=(
                "every flexible load served as it comes (all fractions 0), the same "
                "action as the rule-based baseline"
            ),
            forecast_series=("demand_pu", "price_per_mwh"),
            gym_id="powerzoo/DSO-v0",
        )

    # ---- batched model ----------------------------------------------------------------------
    def _flex_base_mw(self, demand: np.ndarray) -> np.ndarray:
        """Demand of each flexible unit [B, 6] at system demand ``demand`` [B]."""
        return demand[:, None] * self.flex_peak_mw

    def _grid_obs(self, flow: Any) -> np.ndarray:
        info = flow.info
        out = np.empty((flow.vm_pu.shape[0], len(_GRID_FIELDS) + _N))
        for i, key in enumerate(_GRID_FIELDS):
            out[:, i] = info[key]
        out[:, len(_GRID_FIELDS) :] = flow.vm_pu[:, self.flex_buses]
        return out

    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> DsoState:
        day_id, t, flat = self.first_step(day_id)
        b = day_id.size
        flex = flexible_load_reset(self.flex, b)
        demand = self.grid.demand_pu.take(flat)
        p, q = self.grid.bus_loads(demand)
        base = self._flex_base_mw(demand)
        p[:, self.flex_buses] += base
        q[:, self.flex_buses] += base * self.flex.tan_phi
        flow = self.grid.solve(p, q)
        return DsoState(
            day_id, t, flex.due_mwh, flex.backlog_mwh, self._grid_obs(flow), flow.v_complex_pu
        )

    def observe(self, state: DsoState) -> np.ndarray:
        flat = self.flat_index(state.day_id, state.t)
        demand = self.grid.demand_pu.take(flat)
        obs = np.empty((state.t.size, self._obs_dim), dtype=np.float32)
        obs[:, self._s_time] = self.time_obs(state.t)
        obs[:, self._s_demand] = demand
        obs[:, self._s_price] = self.grid.price_per_mwh.take(flat)
        obs[:, self._s_grid] = state.grid_obs
        obs[:, self._s_base] = self._flex_base_mw(demand)
        obs[:, self._s_due] = state.due_mwh[:, 0]
        obs[:, self._s_backlog] = state.backlog_mwh
        return obs

    def step(
        self, state: DsoState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[DsoState, StepOutput]:
        dt_h = self.spec.dt_h
        flat = self.flat_index(state.day_id, state.t)
        demand = self.grid.demand_pu.take(flat)
        price = self.grid.price_per_mwh.take(flat)
        flex = flexible_load_step(
            self.flex,
            FlexibleLoadState(state.due_mwh, state.backlog_mwh),
            self._flex_base_mw(demand),
            action[:, self._curtail],
            action[:, self._shift],
            dt_h,
            HORIZON - 1 - state.t,
        )
        p, q = self.grid.bus_loads(demand)
        p[:, self.flex_buses] += flex.p_mw
        q[:, self.flex_buses] += flex.q_mvar
        flow = self.grid.solve(p, q, state.v_complex_pu)
        curtailed = flex.curtailed_mwh.sum(axis=1)
        b = state.t.size
        terms = np.empty((b, 2))
        terms[:, 0] = -(price * flow.p_loss_mw * dt_h)
        terms[:, 1] = -(self.params.voll_per_mwh * curtailed)
        applied = np.empty_like(action)
        applied[:, self._curtail] = flex.curtail_fraction
        applied[:, self._shift] = flex.shift_fraction
        new_state = DsoState(
            state.day_id,
            state.t + 1,
            flex.state.due_mwh,
            flex.state.backlog_mwh,
            self._grid_obs(flow),
            flow.v_complex_pu,
        )
        return new_state, self.feeder_output(
            flow,
            terms.sum(axis=1),
            terms,
            flow.costs,
            applied,
            price_per_mwh=price,
            demand_pu=demand,
            net_load_mw=p.sum(axis=1),
            curtailed_mwh=curtailed,
            flex_p_mw=flex.p_mw,
            flex_curtailed_mwh=flex.curtailed_mwh,
            flex_shifted_mwh=flex.shifted_mwh,
            flex_payback_mwh=flex.payback_mwh,
            flex_backlog_mwh=flex.state.backlog_mwh,
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """No control: serve every load as it comes (all fractions 0)."""
        return np.zeros((obs.shape[0], self.spec.action.dim))

    def oracle_plan(self, state: DsoState) -> np.ndarray:
        """Perfect-foresight curtail / shift fractions [B, H, 12]: one LP per episode
        (:func:`_solve_day`).

        Voltages on LinDistFlow, linearised around the exact flow of the day's loads without
        control (perfect foresight of the loads); the plan is applied and scored under the exact
        flow.
        """
        plans = np.zeros((state.t.size, HORIZON, self.spec.action.dim))
        sens = voltage_sq_sensitivity(self.grid.case, self.flex_buses, self.flex.tan_phi)
        dt_h = self.spec.dt_h
        for row in range(state.t.size):
            t0, flat = self.rest_of_day(state, row)
            demand = self.grid.demand_pu.take(flat)
            base = self._flex_base_mw(demand)
            due_mw = np.zeros_like(base)  # payback already scheduled (MW), slot j = step t0 + j
            k = min(self.params.payback_steps, base.shape[0])
            due_mw[:k] = state.due_mwh[row, :k] / dt_h
            p, q = self.grid.bus_loads(demand)
            p[:, self.flex_buses] += base + due_mw
            q[:, self.flex_buses] += (base + due_mw) * self.flex.tan_phi
            v2_base = self.grid.solve(p, q).vm_pu ** 2
            curtail, shift = _solve_day(self.params, base, v2_base, sens, t0, dt_h)
            plans[row, t0:, self._curtail] = curtail
            plans[row, t0:, self._shift] = shift
        return plans


def _solve_day(
    params: DsoParams, base: np.ndarray, v2_base: np.ndarray, sens: np.ndarray, t0: int, dt_h: float
) -> tuple[np.ndarray, np.ndarray]:
    """Curtail and shift fractions [T, 6] of the day plan (LP on HiGHS via highspy).

    Minimise ``VOLL x curtailed MWh + 0.01 $/MWh x shifted MWh + voltage penalty`` with fractions
    in ``[0, flex_max_fraction]`` (0.5 by default, the env's action bound; no shift on the last
    step). The flexible units' demand changes by
    ``dp = -base (c + s) + W (base s)`` (payback matrix ``W``), the squared voltages by
    ``dp @ sens`` (:func:`powerzoo.tasks.feeder.add_voltage_band`). Losses are not in the LP
    (LinDistFlow is lossless); the plan pays them under the exact flow.
    """
    import highspy

    t, n = base.shape
    h = new_highs()
    top = np.full(n, params.flex_max_fraction)
    curtail = unit_variables(h, t, np.zeros(n), top)
    shift = unit_variables(h, t - 1, np.zeros(n), top) if t > 1 else None
    dp = -base * curtail
    if shift is not None:
        shifted = base[:-1] * shift  # MW deferred at steps 0..T-2
        dp[:-1] = dp[:-1] - shifted
        dp = dp + payback_matrix(t0, HORIZON, params.payback_steps)[:, :-1] @ shifted
    bound = (1.2 * base.max(axis=0) @ np.abs(sens))[None, :] + np.zeros_like(v2_base)
    penalty = add_voltage_band(h, v2_base, dp @ sens, bound)
    cost = params.voll_per_mwh * dt_h * h.qsum((base * curtail).ravel())
    if shift is not None:
        cost = cost + 0.01 * dt_h * h.qsum((base[:-1] * shift).ravel())
    h.minimize(cost if penalty is None else cost + penalty)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"dso oracle LP failed: {h.modelStatusToString(h.getModelStatus())}")
    shift_plan = np.zeros((t, n))
    if shift is not None:
        shift_plan[:-1] = h.vals(shift)
    return h.vals(curtail), shift_plan
