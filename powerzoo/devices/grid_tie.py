"""Optional grid tie of a microgrid: capped import at the market price, grid carbon intensity.

* ``import_max_mw = 1.5``: a capacity-constrained interconnection (new large loads often wait
  years for full grid capacity, so sites run with partial import and on-site generation);
  ``0`` makes the microgrid islanded. No export: surplus is curtailed.
* Carbon intensity of grid imports: the fossil share of the system times a fossil emission
  factor, ``co2 = fossil_co2_t_per_mwh * (1 - re_share)`` with
  ``re_share = clip((0.25 pv_cf + 0.20 wind_cf) / demand_pu, 0, 1)``: the same renewable fleet
  (25 % PV and 20 % wind capacity per unit of peak demand) as the price model of
  :mod:`powerzoo.data.profiles`. ``fossil_co2_t_per_mwh = 0.45`` (a gas-coal mix) gives an annual
  mean of 0.375 t/MWh (hourly mean of the base scenario; 0.375 weighted by demand), close to the
  US average of 0.39 t/MWh in 2022 (US EIA, "How much carbon dioxide is produced per
  kilowatthour of U.S. electricity generation?").

:func:`settle` closes the power balance of a step: the residual load is imported up to the cap,
the rest is unserved (``deficit``); a negative residual is spilled (curtailed).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

__all__ = ["GridTie", "GridTieParams", "grid_carbon_intensity", "settle"]


@dataclasses.dataclass(frozen=True)
class GridTieParams:
    """Interconnection limit and the fossil emission factor of the grid."""

    import_max_mw: float = 1.5
    fossil_co2_t_per_mwh: float = 0.45
    pv_share: float = 0.25  # renewable fleet per unit of peak system demand (see profiles)
    wind_share: float = 0.20

    def __post_init__(self) -> None:
        if self.import_max_mw < 0.0 or self.fossil_co2_t_per_mwh < 0.0:
            raise ValueError("import_max_mw and fossil_co2_t_per_mwh must be non-negative")


def grid_carbon_intensity(
    params: GridTieParams, demand_pu: np.ndarray, pv_cf: np.ndarray, wind_cf: np.ndarray
) -> np.ndarray:
    """Carbon intensity of grid energy (tCO2/MWh) from the system's demand and renewable output."""
    re_share = np.clip(
        (params.pv_share * pv_cf + params.wind_share * wind_cf) / demand_pu, 0.0, 1.0
    )
    return params.fossil_co2_t_per_mwh * (1.0 - re_share)


class GridTie:
    """The tie's power balance: the one implementation behind :func:`settle`.

    ``float64_constants=True`` (the default) makes the import cap a 0-d float64 array (numpy
    converts a Python float operand on every call, which dominates on small batches): for
    float64 batches. ``False`` keeps it a Python float, so numpy's Python-scalar rules apply
    and a float32 batch stays float32: what :func:`settle` uses.

    Args:
        params: The tie's ratings.
        float64_constants: Hold the import cap as a float64 array (for float64 batches).
    """

    def __init__(self, params: GridTieParams, *, float64_constants: bool = True) -> None:
        const = (lambda x: np.array(x, np.float64)) if float64_constants else (lambda x: x)
        self.import_max_mw, self.zero = const(params.import_max_mw), const(0.0)

    def settle(self, residual_mw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Split the residual load [B] (MW, load minus on-site supply) into (import, deficit, spill)
        >= 0.

        ``import - spill + deficit == residual`` (up to round-off).

        Args:
            residual_mw: Load minus on-site supply [B], MW.

        Returns:
            Import, deficit and spill [B], MW, each >= 0.
        """
        zero = self.zero
        grid_mw = np.minimum(np.maximum(residual_mw, zero), self.import_max_mw)
        return grid_mw, np.maximum(residual_mw - grid_mw, zero), np.maximum(-residual_mw, zero)


@functools.lru_cache(maxsize=16, typed=True)
def _tie(params: GridTieParams) -> GridTie:
    """The function's :class:`GridTie` (the parameters' own values as constants)."""
    return GridTie(params, float64_constants=False)


def settle(
    params: GridTieParams, residual_mw: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split the residual load [B] (MW, load minus on-site supply) into (import, deficit, spill) >=
    0.

    ``import - spill + deficit == residual`` (up to round-off).
    """
    return _tie(params).settle(residual_mw)
