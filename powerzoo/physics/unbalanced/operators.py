"""Dense operators of the batched three-phase flow, computed once per feeder and cached on it.

The network is linear: ``Y0 V = I_source + A^T g`` with ``Y0`` the network admittance plus
every load phase's admittance at its published power and base voltage (``y_nom``), ``A`` the
load phase x node incidence and ``g = y_nom v - i(v)`` the part of each load phase's current
that ``Y0`` does not carry. Everything the fixed point needs is that network's response to a
current in a load phase, kept as dense matrices (``Y0`` is factorised once, sparse LU):

* ``z``: [n_lp, n_lp + 2m] load-phase currents -> load-phase voltages in per unit of each
  phase's base (first ``n_lp`` columns) and the regulator units' winding voltages [V] (last
  ``2m``); one complex matrix product per iteration for the whole batch (also kept in single
  precision for the first iterations);
* ``z_lu``: [2m, n_lp] the units' correcting currents -> load-phase voltages [p.u.];
* ``x_a``, ``x_u``: the same responses at every node [V], for the node voltages at the end.

Regulator taps other than those in the files change ``Y`` by ``U C(tap) U^T`` (two columns of
``U`` per single-phase unit: its winding terminal differences; ``C``: a 2 x 2 block per unit).
The units then carry correcting currents ``x`` with ``(I + C K) x = C t`` (``K = U^T Y0^-1 U``,
``t`` the winding voltages before correction: the Woodbury identity). ``K`` is nearly block
diagonal (a unit's own leakage dominates its coupling to the others through the network), so
the fixed point updates ``x`` by block Jacobi, ``x <- P (t - K_off x)`` with each unit's 2 x 2
``P = (I + C_k K_kk)^-1 C_k`` in closed form: no factorisation per row. Over +-16 steps on the
IEEE feeders that update contracts by 0.05 or less per iteration (IEEE 34, two banks in
series; 0.008 on IEEE 123), well inside the loads' own rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from powerzoo.physics.unbalanced.feeder import Feeder

__all__ = ["FlowOperators", "flow_operators", "unit_blocks"]


def _diff(x: np.ndarray, plus: np.ndarray, minus: np.ndarray) -> np.ndarray:
    """``x[plus] - x[minus]`` along axis 0, ground (-1) read as zero."""
    padded = np.concatenate([x, np.zeros((1,) + x.shape[1:], dtype=x.dtype)])
    return padded[plus] - padded[minus]


@dataclass(frozen=True, eq=False)
class FlowOperators:
    """Per-feeder matrices of the fixed point (see the module docstring; ``L = n_lp``)."""

    vbase: np.ndarray  # [L] base voltage of each load phase [V]
    i_nom: np.ndarray  # [L] complex nominal current conj(S_nom) / V_base [A]
    u0: np.ndarray  # [L] load-phase voltages with g = 0 [p.u.]
    w0: np.ndarray  # [2m] units' winding voltages with g = 0 [V]
    z: np.ndarray  # [L, L + 2m] complex128
    z32: np.ndarray  # the same in complex64
    z_ul: np.ndarray  # [L, 2m] the last 2m columns of z (contiguous)
    z_lu: np.ndarray  # [2m, L] complex128 [p.u. / A]
    z_lu32: np.ndarray
    k_block: np.ndarray  # [m, 2, 2] each unit's diagonal block of K = U^T Y0^-1 U [ohm]
    k_off: np.ndarray  # [2m, 2m] K without those blocks [ohm]
    x_src: np.ndarray  # [n_node] node voltages with g = 0 [V]
    x_a: np.ndarray  # [L, n_node] node voltage per load-phase current [ohm]
    x_u: np.ndarray  # [2m, n_node] node voltage per unit correcting current [ohm]
    phase_nodes: np.ndarray  # nodes of phases 1-3 (others, e.g. a neutral, are not reported)
    phase_slots: np.ndarray  # their flat index in a [n_bus, 3] array
    phase_base: np.ndarray  # their phase-neutral base voltage [V]
    exponent_masks: dict  # (part, exponent) -> [L] bool, part "p" or "q", exponent 0, 1, 2
    other_exponents: tuple  # ((part, columns, exponent), ...) for exponents not 0, 1, 2


def _unit_columns(feeder: Feeder) -> np.ndarray:
    """``U`` [n_node, 2m]: winding-1 and winding-2 terminal differences of every unit."""
    m = len(feeder.unit_nodes)
    u_cols = np.zeros((feeder.n_node + 1, 2 * m), dtype=np.complex128)  # last row: ground
    for k, (a, b, c, d) in enumerate(feeder.unit_nodes):
        u_cols[a, 2 * k] += 1.0
        u_cols[b, 2 * k] -= 1.0
        u_cols[c, 2 * k + 1] += 1.0
        u_cols[d, 2 * k + 1] -= 1.0
    return u_cols[: feeder.n_node]


def _exponent_split(exps: np.ndarray, part: str) -> tuple[dict, list]:
    masks = {(part, e): exps == e for e in (0, 1, 2)}
    other = np.flatnonzero(~np.isin(exps, (0.0, 1.0, 2.0)))
    groups = [(part, other[exps[other] == e], float(e)) for e in np.unique(exps[other])]
    return masks, groups


def flow_operators(feeder: Feeder) -> FlowOperators:
    """The feeder's :class:`FlowOperators` (built on first use, then cached on the feeder)."""
    if "operators" in feeder.cache:
        return feeder.cache["operators"]
    frm, to = feeder.load_phase_from, feeder.load_phase_to
    n, n_lp = feeder.n_node, len(frm)
    vbase = np.asarray(feeder.load_phase_vbase, dtype=np.float64)
    s_nom = (feeder.p_kw + 1j * feeder.q_kvar)[feeder.load_phase_load] * 1000.0
    s_nom = s_nom * feeder.load_phase_share
    y_nom = np.conj(s_nom) / vbase**2
    rows = np.concatenate([np.arange(n_lp)[frm >= 0], np.arange(n_lp)[to >= 0]])
    cols = np.concatenate([frm[frm >= 0], to[to >= 0]])
    vals = np.concatenate([np.ones(np.sum(frm >= 0)), -np.ones(np.sum(to >= 0))])
    incidence = sp.csr_matrix((vals, (rows, cols)), shape=(n_lp, n))
    lu = splu((feeder.y_network + incidence.T @ sp.diags(y_nom) @ incidence).tocsc())
    x_src = lu.solve(feeder.i_source)
    x_a = lu.solve(incidence.T.toarray().astype(np.complex128))  # [n, L]
    u_cols = _unit_columns(feeder)
    m2 = u_cols.shape[1]
    x_u = lu.solve(u_cols) if m2 else np.zeros((n, 0), dtype=np.complex128)
    z_ll = _diff(x_a, frm, to).T / vbase  # [L, L] p.u. per A
    z_ul = (u_cols.T @ x_a).T  # [L, 2m] V per A
    z = np.ascontiguousarray(np.concatenate([z_ll, z_ul], axis=1))
    z_lu = np.ascontiguousarray(_diff(x_u, frm, to).T / vbase)
    k = u_cols.T @ x_u
    m = m2 // 2
    k_block = np.zeros((m, 2, 2), dtype=np.complex128)
    block_diag = np.zeros_like(k)
    for j in range(m):
        k_block[j] = k[2 * j : 2 * j + 2, 2 * j : 2 * j + 2]
        block_diag[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = k_block[j]
    phase_nodes = np.flatnonzero((feeder.node_phase >= 1) & (feeder.node_phase <= 3))
    masks_p, other_p = _exponent_split(feeder.load_phase_exponents[:, 0], "p")
    masks_q, other_q = _exponent_split(feeder.load_phase_exponents[:, 1], "q")
    ops = FlowOperators(
        vbase=vbase,
        i_nom=s_nom.conj() / vbase,
        u0=_diff(x_src, frm, to) / vbase,
        w0=u_cols.T @ x_src,
        z=z,
        z32=z.astype(np.complex64),
        z_ul=np.ascontiguousarray(z_ul),
        z_lu=z_lu,
        z_lu32=z_lu.astype(np.complex64),
        k_block=k_block,
        k_off=k - block_diag,
        x_src=x_src,
        x_a=np.ascontiguousarray(x_a.T),
        x_u=np.ascontiguousarray(x_u.T),
        phase_nodes=phase_nodes,
        phase_slots=feeder.node_bus[phase_nodes] * 3 + feeder.node_phase[phase_nodes] - 1,
        phase_base=feeder.bus_kv_base[feeder.node_bus[phase_nodes]] * 1000.0,
        exponent_masks={**masks_p, **masks_q},
        other_exponents=tuple(other_p + other_q),
    )
    for array in (ops.vbase, ops.i_nom, ops.u0, ops.w0, ops.z, ops.z32, ops.z_lu, ops.k_off):
        array.setflags(write=False)
    feeder.cache["operators"] = ops
    return ops


def unit_blocks(feeder: Feeder, ops: FlowOperators, tap: np.ndarray) -> np.ndarray:
    """``P = (I + C_k K_kk)^-1 C_k`` [B, m, 2, 2] of every unit for each row's taps ``tap``
    [B, n_regulators] (zero where a unit is at the tap in the files) [S]."""
    s1, s2 = feeder.unit_winding_scales(tap)
    s10, s20 = feeder.unit_winding_scales(feeder.tap_file[None, :])
    y = feeder.unit_y
    c00, c11 = y * (s1**2 - s10**2), y * (s2**2 - s20**2)
    c01 = -y * (s1 * s2 - s10 * s20)  # C is symmetric
    kb = ops.k_block
    q00 = 1.0 + c00 * kb[:, 0, 0] + c01 * kb[:, 1, 0]  # I + C K_kk, entry by entry
    q01 = c00 * kb[:, 0, 1] + c01 * kb[:, 1, 1]
    q10 = c01 * kb[:, 0, 0] + c11 * kb[:, 1, 0]
    q11 = 1.0 + c01 * kb[:, 0, 1] + c11 * kb[:, 1, 1]
    det = q00 * q11 - q01 * q10
    out = np.empty(s1.shape + (2, 2), dtype=np.complex128)
    out[..., 0, 0] = (q11 * c00 - q01 * c01) / det
    out[..., 0, 1] = (q11 * c01 - q01 * c11) / det
    out[..., 1, 0] = (q00 * c01 - q10 * c00) / det
    out[..., 1, 1] = (q00 * c11 - q10 * c01) / det
    return out
