"""``dc_microgrid_safe``: the CMDP form of the ``dc_microgrid`` task (same model, no penalties
in the reward)."""

from __future__ import annotations

from powerzoo.tasks.dc_microgrid.task import DCMicrogrid

__all__ = ["DCMicrogridSafe"]


class DCMicrogridSafe(DCMicrogrid):
    """Preset ``dc_microgrid_safe``: the CMDP form of ``dc_microgrid``. The reward is
    ``reward_vector @ (1, 0.5, 25.5)`` exactly, without penalties; the three costs are its selected
    constraints with per-episode budgets.

    ## Reward
    ``weights @ info["reward_vector"]`` with weights ``(1, 0.5, 25.5)`` (carbon at 51 $/tCO2):
    energy (MWh), cost ($, the battery settlement on the last step) and carbon (tCO2).
    """

    task_id = "dc_microgrid_safe"
    penalized = False
    gym_id = "powerzoo/DCMicrogridSafe-v0"
