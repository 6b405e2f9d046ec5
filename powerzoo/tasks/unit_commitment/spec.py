"""Parameters, network, fleet and specs of the unit-commitment tasks ``marl_uc`` (case5, five unit
agents) and ``tso`` (case118, one agent)."""

from __future__ import annotations

import dataclasses

from powerzoo.data import calendar
from powerzoo.devices.thermal_unit import ThermalFleet, fleet_from_case
from powerzoo.physics.network import NetworkCase
from powerzoo.tasks.balancing import REGULATION_SHARE, check_regulation_keywords, regulation_price
from powerzoo.tasks.spec import TaskSpec, VectorSpec
from powerzoo.tasks.transmission import (
    BASE_LOAD_SCALE,
    OVERLOAD_PRICE_PER_MWH,
    STEP_MINUTES,
    congestion_ready_case,
    marginal_cost_per_mwh,
)

__all__ = [
    "RESERVE_MARGIN",
    "IMBALANCE_PRICE",
    "OVERLOAD_PENALTY",
    "LINE_TIGHTENING_FACTOR",
    "REWARD_TERMS",
    "MARL_UC_REWARD_TERMS",
    "TIME_IN_STATE_CAP_H",
    "UCParams",
    "MarlUcParams",
    "marl_uc_spec",
    "tso_spec",
    "uc_case",
    "uc_fleet",
]

# spinning reserve requirement: 10 % of the load (tso: and N-1, the other online units' reserve
# covers each online unit's output), met by what the committed units can deliver in 10 minutes
RESERVE_MARGIN = 0.10
# $/MWh, settles the slack bus's balancing energy (marl_uc: beyond the regulation band), as in
# the dispatch tasks
IMBALANCE_PRICE = 1000.0
OVERLOAD_PENALTY = 1000.0  # $/MWh, reserve shortfall (penalized preset) and the MILP's slacks
LINE_TIGHTENING_FACTOR = 0.8  # line_tightening split: every finite rating x 0.8
TIME_IN_STATE_CAP_H = 24.0  # observed time in state is capped here (longer than any minimum time)
REWARD_TERMS = (
    "fuel_cost",
    "no_load_cost",
    "startup_cost",
    "shutdown_cost",
    "imbalance_cost",
    "overload_cost",
)
# marl_uc settles the mismatch within the regulation band apart (powerzoo.tasks.balancing)
MARL_UC_REWARD_TERMS = REWARD_TERMS[:5] + ("regulation_cost",) + REWARD_TERMS[5:]
_REWARD_DOC = (
    "-(fuel + no-load + start-up + shut-down cost + |imbalance|{band} x {price:g} $/MWh + "
    "line overload x {overload:g} $/MWh) per step ($){shared}"
)
_TIME = (
    ("hour_sin", "-", -1.0, 1.0),
    ("hour_cos", "-", -1.0, 1.0),
    ("time_remaining", "fraction", 0.0, 1.0),
)


@dataclasses.dataclass(frozen=True)
class UCParams:
    """The numbers of a unit-commitment episode; each is a task keyword."""

    # bus loads = the case's published base load x this x demand_pu (the load the line ratings
    # were derived for, as in the dispatch tasks)
    load_scale: float = BASE_LOAD_SCALE


@dataclasses.dataclass(frozen=True)
class MarlUcParams(UCParams):
    """The numbers of a ``marl_uc`` episode: :class:`UCParams` and the regulation band of its
    balancing settlement (:mod:`powerzoo.tasks.balancing`)."""

    # regulation band = this x the peak system load of the split's data year (MW)
    regulation_share: float = REGULATION_SHARE
    # $/MWh settling the slack's energy within the band; None: 2 x the units' highest marginal
    # cost, capped at the imbalance price
    regulation_price_per_mwh: float | None = None

    def __post_init__(self) -> None:
        check_regulation_keywords(self.regulation_share, self.regulation_price_per_mwh)

    def regulation_price_on(self, case: NetworkCase) -> float:
        """The regulation price ($/MWh) on ``case``: the keyword, else 2 x the highest marginal
        cost of its units in service, capped at :data:`IMBALANCE_PRICE`."""
        cost = marginal_cost_per_mwh(case)[case.gen_in_service]
        return regulation_price(cost, IMBALANCE_PRICE, self.regulation_price_per_mwh)


