"""The DC network type: :class:`NetworkCase`, a transmission case as flat read-only numpy arrays.

Indices are 0-based positions (buses in case order, branches, generators); units are in the
field names. Where the arrays come from is :mod:`powerzoo.physics.pandapower_conversion`;
how they are loaded and cached is :mod:`powerzoo.physics.cases`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["NetworkCase"]


def _length(field: str, doc: str) -> property:
    """Read-only property: the length of the array field ``field``."""
    return property(lambda self: int(getattr(self, field).shape[0]), doc=doc)


@dataclass(frozen=True, eq=False)
class NetworkCase:
    """Immutable DC network description (all arrays read-only, indices 0-based).

    Units are in the field names: ``_mw`` megawatt, ``_pu`` per unit on ``base_mva``,
    ``c2_per_mw2h`` $/(MW^2 h), ``c1_per_mwh`` $/MWh, ``c0_per_h`` $/h.
    Equality / hashing is by identity (used as cache key for PTDF matrices).
    """

    name: str
    base_mva: float
    bus_id: np.ndarray  # [n_bus] int, pandapower bus index
    slack_bus: int  # position of the reference bus
    bus_pd_mw: np.ndarray  # [n_bus] fixed net active demand
    bus_vn_kv: np.ndarray  # [n_bus] nominal (base) voltage [kV]
    branch_from_bus: np.ndarray  # [n_branch] int
    branch_to_bus: np.ndarray  # [n_branch] int
    branch_x_pu: np.ndarray  # [n_branch] series reactance
    branch_tap: np.ndarray  # [n_branch] off-nominal ratio (1.0 for lines)
    branch_rate_a_mw: np.ndarray  # [n_branch] thermal limit, np.inf = unlimited
    branch_in_service: np.ndarray  # [n_branch] bool
    branch_is_trafo: np.ndarray  # [n_branch] bool
    branch_element: np.ndarray  # [n_branch] int, row index in net.line / net.trafo
    gen_bus: np.ndarray  # [n_gen] int
    gen_pmin_mw: np.ndarray  # [n_gen]
    gen_pmax_mw: np.ndarray  # [n_gen]
    gen_c2_per_mw2h: np.ndarray  # [n_gen]
    gen_c1_per_mwh: np.ndarray  # [n_gen]
    gen_c0_per_h: np.ndarray  # [n_gen]
    gen_in_service: np.ndarray  # [n_gen] bool
    gen_element_type: np.ndarray  # [n_gen] str: "ext_grid" | "gen" | "sgen"
    gen_element: np.ndarray  # [n_gen] int, row index in that pandapower table
    load_bus: np.ndarray  # [n_load] int
    load_p_mw: np.ndarray  # [n_load]
    # [n_branch] phase shift angle [degrees] (MATPOWER SHIFT); default: zeros (no phase shifter)
    branch_shift_deg: np.ndarray = field(default=None)  # type: ignore[assignment]

    n_bus = _length("bus_id", "Number of buses.")
    n_branch = _length("branch_from_bus", "Number of branches (lines, then transformers).")
    n_gen = _length("gen_bus", "Number of generating units.")
    n_load = _length("load_bus", "Number of in-service loads.")

    def __post_init__(self) -> None:
        if self.branch_shift_deg is None:
            object.__setattr__(self, "branch_shift_deg", np.zeros(self.n_branch))
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        n_bus, n_branch, n_gen = self.n_bus, self.n_branch, self.n_gen
        checks = {
            "bus_pd_mw": n_bus,
            "bus_vn_kv": n_bus,
            "branch_to_bus": n_branch,
            "branch_x_pu": n_branch,
            "branch_tap": n_branch,
            "branch_rate_a_mw": n_branch,
            "branch_in_service": n_branch,
            "branch_shift_deg": n_branch,
            "gen_pmin_mw": n_gen,
            "gen_pmax_mw": n_gen,
            "gen_c2_per_mw2h": n_gen,
            "gen_c1_per_mwh": n_gen,
            "gen_c0_per_h": n_gen,
            "gen_in_service": n_gen,
        }
        for key, n in checks.items():
            if getattr(self, key).shape != (n,):
                raise ValueError(f"{key} has shape {getattr(self, key).shape}, expected ({n},)")
        if not 0 <= self.slack_bus < n_bus:
            raise ValueError(f"slack_bus {self.slack_bus} out of range")
        bad = np.flatnonzero(~np.isfinite(self.branch_x_pu))
        if bad.size:
            raise ValueError(
                f"case {self.name!r}: branch_x_pu[{bad[0]}] is {self.branch_x_pu[bad[0]]} "
                f"({bad.size} of {n_branch} branch reactances are NaN or infinite)"
            )

    @property
    def total_load_mw(self) -> float:
        """Total fixed net demand [MW]."""
        return float(self.bus_pd_mw.sum())

    @property
    def is_quadratic(self) -> bool:
        """True if any in-service generator has a non-zero quadratic cost term."""
        return bool(np.any(self.gen_c2_per_mw2h[self.gen_in_service] != 0.0))

    @property
    def limited_branches(self) -> np.ndarray:
        """Positions [n_lim] of the in-service branches with a finite rating (the only ones
        that can overload)."""
        return np.flatnonzero(self.branch_in_service & np.isfinite(self.branch_rate_a_mw))

    @property
    def gen_limits_mw(self) -> tuple[np.ndarray, np.ndarray]:
        """Effective ``(Pmin, Pmax)`` [MW] per unit, each [n_gen]; out-of-service units at 0."""
        on = self.gen_in_service
        return np.where(on, self.gen_pmin_mw, 0.0), np.where(on, self.gen_pmax_mw, 0.0)

    def __repr__(self) -> str:
        return (
            f"NetworkCase(name={self.name!r}, n_bus={self.n_bus}, n_branch={self.n_branch}, "
            f"n_gen={self.n_gen}, total_load_mw={self.total_load_mw:.2f})"
        )
