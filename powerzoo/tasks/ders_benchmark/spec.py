"""The ``marl_ders_benchmark`` spec: constants (where the DERs sit), parameters and spaces. The
model is described in :mod:`powerzoo.tasks.ders_benchmark`."""

from __future__ import annotations

import dataclasses

from powerzoo.data import calendar
from powerzoo.tasks.ders_benchmark.observation import (
    AGENTS,
    BATTERIES,
    LOADS,
    N_PER_KIND,
    PVS,
    observation_modes,
)
from powerzoo.tasks.feeder import FeederBatteryParams, grid_cost_rows
from powerzoo.tasks.spec import AgentGroup, TaskSpec, VectorSpec, cmdp_fields, mode_spec_fields

__all__ = [
    "BATTERY_BUSES",
    "CASE",
    "DER_BUSES",
    "FLEX_BUSES",
    "HORIZON",
    "PV_BUSES",
    "STEP_MINUTES",
    "VOLT_VAR_Q",
    "VOLT_VAR_V",
    "DersBenchmarkParams",
    "ders_benchmark_spec",
]

HORIZON = 48
STEP_MINUTES = 30
CASE = "case141"
BATTERY_BUSES = (47, 65, 29, 125)  # 0-based buses of case141
PV_BUSES = (86, 51, 79, 67)
FLEX_BUSES = (85, 78, 60, 70)
VOLT_VAR_V = (0.92, 0.98, 1.02, 1.08)  # IEEE 1547-2018 category B default curve (p.u.)
VOLT_VAR_Q = (0.44, 0.0, 0.0, -0.44)  # Q per unit of the S rating (+ injection)
DER_BUSES = BATTERY_BUSES + PV_BUSES + FLEX_BUSES
_K = N_PER_KIND
_N = 3 * _K
# the DERs' own costs, one physical unit each: name, unit, per-episode threshold, weight ($ per
# unit) in the "penalized" preset
_DEVICE_COSTS = (
    (
        "device_violation",
        "MWh (battery energy asked beyond the SOC bounds + load shift refused on the last step)",
        0.5,
        100.0,
    ),
    (
        "reactive_cut",
        "Mvarh (reactive power asked beyond the inverters' capability x dt)",
        0.5,
        100.0,
    ),
)


@dataclasses.dataclass(frozen=True)
class DersBenchmarkParams(FeederBatteryParams):
    """The numbers of a ``marl_ders_benchmark`` episode; each is a task keyword (the battery
    sizes, ``load_scale`` and ``tou_steps``: :class:`~powerzoo.tasks.feeder.FeederBatteryParams`,
    the case's published base load at ``load_scale = 1``)."""

    # each battery's inverter rating (MVA, 10 % above its power rating)
    battery_s_mva: float = 0.55
    # each PV inverter's peak output (MW) and inverter rating (MVA, 10 % above P)
    pv_mw: float = 1.3
    pv_s_mva: float = 1.43
    # reactive power from the PV inverters when there is no sun ("Q at night"): optional in
    # IEEE 1547-2018, so off by default (:mod:`powerzoo.devices.pv_inverter`)
    pv_q_at_night: bool = False
    # share of a flexible bus's published load that its unit controls
    flex_share: float = 0.5
    # curtail_max and shift_max of every flexible unit (fraction of its demand per step)
    flex_max_fraction: float = 0.3
    # steps over which shifted energy is paid back evenly (4 x 30 min = 2 h)
    payback_steps: int = 4
    # value of lost load ($/MWh) for curtailed load, 25x the mean price
    voll_per_mwh: float = 1000.0


def ders_benchmark_spec(task_id: str, params: DersBenchmarkParams) -> TaskSpec:
    """The spec of ``task_id`` (``marl_ders_benchmark``) for the DER sizes in ``params``."""
    p = params
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
        + [(f"{a}.shift", "fraction of the unit's demand", 0.0, p.flex_max_fraction) for a in LOADS]
    )
    # agent-major order: agent i's two entries are actions[i] and actions[i + 4] of its kind's
    # block
    ordered = [actions[8 * (i // _K) + (i % _K) + _K * j] for i in range(_N) for j in range(2)]
    names, units, low, high = zip(*ordered, strict=True)
    return TaskSpec(
        task_id=task_id,
        description=(
            "Four batteries, four PV inverters and four flexible loads on the 141-bus feeder "
            "(exact AC power "
            "flow) keep voltages in band at least cost: one team reward, minus losses, "
            "curtailed PV and load "
            "and the batteries' energy bill."
        ),
        agents=AGENTS,
        action=VectorSpec(names=names, units=units, low=low, high=high),
        horizon=HORIZON,
        step_minutes=STEP_MINUTES,
        splits=calendar.BASE_SPLITS + ("load_stress", "low_renewable", "price_spike"),
        reward_terms=(
            "loss_cost",
            "pv_curtailment_cost",
            "load_curtailment_cost",
            "battery_cost",
            "battery_settlement",
        ),
        reward_doc=(
            f"shared: -(price x losses x dt + price x curtailed PV MWh + {p.voll_per_mwh:g} "
            "$/MWh x curtailed "
            "load MWh + price x battery net charge MWh + "
            f"{p.degradation_cost_per_mwh:g} $/MWh x battery throughput) per "
            "step ($), and on the last step the batteries' stored energy's change since the "
            "start settled at the day's mean price"
        ),
        **cmdp_fields((*grid_cost_rows(1.0, 0.25), *_DEVICE_COSTS)),
        baselines=("random", "rule_based", "oracle", "idle"),
        idle_action=(0.0,) * len(names),
        idle_doc=(
            "the DERs left alone: batteries at 0 MW and 0 Mvar, PV not curtailed and at 0 Mvar, "
            "every flexible load served as it comes (no curtailment, no shift)"
        ),
        **mode_spec_fields(observation_modes(p.pv_mw), "ders_local"),
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
