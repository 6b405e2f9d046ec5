"""Sparse DC power flow for networks of any size: the bus susceptance matrix factorised once.

The model is pandapower's ``rundcpp`` (and MATPOWER's ``makeBdc``), per unit on ``base_mva``:

* branch susceptance ``b_l = 1 / (x_l * tap_l)`` (0 for an out-of-service branch);
* a phase shift ``shift_l`` [rad] adds ``Pfinj_l = -b_l * shift_l`` to the branch flow and the
  injections ``+Pfinj_l`` at its from bus and ``-Pfinj_l`` at its to bus to the bus balance:
  ``P = B_bus theta + Pbusinj``, ``P_f = B_f theta + Pfinj``;
* each island (connected set of buses over in-service branches) has one reference bus at angle
  0 that absorbs the island's mismatch: the case's slack bus in its island, the first bus (case
  order) in every other island. An isolated bus is its own island; it carries no flow. (pandapower
  instead takes islands without an external grid out of service and reports no flow there.)

:class:`DCFactor` holds the reduced ``B`` (reference rows/columns removed), factorised once with
SuperLU (:func:`scipy.sparse.linalg.splu`), the sparse ``B_f`` and the phase-shift terms; a call
solves ``B`` right-hand sides at once and forms flows with one sparse product. No dense
branch x bus matrix is formed. :func:`dc_factor` caches it per :class:`NetworkCase` object.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from powerzoo.physics.network import NetworkCase

__all__ = ["DCFactor", "dc_factor", "island_reference_buses", "phase_shift_injections_pu"]

_FACTOR_CACHE: weakref.WeakKeyDictionary[NetworkCase, DCFactor] = weakref.WeakKeyDictionary()


def phase_shift_injections_pu(case: NetworkCase) -> tuple[np.ndarray, np.ndarray]:
    """``(Pbusinj [n_bus], Pfinj [n_branch])`` [p.u.]: the constant bus injections and branch
    flows of the phase shifters, ``Pfinj = -b * shift_rad``, ``Pbusinj = C_ft' Pfinj`` (zeros
    for a case without phase shift)."""
    b = np.where(case.branch_in_service, 1.0 / (case.branch_x_pu * case.branch_tap), 0.0)
    p_f = -b * np.deg2rad(case.branch_shift_deg)
    p_bus = np.zeros(case.n_bus)
    np.add.at(p_bus, case.branch_from_bus, p_f)
    np.add.at(p_bus, case.branch_to_bus, -p_f)
    return p_bus, p_f


def island_reference_buses(case: NetworkCase) -> np.ndarray:
    """Reference bus of every island [n_island] (positions): the slack bus for its island, the
    first bus of each other island (module docstring)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    on = case.branch_in_service
    graph = coo_matrix(
        (np.ones(int(on.sum())), (case.branch_from_bus[on], case.branch_to_bus[on])),
        shape=(case.n_bus, case.n_bus),
    )
    n_island, label = connected_components(graph, directed=False)
    first = np.full(n_island, case.n_bus, dtype=np.int64)
    np.minimum.at(first, label, np.arange(case.n_bus))
    first[label[case.slack_bus]] = case.slack_bus
    return np.sort(first)


