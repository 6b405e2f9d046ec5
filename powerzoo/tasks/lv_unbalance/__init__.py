"""``lv_unbalance``: rooftop PV and home chargers on the IEEE European LV feeder, five agents,
an exact three-phase unbalanced flow every step.

The task is :class:`~powerzoo.tasks.lv_unbalance.task.LvUnbalance` (its docstring has the spaces,
reward, costs and baselines); the homes, their loads, PV, tariff and charging sessions are in
:mod:`.homes`, the feeder's voltages, unbalance and ratings in :mod:`.network`, the rule in
:mod:`.rule` and the perfect-foresight oracle in :mod:`.oracle`.
"""

from powerzoo.tasks.lv_unbalance.spec import LvUnbalanceParams
from powerzoo.tasks.lv_unbalance.task import LvUnbalance, LvUnbalanceState

__all__ = ["LvUnbalance", "LvUnbalanceParams", "LvUnbalanceState"]
