"""The ``marl_ev_v2g`` spec: constants, parameters (the sites and their cars), where the sites
sit, and the spaces. The model is described in :mod:`powerzoo.tasks.ev_v2g`."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.markets import DEFAULT_MARKET, check_market
from powerzoo.devices.ev_fleet import EVFleetParams
from powerzoo.tasks.ev_v2g.observation import observation_modes
from powerzoo.tasks.feeder import grid_cost_rows
from powerzoo.tasks.feeder_ltc import FeederLtcParams
from powerzoo.tasks.spec import TaskSpec, VectorSpec, cmdp_fields, mode_spec_fields

__all__ = [
    "CASE",
    "EPISODE_DAYS",
    "HORIZON",
    "MAX_SITES",
    "MAX_VEHICLES_PER_SITE",
    "STEP_MINUTES",
    "EvV2gParams",
    "ev_v2g_spec",
    "site_buses",
]

HORIZON = 168
STEP_MINUTES = 60
EPISODE_DAYS = 7
CASE = "case33bw"
MAX_SITES, MAX_VEHICLES_PER_SITE = 64, 200  # bounds of the task keywords


def site_buses(n_sites: int, n_bus: int = 33) -> np.ndarray:
    """0-based buses of ``n_sites`` charging sites, spread evenly over the load buses 1..n_bus-1."""
    return 1 + np.floor((np.arange(n_sites) + 0.5) * (n_bus - 1) / n_sites).astype(np.int64)


def _check_count(name: str, value: Any, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"marl_ev_v2g: {name} must be an integer, got {value!r}")
    if not 1 <= value <= high:
        raise ValueError(f"marl_ev_v2g: {name} must lie in [1, {high}], got {value}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class EvV2gParams(FeederLtcParams):
    """The numbers of a ``marl_ev_v2g`` episode; each is a task keyword (the head's tap changer:
    :class:`~powerzoo.tasks.feeder_ltc.FeederLtcParams`)."""

    # charging sites (agents), spread evenly over the feeder's load buses
    n_evs: int = 5
    # cars per site; None: the default fleet (``fleet_vehicles``) split over the sites
    vehicles_per_site: int | None = None
    # cars of the default fleet when vehicles_per_site is not given
    fleet_vehicles: int = 420
    # bus loads = the case's base load x this x demand_pu
    load_scale: float = 0.7
    # range of the cars' state of charge at reset (fraction), drawn uniformly
    initial_soc: tuple[float, float] = (0.5, 0.8)
    # the rule sells V2G in this many dearest hours of the average day
    peak_hours: int = 3
    # the cars: 60 kWh batteries on 7.2 kW bidirectional chargers (EVFleetParams' defaults)
    fleet: EVFleetParams = EVFleetParams()
    # the price model (powerzoo.data.markets.MARKETS)
    market: str = DEFAULT_MARKET

    def __post_init__(self) -> None:
        check_market(self.market)
        n = _check_count("n_evs", self.n_evs, MAX_SITES)
        object.__setattr__(self, "n_evs", n)
        per_site = self.vehicles_per_site
        v = (
            max(1, round(self.fleet_vehicles / n))
            if per_site is None
            else _check_count("vehicles_per_site", per_site, MAX_VEHICLES_PER_SITE)
        )
        object.__setattr__(self, "vehicles_per_site", v)


def ev_v2g_spec(task_id: str, params: EvV2gParams) -> TaskSpec:
    """The spec of ``task_id`` (``marl_ev_v2g``) for the sites and cars in ``params``."""
    n, v, fleet = params.n_evs, params.vehicles_per_site, params.fleet
    agents = tuple(f"site_{i}" for i in range(n))
    p = fleet.charge_max_kw
    return TaskSpec(
        task_id=task_id,
        description=(
            f"{n} EV charging sites of {v} cars with 7.2 kW V2G chargers on the IEEE 33-bus "
            "feeder (exact AC "
            "power flow) over a week of stochastic commutes: each site pays for its charging "
            "and earns V2G "
            "revenue, must send every car off with its target charge and keep the feeder in "
            "limits."
        ),
        agents=agents,
        action=VectorSpec(
            names=tuple(f"{a}.ev_{j}.p_kw" for a in agents for j in range(v)),
            units=("kW (+ discharge)",) * (n * v),
            low=(-p,) * (n * v),
            high=(fleet.discharge_max_kw,) * (n * v),
        ),
        horizon=HORIZON,
        step_minutes=STEP_MINUTES,
        splits=calendar.BASE_SPLITS
        + ("load_stress", "heatwave", "cold_snap", "low_renewable", "price_spike"),
        reward_terms=("v2g_revenue", "charging_cost", "v2g_wear", "settlement"),
        reward_doc=(
            "per agent: own price x (discharged - charged kWh) / 1000 - V2G wear ($ per step), "
            "and on the last step its cars' stored energy's change since the start settled at "
            "the week's mean price; reward_terms are the team sums"
        ),
        # budgets per week: the daily rates of the one-day tasks (5 kWh of shortfall, 0.5
        # p.u.-steps of voltage violation, 0.25 MVAh of overload a day) times the 7 days
        **cmdp_fields(
            (
                ("departure_shortfall", "kWh (sum over leaving cars)", 5.0 * EPISODE_DAYS, 1.0),
                *grid_cost_rows(0.5 * EPISODE_DAYS, 0.25 * EPISODE_DAYS),
            ),
            objective="profit",
        ),
        baselines=("random", "rule_based", "oracle", "idle"),
        # a charger nobody steers charges a car at its rating from plug-in until the battery is
        # full (the charger stops at soc_max): "uncontrolled charging"
        idle_action=(-p,) * (n * v),
        idle_doc=(
            "uncontrolled charging: every plugged-in car charges at the charger's full rating "
            "until its battery is full, no V2G (what chargers do without an operator; a fleet "
            "at 0 kW would send every car off short of its goal)"
        ),
        **mode_spec_fields(observation_modes(n, v, fleet, HORIZON), "global"),
        shared_reward=False,
        gamma=0.999,
        termination_doc=(
            "never terminates early; episodes are truncated at the horizon (the end of the week)"
        ),
    )
