"""The radial distribution feeder type: :class:`RadialFeeder`, and the rule that rates its lines.

A feeder is a tree of buses fed from one slack bus (the feeder head, the substation's MV
busbar). Every branch is a series impedance ``r + jx`` (no shunt charging, no transformer: both
published feeders are like that), oriented away from the head: ``branch_from_bus`` is the
upstream (sending) end, ``branch_to_bus`` the downstream end (a branch between buses of
different base voltage is a transformer at nominal ratio: in per unit, a series impedance),
and each non-slack bus has exactly one parent branch
(:attr:`RadialFeeder.bus_parent_branch`). Indices are 0-based positions in the
case file's order; units are in the field names (``_pu`` on ``base_mva`` and the bus base
voltage ``bus_base_kv``). Where the data come from is :mod:`powerzoo.physics.feeder_cases`; the
power flow is :mod:`powerzoo.physics.radial_pf`.

Line ratings
------------
Neither published feeder (Baran & Wu's 33-bus case33bw, Khodr's 141-bus case141) carries line
ratings, so they are derived by one documented rule, :func:`conductor_ratings_ka`:

1. run the exact power flow at the case's published base load and take each branch's current
   magnitude ``I_base`` [A];
2. require ``RATING_MARGIN * I_base`` (``RATING_MARGIN = 1.25``: a planner loads a conductor to at
   most 80 % of its ampacity in the design case);
3. give the branch the smallest ampacity of :data:`AMPACITY_LADDER_A` that covers it (a ladder of
   round values spanning overhead/underground MV conductor ampacities, 50 A to 1200 A; above
   the ladder, the next multiple of 200 A). Lightly loaded laterals get the 50 A floor.

The rating in MVA is ``sqrt(3) * V_base * I_rated`` at the sending bus's base voltage; loading is
measured on current (``RadialPFResult.branch_loading``, like pandapower's ``loading_percent``).
Because the ladder rounds up by different amounts, a branch's base-case loading is at most 0.8
(``1 / RATING_MARGIN``) and lower by a branch-dependent amount (far lower on the 50 A laterals),
so limits bind at different stress levels: with every load
scaled uniformly the first branches overload from 1.23x (case33bw) / 1.24x (case141) of the base
load, 3 of 32 / 14 of 140 branches at 1.3x and 11 / 47 at 1.5x; 1.5 MW of DER export at the end
of the longest lateral loads that lateral to 1.27 / 1.32 of its rating
(``tests/physics/test_radial_pf.py`` checks these properties).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "AMPACITY_LADDER_A",
    "RATING_MARGIN",
    "RadialFeeder",
    "conductor_ratings_ka",
    "orient_branches",
]

RATING_MARGIN = 1.25  # ampacity per ampere of base-case current
AMPACITY_LADDER_A: tuple[float, ...] = (
    50.0,
    75.0,
    100.0,
    150.0,
    200.0,
    250.0,
    300.0,
    400.0,
    500.0,
    600.0,
    800.0,
    1000.0,
    1200.0,
)
_LADDER_STEP_ABOVE_A = 200.0  # beyond the ladder: next multiple of this


def conductor_ratings_ka(base_current_ka: np.ndarray) -> np.ndarray:
    """Branch ampacities [kA] from base-case branch currents ``base_current_ka`` [kA]
    (module docstring: ``RATING_MARGIN`` then the next rung of :data:`AMPACITY_LADDER_A`)."""
    need_a = RATING_MARGIN * np.abs(np.asarray(base_current_ka, dtype=np.float64)) * 1e3
    ladder = np.asarray(AMPACITY_LADDER_A)
    pos = np.searchsorted(ladder, need_a, side="left")
    above = np.ceil(need_a / _LADDER_STEP_ABOVE_A) * _LADDER_STEP_ABOVE_A
    rated_a = np.where(pos < ladder.size, ladder[np.minimum(pos, ladder.size - 1)], above)
    return rated_a * 1e-3


def orient_branches(
    n_bus: int, slack_bus: int, from_bus: np.ndarray, to_bus: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(from_bus, to_bus)`` with every branch turned to point away from ``slack_bus``.

    Raises ``ValueError`` unless the branches form a spanning tree of ``n_bus`` buses (radial,
    connected, ``n_bus - 1`` branches).
    """
    f = np.asarray(from_bus, dtype=np.int64).copy()
    t = np.asarray(to_bus, dtype=np.int64).copy()
    parent_branch = _tree_parent_branch(n_bus, slack_bus, f, t)
    for bus in range(n_bus):
        k = parent_branch[bus]
        if k >= 0 and t[k] != bus:  # branch k reaches ``bus`` from its to-end: swap the ends
            f[k], t[k] = t[k], f[k]
    return f, t


