"""Thevenin equivalents of a meshed transmission network at chosen buses, and the linearised
voltage magnitude there as the network's loads change.

The network is the case's AC model (:func:`powerzoo.physics.ac_network.ac_network`: its branch
admittances and shunts), with every bus that holds in-service units tied to ground through the
units' subtransient reactance ``x''_d`` on their own rating (``x''_d x base_mva / sum Pmax`` p.u.
on the system base, the short-circuit model of IEC 60909 without its correction factors). The
bus impedance matrix ``Z = (Y_bus + Y_units)^-1``; its diagonal entry at bus ``b`` is the
Thevenin impedance there, and ``base_mva / |Z_bb|`` the short-circuit level (MVA).

Voltage magnitudes are linearised around the case's own AC solution ``V`` (pandapower's, at the
case's loads): a load change ``dS_j = dP_j + j dQ_j`` at bus ``j`` (MW, Mvar, drawn) changes the
injected current by ``-conj(dS_j / V_j) / base_mva``, the voltages by ``Z`` times that, and the
magnitude at bus ``b`` by ``Re(dV_b conj(V_b)) / |V_b|``::

    |V_b| = |V_b^case| + sum_j (k^P_bj dP_j + k^Q_bj dQ_j)

So a bus's voltage falls with its own load and with the load of its electrical neighbours, the
more the weaker the network is there (the larger ``|Z_bb|``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from powerzoo.physics.ac_network import ac_network
from powerzoo.physics.network import NetworkCase

__all__ = ["SUBTRANSIENT_REACTANCE_PU", "Thevenin", "thevenin_at"]

SUBTRANSIENT_REACTANCE_PU = 0.2
"""Units' subtransient reactance ``x''_d`` on their own rating (typical of large synchronous
machines: 0.15-0.25 p.u.)."""


@dataclasses.dataclass(frozen=True)
class Thevenin:
    """The Thevenin equivalents at ``buses`` (0-based buses of the case) and their linearised
    voltage sensitivities (module docstring)."""

    buses: np.ndarray  # [k] the buses
    z_pu: np.ndarray  # [k] complex Thevenin impedance, p.u. on the system base
    short_circuit_mva: np.ndarray  # [k] base_mva / |Z_bb|
    vm_case_pu: np.ndarray  # [k] the case's own voltage magnitude there
    p_sensitivity_pu_per_mw: np.ndarray  # [k, n_bus] d|V_b| / d(load P_j)
    q_sensitivity_pu_per_mvar: np.ndarray  # [k, n_bus] d|V_b| / d(load Q_j)
    case_p_mw: np.ndarray  # [n_bus] the case's active load (MW) the linearisation is about
    case_q_mvar: np.ndarray  # [n_bus] the case's reactive load (Mvar)

    def voltage_pu(self, p_mw: np.ndarray, q_mvar: np.ndarray) -> np.ndarray:
        """Voltage magnitudes [B, k] (p.u.) at :attr:`buses` under bus loads ``p_mw`` and
        ``q_mvar`` [B, n_bus] (MW, Mvar drawn)."""
        dp = np.asarray(p_mw, dtype=np.float64) - self.case_p_mw
        dq = np.asarray(q_mvar, dtype=np.float64) - self.case_q_mvar
        return (
            self.vm_case_pu
            + dp @ self.p_sensitivity_pu_per_mw.T
            + dq @ self.q_sensitivity_pu_per_mvar.T
        )


def _bus_admittance(case_name: str, case: NetworkCase, x_units_pu: float) -> tuple:
    """``(Y_bus + Y_units, V_case, base_mva, public -> internal index)`` of ``case_name``."""
    net = ac_network(case_name)
    n = net.n_internal
    y = np.zeros((n, n), dtype=np.complex128)
    f, t = net.branch_from, net.branch_to
    np.add.at(y, (f, f), net.y_ff)
    np.add.at(y, (f, t), net.y_ft)
    np.add.at(y, (t, f), net.y_tf)
    np.add.at(y, (t, t), net.y_tt)
    y[np.arange(n), np.arange(n)] += net.y_shunt
    index = net.bus_internal
    if index.size != case.n_bus or np.any(index < 0):
        raise ValueError(f"{case_name}: every bus must be in service for a Thevenin equivalent")
    on = case.gen_in_service
    rating = np.bincount(case.gen_bus[on], case.gen_pmax_mw[on], case.n_bus)
    held = np.flatnonzero(rating > 0.0)
    y[index[held], index[held]] += rating[held] / (1j * x_units_pu * net.base_mva)
    return y, net.v_base, net.base_mva, index, net


def thevenin_at(
    case_name: str,
    case: NetworkCase,
    buses: np.ndarray,
    x_units_pu: float = SUBTRANSIENT_REACTANCE_PU,
) -> Thevenin:
    """The Thevenin equivalents of network ``case_name`` (whose DC model is ``case``) at
    0-based ``buses``, units behind ``x_units_pu`` (p.u. on their own rating).

    Args:
        case_name: The case (an AC model must exist: :func:`~powerzoo.physics.ac_network.
            ac_network`).
        case: Its DC model (unit buses and ratings, MW).
        buses: The buses [k].
        x_units_pu: The units' subtransient reactance on their rating, p.u.

    Returns:
        The :class:`Thevenin` at ``buses``.
    """
    buses = np.asarray(buses, dtype=np.int64)
    y, v, base, index, net = _bus_admittance(case_name, case, float(x_units_pu))
    rows = index[buses]
    unit = np.zeros((y.shape[0], rows.size), dtype=np.complex128)
    unit[rows, np.arange(rows.size)] = 1.0
    z_rows = np.linalg.solve(y.T, unit).T  # [k, n_internal]: rows of Z (Y is symmetric)
    vb = v[rows]
    turn = np.conj(vb)[:, None] / np.abs(vb)[:, None]  # projects dV on |V_b|
    # dI_inj = -conj(dS / V) / base: dP -> -1 / conj(V), dQ -> +j / conj(V)
    k_p = np.real(-z_rows / np.conj(v)[None, :] * turn) / base
    k_q = np.real(1j * z_rows / np.conj(v)[None, :] * turn) / base
    z_bb = z_rows[np.arange(rows.size), rows]
    return Thevenin(
        buses=buses,
        z_pu=z_bb,
        short_circuit_mva=base / np.abs(z_bb),
        vm_case_pu=np.abs(vb),
        p_sensitivity_pu_per_mw=k_p[:, index],
        q_sensitivity_pu_per_mvar=k_q[:, index],
        case_p_mw=np.asarray(case.bus_pd_mw, dtype=np.float64),
        case_q_mvar=-net.q_mvar.astype(np.float64),
    )
