"""``marl_ev_v2g``: EV charging sites on the IEEE 33-bus feeder charge for their drivers and sell
V2G energy.

Model (multi-agent, per-agent reward, 60-minute steps, 168 per episode = one week from midnight)
---------------------------------------------------------------------------------------------------
* Feeder: ``case33bw`` with an exact AC power flow every step (:mod:`powerzoo.tasks.feeder`); bus
  loads = the case's base load x ``load_scale = 0.7`` x the calendar load shape ``demand_pu``
  (as ``marl_der_arbitrage``). A week that runs past 31 December wraps to January. At the head an
  on-load tap changer under its automatic voltage controller (:mod:`powerzoo.tasks.feeder_ltc`;
  ``ltc=False``: the head fixed at 1.00 p.u.) holds the head at 1.019 p.u.
* Agents ``site_0 .. site_{n-1}`` (``n_evs`` of them, default 5): charging sites, each with
  ``vehicles_per_site`` cars (default ``round(420 / n_evs)``, so the fleet stays about 420 cars)
  on 7.2 kW bidirectional chargers (:mod:`powerzoo.devices.ev_fleet`: 60 kWh batteries, 92 %
  each way, V2G down to 20 % SOC, charging up to 90 %, departure target 80 %). Site ``i`` sits
  at 0-based bus ``1 + floor((i + 0.5) * 32 / n)``, spread evenly over the 32 load buses in case
  order (n = 5: buses 4, 10, 17, 23, 29: the trunk, its far end and the three laterals); more
  than 32 sites share buses.
* Sizing (measured on the 35 test weeks, the LTC in place): a fleet of 420 cars (84 a site,
  3.0 MW of chargers against the feeder's 2.6 MW peak load at ``load_scale = 0.7``: a suburb where
  four homes in ten drive electric). Charging every car on arrival (the idle baseline below)
  meets the evening peak and overloads the trunk (largest loading 1.50 of a rating; 1.9 MVAh of
  ``thermal_overload`` a week, above the 1.75 MVAh budget in 28 of the 35 weeks, 80 %); the
  oracle, which spreads the charging over the night and sells V2G at the peak, keeps every
  budget every week. With the head at 1.00 p.u. (``ltc=False``) the same charging also leaves
  the voltage band (2.5 p.u.-steps a week). The tap lifts the voltages but cannot relieve a
  line. (On the earlier fleet of 100 cars no week was over budget, with the LTC or without.)
* Trips (:mod:`powerzoo.data.mobility`): per episode, each car's trips of the week are drawn from
  the env's RNG (weekday commutes, fewer and shorter weekend trips, on the calendar's own
  weekends and holidays); starting SOC uniform in [0.5, 0.8]. Cars are home at midnight. A car
  leaves at the start of the hour its trip starts and is plugged in again from the hour it is
  back; its trip energy is drawn evenly over the hours away.
* Action per agent: one power per car of the site, ``ev_j.p_kw`` in [-7.2, 7.2] kW (- charge,
  + discharge). Only plugged-in cars act: an away car's entry is ignored, a request beyond the
  battery's limits is cut (``info["action_applied"]`` and ``info["ev_p_kw"]`` hold what was
  applied).
* Reward, **per agent**: the site's V2G revenue minus its charging cost at the data layer's
  ``price_per_mwh`` (``price x (discharged - charged kWh) / 1000``, $ per step), minus the wear
  V2G adds (:attr:`powerzoo.devices.ev_fleet.EVFleetParams.v2g_wear_per_kwh`: 7.5 $/MWh, the wear
  of every battery, on each discharged kWh and on the ``1 / (eta_c eta_d)`` kWh that put it back,
  16.4 $/MWh of V2G discharge; charging for the trips is the drivers' use and carries none), and
  on the week's last step the settlement of the energy its cars hold: every car is home at the
  end, and the change of the site's stored energy since reset (after the trips) is valued at the
  week's mean price ``m``, a surplus as sold through the chargers (``eta_d m`` per MWh), a
  deficit as bought back (``m / eta_c``) (:meth:`MarlEvV2g.settlement`). The departure goals
  still hold at the end. ``info["reward_terms"]`` holds the team sums ``[v2g_revenue,
  charging_cost, v2g_wear, settlement]`` and ``info["agent_profit"]`` the per-site split.
* Costs (all selected, >= 0 per step): ``departure_shortfall`` (kWh the cars leaving this step
  lack of their goal, summed: the goal is 80 % SOC, or what charging at full power since the
  car's arrival could reach if that is less, so the shortfall is charging that was not done;
  the end of the episode counts as a departure of every car at home, so a fleet cannot be
  emptied into the grid at the end), ``voltage_violation`` (p.u.) and ``thermal_overload``
  (MVAh, overload energy above the line ratings) as in the other feeder tasks. Per-episode (week)
  thresholds 35 kWh, 3.5 p.u.-steps, 1.75 MVAh: daily rates of 5 kWh, 0.5 and 0.25 MVAh (the
  one-day feeder tasks' scale) times the 7 days.
* Observation modes (per agent; grid values from the previous step's flow, at reset from the
  first step's loads with the fleet idle): ``local``: time, price, own block ``own_v_pu,
  own_prev_p_mw, own_bus_load_mw, own_plugged_share`` and per car ``plugged_j``, ``soc_j``,
  ``hours_to_departure_j`` and ``energy_needed_kwh_j`` (goal - energy, < 0 when above the goal;
  both 0 while away); ``global`` (default): ``local`` + ``demand_pu, feeder_p_mw, v_min_pu,
  v_max_pu`` and every site's plugged share and energy needed; ``local_plus_forecast``:
  ``local`` + the price of the next 6 hours; ``local_plus_voltage``: ``local`` + the voltages of
  the neighbouring buses.
* Baselines: random; rule-based: valley filling
  (:func:`powerzoo.tasks.ev_v2g.baselines.rule_powers_kw`): every car charges what it needs for
  its goal evenly over the hours until it leaves (and at least what full power could no longer
  make up later), and in the 3 dearest hours of the average day (train days: 18-21 h), when a sale
  pays after the V2G wear against buying the energy back at the mean train-day price
  (:func:`powerzoo.tasks.ev_v2g.baselines.v2g_pays`), it discharges whatever lies above a reserve
  (50 % SOC, and never more than charging at 40 % of the charger's rating can bring back before
  departure) (:meth:`MarlEvV2g.rule_based_action`); oracle: one LP on HiGHS for the week with the
  wear and the settlement (:mod:`powerzoo.tasks.ev_v2g.baselines`). Return summed over the sites
  ($/week) on the 35 test weeks (``benchmarks/compute_baselines.py``): random -2,505 with 68,610
  kWh of shortfall a week (it sends the cars off empty, and the settlement charges it for the
  energy it did not put back); rule-based -91 with no shortfall, 0.03 MVAh of overload and 0.04
  p.u.-steps of voltage violation a week (every budget kept every week; charging at full power on
  arrival and after the V2G hours instead earns +52 but overloads the trunk by 5.1 MVAh a week,
  over a budget in 17 weeks, 48.6 %); oracle +1,341 with no shortfall, no overload and 0.014
  p.u.-steps (every budget kept every week). Idle (``spec.idle_action``): uncontrolled charging,
  every plugged-in car at full charging power until its battery is full (90 %), no V2G, which is
  what chargers do without an operator: -1,422 with no shortfall, 1.94 MVAh of overload and 0.42
  p.u.-steps a week, over the overload budget in 28 weeks (80 %).

Modules: :mod:`.spec` (constants, parameters, spaces), :mod:`.observation` (the observation
fields in every mode and where they sit), :mod:`.task` (state, trip tables, reset / observe /
step) and :mod:`.baselines` (the rule and the oracle LP).
"""

from powerzoo.tasks.ev_v2g.spec import HORIZON, EvV2gParams, site_buses
from powerzoo.tasks.ev_v2g.task import EvV2gState, MarlEvV2g

__all__ = ["EvV2gParams", "EvV2gState", "HORIZON", "MarlEvV2g", "site_buses"]
