"""The IEEE 123-node feeder of ``volt_var_123``: switched capacitors, rooftop PV and the
measurements its controllers read, on the batched three-phase power flow.

The flow (:func:`powerzoo.physics.unbalanced.unbalanced_power_flow`) takes loads and regulator
taps as inputs; capacitors are part of its network. This module builds, from the feeder the flow
reads (:func:`~powerzoo.physics.unbalanced.load_feeder`), a :class:`Feeder` with two kinds of
extra load columns, each a load branch the flow already handles exactly:

* **capacitors** (``C83`` three-phase 600 kvar, ``C88a`` / ``C90b`` / ``C92c`` single-phase
  50 kvar): their admittance is taken out of the network and each phase becomes a
  constant-impedance load (OpenDSS model 2: exponents 2, 2) of ``-kvar / phases`` at its rated
  voltage, between the same nodes. A capacitor in service draws its nominal ``q = -kvar``
  (it is then the same admittance ``Q / V^2`` as the network held); out of service its column is
  0. Exact, as OpenDSS's constant-impedance capacitor is;
* **PV**: one aggregate of rooftop arrays behind each chosen spot load, connected as its load
  (single-phase wye to neutral, single-phase delta line to line, three-phase wye), a
  constant-power injection (load columns of negative ``p`` and ``q``) with no share in the
  flow's nominal admittance.

Every quantity here is batched over rows ``B``; nothing loops over rows.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.sparse as sp

from powerzoo.physics.unbalanced import Feeder, UnbalancedPFResult, unbalanced_power_flow
from powerzoo.physics.unbalanced.loads import Capacitor

__all__ = [
    "V_LOW_PU",
    "V_HIGH_PU",
    "PT_BASE_V",
    "VoltVarFeeder",
    "GridReading",
    "switched_feeder",
]

V_LOW_PU, V_HIGH_PU = 0.95, 1.05  # ANSI C84.1 Range A on the primary
PT_BASE_V = 120.0  # the controllers' voltage base: 120 V on the potential transformer's secondary


def _node_index(feeder: Feeder) -> dict[tuple[str, int], int]:
    """``(bus name, OpenDSS node) -> node index`` of ``feeder``."""
    return {
        (feeder.bus_names[b], int(ph)): k
        for k, (b, ph) in enumerate(zip(feeder.node_bus, feeder.node_phase, strict=True))
    }


def _capacitor_phases(
    cap: Capacitor, nodes: dict[tuple[str, int], int]
) -> tuple[list[tuple[int, int]], float]:
    """The ``(from, to)`` node pairs of a capacitor's phases and their base voltage [V]."""
    idx = [-1 if n == 0 else nodes[(b, n)] for b, n in cap.conductors()]
    n = cap.phases
    if cap.conn == "delta":
        return [(idx[i], idx[(i + 1) % n]) for i in range(n)], cap.kv * 1000.0
    kv = cap.kv / math.sqrt(3.0) if n in (2, 3) else cap.kv
    return [(idx[i], idx[i + n]) for i in range(n)], kv * 1000.0


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def switched_feeder(
    base: Feeder, pv_loads: np.ndarray
) -> tuple[Feeder, tuple[str, ...], np.ndarray]:
    """``base`` with its capacitors as switchable constant-impedance load columns and one PV
    injection column per load of ``pv_loads`` (module docstring).

    Args:
        base: A feeder from :func:`~powerzoo.physics.unbalanced.load_feeder`.
        pv_loads: Indices of the loads with PV.

    Returns:
        The feeder (load columns: the ``n_loads`` loads, then the capacitors, then one PV per
        load of ``pv_loads``), the capacitor names and each capacitor's rating [kvar, all
        phases].
    """
    nodes = _node_index(base)
    y = base.y_network.tolil(copy=True)
    caps = tuple(base.circuit.capacitors)
    frm, to, vbase, share, owner = [], [], [], [], []
    kvar = np.zeros(len(caps))
    for c, name in enumerate(caps):
        cap = base.circuit.capacitors[name]
        conductor_nodes = [-1 if n == 0 else nodes[(b, n)] for b, n in cap.conductors()]
        keep = [i for i, node in enumerate(conductor_nodes) if node >= 0]
        prim = cap.yprim()
        for i in keep:  # take the capacitor out of the network
            for j in keep:
                y[conductor_nodes[i], conductor_nodes[j]] -= prim[i, j]
        pairs, v = _capacitor_phases(cap, nodes)
        for a, b in pairs:
            frm.append(a)
            to.append(b)
            vbase.append(v)
            share.append(1.0 / cap.phases)
            owner.append(base.n_loads + c)
        kvar[c] = cap.kvar
    n_cap, n_load, n_pv = len(caps), base.n_loads, len(pv_loads)
    pv_lp = np.flatnonzero(np.isin(base.load_phase_load, pv_loads))  # load phases with PV
    pv_col = np.searchsorted(pv_loads, base.load_phase_load[pv_lp])
    if not np.array_equal(np.asarray(pv_loads)[pv_col], base.load_phase_load[pv_lp]):
        raise ValueError("pv_loads must be sorted load indices")
    pv_owner = pv_col + n_load + n_cap
    exps = np.concatenate(
        [
            base.load_phase_exponents,
            np.full((len(frm), 2), 2.0),  # capacitors: constant impedance
            np.zeros((pv_lp.size, 2)),  # PV: constant power
        ]
    )
    names = (
        base.load_names
        + tuple(f"capacitor.{c}" for c in caps)
        + tuple(f"pv.{base.load_names[k]}" for k in pv_loads)
    )
    feeder = dataclasses.replace(
        base,
        y_network=sp.csc_matrix(y),
        load_names=names,
        p_kw=_frozen(np.concatenate([base.p_kw, np.zeros(n_cap + n_pv)])),
        q_kvar=_frozen(np.concatenate([base.q_kvar, -kvar, np.zeros(n_pv)])),
        load_model=_frozen(np.concatenate([base.load_model, np.full(n_cap, 2), np.ones(n_pv)])),
        load_phase_from=_frozen(
            np.concatenate([base.load_phase_from, frm, base.load_phase_from[pv_lp]])
        ),
        load_phase_to=_frozen(np.concatenate([base.load_phase_to, to, base.load_phase_to[pv_lp]])),
        load_phase_load=_frozen(np.concatenate([base.load_phase_load, owner, pv_owner])),
        load_phase_share=_frozen(
            np.concatenate([base.load_phase_share, share, base.load_phase_share[pv_lp]])
        ),
        load_phase_vbase=_frozen(
            np.concatenate([base.load_phase_vbase, vbase, base.load_phase_vbase[pv_lp]])
        ),
        load_phase_exponents=_frozen(exps),
        cache={},
    )
    return feeder, caps, _frozen(kvar)


