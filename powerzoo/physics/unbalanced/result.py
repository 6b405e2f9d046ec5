"""Result of the batched three-phase power flow: voltages, branch currents and losses, powers.

The node voltages and their magnitudes are computed by the solve; angles, branch currents,
losses and powers on first access (cached), so a caller that needs only voltages does not pay
for the rest.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from powerzoo.physics.unbalanced.feeder import Feeder

__all__ = ["UnbalancedPFResult"]


def _scatter_matrices(feeder: Feeder) -> dict:
    """Sparse sums: regulator-unit terminals -> terminal rows, terminal rows -> branches, load
    phases -> loads (cached per feeder)."""
    if "result" in feeder.cache:
        return feeder.cache["result"]
    n_term = len(feeder.terminal_node)
    n_unit = len(feeder.unit_y)
    units = sp.csr_matrix(
        (np.ones(4 * n_unit), (feeder.unit_terminals.ravel(), np.arange(4 * n_unit))),
        shape=(n_term, 4 * n_unit),
    )
    branches = sp.csr_matrix(
        (np.ones(n_term), (np.arange(n_term), feeder.terminal_branch)),
        shape=(n_term, len(feeder.branch_names)),
    )
    n_lp = len(feeder.load_phase_load)
    loads = sp.csr_matrix(
        (np.ones(n_lp), (np.arange(n_lp), feeder.load_phase_load)), shape=(n_lp, feeder.n_loads)
    )
    node = feeder.terminal_node
    side1 = np.flatnonzero((feeder.terminal_side == 1) & (node >= 0))
    side1 = side1[(feeder.node_phase[node[side1]] >= 1) & (feeder.node_phase[node[side1]] <= 3)]
    out = {"units": units, "branches": branches, "loads": loads, "side1": side1}
    feeder.cache["result"] = out
    return out


@dataclass(frozen=True, eq=False)
class UnbalancedPFResult:
    """Three-phase power-flow result for ``B`` scenarios (leading axis ``B``).

    Per-phase arrays ``[B, n, 3]`` are indexed by OpenDSS phase (node) 1, 2, 3 and hold NaN
    where the bus or branch has no such phase. Branches (``feeder.branch_names``: lines,
    switches, transformers, regulators) are seen from terminal 1 (the ``bus1`` end). Rows with
    ``converged == False`` hold the last finite iterate, not a solution. Units: V, A, kW, kvar,
    p.u. of each bus's phase-neutral base ``feeder.bus_kv_base``.
    """

    v_node: np.ndarray  # [B, n_node] complex node-to-ground voltage [V]
    vm_pu: np.ndarray  # [B, n_bus, 3] voltage magnitude [p.u.]
    converged: np.ndarray  # [B] bool
    iterations: int
    feeder: Feeder = field(repr=False)
    taps: np.ndarray = field(repr=False)  # [B, n_regulators] taps used
    v_load_phase: np.ndarray = field(repr=False)  # [B, n_lp] voltage across each load phase
    s_load_phase_nominal: np.ndarray = field(repr=False)  # [B, n_lp] complex power at V_base [VA]

    @functools.cached_property
    def va_deg(self) -> np.ndarray:
        """[B, n_bus, 3] voltage angle [degree] (OpenDSS's reference: source angle included)."""
        f = self.feeder
        out = np.full(self.vm_pu.shape, np.nan)
        node = np.flatnonzero((f.node_phase >= 1) & (f.node_phase <= 3))
        out[:, f.node_bus[node], f.node_phase[node] - 1] = np.degrees(
            np.angle(self.v_node[:, node])
        )
        return out

    @functools.cached_property
    def _v_ext(self) -> np.ndarray:
        batch = self.v_node.shape[0]
        return np.concatenate([self.v_node, np.zeros((batch, 1), dtype=np.complex128)], axis=1)

    @functools.cached_property
    def terminal_current(self) -> np.ndarray:
        """[B, n_term] complex current into each branch terminal conductor [A] (rows as
        ``feeder.terminal_branch`` / ``terminal_node`` / ``terminal_side``)."""
        f = self.feeder
        current = np.asarray((f.terminal_y @ self.v_node.T).T)
        if len(f.unit_y):
            s1, s2 = f.unit_winding_scales(self.taps)
            u = np.stack([s1, -s1, -s2, s2], axis=2)  # [B, n_unit, 4]
            flow = f.unit_y * np.sum(u * self._v_ext[:, f.unit_nodes], axis=2)
            contrib = (u * flow[:, :, None]).reshape(len(u), -1)
            current += (_scatter_matrices(f)["units"] @ contrib.T).T
        return current

    @functools.cached_property
    def branch_current(self) -> np.ndarray:
        """[B, n_branch, 3] complex current into terminal 1 per phase [A] (NaN: no phase)."""
        f = self.feeder
        side1 = _scatter_matrices(f)["side1"]
        out = np.full((len(self.v_node), len(f.branch_names), 3), np.nan, dtype=np.complex128)
        phase = f.node_phase[f.terminal_node[side1]] - 1
        out[:, f.terminal_branch[side1], phase] = self.terminal_current[:, side1]
        return out

    @property
    def branch_current_a(self) -> np.ndarray:
        """[B, n_branch, 3] current magnitude at terminal 1 [A] (NaN where no phase)."""
        return np.abs(self.branch_current)

    @functools.cached_property
    def branch_losses_kw(self) -> np.ndarray:
        """[B, n_branch] active losses of each line / transformer [kW]."""
        v_term = self._v_ext[:, self.feeder.terminal_node]
        p_term = (v_term * np.conj(self.terminal_current)).real
        return np.asarray(p_term @ _scatter_matrices(self.feeder)["branches"]) / 1000.0

    @property
    def losses_kw(self) -> np.ndarray:
        """[B] total active losses of the lines and transformers [kW]."""
        return self.branch_losses_kw.sum(axis=1)

    @functools.cached_property
    def _source_kva(self) -> np.ndarray:
        f = self.feeder
        v_src = self._v_ext[:, f.source_nodes]
        i_out = f.i_source[f.source_nodes] - v_src @ f.y_source.T
        return np.sum(v_src * np.conj(i_out), axis=1) / 1000.0

    @property
    def source_kw(self) -> np.ndarray:
        """[B] active power delivered by the source (behind its impedance) [kW]."""
        return self._source_kva.real

    @property
    def source_kvar(self) -> np.ndarray:
        """[B] reactive power delivered by the source [kvar]."""
        return self._source_kva.imag

    @functools.cached_property
    def _load_kva(self) -> np.ndarray:
        f = self.feeder
        ratio = np.abs(self.v_load_phase) / f.load_phase_vbase
        s = self.s_load_phase_nominal
        exps = f.load_phase_exponents
        drawn = s.real * ratio ** exps[:, 0] + 1j * s.imag * ratio ** exps[:, 1]
        return np.asarray(drawn @ _scatter_matrices(f)["loads"]) / 1000.0

    @property
    def load_kw(self) -> np.ndarray:
        """[B, n_loads] active power each load draws at its solved voltage [kW]."""
        return self._load_kva.real

    @property
    def load_kvar(self) -> np.ndarray:
        """[B, n_loads] reactive power each load draws at its solved voltage [kvar]."""
        return self._load_kva.imag