def uc_case(case_name: str, split: str) -> NetworkCase:
    """The task's network: ``opf_118``'s binding ratings (case5: published), x 0.8 on
    ``line_tightening``."""
    case = congestion_ready_case(case_name)
    if split == "line_tightening":
        case = dataclasses.replace(
            case, branch_rate_a_mw=case.branch_rate_a_mw * LINE_TIGHTENING_FACTOR
        )
    return case


def uc_fleet(case: NetworkCase) -> ThermalFleet:
    """The case's units with UC parameters by size class (:func:`fleet_from_case`)."""
    return fleet_from_case(
        case.gen_pmax_mw, case.gen_c1_per_mwh, case.gen_c2_per_mw2h, STEP_MINUTES / 60.0
    )


def _vector(fields: tuple) -> VectorSpec:
    """Bounds: wide finite ones for loads, capacity and imbalance, the nominal range elsewhere."""
    names, units, lo, hi = zip(*fields, strict=True)
    wide = ["load" in k or "imbalance" in k or "capacity" in k for k in names]
    low = tuple(-1e6 if w else v for w, v in zip(wide, lo, strict=True))
    high = tuple(1e6 if w else v for w, v in zip(wide, hi, strict=True))
    return VectorSpec(names=names, units=units, low=low, high=high, nominal_low=lo, nominal_high=hi)


def _system_fields(case: NetworkCase, load_scale: float) -> tuple:
    load_hi = float(case.total_load_mw * load_scale * 1.3)
    cap = float(case.gen_pmax_mw.sum())
    return _TIME + (
        ("system_load_mw", "MW", 0.0, load_hi),
        ("system_load_next_mw", "MW", 0.0, load_hi),
        ("committed_capacity_mw", "MW", 0.0, cap),
        ("prev_imbalance_mw", "MW", -cap, cap),
    )


def _action(case: NetworkCase, agents: tuple[str, ...]) -> VectorSpec:
    """``[p_mw, on]`` per unit, unit-major: output setpoint in [0, Pmax] and on/off (on if >
    0.5)."""
    names, units, low, high = [], [], [], []
    for i in range(case.n_gen):
        names += [f"gen_{i}.p_mw", f"gen_{i}.on"]
        units += ["MW", "-"]
        low += [0.0, 0.0]
        high += [float(case.gen_pmax_mw[i]), 1.0]
    return VectorSpec(names=tuple(names), units=tuple(units), low=tuple(low), high=tuple(high))


def _common(horizon: int, step_minutes: int) -> dict:
    return {
        "horizon": horizon,
        "step_minutes": step_minutes,
        "reward_terms": REWARD_TERMS,
        "baselines": ("random", "rule_based", "oracle"),
        "gamma": 0.99,
        "termination_doc": "never terminates early; episodes are truncated at the horizon",
    }


