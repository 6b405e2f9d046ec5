"""``volt_var_123``: volt-var control of the IEEE 123-node feeder with rooftop PV (taps,
capacitors and PV inverters' reactive power on the batched three-phase power flow)."""

from powerzoo.tasks.volt_var.spec import VoltVarParams
from powerzoo.tasks.volt_var.task import VoltVar123, VoltVarState

__all__ = ["VoltVar123", "VoltVarParams", "VoltVarState"]
