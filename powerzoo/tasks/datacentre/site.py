"""The data-centre site: every device of the data centre and its microgrid, with their ratings.

Shared by ``dc_microgrid`` (task, rule-based controller and oracle) and ``dc_scheduling`` (which
places the same data centre on a feeder); it imports only the device models.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from powerzoo.data.markets import DEFAULT_MARKET, check_market
from powerzoo.devices.battery import BatteryParams
from powerzoo.devices.cooling import CoolingParams
from powerzoo.devices.diesel import DieselParams
from powerzoo.devices.gpu_cluster import GpuClusterParams
from powerzoo.devices.grid_tie import GridTieParams
from powerzoo.devices.pv import PVParams
from powerzoo.devices.thermal_zone import ZoneParams

__all__ = ["DCMicrogridParams", "SETPOINT_MIN_C", "SETPOINT_MAX_C"]

# cooling setpoint range, deg C (ASHRAE A1: recommended 18-27, allowable to 32)
SETPOINT_MIN_C, SETPOINT_MAX_C = 18.0, 32.0


@dataclasses.dataclass(frozen=True)
class DCMicrogridParams:
    """Every device of the site (see each device module for units and sources)."""

    cluster: GpuClusterParams = GpuClusterParams()
    cooling: CoolingParams = CoolingParams()
    zone: ZoneParams = ZoneParams()
    pv: PVParams = PVParams()
    # a 2 MW / 4 MWh (2 h) Li-ion system with the shared wear cost of every battery (15 $ per
    # MWh of throughput, derived in powerzoo.devices.battery.BatteryParams)
    battery: BatteryParams = BatteryParams(energy_capacity_mwh=4.0, power_max_mw=2.0)
    diesel: DieselParams = DieselParams()
    grid: GridTieParams = GridTieParams()
    initial_soc: float = 0.5
    initial_zone_temp_c: float = 24.0
    # the price model of the grid tie's import price (powerzoo.data.markets.MARKETS)
    market: str = DEFAULT_MARKET

    # task keyword -> (device, field); the other keywords are the three fields above
    DEVICE_KEYWORDS: ClassVar[dict[str, tuple[str, str]]] = {
        "n_gpus": ("cluster", "n_gpus"),
        "pv_capacity_mw": ("pv", "capacity_mw"),
        "battery_energy_mwh": ("battery", "energy_capacity_mwh"),
        "battery_power_mw": ("battery", "power_max_mw"),
        "degradation_cost_per_mwh": ("battery", "degradation_cost_per_mwh"),
        "diesel_rated_mw": ("diesel", "rated_mw"),
        "grid_import_max_mw": ("grid", "import_max_mw"),
        "cooling_capacity_mw": ("cooling", "q_max_mw"),
    }
    KEYWORDS: ClassVar[tuple[str, ...]] = (
        *DEVICE_KEYWORDS,
        "initial_soc",
        "initial_zone_temp_c",
        "market",
    )

    @classmethod
    def from_keywords(cls, **kwargs: Any) -> DCMicrogridParams:
        """Defaults overridden by task keywords (see ``KEYWORDS``; the caller rejects others)."""
        params = cls(
            **{
                k: float(v)
                for k, v in kwargs.items()
                if k in ("initial_soc", "initial_zone_temp_c")
            },
            market=check_market(kwargs.get("market", DEFAULT_MARKET)),
        )
        for key, (device, field) in cls.DEVICE_KEYWORDS.items():
            if key in kwargs:
                value = int(kwargs[key]) if field == "n_gpus" else float(kwargs[key])
                replaced = dataclasses.replace(getattr(params, device), **{field: value})
                params = dataclasses.replace(params, **{device: replaced})
        if not 10.0 <= params.initial_zone_temp_c <= 40.0:
            raise ValueError(
                f"initial_zone_temp_c must lie in [10, 40] deg C, got {params.initial_zone_temp_c}"
            )
        if not params.battery.soc_min <= params.initial_soc <= params.battery.soc_max:
            raise ValueError(
                f"initial_soc must lie in [{params.battery.soc_min}, {params.battery.soc_max}], "
                f"got {params.initial_soc}"
            )
        return params
