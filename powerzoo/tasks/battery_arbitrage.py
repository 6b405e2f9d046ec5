"""``battery_arbitrage``: one grid-scale battery buying and selling energy at a market price.

Model
-----
* Parameters: a 100 MWh / 25 MW battery (4 h), charge and discharge efficiency 0.95 each,
  SOC bounds [0.1, 0.9], start SOC 0.5, wear 7.5 $/MWh of throughput (the shared wear model of
  :mod:`powerzoo.devices.battery`). Price taker on the day's price profile
  (:mod:`powerzoo.data.profiles`), 48 steps of 30 minutes.
* Action: power setpoint ``p_mw`` in [-25, 25] MW, + = discharge (sell), - = charge (buy).
  A request the SOC cannot serve is cut to the feasible power
  (:func:`~powerzoo.devices.battery.battery_step`).
* Reward, settled at the price of the step the action is taken in (observed before acting):
  ``price * p_discharge * dt - price * p_charge * dt - degradation_cost * |p| * dt`` ($), and
  the settlement of the stored energy marked to market: each step pays the change of its value,
  so the day's settlement terms sum to the settlement of the final SOC (the same return as
  paying it once at the end, with the credit where the energy moved).
  ``info["reward_terms"]`` holds the four signed terms ``[discharge_revenue, charge_payment,
  degradation, settlement]``; the reward is their sum.
* Settlement: the battery is given 40 MWh above its SOC floor at reset, and without a value on
  what is left at the end the best plan sells it (before this correction, measured on the
  earlier exogenous data and its 77 test days: a perfect-foresight plan that ends at the floor
  earned 2,650 $/day, 59 % of it the sale of that gift; re-solved with the end SOC held at the
  start it earned 1,089). So the change of stored energy ``e_T - e_0`` (storage side, MWh) is
  settled at ``m`` = the mean price of the
  episode's day: a surplus as if sold through the battery, ``eta_d (m - wear)`` per MWh, a
  deficit as if bought back, ``(m + wear) / eta_c`` per MWh
  (:func:`powerzoo.devices.battery.settlement_value`).
* Cost: ``soc_violation`` (MWh, storage side) = energy asked beyond the SOC bounds.
* Observation: ``[soc, price_per_mwh, price_avg_24h_per_mwh, hour_sin, hour_cos,
  time_remaining]``; ``price_avg_24h_per_mwh`` is the trailing 24 h mean price.
* Baselines: random; rule-based (:func:`rule_power_mw`: stored energy valued at the trailing
  24 h mean price, discharge when a sale beats buying it back there after wear and losses,
  charge in the mirror case, else head back to the start SOC, which it reaches by the day's
  end); oracle (perfect-foresight LP over the day with the settlement, HiGHS via highspy).
  Test split (65 days, ``high_renewable`` market), $/day: random -2,450, idle 0, rule 1,932,
  oracle 4,895 (71.5 $/kW-year; two scarcity days carry most of both: :class:`BatteryArbitrage`'s
  baselines). Under ``market="pjm_like"`` (the former calm price) the oracle earns about
  5 $/kW-year and idle is nearly as good (``powerzoo card battery_arbitrage``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.markets import DEFAULT_MARKET, check_market
from powerzoo.devices.battery import (
    BatteryDispatch,
    BatteryParams,
    feasible_power_mw,
    reach_start_soc_mw,
    settlement_value,
)
from powerzoo.physics.highs import new_highs
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.spec import PRICE_CAP, PRICE_FLOOR, TaskSpec, VectorSpec, cmdp_fields

__all__ = ["BatteryArbitrage", "BatteryArbitrageParams", "BatteryArbitrageState"]

HORIZON = 48
STEP_MINUTES = 30
_add_reduce = np.add.reduce  # ndarray.sum without its Python-level wrapper (the same values)
_BATTERY_FIELDS = tuple(f.name for f in dataclasses.fields(BatteryParams))


@dataclasses.dataclass(frozen=True)
class BatteryArbitrageParams:
    """What a ``battery_arbitrage`` episode is built from; task keywords are ``initial_soc``,
    ``rule_band_fraction``, ``market`` and the fields of :class:`BatteryParams`
    (``energy_capacity_mwh``, ...).
    """

    # a 100 MWh / 25 MW (4 h) grid-scale Li-ion battery: BatteryParams' defaults
    battery: BatteryParams = BatteryParams()
    # state of charge at reset (fraction of capacity), mid-range so either direction is open
    initial_soc: float = 0.5
    # margin of the rule's thresholds over break-even (fraction of the value of a stored MWh;
    # 0: trade whenever it pays at the trailing 24 h mean, tuned on the train and val splits)
    rule_band_fraction: float = 0.0
    # the price model (powerzoo.data.markets.MARKETS)
    market: str = DEFAULT_MARKET

    KEYWORDS: ClassVar[tuple[str, ...]] = (
        "initial_soc",
        "rule_band_fraction",
        "market",
        *_BATTERY_FIELDS,
    )

    def __post_init__(self) -> None:
        check_market(self.market)
        if not self.battery.soc_min <= self.initial_soc <= self.battery.soc_max:
            raise ValueError(
                f"initial_soc must lie in [{self.battery.soc_min}, {self.battery.soc_max}], "
                f"got {self.initial_soc}"
            )

    @classmethod
    def from_keywords(cls, **kwargs: Any) -> BatteryArbitrageParams:
        """Defaults with the task keywords in their place (battery ones go to ``battery``)."""
        battery = BatteryParams(**{k: v for k, v in kwargs.items() if k in _BATTERY_FIELDS})
        rest = {
            k: v if k == "market" else float(v)
            for k, v in kwargs.items()
            if k not in _BATTERY_FIELDS
        }
        return cls(battery=battery, **rest)


# gathered per calendar step from one table (they depend on the calendar step only)
EXOGENOUS_OBS = ("price_per_mwh", "price_avg_24h_per_mwh", "hour_sin", "hour_cos")


@dataclasses.dataclass(frozen=True)
class ObservationSlots:
    """Where observation fields sit (int or slice), computed once from the spec."""

    soc: int | slice
    price_per_mwh: int | slice
    price_avg_24h_per_mwh: int | slice
    exogenous: int | slice  # EXOGENOUS_OBS
    time_remaining: int | slice


@dataclasses.dataclass
class BatteryArbitrageState:
    """Batched state: every field is an array [B]."""

    day_id: np.ndarray  # split day index the episode started on (int64)
    t: np.ndarray  # steps elapsed (int64)
    soc: np.ndarray  # state of charge (fraction of capacity)
    settlement: np.ndarray  # derived: end-of-day settlement ($) of ``soc`` (one per step)


class BatteryArbitrage(Task):
    """Battery arbitrage against a day-ahead-shaped price (single agent, 30 min x 48).

    ## Description
    One grid-scale battery, a price taker, buys and sells energy at the market price of the
    calendar day's price profile: 100 MWh / 25 MW (4 h), charge and discharge efficiency 0.95
    each, SOC in [0.1, 0.9], wear 7.5 $ per MWh of throughput (the shared wear model of
    ``powerzoo.devices.battery``). 48 steps of 30 minutes.

    ## Action
    ``p_mw`` in [-25, 25] MW, + = discharge (sell), - = charge (buy). A request the SOC cannot
    serve is cut to the feasible power; ``info["action_applied"]`` holds what was applied.

    ## Observation
    ``[soc, price_per_mwh, price_avg_24h_per_mwh, hour_sin, hour_cos, time_remaining]``;
    ``price_avg_24h_per_mwh`` is the trailing 24 h mean price.

    ## Reward
    $ per step, settled at the price of the step the action is taken in (observed before acting):
    ``price x p_discharge x dt - price x p_charge x dt - 7.5 $/MWh x |p| x dt`` plus the
    settlement of the stored energy marked to market: the change of stored energy since reset
    (storage side, MWh) is valued at the day's mean price ``m``, a surplus as if sold through the
    battery (``eta_d (m - wear)`` per MWh), a deficit as if bought back (``(m + wear) / eta_c``),
    so selling the energy given at reset is no profit. ``info["reward_terms"]``:
    ``[discharge_revenue, charge_payment, degradation, settlement]``.

    ## Costs
    ``soc_violation`` (MWh, storage side): energy asked beyond the SOC bounds; per-episode budget
    in the table below.

    ## Starting state
    SOC 0.5 (40 MWh above the floor) at 00:00 of the split day.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    Battery parameters as task keywords (``make_env("battery_arbitrage", power_max_mw=50)``):
    ``energy_capacity_mwh``, ``power_max_mw``, ``charge_efficiency``, ``discharge_efficiency``,
    ``soc_min``, ``soc_max``, ``initial_soc``, ``degradation_cost_per_mwh``; ``rule_band_fraction``
    tunes the rule-based baseline; ``market`` picks the price model (``"high_renewable"``, the
    default, or ``"pjm_like"``: ``powerzoo.data.markets``).

    ## Baselines
    Random; rule-based (stored energy valued at the trailing 24 h mean price: discharge when a
    sale beats buying it back there after wear and losses, charge in the mirror case, else head
    back to the start SOC); oracle (perfect-foresight LP over the day with the settlement, HiGHS).
    On the default ``high_renewable`` market the test days' top-4 minus bottom-4 hour spread is
    70 $/MWh on average and the oracle earns 71.5 $/kW-year over idle; a round trip costs
    15 $/MWh of wear.

    Two scarcity test days (36 and 37, day-mean prices 248 and 168 $/MWh) hold 60 % of the
    oracle's test return and 78 % of the rule's: on the other 63 the oracle earns 2,006 $/day,
    the rule 449 (medians of all 65 days: 1,942 and 411). There the settlement at the day's mean
    price values energy kept to the end above what the remaining hours pay (the oracle ends day
    37 at SOC 0.9, credited 6,096 $): read a mean with its median and per-day returns.
    """

    task_id = "battery_arbitrage"

    Params = BatteryArbitrageParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = p = self.make_params(**task_kwargs)
        super().__init__(self.make_spec(**task_kwargs), split)
        self.battery = p.battery
        self.initial_soc = p.initial_soc
        price = self.profiles.series["price_per_mwh"]
        steps = self.profiles.steps_per_day
        # trailing mean of the previous 24 h (the wrap-around day supplies 1 January's past)
        padded = np.concatenate([price[-2 * steps : -steps], price])
        csum = np.concatenate([[0.0], np.cumsum(padded)])
        self._price_avg = (csum[steps:] - csum[:-steps])[: price.size] / steps
        self._price = price
        self._day_start = self.split_days * steps  # first calendar step of each split day
        # settlement price of each split day: the mean price of its steps ($/MWh)
        day_steps = self._day_start[:, None] + np.arange(steps)[None, :]
        self._settlement_price = price[day_steps].mean(axis=1)
        self._exogenous_obs = self._exogenous_table()
        # the step's battery: its constants as 0-d float64 arrays (the values of battery_step)
        self._dispatch = BatteryDispatch(p.battery, self.spec.dt_h)
        self._neg_wear = np.array(-p.battery.degradation_cost_per_mwh)
        obs = self.spec.observation
        self._obs_dim = obs.dim
        self._slots = ObservationSlots(
            soc=obs.slot("soc"),
            price_per_mwh=obs.slot("price_per_mwh"),
            price_avg_24h_per_mwh=obs.slot("price_avg_24h_per_mwh"),
            exogenous=obs.slot(*EXOGENOUS_OBS),
            time_remaining=obs.slot("time_remaining"),
        )

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def spec_for(cls, params: BatteryArbitrageParams) -> TaskSpec:
        battery = params.battery
        p = battery.power_max_mw
        return TaskSpec(
            task_id=cls.task_id,
            description=(
                f"One {battery.energy_capacity_mwh:g} MWh / {p:g} MW battery buys and sells "
                "energy at a "
                "market price (price taker) over one day; reward is arbitrage profit net of "
                "degradation."
            ),
            agents=("agent",),
            observation=VectorSpec(
                names=(
                    "soc",
                    "price_per_mwh",
                    "price_avg_24h_per_mwh",
                    "hour_sin",
                    "hour_cos",
                    "time_remaining",
                ),
                units=("fraction", "$/MWh", "$/MWh", "-", "-", "fraction of horizon"),
                low=(0.0, PRICE_FLOOR, PRICE_FLOOR, -1.0, -1.0, 0.0),
                high=(1.0, PRICE_CAP, PRICE_CAP, 1.0, 1.0, 1.0),
                nominal_low=(0.0, 0.0, 0.0, -1.0, -1.0, 0.0),
                nominal_high=(1.0, 150.0, 150.0, 1.0, 1.0, 1.0),
            ),
            action=VectorSpec(names=("p_mw",), units=("MW (+ discharge)",), low=(-p,), high=(p,)),
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            splits=calendar.BASE_SPLITS + calendar.STRESS_SPLITS,
            reward_terms=("discharge_revenue", "charge_payment", "degradation", "settlement"),
            reward_doc=(
                "price * discharged MWh - price * charged MWh - degradation $/MWh * throughput "
                "MWh ($) + the change of the stored energy's settlement value (its change since "
                "the start, settled at the day's mean price), paid step by step"
            ),
            **cmdp_fields((("soc_violation", "MWh", 1.0, 100.0),), objective="profit"),
            baselines=("random", "rule_based", "oracle", "idle"),
            idle_action=(0.0,),
            idle_doc=(
                "the battery stands still at 0 MW: no trade, no wear, the start SOC kept, so the "
                "return is 0 $ every day"
            ),
            forecast_series=("price_per_mwh",),
            gym_id="powerzoo/BatteryArbitrage-v0",
        )

    # ---- batched model ----------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> BatteryArbitrageState:
        day_id = self.check_day_id(day_id)
        soc = np.full(day_id.shape, self.initial_soc)
        return BatteryArbitrageState(
            day_id=day_id,
            t=np.zeros_like(day_id),
            soc=soc,
            settlement=self.settlement(day_id, soc),
        )

    def _exogenous_table(self) -> np.ndarray:
        """The EXOGENOUS_OBS fields of every calendar step [n_steps, 4] (float32), gathered by
        :meth:`observe`.

        ``[price, price_avg_24h, sin(phase), cos(phase)]``: they depend on the calendar step only
        (``phase`` on the step within the day, and a day starts at a multiple of ``steps_per_day``),
        computed once with the same expressions a per-step computation would use.
        """
        steps = self.profiles.steps_per_day
        phase = 2.0 * np.pi * (np.arange(self._price.size) % steps) / steps
        columns = {
            "price_per_mwh": self._price,
            "price_avg_24h_per_mwh": self._price_avg,
            "hour_sin": np.sin(phase),
            "hour_cos": np.cos(phase),
        }
        table = np.empty((self._price.size, len(EXOGENOUS_OBS)), dtype=np.float32)
        for i, name in enumerate(EXOGENOUS_OBS):
            table[:, i] = columns[name]
        return table

    def _flat_index(self, state: BatteryArbitrageState) -> np.ndarray:
        """Calendar step index [B] of each episode's current step."""
        return self._day_start.take(state.day_id) + state.t

    def observe(self, state: BatteryArbitrageState) -> np.ndarray:
        slots = self._slots
        obs = np.empty((state.soc.size, self._obs_dim), dtype=np.float32)
        obs[:, slots.soc] = state.soc
        obs[:, slots.exogenous] = self._exogenous_obs.take(self._flat_index(state), axis=0)
        obs[:, slots.time_remaining] = 1.0 - state.t / HORIZON
        return obs

    def step(
        self, state: BatteryArbitrageState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[BatteryArbitrageState, StepOutput]:
        price = self._price.take(self._flat_index(state))
        result = self._dispatch.step(state.soc, action[:, 0])
        terms = np.empty(
            (price.size, 4)
        )  # filled column by column: cheaper than np.stack at small B
        terms[:, 0] = price * result.discharge_mwh
        terms[:, 1] = -price * result.charge_mwh
        terms[:, 2] = self._neg_wear * (result.charge_mwh + result.discharge_mwh)
        # the settlement marked to market: each step pays the change of the end-of-day
        # settlement value, so the day's terms sum to the settlement of the final SOC (the value
        # at the step's start is the state's, worked out by the step before or the reset)
        settlement = self.settlement(state.day_id, result.soc)
        terms[:, 3] = settlement - state.settlement
        new_state = BatteryArbitrageState(
            day_id=state.day_id, t=state.t + 1, soc=result.soc, settlement=settlement
        )
        out = StepOutput(
            reward=_add_reduce(terms, axis=1),
            reward_terms=terms,
            constraint_costs=result.soc_violation_mwh[:, None],
            terminated=np.zeros(price.size, dtype=bool),
            action_applied=result.p_mw[:, None],
            info={
                "price_per_mwh": price,
                "soc": result.soc,
                "p_mw": result.p_mw,
                "charge_mwh": result.charge_mwh,
                "discharge_mwh": result.discharge_mwh,
            },
        )
        return new_state, out

    def settlement(self, day_id: np.ndarray, soc_end: np.ndarray) -> np.ndarray:
        """End-of-day settlement ($) [B] of episodes on split days ``day_id`` ending at SOC
        ``soc_end``: the stored energy's change since the start, valued at the day's mean price
        (:func:`~powerzoo.devices.battery.settlement_value`)."""
        b = self.battery
        return settlement_value(
            (soc_end - self.initial_soc) * b.energy_capacity_mwh,
            self._settlement_price.take(day_id),
            b.charge_efficiency,
            b.discharge_efficiency,
            b.degradation_cost_per_mwh,
        )

    # ---- baselines --------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Threshold rule with the wear and the efficiencies priced in, back at the start SOC by
        the day's end (module docstring)."""
        slots = self._slots
        soc, price, avg = (
            obs[:, slots.soc].astype(np.float64),
            obs[:, slots.price_per_mwh].astype(np.float64),
            obs[:, slots.price_avg_24h_per_mwh].astype(np.float64),
        )
        steps_left = np.rint(obs[:, slots.time_remaining].astype(np.float64) * HORIZON)
        return rule_power_mw(
            self.battery,
            soc,
            price,
            avg,
            steps_left,
            self.spec.dt_h,
            self.initial_soc,
            self.params.rule_band_fraction,
        )[:, None]

    def oracle_plan(self, state: BatteryArbitrageState) -> np.ndarray:
        """Profit-maximising power schedule [B, H, 1] with perfect price foresight (LP, HiGHS)."""
        plans = np.zeros((state.soc.size, HORIZON, 1))
        for row in range(state.soc.size):
            day = self.split_days[state.day_id[row]]
            t0 = int(state.t[row])
            prices = self._price[day * self.profiles.steps_per_day + np.arange(t0, HORIZON)]
            plans[row, t0:, 0] = _solve_arbitrage_lp(
                self.battery,
                prices,
                float(state.soc[row]),
                self.spec.dt_h,
                self.initial_soc,
                float(self._settlement_price[state.day_id[row]]),
            )
        return plans


def _solve_arbitrage_lp(
    battery: BatteryParams,
    price: np.ndarray,
    soc0: float,
    dt_h: float,
    soc_start: float,
    settlement_price: float,
) -> np.ndarray:
    """Net power schedule [H] (MW, + = discharge) maximising the day's profit: an LP on HiGHS.

    Maximise ``sum_t (price_t - deg) d_t dt - (price_t + deg) c_t dt`` plus the settlement
    ``eta_d (m - deg) s - (m + deg) / eta_c u`` over charge ``c_t`` and discharge ``d_t`` in
    ``[0, p_max]`` (MW), the stored energy ``e_t`` (MWh) within the SOC bounds, with ``e_t =
    e_{t-1} + eta_c c_t dt - d_t dt / eta_d`` from ``e_{-1} = soc0 * capacity``, and the
    surplus ``s`` and deficit ``u`` (MWh, >= 0) of the last ``e`` against the episode's start,
    ``e_T - s + u = soc_start * capacity``, settled at ``m = settlement_price``.
    Charging and discharging in one step only burns energy in the losses; it pays only at a price
    below ``-w (1 + eta_c eta_d) / (1 - eta_c eta_d)`` (-146 $/MWh at the default wear and
    efficiencies), under the markets' offer floor of -50 $/MWh, so the net schedule ``d - c`` is
    what the env can apply.
    """
    import highspy

    h = new_highs()
    cap, p_max = battery.energy_capacity_mwh, battery.power_max_mw
    charge = h.addVariables(price.size, lb=0.0, ub=p_max)
    discharge = h.addVariables(price.size, lb=0.0, ub=p_max)
    stored = h.addVariables(price.size, lb=battery.soc_min * cap, ub=battery.soc_max * cap)
    stored_in = (
        battery.charge_efficiency * dt_h * charge - dt_h / battery.discharge_efficiency * discharge
    )
    h.addConstr(stored[0] - stored_in[0] == soc0 * cap)
    h.addConstrs(stored[1:] - stored[:-1] - stored_in[1:] == 0.0)
    surplus, deficit = h.addVariable(lb=0.0), h.addVariable(lb=0.0)
    h.addConstr(stored[price.size - 1] - surplus + deficit == soc_start * cap)
    deg = battery.degradation_cost_per_mwh
    eta_c, eta_d = battery.charge_efficiency, battery.discharge_efficiency
    h.maximize(
        h.qsum((price - deg) * dt_h * discharge)
        - h.qsum((price + deg) * dt_h * charge)
        + eta_d * (settlement_price - deg) * surplus
        - (settlement_price + deg) / eta_c * deficit
    )
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"arbitrage LP failed: {h.modelStatusToString(h.getModelStatus())}")
    return h.vals(discharge) - h.vals(charge)


