"""``volt_var_123``'s parameters and spec: the feeder's devices, the PV fleet, the spaces.

The IEEE 123-node feeder has four regulator banks: ``reg1`` (three-phase, ganged, at the
substation), ``reg2`` (phase A), ``reg3`` (phases A and C) and ``reg4`` (phases A, B and C); each
single-phase unit of reg3 and reg4 has its own RegControl, so there are seven tap positions
(``REGULATORS``, the transformer names of the OpenDSS files). Four shunt capacitors
(``CAPACITORS``). Rooftop PV sits behind ``PV_LOADS``: the 32 of the 91 spot loads whose
customers have adopted it, a fixed draw (40 % of the loads, ``numpy.random.default_rng(0)``)
that leaves PV unevenly spread over the phases and laterals, as adoption is.
"""

from __future__ import annotations

import dataclasses

from powerzoo.data import calendar
from powerzoo.data.markets import DEFAULT_MARKET, check_market
from powerzoo.devices.tap_changer import WEAR_COST_PER_OPERATION
from powerzoo.tasks.feeder_observation import TIME_PRICE_FIELDS
from powerzoo.tasks.spec import TaskSpec, VectorSpec, cmdp_fields

__all__ = [
    "CAPACITORS",
    "HORIZON",
    "PV_LOADS",
    "REGULATORS",
    "STEP_MINUTES",
    "TAP_STEPS",
    "VoltVarParams",
    "volt_var_spec",
]

