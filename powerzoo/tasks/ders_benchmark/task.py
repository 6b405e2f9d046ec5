"""``marl_ders_benchmark``: twelve heterogeneous DERs on the 141-bus feeder, in three agent groups.

Model (multi-agent, shared reward, 30-minute steps, 48 per episode = one calendar day)
-------------------------------------------------------------------------------------
* Feeder: Khodr's 141-bus 12.47 kV feeder (``case141``, MATPOWER), exact AC power flow every step
  (:mod:`powerzoo.tasks.feeder`); bus loads = the case's base load x ``load_scale = 1.0`` x the
  calendar load shape ``demand_pu`` (so the published base load is the annual peak).
* Agents, 0-based buses of the case file (chosen once, by hand, from the base-case voltage
  profile and the feeder tree; constants below):

  - ``battery_0..3`` (group ``batteries``): inverter batteries
    (:mod:`powerzoo.devices.inverter_battery`) of 1 MWh / 0.5 MW (0.55 MVA), efficiencies 0.95,
    SOC in [0.1, 0.9] (start 0.5), degradation 2 $/MWh, at ``BATTERY_BUSES = (47, 65, 29, 125)``:
    spread over the feeder, two on the long lateral that starts at bus 5 (where voltages sag:
    its mid point 47 and its sub-lateral 53-68) and two on the other branches (the far end of
    the main trunk, 29, and of the lateral 117-129). Action ``[p_mw, q_mvar]``: P in
    [-0.5, 0.5] MW (+ discharge), Q in [-0.55, 0.55] Mvar (+ injection).
  - ``pv_0..3`` (group ``pv``): 1 MW PV plants with 1.1 MVA inverters
    (:mod:`powerzoo.devices.pv_inverter`) at ``PV_BUSES = (86, 51, 79, 67)``, the lowest-voltage
    ends of the four sagging sub-laterals of that lateral. Available power = 1 MW x the data
    layer's irradiance-based ``pv_cf``. Action ``[curtail, q_mvar]``: curtailed fraction in
    [0, 1], Q in [-1.1, 1.1] Mvar.
  - ``load_0..3`` (group ``flexible_loads``): the flexible half (``flex_share = 0.5``) of the
    load of the large buses ``FLEX_BUSES = (85, 78, 60, 70)`` on the same sub-laterals
    (:mod:`powerzoo.devices.flexible_load`, each at its bus's own power factor), curtail and
    shift up to 30 % each per step, payback within 4 steps (2 h) and before the day ends.
    Action ``[curtail, shift]``, both fractions in [0, 0.3] of the unit's demand this step.

* Sizing: with the DERs uncontrolled (batteries idle, PV uncurtailed, Q = 0, loads served as
  they come) the sagging lateral drops below 0.95 p.u. on 69 of the 77 test days (mean 1.4
  p.u.-steps of ``voltage_violation`` a day, no thermal overload); PV output helps only around
  midday. The rule-based baseline brings it to 0.12 (16 days), so where and when the batteries,
  the inverters' Q and the flexible loads act matters (``tests/test_ders_benchmark.py``).
* Reward, **shared** (team, $ per step), terms ``[loss_cost, pv_curtailment_cost,
  load_curtailment_cost, battery_cost]`` (each usually <= 0): ``-price x losses x dt``;
  ``-price x curtailed PV MWh`` (the energy the feeder must buy instead); ``-VOLL x curtailed
  load MWh`` with ``VOLL = 1,000 $/MWh`` (unserved energy; so curtailing everything never pays);
  ``-(price x (charged - discharged MWh) + 2 $/MWh x throughput)`` (the batteries' energy bill,
  so they can earn by arbitrage). Shifted load is free in the reward: it comes back later.
* Costs (CMDP, all selected, >= 0 per step): ``voltage_violation`` (p.u. outside [0.95, 1.05]
  summed over buses), ``thermal_overload`` (MVA above line ratings summed over branches),
  ``device_violation`` (MWh-equivalent, summed over devices: battery energy asked beyond the
  SOC bounds [MWh] + reactive power cut by the inverters' S limits x dt [Mvarh] + load shift
  refused on the last step [MWh]). Per-episode thresholds 1.0 p.u., 0.5 MVA, 0.5 MWh.
* Observation modes (``env.observation_fields(agent)``; every agent has the same fields in a
  mode, fields that do not apply to its kind are 0; grid values from the previous step's flow,
  at reset from the flow of the first step with the DERs uncontrolled):
  ``ders_local`` (default): time, price, one-hot kind ``is_battery, is_pv, is_flexible_load``,
  then ``own_v_pu, own_soc, own_pv_available_mw, own_base_load_mw, own_backlog_mwh``;
  ``local``: time, price, the own device block, ``own_prev_p_mw`` (+ into the feeder; a load's
  draw is negative), ``own_prev_q_mvar``, ``own_bus_load_mw``; ``local_plus_voltage``: ``local``
  + ``upstream_v_pu`` (parent bus) and ``downstream_v_pu`` (lowest child bus, own bus at a
  leaf); ``global``: ``ders_local`` + ``demand_pu, pv_cf, feeder_p_mw, p_loss_mw, v_min_pu,
  v_max_pu`` + the voltage at every DER bus, every battery's SOC and every load's backlog.
* Splits: train / val / test by date; stress splits ``load_stress`` (demand x 1.15),
  ``low_renewable`` (PV x 0.4, dearer prices) and ``price_spike`` (evening price spikes).
* Baselines: random; rule-based: no curtailment or shifting, each battery follows the
  time-of-use schedule of :func:`powerzoo.tasks.der_arbitrage.tou_schedule` (charge in the 8
  cheapest half-hours of the average day, discharge in the 8 dearest, within its SOC), and every
  inverter (battery and PV) applies the IEEE 1547-2018 category B volt-var droop on its own
  bus voltage (Q / S = +0.44 at 0.92 p.u., 0 in [0.98, 1.02], -0.44 at 1.08, linear between),
  within the reactive capability left at its P. Oracle: the whole day planned with perfect
  foresight, one LP on HiGHS per day (:mod:`powerzoo.tasks.ders_benchmark.oracle`: every device's
  limits,
  voltages on LinDistFlow and line flows around the exact flow, losses piecewise-quadratic;
  solved around the uncontrolled day, then around its own plan), applied under the exact flow.
  Test split (77 days, ``benchmarks/compute_baselines.py``), team return ($/day; 12 x the shared
  reward) and ``voltage_violation`` (p.u.-steps/day): random -26,094 and 3.66 (plus 18.4 MVA of
  overload and 5.2 MWh of device violation); rule-based -1,291 and 0.117; oracle -482 and 0
  (no overload, no device violation).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.devices.flexible_load import (
    FlexibleLoadParams,
    FlexibleLoadState,
    flexible_load_reset,
    flexible_load_step,
)
from powerzoo.devices.inverter_battery import (
    InverterBatteryParams,
    inverter_battery_reset,
    inverter_battery_step,
)
from powerzoo.devices.pv_inverter import PVInverterParams, pv_inverter_step
from powerzoo.scratch import ROW_BLOCK
from powerzoo.tasks.base import StepOutput
from powerzoo.tasks.ders_benchmark.observation import (
    AGENTS,
    BATTERIES,
    LOADS,
    N_PER_KIND,
    PVS,
    Slots,
    observation_modes,
)
from powerzoo.tasks.feeder import GRID_COST_UNITS, GRID_COSTS, FeederTask, child_buses
from powerzoo.tasks.spec import AgentGroup, TaskSpec, VectorSpec
from powerzoo.tasks.tariffs import tou_battery_power_mw, tou_mode, tou_schedule

__all__ = [
    "MarlDersBenchmark",
    "DersBenchmarkParams",
    "DersState",
    "BATTERY_BUSES",
    "PV_BUSES",
    "FLEX_BUSES",
]

HORIZON = 48
STEP_MINUTES = 30
CASE = "case141"
BATTERY_BUSES = (47, 65, 29, 125)  # 0-based buses of case141
PV_BUSES = (86, 51, 79, 67)
FLEX_BUSES = (85, 78, 60, 70)
VOLT_VAR_V = (0.92, 0.98, 1.02, 1.08)  # IEEE 1547-2018 category B default curve (p.u.)
VOLT_VAR_Q = (0.44, 0.0, 0.0, -0.44)  # Q per unit of the S rating (+ injection)
_K = N_PER_KIND
_N = 3 * _K
_BAT, _PV, _FLEX = slice(0, _K), slice(_K, 2 * _K), slice(2 * _K, _N)
DER_BUSES = BATTERY_BUSES + PV_BUSES + FLEX_BUSES


@dataclasses.dataclass(frozen=True)
class DersBenchmarkParams:
    """The numbers of a ``marl_ders_benchmark`` episode; each is a task keyword."""

    # bus loads = the case's published base load x this x demand_pu
    load_scale: float = 1.0
    # each battery's energy (MWh), power rating (MW) and inverter rating (MVA, 10 % above P)
    energy_mwh: float = 1.0
    power_mw: float = 0.5
    battery_s_mva: float = 0.55
    # each PV inverter's peak output (MW) and inverter rating (MVA, 10 % above P)
    pv_mw: float = 1.0
    pv_s_mva: float = 1.1
    # share of a flexible bus's published load that its unit controls
    flex_share: float = 0.5
    # curtail_max and shift_max of every flexible unit (fraction of its demand per step)
    flex_max_fraction: float = 0.3
    # steps over which shifted energy is paid back evenly (4 x 30 min = 2 h)
    payback_steps: int = 4
    # value of lost load ($/MWh) for curtailed load, 25x the mean price
    voll_per_mwh: float = 1000.0
    # half-hours of charging and of discharging in the rule-based time-of-use schedule
    tou_steps: int = 8


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


class MarlDersBenchmark(FeederTask):
    """Batteries, PV inverters and flexible loads share one 141-bus feeder and one team reward."""

    step_block_rows = ROW_BLOCK  # the power flow's [n_bus, rows] work arrays stay in the caches

    task_id = "marl_ders_benchmark"
    horizon = HORIZON
    Params = DersBenchmarkParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = p = self.make_params(**task_kwargs)
        super().__init__(self.make_spec(**task_kwargs), split)
        grid = self.setup_feeder(CASE, p.load_scale, Slots.of)
        case = grid.case
        self.battery = InverterBatteryParams(
            energy_capacity_mwh=p.energy_mwh,
            power_max_mw=p.power_mw,
            s_rating_mva=p.battery_s_mva,
            n_units=_K,
        )
        self.pv = PVInverterParams(capacity_mw=p.pv_mw, s_rating_mva=p.pv_s_mva, n_units=_K)
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
        self.upstream_bus = case.bus_parent[self.der_buses]
        self._children = child_buses(case, DER_BUSES)
        self._kind = np.repeat(np.eye(3, dtype=np.float32), _K, axis=0)  # [12, 3]
        self._tou = tou_schedule(self.profiles.steps_per_day, p.tou_steps, STEP_MINUTES)
        obs = self.spec.observation
        self._rule_t, self._rule_dev = obs.slot("time_remaining"), obs.slot("own_v_pu")

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def spec_for(cls, params: DersBenchmarkParams) -> TaskSpec:
        p = params
        modes = {
            mode: VectorSpec.from_rows(fields)
            for mode, fields in observation_modes(p.pv_mw).items()
        }
        actions = (
            [(f"{a}.p_mw", "MW (+ discharge)", -p.power_mw, p.power_mw) for a in BATTERIES]
            + [
                (f"{a}.q_mvar", "Mvar (+ injection)", -p.battery_s_mva, p.battery_s_mva)
                for a in BATTERIES
            ]
            + [(f"{a}.curtail", "fraction of available PV", 0.0, 1.0) for a in PVS]
            + [(f"{a}.q_mvar", "Mvar (+ injection)", -p.pv_s_mva, p.pv_s_mva) for a in PVS]
            + [
                (f"{a}.curtail", "fraction of the unit's demand", 0.0, p.flex_max_fraction)
                for a in LOADS
            ]
            + [
                (f"{a}.shift", "fraction of the unit's demand", 0.0, p.flex_max_fraction)
                for a in LOADS
            ]
        )
        # agent-major order: agent i's two entries are actions[i] and actions[i + 4] of its kind's
        # block
        ordered = [actions[8 * (i // _K) + (i % _K) + _K * j] for i in range(_N) for j in range(2)]
        names, units, low, high = zip(*ordered, strict=True)
        return TaskSpec(
            task_id=cls.task_id,
            description=(
                "Four batteries, four PV inverters and four flexible loads on the 141-bus feeder "
                "(exact AC power "
                "flow) keep voltages in band at least cost: one team reward, minus losses, "
                "curtailed PV and load "
                "and the batteries' energy bill."
            ),
            agents=AGENTS,
            observation=modes["ders_local"],
            action=VectorSpec(names=names, units=units, low=low, high=high),
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            splits=calendar.BASE_SPLITS + ("load_stress", "low_renewable", "price_spike"),
            reward_terms=(
                "loss_cost",
                "pv_curtailment_cost",
                "load_curtailment_cost",
                "battery_cost",
            ),
            reward_doc=(
                f"shared: -(price x losses x dt + price x curtailed PV MWh + {p.voll_per_mwh:g} "
                "$/MWh x curtailed "
                "load MWh + price x battery net charge MWh + 2 $/MWh x battery throughput) per "
                "step ($)"
            ),
            constraint_names=(*GRID_COSTS, "device_violation"),
            constraint_units=(
                *GRID_COST_UNITS,
                "MWh-equivalent (SOC violation MWh + S-limit Q cut Mvarh + refused shift MWh)",
            ),
            selected_constraints=(*GRID_COSTS, "device_violation"),
            cost_thresholds={
                "voltage_violation": 1.0,
                "thermal_overload": 0.5,
                "device_violation": 0.5,
            },
            baselines=("random", "rule_based", "oracle"),
            reward_presets={
                "objective": {},
                "penalized": {
                    "voltage_violation": 1000.0,
                    "thermal_overload": 1000.0,
                    "device_violation": 100.0,
                },
            },
            obs_modes=tuple(modes),
            obs_mode_specs=modes,
            default_obs_mode="ders_local",
            shared_reward=True,
            agent_groups=(
                AgentGroup(
                    "batteries",
                    BATTERIES,
                    "inverter batteries: [p_mw (+ discharge), q_mvar (+ injection)]",
                ),
                AgentGroup("pv", PVS, "PV inverters: [curtail fraction, q_mvar (+ injection)]"),
                AgentGroup(
                    "flexible_loads", LOADS, "flexible loads: [curtail fraction, shift fraction]"
                ),
            ),
        )

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
        return np.stack(
            [info["feeder_p_mw"], info["p_loss_mw"], info["v_min_pu"], info["v_max_pu"]], axis=1
        )

    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> DersState:
        day_id, t, flat = self.first_step(day_id)
        b = day_id.size
        demand = self.grid.demand_pu.take(flat)
        p, q, flex = self.loads(demand)
        p[:, self.flex_buses] += flex
        q[:, self.flex_buses] += flex * self.flex.tan_phi
        pv_mw = self.pv_cf.take(flat)[:, None] * self.pv.capacity_mw
        p[:, self.pv_buses] -= pv_mw
        flow = self.grid.solve(p, q)
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
            n = s.neighbours
            obs[:, :, n] = vm[:, self.upstream_bus]
            for i, kids in enumerate(self._children):
                obs[:, i, n + 1] = vm[:, kids].min(axis=1)
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
        p, q, flex_base = self.loads(demand)
        fl = flexible_load_step(
            self.flex,
            FlexibleLoadState(state.due_mwh, state.backlog_mwh),
            flex_base,
            act[:, _FLEX, 0],
            act[:, _FLEX, 1],
            dt_h,
            HORIZON - 1 - state.t,
        )
        p[:, self.flex_buses] += fl.p_mw
        q[:, self.flex_buses] += fl.q_mvar
        served_mw = p.sum(axis=1)
        p[:, self.bat_buses] -= bat.p_mw
        q[:, self.bat_buses] -= bat.q_mvar
        p[:, self.pv_buses] -= pv.p_mw
        q[:, self.pv_buses] -= pv.q_mvar
        flow = self.grid.solve(p, q, state.v_complex_pu)
        terms = np.empty((b, 4))
        terms[:, 0] = -(price * flow.p_loss_mw * dt_h)
        terms[:, 1] = -(price * pv.curtailed_mwh.sum(axis=1))
        terms[:, 2] = -(self.params.voll_per_mwh * fl.curtailed_mwh.sum(axis=1))
        throughput = bat.charge_mwh + bat.discharge_mwh
        terms[:, 3] = -(
            price * (bat.charge_mwh - bat.discharge_mwh).sum(axis=1)
            + (self.battery.degradation_cost_per_mwh * throughput).sum(axis=1)
        )
        costs = np.empty((b, 3))
        costs[:, :2] = flow.costs
        costs[:, 2] = (
            bat.soc_violation_mwh.sum(axis=1)
            + (bat.q_cut_mvar.sum(axis=1) + pv.q_cut_mvar.sum(axis=1)) * dt_h
            + fl.shift_refused_mwh.sum(axis=1)
        )
        applied = np.empty((b, _N, 2))
        applied[:, _BAT, 0], applied[:, _BAT, 1] = bat.p_mw, bat.q_mvar
        applied[:, _PV, 0], applied[:, _PV, 1] = pv.curtail_fraction, pv.q_mvar
        applied[:, _FLEX, 0], applied[:, _FLEX, 1] = fl.curtail_fraction, fl.shift_fraction
        prev_p = np.concatenate([bat.p_mw, pv.p_mw, -fl.p_mw], axis=1)
        prev_q = np.concatenate([bat.q_mvar, pv.q_mvar, -fl.q_mvar], axis=1)
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
        )
        return new_state, self.feeder_output(
            flow,
            terms.sum(axis=1),
            terms,
            costs,
            applied.reshape(b, 2 * _N),
            price_per_mwh=price,
            demand_pu=demand,
            net_load_mw=p.sum(axis=1),
            served_load_mw=served_mw,
            der_injection_mw=bat.p_mw.sum(axis=1) + pv.p_mw.sum(axis=1),
            soc=bat.soc,
            pv_available_mw=pv.available_mw,
            pv_curtailed_mwh=pv.curtailed_mwh.sum(axis=1),
            load_curtailed_mwh=fl.curtailed_mwh.sum(axis=1),
            load_shifted_mwh=fl.shifted_mwh.sum(axis=1),
            load_payback_mwh=fl.payback_mwh.sum(axis=1),
            load_backlog_mwh=fl.state.backlog_mwh,
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """TOU batteries + volt-var inverters, no curtailment (module docstring), from
        ``ders_local``
        observations [B, 12, d]: the physical joint action [B, 24]."""
        obs = obs.astype(np.float64)
        b = obs.shape[0]
        mode = tou_mode(
            self._tou, obs[:, 0, self._rule_t], HORIZON, self.profiles.steps_per_day
        )  # -1 charge, +1 discharge
        d = self._rule_dev
        p_bat = tou_battery_power_mw(
            self.battery, mode, obs[:, _BAT, d + 1], self.spec.dt_h, self.params.tou_steps
        )
        q_share = np.interp(obs[:, :, d], VOLT_VAR_V, VOLT_VAR_Q)  # [B, 12] Q per unit of S
        act = np.zeros((b, _N, 2))
        act[:, _BAT, 0] = p_bat
        q_lim = np.sqrt(np.maximum(self.battery.s_squared_mva2 - p_bat * p_bat, 0.0))
        act[:, _BAT, 1] = np.clip(q_share[:, _BAT] * self.battery.s_rating_mva, -q_lim, q_lim)
        pv_mw = obs[:, _PV, d + 2]
        q_lim = np.sqrt(np.maximum(self.pv.s_squared_mva2 - pv_mw * pv_mw, 0.0))
        act[:, _PV, 1] = np.clip(q_share[:, _PV] * self.pv.s_rating_mva, -q_lim, q_lim)
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
                int(state.day_id[row]), t0, state.soc[row], state.due_mwh[row]
            )
            plans[row, t0:] = day.actions
        return plans
