"""Three-phase unbalanced distribution feeders: OpenDSS readers and a batched power flow.

``load_feeder(name)`` reads one of the vendored test feeders (``"ieee13"``, ``"ieee34"``,
``"ieee37"``, ``"ieee123"``, ``"european_lv"``; OpenDSS files under
``powerzoo/data/feeders/`` with their licence note) and ``unbalanced_power_flow`` solves a
batch of load scenarios on it, regulator taps as inputs. See ``docs/physics.md``, "Three-phase
unbalanced feeders".
"""

from powerzoo.physics.unbalanced.dss_reader import DSSFormatError
from powerzoo.physics.unbalanced.feeder import (
    FEEDER_MASTER_FILES,
    Feeder,
    feeder_from_master,
    load_feeder,
)
from powerzoo.physics.unbalanced.flow import unbalanced_power_flow
from powerzoo.physics.unbalanced.result import UnbalancedPFResult

__all__ = [
    "FEEDER_MASTER_FILES",
    "DSSFormatError",
    "Feeder",
    "UnbalancedPFResult",
    "feeder_from_master",
    "load_feeder",
    "unbalanced_power_flow",
]