def _tree_parent_branch(n_bus: int, slack: int, f: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Branch [n_bus] through which a breadth-first search from ``slack`` reaches each bus
    (-1 at the slack); raises ``ValueError`` if the branches are not a spanning tree."""
    if f.shape != t.shape or f.ndim != 1:
        raise ValueError(f"branch end arrays have shapes {f.shape} and {t.shape}")
    if f.size != n_bus - 1:
        raise ValueError(
            f"a radial feeder of {n_bus} buses has {n_bus - 1} branches, got {f.size} "
            "(open the tie lines / normally-open switches first)"
        )
    if f.size and (min(f.min(), t.min()) < 0 or max(f.max(), t.max()) >= n_bus):
        raise ValueError(f"branch ends must be bus positions 0..{n_bus - 1}")
    adjacency: list[list[tuple[int, int]]] = [[] for _ in range(n_bus)]
    for k, (a, b) in enumerate(zip(f.tolist(), t.tolist(), strict=True)):
        adjacency[a].append((b, k))
        adjacency[b].append((a, k))
    parent_branch = np.full(n_bus, -2, dtype=np.int64)
    parent_branch[slack] = -1
    queue = deque([slack])
    while queue:
        bus = queue.popleft()
        for other, k in adjacency[bus]:
            if parent_branch[other] == -2:
                parent_branch[other] = k
                queue.append(other)
    unreached = np.flatnonzero(parent_branch == -2)
    if unreached.size:
        raise ValueError(
            f"buses {unreached[:10].tolist()} are not connected to the slack bus {slack}: "
            "the branches do not form a radial feeder (a loop closes elsewhere)"
        )
    return parent_branch


@dataclass(frozen=True, eq=False)
class RadialFeeder:
    """Immutable radial feeder (all arrays read-only, indices 0-based, units in the names).

    Equality / hashing is by identity (the power-flow solver caches its matrices per feeder).
    ``bus_parent``, ``bus_parent_branch`` and ``bus_depth`` are derived from the branches at
    construction; the constructor raises ``ValueError`` if the branches are not a spanning tree
    oriented away from ``slack_bus`` (see :func:`orient_branches`).
    """

    name: str
    base_mva: float  # system base [MVA]
    slack_bus: int  # position of the feeder head
    slack_vm_pu: float  # head voltage magnitude of the case file [p.u.]
    bus_base_kv: np.ndarray  # [n_bus] nominal line-to-line voltage [kV]
    bus_pd_mw: np.ndarray  # [n_bus] published base active demand [MW]
    bus_qd_mvar: np.ndarray  # [n_bus] published base reactive demand [Mvar]
    bus_vmin_pu: np.ndarray  # [n_bus] voltage band of the case file [p.u.]
    bus_vmax_pu: np.ndarray  # [n_bus]
    branch_from_bus: np.ndarray  # [n_branch] int, upstream (sending) end
    branch_to_bus: np.ndarray  # [n_branch] int, downstream end
    branch_r_pu: np.ndarray  # [n_branch] series resistance
    branch_x_pu: np.ndarray  # [n_branch] series reactance
    branch_rating_mva: np.ndarray  # [n_branch] thermal rating at base voltage, np.inf = none
    source: str = ""  # provenance of the data
    bus_parent: np.ndarray = field(init=False, repr=False)  # [n_bus] int, -1 at the slack
    bus_parent_branch: np.ndarray = field(init=False, repr=False)  # [n_bus] int, -1 at the slack
    bus_depth: np.ndarray = field(init=False, repr=False)  # [n_bus] int, branches to the head

    def __post_init__(self) -> None:
        n_bus = int(np.asarray(self.bus_base_kv).shape[0])
        if not 0 <= int(self.slack_bus) < n_bus:
            raise ValueError(f"slack_bus {self.slack_bus} out of range 0..{n_bus - 1}")
        for key in ("bus_pd_mw", "bus_qd_mvar", "bus_vmin_pu", "bus_vmax_pu"):
            object.__setattr__(
                self, key, _float_array(getattr(self, key), key, (n_bus,), self.name)
            )
        object.__setattr__(
            self, "bus_base_kv", _float_array(self.bus_base_kv, "bus_base_kv", (n_bus,), self.name)
        )
        f = np.asarray(self.branch_from_bus, dtype=np.int64)
        t = np.asarray(self.branch_to_bus, dtype=np.int64)
        parent_branch = _tree_parent_branch(n_bus, int(self.slack_bus), f, t)
        child = np.flatnonzero(parent_branch >= 0)
        wrong = child[t[parent_branch[child]] != child]
        if wrong.size:
            raise ValueError(
                f"branches {parent_branch[wrong][:10].tolist()} point towards the feeder head; "
                "orient them with powerzoo.physics.feeder.orient_branches()"
            )
        n_branch = f.size
        for key in ("branch_r_pu", "branch_x_pu", "branch_rating_mva"):
            object.__setattr__(
                self, key, _float_array(getattr(self, key), key, (n_branch,), self.name)
            )
        for key in ("branch_r_pu", "branch_x_pu"):
            bad = np.flatnonzero(np.isinf(getattr(self, key)))
            if bad.size:
                raise ValueError(
                    f"case {self.name!r}: {key}[{bad[0]}] is {getattr(self, key)[bad[0]]} "
                    f"({bad.size} of {n_branch} not finite); impedances must be finite"
                )
        if np.any(self.branch_r_pu < 0) or np.any(self.branch_x_pu < 0):
            raise ValueError("branch resistances and reactances must be non-negative")
        if not (np.all(self.branch_rating_mva > 0) and np.all(self.bus_base_kv > 0)):
            raise ValueError("ratings and base voltages must be positive")
        parent = np.full(n_bus, -1, dtype=np.int64)
        parent[child] = f[parent_branch[child]]
        depth = np.zeros(n_bus, dtype=np.int64)
        for bus in _breadth_first(parent, int(self.slack_bus)):
            if parent[bus] >= 0:
                depth[bus] = depth[parent[bus]] + 1
        object.__setattr__(self, "branch_from_bus", f)
        object.__setattr__(self, "branch_to_bus", t)
        object.__setattr__(self, "bus_parent", parent)
        object.__setattr__(self, "bus_parent_branch", parent_branch)
        object.__setattr__(self, "bus_depth", depth)
        object.__setattr__(self, "slack_bus", int(self.slack_bus))
        object.__setattr__(self, "slack_vm_pu", float(self.slack_vm_pu))
        object.__setattr__(self, "base_mva", float(self.base_mva))
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def n_bus(self) -> int:
        """Number of buses (the slack included)."""
        return int(self.bus_base_kv.shape[0])

    @property
    def n_branch(self) -> int:
        """Number of branches (``n_bus - 1``)."""
        return int(self.branch_from_bus.shape[0])

    @property
    def branch_base_kv(self) -> np.ndarray:
        """[n_branch] base voltage of each branch [kV]."""
        return self.bus_base_kv[self.branch_from_bus]

    @property
    def branch_z_base_ohm(self) -> np.ndarray:
        """[n_branch] impedance base ``V_base^2 / S_base`` [ohm]."""
        return self.branch_base_kv**2 / self.base_mva

    @property
    def branch_r_ohm(self) -> np.ndarray:
        """[n_branch] series resistance [ohm]."""
        return self.branch_r_pu * self.branch_z_base_ohm

    @property
    def branch_x_ohm(self) -> np.ndarray:
        """[n_branch] series reactance [ohm]."""
        return self.branch_x_pu * self.branch_z_base_ohm

    @property
    def branch_i_base_ka(self) -> np.ndarray:
        """[n_branch] current base ``S_base / (sqrt(3) V_base)`` [kA]."""
        return self.base_mva / (math.sqrt(3.0) * self.branch_base_kv)

    @property
    def branch_rating_ka(self) -> np.ndarray:
        """[n_branch] thermal rating as a current [kA] (``rating_mva / (sqrt(3) V_base)``)."""
        return self.branch_rating_mva / (math.sqrt(3.0) * self.branch_base_kv)

    @property
    def total_load_mw(self) -> float:
        """Published base active demand [MW]."""
        return float(self.bus_pd_mw.sum())

    @property
    def total_load_mvar(self) -> float:
        """Published base reactive demand [Mvar]."""
        return float(self.bus_qd_mvar.sum())

    def __repr__(self) -> str:
        return (
            f"RadialFeeder(name={self.name!r}, n_bus={self.n_bus}, n_branch={self.n_branch}, "
            f"total_load_mw={self.total_load_mw:.3f}, total_load_mvar={self.total_load_mvar:.3f}, "
            f"max_depth={int(self.bus_depth.max())})"
        )


def _float_array(value: object, key: str, shape: tuple[int, ...], case: str) -> np.ndarray:
    array = np.array(value, dtype=np.float64)
    if array.shape != shape:
        raise ValueError(f"case {case!r}: {key} has shape {array.shape}, expected {shape}")
    bad = np.flatnonzero(np.isnan(array))
    if bad.size:
        raise ValueError(f"case {case!r}: {key}[{bad[0]}] is nan ({bad.size} NaN)")
    return array


def _breadth_first(parent: np.ndarray, root: int) -> list[int]:
    """Buses in breadth-first order from ``root`` given each bus's ``parent``."""
    children: list[list[int]] = [[] for _ in range(parent.size)]
    for bus, up in enumerate(parent.tolist()):
        if up >= 0:
            children[up].append(bus)
    order, queue = [], deque([root])
    while queue:
        bus = queue.popleft()
        order.append(bus)
        queue.extend(children[bus])
    return order
