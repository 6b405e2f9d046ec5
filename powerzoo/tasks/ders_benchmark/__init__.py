"""``marl_ders_benchmark``: twelve heterogeneous DERs on the 141-bus feeder, in three agent groups.

Model (multi-agent, shared reward, 30-minute steps, 48 per episode = one calendar day)
-------------------------------------------------------------------------------------
* Feeder: Khodr's 141-bus 12.47 kV feeder (``case141``, MATPOWER), exact AC power flow every step
  (:mod:`powerzoo.tasks.feeder`); bus loads = the case's base load x ``load_scale = 1.0`` x the
  calendar load shape ``demand_pu`` (so the published base load is the annual peak). At the
  head an on-load tap changer under its automatic voltage controller
  (:mod:`powerzoo.tasks.feeder_ltc`; ``ltc=False``: the head fixed at 1.00 p.u.) holds the head
  at 1.019 p.u.
* Agents, 0-based buses of the case file (chosen once, by hand, from the base-case voltage
  profile and the feeder tree; constants below):

  - ``battery_0..3`` (group ``batteries``): inverter batteries
    (:mod:`powerzoo.devices.inverter_battery`) of 1 MWh / 0.5 MW (0.55 MVA), efficiencies 0.95,
    SOC in [0.1, 0.9] (start 0.5), wear 7.5 $/MWh of throughput (:mod:`powerzoo.devices.battery`),
    at ``BATTERY_BUSES = (47, 65, 29, 125)``:
    spread over the feeder, two on the long lateral that starts at bus 5 (where voltages sag:
    its mid point 47 and its sub-lateral 53-68) and two on the other branches (the far end of
    the main trunk, 29, and of the lateral 117-129). Action ``[p_mw, q_mvar]``: P in
    [-0.5, 0.5] MW (+ discharge), Q in [-0.55, 0.55] Mvar (+ injection).
  - ``pv_0..3`` (group ``pv``): 1.3 MW PV plants with 1.43 MVA inverters
    (:mod:`powerzoo.devices.pv_inverter`) at ``PV_BUSES = (86, 51, 79, 67)``, the lowest-voltage
    ends of the four sagging sub-laterals of that lateral. Available power = 1.3 MW x the data
    layer's irradiance-based ``pv_cf``. Action ``[curtail, q_mvar]``: curtailed fraction in
    [0, 1], Q in [-1.43, 1.43] Mvar. With no sun (available power 0, every night) an inverter
    gives no reactive power, whatever its Q action: IEEE 1547-2018 requires reactive
    capability only while a DER produces active power and leaves "Q at night" optional. The
    task keyword ``pv_q_at_night=True`` keeps the inverters on at night with their whole
    1.43 MVA as reactive capability.
  - ``load_0..3`` (group ``flexible_loads``): the flexible half (``flex_share = 0.5``) of the
    load of the large buses ``FLEX_BUSES = (85, 78, 60, 70)`` on the same sub-laterals
    (:mod:`powerzoo.devices.flexible_load`, each at its bus's own power factor), curtail and
    shift up to 30 % each per step, payback within 4 steps (2 h) and before the day ends.
    Action ``[curtail, shift]``, both fractions in [0, 0.3] of the unit's demand this step.

* Sizing (measured on the 65 test days, ``benchmarks/compute_baselines.py``): with the DERs
  uncontrolled (batteries idle, PV uncurtailed, Q = 0, loads served as they come) and the head at
  the AVC's 1.019 p.u., the voltages stay in the band, but the PV's midday reverse flow overloads
  the lateral's lines (largest loading 1.33 of a rating; 0.58 MVAh of ``thermal_overload`` a day,
  above the 0.25 MVAh budget on 24 days, 36.9 %); a rule with volt-var Q and no curtailment is
  over it on 24 days too; the rule-based baseline's export limit and the oracle, which curtails
  and stores the surplus, keep every budget every day. With the head at 1.00 p.u. (``ltc=False``)
  the lateral also sags below 0.95 p.u. in the evening (over the 1.0 p.u.-step budget on 15 days;
  over a budget on 36, 55 %). PV is 1.3 MW a plant: at 1.0 MW (the earlier size) the LTC left no
  day over budget (15 at 1.00 p.u.), the lines at 0.98 of their rating.
* Reward, **shared** (team, $ per step), terms ``[loss_cost, pv_curtailment_cost,
  load_curtailment_cost, battery_cost, battery_settlement]`` (the first four usually <= 0):
  ``-price x losses x dt``; ``-price x curtailed PV MWh`` (the energy the feeder must buy
  instead); ``-VOLL x curtailed load MWh`` with ``VOLL = 1,000 $/MWh`` (unserved energy; so
  curtailing everything never pays); ``-(price x (charged - discharged MWh) + 7.5 $/MWh x
  throughput)`` (the batteries' energy bill, so they can earn by arbitrage); on the last step
  the settlement of the batteries' stored energy against the start, at the day's mean price
  ``m`` (a surplus as sold through the battery, ``eta_d (m - wear)`` per MWh, a deficit as
  bought back, ``(m + wear) / eta_c``; :func:`powerzoo.devices.battery.settlement_value`), so
  the energy the batteries hold at reset is not free to sell. Shifted load is free in the
  reward: it comes back later.
* Costs (CMDP, all selected, >= 0 per step): ``voltage_violation`` (p.u. outside [0.95, 1.05]
  summed over buses), ``thermal_overload`` (MVAh: overload energy above the line ratings summed
  over branches, ``sum_k max(|S_k| - S_rated_k, 0) x dt``),
  ``device_violation`` (MWh: battery energy asked beyond the SOC bounds + load shift refused
  on the last step, summed over devices), ``reactive_cut`` (Mvarh: reactive power asked of the
  battery and PV inverters beyond their capability, ``sqrt(S^2 - P^2)`` or 0 for a PV inverter
  without sun, x dt, summed). Per-episode thresholds 1.0 p.u., 0.25 MVAh, 0.5 MWh, 0.5 Mvarh;
  ``"penalized"`` preset weights 1,000 $/p.u., 2,000 $/MVAh, 100 $/MWh, 100 $/Mvarh.
* Observation modes (``env.observation_fields(agent)``; every agent has the same fields in a
  mode, fields that do not apply to its kind are 0; grid values from the previous step's flow,
  at reset from the flow of the first step with the DERs uncontrolled):
  ``ders_local`` (default): time, price, one-hot kind ``is_battery, is_pv, is_flexible_load``,
  then ``own_v_pu, own_soc, own_pv_available_mw, own_base_load_mw, own_backlog_mwh``;
  ``local``: time, price, the own device block, ``own_prev_p_mw`` (+ into the feeder; a load's
  draw is negative), ``own_prev_q_mvar``, ``own_bus_load_mw``; ``local_plus_voltage``: ``local``
  + ``upstream_v_pu`` (parent bus) and ``downstream_v_pu`` (lowest child bus, own bus at a
  leaf); ``global``: ``ders_local`` + ``demand_pu, pv_cf, feeder_p_mw, p_loss_mw, v_min_pu,
  v_max_pu`` + the voltage at every DER bus, every battery's SOC and every load's backlog.
* Splits: train / val / test by date; stress splits ``load_stress`` (demand x 1.15),
  ``low_renewable`` (PV x 0.4, dearer prices) and ``price_spike`` (evening price spikes).
* Baselines: random; rule-based: no load curtailment or shifting, each battery follows the
  time-of-use rule of :func:`powerzoo.tasks.tariffs.tou_battery_power_mw` (it may charge in the 8
  cheapest half-hours of the average day and discharge in the 8 dearest, and does when the trade
  pays after wear and losses against the mean train-day price, else it steps back towards its
  start SOC, which it reaches by the day's end), and every inverter (battery and PV) applies the
  IEEE 1547-2018 category B volt-var droop on its own bus voltage (Q / S = +0.44 at 0.92 p.u., 0
  in [0.98, 1.02], -0.44 at 1.08, linear between), within the reactive capability left at its
  P (none for a PV inverter without sun, unless ``pv_q_at_night``), and every PV plant's
  output is capped at an export limit of 1.0 MW (``RULE_PV_EXPORT_LIMIT_MW``, 77 % of its
  1.3 MW: the hosting capacity of its sub-lateral, the size at which the uncontrolled feeder
  keeps the overload budget every day, as a utility writes it into the interconnection
  agreement of a larger plant; :func:`powerzoo.tasks.feeder_rules.export_limit_curtailment`).
  Oracle: the whole day
  planned with perfect foresight, one LP on HiGHS per day
  (:mod:`powerzoo.tasks.ders_benchmark.oracle`: every device's limits, the settlement, voltages
  on LinDistFlow and line flows around the exact flow, losses piecewise-quadratic; solved around
  the uncontrolled day, then around its own plan), applied under the exact flow. Test split (65
  days, ``benchmarks/compute_baselines.py``), $ of system cost per day (the shared reward, each
  agent's return; the team sum is 12 x that) and ``thermal_overload`` (MVAh/day): random
  -2,309 and 16.1 (plus 0.04 p.u.-steps of voltage violation, 4.1 MWh of device violation and
  31.9 Mvarh of reactive cut, most of it Q asked of PV inverters at night); rule-based -124 and
  0 (every budget kept every day; without the export limit -121 and 0.59, over budget on 24
  days, 36.9 %); oracle +150 and 0 (a net gain;
  every budget kept every day); idle (``spec.idle_action``: the DERs uncontrolled, as in the
  sizing above) -242 and 0.58 (over budget on 24 days, 36.9 %).

Modules: :mod:`.spec` (constants, parameters, spaces), :mod:`.observation` (the observation
fields in every mode and where they sit), :mod:`.task` (state, reset / observe / step, the
rule-based baseline), :mod:`.oracle` (the perfect-foresight day plan) and :mod:`.network_lp` (its
LP's voltage, line-flow and loss rows).
"""

from powerzoo.tasks.ders_benchmark.observation import AGENTS, BATTERIES, LOADS, PVS
from powerzoo.tasks.ders_benchmark.spec import (
    BATTERY_BUSES,
    FLEX_BUSES,
    HORIZON,
    PV_BUSES,
    DersBenchmarkParams,
)
from powerzoo.tasks.ders_benchmark.task import DersState, MarlDersBenchmark

__all__ = [
    "AGENTS",
    "BATTERIES",
    "BATTERY_BUSES",
    "FLEX_BUSES",
    "HORIZON",
    "LOADS",
    "PVS",
    "PV_BUSES",
    "DersBenchmarkParams",
    "DersState",
    "MarlDersBenchmark",
]
