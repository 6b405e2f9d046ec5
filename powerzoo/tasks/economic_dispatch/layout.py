"""The parameters and spaces of the per-unit dispatch tasks (``marl_opf``, ``opf_118``,
``opf_118_7d``): their :class:`~powerzoo.tasks.spec.TaskSpec` and where each field block of an
observation mode sits."""

from __future__ import annotations

import dataclasses
from typing import Any

from powerzoo.data import calendar
from powerzoo.physics.network import NetworkCase
from powerzoo.tasks.balancing import (
    REGULATION_SHARE,
    check_regulation_keywords,
    regulation_price,
)
from powerzoo.tasks.spec import TaskSpec, VectorSpec, cmdp_fields
from powerzoo.tasks.transmission import (
    BASE_LOAD_SCALE,
    OVERLOAD_PRICE_PER_MWH,
    STEP_MINUTES,
    marginal_cost_per_mwh,
)

FORECAST_STEPS = 4
_FORECAST_FIELDS = tuple(f"system_load_t{k}_mw" for k in range(1, FORECAST_STEPS + 1))


@dataclasses.dataclass(frozen=True)
class DispatchParams:
    """The numbers of a dispatch episode; each is a task keyword."""

    # bus loads = the case's published base load x this x demand_pu
    load_scale: float = BASE_LOAD_SCALE
    # $/MWh settling the slack bus's energy beyond the regulation band, 25x the mean price
    imbalance_price_per_mwh: float = 1000.0
    # $ per MWh (= MVAh) of line overload, in the reward and the oracle's soft line limits
    overload_penalty_per_mwh: float = OVERLOAD_PRICE_PER_MWH
    # regulation band = this x the peak system load of the split's data year (MW)
    regulation_share: float = REGULATION_SHARE
    # $/MWh settling the slack's energy within the band; None: 2 x the units' highest marginal
    # cost, capped at the imbalance price (powerzoo.tasks.balancing)
    regulation_price_per_mwh: float | None = None

    def __post_init__(self) -> None:
        check_regulation_keywords(self.regulation_share, self.regulation_price_per_mwh)


def regulation_price_of(params: DispatchParams, case: NetworkCase) -> float:
    """The regulation price ($/MWh) of ``params`` on ``case``: the keyword, else
    :func:`~powerzoo.tasks.balancing.default_regulation_price` of the case's units in service."""
    return regulation_price(
        marginal_cost_per_mwh(case)[case.gen_in_service],
        params.imbalance_price_per_mwh,
        params.regulation_price_per_mwh,
    )


def dispatch_model_fields(
    params: DispatchParams, horizon: int, case: NetworkCase
) -> dict[str, Any]:
    """The :class:`~powerzoo.tasks.spec.TaskSpec` fields every dispatch task shares (``marl_opf``,
    ``opf_118``, ``opf_118_7d``, ``opf``) on ``case``: horizon and step, splits, reward terms,
    costs with their per-episode budgets (1 MVAh and 1 MWh a day, times the episode's days),
    baselines."""
    days = horizon * STEP_MINUTES / (24 * 60)
    return {
        "horizon": horizon,
        "step_minutes": STEP_MINUTES,
        # no low_renewable: the dispatch reads no PV or wind, so it would be the test split
        "splits": calendar.BASE_SPLITS + ("load_stress", "heatwave", "cold_snap"),
        "reward_terms": ("generation_cost", "imbalance_cost", "regulation_cost", "overload_cost"),
        "reward_doc": (
            "-(generation cost + |imbalance| beyond the regulation band "
            f"({100 * params.regulation_share:g} % of the peak load) x "
            f"{params.imbalance_price_per_mwh:g} $/MWh + |imbalance| within it x "
            f"{regulation_price_of(params, case):g} $/MWh + line overload x "
            f"{params.overload_penalty_per_mwh:g} $/MWh) per step ($), shared by all agents"
        ),
        **cmdp_fields(
            (
                ("thermal_overload", "MVAh", 1.0 * days, None),  # in the reward (overload price)
                # beyond the regulation band; in the reward (imbalance price)
                ("power_imbalance", "MWh", 1.0 * days, None),
            )
        ),
        "baselines": ("random", "rule_based", "oracle"),
    }


