"""``volt_var_123``: volt-var control of the IEEE 123-node feeder with rooftop PV.

The feeder, its devices and the flow are in :mod:`.grid`, the parameters and spaces in
:mod:`.spec`, the rule in :mod:`.rule`, the oracle in :mod:`.oracle`; the figures are in the
class docstring.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from powerzoo.physics.unbalanced import load_feeder
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.feeder import time_features
from powerzoo.tasks.spec import TaskSpec
from powerzoo.tasks.volt_var.grid import GridReading, VoltVarFeeder
from powerzoo.tasks.volt_var.oracle import DayInputs, plan_day
from powerzoo.tasks.volt_var.rule import capcontrol, regcontrol_taps
from powerzoo.tasks.volt_var.spec import (
    CAPACITORS,
    HORIZON,
    PV_LOADS,
    REGULATORS,
    TAP_STEPS,
    VoltVarParams,
    volt_var_spec,
)

__all__ = ["VoltVar123", "VoltVarState"]

_NR, _NC, _NQ = len(REGULATORS), len(CAPACITORS), len(PV_LOADS)
NONCONVERGED_PU_PER_BUS_PHASE = 0.1  # a row whose flow fails: every bus-phase 0.1 p.u. out
PV_AWAKE_CF = 0.05  # inverters hold their reactive limit while the array gives >= 5 % of rating


@functools.lru_cache(maxsize=1)
def feeder_model() -> VoltVarFeeder:
    """The task's feeder (built once per process, shared: read-only)."""
    return VoltVarFeeder(load_feeder("ieee123"), PV_LOADS)


def _grid_obs(reading: GridReading) -> np.ndarray:
    """[B, 52]: regulated voltages, capacitor voltages, phase extremes, losses, head, PV."""
    return np.concatenate(
        [
            reading.regulated_v,
            reading.capacitor_v_pu,
            reading.v_min_phase_pu,
            reading.v_max_phase_pu,
            reading.losses_kw[:, None],
            reading.head_kw[:, None],
            reading.head_kvar[:, None],
            reading.pv_v_pu,
        ],
        axis=1,
    )


def _rows(reading: GridReading, rows: slice) -> GridReading:
    return GridReading(
        **{f.name: getattr(reading, f.name)[rows] for f in dataclasses.fields(reading)}
    )


@dataclasses.dataclass
class VoltVarState:
    """Batched state; every field has leading axis ``B``."""

    day_id: np.ndarray  # [B] split day of the episode
    t: np.ndarray  # [B] steps elapsed
    taps: np.ndarray  # [B, 7] tap positions in force
    cap_on: np.ndarray  # [B, 4] capacitor states in force (1 in service)
    q_frac: np.ndarray  # [B, 32] PV reactive power in force (fraction of each limit)
    grid_obs: np.ndarray  # [B, 52] flow of this step's loads and PV under the settings in force


