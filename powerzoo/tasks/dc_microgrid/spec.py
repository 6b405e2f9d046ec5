"""The ``dc_microgrid`` / ``dc_microgrid_safe`` spec: constants, observation layout, spaces.

The model is described in :mod:`powerzoo.tasks.dc_microgrid`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.workload import JOB_CLASSES
from powerzoo.tasks.datacentre.site import SETPOINT_MAX_C, SETPOINT_MIN_C, DCMicrogridParams
from powerzoo.tasks.spec import PRICE_CAP, PRICE_FLOOR, TaskSpec, VectorSpec

__all__ = [
    "CARBON_PRICE_PER_T",
    "CONSTRAINTS",
    "EXOGENOUS_OBS",
    "HORIZON",
    "ObservationSlots",
    "PENALTIES",
    "QUEUE_OBS",
    "REWARD_TERMS",
    "REWARD_WEIGHTS",
    "STEP_MINUTES",
    "THRESHOLDS",
    "TIME_OBS",
    "dc_microgrid_spec",
]

HORIZON = 288
STEP_MINUTES = 5
REWARD_TERMS = ("energy", "cost", "carbon")
# carbon priced at 51 $/tCO2, the US Interagency Working Group's social cost of carbon for
# 2020 emissions (3 % discount rate, 2021 interim estimate), in the cost term's units:
# weight = 0.5 (per $) x 51 $/tCO2
CARBON_PRICE_PER_T = 51.0
REWARD_WEIGHTS = np.array([1.0, 0.5, 0.5 * CARBON_PRICE_PER_T])  # energy, cost, carbon
CONSTRAINTS = ("sla_violation", "overtemperature", "power_deficit")
PENALTIES = np.array([10.0, 100.0, 5000.0])  # per GPU-h, per K h, per MWh (dc_microgrid only)
# observation bounds: far above a day's work (~3e4 GPU-h) x 12 steps/h
QUEUE_CAP_GPUH, GPUS_CAP = 1e6, 1e8
THRESHOLDS = {"sla_violation": 50.0, "overtemperature": 0.5, "power_deficit": 0.25}  # per episode

TIME_OBS = ("hour_sin", "hour_cos", "time_remaining")
# gathered per calendar step from one table; zone_temp_c is a placeholder overwritten from the state
EXOGENOUS_OBS = ("temp_c", "zone_temp_c", "pv_cf", "price_per_mwh", "grid_co2_t_per_mwh")
QUEUE_OBS = ("queued_gpuh", "due_1h_gpuh", "required_gpus")  # per job class


@dataclasses.dataclass(frozen=True)
class ObservationSlots:
    """Where each group of observation fields sits (int or slice), computed once from the spec."""

    time: int | slice  # TIME_OBS
    exogenous: int | slice  # EXOGENOUS_OBS
    zone_temp_c: int | slice
    soc: int | slice
    diesel_on: int | slice
    diesel_hold_h: int | slice
    queued_gpuh: int | slice  # one per job class
    due_1h_gpuh: int | slice
    required_gpus: int | slice

    @classmethod
    def of(cls, observation: VectorSpec) -> ObservationSlots:
        """Slots of ``observation`` (raises ``ValueError`` if a field is missing or out of
        order)."""

        def per_class(field: str) -> int | slice:
            return observation.slot(*(f"{job.name}_{field}" for job in JOB_CLASSES))

        return cls(
            time=observation.slot(*TIME_OBS),
            exogenous=observation.slot(*EXOGENOUS_OBS),
            zone_temp_c=observation.slot("zone_temp_c"),
            soc=observation.slot("soc"),
            diesel_on=observation.slot("diesel_on"),
            diesel_hold_h=observation.slot("diesel_hold_h"),
            **{field: per_class(field) for field in QUEUE_OBS},
        )


def dc_microgrid_spec(
    task_id: str, params: DCMicrogridParams, penalized: bool, gym_id: str
) -> TaskSpec:
    """The spec of ``task_id`` on the site ``params``: MDP (``penalized``, the violation penalties
    folded into the reward) or CMDP; ``gym_id`` its Gymnasium id."""
    p = params
    n = p.cluster.n_gpus
    b_max = p.battery.power_max_mw
    # hours until the diesel may switch: at most its longer minimum time, in whole steps
    dt_h = STEP_MINUTES / 60.0
    hold_max_h = max(max(p.diesel.min_steps(dt_h)) * dt_h, 1.0)
    queue_names = tuple(f"{job.name}_{k}" for job in JOB_CLASSES for k in QUEUE_OBS)
    weights = dict(zip(REWARD_TERMS, REWARD_WEIGHTS.tolist(), strict=True))
    penalties = dict(zip(CONSTRAINTS, PENALTIES.tolist(), strict=True))
    penalty_doc = (
        " - (" + " + ".join(f"{v:g} * {k}" for k, v in penalties.items()) + ")" if penalized else ""
    )
    return TaskSpec(
        task_id=task_id,
        description=(
            f"AI data centre ({n} GPUs, training and fine-tuning jobs with deadlines) on a "
            "microgrid with "
            f"PV, battery, diesel and a {p.grid.import_max_mw:g} MW grid tie: schedule jobs, "
            "set cooling and "
            "dispatch storage and diesel over one day. Multi-objective reward [energy, cost, "
            "carbon]"
            + (
                "; violation penalties folded in (MDP)."
                if penalized
                else "; costs kept apart (CMDP)."
            )
        ),
        agents=("agent",),
        observation=VectorSpec(
            names=(
                "hour_sin",
                "hour_cos",
                "time_remaining",
                "temp_c",
                "zone_temp_c",
                "pv_cf",
                "price_per_mwh",
                "grid_co2_t_per_mwh",
                "soc",
                "diesel_on",
                "diesel_hold_h",
            )
            + queue_names,
            units=(
                "-",
                "-",
                "fraction of horizon",
                "deg C",
                "deg C",
                "fraction",
                "$/MWh",
                "tCO2/MWh",
                "fraction",
                "0/1",
                "h",
            )
            + ("GPU-h", "GPU-h", "GPUs") * 2,
            low=(-1.0, -1.0, 0.0, -60.0, -60.0, 0.0, PRICE_FLOOR, 0.0, 0.0, 0.0, 0.0) + (0.0,) * 6,
            high=(1.0, 1.0, 1.0, 60.0, 100.0, 1.0, PRICE_CAP, 2.0, 1.0, 1.0, hold_max_h)
            + (QUEUE_CAP_GPUH, QUEUE_CAP_GPUH, GPUS_CAP) * 2,
            nominal_low=(-1.0, -1.0, 0.0, -10.0, 15.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0) + (0.0,) * 6,
            nominal_high=(1.0, 1.0, 1.0, 45.0, 35.0, 1.0, 150.0, 0.6, 1.0, 1.0, hold_max_h)
            + (20000.0, 2000.0, float(n), 2000.0, 1000.0, float(n)),
        ),
        action=VectorSpec(
            names=(
                "training_share",
                "finetune_share",
                "cooling_setpoint_c",
                "battery_p_mw",
                "diesel_p_mw",
            ),
            units=("fraction of GPUs", "fraction of GPUs", "deg C", "MW (+ discharge)", "MW"),
            low=(0.0, 0.0, SETPOINT_MIN_C, -b_max, 0.0),
            high=(1.0, 1.0, SETPOINT_MAX_C, b_max, p.diesel.rated_mw),
        ),
        horizon=HORIZON,
        step_minutes=STEP_MINUTES,
        splits=calendar.BASE_SPLITS + calendar.STRESS_SPLITS + calendar.WORKLOAD_STRESS_SPLITS,
        reward_terms=REWARD_TERMS,
        reward_doc=(
            "reward_vector = [energy, cost, carbon] = -[facility MWh, $ (grid import + "
            "diesel fuel + diesel starts + battery wear, less on the last step the battery's "
            "energy settled at the day's mean price), tCO2 (grid import + diesel)] per step; "
            f"reward = reward_vector @ (1, 0.5, {REWARD_WEIGHTS[2]:g}) (carbon at "
            f"{CARBON_PRICE_PER_T:g} $/tCO2)" + penalty_doc
        ),
        reward_unit="weighted units",
        constraint_names=CONSTRAINTS,
        constraint_units=("GPU-h", "K h", "MWh"),
        selected_constraints=CONSTRAINTS,
        cost_thresholds=dict(THRESHOLDS),
        baselines=("random", "rule_based", "oracle"),
        forecast_series=("price_per_mwh", "pv_cf", "temp_c"),
        reward_presets={"objective": weights, "penalized": {**weights, **penalties}},
        gamma=0.999,
        gym_id=gym_id,
    )