def _dispatch_spec(
    task_id: str,
    case: NetworkCase,
    horizon: int,
    description: str,
    gym_id: str | None,
    params: DispatchParams,
    energy_mwh: float = 0.0,
    baselines: tuple[str, ...] = ("random", "rule_based", "oracle"),
) -> TaskSpec:
    """The spec of a per-unit dispatch task on ``case``; with ``energy_mwh > 0`` (an
    energy-limited unit's budget, MWh) every mode ends with ``energy_left_mwh``."""
    n = case.n_gen
    agents = tuple(f"gen_{i}" for i in range(n))
    pmax_total = float(case.gen_pmax_mw.sum())
    load_hi = float(case.total_load_mw * params.load_scale * 1.3)
    bus_hi = float(case.bus_pd_mw.max() * params.load_scale * 1.3) or 1.0
    time_fields = (
        ("hour_sin", "-", -1.0, 1.0),
        ("hour_cos", "-", -1.0, 1.0),
        ("time_remaining", "fraction", 0.0, 1.0),
    )
    own = (
        ("own_pmin_mw", "MW", 0.0, float(case.gen_pmax_mw.max())),
        ("own_pmax_mw", "MW", 0.0, float(case.gen_pmax_mw.max())),
        (
            "own_marginal_cost_per_mwh",
            "$/MWh",
            0.0,
            float(marginal_cost_per_mwh(case).max()) * 1.5 + 1.0,
        ),
        ("own_prev_p_mw", "MW", 0.0, float(case.gen_pmax_mw.max())),
    )

    def vec(fields: tuple) -> VectorSpec:
        """Space bounds: wide finite ones for loads and imbalance, the nominal range elsewhere."""
        names, units, lo, hi = zip(*fields, strict=True)
        unbounded = ["load" in k or "imbalance" in k for k in names]
        low = tuple(-1e6 if u else v for u, v in zip(unbounded, lo, strict=True))
        high = tuple(1e6 if u else v for u, v in zip(unbounded, hi, strict=True))
        return VectorSpec(
            names=names, units=units, low=low, high=high, nominal_low=lo, nominal_high=hi
        )

    glob_fields = (
        time_fields
        + (("system_load_mw", "MW", 0.0, load_hi), ("system_load_next_mw", "MW", 0.0, load_hi))
        + own
        + (("prev_imbalance_mw", "MW", -pmax_total, pmax_total),)
    )
    energy = (("energy_left_mwh", "MWh", 0.0, float(energy_mwh)),) if energy_mwh > 0 else ()
    glob = vec(glob_fields + energy)
    local = vec(time_fields + (("bus_load_mw", "MW", 0.0, bus_hi),) + own + energy)
    forecast = vec(
        time_fields
        + (("bus_load_mw", "MW", 0.0, bus_hi),)
        + own
        + tuple((name, "MW", 0.0, load_hi) for name in _FORECAST_FIELDS)
        + energy
    )
    return TaskSpec(
        task_id=task_id,
        description=description,
        agents=agents,
        observation=glob,
        action=VectorSpec(
            names=tuple(f"{a}.p_mw" for a in agents),
            units=("MW",) * n,
            low=tuple(case.gen_pmin_mw.tolist()),
            high=tuple(case.gen_pmax_mw.tolist()),
        ),
        **{**dispatch_model_fields(params, horizon, case), "baselines": baselines},
        obs_modes=("global", "local", "local_plus_forecast"),
        obs_mode_specs={"global": glob, "local": local, "local_plus_forecast": forecast},
        default_obs_mode="global",
        gamma=0.999 if horizon > 200 else 0.99,
        gym_id=gym_id,
    )


@dataclasses.dataclass(frozen=True)
class _ObsSlots:
    """Where each block of one observation mode sits (from its spec; ``None``: not in the mode)."""

    width: int
    time: slice  # hour_sin, hour_cos, time_remaining
    own: slice  # own_pmin_mw, own_pmax_mw, own_marginal_cost_per_mwh
    prev_p: int  # own_prev_p_mw
    system_load: slice | None  # system_load_mw, system_load_next_mw
    prev_imbalance: int | None  # prev_imbalance_mw
    bus_load: int | None  # bus_load_mw
    forecast: slice | None  # system_load_t1_mw ... system_load_t{FORECAST_STEPS}_mw
    energy_left: int | None  # energy_left_mwh

    @classmethod
    def of(cls, spec: VectorSpec) -> _ObsSlots:
        return cls(
            width=spec.dim,
            time=spec.slot("hour_sin", "hour_cos", "time_remaining"),
            own=spec.slot("own_pmin_mw", "own_pmax_mw", "own_marginal_cost_per_mwh"),
            prev_p=spec.slot("own_prev_p_mw"),
            system_load=spec.optional_slot("system_load_mw", "system_load_next_mw"),
            prev_imbalance=spec.optional_slot("prev_imbalance_mw"),
            bus_load=spec.optional_slot("bus_load_mw"),
            forecast=spec.optional_slot(*_FORECAST_FIELDS),
            energy_left=spec.optional_slot("energy_left_mwh"),
        )
