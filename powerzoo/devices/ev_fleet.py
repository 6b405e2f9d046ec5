"""Batched fleet of electric vehicles with bidirectional (V2G) chargers.

Every array is ``[B, n_vehicles]``: ``B`` independent environments, ``n_vehicles`` cars each.
Units are the charger's: kW and kWh. Sign convention: ``p_kw > 0`` discharges into the grid
(vehicle-to-grid), ``p_kw < 0`` charges.

A car is either **plugged in** (at its charger) or **away** (driving). One step of ``dt_h``:

1. A plugged-in car's request is cut to its charger ratings and to what its battery allows:
   charging stops at ``soc_max`` and V2G discharge at ``soc_min`` (a car below ``soc_min`` can
   only charge). An away car exchanges no power, whatever was asked.
2. Efficiencies act on the battery side, as in :mod:`powerzoo.devices.battery`: charging
   ``|p| dt`` kWh from the grid stores ``eta_c |p| dt``; delivering ``p dt`` kWh takes
   ``p dt / eta_d`` from the battery.
3. An away car's battery supplies the trip: ``drive_kwh`` is drawn. Driving may take the battery
   below ``soc_min`` (that floor is for V2G only) but not below empty; trip energy beyond what
   is stored is reported as ``unserved_drive_kwh`` (energy the driver had to find elsewhere).

So, per car and step, exactly::

    energy_after = energy + eta_c * charge_kwh - discharge_kwh / eta_d - drive_kwh +
    unserved_drive_kwh

Departure target: a car should leave with ``target_soc``; :func:`departure_goal_kwh` caps that at
what charging at full power from its arrival could reach, so a shortfall always measures the
charging that was not done (:func:`departure_shortfall_kwh`).

Wear: V2G is charged the wear cost every battery of PowerZoo pays (7.5 $ per MWh of grid-side
throughput on each leg, derived in :mod:`powerzoo.devices.battery`) on the throughput it adds: each
discharged kWh and the grid-side energy that puts the same stored energy back, ``1 / (eta_c
eta_d)`` kWh, so :attr:`EVFleetParams.v2g_wear_per_kwh` = 7.5 $/MWh x (1 + 1 / (eta_c eta_d))
per kWh discharged (16.4 $/MWh at the default efficiencies). Charging for the drivers' trips is
their ordinary use of the car and carries no wear in the site's accounts.

Default ratings: a 60 kWh battery (a mid-size battery-electric car), a 7.2 kW bidirectional
charger (240 V x 30 A, a common residential Level 2 rating), 92 % efficiency each way (about
85 % round trip through a bidirectional charger), V2G down to 20 % SOC, charging up to 90 % SOC,
a departure target of 80 % SOC.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from powerzoo.devices.battery import WEAR_COST_PER_MWH

__all__ = [
    "EVFleetParams",
    "EVFleetStep",
    "ev_fleet_step",
    "ev_power_limits_kw",
    "departure_goal_kwh",
    "departure_shortfall_kwh",
    "SHORTFALL_TOLERANCE_KWH",
]

SHORTFALL_TOLERANCE_KWH = (
    1e-4  # below this (0.1 Wh) a car counts as leaving on target (float32 round-off)
)


@dataclasses.dataclass(frozen=True)
class EVFleetParams:
    """Ratings shared by every car of a fleet (scalars)."""

    battery_kwh: float = 60.0
    charge_max_kw: float = 7.2
    discharge_max_kw: float = 7.2
    charge_efficiency: float = 0.92
    discharge_efficiency: float = 0.92
    soc_min: float = 0.2  # V2G floor
    soc_max: float = 0.9  # charging ceiling
    target_soc: float = 0.8  # departure target
    degradation_cost_per_mwh: float = WEAR_COST_PER_MWH  # $ per MWh of grid-side throughput

    def __post_init__(self) -> None:
        for name in ("battery_kwh", "charge_max_kw"):
            if not getattr(self, name) > 0.0:
                raise ValueError(
                    f"EVFleetParams.{name} must be positive, got {getattr(self, name)}"
                )
        if not self.discharge_max_kw >= 0.0:
            raise ValueError(
                "EVFleetParams.discharge_max_kw must be >= 0 (0: no V2G), got "
                f"{self.discharge_max_kw}"
            )
        for name in ("charge_efficiency", "discharge_efficiency"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(
                    f"EVFleetParams.{name} must be in (0, 1], got {getattr(self, name)}"
                )
        if not self.degradation_cost_per_mwh >= 0.0:
            raise ValueError(
                "EVFleetParams.degradation_cost_per_mwh must be >= 0, got "
                f"{self.degradation_cost_per_mwh}"
            )
        if not 0.0 <= self.soc_min <= self.target_soc <= self.soc_max <= 1.0:
            raise ValueError(
                "need 0 <= soc_min <= target_soc <= soc_max <= 1, got "
                f"{self.soc_min}, {self.target_soc}, {self.soc_max}"
            )

    @property
    def v2g_wear_per_kwh(self) -> float:
        """Wear ($) per kWh of V2G discharge (grid side): that kWh and the ``1 / (eta_c eta_d)``
        kWh charged to put it back, at ``degradation_cost_per_mwh`` (module docstring)."""
        round_trip = 1.0 + 1.0 / (self.charge_efficiency * self.discharge_efficiency)
        return self.degradation_cost_per_mwh * 1e-3 * round_trip

    @property
    def min_kwh(self) -> float:
        """Lowest allowed battery energy, kWh."""
        return self.soc_min * self.battery_kwh

    @property
    def max_kwh(self) -> float:
        """Highest allowed battery energy, kWh."""
        return self.soc_max * self.battery_kwh

    @property
    def target_kwh(self) -> float:
        """Battery energy of the departure goal, kWh."""
        return self.target_soc * self.battery_kwh


@dataclasses.dataclass(frozen=True)
class EVFleetStep:
    """Result of one step; every field is ``[B, n_vehicles]``."""

    energy_kwh: np.ndarray  # battery energy after the step
    p_kw: np.ndarray  # power exchanged with the grid (+ discharge); 0 for an away car
    charge_kwh: np.ndarray  # grid-side energy charged (>= 0)
    discharge_kwh: np.ndarray  # grid-side energy discharged (>= 0)
    drive_kwh: np.ndarray  # battery energy the trip asked for (>= 0, away cars only)
    unserved_drive_kwh: np.ndarray  # part of drive_kwh the battery could not supply (>= 0)


def ev_power_limits_kw(
    params: EVFleetParams, energy_kwh: np.ndarray, plugged: np.ndarray, dt_h: float
) -> tuple[np.ndarray, np.ndarray]:
    """Largest charge and discharge power (kW, both >= 0) each car can take this step; 0 while
    away."""
    charge = np.subtract(params.max_kwh, energy_kwh)
    np.maximum(charge, 0.0, out=charge)
    charge *= 1.0 / (params.charge_efficiency * dt_h)
    np.minimum(charge, params.charge_max_kw, out=charge)
    charge *= plugged
    discharge = np.subtract(energy_kwh, params.min_kwh)
    np.maximum(discharge, 0.0, out=discharge)
    discharge *= params.discharge_efficiency / dt_h
    np.minimum(discharge, params.discharge_max_kw, out=discharge)
    discharge *= plugged
    return charge, discharge


def ev_fleet_step(
    params: EVFleetParams,
    energy_kwh: np.ndarray,
    p_request_kw: np.ndarray,
    plugged: np.ndarray,
    drive_kwh: np.ndarray,
    dt_h: float,
) -> EVFleetStep:
    """Advance the fleet one step of ``dt_h`` hours (module docstring).

    ``energy_kwh`` [B, N] battery energy, ``p_request_kw`` [B, N] requested power (+ discharge),
    ``plugged`` [B, N] bool, ``drive_kwh`` [B, N] battery energy the trip of an away car draws this
    step (ignored for plugged-in cars). Results are in ``energy_kwh``'s float type (a task may keep
    a large fleet in float32: 4 mWh resolution at 60 kWh). Written with in-place operations: a
    fleet step of a large batch is a few dozen passes over ``[B, N]`` arrays, so temporaries matter.

    Args:
        params: The fleet's parameters.
        energy_kwh: Battery energy [B, N], kWh.
        p_request_kw: Requested power [B, N], kW (+ discharge).
        plugged: Whether each car is plugged in [B, N].
        drive_kwh: Energy an away car's trip draws this step [B, N], kWh.
        dt_h: Step length, hours.

    Returns:
        New energy (kWh), grid power (kW), energy charged and discharged (kWh), trip energy
        the battery could not supply (kWh).
    """
    if p_request_kw.shape != energy_kwh.shape:
        raise ValueError(
            f"p_request_kw has shape {p_request_kw.shape}, expected {energy_kwh.shape} (B, "
            "n_vehicles)"
        )
    maximum, minimum = np.maximum, np.minimum
    limit = np.subtract(energy_kwh, params.max_kwh)  # -(room below soc_max), storage side
    minimum(limit, 0.0, out=limit)
    limit *= 1.0 / (params.charge_efficiency * dt_h)  # -(largest charge power the room allows)
    maximum(limit, -params.charge_max_kw, out=limit)
    p_kw = maximum(p_request_kw, limit, dtype=limit.dtype)  # in the energy's precision
    np.subtract(energy_kwh, params.min_kwh, out=limit)  # energy above soc_min
    maximum(limit, 0.0, out=limit)
    limit *= params.discharge_efficiency / dt_h
    minimum(limit, params.discharge_max_kw, out=limit)
    minimum(p_kw, limit, out=p_kw)
    p_kw *= plugged  # an away car exchanges nothing
    discharge_kwh = maximum(p_kw, 0.0)
    if dt_h == 1.0:
        charge_kwh = np.subtract(discharge_kwh, p_kw)  # max(-p, 0)
    else:
        discharge_kwh *= dt_h
        charge_kwh = np.multiply(p_kw, -dt_h)
        charge_kwh += discharge_kwh  # max(-p, 0) dt
    drive = np.multiply(drive_kwh, ~plugged)
    energy = np.multiply(charge_kwh, params.charge_efficiency)
    energy += energy_kwh
    np.multiply(discharge_kwh, 1.0 / params.discharge_efficiency, out=limit)
    energy -= limit
    energy -= drive
    if np.minimum.reduce(energy, axis=None) < 0.0:
        unserved = maximum(np.negative(energy), 0.0)
        energy += unserved
    else:
        unserved = np.zeros_like(energy)
    return EVFleetStep(energy, p_kw, charge_kwh, discharge_kwh, drive, unserved)


def departure_goal_kwh(
    params: EVFleetParams, energy_kwh: np.ndarray, plugged_steps: np.ndarray, dt_h: float
) -> np.ndarray:
    """Energy a car arriving with ``energy_kwh`` should leave with after ``plugged_steps`` steps at
    its charger: the target, or what charging at full power all that time reaches if that is
    less."""
    reach = np.minimum(
        energy_kwh + params.charge_efficiency * params.charge_max_kw * dt_h * plugged_steps,
        params.max_kwh,
    )
    return np.minimum(params.target_kwh, np.maximum(reach, energy_kwh))


def departure_shortfall_kwh(
    goal_kwh: np.ndarray, energy_kwh: np.ndarray, leaving: np.ndarray
) -> np.ndarray:
    """Energy (kWh, >= 0) each leaving car lacks of its goal; 0 for cars that stay or miss it by
    less than :data:`SHORTFALL_TOLERANCE_KWH`."""
    gap = goal_kwh - energy_kwh
    return np.where(leaving & (gap > SHORTFALL_TOLERANCE_KWH), gap, 0.0)
