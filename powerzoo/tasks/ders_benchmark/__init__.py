"""``marl_ders_benchmark``: batteries, PV inverters and flexible loads on the 141-bus feeder.

The task (:mod:`.task`), its observation layout (:mod:`.observation`) and its perfect-foresight
day plan (:mod:`.oracle`).
"""

from powerzoo.tasks.ders_benchmark.observation import AGENTS, BATTERIES, LOADS, PVS
from powerzoo.tasks.ders_benchmark.task import (
    BATTERY_BUSES,
    FLEX_BUSES,
    PV_BUSES,
    DersBenchmarkParams,
    DersState,
    MarlDersBenchmark,
)

__all__ = [
    "AGENTS",
    "BATTERIES",
    "BATTERY_BUSES",
    "FLEX_BUSES",
    "LOADS",
    "PVS",
    "PV_BUSES",
    "DersBenchmarkParams",
    "DersState",
    "MarlDersBenchmark",
]
