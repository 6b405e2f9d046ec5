"""Rule-based controller of ``dc_microgrid``: deadline-driven GPU shares, thermostat cooling,
PV-following storage."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from powerzoo.devices.battery import feasible_power_mw
from powerzoo.devices.cooling import cooling_cop
from powerzoo.devices.gpu_cluster import it_power_mw
from powerzoo.devices.pv import pv_power_mw
from powerzoo.tasks.datacentre.site import DCMicrogridParams

__all__ = ["rule_based_action", "rule_compute_and_cooling"]

RULE_GPU_MARGIN = 1.1  # allocate at least 10 % above the least deadline-meeting rate ...
RULE_DRAIN_H = 4.0  # ... and at least the rate that would empty the class's queue in 4 h
RULE_SETPOINT_C, RULE_RECOVERY_SETPOINT_C, RULE_RECOVERY_ABOVE_C = 26.0, 24.0, 26.5
RULE_LOAD_MARGIN = 1.05  # load estimate inflated 5 % (cooling transients, envelope gains)


def rule_compute_and_cooling(
    n_gpus: int, obs: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPUs for training and for fine-tuning [B] and the cooling setpoint [B] (deg C) of the rule.

    Reads the observation fields ``{training,finetune}_required_gpus``, ``..._queued_gpuh`` and
    ``zone_temp_c`` (name -> [B] column); ``n_gpus`` is the cluster's size. See
    :func:`rule_based_action` for the rule; ``dc_scheduling`` uses this part alone.
    """

    def gpus_for(job: str) -> np.ndarray:
        return np.maximum(
            obs[f"{job}_required_gpus"] * RULE_GPU_MARGIN, obs[f"{job}_queued_gpuh"] / RULE_DRAIN_H
        )

    ft = np.minimum(gpus_for("finetune"), n_gpus)
    tr = np.minimum(gpus_for("training"), n_gpus - ft)
    setpoint = np.where(
        obs["zone_temp_c"] > RULE_RECOVERY_ABOVE_C, RULE_RECOVERY_SETPOINT_C, RULE_SETPOINT_C
    )
    return tr, ft, setpoint


def rule_based_action(
    params: DCMicrogridParams, obs: Mapping[str, np.ndarray], dt_h: float
) -> np.ndarray:
    """Physical actions [B, 5] from the observation fields ``obs`` (name -> [B] column, physical
    units).

    * GPUs: fine-tuning (the class with the earliest deadlines) first, then training, each
      ``max(1.1 x required_gpus, queued_gpuh / 4 h)``: at least the least allocation that
      meets every deadline earliest-deadline-first, and enough to drain the queue in 4 h so
      that work is not left to pile up against the end of the day; the rest are parked.
    * Cooling: setpoint 26 deg C (1 K below the A1 limit), 24 deg C while the zone is above
      26.5 deg C.
    * Battery and diesel: estimated load (IT at the allocation, cooling at the COP, +5 %)
      minus PV and the grid cap is the shortfall ``d`` (MW). A surplus (``d < 0``) charges the
      battery; a shortfall is discharged from the battery, and what the battery cannot
      cover is run on the diesel (at least its minimum output, the excess charging the
      battery). ``dt_h`` is the step length (h).
    """
    p, n = params, params.cluster.n_gpus
    tr, ft, setpoint = rule_compute_and_cooling(n, obs)
    allocated = ft + tr
    it_mw = it_power_mw(p.cluster, allocated, allocated)
    load_mw = (
        it_mw * (1.0 + 1.0 / cooling_cop(p.cooling, obs["temp_c"], setpoint)) * RULE_LOAD_MARGIN
    )
    shortfall = load_mw - pv_power_mw(p.pv, obs["pv_cf"]) - p.grid.import_max_mw
    p_ch_max, p_dis_max = feasible_power_mw(p.battery, obs["soc"], dt_h)
    diesel = np.where(
        shortfall > p_dis_max,
        np.clip(shortfall - p_dis_max, p.diesel.p_min_mw, p.diesel.rated_mw),
        0.0,
    )
    battery = np.clip(shortfall - diesel, -p_ch_max, p_dis_max)
    return np.stack([tr / n, ft / n, setpoint, battery, diesel], axis=1)