def rule_power_mw(
    battery: BatteryParams,
    soc: np.ndarray,
    price: np.ndarray,
    reference_price: np.ndarray,
    steps_left: np.ndarray,
    dt_h: float,
    soc_start: float,
    band: float,
) -> np.ndarray:
    """The rule's power [B] (MW, + discharge) from SOC, price and its reference ($/MWh) [B].

    A stored MWh is worth about ``v`` = the reference price (the trailing 24 h mean, the
    settlement's stand-in) and moving it costs the wear ``w`` and the efficiencies. The rule
    discharges as hard as the SOC allows when selling a stored MWh, ``(price - w) eta_d``, beats
    buying it back at ``v``, ``(v + w) / eta_c``, by the margin ``band``; it charges as hard as
    the SOC allows when buying a stored MWh, ``(price + w) / eta_c``, is below selling it at
    ``v``, ``(v - w) eta_d``, by that margin. Otherwise it heads back to the start SOC when the
    price is on the right side of ``v`` (below ``(1 - band) v`` to refill, above ``(1 + band)
    v`` to give back a surplus), and when full power over the later steps could no longer close
    the gap it moves at least the power that closes it now, so it ends the day at the start SOC
    when the rating allows (the settlement prices what is left).
    """
    wear = battery.degradation_cost_per_mwh
    eta_c, eta_d = battery.charge_efficiency, battery.discharge_efficiency
    cap = battery.energy_capacity_mwh
    p_ch_max, p_dis_max = feasible_power_mw(battery, soc, dt_h)
    v = reference_price
    dear = (price - wear) * eta_d > (1.0 + band) * (v + wear) / eta_c
    cheap = (price + wear) / eta_c < (1.0 - band) * (v - wear) * eta_d
    # storage-side MWh from the start SOC (+ above), and the powers that close it in this step
    gap = (soc - soc_start) * cap
    back_dis = np.clip(gap * eta_d / dt_h, 0.0, p_dis_max)
    back_ch = np.clip(-gap / (eta_c * dt_h), 0.0, p_ch_max)
    back = np.where(
        price > (1.0 + band) * v, back_dis, np.where(price < (1.0 - band) * v, -back_ch, 0.0)
    )
    p = np.where(dear, p_dis_max, np.where(cheap, -p_ch_max, back))
    # what full power over the later steps moves (grid side, MWh)
    later = np.maximum(steps_left - 1.0, 0.0) * battery.power_max_mw * dt_h
    return reach_start_soc_mw(p, gap, later, eta_c, eta_d, dt_h, p_ch_max, p_dis_max)
