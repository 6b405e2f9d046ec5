"""Control areas of a transmission case: its dispatchable units cut into connected groups.

Most published cases carry no usable area data (the PEGASE and RTE cases put every bus in one
area, pandapower drops the field), so the areas here come from the network's topology alone,
deterministically:

1. Seeds: the first is the unit bus that comes first in the reverse Cuthill-McKee order of the
   in-service branch graph (:func:`scipy.sparse.csgraph.reverse_cuthill_mckee`, a peripheral
   bus); each next one is the unit bus farthest (in branches) from the seeds chosen so far.
2. Growth: the areas grow from their seeds one bus at a time, breadth first, the area with the
   fewest units so far taking the next bus (ties to the lower area, buses in ascending order).
   Every area is connected and the unit counts come out about equal.
3. Buses no seed can reach (another island) join area 0.

The areas are a control partition (who dispatches which units), not the case's administrative
areas.
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from powerzoo.physics.network import NetworkCase

__all__ = ["ControlAreas", "control_areas", "dispatchable_units"]


def dispatchable_units(case: NetworkCase) -> np.ndarray:
    """Positions of the in-service units with ``Pmax > Pmin`` (the others cannot be
    dispatched: they sit at ``Pmin``)."""
    return np.flatnonzero(case.gen_in_service & (case.gen_pmax_mw > case.gen_pmin_mw))


class ControlAreas:
    """Units and buses of each control area.

    Attributes:
        units: per area, the positions of its dispatchable units (ascending).
        bus_area: ``[n_bus]`` area of every bus.
    """

    def __init__(self, units: list[np.ndarray], bus_area: np.ndarray) -> None:
        self.units = [np.asarray(u, dtype=np.int64) for u in units]
        self.bus_area = np.asarray(bus_area, dtype=np.int64)

    @property
    def n_areas(self) -> int:
        """Number of areas."""
        return len(self.units)

    @property
    def max_units(self) -> int:
        """Units in the largest area."""
        return max(u.size for u in self.units)

    def __repr__(self) -> str:
        sizes = [int(u.size) for u in self.units]
        return f"ControlAreas(n_areas={self.n_areas}, units per area={sizes})"


def _bus_graph(case: NetworkCase) -> sp.csr_matrix:
    """Symmetric bus adjacency of the in-service branches (``[n_bus, n_bus]``)."""
    on = np.asarray(case.branch_in_service, dtype=bool)
    f, t = case.branch_from_bus[on], case.branch_to_bus[on]
    ones = np.ones(2 * f.size)
    graph = sp.coo_matrix(
        (ones, (np.concatenate([f, t]), np.concatenate([t, f]))), shape=(case.n_bus,) * 2
    ).tocsr()
    graph.data[:] = 1.0  # parallel branches count once
    return graph


def control_areas(case: NetworkCase, n_areas: int) -> ControlAreas:
    """Cut ``case``'s dispatchable units into ``n_areas`` connected control areas (see the
    module docstring); ``n_areas`` is capped at the number of buses hosting such units.

    Raises ``ValueError`` for ``n_areas < 1`` or a case without a dispatchable unit.

    Args:
        case: The transmission case.
        n_areas: Areas wanted.

    Returns:
        The areas' units and every bus's area.
    """
    if int(n_areas) < 1:
        raise ValueError(f"n_areas must be >= 1, got {n_areas!r}")
    units = dispatchable_units(case)
    if units.size == 0:
        raise ValueError(f"{case.name} has no dispatchable unit (in service, Pmax > Pmin)")
    graph = _bus_graph(case)
    unit_bus = case.gen_bus[units]
    units_at = np.bincount(unit_bus, minlength=case.n_bus)
    hosts = np.flatnonzero(units_at)
    n = min(int(n_areas), hosts.size)
    order = np.asarray(csgraph.reverse_cuthill_mckee(graph, symmetric_mode=True))
    rank = np.empty(case.n_bus, dtype=np.int64)
    rank[order] = np.arange(case.n_bus)
    seeds = [int(hosts[np.argmin(rank[hosts])])]
    far = csgraph.dijkstra(graph, indices=seeds[0], unweighted=True)
    for _ in range(n - 1):
        reach = np.where(np.isfinite(far[hosts]), far[hosts], -1.0)
        reach[np.isin(hosts, seeds)] = -1.0
        seeds.append(int(hosts[np.argmax(reach)]))
        far = np.minimum(far, csgraph.dijkstra(graph, indices=seeds[-1], unweighted=True))
    bus_area = np.full(case.n_bus, -1, dtype=np.int64)
    frontier: list[deque[int]] = []
    heap: list[tuple[int, int]] = []
    indptr, indices = graph.indptr, graph.indices
    for a, seed in enumerate(seeds):
        bus_area[seed] = a
        frontier.append(deque(sorted(indices[indptr[seed] : indptr[seed + 1]].tolist())))
        heapq.heappush(heap, (int(units_at[seed]), a))
    while heap:  # the area with the fewest units takes its next free neighbour
        count, a = heapq.heappop(heap)
        queue = frontier[a]
        while queue and bus_area[queue[0]] >= 0:
            queue.popleft()
        if not queue:
            continue  # area a has no free neighbour left
        bus = queue.popleft()
        bus_area[bus] = a
        queue.extend(b for b in sorted(indices[indptr[bus] : indptr[bus + 1]].tolist()))
        heapq.heappush(heap, (count + int(units_at[bus]), a))
    bus_area[bus_area < 0] = 0  # islands no seed reaches
    area_units = [units[bus_area[unit_bus] == a] for a in range(n)]
    return ControlAreas(area_units, bus_area)
