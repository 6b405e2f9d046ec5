"""Batched diesel generator with a minimum stable output, fuel cost and CO2 emissions.

* ``rated_mw = 2.5``: one 2.5 MW standby/prime genset, a common size for data-centre backup.
* ``min_stable_fraction = 0.3``: manufacturers advise against running below about 30 % load
  (wet stacking); a request below ``p_min`` gives the nearest feasible output, 0 or ``p_min``.
* ``fuel_cost_per_mwh = 300``: about 0.27 l of diesel per kWh near rated load (typical 2 MW
  genset data sheets) at about 1.1 $/l.
* ``co2_t_per_mwh = 0.75``: 2.68 kg CO2 per litre of diesel (US EPA, "Emission Factors for
  Greenhouse Gas Inventories": 10.21 kg CO2 per US gallon) x 0.27 l/kWh = 0.72-0.75 t/MWh.

Start-up costs, ramp limits and part-load efficiency losses are not modelled.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

__all__ = ["DieselGenerator", "DieselParams", "diesel_output_mw"]


@dataclasses.dataclass(frozen=True)
class DieselParams:
    """Diesel generator rating, fuel cost and emission factor (sources in the module docstring).

    ``rated_mw`` (MW), ``min_stable_fraction`` (of the rating), ``fuel_cost_per_mwh`` ($/MWh of
    output), ``co2_t_per_mwh`` (t CO2/MWh of output).
    """

    rated_mw: float = 2.5
    min_stable_fraction: float = 0.3
    fuel_cost_per_mwh: float = 300.0
    co2_t_per_mwh: float = 0.75

    def __post_init__(self) -> None:
        if self.rated_mw <= 0.0:
            raise ValueError(f"rated_mw must be positive, got {self.rated_mw}")
        if not 0.0 <= self.min_stable_fraction <= 1.0:
            raise ValueError(
                f"min_stable_fraction must be in [0, 1], got {self.min_stable_fraction}"
            )
        if self.fuel_cost_per_mwh < 0.0 or self.co2_t_per_mwh < 0.0:
            raise ValueError("fuel cost and CO2 factor must be non-negative")

    @property
    def p_min_mw(self) -> float:
        """Minimum stable output (MW)."""
        return self.rated_mw * self.min_stable_fraction


class DieselGenerator:
    """The generator's output rule: the one implementation behind :func:`diesel_output_mw`.

    Below half the minimum output the output is ``max(request, p_min) * False = +0.0``
    (``max(request, p_min) >= 0``), otherwise ``max(request, p_min)``: the nearest feasible
    output, without a ``where``. ``float64_constants=True`` (the default) makes the thresholds
    0-d float64 arrays (numpy converts a Python float operand on every call, which dominates on
    small batches): for float64 batches. ``False`` keeps them Python floats, so numpy's
    Python-scalar rules apply and a float32 batch stays float32: what :func:`diesel_output_mw`
    uses.
    """

    def __init__(self, params: DieselParams, *, float64_constants: bool = True) -> None:
        const = (lambda x: np.array(x, np.float64)) if float64_constants else (lambda x: x)
        p_min = params.p_min_mw
        self.p_min_mw, self.half_p_min_mw = const(p_min), const(0.5 * p_min)

    def output_mw(self, request_mw: np.ndarray) -> np.ndarray:
        """Output [B] (MW) for requests [B] in [0, rated]: below ``p_min`` the nearest of 0 and
        ``p_min``."""
        return np.maximum(request_mw, self.p_min_mw) * (request_mw >= self.half_p_min_mw)


@functools.lru_cache(maxsize=16, typed=True)
def _generator(params: DieselParams) -> DieselGenerator:
    """The function's :class:`DieselGenerator` (the parameters' own values as constants)."""
    return DieselGenerator(params, float64_constants=False)


def diesel_output_mw(params: DieselParams, request_mw: np.ndarray) -> np.ndarray:
    """Output [B] (MW) for requests [B] in [0, rated]: below ``p_min`` the nearest of 0 and
    ``p_min``."""
    return np.asarray(_generator(params).output_mw(request_mw))  # an array for a scalar request too
