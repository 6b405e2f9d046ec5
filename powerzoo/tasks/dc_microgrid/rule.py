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
# a running diesel stops only once the battery could carry twice the present shortfall through
# the set's minimum down time (the load can rise while the set may not restart); on the earlier
# data 1.5 left deficits of up to 0.33 MWh a day on the train split, 2 at most 0.13 (0.04 on val)
RULE_STOP_MARGIN = 2.0


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
      battery; a shortfall is discharged from the battery, and what the battery cannot cover
      this step is run on the diesel (at least its minimum output, the excess charging the
      battery). The diesel keeps to its minimum run and down times (``diesel_on``,
      ``diesel_hold_h``: a locked set keeps its status, running at least at its minimum
      output), and a running set that is free to stop stops only once the battery could carry
      twice the shortfall through the set's minimum down time (the set cannot come back
      sooner), so the rule runs it in long runs instead of cycling. ``dt_h`` is the step length (h).

    The battery's energy left at the end of the day is settled at the day's mean price: the
    rule discharges only to avoid running the diesel (300 $/MWh and more with its carbon) and
    refills whenever the grid tie has room, so it has no better use for that energy.
    """
    p, n = params, params.cluster.n_gpus
    tr, ft, setpoint = rule_compute_and_cooling(n, obs)
    allocated = ft + tr
    it_mw = it_power_mw(p.cluster, allocated, allocated)
    load_mw = (
        it_mw * (1.0 + 1.0 / cooling_cop(p.cooling, obs["temp_c"], setpoint)) * RULE_LOAD_MARGIN
    )
    shortfall = load_mw - pv_power_mw(p.pv, obs["pv_cf"]) - p.grid.import_max_mw
    bat, dsl = p.battery, p.diesel
    p_ch_max, p_dis_max = feasible_power_mw(bat, obs["soc"], dt_h)
    needed = np.clip(shortfall - p_dis_max, dsl.p_min_mw, dsl.rated_mw)
    on, locked = obs["diesel_on"] > 0.5, obs["diesel_hold_h"] > 0.0
    # energy the battery can still deliver (MWh, grid side) against the shortfall over the
    # diesel's minimum down time
    deliverable_mwh = np.maximum(obs["soc"] - bat.soc_min, 0.0) * (
        bat.energy_capacity_mwh * bat.discharge_efficiency
    )
    keep_running = (
        np.maximum(shortfall, 0.0) * (RULE_STOP_MARGIN * max(dsl.min_down_h, dt_h))
        > deliverable_mwh
    )
    run = np.where(locked, on, (shortfall > p_dis_max) | (on & keep_running))
    diesel = np.where(run, needed, 0.0)
    battery = np.clip(shortfall - diesel, -p_ch_max, p_dis_max)
    return np.stack([tr / n, ft / n, setpoint, battery, diesel], axis=1)
