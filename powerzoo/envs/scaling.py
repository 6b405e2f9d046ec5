"""Affine maps between physical units and the normalised [-1, 1] range (``normalize=True``).

Observations: ``obs_norm = (obs - mid) / half`` with ``mid``/``half`` from the task's nominal
range, so values inside the nominal range land in [-1, 1] (unbounded quantities such as prices
may exceed it on extreme days). Actions: ``a_phys = mid + half * a_norm`` from the action
bounds, applied once, before the runner clips to the physical bounds; ``info["action_applied"]``
always reports physical units.
"""

from __future__ import annotations

import numpy as np

__all__ = ["AffineScaler"]


class AffineScaler:
    """``x_norm = (x - mid) / half`` for a finite range [low, high] per component."""

    def __init__(self, low: np.ndarray, high: np.ndarray) -> None:
        low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
            raise ValueError("AffineScaler needs finite ranges with high > low")
        self.mid = (high + low) / 2.0
        self.half = (high - low) / 2.0

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        """Physical -> normalised (float32)."""
        return ((x - self.mid) / self.half).astype(np.float32)

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        """Normalised -> physical (float64)."""
        return self.mid + self.half * np.asarray(u, dtype=np.float64)

    def unit_bounds(self, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised image of space bounds (infinite bounds stay infinite)."""
        with np.errstate(invalid="ignore"):
            return self.to_unit(np.asarray(low, np.float64)), self.to_unit(
                np.asarray(high, np.float64)
            )
