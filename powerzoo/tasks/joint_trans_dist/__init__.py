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
  the split year's peak load, feeder heads included (11.0 MW; 46.4 MW on
  ``joint_trans_dist_118``), settled at 2 x the units' highest marginal cost (80 $/MWh; 560 on
  case118: under-generating never pays), and the energy beyond the band is ``power_imbalance``,
  settled at 1,000 $/MWh either sign (:mod:`powerzoo.tasks.balancing`).
* Distribution: the IEEE 33-bus feeder ``case33bw`` hung at transmission bus 3 (0-based; the
  400 MW bus), its bus loads = its base load x ``feeder_load_scale = 0.75`` x the same
  ``demand_pu``, with an exact AC power flow per step (:class:`powerzoo.tasks.feeder.
  FeederModel`). Agents ``battery_0..2`` (group ``distribution``): 1 MWh / 0.5 MW inverter
  batteries at feeder buses 16, 23, 31 (0-based, as ``marl_der_arbitrage``), efficiencies 0.95,
  SOC in [0.1, 0.9] from 0.5, wear 7.5 $/MWh of throughput; action ``p_mw`` in [-0.5, 0.5]
  (+ discharge), reactive power 0.
* Coupling, every step: the feeder's head power from its exact AC flow (loads - batteries +
  losses; ``info["feeder_p_mw"]`` [B, n_feeders]) is added to the load of the boundary bus in the
  same step's DC flow (``info["boundary_load_mw"]``: that bus's load less its transmission load;
  the two agree to rounding). The head's reactive power stays inside the feeder (DC flow).
* Boundary price (``info["boundary_price_per_mwh"]``): the marginal cost of the unit that the
  merit order loads last to meet the step's total demand (transmission loads plus the head
  powers), the clearing price of a uniform-price energy market (network-blind: the case's
  congestion enters the dispatch and its cost, not the price); 1,000 $/MWh above the units'
  capacity. Computed in the batched step without an LP (:func:`.task.merit_order_price`). The
  observed ``price_per_mwh`` is the same rule at this step's loads with the batteries idle (the
  expected price, known before acting); the actual price differs only when the batteries move
  the demand across a unit's capacity. case5's marginal costs are 10, 14, 15, 30 and 40 $/MWh,
  so the price is 10-30 $/MWh over the year: a round trip (90 % efficient, 15 $/MWh of wear)
  pays only from a 10 $/MWh step to a 30 $/MWh one (about 3 $ per MWh delivered), and the
  batteries' work here is mostly the feeder's voltage band.
* Reward (one team reward, the system's cost in $ per step): ``-(generation cost + imbalance
  cost (beyond the band, 1,000 $/MWh) + regulation cost (within it) + transmission overload x
  2,000 $/MWh + battery wear)`` and, on the last step,
  the settlement of the batteries' stored energy against their start at the episode's mean
  expected boundary price (:func:`powerzoo.devices.battery.settlement_value`: a surplus as sold
  through the battery, a deficit as bought back). The feeder's losses are part of the head
  power the generators serve, so they are paid for in the generation cost. Per-side terms in
  ``info``: ``transmission_cost`` (generation + imbalance + regulation + overload, $),
  ``regulation_mwh`` (the mismatch's energy within the band), ``boundary_payment``
  (price x head energy: what the feeder pays the transmission side), ``battery_revenue`` (price
  x net discharged energy), ``loss_cost`` (price x loss energy) and ``distribution_profit``
  (battery revenue - wear - loss cost + settlement); the payments cancel in the team reward.
* Costs (all selected), budgets per day x the episode's days: ``thermal_overload`` (MVAh of
  transmission overload, 1/day), ``power_imbalance`` (MWh beyond the regulation band, 1/day),
  ``voltage_violation`` (p.u.
  outside [0.95, 1.05] summed over the feeder buses, per step; 0.2/day),
  ``feeder_thermal_overload`` (MVAh above the feeder's line ratings, 0.25/day),
  ``soc_violation`` (MWh asked beyond the SOC bounds, 0.5/day).
* Observation modes (every agent has every field, 0 where it does not apply; one-hot
  ``is_generator`` / ``is_battery``): ``global`` (default: time, kind, expected price, own block
  ``own_min_mw, own_max_mw, own_marginal_cost_per_mwh, own_prev_p_mw, own_soc, own_v_pu,
  own_bus_load_mw``, then the system block: transmission load now and next, the feeder's idle
  head power now and its head power last step, last imbalance, lowest and highest feeder
  voltage, every battery's SOC), ``local`` (time, kind, price, own block),
  ``local_plus_forecast`` (``local`` + the expected price of the next 4 steps).
* Baselines: random; rule-based (:meth:`.task.JointTransDist.rule_based_action`: time-of-use
  batteries and a congestion-aware merit order for the generators against the observed load
  plus the feeder's expected import); oracle (:func:`.oracle.plan_episode`: one LP per episode,
  DC-OPF joined with the batteries on LinDistFlow, scored under the exact flows).

Several feeders at several buses are a class attribute (:attr:`.task.JointTransDist.feeders`, a
tuple of :class:`.spec.FeederHookup`); batteries are numbered over the feeders in order.
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
