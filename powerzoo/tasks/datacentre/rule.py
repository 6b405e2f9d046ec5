"""The compute and cooling part of the data centre's rule-based controller.

Shared by ``dc_microgrid`` (whose rule adds storage and diesel dispatch) and ``dc_scheduling``
(which uses this part alone, blind to its feeder).

* GPUs: fine-tuning (the class with the earliest deadlines) first, then training, each
  ``max(1.1 x required_gpus, queued_gpuh / 4 h)``: at least the least allocation that meets every
  deadline earliest-deadline-first, and enough to drain the queue in 4 h so that work is not left
  to pile up against the end of the day; the rest are parked.
* Cooling: setpoint 26 deg C (1 K below the A1 limit), 24 deg C while the zone is above 26.5 deg C.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["rule_compute_and_cooling"]

RULE_GPU_MARGIN = 1.1  # allocate at least 10 % above the least deadline-meeting rate ...
RULE_DRAIN_H = 4.0  # ... and at least the rate that would empty the class's queue in 4 h
RULE_SETPOINT_C, RULE_RECOVERY_SETPOINT_C, RULE_RECOVERY_ABOVE_C = 26.0, 24.0, 26.5


def rule_compute_and_cooling(
    n_gpus: int, obs: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPUs for training and for fine-tuning [B] and the cooling setpoint [B] (deg C) of the rule.

    Reads the observation fields ``{training,finetune}_required_gpus``, ``..._queued_gpuh`` and
    ``zone_temp_c`` (name -> [B] column); ``n_gpus`` is the cluster's size. The rule is in the
    module docstring.
    """

    def gpus_for(job: str) -> np.ndarray:
        return np.maximum(
            obs[f"{job}_required_gpus"] * RULE_GPU_MARGIN, obs[f"{job}_queued_gpuh"] / RULE_DRAIN_H
        )

    ft = np.minimum(gpus_for("finetune"), n_gpus)
    tr = np.minimum(gpus_for("training"), n_gpus - ft)
    setpoint = np.where(
        obs["zone_temp_c"] > RULE_RECOVERY_ABOVE_C, RULE_RECOVERY_SETPOINT_C, RULE_SETPOINT_C
    )
    return tr, ft, setpoint