STEP_MINUTES = 30
HORIZON = 48  # one day
TAP_STEPS = 16  # +-16 positions of 0.625 % (the files' 0.9-1.1 p.u. in 32 steps)
REGULATORS = ("reg1a", "reg2a", "reg3a", "reg3c", "reg4a", "reg4b", "reg4c")
CAPACITORS = ("c83", "c88a", "c90b", "c92c")
PV_LOADS = (
    "s2b", "s4c", "s5c", "s17c", "s20a", "s24c", "s30c", "s32c", "s33a", "s38b", "s46a",
    "s47", "s49b", "s52a", "s55a", "s58b", "s59b", "s62c", "s64b", "s65c", "s68a", "s69a",
    "s70a", "s74c", "s75c", "s76b", "s76c", "s79a", "s82a", "s84c", "s85c", "s112a",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class VoltVarParams:
    """The numbers of a ``volt_var_123`` episode; each is a task keyword."""

    # spot loads = the published kW / kvar x this x demand_pu: the files' loading is reached at
    # demand_pu 0.83, about the typical daily peak of the test days
    load_scale: float = 1.2
    # AC rating of an adopting load's PV aggregate per kW of the load's published demand: its
    # customers' arrays (about 7.5 kW on homes of about 2 kW average demand); 4.65 MW in all,
    # 1.1 x the feeder's annual peak load
    pv_kw_per_load_kw: float = 3.75
    # reactive power limit of each inverter, +- this x the array's AC rating, while the array
    # gives at least 5 % of its rating (below, at dawn, dusk and night, the inverters sleep: no
    # reactive power). The inverters are rated 1.1 x the array, so this is 40 % of their kVA,
    # a little under IEEE 1547-2018 category B's 44 % of the rating, and it fits beside full
    # active output (0.44^2 + 1 < 1.1^2)
    pv_reactive_fraction: float = 0.44
    # $ per tap operation (powerzoo.devices.tap_changer: overhaul every 50,000-100,000)
    tap_wear_cost_per_operation: float = WEAR_COST_PER_OPERATION
    # $ per capacitor switching (vacuum switches of about 10,000 operations at a few thousand $
    # each, with the crew: an order-of-magnitude estimate)
    capacitor_wear_cost_per_operation: float = 1.0
    # per-episode budget of voltage_violation (p.u.-hours summed over bus-phases)
    voltage_budget_pu_h: float = 0.5
    # "penalized" preset: $ per p.u.-hour of voltage violation
    penalty_per_pu_h: float = 1000.0
    # the price model of the losses (powerzoo.data.markets.MARKETS)
    market: str = DEFAULT_MARKET

    def __post_init__(self) -> None:
        check_market(self.market)
        for name in ("load_scale", "voltage_budget_pu_h"):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in (
            "pv_kw_per_load_kw",
            "pv_reactive_fraction",
            "tap_wear_cost_per_operation",
            "capacitor_wear_cost_per_operation",
            "penalty_per_pu_h",
        ):
            if not getattr(self, name) >= 0.0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")


def _rows(prefix: str, names: tuple[str, ...], suffix: str, *row: object) -> tuple:
    return tuple((f"{prefix}{n}{suffix}", *row) for n in names)


def observation_rows() -> tuple:
    """Observation rows ``(name, unit, low, high, nominal_low, nominal_high)``."""
    v = ("p.u.", 0.0, 1.5, 0.9, 1.1)
    taps = float(TAP_STEPS)
    return (
        *TIME_PRICE_FIELDS[:3],
        ("demand_pu", "p.u. of annual peak", 0.0, 2.0, 0.0, 1.0),
        ("pv_cf", "fraction of PV AC rating", 0.0, 1.0, 0.0, 1.0),
        TIME_PRICE_FIELDS[3],
        *_rows("", REGULATORS, "_tap", "tap position", -taps, taps, -taps, taps),
        *_rows("", CAPACITORS, "_on", "1 in service, 0 out", 0.0, 1.0, 0.0, 1.0),
        *_rows("", REGULATORS, "_v", "V on the 120 V base", 0.0, 200.0, 114.0, 126.0),
        *_rows("", CAPACITORS, "_v_pu", *v),
        *(("v_min_" + ph, *v) for ph in "abc"),
        *(("v_max_" + ph, *v) for ph in "abc"),
        ("losses_kw", "kW", 0.0, 5000.0, 0.0, 200.0),
        ("head_kw", "kW", -20000.0, 20000.0, -3000.0, 5000.0),
        ("head_kvar", "kvar", -20000.0, 20000.0, -1000.0, 3000.0),
        *_rows("pv_", PV_LOADS, "_v_pu", *v),
    )


def volt_var_spec(task_id: str, params: VoltVarParams) -> TaskSpec:
    """The spec of ``volt_var_123`` for ``params``."""
    p = params
    taps = float(TAP_STEPS)
    actions = (
        *_rows("", REGULATORS, ".tap", "tap position (rounded)", -taps, taps),
        *_rows("", CAPACITORS, ".on", "switch (>= 0.5: in service)", 0.0, 1.0),
        *_rows("pv_", PV_LOADS, ".q", "fraction of the reactive limit (> 0 injects)", -1, 1),
    )
    names, units, low, high = zip(*actions, strict=True)
    idle = (0.0,) * len(REGULATORS) + (1.0,) * len(CAPACITORS) + (0.0,) * len(PV_LOADS)
    return TaskSpec(
        task_id=task_id,
        description=(
            "Volt-var control of the IEEE 123-node feeder (batched three-phase power flow) "
            "with rooftop PV: seven regulator taps, four capacitor switches and 32 PV "
            "inverters' reactive power keep every phase in [0.95, 1.05] p.u. at least cost "
            "of losses and wear."
        ),
        agents=("agent",),
        observation=VectorSpec.from_rows(observation_rows()),
        action=VectorSpec(
            names=names,
            units=units,
            low=tuple(float(x) for x in low),
            high=tuple(float(x) for x in high),
        ),
        horizon=HORIZON,
        step_minutes=STEP_MINUTES,
        splits=calendar.BASE_SPLITS + ("load_stress", "heatwave", "cold_snap", "low_renewable"),
        reward_terms=("loss_cost", "tap_wear", "capacitor_wear"),
        reward_doc=(
            "-(max(price, 0) x losses x dt + "
            f"{p.tap_wear_cost_per_operation:g} $ per tap operation + "
            f"{p.capacitor_wear_cost_per_operation:g} $ per capacitor switching) per step ($)"
        ),
        **cmdp_fields(
            (("voltage_violation", "p.u.-h", p.voltage_budget_pu_h, p.penalty_per_pu_h),)
        ),
        baselines=("random", "rule_based", "oracle", "idle"),
        idle_action=idle,
        idle_doc=(
            "no control: taps at neutral (the files' positions), capacitors in service (as in "
            "the files), PV at unity power factor"
        ),
        forecast_series=("demand_pu", "pv_cf", "price_per_mwh"),
        gym_id="powerzoo/VoltVar123-v0",
    )