@dataclasses.dataclass(frozen=True)
class GridReading:
    """What one batch of flows gives the task and its controllers (leading axis ``B``)."""

    converged: np.ndarray  # [B] bool
    vm_pu: np.ndarray  # [B, n_bus, 3] voltage magnitude (NaN: no such phase) [p.u.]
    violation_pu: np.ndarray  # [B] sum over bus-phases of the distance outside [0.95, 1.05]
    losses_kw: np.ndarray  # [B] line and transformer losses [kW]
    head_kw: np.ndarray  # [B] active power drawn from the source [kW]
    head_kvar: np.ndarray  # [B] reactive power drawn from the source [kvar]
    v_min_phase_pu: np.ndarray  # [B, 3] lowest voltage of each phase [p.u.]
    v_max_phase_pu: np.ndarray  # [B, 3] highest voltage of each phase [p.u.]
    regulated_v: np.ndarray  # [B, n_reg] each RegControl's compensated voltage [V on 120 V]
    capacitor_v_pu: np.ndarray  # [B, n_cap] mean voltage of each capacitor's phases [p.u.]
    pv_v_pu: np.ndarray  # [B, n_pv] mean voltage across each PV's phases [p.u.]


class VoltVarFeeder:
    """The ``volt_var_123`` feeder: loads, capacitors and PV as flow inputs, and readings.

    Args:
        base: The feeder the flow reads (``load_feeder("ieee123")``).
        pv_load_names: Names of the loads with PV (in any order; kept in that order).
    """

    def __init__(self, base: Feeder, pv_load_names: tuple[str, ...]) -> None:
        self.base = base
        pv = np.array([base.load_names.index(n) for n in pv_load_names])
        order = np.argsort(pv)
        self._to_sorted, self._from_sorted = order, np.argsort(order)  # PV columns: sorted
        self.pv_loads = pv
        self.feeder, self.capacitor_names, self.capacitor_kvar = switched_feeder(base, pv[order])
        f = self.feeder
        self.n_loads = base.n_loads
        self.n_pv = pv.size
        self.n_caps = len(self.capacitor_names)
        self.n_reg = base.n_regulators
        nodes = _node_index(base)
        caps = [base.circuit.capacitors[c] for c in self.capacitor_names]
        self._cap_bus = np.array([base.bus_names.index(c.conductors()[0][0]) for c in caps])
        self._cap_phase_mask = np.zeros((self.n_caps, 3))
        for k, c in enumerate(caps):
            for b, n in c.conductors()[: c.phases]:
                if (b, n) in nodes and 1 <= n <= 3:
                    self._cap_phase_mask[k, n - 1] = 1.0
        # PV phases: the last block of load phases; mean |v| / V_base per PV
        first_pv = base.n_loads + self.n_caps
        pv_lp = np.flatnonzero(f.load_phase_load >= first_pv)
        self._pv_phases = pv_lp
        self._pv_mean = sp.csr_matrix(
            (
                f.load_phase_share[pv_lp],
                (np.arange(pv_lp.size), f.load_phase_load[pv_lp] - first_pv),
            ),
            shape=(pv_lp.size, self.n_pv),
        )
        # RegControls: the first unit of each regulator (phase 1 of the ganged reg1a, as
        # OpenDSS's default PTphase) and its settings
        self._reg_unit = np.array(
            [int(np.flatnonzero(base.unit_regulator == r)[0]) for r in range(self.n_reg)]
        )
        rc = [base.regcontrols[r] for r in base.regulator_names]
        self.vreg_v = np.array([c.vreg for c in rc])
        self.band_v = np.array([c.band for c in rc])
        self._pt = np.array([c.ptratio for c in rc])
        self._ldc = np.array([complex(c.r, c.x) / c.ctprim for c in rc])

    def solve(
        self,
        p_load_kw: np.ndarray,
        q_load_kvar: np.ndarray,
        tap_steps: np.ndarray,
        cap_on: np.ndarray,
        pv_kw: np.ndarray,
        pv_kvar: np.ndarray,
    ) -> GridReading:
        """Flows of ``B`` rows and their readings.

        Args:
            p_load_kw: [B, n_loads] active power of each load at its base voltage [kW].
            q_load_kvar: [B, n_loads] reactive power [kvar].
            tap_steps: [B, n_reg] tap positions (0 = neutral, one step = 0.625 %).
            cap_on: [B, n_caps] 1 where a capacitor is in service, else 0.
            pv_kw: [B, n_pv] PV active power injected [kW] (order ``pv_load_names``).
            pv_kvar: [B, n_pv] PV reactive power injected [kvar] (> 0 raises voltage).

        Returns:
            The :class:`GridReading`.
        """
        col = self._to_sorted
        p = np.concatenate([p_load_kw, np.zeros(np.shape(cap_on)), -pv_kw[:, col]], axis=1)
        q = np.concatenate([q_load_kvar, -cap_on * self.capacitor_kvar, -pv_kvar[:, col]], axis=1)
        flow = unbalanced_power_flow(self.feeder, p, q, self.base.taps_from_steps(tap_steps))
        return self.read(flow)

    def read(self, flow: UnbalancedPFResult) -> GridReading:
        """The :class:`GridReading` of a flow of :attr:`feeder`."""
        vm = flow.vm_pu
        outside = np.fmax(V_LOW_PU - vm, 0.0) + np.fmax(vm - V_HIGH_PU, 0.0)  # NaN: no phase
        violation = outside.sum(axis=(1, 2))
        v_min = np.nanmin(vm, axis=1)
        v_max = np.nanmax(vm, axis=1)
        cap_v = np.nan_to_num(vm[:, self._cap_bus]) * self._cap_phase_mask
        cap_v = cap_v.sum(axis=2) / self._cap_phase_mask.sum(axis=1)
        pv_v = (
            np.abs(flow.v_load_phase[:, self._pv_phases])
            / self.feeder.load_phase_vbase[self._pv_phases]
        )
        return GridReading(
            converged=flow.converged,
            vm_pu=vm,
            violation_pu=violation,
            losses_kw=flow.losses_kw,
            head_kw=flow.source_kw,
            head_kvar=flow.source_kvar,
            v_min_phase_pu=v_min,
            v_max_phase_pu=v_max,
            regulated_v=self._regulated_v(flow),
            capacitor_v_pu=cap_v,
            pv_v_pu=np.asarray(pv_v @ self._pv_mean)[:, self._from_sorted],
        )

    def _regulated_v(self, flow: UnbalancedPFResult) -> np.ndarray:
        """Each RegControl's input: ``|V2 / PT - I2 (R + jX) / CT|`` [V on the 120 V base], with
        ``V2`` the regulated winding's voltage and ``I2`` the current it delivers."""
        f = self.base
        units = self._reg_unit
        v_ext = np.concatenate(
            [flow.v_node, np.zeros((flow.v_node.shape[0], 1), dtype=np.complex128)], axis=1
        )
        v2 = v_ext[:, f.unit_nodes[units, 2]] - v_ext[:, f.unit_nodes[units, 3]]
        i2 = -flow.terminal_current[:, f.unit_terminals[units, 2]]
        return np.abs(v2 / self._pt - i2 * self._ldc)
