"""The ``marl_ders_benchmark`` task: batched state, reset / observe / step and baselines.

The model is described in :mod:`powerzoo.tasks.ders_benchmark`; the spec is in :mod:`.spec`,
the observation layout in :mod:`.observation`, the oracle in :mod:`.oracle`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.devices.flexible_load import (
    FlexibleLoadParams,
    FlexibleLoadState,
    flexible_load_reset,
    flexible_load_step,
)
from powerzoo.devices.inverter_battery import (
    inverter_battery_reset,
    inverter_battery_settlement,
    inverter_battery_step,
)
from powerzoo.devices.pv_inverter import PVInverterParams, pv_inverter_step
from powerzoo.scratch import ROW_BLOCK
from powerzoo.tasks.base import StepOutput
from powerzoo.tasks.ders_benchmark.observation import N_PER_KIND, Slots
from powerzoo.tasks.ders_benchmark.spec import (
    BATTERY_BUSES,
    CASE,
    DER_BUSES,
    FLEX_BUSES,
    HORIZON,
    PV_BUSES,
    STEP_MINUTES,
    VOLT_VAR_Q,
    VOLT_VAR_V,
    DersBenchmarkParams,
    ders_benchmark_spec,
)
from powerzoo.tasks.feeder import FeederTask
from powerzoo.tasks.feeder import row_sum as _row_sum
from powerzoo.tasks.feeder_rules import export_limit_curtailment
from powerzoo.tasks.spec import TaskSpec
from powerzoo.tasks.tariffs import (
    reference_price_per_mwh,
    tou_battery_power_mw,
    tou_mode,
    tou_schedule,
)

__all__ = ["MarlDersBenchmark", "DersState"]

_K = N_PER_KIND
_N = 3 * _K
_BAT, _PV, _FLEX = slice(0, _K), slice(_K, 2 * _K), slice(2 * _K, _N)
_GRID_KEYS = ("feeder_p_mw", "p_loss_mw", "v_min_pu", "v_max_pu")  # DersState.grid's columns
_count_nonzero = np.count_nonzero
# the rule's export limit of each PV plant (MW): the hosting capacity of its sub-lateral, the
# size at which the uncontrolled midday reverse flow keeps the lateral's lines within their
# ratings (1.0 MW a plant: no day over the overload budget), as a utility writes it into the
# interconnection agreement of a larger plant
RULE_PV_EXPORT_LIMIT_MW = 1.0


@dataclasses.dataclass
class DersState:
    """Batched state; every field has leading axis ``B``."""

    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    soc: np.ndarray  # [B, 4] battery state of charge
    due_mwh: np.ndarray  # [B, payback_steps, 4] payback schedule of the flexible loads
    backlog_mwh: np.ndarray  # [B, 4] deferred load energy not yet paid back
    prev_p_mw: np.ndarray  # [B, 12] active power of every DER last step (+ into the feeder)
    prev_q_mvar: np.ndarray  # [B, 12] reactive power last step (+ injection)
    vm_pu: np.ndarray  # [B, n_bus] last flow's voltage magnitudes
    grid: np.ndarray  # [B, 4] last flow's feeder_p_mw, p_loss_mw, v_min_pu, v_max_pu
    v_complex_pu: np.ndarray  # [B, n_bus] last flow's voltages (warm start)
    ltc_tap: np.ndarray  # [B] the head's tap position (powerzoo.tasks.feeder_ltc)
    ltc_timer: np.ndarray  # [B] steps the regulated voltage has been outside the AVC band
    ltc_operations: np.ndarray  # [B] tap operations since reset


class MarlDersBenchmark(FeederTask):
    """Batteries, PV inverters and flexible loads share one 141-bus feeder and one team reward.

    ## Description
    Twelve heterogeneous DERs in three agent groups on Khodr's 141-bus 12.47 kV feeder
    (``case141``), one exact AC power flow per 30-minute step; bus loads are the case's base load x
    the calendar load shape, the head held at 1.019 p.u. by its tap changer. Four batteries
    (1 MWh / 0.5 MW, 0.55 MVA), four 1.3 MW PV plants with 1.43 MVA inverters and four flexible
    loads sit on the long lateral, which sags at the evening peak and which the PV's midday
    reverse flow overloads.

    ## Action
    ``battery_k``: ``[p_mw, q_mvar]``, P in [-0.5, 0.5] MW (+ discharge), Q in [-0.55, 0.55] Mvar
    (+ injection). ``pv_k``: ``[curtail, q_mvar]``, curtailed fraction in [0, 1], Q in
    [-1.43, 1.43] Mvar (no Q without sun unless ``pv_q_at_night``). ``load_k``: ``[curtail,
    shift]``, fractions in [0, 0.3] of the unit's demand, shifted energy paid back within 2 h.

    ## Observation
    Mode ``ders_local`` (default): time, price, one-hot kind, own bus voltage, SOC, available PV,
    base load and backlog (0 where they do not apply); also ``local``, ``local_plus_voltage`` and
    ``global``.

    ## Reward
    Shared, $ per step: ``-price x losses x dt - price x curtailed PV MWh - 1,000 $/MWh x
    curtailed load MWh - (price x (charged - discharged MWh) + 7.5 $/MWh x throughput)``, and on the
    last step the batteries' settlement at the day's mean price. The curtailed PV is valued at
    the price, so at a negative price curtailing earns (the PV's output is worth less than
    nothing then), which the oracle uses in the hours of negative prices.

    ## Costs
    ``voltage_violation`` (p.u.), ``thermal_overload`` (MVAh), ``device_violation`` (MWh asked
    beyond the SOC bounds + load shift refused on the last step), ``reactive_cut`` (Mvarh asked of
    the inverters beyond their capability).

    ## Starting state
    Batteries at SOC 0.5, no backlog; grid fields from the flow of the first step with the DERs
    uncontrolled.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``load_scale``, ``energy_mwh``, ``power_mw``, ``battery_s_mva``, ``tou_steps``, ``pv_mw``,
    ``pv_s_mva``, ``pv_q_at_night``, ``flex_share``, ``flex_max_fraction``, ``payback_steps``,
    ``voll_per_mwh``; ``market`` picks the price model (``powerzoo.data.markets``); the tap
    changer's ``ltc``, ``ltc_band_centre_pu``, ``ltc_bandwidth_pu``, ``ltc_ldc_r_pu``,
    ``ltc_ldc_x_pu`` (:mod:`powerzoo.tasks.feeder_ltc`).

    ## Baselines
    Random; rule-based: time-of-use batteries, IEEE 1547-2018 category B volt-var droop on every
    inverter, every PV plant capped at a 1.0 MW export limit, loads served (-124 $/day, every
    budget kept every test day); oracle: the whole day planned with perfect foresight, one
    LP on HiGHS with voltages on LinDistFlow, applied under the exact flow.
    """

    step_block_rows = ROW_BLOCK  # the power flow's [n_bus, rows] work arrays stay in the caches

    task_id = "marl_ders_benchmark"
    Params = DersBenchmarkParams
    case_name = CASE
    ObsSlots = Slots

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        super().__init__(split, **task_kwargs)
        p, grid = self.params, self.grid
        case = grid.case
        self.battery = p.inverter_batteries(_K, s_rating_mva=p.battery_s_mva)
        self.pv = PVInverterParams(
            capacity_mw=p.pv_mw, s_rating_mva=p.pv_s_mva, n_units=_K, q_at_night=p.pv_q_at_night
        )
        self.flex_buses = np.asarray(FLEX_BUSES)
        pf = case.bus_pd_mw[self.flex_buses] / np.hypot(
            case.bus_pd_mw[self.flex_buses], case.bus_qd_mvar[self.flex_buses]
        )
        self.flex = FlexibleLoadParams(
            curtail_max=p.flex_max_fraction,
            shift_max=p.flex_max_fraction,
            power_factor=pf,
            payback_steps=p.payback_steps,
            n_units=_K,
        )
        # flexible MW per unit of demand_pu
        self.flex_mw = p.flex_share * grid.bus_p_mw[self.flex_buses]
        self.bat_buses, self.pv_buses = np.asarray(BATTERY_BUSES), np.asarray(PV_BUSES)
        self.der_buses = np.asarray(DER_BUSES)
        self.pv_cf = self.profiles.series["pv_cf"]
        self.locate_neighbours(self.der_buses)
        self._kind = np.repeat(np.eye(3, dtype=np.float32), _K, axis=0)  # [12, 3]
        spd, market = self.profiles.steps_per_day, self.profiles.market
        self._tou = tou_schedule(spd, p.tou_steps, STEP_MINUTES, market)
        self._reference_price = reference_price_per_mwh(spd, STEP_MINUTES, market)
        obs = self.spec.observation
        self._rule_t, self._rule_dev = obs.slot("time_remaining"), obs.slot("own_v_pu")
        self._rule_price = obs.slot("price_per_mwh")

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def spec_for(cls, params: DersBenchmarkParams) -> TaskSpec:
        return ders_benchmark_spec(cls.task_id, params)

    # ---- batched model ----------------------------------------------------------------------
    def loads(self, demand: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bus loads (p, q) [B, n_bus] with the flexible share removed, and the flexible demand [B,
        4]."""
        p, q = self.grid.bus_loads(demand)
        flex = demand[:, None] * self.flex_mw
        p[:, self.flex_buses] -= flex
        q[:, self.flex_buses] -= flex * self.flex.tan_phi
        return p, q, flex

    @staticmethod
    def _grid(flow: Any) -> np.ndarray:
        info = flow.info
        out = np.empty((flow.vm_pu.shape[0], len(_GRID_KEYS)))
        for i, key in enumerate(_GRID_KEYS):
            out[:, i] = info[key]
        return out

    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> DersState:
        day_id, t, flat = self.first_step(day_id)
        b = day_id.size
        demand = self.grid.demand_pu.take(flat)
        p, q, flex = self.loads(demand)
        p[:, self.flex_buses] += flex
        q[:, self.flex_buses] += flex * self.flex.tan_phi
        pv_mw = self.pv_cf.take(flat)[:, None] * self.pv.capacity_mw
        p[:, self.pv_buses] -= pv_mw
        flow, ltc = self.grid_reset(p, q)
        prev_p = np.zeros((b, _N))
        prev_p[:, _PV] = pv_mw
        prev_p[:, _FLEX] = -flex
        fl = flexible_load_reset(self.flex, b)
        return DersState(
            day_id,
            t,
            inverter_battery_reset(self.battery, b),
            fl.due_mwh,
            fl.backlog_mwh,
            prev_p,
            np.zeros((b, _N)),
            flow.vm_pu,
            self._grid(flow),
            flow.v_complex_pu,
            ltc.tap,
            ltc.timer,
            ltc.operations,
        )

    def observe(self, state: DersState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations [B, 12, obs_dim] (float32) of ``obs_mode`` (default
        ``ders_local``)."""
        s, obs, flat = self.begin_agent_observation(state, obs_mode, _N)
        demand = self.grid.demand_pu.take(flat)
        vm = state.vm_pu
        if s.kind is not None:
            obs[:, :, s.kind] = self._kind
        d = s.device
        der_v = vm[:, self.der_buses]
        obs[:, :, d] = der_v
        obs[:, _BAT, d + 1] = state.soc
        cf = self.pv_cf.take(flat)
        obs[:, _PV, d + 2] = cf[:, None] * self.pv.capacity_mw
        obs[:, _FLEX, d + 3] = demand[:, None] * self.flex_mw
        obs[:, _FLEX, d + 4] = state.backlog_mwh
        if s.prev is not None:
            obs[:, :, s.prev] = state.prev_p_mw
            obs[:, :, s.prev + 1] = state.prev_q_mvar
            obs[:, :, s.prev + 2] = demand[:, None] * self.grid.bus_p_mw[self.der_buses]
        if s.neighbours is not None:
            self.write_neighbour_voltages(obs, vm, s.neighbours, s.neighbours + 1)
        if s.system is not None:
            g = s.system
            obs[:, :, g] = demand[:, None]
            obs[:, :, g + 1] = cf[:, None]
            obs[:, :, g + 2 : g + 6] = state.grid[:, None, :]
        if s.fleet is not None:
            f = s.fleet
            obs[:, :, f : f + _N] = der_v[:, None, :]
            obs[:, :, f + _N : f + _N + _K] = state.soc[:, None, :]
            obs[:, :, f + _N + _K : f + _N + 2 * _K] = state.backlog_mwh[:, None, :]
        return obs

    def step(
        self, state: DersState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[DersState, StepOutput]:
        dt_h = self.spec.dt_h
        b = state.t.size
        act = action.reshape(b, _N, 2)
        flat = self.flat_index(state.day_id, state.t)
        demand = self.grid.demand_pu.take(flat)
        price = self.grid.price_per_mwh.take(flat)
        bat = inverter_battery_step(self.battery, state.soc, act[:, _BAT, 0], act[:, _BAT, 1], dt_h)
        pv = pv_inverter_step(
            self.pv, self.pv_cf.take(flat)[:, None], act[:, _PV, 0], act[:, _PV, 1], dt_h
        )
        p, q = self.grid.bus_loads(demand)
        flex_base = demand[:, None] * self.flex_mw
        fl = flexible_load_step(
            self.flex,
            FlexibleLoadState(state.due_mwh, state.backlog_mwh),
            flex_base,
            act[:, _FLEX, 0],
            act[:, _FLEX, 1],
            dt_h,
            HORIZON - 1 - state.t,
        )
        # each flexible bus: its load less the flexible share (loads()), plus what the unit draws
        fb = self.flex_buses
        flex_p = p.take(fb, axis=1)
        flex_p -= flex_base
        flex_p += fl.p_mw
        p[:, fb] = flex_p
        flex_q = q.take(fb, axis=1)
        flex_q -= flex_base * self.flex.tan_phi
        flex_q += fl.q_mvar
        q[:, fb] = flex_q
        served_mw = _row_sum(p)
        p[:, self.bat_buses] -= bat.p_mw
        q[:, self.bat_buses] -= bat.q_mvar
        p[:, self.pv_buses] -= pv.p_mw
        q[:, self.pv_buses] -= pv.q_mvar
        flow, ltc, _ = self.grid_step(state, p, q)
        pv_curtailed = _row_sum(pv.curtailed_mwh)
        load_curtailed = _row_sum(fl.curtailed_mwh)
        terms = np.empty((b, 5))
        terms[:, 0] = -(price * flow.p_loss_mw * dt_h)
        terms[:, 1] = -(price * pv_curtailed)
        terms[:, 2] = -(self.params.voll_per_mwh * load_curtailed)
        throughput = bat.charge_mwh + bat.discharge_mwh
        terms[:, 3] = -(
            price * _row_sum(bat.charge_mwh - bat.discharge_mwh)
            + _row_sum(self.battery.degradation_cost_per_mwh * throughput)
        )
        terms[:, 4] = 0.0
        end = state.t + 1 == HORIZON
        if _count_nonzero(end):  # the last step: settle the batteries' stored energy
            terms[end, 4] = _row_sum(
                inverter_battery_settlement(
                    self.battery, bat.soc[end], self.settlement_price(state.day_id[end])
                )
            )
        costs = np.empty((b, 4))
        costs[:, :2] = flow.costs
        costs[:, 2] = _row_sum(bat.soc_violation_mwh) + _row_sum(fl.shift_refused_mwh)  # MWh
        costs[:, 3] = (_row_sum(bat.q_cut_mvar) + _row_sum(pv.q_cut_mvar)) * dt_h  # Mvarh
        applied = np.empty((b, _N, 2))
        applied[:, _BAT, 0], applied[:, _BAT, 1] = bat.p_mw, bat.q_mvar
        applied[:, _PV, 0], applied[:, _PV, 1] = pv.curtail_fraction, pv.q_mvar
        applied[:, _FLEX, 0], applied[:, _FLEX, 1] = fl.curtail_fraction, fl.shift_fraction
        prev_p = np.empty((b, _N))
        prev_p[:, _BAT], prev_p[:, _PV] = bat.p_mw, pv.p_mw
        np.negative(fl.p_mw, out=prev_p[:, _FLEX])
        prev_q = np.empty((b, _N))
        prev_q[:, _BAT], prev_q[:, _PV] = bat.q_mvar, pv.q_mvar
        np.negative(fl.q_mvar, out=prev_q[:, _FLEX])
        new_state = DersState(
            state.day_id,
            state.t + 1,
            bat.soc,
            fl.state.due_mwh,
            fl.state.backlog_mwh,
            prev_p,
            prev_q,
            flow.vm_pu,
            self._grid(flow),
            flow.v_complex_pu,
            ltc.tap,
            ltc.timer,
            ltc.operations,
        )
        return new_state, self.feeder_output(
            flow,
            _row_sum(terms),
            terms,
            costs,
            applied.reshape(b, 2 * _N),
            price_per_mwh=price,
            demand_pu=demand,
            net_load_mw=_row_sum(p),
            served_load_mw=served_mw,
            der_injection_mw=_row_sum(bat.p_mw) + _row_sum(pv.p_mw),
            soc=bat.soc,
            pv_available_mw=pv.available_mw,
            pv_curtailed_mwh=pv_curtailed,
            load_curtailed_mwh=load_curtailed,
            load_shifted_mwh=_row_sum(fl.shifted_mwh),
            load_payback_mwh=_row_sum(fl.payback_mwh),
            load_backlog_mwh=fl.state.backlog_mwh,
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """TOU batteries, volt-var inverters, PV capped at its export limit
        (``RULE_PV_EXPORT_LIMIT_MW``), loads served (see :mod:`powerzoo.tasks.ders_benchmark`),
        from ``ders_local`` observations [B, 12, d]: the physical joint action [B, 24]."""
        obs = obs.astype(np.float64)
        b = obs.shape[0]
        remaining = obs[:, 0, self._rule_t]
        mode = tou_mode(
            self._tou, remaining, HORIZON, self.profiles.steps_per_day
        )  # -1 charge, +1 discharge
        d = self._rule_dev
        p_bat = tou_battery_power_mw(
            self.battery,
            mode,
            obs[:, _BAT, d + 1],
            self.spec.dt_h,
            self.params.tou_steps,
            obs[:, 0, self._rule_price],
            self._reference_price,
            np.rint(remaining * HORIZON),
        )
        q_share = np.interp(obs[:, :, d], VOLT_VAR_V, VOLT_VAR_Q)  # [B, 12] Q per unit of S
        act = np.zeros((b, _N, 2))
        act[:, _BAT, 0] = p_bat
        q_lim = np.sqrt(np.maximum(self.battery.s_squared_mva2 - p_bat * p_bat, 0.0))
        act[:, _BAT, 1] = np.clip(q_share[:, _BAT] * self.battery.s_rating_mva, -q_lim, q_lim)
        pv_mw = obs[:, _PV, d + 2]
        q_lim = np.sqrt(np.maximum(self.pv.s_squared_mva2 - pv_mw * pv_mw, 0.0))
        if not self.pv.q_at_night:  # no sun: the inverter gives no reactive power
            q_lim = np.where(pv_mw > 0.0, q_lim, 0.0)
        act[:, _PV, 1] = np.clip(q_share[:, _PV] * self.pv.s_rating_mva, -q_lim, q_lim)
        act[:, _PV, 0] = export_limit_curtailment(pv_mw, RULE_PV_EXPORT_LIMIT_MW)
        return act.reshape(b, 2 * _N)

    def oracle_plan(self, state: DersState) -> np.ndarray:
        """Perfect-foresight physical joint actions [B, H, 24] (rows before each state's step are
        0): one
        LinDistFlow LP per episode on HiGHS (:mod:`powerzoo.tasks.ders_benchmark.oracle`), applied
        under the exact flow."""
        from powerzoo.tasks.ders_benchmark.oracle import DersOracle

        if getattr(self, "_oracle", None) is None:
            self._oracle = DersOracle(self, self.params.voll_per_mwh)
        plans = np.zeros((state.t.size, HORIZON, 2 * _N))
        for row in range(state.t.size):
            t0 = int(state.t[row])
            day = self._oracle.plan_day(
                int(state.day_id[row]),
                t0,
                state.soc[row],
                state.due_mwh[row],
                self.head_vm_pu(state, row),
            )
            plans[row, t0:] = day.actions
        return plans
