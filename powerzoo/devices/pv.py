"""Batched PV plant: available power from a capacity factor.

``p_mw = capacity_mw * pv_cf``. The capacity factor comes from the PVWatts-style model of
:mod:`powerzoo.data.profiles` (TMY3 irradiance and temperature). The default 2 MW is a
ground-mounted array of about 3-4 ha next to the hall; output above the site's need is curtailed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["PVParams", "pv_power_mw"]


@dataclasses.dataclass(frozen=True)
class PVParams:
    """PV plant rating."""

    capacity_mw: float = 2.0

    def __post_init__(self) -> None:
        if self.capacity_mw < 0.0:
            raise ValueError(f"capacity_mw must be non-negative, got {self.capacity_mw}")


def pv_power_mw(params: PVParams, capacity_factor: np.ndarray) -> np.ndarray:
    """Available PV power [B] (MW) at capacity factor [B] in [0, 1].

    Args:
        params: The plant's rating.
        capacity_factor: Capacity factor [B], in [0, 1].

    Returns:
        Available power [B], MW.
    """
    return params.capacity_mw * capacity_factor
