"""``dc_microgrid`` / ``dc_microgrid_safe``: an AI data centre running its own microgrid.

Model (5-minute steps, 288 per episode = one calendar day, single agent)
------------------------------------------------------------------------
* IT load (:mod:`powerzoo.devices.gpu_cluster`): 2,048 GPUs; busy 1.275 kW, allocated but idle
  0.40 kW, parked 0.05 kW per GPU (server share included): 0.1-2.6 MW.
* Job queue (:mod:`powerzoo.devices.job_queue`, arrivals from :mod:`powerzoo.data.workload`):
  ``training`` and ``finetune`` work in GPU-hours per hourly deadline bucket, served
  earliest-deadline-first within each class by the GPUs the agent allocates; work still queued
  when its bucket falls due is dropped (``sla_violation``). Work due after the day may stay
  queued at the episode's end up to the carry allowance of a uniform-progress schedule; the
  excess is behind schedule and also counts as ``sla_violation`` (so deferring work past
  midnight does not pay).
* Cooling (:mod:`powerzoo.devices.cooling`, :mod:`powerzoo.devices.thermal_zone`): the plant
  tracks the zone setpoint (time constant 10 min, capacity 3.5 MW thermal) with a COP that falls
  with outdoor temperature and rises with the setpoint; the zone is one lumped heat capacity
  heated by the IT load and the envelope. ``overtemperature`` = K h above 27 deg C (ASHRAE A1
  recommended upper bound).
* Supply: PV 2 MW (:mod:`powerzoo.devices.pv`), battery 4 MWh / 2 MW
  (:mod:`powerzoo.devices.battery`, efficiencies 0.95, SOC in [0.1, 0.9], the shared wear cost
  of 7.5 $ per MWh of throughput), diesel 2.5 MW with 30 % minimum stable output, 300 $/MWh,
  0.75 tCO2/MWh, 50 $ per start and minimum run and down times of 1 h
  (:mod:`powerzoo.devices.diesel`: a set that has run, or rested, less than that keeps its
  status whatever is asked), grid import capped at 1.5 MW at the market price and the grid's
  carbon intensity (:mod:`powerzoo.devices.grid_tie`; ``grid_import_max_mw=0``: islanded).
  Grid import is not an action: it covers the residual load up to the cap; a surplus is
  curtailed (``spill_mw``: PV first). The battery charges only from what is left after the
  facility's demand (a charge request beyond it is cut).
* Supply short of the demand (``deficit_mw`` = demand - supply > 0, charged as
  ``power_deficit``, MWh): the facility draws only what it is supplied. The cooling plant keeps
  tracking its setpoint and the GPUs are throttled to the rest
  (:meth:`~powerzoo.tasks.datacentre.model.DataCentre.within_supply`): the busy GPUs' work,
  IT power and heat fall in proportion, the unserved work stays queued (and is dropped at its
  deadline as ``sla_violation``); if even the plant cannot be run the nodes are shed and the
  zone warms. (The former model kept the GPUs running on unsupplied power: 5.2 MWh/day of
  deficit under the random policy on the test split while the GPUs drew 11.6 MWh in those
  steps and served their work.)
* End of the day: the battery is given 1.6 MWh above its floor at reset (SOC 0.5), so the
  change of stored energy ``e_T - e_0`` (storage side, MWh) is settled on the last step at
  ``m`` = the mean grid price of the episode's day, as for every storage task: a surplus as if
  sold through the battery, ``eta_d (m - wear)`` per MWh, a deficit as if bought back,
  ``(m + wear) / eta_c`` per MWh (:func:`powerzoo.devices.battery.settlement_value`;
  ``info["storage_settlement"]``, $, in the ``cost`` term).
  Without it the oracle ended every test day at the SOC floor, selling the energy it was given.

Power balance every step (MW):
``supply_mw = it_mw + cooling_mw + charge_mw`` with
``supply_mw = pv_mw + diesel_mw + discharge_mw + grid_import_mw - spill_mw``; the demand the
supply left unserved is ``deficit_mw``.

Action (physical units; ``normalize=True`` maps [-1, 1] affinely onto these bounds)
-----------------------------------------------------------------------------------
``[training_share, finetune_share, cooling_setpoint_c, battery_p_mw, diesel_p_mw]``:
fractions of the GPUs given to each class (scaled down proportionally when they sum above 1;
unallocated GPUs are parked), zone setpoint in [18, 32] deg C, battery power in [-2, 2] MW
(+ = discharge; cut to what the SOC allows and, charging, to the site's surplus), diesel output
in [0, 2.5] MW (a request below half the minimum stable output asks for the set off, one
above for it on at least at 0.75 MW; within its minimum run or down time the set keeps its
status).
``info["action_applied"]`` reports the shares after scaling and the powers actually delivered.

Reward
------
``info["reward_vector"] = [energy, cost, carbon]`` (per step; all <= 0 but the last step's
cost, which holds the storage settlement and may be a credit):
``energy = -(it_mw + cooling_mw) dt`` (MWh drawn), ``cost = -(grid_import_mw * price +
diesel_mw * fuel cost) dt - wear - 50 $ x starts + settlement`` ($), ``carbon =
-(grid_import_mw * grid_co2 + diesel_mw * 0.75) dt`` (tCO2). Weights ``w = (1, 0.5, 25.5)``:
the carbon weight is the cost weight times a carbon price of 51 $/tCO2 (the US Interagency
Working Group's social cost of carbon for 2020 emissions at a 3 % discount rate, its 2021
interim estimate), so a tonne counts as 51 $ would.

* ``dc_microgrid_safe`` (CMDP): ``reward = reward_vector @ w`` exactly (the same matrix-vector
  product ``weights @ info["reward_vector"]`` computes); the three costs are its selected
  constraints, with per-episode thresholds 50 GPU-h, 0.5 K h and 0.25 MWh.
* ``dc_microgrid`` (MDP): ``reward = reward_vector @ w - costs @ penalties`` with penalties
  10 per GPU-h of SLA violation, 100 per K h of overtemperature and 5,000 per MWh unserved
  (a value of lost load of 10,000 $/MWh at the cost weight 0.5).
* Reward presets (``make_env(..., reward=...)``): ``"objective"`` (the weighted vector) and
  ``"penalized"`` (with the penalties), so either variant can be trained on the other's reward.
* Episodes never terminate early; they are truncated after 288 steps.

Costs (non-negative, physical units): ``sla_violation`` (GPU-h of work dropped at its
deadline, plus on the last step the work left behind schedule), ``overtemperature`` (K h above
27 deg C), ``power_deficit`` (MWh unserved).

Observation
-----------
``[hour_sin, hour_cos, time_remaining, temp_c (outdoor), zone_temp_c, pv_cf, price_per_mwh,
grid_co2_t_per_mwh, soc, diesel_on, diesel_hold_h]`` (``diesel_hold_h``: hours until the
diesel may change status, 0 when free) then, per class (training, finetune), ``queued_gpuh``,
``due_1h_gpuh`` (due by the end of the current hour) and ``required_gpus`` (least constant
allocation meeting every deadline and the end-of-day carry allowance, see
:func:`~powerzoo.devices.job_queue.queue_outlook`).

Splits: train / val / test by date; stress splits ``heatwave``, ``low_renewable``,
``load_stress``, ``price_spike``, ``cold_snap`` (transformed weather and prices) and
``workload_shock`` (doubled job arrivals), all on the test days.

Baselines: random; rule-based (:func:`.rule.rule_based_action`); oracle
(:meth:`DCMicrogrid.oracle_plan`): a perfect-foresight MILP over the day on HiGHS (job service
per deadline bucket, battery with the end-of-day settlement, diesel on/off with its minimum
output, start cost and minimum times, grid import; cooling setpoint held just under the 27 deg C
limit), see :mod:`.oracle`. Diesel starts a day on the test split: before the start cost and
minimum times (measured then, on the earlier exogenous data and its 77 test days) rule-based
13.3 (up to 67), oracle 7.5 (up to 48); with them, on the 65 test days of the current data,
rule-based 1.31 (up to 4), oracle 0.18 (up to 1).

Modules: :mod:`.spec` (constants, observation layout, spaces), :mod:`.task` (state, reset /
observe / step), :mod:`.rule` (rule-based controller), :mod:`.oracle` (the MILP). The data centre
itself is shared with ``dc_scheduling`` in :mod:`powerzoo.tasks.datacentre`: the site's devices
and ratings, the compute, cooling and queue step, the rule's compute and cooling part and the
oracle's job and cooling blocks.
"""

from powerzoo.tasks.datacentre.site import SETPOINT_MAX_C, SETPOINT_MIN_C, DCMicrogridParams
from powerzoo.tasks.dc_microgrid.safe import DCMicrogridSafe
from powerzoo.tasks.dc_microgrid.spec import (
    CONSTRAINTS,
    HORIZON,
    PENALTIES,
    REWARD_TERMS,
    REWARD_WEIGHTS,
    STEP_MINUTES,
    THRESHOLDS,
)
from powerzoo.tasks.dc_microgrid.task import DCMicrogrid, DCMicrogridState

__all__ = [
    "CONSTRAINTS",
    "DCMicrogrid",
    "DCMicrogridParams",
    "DCMicrogridSafe",
    "DCMicrogridState",
    "HORIZON",
    "PENALTIES",
    "REWARD_TERMS",
    "REWARD_WEIGHTS",
    "SETPOINT_MAX_C",
    "SETPOINT_MIN_C",
    "STEP_MINUTES",
    "THRESHOLDS",
]