def marl_uc_spec(
    case: NetworkCase, fleet: ThermalFleet, params: MarlUcParams, horizon: int, step_minutes: int
) -> TaskSpec:
    """``marl_uc``: one agent per unit; per-agent observation ``global`` (system + own unit,
    default) or ``local`` (time, the load at the unit's bus, own unit)."""
    load_scale = params.load_scale
    agents = tuple(f"gen_{i}" for i in range(case.n_gen))
    pmax = float(fleet.pmax_mw.max())
    own = (
        ("own_pmin_mw", "MW", 0.0, pmax),
        ("own_pmax_mw", "MW", 0.0, pmax),
        ("own_average_cost_per_mwh", "$/MWh", 0.0, float(fleet.average_cost_per_mwh().max()) * 1.5),
        ("own_ramp_mw", "MW", 0.0, pmax),
        ("own_on", "-", 0.0, 1.0),
        ("own_time_in_state_h", "h", 0.0, TIME_IN_STATE_CAP_H),
        ("own_can_switch", "-", 0.0, 1.0),
        ("own_prev_p_mw", "MW", 0.0, pmax),
    )
    glob = _vector(_system_fields(case, load_scale) + own)
    bus_hi = float(case.bus_pd_mw.max() * load_scale * 1.3) or 1.0
    local = _vector(_TIME + (("own_bus_load_mw", "MW", 0.0, bus_hi),) + own)
    return TaskSpec(
        task_id="marl_uc",
        description=(
            "Five unit agents commit and dispatch the PJM 5-bus system (min up/down, ramps, "
            "shut-down ramp, start-up costs, 10 % spinning reserve) over one day."
        ),
        agents=agents,
        observation=glob,
        action=_action(case, agents),
        splits=calendar.BASE_SPLITS + ("load_stress", "heatwave"),
        reward_doc=_REWARD_DOC.format(
            band=(
                f" within the regulation band ({100 * params.regulation_share:g} % of the peak "
                f"load) x {params.regulation_price_on(case):g} $/MWh + beyond it"
            ),
            price=IMBALANCE_PRICE,
            overload=OVERLOAD_PRICE_PER_MWH,
            shared=", shared by all agents",
        ),
        constraint_names=("thermal_overload", "reserve_shortfall", "power_imbalance"),
        constraint_units=("MVAh", "MWh", "MWh"),
        selected_constraints=("thermal_overload", "reserve_shortfall", "power_imbalance"),
        cost_thresholds={"thermal_overload": 1.0, "reserve_shortfall": 1.0, "power_imbalance": 1.0},
        reward_presets={
            "objective": {},
            # thermal_overload is priced in the reward itself (overload_cost)
            "penalized": {"reserve_shortfall": OVERLOAD_PENALTY},
        },
        obs_modes=("global", "local"),
        obs_mode_specs={"global": glob, "local": local},
        default_obs_mode="global",
        **{**_common(horizon, step_minutes), "reward_terms": MARL_UC_REWARD_TERMS},
    )


def tso_spec(
    case: NetworkCase, fleet: ThermalFleet, load_scale: float, horizon: int, step_minutes: int
) -> TaskSpec:
    """``tso``: one agent commits and dispatches every unit; observation = system + per-unit
    blocks."""
    n = case.n_gen
    pmax = fleet.pmax_mw
    units = (
        tuple((f"gen_{i}.on", "-", 0.0, 1.0) for i in range(n))
        + tuple((f"gen_{i}.time_in_state_h", "h", 0.0, TIME_IN_STATE_CAP_H) for i in range(n))
        + tuple((f"gen_{i}.prev_p_mw", "MW", 0.0, float(pmax[i])) for i in range(n))
    )
    return TaskSpec(
        task_id="tso",
        description=(
            "A transmission operator commits and dispatches the 54 units of the IEEE 118-bus "
            "system (binding line limits, spinning reserve of 10 % of load and N-1: the other "
            "units' reserve covers each unit's output) over one day."
        ),
        agents=("operator",),
        observation=_vector(_system_fields(case, load_scale) + units),
        action=_action(case, ("operator",)),
        splits=calendar.BASE_SPLITS + ("load_stress", "line_tightening"),
        reward_doc=_REWARD_DOC.format(
            band="", price=IMBALANCE_PRICE, overload=OVERLOAD_PRICE_PER_MWH, shared=""
        ),
        constraint_names=("thermal_overload", "reserve_shortfall", "power_imbalance"),
        constraint_units=("MVAh", "MWh", "MWh"),
        selected_constraints=("thermal_overload", "reserve_shortfall"),
        cost_thresholds={"thermal_overload": 1.0, "reserve_shortfall": 1.0},
        reward_presets={
            "objective": {},
            # thermal_overload is priced in the reward itself (overload_cost)
            "penalized": {"reserve_shortfall": OVERLOAD_PENALTY},
        },
        gym_id="powerzoo/TSO-v0",
        **_common(horizon, step_minutes),
    )
