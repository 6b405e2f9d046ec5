"""Rule-based controller of ``dc_microgrid``: deadline-driven GPU shares and thermostat cooling
(the data centre's shared rule, :mod:`powerzoo.tasks.datacentre.rule`), PV-following storage."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from powerzoo.devices.battery import feasible_power_mw
from powerzoo.devices.cooling import cooling_cop
from powerzoo.devices.gpu_cluster import it_power_mw
from powerzoo.devices.pv import pv_power_mw
from powerzoo.tasks.datacentre.rule import rule_compute_and_cooling
from powerzoo.tasks.datacentre.site import DCMicrogridParams

__all__ = ["rule_based_action"]

RULE_LOAD_MARGIN = 1.05  # load estimate inflated 5 % (cooling transients, envelope gains)


def rule_based_action(
    params: DCMicrogridParams, obs: Mapping[str, np.ndarray], dt_h: float
) -> np.ndarray:
    """Physical actions [B, 5] from the observation fields ``obs`` (name -> [B] column, physical
    units).

    * GPUs and cooling: the data centre's shared rule
      (:func:`~powerzoo.tasks.datacentre.rule.rule_compute_and_cooling`): fine-tuning first,
      then training, each ``max(1.1 x required_gpus, queued_gpuh / 4 h)``, the rest parked;
      setpoint 26 deg C, 24 deg C while the zone is above 26.5 deg C.
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
