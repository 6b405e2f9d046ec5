"""The data centre shared by ``dc_microgrid`` and ``dc_scheduling``: its site (every device with
its ratings, :mod:`.site`) and its batched model of compute, cooling and the job queue
(:mod:`.model`)."""

from powerzoo.tasks.datacentre.model import DataCentre
from powerzoo.tasks.datacentre.site import SETPOINT_MAX_C, SETPOINT_MIN_C, DCMicrogridParams

__all__ = ["DataCentre", "DCMicrogridParams", "SETPOINT_MAX_C", "SETPOINT_MIN_C"]