class VoltVar123(Task):
    """Volt-var control of the IEEE 123-node feeder with rooftop PV: taps, capacitors, inverters.

    ## Description
    The IEEE 123-node test feeder (4.16 kV, unbalanced: single-, two- and three-phase laterals,
    wye and delta loads of constant power, current and impedance) on the batched three-phase
    power flow of :mod:`powerzoo.physics.unbalanced` (validated against OpenDSS), one flow of
    the whole batch per 30-minute step. Spot loads: the published kW / kvar x ``load_scale``
    (1.2) x the calendar load shape ``demand_pu``. Rooftop PV on 32 of the 91 loads (a fixed
    draw of 40 %, single-phase wye and delta and one three-phase aggregate), each rated 3.75 x
    its load's published kW (4.65 MW in all, 1.1 x the annual peak load), producing the
    calendar's ``pv_cf`` (fixed-tilt arrays on TMY3 weather, :mod:`powerzoo.data.profiles`).
    Without control (taps at neutral, capacitors in, PV at unity) the far ends sag below
    0.95 p.u. in the evening on every test day (to 0.912 p.u.) and laterals with much PV rise
    above 1.05 p.u. at midday on 11 % of them (to 1.056 p.u.): over the budget on 41.5 % of the
    test days.

    ## Action
    43 entries (a Box; the discrete parts are decoded by rounding): ``<reg>.tap`` for the seven
    regulators (reg1a ganged at the substation; reg2a; reg3a, reg3c; reg4a, reg4b, reg4c), a
    tap position in [-16, 16] of 0.625 % each (rounded); ``<cap>.on`` for the four capacitors
    (C83 600 kvar three-phase, C88a, C90b, C92c 50 kvar), in service at >= 0.5;
    ``pv_<load>.q`` for the 32 PV inverters, reactive power in [-1, 1] of the inverter's
    limit (0.44 x the array's AC rating, 40 % of the inverter's kVA; > 0 injects) while the
    array gives at least 5 % of its rating (asleep below that: the entry is ignored).

    ## Observation
    69 entries: time (``hour_sin``, ``hour_cos``, ``time_remaining``), this step's
    ``demand_pu``, ``pv_cf`` and ``price_per_mwh``, the taps and capacitor states in force, and
    the flow of this step's loads and PV under the settings in force (what the controllers
    measure as the step begins): each regulator's compensated voltage (V on 120 V, with its
    line-drop compensation), each capacitor's voltage, the lowest and highest voltage of each
    phase, losses, the head's kW and kvar, and each PV's voltage (p.u.).

    ## Reward
    $ per step: ``-(max(price, 0) x losses x dt + 0.5 $ x tap operations + 1 $ x capacitor
    switchings)``; terms ``[loss_cost, tap_wear, capacitor_wear]`` (each <= 0). A negative price
    is floored at 0 (it would pay the operator to waste energy). The ``penalized`` preset also
    charges 1,000 $ per p.u.-hour of voltage violation.

    ## Costs
    ``voltage_violation`` (p.u.-h): the distance of every bus-phase voltage outside [0.95, 1.05]
    p.u., summed over bus-phases, times the step's hours; budget 0.5 p.u.-h a day. A row whose
    flow does not converge is charged 0.1 p.u. on every bus-phase.

    ## Starting state
    The files' settings: taps at neutral, capacitors in service, PV at unity power factor.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``load_scale``, ``pv_kw_per_load_kw``, ``pv_reactive_fraction``,
    ``tap_wear_cost_per_operation``, ``capacitor_wear_cost_per_operation``,
    ``voltage_budget_pu_h``, ``penalty_per_pu_h``, ``market`` (the price model of the losses).

    ## Baselines
    Measured on the 65 test days (``benchmarks/compute_baselines.py``), $ per day and
    p.u.-h of violation a day. Idle (``spec.idle_action``: no control): -51.9 $, 1.06 p.u.-h,
    over the budget on 41.5 % of the days. Random: -1,935 $, 155 p.u.-h. Rule-based = the
    feeder's own controls (:mod:`powerzoo.tasks.volt_var.rule`: the files' RegControl settings
    with line-drop compensation, voltage-controlled capacitors, PV at unity): -106.2 $ (84 tap
    operations a day), 0.014 p.u.-h (slightly above 1.05 p.u. on 69 % of the days, within the
    budget on every day). Oracle = a perfect-foresight plan on mixed-integer models linearised
    around the exact flow and checked with it (:mod:`powerzoo.tasks.volt_var.oracle`; taps,
    capacitors and PV reactive power): a step-by-step plan (-52.4 $) improved by whole-day
    MILPs (:mod:`powerzoo.tasks.volt_var.oracle_day`), -50.6 $ (3.1 tap operations a day, no
    capacitor switching), no violation on any day, 52 % above the rule and 1.2 $ (2.4 %) a day
    above idle: its losses cost 2.8 $ a day less than idle's (PV reactive power and tap
    positions), more than its 1.5 $ of wear. About 6 s of one core a day (at most 10 s).
    """

    task_id = "volt_var_123"
    Params = VoltVarParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = self.make_params(**task_kwargs)
        super().__init__(self.spec_for(self.params), split)
        p = self.params
        self.model = feeder_model()
        base = self.model.base
        self.p_load_kw = base.p_kw * p.load_scale
        self.q_load_kvar = base.q_kvar * p.load_scale
        self.pv_rating_kw = base.p_kw[self.model.pv_loads] * p.pv_kw_per_load_kw
        self.q_limit_kvar = p.pv_reactive_fraction * self.pv_rating_kw
        self.steps_per_day = self.profiles.steps_per_day
        self._demand = self.profiles.series["demand_pu"]
        self._pv_cf = self.profiles.series["pv_cf"]
        self._price = self.profiles.series["price_per_mwh"]
        obs = self.spec.observation
        self._obs_dim = obs.dim
        self._s_time = obs.slot("hour_sin", "hour_cos", "time_remaining")
        self._s_exo = obs.slot("demand_pu", "pv_cf", "price_per_mwh")
        self._s_set = obs.slot(*(f"{r}_tap" for r in REGULATORS), *(f"{c}_on" for c in CAPACITORS))
        first, last = (
            obs.names.index(f"{REGULATORS[0]}_v"),
            obs.names.index(f"pv_{PV_LOADS[-1]}_v_pu"),
        )
        self._s_grid = slice(first, last + 1)  # the fields of grid_obs, in its order
        self._s_taps = obs.slot(*(f"{r}_tap" for r in REGULATORS))
        self._s_caps = obs.slot(*(f"{c}_on" for c in CAPACITORS))
        self._s_reg_v = obs.slot(*(f"{r}_v" for r in REGULATORS))
        self._s_cap_v = obs.slot(*(f"{c}_v_pu" for c in CAPACITORS))

    @classmethod
    def spec_for(cls, params: VoltVarParams) -> TaskSpec:
        return volt_var_spec(cls.task_id, params)

    # ---- exogenous inputs -------------------------------------------------------------------
    def _flat(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        return self.calendar_day(day_id) * self.steps_per_day + t

    def _inputs(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Loads [B, n_loads] kW and kvar and PV output [B, 32] kW at flat profile indices."""
        demand = self._demand[flat][:, None]
        pv = self._pv_cf[flat][:, None] * self.pv_rating_kw
        return self.p_load_kw * demand, self.q_load_kvar * demand, pv

    def _q_available(self, flat: np.ndarray) -> np.ndarray:
        """[B, 32] each inverter's reactive limit at flat profile indices [kvar] (0 asleep)."""
        return self.q_limit_kvar * (self._pv_cf[flat] >= PV_AWAKE_CF)[:, None]

    def _solve(
        self, flat: np.ndarray, taps: np.ndarray, cap_on: np.ndarray, q_frac: np.ndarray
    ) -> GridReading:
        p, q, pv = self._inputs(flat)
        return self.model.solve(p, q, taps, cap_on, pv, q_frac * self._q_available(flat))

    # ---- batched model ----------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> VoltVarState:
        day_id = self.check_day_id(day_id)
        b = day_id.size
        t = np.zeros(b, dtype=np.int64)
        taps, caps, q = np.zeros((b, _NR)), np.ones((b, _NC)), np.zeros((b, _NQ))
        reading = self._solve(self._flat(day_id, t), taps, caps, q)
        return VoltVarState(day_id, t, taps, caps, q, _grid_obs(reading))

    def observe(self, state: VoltVarState) -> np.ndarray:
        flat = self._flat(state.day_id, state.t)
        obs = np.empty((state.t.size, self._obs_dim), dtype=np.float32)
        obs[:, self._s_time] = time_features(state.t, self.steps_per_day, HORIZON)
        obs[:, self._s_exo] = np.stack(
            [self._demand[flat], self._pv_cf[flat], self._price[flat]], axis=1
        )
        obs[:, self._s_set] = np.concatenate([state.taps, state.cap_on], axis=1)
        obs[:, self._s_grid] = state.grid_obs
        return obs

    def step(
        self, state: VoltVarState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[VoltVarState, StepOutput]:
        p = self.params
        dt_h = self.spec.dt_h
        b = state.t.size
        taps = np.clip(np.round(action[:, :_NR]), -TAP_STEPS, TAP_STEPS)
        caps = (action[:, _NR : _NR + _NC] >= 0.5).astype(np.float64)
        flat = self._flat(state.day_id, state.t)
        awake = self._pv_cf[flat] >= PV_AWAKE_CF
        q_frac = np.clip(action[:, _NR + _NC :], -1.0, 1.0) * awake[:, None]
        # this step's flow and the next step's loads under the same settings, in one call
        both = self._solve(
            np.concatenate([flat, flat + 1]),
            np.concatenate([taps, taps]),
            np.concatenate([caps, caps]),
            np.concatenate([q_frac, q_frac]),
        )
        now, preview = _rows(both, slice(0, b)), _rows(both, slice(b, 2 * b))
        ok = now.converged
        n_bus_phase = int(np.isfinite(now.vm_pu[0]).sum())
        violation = np.where(ok, now.violation_pu, NONCONVERGED_PU_PER_BUS_PHASE * n_bus_phase)
        losses = np.where(ok, now.losses_kw, 0.0)
        tap_ops = np.abs(taps - state.taps).sum(axis=1)
        cap_ops = np.abs(caps - state.cap_on).sum(axis=1)
        price = self._price[flat]
        terms = np.stack(
            [
                -np.maximum(price, 0.0) * losses / 1000.0 * dt_h,
                -p.tap_wear_cost_per_operation * tap_ops,
                -p.capacitor_wear_cost_per_operation * cap_ops,
            ],
            axis=1,
        )
        pv_kw = self._pv_cf[flat][:, None] * self.pv_rating_kw
        new_state = VoltVarState(state.day_id, state.t + 1, taps, caps, q_frac, _grid_obs(preview))
        return new_state, StepOutput(
            reward=terms.sum(axis=1),
            reward_terms=terms,
            constraint_costs=(violation * dt_h)[:, None],
            terminated=np.zeros(b, dtype=bool),
            action_applied=np.concatenate([taps, caps, q_frac], axis=1),
            info={
                "pf_converged": ok,
                "losses_kw": losses,
                "v_min_pu": now.v_min_phase_pu.min(axis=1),
                "v_max_pu": now.v_max_phase_pu.max(axis=1),
                "tap_operations": tap_ops,
                "capacitor_operations": cap_ops,
                "pv_kw": pv_kw.sum(axis=1),
                "pv_kvar": (q_frac * self._q_available(flat)).sum(axis=1),
                "head_kw": now.head_kw,
                "price_per_mwh": price,
            },
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """The feeder's own controls (:mod:`powerzoo.tasks.volt_var.rule`) on the observed
        flow of this step under the settings in force; PV at unity power factor."""
        obs = obs.astype(np.float64)
        act = np.zeros((obs.shape[0], self.spec.action.dim))
        act[:, :_NR] = regcontrol_taps(
            obs[:, self._s_taps], obs[:, self._s_reg_v], self.model.vreg_v, self.model.band_v
        )
        act[:, _NR : _NR + _NC] = capcontrol(obs[:, self._s_caps], obs[:, self._s_cap_v])
        return act

    def oracle_plan(self, state: VoltVarState) -> np.ndarray:
        """Perfect-foresight settings [B, 48, 43]: a step-by-step plan improved by a whole-day
        MILP, both linearised around the exact flow and checked with it
        (:func:`powerzoo.tasks.volt_var.oracle.plan_day`); steps before ``state.t`` are left
        at 0."""
        p = self.params
        plans = np.zeros((state.t.size, HORIZON, self.spec.action.dim))
        for row in range(state.t.size):
            t0 = int(state.t[row])
            flat = self._flat(state.day_id[row : row + 1], np.arange(t0, HORIZON))
            p_kw, q_kvar, pv = self._inputs(flat)
            loss_price = np.maximum(self._price[flat], 0.0) / 1000.0 * self.spec.dt_h
            q_limit = self._q_available(flat)
            day = DayInputs(p_kw, q_kvar, pv, loss_price, q_limit)
            taps, caps, q = plan_day(
                self.model,
                day,
                state.taps[row],
                state.cap_on[row],
                (p.tap_wear_cost_per_operation, p.capacitor_wear_cost_per_operation),
            )
            plans[row, t0:, :_NR] = taps
            plans[row, t0:, _NR : _NR + _NC] = caps
            safe = np.where(q_limit > 0, q_limit, 1.0)
            plans[row, t0:, _NR + _NC :] = np.clip(q / safe, -1.0, 1.0)
        return plans
