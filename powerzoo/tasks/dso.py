"""``dso``: a distribution system operator steers six flexible loads on the IEEE 33-bus feeder.

Model (single agent, 30-minute steps, 48 per episode = one calendar day)
------------------------------------------------------------------------
* Feeder: Baran & Wu's 33-bus 12.66 kV feeder (``case33bw``, tie lines open), exact AC power
  flow every step (:mod:`powerzoo.tasks.feeder`). Bus loads: the case's base load x
  ``load_scale = 0.6`` x the calendar load shape ``demand_pu`` (peak 1.0). At the head an
  on-load tap changer under its automatic voltage controller (:mod:`powerzoo.tasks.feeder_ltc`:
  +-16 taps of 0.625 %, band 1.025 +- 0.0083 p.u.) holds the head at 1.019 p.u. (tap 3);
  ``ltc=False`` fixes it at 1.00 p.u., ``ltc_action=True`` makes the tap the 13th action
  (``ltc.tap``, a position in [-16, 16], rounded) at ``ltc_wear_cost_per_operation = 0.5`` $ per
  operation (reward term ``ltc_wear``), the AVC bypassed.
* Six flexible loads (:mod:`powerzoo.devices.flexible_load`) at 0-based buses
  ``FLEX_BUSES = (13, 17, 24, 29, 31, 32)`` (1-based 14, 18, 25, 30, 32, 33: the far ends of the
  main trunk and of the laterals, where voltage sags first). Each is an aggregate of electrified
  demand (heat pumps and EV chargers of a few dozen homes) of ``flex_peak_mw = 0.22`` MW at
  ``demand_pu = 1`` (following the same calendar shape), power factor 0.85, on top of its bus's
  published load. Per step up to half of it (``flex_max_fraction = 0.5``) can be curtailed (lost,
  priced at the value of lost load) and up to half shifted, so together they can take the whole
  unit off for a step: deferred energy is paid back evenly over the next ``payback_steps = 8``
  steps (4 h), and always before the day ends.
* Sizing (measured on the 65 test days, the LTC in place): without control the flexible loads
  push the far-end buses below 0.95 p.u. at the daily peaks (0.79 p.u.-steps of
  ``voltage_violation`` a day on average, above the 0.5 p.u. budget on 24 days, 36.9 %; lowest
  voltage 0.915 p.u.); the oracle keeps the budget on every day (0.18 a day). The tap under
  its AVC does not fix it (its band's lower edge leaves 6.9 % for the drop, the peak takes 10 %;
  with the head at 1.00 p.u., ``ltc=False``, every day is over budget); a higher set point does
  (:class:`Dso`'s description), which the default task withholds from the operator. The
  lines keep headroom (largest loading 0.93 of a rating): the binding limit is the voltage band.
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
* Observation (34): time, ``demand_pu``, price, the previous step's flow (at reset: the flow
  of the first step's loads without control), per unit its bus voltage, its demand this step
  (what the fractions apply to), the payback due this step whatever the action and the backlog
  not yet paid back, and ``ltc_tap`` (:class:`Dso`'s observation table).
* Splits: train / val / test by date; stress splits ``load_stress`` (demand x 1.15),
  ``heatwave``, ``cold_snap`` (more demand) and ``price_spike`` (evening price spikes).
* Baselines (65 test days, ``benchmarks/compute_baselines.py``): random (-5,030 $/day,
  0.20 p.u. violation); rule-based = a load-forecast demand response
  (:meth:`Dso.rule_based_action`): every unit whose bus was below 0.955 p.u. curtails a share of
  its demand rising linearly with ``demand_pu`` from 0 at 0.62 (where the uncontrolled far end
  reaches 0.95 p.u. at the AVC's tap) to the 0.5 maximum at 0.91, no shifting (-1,198 $/day,
  0.056 p.u., within the budget every day); oracle = a perfect-foresight day plan checked under
  the exact env (:mod:`powerzoo.tasks.dso_plan`): per day the best of no control, the rule and
  up to four LPs on HiGHS (:func:`~powerzoo.tasks.dso_oracle.solve_day`) by (every budget kept,
  then return), each LP with voltages on LinDistFlow linearised around the exact flow of the last
  plan's day at the head voltage of the tap the AVC settled on in each step, and free to spend
  up to 80 % of the voltage budget, then three LPs whose allowance is rescaled by the violation
  the exact flow measured (-532 $/day, 0.18 p.u., within the budget every day; about 2 s a day;
  holding the band instead it took -1,147 $/day, -1,057 once linearised around its own flow).
  Idle (no control): -112 $/day, 0.79 p.u., 36.9 % of days over budget; judge return and costs.
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
)
from powerzoo.devices.tap_changer import TapChangerParams, settled_tap
from powerzoo.scratch import ROW_BLOCK
from powerzoo.tasks.base import StepOutput, state_rows
from powerzoo.tasks.dso_oracle import HORIZON
from powerzoo.tasks.dso_plan import oracle_day_plans
from powerzoo.tasks.feeder import (
    FeederTask,
    grid_cost_rows,
    row_sum,
    voltage_sq_sensitivity,
)
from powerzoo.tasks.feeder_ltc import FeederLtcParams
from powerzoo.tasks.feeder_observation import SYSTEM_FIELDS, TIME_PRICE_FIELDS
from powerzoo.tasks.feeder_rules import load_relief_fraction
from powerzoo.tasks.spec import TaskSpec, VectorSpec, cmdp_fields
from powerzoo.tasks.transmission import OVERLOAD_PRICE_PER_MWH

__all__ = ["Dso", "DsoParams", "DsoState", "FLEX_BUSES"]

STEP_MINUTES = 30
CASE = "case33bw"
FLEX_BUSES = (13, 17, 24, 29, 31, 32)  # 0-based; the far ends of the trunk and the laterals
_TAPS = float(TapChangerParams().n_steps)  # the head's tap range, +-16 steps
# the rule's demand response: relief from demand_pu 0.62, where the uncontrolled far end reaches
# 0.95 p.u. at the AVC's tap (a planning flow of the default feeder), to full curtailment at
# 0.91, the slope that holds the far end near the band's edge at the peaks
RULE_DEMAND_PU = (0.62, 0.91)
RULE_V_GATE_PU = 0.955  # units whose bus holds this (last step) are served in full


@dataclasses.dataclass(frozen=True)
class DsoParams(FeederLtcParams):
    """The numbers of a ``dso`` episode; each is a task keyword (the head's tap changer:
    :class:`~powerzoo.tasks.feeder_ltc.FeederLtcParams`)."""

    # bus loads = the case's base load x this x demand_pu: the feeder at 60 % of its design load
    load_scale: float = 0.6
    # flexible demand of each unit at demand_pu = 1 (MW), on top of its bus's published load:
    # heat pumps and EV chargers of a few dozen homes each
    flex_peak_mw: float = 0.22
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
    # the head's tap position an action (the AVC bypassed), each operation charged
    # ltc_wear_cost_per_operation
    ltc_action: bool = False

    def __post_init__(self) -> None:
        check_market(self.market)
        if self.ltc_action and not self.ltc:
            raise ValueError("ltc_action needs the tap changer (ltc=True)")


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
    ltc_tap: np.ndarray  # [B] the head's tap position (int)
    ltc_timer: np.ndarray  # [B] steps the regulated voltage has been outside the AVC band
    ltc_operations: np.ndarray  # [B] tap operations since reset


class Dso(FeederTask):
    """Flexible-load control on the 33-bus feeder against losses, lost load and voltage
    limits.

    ## Description
    A distribution system operator steers six flexible loads on Baran & Wu's 33-bus 12.66 kV feeder
    (``case33bw``), with one exact AC power flow per 30-minute step. Bus loads are the case's base
    load x ``load_scale`` (0.6) x the calendar load shape; each flexible load (0.22 MW at peak,
    power factor 0.85: heat pumps and EV chargers) sits at a far end of the trunk or a lateral
    (1-based buses 14, 18, 25, 30, 32, 33). The head's on-load tap changer, under its automatic
    voltage controller, holds the head at 1.019 p.u.; still the far ends leave the band at the
    daily peaks, over the budget on 37 % of the test days.

    The set point binds the problem, not the feeder: an operator who may move the tap
    (``ltc_action=True``) and holds it at 8 (head 1.05 p.u.; the feeder has no generation to
    push a bus above the head) keeps every test day within the budget at about the cost of no
    control (-107 $/day, the oracle -532). The default task withholds the tap: it poses load
    control under an AVC set point the operator does not own.

    ## Action
    12 entries, ``[load_k.curtail, load_k.shift]`` for k = 0..5, fractions of each unit's current
    demand in [0, 0.5]. Curtailed energy is lost; shifted energy is paid back evenly over the next 8
    steps (4 h), always before the day ends (shifting on the last step is refused). With
    ``ltc_action=True`` a 13th, ``ltc.tap``: the head's tap position in [-16, 16].

    ## Observation
    34 entries: time, ``demand_pu``, price, the previous step's flow (``v_min_pu``, ``v_max_pu``,
    ``p_loss_mw``, ``feeder_p_mw``), per unit its bus voltage, its demand this step, the payback
    due next step and the backlog of deferred energy, and the head's tap position.

    ## Reward
    $ per step: ``-(price x losses x dt + VOLL x curtailed MWh)`` with the value of lost load
    ``VOLL = 1,000 $/MWh``; shifting is free in the reward. Terms ``[loss_cost,
    curtailment_cost]`` (and ``ltc_wear``, 0.5 $ per tap operation, with ``ltc_action``). The
    ``penalized`` preset also charges 1,000 $ per p.u. of voltage violation and 2,000 $ per MVAh.

    ## Costs
    ``voltage_violation`` (p.u. outside [0.95, 1.05] summed over buses, per step) and
    ``thermal_overload`` (MVAh above the line ratings, summed over branches).

    ## Starting state
    No backlog; the tap where the AVC settles (3); grid fields from the flow of the first step's
    loads without control.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``load_scale``, ``flex_peak_mw``, ``flex_max_fraction``, ``payback_steps``,
    ``flex_power_factor``, ``voll_per_mwh``; ``penalty_per_pu`` and ``penalty_per_mvah`` weight the
    ``penalized`` preset; ``market`` picks the price model (``powerzoo.data.markets``); ``ltc``,
    ``ltc_action``, ``ltc_band_centre_pu``, ``ltc_bandwidth_pu``, ``ltc_ldc_r_pu``,
    ``ltc_ldc_x_pu``, ``ltc_wear_cost_per_operation`` (:mod:`powerzoo.tasks.feeder_ltc`).

    ## Baselines
    Random; rule-based = a load-forecast demand response: units whose bus is below 0.955 p.u.
    curtail a share rising with ``demand_pu`` from 0.62 to 0.91 (-1,198 $/day, within the budget
    every test day); oracle = a perfect-foresight day plan checked under the exact env, the best
    of no control, the rule and LPs on HiGHS with voltages on LinDistFlow around the exact flow
    (the AVC's tap in the loop), spending part of the voltage budget (-532 $/day, within the
    budget every test day). Both pay for lost load to hold the band, so no control (idle,
    -112 $/day, over budget on 37 % of the days) earns more on the objective: judge a policy on
    its return and its costs.
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
        self._s_tap = obs.slot("ltc_tap")
        self._s_v = obs.slot(*_unit_names("v_pu"))

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
            ("ltc_tap", "tap steps of 0.625 %", -_TAPS, _TAPS, -_TAPS, _TAPS),
        )
        actions = tuple(f"load_{k}.{kind}" for k in range(_N) for kind in ("curtail", "shift"))
        units, low = ("fraction of the unit's demand",) * (2 * _N), (0.0,) * (2 * _N)
        high = (p.flex_max_fraction,) * (2 * _N)
        idle = (0.0,) * (2 * _N)
        terms = ("loss_cost", "curtailment_cost")
        if p.ltc_action:
            actions += ("ltc.tap",)
            units += ("tap position (steps of 0.625 %, rounded)",)
            low, high = low + (-_TAPS,), high + (_TAPS,)
            idle += (float(settled_tap(p.tap_changer())),)  # type: ignore[arg-type]
            terms += ("ltc_wear",)
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
            action=VectorSpec(names=actions, units=units, low=low, high=high),
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            splits=calendar.BASE_SPLITS + ("load_stress", "heatwave", "cold_snap", "price_spike"),
            reward_terms=terms,
            reward_doc=(
                f"-(price x network losses x dt + {p.voll_per_mwh:g} $/MWh x curtailed energy) "
                "per step ($); "
                f"shifted energy is paid back within {p.payback_steps * STEP_MINUTES / 60:g} h at "
                "no cost"
                + (
                    f"; {p.ltc_wear_cost_per_operation:g} $ per tap operation"
                    if p.ltc_action
                    else ""
                )
            ),
            **cmdp_fields(grid_cost_rows(0.5, 0.25, p.penalty_per_pu, p.penalty_per_mvah)),
            baselines=("random", "rule_based", "oracle", "idle"),
            idle_action=idle,
            idle_doc=(
                "no control: every flexible load served as it comes (all fractions 0)"
                + ("; the tap held where the AVC starts it" if p.ltc_action else "")
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
        flow, ltc = self.grid_reset(p, q)
        return DsoState(
            day_id,
            t,
            flex.due_mwh,
            flex.backlog_mwh,
            self._grid_obs(flow),
            flow.v_complex_pu,
            ltc.tap,
            ltc.timer,
            ltc.operations,
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
        obs[:, self._s_tap] = state.ltc_tap
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
        target = action[:, 2 * _N] if self.params.ltc_action else None
        flow, ltc, ops = self.grid_step(state, p, q, target)
        curtailed = row_sum(flex.curtailed_mwh)
        b = state.t.size
        terms = np.empty((b, len(self.spec.reward_terms)))
        terms[:, 0] = -(price * flow.p_loss_mw * dt_h)
        terms[:, 1] = -(self.params.voll_per_mwh * curtailed)
        applied = np.empty_like(action)
        applied[:, self._curtail] = flex.curtail_fraction
        applied[:, self._shift] = flex.shift_fraction
        if target is not None:
            terms[:, 2] = -(self.params.ltc_wear_cost_per_operation * ops)
            applied[:, 2 * _N] = ltc.tap
        new_state = DsoState(
            state.day_id,
            state.t + 1,
            flex.state.due_mwh,
            flex.state.backlog_mwh,
            self._grid_obs(flow),
            flow.v_complex_pu,
            ltc.tap,
            ltc.timer,
            ltc.operations,
        )
        return new_state, self.feeder_output(
            flow,
            row_sum(terms),
            terms,
            flow.costs,
            applied,
            price_per_mwh=price,
            demand_pu=demand,
            net_load_mw=row_sum(p),
            curtailed_mwh=curtailed,
            flex_p_mw=flex.p_mw,
            flex_curtailed_mwh=flex.curtailed_mwh,
            flex_shifted_mwh=flex.shifted_mwh,
            flex_payback_mwh=flex.payback_mwh,
            flex_backlog_mwh=flex.state.backlog_mwh,
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Load-forecast demand response
        (:func:`powerzoo.tasks.feeder_rules.load_relief_fraction`): each unit whose bus was
        below ``RULE_V_GATE_PU`` (0.955 p.u.) last step curtails ``flex_max_fraction`` x
        (demand_pu - 0.62) / (0.91 - 0.62) of its demand, clipped to [0,
        ``flex_max_fraction``]; no shifting (the peaks last longer than the payback); a tap in
        the action is held where it is."""
        obs = obs.astype(np.float64)
        act = np.zeros((obs.shape[0], self.spec.action.dim))
        relief = load_relief_fraction(
            obs[:, self._s_demand], obs[:, self._s_v], *RULE_DEMAND_PU, RULE_V_GATE_PU
        )
        act[:, self._curtail] = self.params.flex_max_fraction * relief
        if self.params.ltc_action:
            act[:, 2 * _N] = obs[:, self._s_tap]
        return act

    def oracle_plan(self, state: DsoState) -> np.ndarray:
        """Perfect-foresight curtail / shift fractions [B, H, 12] (13 with the tap as an
        action, held where it is), checked under the exact env
        (:func:`powerzoo.tasks.dso_plan.oracle_day_plans`).

        Per episode the best of no control, the rule and up to four LPs on HiGHS
        (:func:`powerzoo.tasks.dso_oracle.solve_day`) by (every budget kept, then return), each
        LP linearised on LinDistFlow around the exact flow of the last plan's day at the head
        voltage of the tap the AVC settled on in each step (the first: the day without
        control), free to spend up to 80 % of the voltage budget, then three more whose allowance
        is rescaled by the violation the exact flow measured. The budgets are those of the
        rest of the day (what was spent before the state's step is not known to it). On the 65
        test days: -532 $/day, 0.18 p.u. of voltage violation, within the budget every day, about
        2 s a day.
        """
        plans = np.zeros((state.t.size, HORIZON, self.spec.action.dim))
        sens = voltage_sq_sensitivity(self.grid.case, self.flex_buses, self.flex.tan_phi)
        dt_h = self.spec.dt_h
        k = self.params.payback_steps
        for t0 in np.unique(state.t[state.t < HORIZON]):
            rows = np.flatnonzero(state.t == t0)
            days = state.day_id[rows, None]
            demand = self.grid.demand_pu.take(self.flat_index(days, np.arange(t0, HORIZON)))
            base = demand[:, :, None] * self.flex_peak_mw  # [rows, T, 6] MW
            due_mw = np.zeros_like(base)  # payback already scheduled (MW), slot j = step t0 + j
            m = min(k, HORIZON - int(t0))
            due_mw[:, :m] = state.due_mwh[rows, :m] / dt_h
            best = oracle_day_plans(
                self, state_rows(state, rows), base, due_mw, sens, (self._curtail, self._shift)
            )
            plans[rows] = best.plan
        return plans
