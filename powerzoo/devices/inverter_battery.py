"""Batched fleet of inverter-coupled batteries: active power (SOC model) plus reactive power within
an S rating.

Every array is ``[B, n_units]``: ``B`` independent environments, ``n_units`` batteries each.
Sign conventions: ``p_mw > 0`` discharges (energy delivered to the grid), ``q_mvar > 0``
injects reactive power into the grid.

One step, in this order:

1. The P request is cut to the power rating ``[-power_max_mw, power_max_mw]``; what was asked
   beyond it is reported as ``p_rating_excess_mw``.
2. The rated request goes through :func:`powerzoo.devices.battery.battery_step` (the same SOC
   and efficiency model as the single-battery tasks): it is cut to the power the SOC bounds
   allow, ``soc_violation_mwh`` is the storage-side energy asked beyond the bounds, measured
   on the request *before* that cut, and the SOC moves by ``eta_c * charge - discharge / eta_d``.
3. Reactive power gets what the inverter has left: ``|q| <= sqrt(S^2 - p^2)`` with ``p`` the
   *delivered* active power. **Active power has priority**: a Q request never reduces P (the
   energy schedule is what the battery is paid for, and rewards are paid on delivered power);
   the reactive power cut off is reported as ``q_cut_mvar``.

Default ratings (a distribution-connected utility-scale battery on a feeder of a few MW):

* ``energy_capacity_mwh = 2.0``, ``power_max_mw = 1.0``: a 2-hour, 1 MW battery, the common
  duration of grid batteries used for arbitrage and peak shaving.
* ``s_rating_mva = 1.1 * power_max_mw``: inverters are commonly oversized ~10 % in MVA so that
  they keep reactive capability at full active power; 1.1 leaves
  ``sqrt(1.1^2 - 1) = 0.46`` p.u. of Q at rated P, comparable to the 44 % reactive capability
  that IEEE 1547-2018 asks of DERs across their active power range.
* ``charge_efficiency = discharge_efficiency = 0.95``: about 90 % round trip, the range of
  lithium-ion systems measured AC to AC (85-90 %).
* ``soc_min, soc_max = 0.1, 0.9``: the usual manufacturer window that limits cell ageing;
  ``soc_init = 0.5``.
* ``degradation_cost_per_mwh = 7.5`` $/MWh of grid-side throughput, the wear model of every
  battery (derived in :mod:`powerzoo.devices.battery`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from powerzoo.devices._per_unit import unit_arrays
from powerzoo.devices.battery import (
    WEAR_COST_PER_MWH,
    BatteryParams,
    battery_step,
    settlement_value,
)

__all__ = [
    "InverterBatteryParams",
    "InverterBatteryStep",
    "inverter_battery_reset",
    "inverter_battery_settlement",
    "inverter_battery_step",
]

S_RATING_FACTOR = (
    1.1  # default S rating as a multiple of the power rating (see the module docstring)
)

_FIELDS = (
    "energy_capacity_mwh",
    "power_max_mw",
    "s_rating_mva",
    "charge_efficiency",
    "discharge_efficiency",
    "soc_min",
    "soc_max",
    "soc_init",
    "degradation_cost_per_mwh",
)


@dataclasses.dataclass(frozen=True, eq=False)
class InverterBatteryParams:
    """Ratings of a fleet of ``n_units`` inverter batteries.

    Each field takes a scalar (the same for every unit) or one value per unit; after
    construction every field is a read-only float64 array ``[n_units]``. ``n_units`` is taken
    from the per-unit sequences when not given (1 when all fields are scalars).
    """

    energy_capacity_mwh: npt.ArrayLike = 2.0  # MWh
    power_max_mw: npt.ArrayLike = 1.0  # MW, charge and discharge
    s_rating_mva: npt.ArrayLike | None = None  # MVA; None: S_RATING_FACTOR * power_max_mw
    charge_efficiency: npt.ArrayLike = 0.95  # stored MWh per grid MWh charged
    discharge_efficiency: npt.ArrayLike = 0.95  # grid MWh delivered per stored MWh
    soc_min: npt.ArrayLike = 0.1  # fraction of energy capacity
    soc_max: npt.ArrayLike = 0.9
    soc_init: npt.ArrayLike = 0.5  # SOC at reset
    degradation_cost_per_mwh: npt.ArrayLike = WEAR_COST_PER_MWH  # $ per MWh of throughput
    n_units: int | None = None
    s_squared_mva2: np.ndarray = dataclasses.field(
        init=False, repr=False
    )  # s_rating_mva ** 2, derived

    def __post_init__(self) -> None:
        values = {name: getattr(self, name) for name in _FIELDS}
        if values["s_rating_mva"] is None:
            values["s_rating_mva"] = S_RATING_FACTOR * np.asarray(
                values["power_max_mw"], dtype=np.float64
            )
        arrays, n_units = unit_arrays("InverterBatteryParams", values, self.n_units)
        for name, array in arrays.items():
            object.__setattr__(self, name, array)
        object.__setattr__(self, "n_units", n_units)
        for i in range(n_units):
            try:  # the single-battery checks: SOC window, efficiencies, positive ratings
                BatteryParams(
                    **{
                        name: float(arrays[name][i])
                        for name in (
                            "energy_capacity_mwh",
                            "power_max_mw",
                            "charge_efficiency",
                            "discharge_efficiency",
                            "soc_min",
                            "soc_max",
                            "degradation_cost_per_mwh",
                        )
                    }
                )
            except ValueError as err:
                raise ValueError(f"InverterBatteryParams unit {i}: {err}") from None
            if arrays["s_rating_mva"][i] < arrays["power_max_mw"][i]:
                raise ValueError(
                    f"InverterBatteryParams unit {i}: s_rating_mva ({arrays['s_rating_mva'][i]}) "
                    "must be at least "
                    f"power_max_mw ({arrays['power_max_mw'][i]}); an inverter cannot deliver more "
                    "P than its S rating"
                )
            if not arrays["soc_min"][i] <= arrays["soc_init"][i] <= arrays["soc_max"][i]:
                raise ValueError(
                    f"InverterBatteryParams unit {i}: soc_init ({arrays['soc_init'][i]}) must lie "
                    "in "
                    f"[soc_min, soc_max] = [{arrays['soc_min'][i]}, {arrays['soc_max'][i]}]"
                )
        s_squared = arrays["s_rating_mva"] * arrays["s_rating_mva"]
        s_squared.setflags(write=False)
        object.__setattr__(self, "s_squared_mva2", s_squared)


@dataclasses.dataclass(frozen=True)
class InverterBatteryStep:
    """Result of one step; every field is an array ``[B, n_units]`` (float64)."""

    soc: np.ndarray  # SOC after the step (fraction of capacity)
    p_mw: np.ndarray  # active power delivered to the grid (+ discharge)
    q_mvar: np.ndarray  # reactive power delivered (+ injection), |q| <= q_limit_mvar
    charge_mwh: np.ndarray  # grid-side energy charged this step (>= 0)
    discharge_mwh: np.ndarray  # grid-side energy discharged this step (>= 0)
    soc_violation_mwh: np.ndarray  # storage-side energy requested beyond the SOC bounds (>= 0)
    p_rating_excess_mw: np.ndarray  # |P request| beyond power_max_mw (>= 0)
    q_limit_mvar: np.ndarray  # reactive capability left at the delivered P: sqrt(S^2 - p^2)
    q_cut_mvar: np.ndarray  # |Q request| beyond q_limit_mvar (>= 0)


def inverter_battery_reset(params: InverterBatteryParams, batch_size: int) -> np.ndarray:
    """SOC at reset, ``[batch_size, n_units]`` (a fresh writable array of ``soc_init``)."""
    return np.tile(params.soc_init, (batch_size, 1))


def inverter_battery_step(
    params: InverterBatteryParams,
    soc: np.ndarray,
    p_request_mw: npt.ArrayLike,
    q_request_mvar: npt.ArrayLike,
    dt_h: float,
) -> InverterBatteryStep:
    """Advance the fleet by one step of ``dt_h`` hours.

    ``soc``, ``p_request_mw`` (MW, + discharge) and ``q_request_mvar`` (Mvar, + injection) are
    ``[B, n_units]``. Requests must be finite (the env checks actions); out-of-range values are
    cut as the module docstring describes and the cuts are reported.

    Args:
        params: The fleet's ratings.
        soc: State of charge [B, n_units], fraction of capacity.
        p_request_mw: Requested active power [B, n_units], MW (+ discharge).
        q_request_mvar: Requested reactive power [B, n_units], Mvar (+ injection).
        dt_h: Step length, hours.

    Returns:
        New SOC, delivered P (MW) and Q (Mvar), energy charged and discharged (MWh), SOC
        violation (MWh) and the requests cut (MW, Mvar).
    """
    p_request_mw = np.asarray(p_request_mw, dtype=np.float64)
    q_request_mvar = np.asarray(q_request_mvar, dtype=np.float64)
    if p_request_mw.shape != soc.shape or q_request_mvar.shape != soc.shape:
        raise ValueError(
            f"inverter_battery_step: p_request_mw {p_request_mw.shape} and q_request_mvar "
            f"{q_request_mvar.shape} "
            f"must have the shape of soc {soc.shape} ([B, n_units])"
        )
    p_max = params.power_max_mw
    p_rated = p_request_mw.clip(-p_max, p_max)
    p_rating_excess_mw = np.abs(p_request_mw - p_rated)
    # battery_step reads the six rating attributes only; as [n_units] arrays they broadcast
    # against [B, n_units] exactly as scalars do against [B]
    result = battery_step(params, soc, p_rated, dt_h)  # type: ignore[arg-type]
    p_mw = result.p_mw
    q_limit_mvar = np.sqrt(np.maximum(params.s_squared_mva2 - p_mw * p_mw, 0.0))
    q_mvar = q_request_mvar.clip(-q_limit_mvar, q_limit_mvar)
    return InverterBatteryStep(
        soc=result.soc,
        p_mw=p_mw,
        q_mvar=q_mvar,
        charge_mwh=result.charge_mwh,
        discharge_mwh=result.discharge_mwh,
        soc_violation_mwh=result.soc_violation_mwh,
        p_rating_excess_mw=p_rating_excess_mw,
        q_limit_mvar=q_limit_mvar,
        q_cut_mvar=np.abs(q_request_mvar - q_mvar),
    )


def inverter_battery_settlement(
    params: InverterBatteryParams, soc_end: np.ndarray, price_per_mwh: np.ndarray
) -> np.ndarray:
    """End-of-episode settlement ($) ``[B, n_units]`` of each unit's stored energy against its
    ``soc_init``, at ``price_per_mwh`` [B] (:func:`powerzoo.devices.battery.settlement_value`:
    a surplus valued as sold through the battery, a deficit as bought back, wear included)."""
    return settlement_value(
        (soc_end - params.soc_init) * params.energy_capacity_mwh,
        np.asarray(price_per_mwh, dtype=np.float64)[:, None],
        params.charge_efficiency,
        params.discharge_efficiency,
        params.degradation_cost_per_mwh,
    )
