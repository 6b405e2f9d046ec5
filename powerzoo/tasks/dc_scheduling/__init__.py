"""``dc_scheduling``: the ``dc_microgrid`` data centre on a bus of the IEEE 33-bus feeder,
scheduling its jobs.

Model (single agent, 30-minute steps, 48 per episode = one calendar day)
------------------------------------------------------------------------
* Data centre: the one of ``dc_microgrid`` (:mod:`powerzoo.tasks.dc_microgrid`: 2,048 GPUs,
  training and fine-tuning jobs with hourly deadline buckets served earliest-deadline-first,
  cooling plant tracking the zone setpoint, lumped server zone), stepped by the same model
  (:class:`~powerzoo.tasks.datacentre.model.DataCentre`) at 30-minute steps, with the
  workload of :mod:`powerzoo.data.workload` drawn at that resolution. No local generation: no
  PV, battery or diesel; the facility power ``it_mw + cooling_mw`` is drawn from the feeder.
* Feeder: ``case33bw`` with one exact AC power flow per step (:mod:`powerzoo.tasks.feeder`);
  bus loads = the case's base load x ``LOAD_SCALE = 0.4`` x the calendar load shape
  ``demand_pu``; the data centre at 0-based bus ``DC_BUS = 4`` (1-based 5, on the main trunk)
  at power factor 0.95 lagging.
* Sizing (measured on the 65 test days): the data centre draws 0.1 MW with every GPU parked,
  about 1.7 MW on average under the rule-based baseline and up to 3.3 MW with every GPU busy;
  the rest of the feeder peaks at 1.1 MW on an average test day (1.4 MW at most), late in the
  afternoon. Held at a constant 1.5 MW the DC keeps every test day in band (lowest voltage
  0.953 p.u.); at 2.0 MW the band is left at the peaks of 7 of the 65 test days, at 2.5 MW on
  30 (0.11 p.u.-steps a day of ``voltage_violation``); with every GPU busy (3.3 MW) on all of
  them (2.3 p.u.-steps a day, lowest voltage 0.934) and the trunk lines overload on 54 (1.0
  MVAh a day of ``thermal_overload``). The rule-based baseline, which serves work as it comes
  (the work submitted around 14:00 holds the DC near its peak through the afternoon while the
  feeder's load climbs to its late-afternoon peak), leaves the band on 37 test days (0.065
  p.u.-steps a day, between 13:00 and 20:00; above the 0.2 p.u. budget on 7); the oracle,
  moving loose-deadline training work off the peaks, on none, without dropping work. A heavier
  feeder (``load_scale=0.5``) or a bus further out (``dc_bus=5``) makes the band unreachable on
  some days without dropping work (the oracle leaves it on 8 test days at ``load_scale=0.5``;
  at ``dc_bus=5`` it drops work on 44 and still leaves the band).
* Action (physical units; ``normalize=True`` maps [-1, 1] onto them):
  ``[training_share, finetune_share, cooling_setpoint_c]``: fractions of the GPUs given to
  each class (scaled down proportionally when they sum above 1; the rest are parked) and the
  zone setpoint in [18, 32] deg C. ``info["action_applied"]`` reports the shares after scaling.
* Reward ($ per step): ``-(price x (it_mw + cooling_mw) x dt) - 10 $/GPU-h x sla_violation``;
  terms ``[energy_cost, sla_penalty]`` (both <= 0). 10 $/GPU-h is a few times the on-demand
  rental price of a data-centre GPU (a missed deadline costs a customer credit).
* Costs (all >= 0, per step): ``voltage_violation`` (p.u., sum over buses), ``thermal_overload``
  (MVAh, overload energy summed over branches), as the feeder tasks define them; ``sla_violation``
  (GPU-h dropped at its deadline, plus at the day's end the work behind schedule) and
  ``overtemperature`` (K h above 27 deg C), as ``dc_microgrid`` defines them. CMDP thresholds per
  episode: 0.2 p.u., 0.25 MVAh, 50 GPU-h, 0.5 K h. Preset ``"penalized"`` also charges 1,000 $ per
  p.u. of voltage violation, 2,000 $ per MVAh of overload and 100 $ per K h of overtemperature.
* Observation (17): time, ``temp_c``, ``price_per_mwh``, ``demand_pu``, ``zone_temp_c``, the
  previous step's flow (``v_min_pu``, ``dc_bus_v_pu``, ``max_branch_loading``, ``dc_load_mw``;
  at reset the flow of the first step's loads with every GPU parked) and, per job class,
  ``queued_gpuh``, ``due_1h_gpuh``, ``required_gpus`` (as in ``dc_microgrid``).
* Splits: train / val / test by date; stress splits ``load_stress``, ``heatwave``, ``cold_snap``,
  ``price_spike`` and ``workload_shock`` (doubled job arrivals).
* Baselines: random; rule-based = the data centre's compute and cooling rule, shared with
  ``dc_microgrid`` (:func:`~powerzoo.tasks.datacentre.rule.rule_compute_and_cooling`: each class
  gets at least 1.1 x the least deadline-meeting allocation and enough to drain its queue in 4 h,
  fine-tuning first; thermostat at 26 deg C, 24 while the zone is above 26.5), blind to the
  feeder; oracle = a perfect-foresight day plan (:mod:`.oracle`), one LP on HiGHS built from the
  data centre's job and cooling blocks, shared with the ``dc_microgrid`` oracle
  (:mod:`powerzoo.tasks.datacentre.planning`), with the voltage band on LinDistFlow around the
  exact flow, and line ratings, as soft rows, then applied under the exact flow.

Modules: :mod:`.spec` (constants, parameters, spaces), :mod:`.task` (state, reset / observe /
step, baselines), :mod:`.oracle` (the day plan's LP).
"""

from powerzoo.tasks.dc_scheduling.spec import (
    CONSTRAINTS,
    DC_BUS,
    HORIZON,
    LOAD_SCALE,
    SLA_PENALTY_PER_GPUH,
    STEP_MINUTES,
    THRESHOLDS,
    DCSchedulingParams,
)
from powerzoo.tasks.dc_scheduling.task import DCScheduling, DCSchedulingState

__all__ = [
    "CONSTRAINTS",
    "DC_BUS",
    "DCScheduling",
    "DCSchedulingParams",
    "DCSchedulingState",
    "HORIZON",
    "LOAD_SCALE",
    "SLA_PENALTY_PER_GPUH",
    "STEP_MINUTES",
    "THRESHOLDS",
]
