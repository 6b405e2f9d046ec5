"""``marl_ev_v2g``: EV charging sites with V2G chargers on the IEEE 33-bus feeder over a week.

The task (:mod:`.task`), its observation layout (:mod:`.observation`) and its rule-based and
perfect-foresight baselines (:mod:`.baselines`).
"""

from powerzoo.tasks.ev_v2g.task import EvV2gParams, EvV2gState, MarlEvV2g, site_buses

__all__ = ["EvV2gParams", "EvV2gState", "MarlEvV2g", "site_buses"]
