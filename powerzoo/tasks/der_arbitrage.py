"""``marl_der_arbitrage``: three batteries on the IEEE 33-bus feeder trade energy at the market
price.

Model (multi-agent, 30-minute steps, 48 per episode = one calendar day)
-----------------------------------------------------------------------
* Feeder: ``case33bw`` with an exact AC power flow every step (:mod:`powerzoo.tasks.feeder`);
  bus loads = the case's base load x ``load_scale = 0.75`` x the calendar load shape
  ``demand_pu``, less ``pv_mw = 6.5`` MW of rooftop PV (1.75 x the published peak load: a
  high-hosting feeder) spread over the buses in proportion to their published load, unity power
  factor, output ``pv_mw x pv_cf``. At the head an on-load tap changer under its automatic
  voltage controller (:mod:`powerzoo.tasks.feeder_ltc`; ``ltc=False``: the head fixed at
  1.00 p.u.) holds the head at 1.019 p.u., which lifts the evening sag into the band.
* Sizing (measured on the 65 test days, ``benchmarks/compute_baselines.py``): with the
  batteries idle, the midday reverse flow of the PV lifts the far ends above 1.05 p.u. (up to
  1.079): 0.41 p.u.-steps of ``voltage_violation`` a day, above the 0.2 budget on 25 days
  (38.5 %); a time-of-use rule blind to the voltage is over it on 22 (33.8 %); the
  perfect-foresight plan, which charges the batteries from the midday surplus, keeps it on every
  day (0.003 a day). With the head fixed at 1.00 p.u. the idle feeder is over budget on 4 days
  only: the controller that lifts the evening sag pushes the midday rise out of the band. (On
  the earlier sizing, no PV, the LTC left no day over budget, against 9 at 1.00 p.u.)
* Agents ``battery_0..2``: inverter batteries (:mod:`powerzoo.devices.inverter_battery`) of
  2 MWh / 0.5 MW (0.55 MVA inverters), efficiencies 0.95, SOC in [0.1, 0.9], start SOC 0.5,
  wear 7.5 $/MWh of throughput (:mod:`powerzoo.devices.battery`), at 0-based buses
  ``BATTERY_BUSES = (16, 23, 31)`` (1-based 17, 24, 32: one bus short of the ends of the main
  trunk and of the two long laterals).
* Action per agent: ``p_mw`` in [-0.5, 0.5] MW (+ = discharge into the feeder); reactive power
  is 0 (the batteries trade active power only). A request the SOC cannot serve is cut to the
  feasible power
  and the energy asked beyond the bounds is the ``soc_violation`` cost.
* Reward, **per agent** (``shared_reward=False``): each battery's own arbitrage profit at the
  data layer's ``price_per_mwh`` in $ per step, ``price x (discharged - charged MWh) -
  7.5 $/MWh x throughput``, paid on delivered power, and on the last step the settlement of its
  stored energy: the change since the start (storage side) at the day's mean price ``m``, a
  surplus as sold through the battery (``eta_d (m - wear)`` per MWh), a deficit as bought back
  (``(m + wear) / eta_c``), so the 0.4 MWh each battery is given above its floor at reset is
  not free to sell (:func:`powerzoo.devices.battery.settlement_value`). ``info["reward_terms"]``
  holds the team sums ``[discharge_revenue, charge_payment, degradation, settlement]``;
  ``info["agent_profit"]`` the [3] split. A reward preset (``reward="penalized"`` or a dict of
  weights) gives every agent the team value.
* Costs (all selected): ``voltage_violation`` (p.u. outside [0.95, 1.05] summed over buses, per
  step), ``thermal_overload`` (MVAh: overload energy above the line ratings summed over
  branches, ``sum_k max(|S_k| - S_rated_k, 0) x dt``), ``soc_violation`` (MWh asked beyond the SOC
  bounds, summed over batteries); per-episode thresholds 0.2 p.u., 0.25 MVAh, 0.5 MWh.
* Observation modes (``env.observation_fields(agent)``; grid values from the previous step's
  flow, at reset from the first step's loads with the batteries idle):
  ``global`` (default): time, price, ``demand_pu``, ``feeder_p_mw``, ``v_min_pu``, ``v_max_pu``,
  every battery's SOC, then the own block ``own_soc, own_prev_p_mw, own_v_pu, own_bus_load_mw``;
  ``local``: time, price and the own block; ``local_plus_forecast``: ``local`` + the price of the
  next 4 steps; ``local_plus_voltage``: ``local`` + the voltages of the neighbouring buses
  (``upstream_v_pu`` of the parent bus, ``downstream_v_pu`` the lowest of the child buses).
* Splits: train / val / test by date; stress splits ``load_stress``, ``heatwave``, ``cold_snap``,
  ``low_renewable`` (dearer, more peaked prices) and ``price_spike``.
* Baselines (65 test days, ``benchmarks/compute_baselines.py``; the sum of the agents'
  returns): random; rule-based = "solar soak" (:mod:`powerzoo.tasks.feeder_rules`) on a
  time-of-use schedule from the price data (:func:`powerzoo.tasks.tariffs.tou_battery_power_mw`:
  in the 8 cheapest half-hours of the average train day a battery may charge, in the 8 dearest
  it may discharge, a quarter of its usable energy per hour, when the trade pays after wear and
  losses against the mean train-day price, else it steps back towards its start SOC; what it
  lacks at the end the settlement buys back). On top, from its observation: in the 3 h before
  the sun (the steps where the average day's PV is at least 25 % of its peak) a battery empties
  to its SOC floor; while the higher of its own bus voltage and ``v_max_pu`` is above
  1.035 p.u. it takes no schedule charge, and it charges at least an integrating volt-watt
  control (holding 1.049 p.u., floored by the droop from 0 at 1.03 to the rating at 1.055).
  Measured: +159 $/day, over the budget on 2 days (3.1 %; the time-of-use rule blind to the
  voltage: +157, 33.8 %). Oracle = a perfect-foresight day plan of all three batteries
  maximising the team profit with the settlement, one LP on HiGHS
  (:mod:`powerzoo.tasks.der_arbitrage_oracle`) with the SOC model and the voltage band on
  LinDistFlow linearised around the exact flow of the day's loads (band narrowed by 0.002 p.u.
  for the linearisation error), then applied under the exact flow (+289 $/day, within the
  budget every day). The task card (``powerzoo card marl_der_arbitrage``) has every row.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.devices.inverter_battery import (
    inverter_battery_reset,
    inverter_battery_settlement,
    inverter_battery_step,
)
from powerzoo.scratch import ROW_BLOCK
from powerzoo.tasks.base import StepOutput
from powerzoo.tasks.der_arbitrage_oracle import solve_day
from powerzoo.tasks.feeder import (
    FeederBatteryParams,
    FeederTask,
    grid_cost_rows,
    voltage_sq_sensitivity,
)
from powerzoo.tasks.feeder import (
    row_sum as _row_sum,
)
from powerzoo.tasks.feeder_observation import (
    SYSTEM_FIELDS,
    TIME_PRICE_FIELDS,
    FeederSlots,
    neighbour_fields,
    price_forecast_fields,
    write_system_fields,
)
from powerzoo.tasks.feeder_rules import solar_soak_power_mw, sun_steps
from powerzoo.tasks.spec import TaskSpec, VectorSpec, cmdp_fields, mode_spec_fields
from powerzoo.tasks.tariffs import (
    reference_price_per_mwh,
    tou_battery_power_mw,
    tou_mode,
    tou_schedule,
)

__all__ = ["MarlDerArbitrage", "DerArbitrageParams", "DerArbitrageState", "BATTERY_BUSES"]

HORIZON = 48
STEP_MINUTES = 30
CASE = "case33bw"
BATTERY_BUSES = (16, 23, 31)  # 0-based; one bus short of the ends of the trunk and the laterals
FORECAST_STEPS = 4  # price look-ahead of the local_plus_forecast observation
_N = len(BATTERY_BUSES)
_count_nonzero = np.count_nonzero


@dataclasses.dataclass(frozen=True)
class DerArbitrageParams(FeederBatteryParams):
    """The numbers of a ``marl_der_arbitrage`` episode; each is a task keyword (the battery
    sizes and ``tou_steps``: :class:`~powerzoo.tasks.feeder.FeederBatteryParams`)."""

    # each battery's energy (MWh): a 4 h system (0.5 MW), the duration of the grid batteries
    # being built; a 2 h one earns about half as much per kW on the high_renewable market's
    # evening peaks and scarcity hours
    energy_mwh: float = 2.0

    # bus loads = the case's base load x this x demand_pu
    load_scale: float = 0.75
    # rooftop PV installed on the feeder (MW AC), spread over the buses in proportion to their
    # published base load, unity power factor, output = this x the calendar's pv_cf: with the
    # head at the AVC's 1.019 p.u. its midday rise leaves the band on 38 % of the test days
    pv_mw: float = 6.5
    # the oracle plans in [0.95 + m, 1.05 - m] p.u.: 1.5 MW swings linearise less well
    oracle_margin_pu: float = 0.002


AGENTS = tuple(f"battery_{i}" for i in range(_N))

_TIME = TIME_PRICE_FIELDS
_SOCS = tuple((f"soc_battery_{i}", "fraction", 0.0, 1.0, 0.0, 1.0) for i in range(_N))
_GLOBAL = SYSTEM_FIELDS + _SOCS
_FORECAST = price_forecast_fields(FORECAST_STEPS)
_NEIGHBOURS = neighbour_fields()


def _modes(power_mw: float) -> dict[str, tuple]:
    """Observation fields of each mode: (name, unit, low, high, nominal_low, nominal_high)."""
    own = (
        ("own_soc", "fraction", 0.0, 1.0, 0.0, 1.0),
        ("own_prev_p_mw", "MW", -power_mw, power_mw, -power_mw, power_mw),
        ("own_v_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
        ("own_bus_load_mw", "MW", 0.0, 2.0, 0.0, 0.3),
    )
    return {
        "global": _TIME + _GLOBAL + own,
        "local": _TIME + own,
        "local_plus_forecast": _TIME + own + _FORECAST,
        "local_plus_voltage": _TIME + own + _NEIGHBOURS,
    }


@dataclasses.dataclass(frozen=True)
class _Slots(FeederSlots):
    """Where the fields of one observation mode sit (``None``: not in the mode)."""

    own_soc: int
    own_prev_p: int
    own_v: int
    own_load: int
    system: int | None  # SYSTEM_FIELDS
    socs: slice | None  # soc_battery_0..2
    forecast: slice | None  # price_t1..t4
    neighbours: int | None  # upstream_v_pu, then downstream_v_pu

    @staticmethod
    def task_slots(spec: VectorSpec) -> dict[str, Any]:
        return {
            "own_soc": spec.slot("own_soc"),
            "own_prev_p": spec.slot("own_prev_p_mw"),
            "own_v": spec.slot("own_v_pu"),
            "own_load": spec.slot("own_bus_load_mw"),
            "system": spec.optional_slot("demand_pu"),
            "socs": spec.optional_slot(*(f[0] for f in _SOCS)),
            "forecast": spec.optional_slot(*(f[0] for f in _FORECAST)),
            "neighbours": spec.optional_slot("upstream_v_pu"),
        }


@dataclasses.dataclass
class DerArbitrageState:
    """Batched state; every field has leading axis ``B``."""

    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    soc: np.ndarray  # [B, 3] state of charge
    prev_p_mw: np.ndarray  # [B, 3] power delivered last step (+ discharge)
    vm_pu: np.ndarray  # [B, n_bus] last flow's voltage magnitudes
    feeder_p_mw: np.ndarray  # [B] last flow's head power
    v_complex_pu: np.ndarray  # [B, n_bus] last flow's voltages (warm start)
    ltc_tap: np.ndarray  # [B] the head's tap position (powerzoo.tasks.feeder_ltc)
    ltc_timer: np.ndarray  # [B] steps the regulated voltage has been outside the AVC band
    ltc_operations: np.ndarray  # [B] tap operations since reset


class MarlDerArbitrage(FeederTask):
    """Three feeder batteries doing price arbitrage under the feeder's voltage and thermal limits.

    ## Description
    Three inverter batteries (2 MWh / 0.5 MW, 0.55 MVA, efficiencies 0.95, SOC in [0.1, 0.9],
    wear 7.5 $/MWh) at 0-based buses 16, 23 and 31 of the IEEE 33-bus feeder trade at the market
    price. Bus loads are the base load x 0.75 x the calendar load shape less 6.5 MW of rooftop PV,
    one exact AC flow per 30-minute step; the head's tap changer holds it at 1.019 p.u. The PV's
    midday reverse flow lifts the far ends above 1.05 p.u. unless the batteries absorb it.

    The AVC's set point sets much of that rise: without control, 38.5 % of the test days are
    over budget at the band centre 1.025 p.u., 6.2 % at 1.00 (``ltc_band_centre_pu=1.0``). The
    batteries' inverters could also absorb reactive power (0.55 MVA at 0.5 MW leaves 0.23
    Mvar), which this task does not give them: its decision is active-power arbitrage under a
    fixed set point.

    ## Action
    Per agent ``p_mw`` in [-0.5, 0.5] MW (+ discharge into the feeder); reactive power 0. A request
    the SOC cannot serve is cut (the energy asked beyond the bounds is ``soc_violation``).

    ## Observation
    Mode ``global`` (default): time, price, ``demand_pu``, ``feeder_p_mw``, ``v_min_pu``,
    ``v_max_pu``, every battery's SOC and the own block ``own_soc, own_prev_p_mw, own_v_pu,
    own_bus_load_mw``; also ``local``, ``local_plus_forecast`` and ``local_plus_voltage``.

    ## Reward
    Per agent, $ per step: ``price x (discharged - charged MWh) - 7.5 $/MWh x throughput``, and on
    the last step the settlement of the battery's stored energy at the day's mean price.

    ## Costs
    ``voltage_violation`` (p.u.), ``thermal_overload`` (MVAh), ``soc_violation`` (MWh).

    ## Starting state
    Every battery at SOC 0.5; grid fields from the flow of the first step's loads with the
    batteries idle.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``load_scale`` (0.75), ``pv_mw`` (6.5), ``energy_mwh``, ``power_mw``, ``tou_steps``
    (half-hours of the rule's charge and discharge windows), ``oracle_margin_pu``, ``market``
    (``powerzoo.data.markets``); the tap changer's ``ltc``, ``ltc_band_centre_pu``,
    ``ltc_bandwidth_pu``, ``ltc_ldc_r_pu``, ``ltc_ldc_x_pu`` (:mod:`powerzoo.tasks.feeder_ltc`).

    ## Baselines
    Random; rule-based "solar soak" on a time-of-use schedule: empty before the sun, charge from
    the surplus by a volt-watt control, sell at the evening peak (+159 $/day, over budget on 3 %
    of the test days); oracle = a perfect-foresight day plan of all three batteries (one LP on
    HiGHS, voltage band on LinDistFlow), applied under the exact flow (+289 $/day).
    """

    step_block_rows = ROW_BLOCK  # the power flow's [n_bus, rows] work arrays stay in the caches

    task_id = "marl_der_arbitrage"
    Params = DerArbitrageParams
    case_name = CASE
    ObsSlots = _Slots

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        super().__init__(split, **task_kwargs)
        p, grid, spd = self.params, self.grid, self.profiles.steps_per_day
        self.battery = p.inverter_batteries(_N)
        self.buses = np.asarray(BATTERY_BUSES)
        self.locate_neighbours(self.buses)
        self._own_load_mw = grid.bus_p_mw[self.buses]  # own bus load per unit of demand_pu
        self.pv_cf = self.profiles.series["pv_cf"]
        self.pv_bus_mw = p.pv_mw * grid.case.bus_pd_mw / grid.case.bus_pd_mw.sum()
        self._forecast_offsets = np.arange(1, FORECAST_STEPS + 1)
        self._tou = tou_schedule(spd, p.tou_steps, STEP_MINUTES, p.market)
        self._reference_price = reference_price_per_mwh(spd, STEP_MINUTES, p.market)
        glob = self.spec.observation
        self._rule_t, self._rule_soc = glob.slot("time_remaining"), glob.slot("own_soc")
        self._rule_price = glob.slot("price_per_mwh")
        self._rule_v, self._rule_vmax = glob.slot("own_v_pu"), glob.slot("v_max_pu")
        self._rule_prev = glob.slot("own_prev_p_mw")
        self._sun = sun_steps(spd, STEP_MINUTES, p.market)

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def spec_for(cls, params: DerArbitrageParams) -> TaskSpec:
        power_mw = params.power_mw
        return TaskSpec(
            task_id=cls.task_id,
            description=(
                f"Three {params.energy_mwh:g} MWh / {power_mw:g} MW batteries on the IEEE 33-bus "
                "feeder (exact AC power flow) "
                "buy and sell "
                "energy at the market price; each agent is paid its own arbitrage profit, under "
                "the feeder's "
                "voltage and thermal limits."
            ),
            agents=AGENTS,
            action=VectorSpec(
                names=tuple(f"{a}.p_mw" for a in AGENTS),
                units=("MW (+ discharge)",) * _N,
                low=(-power_mw,) * _N,
                high=(power_mw,) * _N,
            ),
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            splits=calendar.BASE_SPLITS
            + ("load_stress", "heatwave", "cold_snap", "low_renewable", "price_spike"),
            reward_terms=("discharge_revenue", "charge_payment", "degradation", "settlement"),
            reward_doc=(
                "per agent: own price x (discharged - charged MWh) - "
                f"{params.degradation_cost_per_mwh:g} $/MWh x throughput ($ per "
                "step), and on the last step its stored energy's change since the start settled "
                "at the day's mean price; reward_terms are the team sums"
            ),
            **cmdp_fields(
                (
                    *grid_cost_rows(0.2, 0.25),
                    ("soc_violation", "MWh (sum over batteries)", 0.5, 100.0),
                ),
                objective="profit",
            ),
            baselines=("random", "rule_based", "oracle", "idle"),
            idle_action=(0.0,) * _N,
            idle_doc=(
                "every battery stands still at 0 MW: no trade, no wear, the start SOC kept (0 $ "
                "a day); the feeder's own loads still leave the voltage band on some days"
            ),
            **mode_spec_fields(_modes(power_mw), "global"),
            shared_reward=False,
        )

    # ---- batched model ----------------------------------------------------------------------
    def net_loads(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bus net demand ``(p_mw, q_mvar)`` [B, n_bus] at calendar steps ``flat`` [B]: the
        loads less the rooftop PV, batteries idle."""
        p, q = self.grid.bus_loads(self.grid.demand_pu.take(flat))
        p -= self.pv_cf.take(flat)[:, None] * self.pv_bus_mw
        return p, q

    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> DerArbitrageState:
        day_id, t, flat = self.first_step(day_id)
        b = day_id.size
        p, q = self.net_loads(flat)
        flow, ltc = self.grid_reset(p, q)
        soc = inverter_battery_reset(self.battery, b)
        return DerArbitrageState(
            day_id,
            t,
            soc,
            np.zeros((b, _N)),
            flow.vm_pu,
            flow.info["feeder_p_mw"],
            flow.v_complex_pu,
            ltc.tap,
            ltc.timer,
            ltc.operations,
        )

    def observe(self, state: DerArbitrageState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations [B, 3, obs_dim] (float32) of ``obs_mode`` (default ``global``)."""
        slots, obs, flat = self.begin_agent_observation(state, obs_mode, _N)
        demand = self.grid.demand_pu.take(flat)
        vm = state.vm_pu
        obs[:, :, slots.own_soc] = state.soc
        obs[:, :, slots.own_prev_p] = state.prev_p_mw
        obs[:, :, slots.own_v] = vm[:, self.buses]
        obs[:, :, slots.own_load] = demand[:, None] * self._own_load_mw
        if slots.system is not None:
            write_system_fields(obs, slots.system, demand, state.feeder_p_mw, vm)
        if slots.socs is not None:
            obs[:, :, slots.socs] = state.soc[:, None, :]
        if slots.forecast is not None:
            ahead = self.grid.price_per_mwh.take(flat[:, None] + self._forecast_offsets)
            obs[:, :, slots.forecast] = ahead[:, None, :]
        if slots.neighbours is not None:
            self.write_neighbour_voltages(obs, vm, slots.neighbours, slots.neighbours + 1)
        return obs

    def step(
        self, state: DerArbitrageState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[DerArbitrageState, StepOutput]:
        dt_h = self.spec.dt_h
        flat = self.grid.flat_index(state.day_id, state.t)
        price = self.grid.price_per_mwh.take(flat)
        result = inverter_battery_step(self.battery, state.soc, action, np.zeros_like(action), dt_h)
        p, q = self.net_loads(flat)
        p[:, self.buses] -= result.p_mw
        flow, ltc, _ = self.grid_step(state, p, q)
        revenue = price[:, None] * result.discharge_mwh
        payment = price[:, None] * result.charge_mwh
        wear = self.battery.degradation_cost_per_mwh * (result.charge_mwh + result.discharge_mwh)
        profit = revenue - payment - wear  # [B, 3] each agent's own reward
        b = state.t.size
        terms = np.empty((b, 4))
        terms[:, 0] = _row_sum(revenue)
        terms[:, 1] = -_row_sum(payment)
        terms[:, 2] = -_row_sum(wear)
        terms[:, 3] = 0.0
        end = state.t + 1 == HORIZON
        if _count_nonzero(end):  # the last step: settle each battery's stored energy
            settled = inverter_battery_settlement(
                self.battery, result.soc[end], self.settlement_price(state.day_id[end])
            )
            profit[end] += settled
            terms[end, 3] = _row_sum(settled)
        costs = np.empty((b, 3))
        costs[:, :2] = flow.costs
        costs[:, 2] = _row_sum(result.soc_violation_mwh)
        new_state = DerArbitrageState(
            state.day_id,
            state.t + 1,
            result.soc,
            result.p_mw,
            flow.vm_pu,
            flow.info["feeder_p_mw"],
            flow.v_complex_pu,
            ltc.tap,
            ltc.timer,
            ltc.operations,
        )
        return new_state, self.feeder_output(
            flow,
            profit,
            terms,
            costs,
            result.p_mw,
            price_per_mwh=price,
            net_load_mw=_row_sum(p),
            soc=result.soc,
            battery_p_mw=result.p_mw,
            agent_profit=profit,
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Solar soak (:func:`~powerzoo.tasks.feeder_rules.solar_soak_power_mw`) on the
        time-of-use schedule, acting on the higher of the own bus voltage and ``v_max_pu``, from
        ``global`` observations [B, 3, d]: [B, 3] MW."""
        obs = obs.astype(np.float64)
        remaining = obs[:, 0, self._rule_t]
        spd = self.profiles.steps_per_day
        soc = obs[:, :, self._rule_soc]
        tou = tou_battery_power_mw(  # no forced return to the start SOC: the settlement buys back
            self.battery,
            tou_mode(self._tou, remaining, HORIZON, spd),
            soc,
            self.spec.dt_h,
            self.params.tou_steps,
            obs[:, 0, self._rule_price],
            self._reference_price,
            np.full(remaining.shape, np.inf),
        )
        step = np.rint((1.0 - remaining) * HORIZON).astype(np.int64) % spd
        v = np.maximum(obs[:, :, self._rule_v], obs[:, :, self._rule_vmax])
        prev = obs[:, :, self._rule_prev]
        return solar_soak_power_mw(self.battery, tou, soc, v, prev, step, self._sun, self.spec.dt_h)

    def oracle_plan(self, state: DerArbitrageState) -> np.ndarray:
        """Team-profit-maximising battery powers [B, H, 3] with perfect foresight of prices and
        loads.

        One LP per episode on HiGHS (:func:`~powerzoo.tasks.der_arbitrage_oracle.solve_day`): the
        SOC model of the batteries and the voltage band on LinDistFlow, linearised around the
        exact flow of the day's net loads with the batteries idle, at the head of the current
        tap; the plan is then applied (and scored) under the exact power flow.
        """
        plans = np.zeros((state.t.size, HORIZON, _N))
        sens = voltage_sq_sensitivity(self.grid.case, self.buses)
        for row in range(state.t.size):
            t0, flat = self.rest_of_day(state, row)
            p, q = self.net_loads(flat)
            v2_base = self.grid.solve(p, q, head_vm_pu=self.head_vm_pu(state, row)).vm_pu ** 2
            plans[row, t0:] = solve_day(
                self.battery,
                self.grid.price_per_mwh.take(flat),
                state.soc[row],
                v2_base,
                sens,
                self.spec.dt_h,
                self.params.oracle_margin_pu,
                float(self.settlement_price(state.day_id[row : row + 1])[0]),
            )
        return plans