@dataclass(frozen=True, eq=False)
class DCFactor:
    """The factorised DC network of one case (module docstring); build with :func:`dc_factor`.

    ``lu`` solves ``B_red theta_red = P_red`` for the non-reference buses ``keep``; ``b_f``
    (CSR, ``[n_branch, n_bus]``, p.u.) maps angles to branch flows.
    """

    base_mva: float
    n_bus: int
    keep: np.ndarray  # [n_keep] non-reference bus positions
    reference: np.ndarray  # [n_island] reference bus positions
    lu: object  # scipy.sparse.linalg.SuperLU of B_red
    batched: object  # BatchedLU of B_red: many right-hand sides at once (None: no free bus)
    b_f: object  # scipy.sparse.csr_matrix [n_branch, n_bus]
    p_bus_shift_pu: np.ndarray  # [n_bus] Pbusinj
    p_f_shift_mw: np.ndarray  # [n_branch] Pfinj * base_mva
    has_shift: bool

    def angles_rad(self, p_inj_mw: np.ndarray) -> np.ndarray:
        """Bus voltage angles ``[B, n_bus]`` [rad] (0 at every reference bus) for net bus
        injections ``p_inj_mw`` ``[B, n_bus]`` [MW]; reference-bus injections are ignored."""
        return self._angles_bus_major(p_inj_mw).T

    def _angles_bus_major(self, p_inj_mw: np.ndarray, bus_major: bool = False) -> np.ndarray:
        """The angles as ``[n_bus, B]`` (C order): one scenario per column, so the solve and
        the flow product need no transposed copies. ``bus_major``: ``p_inj_mw`` is given as
        ``[n_bus, B]`` already."""
        p = np.asarray(p_inj_mw, dtype=float)
        rhs = (p if bus_major else p.T)[self.keep]  # [n_keep, B], gathered row by row
        rhs /= self.base_mva
        if self.has_shift:
            rhs -= self.p_bus_shift_pu[self.keep, None]
        theta = np.zeros((self.n_bus, rhs.shape[1]))
        if self.keep.size:  # (BatchedLU hands small batches to SuperLU itself)
            theta[self.keep] = self.batched.solve(rhs)
        return theta

    def flows_branch_major_mw(self, p_inj_mw: np.ndarray, bus_major: bool = False) -> np.ndarray:
        """Branch flows as ``[n_branch, B]`` [MW] (C order, one scenario per column) for
        ``p_inj_mw`` ``[B, n_bus]`` (``bus_major``: ``[n_bus, B]``): what batched reductions over
        the branches want, with no transposed copy."""
        flows_t = self.b_f @ self._angles_bus_major(p_inj_mw, bus_major)  # [n_branch, B]
        flows_t *= self.base_mva
        if self.has_shift:
            flows_t += self.p_f_shift_mw[:, None]
        return flows_t

    def flows_mw(self, p_inj_mw: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Branch flows ``[B, n_branch]`` [MW, from -> to] for ``p_inj_mw`` ``[B, n_bus]``."""
        flows_t = self.flows_branch_major_mw(p_inj_mw)
        if out is None:
            return np.ascontiguousarray(flows_t.T)
        out[...] = flows_t.T
        return out


def dc_factor(case: NetworkCase) -> DCFactor:
    """The :class:`DCFactor` of ``case``, built on first use (one sparse LU) and cached per
    case object."""
    cached = _FACTOR_CACHE.get(case)
    if cached is not None:
        return cached
    from scipy.sparse import csc_matrix, csr_matrix
    from scipy.sparse.linalg import splu

    from powerzoo.physics.batched_lu import BatchedLU

    n_bus, n_branch = case.n_bus, case.n_branch
    b = np.where(case.branch_in_service, 1.0 / (case.branch_x_pu * case.branch_tap), 0.0)
    rows = np.r_[np.arange(n_branch), np.arange(n_branch)]
    cols = np.r_[case.branch_from_bus, case.branch_to_bus]
    b_f = csr_matrix((np.r_[b, -b], (rows, cols)), shape=(n_branch, n_bus))
    incidence = csr_matrix(
        (np.r_[np.ones(n_branch), -np.ones(n_branch)], (rows, cols)), shape=(n_branch, n_bus)
    )
    b_bus = (incidence.T @ b_f).tocsc()
    reference = island_reference_buses(case)
    keep = np.setdiff1d(np.arange(n_bus), reference)
    b_red = csc_matrix(b_bus[keep][:, keep])
    try:
        # B is symmetric: symmetric ordering, diagonal pivots preferred (faster solves)
        options = {"SymmetricMode": True}
        lu = (
            splu(b_red, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.1, options=options)
            if keep.size
            else None
        )
        batched = BatchedLU(b_red) if keep.size else None
    except RuntimeError as err:  # exactly singular: a zero-reactance in-service branch
        raise ValueError(f"{case.name}: singular B matrix ({err})") from err
    p_bus, p_f = phase_shift_injections_pu(case)
    has_shift = bool(np.any(case.branch_shift_deg[case.branch_in_service] != 0.0))
    factor = DCFactor(
        base_mva=float(case.base_mva),
        n_bus=n_bus,
        keep=keep,
        reference=reference,
        lu=lu,
        batched=batched,
        b_f=b_f,
        p_bus_shift_pu=p_bus,
        p_f_shift_mw=p_f * case.base_mva,
        has_shift=has_shift,
    )
    _FACTOR_CACHE[case] = factor
    return factor
