"""Device models: batched, numpy-only state updates of the assets the tasks control.

Each device is a parameter dataclass plus a step function (or a small stepper class) that takes
the batch's state and setpoints and returns the new state, the power actually delivered (MW or
kW, as named) and the step's constraint costs. The public names are available at package level
(``from powerzoo.devices import BatteryParams, battery_step``), each loaded on first use.
"""

from __future__ import annotations

from powerzoo.lazy import lazy_exports

_EXPORTS = {
    "BatteryParams": "powerzoo.devices.battery",
    "BatteryStep": "powerzoo.devices.battery",
    "battery_step": "powerzoo.devices.battery",
    "settlement_value": "powerzoo.devices.battery",
    "InverterBatteryParams": "powerzoo.devices.inverter_battery",
    "inverter_battery_step": "powerzoo.devices.inverter_battery",
    "EVFleetParams": "powerzoo.devices.ev_fleet",
    "ev_fleet_step": "powerzoo.devices.ev_fleet",
    "PVParams": "powerzoo.devices.pv",
    "pv_power_mw": "powerzoo.devices.pv",
    "PVInverterParams": "powerzoo.devices.pv_inverter",
    "pv_inverter_step": "powerzoo.devices.pv_inverter",
    "ThermalFleet": "powerzoo.devices.thermal_unit",
    "fleet_from_case": "powerzoo.devices.thermal_unit",
    "FlexibleLoadParams": "powerzoo.devices.flexible_load",
    "flexible_load_step": "powerzoo.devices.flexible_load",
    "DieselParams": "powerzoo.devices.diesel",
    "DieselGenerator": "powerzoo.devices.diesel",
    "ZoneParams": "powerzoo.devices.thermal_zone",
    "zone_step": "powerzoo.devices.thermal_zone",
    "CoolingParams": "powerzoo.devices.cooling",
    "cooling_cop": "powerzoo.devices.cooling",
    "GpuClusterParams": "powerzoo.devices.gpu_cluster",
    "GpuCluster": "powerzoo.devices.gpu_cluster",
    "GridTieParams": "powerzoo.devices.grid_tie",
    "GridTie": "powerzoo.devices.grid_tie",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
