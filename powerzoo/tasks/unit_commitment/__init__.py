"""Unit commitment on DC networks: ``marl_uc`` (case5, five unit agents) and ``tso`` (case118, one
operator).

Model
-----
* Units: the case's generators with the unit-commitment parameters of
  :func:`powerzoo.devices.thermal_unit.fleet_from_case` (Pmin, ramps, minimum up/down times,
  start-up / shut-down / no-load costs derived by size class; the case gives Pmax and the cost
  curve). 30-minute steps, one day (48 steps).
* Action per unit: ``[p_mw, on]``: an output setpoint in ``[0, Pmax]`` and the requested status
  (on if ``on > 0.5``). Switches that would break a minimum up or down time are overridden
  (the unit keeps its status; ``info["commitment_overridden"]`` [B, n] and
  ``info["n_commitment_overridden"]``); setpoints are clipped to the step's output bounds
  (Pmin/Pmax when on, ramp limits from the last output, start-up output at most
  ``max(Pmin, ramp)``; an off unit gives 0).
* Load: as in the dispatch tasks (:mod:`powerzoo.tasks.economic_dispatch`): each bus's case
  demand x the calendar demand shape x ``load_scale`` (1.1); ``load_stress`` reads demand x 1.15.
* Balance. ``marl_uc``: the units' clipped setpoints are applied as they are and the mismatch
  with the load goes to the slack bus, settled as in ``marl_opf`` (:mod:`powerzoo.tasks.
  balancing`): regulation reserve absorbs it up to a band of 1 % of the split year's peak load
  (10.9 MW on the test split; keyword ``regulation_share``), settled at 2 x the units' highest
  marginal cost (80 $/MWh, keyword ``regulation_price_per_mwh``; above every unit's average cost
  at Pmin with its no-load cost, 51 $/MWh, so neither lowering an output nor stopping a unit
  inside the band pays), and only the energy beyond the band is the ``power_imbalance`` cost,
  settled at ``IMBALANCE_PRICE`` (1,000 $/MWh). ``tso``: the clipped setpoints are balanced by
  the committed units in proportion to their headroom, as automatic generation control would
  (:func:`powerzoo.devices.thermal_unit.balance_dispatch`); only what the committed units' bounds
  cannot absorb remains as imbalance (reported as ``power_imbalance``, not selected, every MWh at
  1,000 $/MWh: no band, since the committed units' whole headroom already did the regulation).
* Network: DC power flow through the PTDF (the slack bus takes the mismatch); line limits of
  ``opf_118`` (binding ratings derived from the DC-OPF at peak load; case5 keeps its published
  ratings). ``line_tightening`` (``tso``): test days with every finite rating x 0.8.
* Shut-down ramp: a unit may stop only from an output at most ``SD_g = max(Pmin, ramp-down per
  step)`` (:mod:`powerzoo.devices.thermal_unit`); a stop requested above it is refused (the
  unit stays on and ramps down; ``info["shutdown_refused"]`` [B, n], ``n_shutdown_refused``,
  and the row counts as overridden). Before this limit units were taken off line from any
  output: measured then, on the earlier exogenous data and its 77 ``marl_uc`` test days, the
  rule stopped 53 of its 419 units above ``SD_g`` (mean output before a stop 0.44 Pmax, max
  1.00); after it, none.
* Reserve: 10-minute spinning reserve. Each committed unit carries ``r_g = min(Pmax - p, 10 x
  ramp-up per minute)`` (what it can deliver in 10 minutes); the requirement is ``RESERVE_MARGIN``
  (10 %) of the load, and on ``tso`` the N-1 row: for every online unit ``k``, ``sum_{g != k}
  r_g >= p_k``, the spinning reserve of the *other* online units covers the loss of unit ``k``'s
  output (the most severe single contingency of NERC BAL-002 and the ISOs' 10-minute
  synchronized reserve requirements; the tripped unit's own headroom goes with it). The step's
  shortfall is ``max(0.1 load - sum_g r_g, max_k (p_k - sum_{g != k} r_g), 0)`` MW, x 0.5 h the
  ``reserve_shortfall`` cost (MWh); ``info["reserve_requirement_mw"]`` is the same requirement
  on the summed reserve, ``max(0.1 load, max_k (p_k + r_k))``. The row used to compare ``p_k``
  with the sum that includes ``r_k``: replayed under the row above, the oracle of that time was
  short on 92 of the 96 steps of test days 0 and 64 (29 of 48 on day 32, 44 MW on average, at
  most 71 MW) and the rule on 742 of the 768 steps of the table's 16 test days (46 MW on
  average). Under the row, on those 16 days (baselines table): the oracle is short on no step
  (the card's ``oracle_n1_shortfall_steps`` = 0) at -2,473,154 $/day (-2,470,159 under the
  former row: 0.12 % more cost), the rule on no step at -2,736,114 $/day (-2,688,682 before,
  when it was over the reserve budget on 4 of the 16 days by the former row), within both
  budgets on every day; the oracle's headroom over the rule is 9.6 %. ``marl_uc`` has no N-1
  term: its two large units (520 and 600 MW, Pmin 208 and 240 MW) are 50-190 % of its load and
  the whole fleet's 10-minute response is 226 MW, so no commitment could cover the loss of
  either; the 5-bus area is read as a member of a reserve-sharing group carrying 10 % of its
  load. The former measure, committed capacity minus
  load, counted capacity that cannot be reached in 10 minutes: on the 65 ``marl_uc`` test days
  under the oracle 196 MW of it on average where 90 MW were deliverable (under the rule 227 and
  96 MW). ``info``: ``reserve_mw`` (deliverable), ``reserve_requirement_mw``,
  ``committed_capacity_mw``, ``headroom_mw`` (committed capacity - load).
* Reward: ``-(fuel + no-load + start-up + shut-down cost + |imbalance| x 1,000 $/MWh + line
  overload x 2,000 $/MWh)`` in $ per step (``REWARD_TERMS``; ``marl_uc``: the imbalance beyond
  the band, plus ``regulation_cost`` within it, ``MARL_UC_REWARD_TERMS``, shared by its
  agents). The overload price is the transmission-constraint penalty factor of
  :data:`powerzoo.tasks.transmission.OVERLOAD_PRICE_PER_MWH` (PJM's default), so the reward's
  optimum respects the line ratings wherever a dispatch can; the oracle MILP prices overloads
  higher still (100,000 $/MWh, :mod:`.milp`). Costs: ``thermal_overload`` (MVAh: overload energy
  above the ratings summed over branches, ``sum_k max(|S_k| - S_rated_k, 0) x dt``; under DC
  power flow ``|S| = |P|``, so MVAh = MWh), ``reserve_shortfall`` (MWh), ``power_imbalance``
  (MWh; ``marl_uc``: beyond the band, ``info["regulation_mwh"]`` within it). Line ratings:
  case5's published ones, case118's by voltage class (:mod:`powerzoo.physics.line_ratings`).
* Episode start: the units a priority list (full-load average cost) commits for the first
  step's load plus reserve are on, free to switch (their minimum times have passed), at the
  merit-order dispatch of that load. The first step has no ramp limit (the previous day's
  dispatch is not modelled, and a network-blind start could otherwise force overloads).
* Baselines: random; rule (priority-list commitment for ``max(load now, load next)`` plus the
  reserve requirement within the minimum up/down times and the shut-down ramp, units with the
  cheapest no-load cost per MW of 10-minute response added until the committed response covers
  the requirement; then congestion-aware economic dispatch of the committed units within their
  ramp bounds, each unit held below Pmax by its share of the reserve,
  :func:`powerzoo.physics.redispatch.redispatch`; while a branch stays overloaded, the cheapest
  free unit that relieves it and whose Pmin fits under the load is committed too, up to 6 per
  step; on ``tso`` redone while the N-1 row fails, counting each unit's response at most Pmax -
  Pmin; :mod:`.rule`); oracle (day-ahead UC MILP with perfect foresight, the same reserve, N-1
  and shut-down rows as the env, :mod:`.oracle`, replayed in the env).

Modules: :mod:`.spec` (parameters, network, specs), :mod:`.task` (state, reset / observe / step),
:mod:`.rule` (the rule-based baseline), :mod:`.milp` (the UC MILP's model) and :mod:`.oracle`
(its solve in rounds, with the commitment repair).
"""

from powerzoo.tasks.unit_commitment.spec import MarlUcParams, UCParams, uc_case, uc_fleet
from powerzoo.tasks.unit_commitment.task import MarlUc, Tso, UCState, UnitCommitment

__all__ = [
    "MarlUc",
    "MarlUcParams",
    "Tso",
    "UCParams",
    "UCState",
    "UnitCommitment",
    "uc_case",
    "uc_fleet",
]
