"""Coupled transmission-distribution tasks: ``joint_trans_dist`` (one day),
``joint_trans_dist_7d`` (one week) and ``joint_trans_dist_118`` (case118 with three feeders, area
and DSO agents: :mod:`powerzoo.tasks.joint_trans_dist.areas`).

Model (multi-agent, 30-minute steps, 48 or 336 per episode)
-----------------------------------------------------------
* Transmission: the PJM 5-bus case (``case5``, published ratings: 400 MW on branch 0-1, 240 MW
  on 3-4) under DC power flow, bus loads = the case's base load x ``load_scale = 1.1`` x the
  calendar load shape ``demand_pu``, as ``marl_opf``. Agents ``gen_0..gen_4`` (group
  ``transmission``): each unit's output ``p_mw`` in ``[Pmin, Pmax]``. The slack bus takes the
  mismatch ``sum(p) - load`` in the flows; regulation reserve absorbs it up to a band of 1 % of
  the split year's peak load, feeder heads included (11.1 MW; 46.5 MW on
  ``joint_trans_dist_118``), settled at 2 x the units' highest marginal cost (80 $/MWh; 560 on
  case118: under-generating never pays), and the energy beyond the band is ``power_imbalance``,
  settled at 1,000 $/MWh either sign (:mod:`powerzoo.tasks.balancing`).
* Distribution: 120 identical copies of the IEEE 33-bus feeder ``case33bw`` behind
  transmission bus 3 (0-based; the 400 MW bus), each with its bus loads = its base load x
  ``feeder_load_scale = 0.75`` x the same ``demand_pu`` (2.79 MW at ``demand_pu = 1``; 335 MW
  over the copies, 76 % of the bus's 440 MW: the feeders are part of its load, not extra,
  :attr:`.task.JointTransDist.net_feeder_load`), with an exact AC power flow per step
  (:class:`powerzoo.tasks.feeder.FeederModel`, one copy solved: the copies run alike). Agents
  ``battery_0..2`` (group ``distribution``): 2 MWh / 0.5 MW inverter batteries at feeder buses
  16, 23, 31 (0-based, as ``marl_der_arbitrage``) of every copy, efficiencies 0.95, SOC in
  [0.1, 0.9] from 0.5, wear 7.5 $/MWh of throughput; action ``p_mw`` in [-0.5, 0.5] (+
  discharge; one copy's, every copy does the same), reactive power 0. Over the copies that is
  a 180 MW / 720 MWh distributed storage portfolio behind bus 3 (each copy's 1.5 MW / 6 MWh
  of four-hour batteries is about half its feeder's peak draw; 120 copies make the
  feeders three quarters of the bus's load and their storage 16 % of case5's 1,160 MW peak).
* Coupling, every step: the feeders' head power from the exact AC flow (loads - batteries +
  losses, x the copies; ``info["feeder_p_mw"]`` [B, n_feeders]) is load on the boundary bus
  in the same step's DC flow (``info["boundary_load_mw"]``: that bus's load less its
  transmission load; the two agree to rounding). The head's reactive power stays inside the
  feeder (DC flow).
* Head voltage (``info["head_vm_pu"]`` [B, n_feeders]; :mod:`.boundary`): a Thevenin
  equivalent of the transmission network at the boundary bus (the case's branch impedances,
  units behind a subtransient reactance of 0.2 p.u. on their rating: 4,275 MVA of short-circuit
  level at case5's bus 3), linearised about the case's AC solution, gives the bus's voltage at
  the step's loads (every bus's active and reactive load, the feeders' draw x copies included),
  times the substation transformers' fixed tap (set so that the idle head averages
  ``head_mean_vm_pu = 1.02`` over the year), less one feeder's transformer drop (10 MVA, 8 %,
  X/R 10). It falls with the system's load and the feeders' own draw: about 1.04 p.u. at night
  to 1.00 at the evening peak; the feeder's voltage band binds at the peak.
* Boundary price (``info["boundary_price_per_mwh"]`` [B, n_feeders]; :mod:`.boundary`): the
  day-ahead locational marginal price at the boundary bus, from a DC-OPF of the step's expected
  loads (transmission loads plus the feeders' idle head powers; line limits soft at the overload
  price) with its congestion component: 10 $/MWh off-peak, up to the 30 and 40 $/MWh units at
  bus 3 when branch 3-4 (240 MW) binds (56 % of the test steps). The observed
  ``price_per_mwh`` is that LMP at the agent's bus (a unit's own bus, a battery's boundary
  bus). A round trip (90 % efficient, 15 $/MWh of wear) pays from a 10 $/MWh step to a
  congested one; 180 MW of batteries moving together also move the congestion they answer.
* Reward (one team reward, the system's cost in $ per step): ``-(generation cost + imbalance
  cost (beyond the band, 1,000 $/MWh) + regulation cost (within it) + transmission overload x
  2,000 $/MWh + battery wear)`` and, on the last step,
  the settlement of the batteries' stored energy against their start at the episode's mean
  day-ahead LMP at their boundary bus (:func:`powerzoo.devices.battery.settlement_value`: a
  surplus as sold through the battery, a deficit as bought back). The feeders' losses are part
  of the head power the generators serve, so they are paid for in the generation cost.
  Per-side terms in ``info``: ``transmission_cost`` (generation + imbalance + regulation +
  overload, $), ``regulation_mwh`` (the mismatch's energy within the band), ``boundary_payment``
  (price x head energy: what the feeder pays the transmission side), ``battery_revenue`` (price
  x net discharged energy), ``loss_cost`` (price x loss energy) and ``distribution_profit``
  (battery revenue - wear - loss cost + settlement); the payments cancel in the team reward.
* Costs (all selected), budgets per day x the episode's days: ``thermal_overload`` (MVAh of
  transmission overload, 1/day), ``power_imbalance`` (MWh beyond the regulation band, 1/day),
  ``voltage_violation`` (p.u.
  outside [0.95, 1.05] summed over the feeder buses, per step; 0.2/day),
  ``feeder_thermal_overload`` (MVAh above the feeder's line ratings, 0.25/day),
  ``soc_violation`` (MWh asked beyond the SOC bounds, 0.5/day); the feeder costs are one
  copy's (the copies run alike).
* Observation modes (every agent has every field, 0 where it does not apply; one-hot
  ``is_generator`` / ``is_battery``): ``global`` (default: time, kind, expected price, own block
  ``own_min_mw, own_max_mw, own_marginal_cost_per_mwh, own_prev_p_mw, own_soc, own_v_pu,
  own_bus_load_mw``, then the system block: transmission load now and next, the feeder's idle
  head power now and its head power last step, last imbalance, lowest and highest feeder
  voltage, every battery's SOC), ``local`` (time, kind, price, own block),
  ``local_plus_forecast`` (``local`` + the expected price of the next 4 steps).
* Baselines: random; rule-based (:meth:`.baselines.JointBaselines.rule_based_action`:
  time-of-use batteries on the average day's LMPs and a congestion-aware merit order for the
  generators against the observed load plus the feeders' expected import); oracle
  (:func:`.oracle.plan_episode`: one LP per episode, DC-OPF joined with the batteries on
  LinDistFlow, scored under the exact flows); ``separate`` (:func:`.oracle.separate_plan`:
  transmission first at the expected boundary injections, then each feeder's batteries alone
  against the resulting LMPs, price takers, then the generators re-dispatched against the
  actual head powers); ``flex_idle`` (:func:`.oracle.flex_idle_plan`: the batteries idle, the
  generators at each step's DC-OPF). The card's ``joint_gain_pct`` is the oracle's gain over
  ``separate`` and ``distribution_effect_pct`` over ``flex_idle`` (% of the system cost).

Several feeders at several buses are a class attribute (:attr:`.task.JointTransDist.feeders`, a
tuple of :class:`.spec.FeederHookup`); batteries are numbered over the feeders in order. Two more
class attributes: ``net_feeder_load`` (``True`` here: the feeders are part of their bus's load;
``False``: load added to the case's) and ``head_ltc`` (``False`` here: the fixed tap above;
``True``: an on-load tap changer holds each head near 1.025 p.u., :mod:`.boundary`), both
``joint_trans_dist_118``'s other way (:mod:`.areas`).
"""

from powerzoo.tasks.joint_trans_dist.areas import JointAreaParams, JointTransDist118
from powerzoo.tasks.joint_trans_dist.spec import FeederHookup, JointParams
from powerzoo.tasks.joint_trans_dist.task import (
    JointState,
    JointTransDist,
    JointTransDistWeek,
    merit_order_price,
)

__all__ = [
    "FeederHookup",
    "JointAreaParams",
    "JointParams",
    "JointState",
    "JointTransDist",
    "JointTransDist118",
    "JointTransDistWeek",
    "merit_order_price",
]
