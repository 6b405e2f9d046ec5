"""The balancing settlement of the transmission dispatch tasks (``marl_opf``, ``opf_118``,
``opf_118_7d``, ``opf``, the ``joint_trans_dist`` tasks, ``marl_uc``).

The agents set every unit's output; the slack bus takes the mismatch ``generation - load`` in the
power flow. A real system does not ask a dispatch to be exact: small deviations are absorbed by
regulation reserve under automatic generation control, procured at about 1 % of the load (ERCOT
procures regulation of this order; PJM's requirement is smaller), and only a mismatch beyond the
regulation capability is a balance violation. The settlement follows that:

* the regulation band ``R`` (MW) is ``regulation_share`` (default :data:`REGULATION_SHARE`,
  0.01) x the peak system load of the data year the task's split reads (the case's load after
  ``load_scale``; the feeders' head power included where the task has feeders), fixed per task
  instance;
* the part of ``|mismatch|`` within ``R`` is regulation energy, settled at
  ``regulation_price_per_mwh``; the part beyond ``R`` is the ``power_imbalance`` cost (MWh, the
  CMDP cost) and is settled at ``imbalance_price_per_mwh`` (1,000 $/MWh);
* the default regulation price is :func:`default_regulation_price`: 2 x the highest marginal
  cost of the case's units (at mid output, the merit-order cost the agents observe). Because
  ``2 (c1 + c2 (Pmin + Pmax)) >= c1 + 2 c2 Pmax`` for non-negative costs, that is at least any
  unit's marginal cost at full output, so lowering any unit's output inside the band never saves
  more than the regulation it costs: deliberate under-generation never pays. It is capped at the
  imbalance price (energy inside the band never costs more than energy beyond it).
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = [
    "REGULATION_SHARE",
    "BalanceSettlement",
    "RegulationBand",
    "check_regulation_keywords",
    "default_regulation_price",
    "regulation_price",
    "settle_imbalance",
]

# regulation reserve as a share of the peak system load (about 1 %, ERCOT-like)
REGULATION_SHARE = 0.01


@dataclasses.dataclass(frozen=True)
class BalanceSettlement:
    """One step's settlement of the mismatch; every field ``[B]``."""

    regulation_mwh: np.ndarray  # energy within the band (MWh)
    imbalance_mwh: np.ndarray  # energy beyond the band: the power_imbalance cost (MWh)
    regulation_cost: np.ndarray  # regulation_mwh x the regulation price ($)
    imbalance_cost: np.ndarray  # imbalance_mwh x the imbalance price ($)

    @property
    def cost(self) -> np.ndarray:
        """The reward's whole balancing cost [B] ($): regulation + imbalance."""
        return self.regulation_cost + self.imbalance_cost


def settle_imbalance(
    mismatch_mw: np.ndarray,
    band_mw: float,
    dt_h: float,
    regulation_price_per_mwh: float,
    imbalance_price_per_mwh: float,
) -> BalanceSettlement:
    """Settle the mismatch ``mismatch_mw`` [B] (MW, generation - load) of one step of ``dt_h``
    hours: ``min(|m|, band_mw) x dt`` MWh at ``regulation_price_per_mwh`` ($/MWh) and
    ``max(|m| - band_mw, 0) x dt`` MWh (the ``power_imbalance`` cost) at
    ``imbalance_price_per_mwh`` ($/MWh), either sign."""
    size = np.abs(mismatch_mw)
    within = np.minimum(size, band_mw)
    regulation_mwh = within * dt_h
    imbalance_mwh = (size - within) * dt_h
    return BalanceSettlement(
        regulation_mwh=regulation_mwh,
        imbalance_mwh=imbalance_mwh,
        regulation_cost=regulation_mwh * regulation_price_per_mwh,
        imbalance_cost=imbalance_mwh * imbalance_price_per_mwh,
    )


def default_regulation_price(
    marginal_cost_per_mwh: np.ndarray, imbalance_price_per_mwh: float
) -> float:
    """Regulation price ($/MWh): 2 x the highest of the units' marginal costs
    ``marginal_cost_per_mwh`` [n] ($/MWh, at mid output), capped at ``imbalance_price_per_mwh``
    (module docstring)."""
    highest = float(np.max(marginal_cost_per_mwh)) if np.size(marginal_cost_per_mwh) else 0.0
    return min(2.0 * highest, float(imbalance_price_per_mwh))


def regulation_price(
    marginal_cost_per_mwh: np.ndarray,
    imbalance_price_per_mwh: float,
    regulation_price_per_mwh: float | None = None,
) -> float:
    """The regulation price ($/MWh): ``regulation_price_per_mwh`` when given, else
    :func:`default_regulation_price` of the units' ``marginal_cost_per_mwh`` [n] ($/MWh)."""
    if regulation_price_per_mwh is not None:
        return float(regulation_price_per_mwh)
    return default_regulation_price(marginal_cost_per_mwh, imbalance_price_per_mwh)


def check_regulation_keywords(share: float, price: float | None) -> None:
    """Raise ``ValueError`` unless ``share`` is in [0, 1] and ``price`` is ``None`` or >= 0."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"regulation_share must be in [0, 1] (0.01 = 1 % of peak), got {share!r}")
    if price is not None and not price >= 0.0:
        raise ValueError(f"regulation_price_per_mwh must be >= 0 or None, got {price!r}")


@dataclasses.dataclass(frozen=True)
class RegulationBand:
    """The settlement numbers of one task instance: band (MW) and prices ($/MWh)."""

    band_mw: float
    regulation_price_per_mwh: float
    imbalance_price_per_mwh: float

    @classmethod
    def for_system(
        cls,
        peak_load_mw: float,
        marginal_cost_per_mwh: np.ndarray,
        imbalance_price_per_mwh: float,
        share: float = REGULATION_SHARE,
        regulation_price_per_mwh: float | None = None,
    ) -> RegulationBand:
        """The band ``share x peak_load_mw`` (MW) and the regulation price: the given one, else
        :func:`default_regulation_price` of the units' ``marginal_cost_per_mwh`` ($/MWh)."""
        check_regulation_keywords(share, regulation_price_per_mwh)
        price = regulation_price(
            marginal_cost_per_mwh, imbalance_price_per_mwh, regulation_price_per_mwh
        )
        return cls(share * float(peak_load_mw), price, float(imbalance_price_per_mwh))

    def settle(self, mismatch_mw: np.ndarray, dt_h: float) -> BalanceSettlement:
        """:func:`settle_imbalance` of ``mismatch_mw`` [B] (MW) over ``dt_h`` hours."""
        return settle_imbalance(
            mismatch_mw,
            self.band_mw,
            dt_h,
            self.regulation_price_per_mwh,
            self.imbalance_price_per_mwh,
        )
