"""The rule-based baseline of ``lv_unbalance``: the inverters' standard curves and charging on
arrival.

Each PV inverter follows the default curves of IEEE 1547-2018 for category B (EN 50549-1 has
curves of the same shape), on the voltage of its own phase measured at the last step:

* **volt-var**: reactive power +44 % of the rating (injecting) at or below 0.92 p.u., falling
  linearly to 0 at 0.98 p.u., 0 up to 1.02 p.u., then linearly to -44 % (absorbing) at
  1.08 p.u. and beyond;
* **volt-watt**: active output capped at the rating up to 1.06 p.u., the cap falling linearly
  to 20 % of the rating at 1.10 p.u. and staying there above.

Every charger charges at full power from the moment its car is plugged in (what the charger does
with no controller), so the rule leaves the evening's charging peak as it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.tasks.lv_unbalance.spec import HOME_FIELDS, HOMES_PER_GROUP

__all__ = [
    "VOLT_VAR_PU",
    "VOLT_VAR_Q",
    "VOLT_WATT_PU",
    "VOLT_WATT_P",
    "volt_var",
    "volt_watt",
    "rule_action",
]

VOLT_VAR_PU = (0.92, 0.98, 1.02, 1.08)
VOLT_VAR_Q = (1.0, 0.0, 0.0, -1.0)  # in units of the inverter's reactive capability
VOLT_WATT_PU = (1.06, 1.10)
VOLT_WATT_P = (1.0, 0.2)  # active output cap, p.u. of the rating


def volt_var(v_pu: np.ndarray) -> np.ndarray:
    """Reactive power in units of the inverter's capability (+ inject) at voltages ``v_pu``."""
    return np.interp(v_pu, VOLT_VAR_PU, VOLT_VAR_Q)


def volt_watt(v_pu: np.ndarray) -> np.ndarray:
    """Active output cap [p.u. of the rating] at voltages ``v_pu``."""
    return np.interp(v_pu, VOLT_WATT_PU, VOLT_WATT_P)


def rule_action(task: Any, obs: np.ndarray) -> np.ndarray:
    """The rule's joint action [B, act_dim] from ``local`` observations [B, 5, d] of an
    :class:`~powerzoo.tasks.lv_unbalance.task.LvUnbalance`."""
    obs = np.asarray(obs, dtype=np.float64)
    homes = task.homes
    width = len(HOME_FIELDS)
    v_col = task._home0 + (homes.pv_homes % HOMES_PER_GROUP) * width + 2
    v = obs[:, homes.pv_homes // HOMES_PER_GROUP, v_col]  # [B, n_pv]
    action = np.tile(np.asarray(task.spec.idle_action, dtype=np.float64), (obs.shape[0], 1))
    action[:, task._pv_limit] = volt_watt(v)
    action[:, task._pv_q] = volt_var(v) * homes.q_max_kvar
    return action
