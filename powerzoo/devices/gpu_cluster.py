"""Batched IT load of a GPU cluster: GPUs allocated to job classes, busy, idle or parked.

Power per GPU includes its share of the host server (CPUs, memory, fans, network):

* ``p_active_kw = 1.275``: an 8-GPU NVIDIA DGX H100 server is rated 10.2 kW maximum (NVIDIA DGX
  H100 datasheet), i.e. 1.275 kW per GPU at full load.
* ``p_idle_kw = 0.40``: an allocated GPU with no work; idle servers draw roughly 30 % of peak
  (Barroso, Hoelzle & Ranganathan, "The Datacenter as a Computer", 3rd ed., 2018, on energy
  proportionality).
* ``p_parked_kw = 0.05``: an unallocated GPU whose node is parked in a low-power standby state
  (about 4 % of peak: BMC, power-supply and network standby losses).

A step's IT power is ``busy * p_active + (allocated - busy) * p_idle + (n_gpus - allocated) *
p_parked`` where ``busy`` is the average number of GPUs that had work during the step.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["GpuCluster", "GpuClusterParams", "allocate_gpus", "it_power_mw"]


@dataclasses.dataclass(frozen=True)
class GpuClusterParams:
    """Size and per-GPU power of the cluster."""

    n_gpus: int = 2048  # 256 eight-GPU servers
    p_active_kw: float = 1.275
    p_idle_kw: float = 0.40
    p_parked_kw: float = 0.05

    def __post_init__(self) -> None:
        if int(self.n_gpus) < 1:
            raise ValueError(f"n_gpus must be >= 1, got {self.n_gpus}")
        if not 0.0 <= self.p_parked_kw <= self.p_idle_kw <= self.p_active_kw:
            raise ValueError("need 0 <= p_parked_kw <= p_idle_kw <= p_active_kw")

    @property
    def p_max_mw(self) -> float:
        """IT power with every GPU busy (MW)."""
        return self.n_gpus * self.p_active_kw / 1000.0


def allocate_gpus(params: GpuClusterParams, shares: np.ndarray) -> np.ndarray:
    """GPUs given to each class [B, C] from requested fractions ``shares`` [B, C] in [0, 1].

    When the shares sum to more than 1 they are scaled down proportionally to sum to 1.
    """
    total = shares @ np.ones(shares.shape[1])  # faster than sum(axis=1) for a few classes
    return shares * (params.n_gpus / np.maximum(total, 1.0))[:, None]


def it_power_mw(params: GpuClusterParams, allocated: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """IT power [B] (MW) from allocated and busy GPUs, both summed over classes [B]."""
    idle = allocated - busy
    parked = params.n_gpus - allocated
    return (busy * params.p_active_kw + idle * params.p_idle_kw + parked * params.p_parked_kw) * 1e-3


class GpuCluster:
    """:func:`allocate_gpus` and :func:`it_power_mw` for float64 batches, constants converted once.

    numpy converts a Python scalar operand on every call and a broadcast costs about three
    plain calls on small batches, so the constants are 0-d arrays and, for two classes, each
    row's share total comes out repeated per class from one matrix product (``x0 + x1`` in
    every column: the same sum as ``allocate_gpus``'s, the sign of a zero aside, which the
    ``max(total, 1)`` drops). The values equal the functions' bit for bit (tested).
    """

    def __init__(self, params: GpuClusterParams, n_classes: int) -> None:
        def f64(x: float) -> np.ndarray:
            return np.array(x, np.float64)

        self.n_gpus, self.one = f64(params.n_gpus), f64(1.0)
        self.p_active_kw, self.p_idle_kw, self.p_parked_kw = f64(params.p_active_kw), f64(params.p_idle_kw), f64(params.p_parked_kw)
        self.kw_to_mw = f64(1e-3)
        self.params = params
        self._row_sum_per_class = np.ones((n_classes, n_classes)) if n_classes == 2 else None

    def allocate(self, shares: np.ndarray) -> np.ndarray:
        """GPUs per class [B, C] from requested fractions [B, C], as :func:`allocate_gpus`."""
        if self._row_sum_per_class is None:
            return allocate_gpus(self.params, shares)
        return shares * (self.n_gpus / np.maximum(shares @ self._row_sum_per_class, self.one))

    def it_power_mw(self, allocated: np.ndarray, busy: np.ndarray) -> np.ndarray:
        """IT power [B] (MW) from allocated and busy GPUs summed over classes, as :func:`it_power_mw`."""
        idle = allocated - busy
        parked = self.n_gpus - allocated
        return (busy * self.p_active_kw + idle * self.p_idle_kw + parked * self.p_parked_kw) * self.kw_to_mw
