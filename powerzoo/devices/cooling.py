"""Batched cooling plant whose coefficient of performance (COP) falls with outdoor temperature.

COP is a fixed fraction of the Carnot COP between the evaporator and the condenser:

``COP = clip(eta * (T_evap + 273.15) / max(T_cond - T_evap, 1), cop_min, cop_max)``,
``T_evap = setpoint - evaporator_approach``, ``T_cond = T_outdoor + condenser_approach``.

* ``eta = 0.35``: real vapour-compression chiller plants reach roughly 30-50 % of the Carnot
  COP (Gordon & Ng, "Cool Thermodynamics", 2000); 0.35 for a whole plant with pumps and fans.
* approaches of 8 K: supply air / chilled water below the room setpoint, air-cooled condenser
  above the outdoor dry-bulb temperature (typical design values).
* ``cop_max = 7``: plant limit in mild weather (economiser-assisted); ``cop_min = 2``.
* ``q_max_mw = 3.5``: thermal capacity, about 1.3 x the cluster's peak IT heat (N+1 sizing).

A higher setpoint raises ``T_evap`` and the COP, so warmer server rooms cost less cooling
energy, which is why the setpoint is an action. With a 25 deg C setpoint the COP is about 6.3
at 25 deg C outdoors, 3.9 at 35 deg C and 3.1 at 42 deg C.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

__all__ = ["CoolingParams", "CoolingPlant", "cooling_cop"]

KELVIN = 273.15


@dataclasses.dataclass(frozen=True)
class CoolingParams:
    """Cooling plant parameters (temperatures in deg C or K, powers in MW)."""

    carnot_fraction: float = 0.35
    evaporator_approach_k: float = 8.0
    condenser_approach_k: float = 8.0
    cop_min: float = 2.0
    cop_max: float = 7.0
    q_max_mw: float = 3.5  # heat the plant can remove (MW thermal)

    def __post_init__(self) -> None:
        if not 0.0 < self.carnot_fraction <= 1.0:
            raise ValueError(f"carnot_fraction must be in (0, 1], got {self.carnot_fraction}")
        if not 0.0 < self.cop_min <= self.cop_max:
            raise ValueError("need 0 < cop_min <= cop_max")
        if self.q_max_mw <= 0.0:
            raise ValueError(f"q_max_mw must be positive, got {self.q_max_mw}")


class CoolingPlant:
    """The plant's COP model: the one implementation behind :func:`cooling_cop`.

    ``float64_constants=True`` (the default) makes the parameters 0-d float64 arrays (numpy
    converts a Python float operand on every call, which dominates on small batches): for
    float64 batches. ``False`` keeps the parameters' Python floats, so numpy's Python-scalar
    rules apply and a float32 batch stays float32: what :func:`cooling_cop` uses. The values
    are the same bit for bit either way on float64 batches (tested).
    """

    def __init__(self, params: CoolingParams, *, float64_constants: bool = True) -> None:
        const = (lambda x: np.array(x, np.float64)) if float64_constants else (lambda x: x)
        self.evaporator_approach_k, self.condenser_approach_k = (
            const(params.evaporator_approach_k),
            const(params.condenser_approach_k),
        )
        self.carnot_fraction, self.kelvin, self.min_lift_k = (
            const(params.carnot_fraction),
            const(KELVIN),
            const(1.0),
        )
        self.cop_min, self.cop_max = const(params.cop_min), const(params.cop_max)

    def condenser_temp_c(self, temp_out_c: np.ndarray) -> np.ndarray:
        """Condenser temperature (deg C) at outdoor temperature ``temp_out_c``: a weather-only
        quantity a task can tabulate once for :meth:`cop_at`."""
        return temp_out_c + self.condenser_approach_k

    def cop_at(self, condenser_c: np.ndarray, setpoint_c: np.ndarray) -> np.ndarray:
        """COP [B] at condenser temperature (:meth:`condenser_temp_c`) and room setpoint (deg C)."""
        t_evap = setpoint_c - self.evaporator_approach_k
        lift = np.maximum(condenser_c - t_evap, self.min_lift_k)
        cop = self.carnot_fraction * (t_evap + self.kelvin) / lift
        return np.minimum(np.maximum(cop, self.cop_min), self.cop_max)

    def cop(self, temp_out_c: np.ndarray, setpoint_c: np.ndarray) -> np.ndarray:
        """COP [B] (heat removed / electric power) at outdoor temperature and room setpoint (deg
        C)."""
        return self.cop_at(self.condenser_temp_c(temp_out_c), setpoint_c)


@functools.lru_cache(maxsize=16, typed=True)
def _plant(params: CoolingParams) -> CoolingPlant:
    """The functions' :class:`CoolingPlant` (the parameters' own values as constants)."""
    return CoolingPlant(params, float64_constants=False)


def cooling_cop(
    params: CoolingParams, temp_out_c: np.ndarray, setpoint_c: np.ndarray
) -> np.ndarray:
    """COP [B] (heat removed / electric power) at outdoor temperature and room setpoint (deg C).

    Args:
        params: The cooling plant's parameters.
        temp_out_c: Outdoor temperature [B], deg C.
        setpoint_c: Room setpoint [B], deg C.

    Returns:
        COP [B], unit-free.
    """
    return _plant(params).cop(temp_out_c, setpoint_c)
