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
import functools

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


class GpuCluster:
    """GPU allocation and IT power for ``n_classes`` job classes: the one implementation behind
    :func:`allocate_gpus` and :func:`it_power_mw`.

    A broadcast costs about three plain numpy calls on small batches, so for two classes each
    row's share total comes out repeated per class from one matrix product (``x0 + x1`` in
    every column: the same sum as a matrix-vector product's, the sign of a zero aside, which
    the ``max(total, 1)`` drops). ``float64_constants=True`` (the default) makes the constants
    0-d float64 arrays (numpy converts a Python scalar operand on every call, which dominates
    on small batches): for float64 batches. ``False`` keeps the parameters' own values, so
    numpy's Python-scalar rules apply and a float32 batch stays float32: what the module
    functions use.

    Args:
        params: The cluster's parameters.
        n_classes: Number of job classes (C).
        float64_constants: Hold the constants as float64 arrays (for float64 batches).
    """

    def __init__(
        self, params: GpuClusterParams, n_classes: int, *, float64_constants: bool = True
    ) -> None:
        const = (lambda x: np.array(x, np.float64)) if float64_constants else (lambda x: x)
        self.n_gpus, self.one = const(params.n_gpus), const(1.0)
        self.p_active_kw, self.p_idle_kw, self.p_parked_kw = (
            const(params.p_active_kw),
            const(params.p_idle_kw),
            const(params.p_parked_kw),
        )
        self.kw_to_mw = const(1e-3)
        # share totals: [B, 2] (each row's total in both columns) for two classes, else [B]
        self._totals_per_class = n_classes == 2
        self._row_sum = np.ones((2, 2)) if self._totals_per_class else np.ones(n_classes)

    def allocate(self, shares: np.ndarray) -> np.ndarray:
        """GPUs given to each class [B, C] from requested fractions ``shares`` [B, C] in [0, 1].

        When the shares sum to more than 1 they are scaled down proportionally to sum to 1.

        Args:
            shares: Requested fractions of the GPUs [B, C], in [0, 1].

        Returns:
            GPUs per class [B, C].
        """
        gpus_per_share = self.n_gpus / np.maximum(
            shares @ self._row_sum, self.one
        )  # faster than sum(axis=1)
        return shares * (gpus_per_share if self._totals_per_class else gpus_per_share[:, None])

    def it_power_mw(self, allocated: np.ndarray, busy: np.ndarray) -> np.ndarray:
        """IT power [B] (MW) from allocated and busy GPUs, both summed over classes [B].

        Args:
            allocated: GPUs allocated [B], summed over classes.
            busy: GPUs busy with jobs [B], summed over classes.

        Returns:
            IT power [B], MW.
        """
        idle = allocated - busy
        parked = self.n_gpus - allocated
        return (
            busy * self.p_active_kw + idle * self.p_idle_kw + parked * self.p_parked_kw
        ) * self.kw_to_mw


@functools.lru_cache(maxsize=16, typed=True)
def _cluster(params: GpuClusterParams, n_classes: int) -> GpuCluster:
    """The functions' :class:`GpuCluster` (the parameters' own values as constants)."""
    return GpuCluster(params, n_classes, float64_constants=False)


def allocate_gpus(params: GpuClusterParams, shares: np.ndarray) -> np.ndarray:
    """GPUs given to each class [B, C] from requested fractions ``shares`` [B, C] in [0, 1].

    When the shares sum to more than 1 they are scaled down proportionally to sum to 1.
    """
    return _cluster(params, shares.shape[1]).allocate(shares)


def it_power_mw(params: GpuClusterParams, allocated: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """IT power [B] (MW) from allocated and busy GPUs, both summed over classes [B]."""
    return _cluster(params, 1).it_power_mw(allocated, busy)
