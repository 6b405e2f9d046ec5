"""The data centre shared by ``dc_microgrid`` and ``dc_scheduling``: its site (every device with
its ratings, :mod:`.site`), its batched model of compute, cooling and the job queue
(:mod:`.model`), the compute and cooling part of the rule-based controller (:mod:`.rule`) and the
blocks of the oracles' day plans (:mod:`.planning`, on the sparse LP of :mod:`.sparse_model`).
Neither task imports the other: what they share is here."""

from powerzoo.tasks.datacentre.model import DataCentre
from powerzoo.tasks.datacentre.site import SETPOINT_MAX_C, SETPOINT_MIN_C, DCMicrogridParams

__all__ = ["DataCentre", "DCMicrogridParams", "SETPOINT_MAX_C", "SETPOINT_MIN_C"]
