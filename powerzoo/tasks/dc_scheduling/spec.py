"""The ``dc_scheduling`` spec: constants, parameters (the data centre and where it sits on the
feeder), observation and action spaces. The model is described in
:mod:`powerzoo.tasks.dc_scheduling`."""

from __future__ import annotations

import dataclasses

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.markets import DEFAULT_MARKET, check_market
from powerzoo.data.workload import JOB_CLASSES
from powerzoo.devices.cooling import CoolingParams
from powerzoo.devices.gpu_cluster import GpuClusterParams
from powerzoo.devices.thermal_zone import ZoneParams
from powerzoo.tasks.datacentre.site import SETPOINT_MAX_C, SETPOINT_MIN_C, DCMicrogridParams
from powerzoo.tasks.feeder import grid_cost_rows
from powerzoo.tasks.spec import PRICE_CAP, PRICE_FLOOR, TaskSpec, VectorSpec, cmdp_fields

__all__ = [
    "CASE",
    "CONSTRAINTS",
    "COSTS",
    "DC_BUS",
    "DC_POWER_FACTOR",
    "DCSchedulingParams",
    "EXOGENOUS_OBS",
    "GRID_OBS",
    "HORIZON",
    "LOAD_SCALE",
    "QUEUE_OBS",
    "SLA_PENALTY_PER_GPUH",
    "STEP_MINUTES",
    "THRESHOLDS",
    "dc_scheduling_spec",
]

HORIZON = 48
STEP_MINUTES = 30
CASE = "case33bw"
LOAD_SCALE = 0.4
DC_BUS = 4
DC_POWER_FACTOR = 0.95
SLA_PENALTY_PER_GPUH = 10.0
COSTS = (  # name, unit, per-episode threshold, weight in the "penalized" preset ($ per unit)
    *grid_cost_rows(0.2, 0.25),
    ("sla_violation", "GPU-h", 50.0, None),  # already in the reward (SLA_PENALTY_PER_GPUH)
    ("overtemperature", "K h", 0.5, 100.0),
)
CONSTRAINTS = tuple(cost[0] for cost in COSTS)
THRESHOLDS = {cost[0]: cost[2] for cost in COSTS}
QUEUE_CAP_GPUH, GPUS_CAP = 1e6, 1e8  # observation bounds, far above a day's work
EXOGENOUS_OBS = ("temp_c", "price_per_mwh", "demand_pu")
GRID_OBS = ("v_min_pu", "dc_bus_v_pu", "max_branch_loading", "dc_load_mw")
QUEUE_OBS = ("queued_gpuh", "due_1h_gpuh", "required_gpus")


@dataclasses.dataclass(frozen=True)
class DCSchedulingParams:
    """The data centre (the ``dc_microgrid`` site's cluster, cooling and zone) and where it sits on
    the feeder."""

    cluster: GpuClusterParams = DCMicrogridParams.cluster
    cooling: CoolingParams = DCMicrogridParams.cooling
    zone: ZoneParams = DCMicrogridParams.zone
    initial_zone_temp_c: float = DCMicrogridParams.initial_zone_temp_c
    dc_bus: int = DC_BUS
    load_scale: float = LOAD_SCALE
    market: str = DEFAULT_MARKET  # the price model (powerzoo.data.markets.MARKETS)

    def __post_init__(self) -> None:
        check_market(self.market)
        if (
            isinstance(self.dc_bus, bool)
            or not isinstance(self.dc_bus, (int, np.integer))
            or not 1 <= self.dc_bus <= 32
        ):
            raise ValueError(
                "dc_bus must be a 0-based bus index of case33bw in 1..32 (0 is the head), "
                f"got {self.dc_bus!r}"
            )
        if not (np.isfinite(self.load_scale) and self.load_scale > 0.0):
            raise ValueError(f"load_scale must be a positive number, got {self.load_scale!r}")


def dc_scheduling_spec(task_id: str, params: DCSchedulingParams) -> TaskSpec:
    """The spec of ``task_id`` (``dc_scheduling``) for the data centre and feeder ``params``."""
    p = params
    n = float(p.cluster.n_gpus)
    queue = tuple(f"{j.name}_{f}" for j in JOB_CLASSES for f in QUEUE_OBS)
    names = (
        "hour_sin",
        "hour_cos",
        "time_remaining",
        *EXOGENOUS_OBS,
        "zone_temp_c",
        *GRID_OBS,
        *queue,
    )
    units = (
        "-",
        "-",
        "fraction of horizon",
        "deg C",
        "$/MWh",
        "p.u. of annual peak",
        "deg C",
        "p.u.",
        "p.u.",
        "I / I_rated",
        "MW",
    ) + ("GPU-h", "GPU-h", "GPUs") * 2
    low = (-1.0, -1.0, 0.0, -60.0, PRICE_FLOOR, 0.0, -60.0, 0.0, 0.0, 0.0, 0.0) + (0.0,) * 6
    high = (1.0, 1.0, 1.0, 60.0, PRICE_CAP, 2.0, 100.0, 1.2, 1.2, 1000.0, 20.0) + (
        QUEUE_CAP_GPUH,
        QUEUE_CAP_GPUH,
        GPUS_CAP,
    ) * 2
    nominal_low = (-1.0, -1.0, 0.0, -10.0, 0.0, 0.0, 15.0, 0.9, 0.9, 0.0, 0.0) + (0.0,) * 6
    nominal_high = (1.0, 1.0, 1.0, 45.0, 150.0, 1.0, 35.0, 1.0, 1.0, 1.0, 3.5) + (
        20000.0,
        2000.0,
        n,
        2000.0,
        1000.0,
        n,
    )
    return TaskSpec(
        task_id=task_id,
        description=(
            f"The dc_microgrid AI data centre ({p.cluster.n_gpus} GPUs, training and "
            "fine-tuning jobs with "
            f"deadlines, cooling) at bus {p.dc_bus + 1} (1-based) of the IEEE 33-bus feeder "
            "(exact AC power flow), no local "
            "generation: schedule the jobs and the cooling setpoint against the energy price "
            "and SLA penalties, "
            "within the feeder's voltage band and line ratings."
        ),
        agents=("agent",),
        observation=VectorSpec(names, units, low, high, nominal_low, nominal_high),
        action=VectorSpec(
            names=("training_share", "finetune_share", "cooling_setpoint_c"),
            units=("fraction of GPUs", "fraction of GPUs", "deg C"),
            low=(0.0, 0.0, SETPOINT_MIN_C),
            high=(1.0, 1.0, SETPOINT_MAX_C),
        ),
        horizon=HORIZON,
        step_minutes=STEP_MINUTES,
        splits=calendar.BASE_SPLITS
        + ("load_stress", "heatwave", "cold_snap", "price_spike")
        + calendar.WORKLOAD_STRESS_SPLITS,
        reward_terms=("energy_cost", "sla_penalty"),
        reward_doc=(
            f"-(price x facility MWh) - {SLA_PENALTY_PER_GPUH:g} $/GPU-h x sla_violation per "
            "step ($); "
            "terms [energy_cost, sla_penalty]"
        ),
        **cmdp_fields(COSTS),
        baselines=("random", "rule_based", "oracle"),
        forecast_series=EXOGENOUS_OBS,
        gamma=0.99,
        gym_id="powerzoo/DCScheduling-v0",
    )
