"""Batched fleet of PV inverters: curtailable active power and reactive power within an S rating.

Every array is ``[B, n_units]``. Sign conventions: ``p_mw >= 0`` is generation delivered to
the grid, ``q_mvar > 0`` injects reactive power.

* Available power: ``available_mw = capacity_mw * capacity_factor``
  (:func:`powerzoo.devices.pv.pv_power_mw`). The capacity factor is an input, so the device
  stays data-free: tasks pass the data layer's irradiance-based series ``"pv_cf"`` of
  :mod:`powerzoo.data.profiles` (TMY3 GHI and temperature through a PVWatts-style model,
  annual mean about 0.17), ``[B, n_units]``, or ``[B, 1]`` when every unit sees the same sky.
* Curtailment: the action's fraction ``c`` is cut to ``[0, 1]``; delivered
  ``p_mw = available_mw * (1 - c)``; the energy given up, ``curtailed_mwh =
  (available_mw - p_mw) * dt_h``, is reported so a task can price it.
* Reactive power: ``|q| <= sqrt(S^2 - p^2)`` at the delivered ``p``. **Active power has
  priority** (a Q request never curtails P; the task's curtailment action is the only thing
  that does); the reactive power cut off is reported as ``q_cut_mvar``.
* Reactive power without sun (**"Q at night"**, ``q_at_night``, off by default): IEEE
  1547-2018 (clause 5.2) requires a DER's reactive capability only while it produces active
  power (at or above the lesser of its minimum steady-state output and 5 % of its rating) and
  leaves reactive support at zero active power optional: many PV inverters disconnect from the
  grid when there is no sun. So by default a unit whose *available* power is zero (night, or no
  irradiance) gives ``q = 0`` whatever it is asked (``q_limit_mvar = 0``, the request reported
  as ``q_cut_mvar``). With ``q_at_night=True`` the inverter stays connected and offers its
  whole S rating as reactive power then. A unit that has sun but curtails all of it keeps its
  reactive capability either way (the inverter is on).

Default ratings: ``capacity_mw = 1.0`` (a ground-mounted plant of about 2 ha on an MV feeder of
a few MW of load); ``s_rating_mva = 1.1 * capacity_mw``: the usual ~10 % inverter oversizing
that leaves ``sqrt(1.1^2 - 1) = 0.46`` p.u. of reactive power at full output, comparable to
the 44 % reactive capability IEEE 1547-2018 asks of DERs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from powerzoo.devices._per_unit import unit_arrays
from powerzoo.devices.pv import pv_power_mw

__all__ = ["PVInverterParams", "PVInverterStep", "pv_inverter_step"]

S_RATING_FACTOR = (
    1.1  # default S rating as a multiple of the DC/AC capacity (see the module docstring)
)


@dataclasses.dataclass(frozen=True, eq=False)
class PVInverterParams:
    """Ratings of a fleet of ``n_units`` PV plants with their inverters.

    Each field takes a scalar (the same for every unit) or one value per unit; after
    construction both are read-only float64 arrays ``[n_units]``. ``n_units`` is taken from the
    per-unit sequences when not given (1 when both are scalars).
    """

    capacity_mw: npt.ArrayLike = 1.0  # MW of active power at capacity factor 1
    s_rating_mva: npt.ArrayLike | None = None  # MVA; None: S_RATING_FACTOR * capacity_mw
    n_units: int | None = None
    # reactive power at zero available PV power (night): an optional capability in IEEE
    # 1547-2018, off by default (module docstring)
    q_at_night: bool = False
    s_squared_mva2: np.ndarray = dataclasses.field(
        init=False, repr=False
    )  # s_rating_mva ** 2, derived

    def __post_init__(self) -> None:
        values = {"capacity_mw": self.capacity_mw, "s_rating_mva": self.s_rating_mva}
        if values["s_rating_mva"] is None:
            values["s_rating_mva"] = S_RATING_FACTOR * np.asarray(
                self.capacity_mw, dtype=np.float64
            )
        arrays, n_units = unit_arrays("PVInverterParams", values, self.n_units)
        capacity, s_rating = arrays["capacity_mw"], arrays["s_rating_mva"]
        bad = np.flatnonzero(capacity < 0.0)
        if bad.size:
            raise ValueError(
                f"PVInverterParams unit {bad[0]}: capacity_mw must be non-negative, got "
                f"{capacity[bad[0]]}"
            )
        bad = np.flatnonzero(s_rating < capacity)
        if bad.size:
            i = bad[0]
            raise ValueError(
                f"PVInverterParams unit {i}: s_rating_mva ({s_rating[i]}) must be at least "
                "capacity_mw "
                f"({capacity[i]}); an inverter cannot deliver more P than its S rating"
            )
        s_squared = s_rating * s_rating
        s_squared.setflags(write=False)
        for name, value in (
            ("capacity_mw", capacity),
            ("s_rating_mva", s_rating),
            ("s_squared_mva2", s_squared),
        ):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "n_units", n_units)


@dataclasses.dataclass(frozen=True)
class PVInverterStep:
    """Result of one step; every field is an array ``[B, n_units]`` (float64)."""

    available_mw: np.ndarray  # capacity_mw * capacity_factor
    p_mw: np.ndarray  # active power delivered: available_mw * (1 - curtail_fraction)
    q_mvar: np.ndarray  # reactive power delivered (+ injection), |q| <= q_limit_mvar
    curtail_fraction: np.ndarray  # curtailment applied, in [0, 1]
    curtailed_mwh: np.ndarray  # available energy not delivered this step (>= 0)
    # reactive capability left at the delivered P: sqrt(S^2 - p^2) (0 at zero available power
    # unless q_at_night)
    q_limit_mvar: np.ndarray
    q_cut_mvar: np.ndarray  # |Q request| beyond q_limit_mvar (>= 0)


def pv_inverter_step(
    params: PVInverterParams,
    capacity_factor: npt.ArrayLike,
    curtail_fraction: npt.ArrayLike,
    q_request_mvar: npt.ArrayLike,
    dt_h: float,
) -> PVInverterStep:
    """Delivered P and Q of the fleet over one step of ``dt_h`` hours.

    ``capacity_factor`` in [0, 1] is ``[B, n_units]`` or ``[B, 1]``; ``curtail_fraction``
    (cut to [0, 1]) and ``q_request_mvar`` (Mvar, + injection) are ``[B, n_units]``. Inputs
    must be finite (the env checks actions). A unit with no available power gives no reactive
    power unless ``params.q_at_night`` (module docstring).

    Args:
        params: The fleet's ratings.
        capacity_factor: Capacity factor [B, n_units] or [B, 1], in [0, 1].
        curtail_fraction: Share of the available power curtailed [B, n_units].
        q_request_mvar: Requested reactive power [B, n_units], Mvar (+ injection).
        dt_h: Step length, hours.

    Returns:
        Available and delivered P (MW), Q (Mvar), curtailed energy (MWh), reactive cut (Mvar).
    """
    curtail = np.asarray(curtail_fraction, dtype=np.float64)
    q_request_mvar = np.asarray(q_request_mvar, dtype=np.float64)
    capacity_factor = np.asarray(capacity_factor, dtype=np.float64)
    if (
        curtail.ndim != 2
        or curtail.shape[1] != params.n_units
        or q_request_mvar.shape != curtail.shape
    ):
        raise ValueError(
            f"pv_inverter_step: curtail_fraction {curtail.shape} and q_request_mvar "
            f"{q_request_mvar.shape} "
            f"must both be [B, n_units] with n_units={params.n_units}"
        )
    if (
        capacity_factor.ndim != 2
        or capacity_factor.shape[0] != curtail.shape[0]
        or capacity_factor.shape[1] not in (1, params.n_units)
    ):
        raise ValueError(
            f"pv_inverter_step: capacity_factor {capacity_factor.shape} must be [B, n_units] or "
            "[B, 1] "
            f"with B={curtail.shape[0]}, n_units={params.n_units}"
        )
    # pv_power_mw reads capacity_mw only; as an [n_units] array it broadcasts against [B, n_units]
    available_mw = pv_power_mw(params, capacity_factor)  # type: ignore[arg-type]
    curtail = curtail.clip(0.0, 1.0)
    p_mw = available_mw * (1.0 - curtail)
    q_limit_mvar = np.sqrt(np.maximum(params.s_squared_mva2 - p_mw * p_mw, 0.0))
    if not params.q_at_night:  # no sun, inverter off: no reactive power (module docstring)
        q_limit_mvar = np.where(available_mw > 0.0, q_limit_mvar, 0.0)
    q_mvar = q_request_mvar.clip(-q_limit_mvar, q_limit_mvar)
    return PVInverterStep(
        available_mw=available_mw,
        p_mw=p_mw,
        q_mvar=q_mvar,
        curtail_fraction=curtail,
        curtailed_mwh=(available_mw - p_mw) * dt_h,
        q_limit_mvar=q_limit_mvar,
        q_cut_mvar=np.abs(q_request_mvar - q_mvar),
    )
