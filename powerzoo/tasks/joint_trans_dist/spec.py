"""The ``joint_trans_dist`` spec: where the feeders hang, the parameters, the agents and the
observation fields. The model is described in :mod:`powerzoo.tasks.joint_trans_dist`."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.profiles import get_profiles
from powerzoo.devices.battery import WEAR_COST_PER_MWH
from powerzoo.physics.cases import NetworkCase
from powerzoo.tasks.balancing import REGULATION_SHARE, check_regulation_keywords, regulation_price
from powerzoo.tasks.feeder import FeederModel, grid_cost_rows
from powerzoo.tasks.feeder_observation import FeederSlots, price_forecast_fields
from powerzoo.tasks.spec import AgentGroup, TaskSpec, VectorSpec, cmdp_fields, mode_spec_fields
from powerzoo.tasks.transmission import (
    BASE_LOAD_SCALE,
    OVERLOAD_PRICE_PER_MWH,
    marginal_cost_per_mwh,
)

__all__ = [
    "head_power_high_mw",
    "merit_order_price",
    "idle_tables",
    "FeederHookup",
    "JointParams",
    "Slots",
    "joint_spec",
    "FORECAST_STEPS",
    "STEP_MINUTES",
]

STEP_MINUTES = 30
FORECAST_STEPS = 4  # expected boundary prices of the local_plus_forecast observation
_BIG = 1e6  # space bound of loads and imbalances (their nominal ranges are finite)


@dataclasses.dataclass(frozen=True)
class FeederHookup:
    """One distribution feeder hung at a transmission bus: its radial case, the 0-based
    transmission bus whose load its head power adds to, the 0-based feeder buses of its
    batteries (one agent each) and ``copies``, the number of identical copies of the feeder
    behind that bus (each with its batteries; all run alike: the bus sees ``copies`` x one
    copy's head power, and the batteries' actions are one copy's)."""

    case_name: str
    boundary_bus: int
    battery_buses: tuple[int, ...]
    copies: int = 1

    def __post_init__(self) -> None:
        if int(self.copies) < 1:
            raise ValueError(f"copies must be >= 1, got {self.copies!r}")


@dataclasses.dataclass(frozen=True)
class JointParams:
    """The numbers of a coupled episode; each is a task keyword."""

    # transmission bus loads = the case's base load x this x demand_pu
    load_scale: float = BASE_LOAD_SCALE
    # feeder bus loads = the feeder case's base load x this x demand_pu (as marl_der_arbitrage)
    feeder_load_scale: float = 0.75
    # $/MWh settling the slack bus's energy beyond the regulation band (either sign)
    imbalance_price_per_mwh: float = 1000.0
    # $ per MWh (= MVAh) of transmission line overload, in the reward and the oracle
    overload_penalty_per_mwh: float = OVERLOAD_PRICE_PER_MWH
    # each battery's energy (MWh) and power rating (MW)
    energy_mwh: float = 2.0
    power_mw: float = 0.5
    # each battery's wear ($ per MWh of grid-side throughput, each leg; powerzoo.devices.battery)
    degradation_cost_per_mwh: float = WEAR_COST_PER_MWH
    # half-hours of charging and of discharging in the rule-based time-of-use schedule
    tou_steps: int = 8
    # the oracle plans the feeder voltages in [0.95 + m, 1.05 - m] p.u.
    oracle_margin_pu: float = 0.005
    # the oracle plans every rated branch's flow within (1 - this) x its rating (room for the
    # feeders' losses, which its plan holds at their idle value)
    oracle_line_margin: float = 0.0
    # each substation transformer's fixed tap is set so that its feeder's head voltage with the
    # batteries idle averages this over the data year (powerzoo.tasks.joint_trans_dist.boundary)
    head_mean_vm_pu: float = 1.02
    # regulation band = this x the peak system load (feeders' head power included) of the
    # split's data year (MW)
    regulation_share: float = REGULATION_SHARE
    # $/MWh settling the slack's energy within the band; None: 2 x the units' highest marginal
    # cost, capped at the imbalance price (powerzoo.tasks.balancing)
    regulation_price_per_mwh: float | None = None

    def __post_init__(self) -> None:
        for name in ("load_scale", "energy_mwh", "power_mw", "head_mean_vm_pu"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in (
            "feeder_load_scale",
            "imbalance_price_per_mwh",
            "overload_penalty_per_mwh",
            "degradation_cost_per_mwh",
        ):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not 0.0 <= self.oracle_line_margin < 1.0:
            raise ValueError(
                f"oracle_line_margin must be in [0, 1), got {self.oracle_line_margin!r}"
            )
        if not 1 <= self.tou_steps <= 24:
            raise ValueError(f"tou_steps must be in 1..24 half-hours, got {self.tou_steps!r}")
        check_regulation_keywords(self.regulation_share, self.regulation_price_per_mwh)

    def regulation_price_on(self, case: NetworkCase) -> float:
        """The regulation price ($/MWh) on ``case`` (:func:`powerzoo.tasks.balancing.
        regulation_price` of its units in service)."""
        return regulation_price(
            marginal_cost_per_mwh(case)[case.gen_in_service],
            self.imbalance_price_per_mwh,
            self.regulation_price_per_mwh,
        )


def agent_names(case: NetworkCase, feeders: tuple[FeederHookup, ...]) -> tuple[tuple, tuple]:
    """``(generator agents, battery agents)``: ``gen_i`` per unit, ``battery_k`` over the
    feeders' batteries in order."""
    n_bat = sum(len(f.battery_buses) for f in feeders)
    return tuple(f"gen_{i}" for i in range(case.n_gen)), tuple(f"battery_{k}" for k in range(n_bat))


def head_power_high_mw(feeders: tuple[FeederHookup, ...]) -> float:
    """Nominal high (MW) of the feeders' total head power: 3 MW per feeder copy (a case33bw's
    peak draw), 9 MW per case141 copy."""
    return float(sum((9.0 if f.case_name == "case141" else 3.0) * f.copies for f in feeders))


def _fields(case: NetworkCase, params: JointParams, n_bat: int, head_hi: float) -> dict[str, tuple]:
    """Per-agent observation rows of each mode: (name, unit, low, high, nominal_low,
    nominal_high). Every agent has every field; a field that does not apply to its kind is 0."""
    pmax = float(case.gen_pmax_mw.max())
    mc_hi = float(max(case.gen_c1_per_mwh.max(), 1.0)) * 1.5
    load_hi = float(case.total_load_mw * params.load_scale * 1.3)
    bus_hi = float(case.bus_pd_mw.max() * params.load_scale * 1.3)
    p = params.power_mw
    common = (
        ("hour_sin", "-", -1.0, 1.0, -1.0, 1.0),
        ("hour_cos", "-", -1.0, 1.0, -1.0, 1.0),
        ("time_remaining", "fraction of horizon", 0.0, 1.0, 0.0, 1.0),
        ("is_generator", "one-hot", 0.0, 1.0, 0.0, 1.0),
        ("is_battery", "one-hot", 0.0, 1.0, 0.0, 1.0),
        ("price_per_mwh", "$/MWh (day-ahead LMP)", -_BIG, _BIG, 0.0, mc_hi),
        ("own_min_mw", "MW", -pmax, pmax, -p, pmax),
        ("own_max_mw", "MW", -pmax, pmax, 0.0, pmax),
        ("own_marginal_cost_per_mwh", "$/MWh", 0.0, _BIG, 0.0, mc_hi),
        ("own_prev_p_mw", "MW (+ into the grid)", -pmax, pmax, -p, pmax),
        ("own_soc", "fraction", 0.0, 1.0, 0.0, 1.0),
        ("own_v_pu", "p.u. (0 for generators)", 0.0, 1.2, 0.0, 1.0),
        ("own_bus_load_mw", "MW", -_BIG, _BIG, 0.0, bus_hi),
    )
    system = (
        ("system_load_mw", "MW (transmission buses)", -_BIG, _BIG, 0.0, load_hi),
        ("system_load_next_mw", "MW (transmission buses)", -_BIG, _BIG, 0.0, load_hi),
        ("feeder_idle_p_mw", "MW (head power, batteries idle)", -_BIG, _BIG, 0.0, head_hi),
        ("feeder_p_mw", "MW (head power, last step)", -_BIG, _BIG, 0.0, head_hi),
        ("prev_imbalance_mw", "MW", -_BIG, _BIG, -pmax, pmax),
        ("v_min_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
        ("v_max_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
    )
    socs = tuple((f"soc_battery_{k}", "fraction", 0.0, 1.0, 0.0, 1.0) for k in range(n_bat))
    forecast = tuple(
        (name, unit, -_BIG, _BIG, 0.0, mc_hi)
        for name, unit, *_ in price_forecast_fields(FORECAST_STEPS)
    )
    return {
        "global": common + system + socs,
        "local": common,
        "local_plus_forecast": common + forecast,
    }


@dataclasses.dataclass(frozen=True)
class Slots(FeederSlots):
    """Where the fields of one observation mode sit (``None``: not in the mode)."""

    kind: slice  # is_generator, is_battery
    own: slice  # own_min_mw .. own_bus_load_mw (7 fields)
    system: slice | None  # system_load_mw .. v_max_pu
    socs: slice | None
    forecast: slice | None

    @staticmethod
    def task_slots(spec: VectorSpec) -> dict[str, Any]:
        own = ("own_min_mw", "own_bus_load_mw")
        socs = tuple(n for n in spec.names if n.startswith("soc_battery_"))
        ahead = tuple(n for n in spec.names if n.startswith("price_t"))
        system = spec.optional_slot("system_load_mw", "v_max_pu")
        return {
            "kind": spec.slot("is_generator", "is_battery"),
            "own": slice(spec.slot(own[0]), spec.slot(own[1]) + 1),
            "system": None
            if system is None
            else slice(spec.slot("system_load_mw"), spec.slot("v_max_pu") + 1),
            "socs": spec.slot(*socs) if len(socs) > 1 else None,
            "forecast": spec.slot(*ahead) if ahead else None,
        }


def joint_spec(
    task_id: str,
    description: str,
    case: NetworkCase,
    feeders: tuple[FeederHookup, ...],
    horizon: int,
    params: JointParams,
) -> TaskSpec:
    """The spec of a coupled transmission-distribution task on ``case`` with ``feeders``."""
    gens, bats = agent_names(case, feeders)
    agents = gens + bats
    days = horizon * STEP_MINUTES / (24 * 60)
    p = params.power_mw
    return TaskSpec(
        task_id=task_id,
        description=description,
        agents=agents,
        action=VectorSpec(
            names=tuple(f"{a}.p_mw" for a in agents),
            units=("MW",) * len(gens) + ("MW (+ discharge)",) * len(bats),
            low=tuple(case.gen_pmin_mw.tolist()) + (-p,) * len(bats),
            high=tuple(case.gen_pmax_mw.tolist()) + (p,) * len(bats),
        ),
        horizon=horizon,
        step_minutes=STEP_MINUTES,
        # no low_renewable: neither side reads PV or wind, so it would be the test split
        splits=calendar.BASE_SPLITS + ("load_stress", "heatwave", "cold_snap"),
        reward_terms=(
            "generation_cost",
            "imbalance_cost",
            "regulation_cost",
            "overload_cost",
            "battery_wear",
            "battery_settlement",
        ),
        reward_doc=(
            "shared: -(generation cost + |imbalance| beyond the regulation band "
            f"({100 * params.regulation_share:g} % of the peak load) x "
            f"{params.imbalance_price_per_mwh:g} $/MWh + |imbalance| within it x "
            f"{params.regulation_price_on(case):g} $/MWh + transmission overload x "
            f"{params.overload_penalty_per_mwh:g} $/MWh + "
            f"{params.degradation_cost_per_mwh:g} $/MWh x battery throughput) per "
            "step ($; the feeders' head power, losses included, is load the generators serve), "
            "and on the last step the batteries' stored energy's change since the start settled "
            "at the episode's mean expected boundary price"
        ),
        # per-episode budgets: per day as marl_opf (transmission) and marl_der_arbitrage
        # (feeder), times the episode's days
        **cmdp_fields(
            (
                ("thermal_overload", "MVAh (transmission branches)", 1.0 * days, None),
                ("power_imbalance", "MWh", 1.0 * days, None),  # beyond the regulation band
                *(
                    (f"{'feeder_' if name == 'thermal_overload' else ''}{name}", unit, b, w)
                    for name, unit, b, w in grid_cost_rows(0.2 * days, 0.25 * days)
                ),
                ("soc_violation", "MWh (sum over batteries)", 0.5 * days, 100.0),
            )
        ),
        baselines=("random", "rule_based", "oracle", "separate", "flex_idle"),
        **mode_spec_fields(_fields(case, params, len(bats), head_power_high_mw(feeders)), "global"),
        shared_reward=True,
        agent_groups=(
            AgentGroup("transmission", gens, "generating units: [p_mw]"),
            AgentGroup("distribution", bats, "feeder batteries: [p_mw (+ discharge)]"),
        ),
    )


def merit_order_price(
    case: NetworkCase, marginal_cost: np.ndarray, total_load_mw: np.ndarray, scarcity: float
) -> np.ndarray:
    """Marginal price ($/MWh) [B] of demand ``total_load_mw`` [B] (MW) in a uniform-price energy
    market: the marginal cost of the unit the merit order loads last to meet it (units at their
    minimum first, then cheapest first, network ignored); ``scarcity`` where the demand exceeds
    every unit's maximum, the cheapest unit's cost below their total minimum."""
    order = np.argsort(marginal_cost, kind="stable")
    room = np.cumsum((case.gen_pmax_mw - case.gen_pmin_mw)[order])
    above_min = np.asarray(total_load_mw, dtype=np.float64) - case.gen_pmin_mw.sum()
    k = np.searchsorted(room, above_min, side="left")
    price = np.append(marginal_cost[order], scarcity)
    return price.take(k)


@functools.lru_cache(maxsize=16)
def idle_tables(scenario: str, case_name: str, load_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Head power (MW) and squared voltages [n_steps, n_bus] of feeder ``case_name`` with its
    units idle, at every calendar step of ``scenario``'s profiles (read-only)."""
    profiles = get_profiles(scenario, STEP_MINUTES)
    grid = FeederModel(case_name, profiles, np.zeros(1, np.int64), load_scale, 0.5)
    head, v2 = [], []
    for block in np.array_split(profiles.series["demand_pu"], 16):
        flow = grid.solve(*grid.bus_loads(block))
        head.append(flow.info["feeder_p_mw"])
        v2.append(flow.vm_pu**2)
    out = np.concatenate(head), np.concatenate(v2)
    for a in out:
        a.setflags(write=False)
    return out
