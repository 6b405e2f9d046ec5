"""Three-phase feeders read from OpenDSS files: nodes, network admittance, loads, regulators.

:func:`load_feeder` reads one of the vendored test feeders (``powerzoo/data/feeders/``, each with
its source and licence note) and returns a :class:`Feeder`, the data the batched power flow
(:func:`~powerzoo.physics.unbalanced.flow.unbalanced_power_flow`) needs:

* the **nodes**: one per (bus, phase) in use, ground excluded; buses and nodes are numbered in
  the order OpenDSS meets them (so ``bus_names`` equals OpenDSS's ``AllBusNames``);
* the **network admittance** ``Y`` [S] of every line, switch, transformer, capacitor and the
  source's Thevenin impedance (its EMF enters as the Norton current ``i_source``), with the
  regulators at their tap in the files;
* the **load branches** (one per phase of each load, see
  :mod:`~powerzoo.physics.unbalanced.loads`);
* the **regulators**: transformers named by a ``RegControl``, whose taps are flow inputs;
* the **voltage bases**: as OpenDSS's ``CalcVoltageBases``, from a no-load flow, each bus gets
  the nearest of the file's ``Set VoltageBases``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from powerzoo.physics.unbalanced.circuit import Circuit, build_circuit
from powerzoo.physics.unbalanced.dss_reader import DSSFormatError

__all__ = ["FEEDER_MASTER_FILES", "FEEDERS_DIR", "Feeder", "feeder_from_master", "load_feeder"]

FEEDERS_DIR = Path(__file__).resolve().parents[2] / "data" / "feeders"
"""Folder of the vendored OpenDSS feeders (one subfolder per feeder)."""

FEEDER_MASTER_FILES = {
    "ieee13": "ieee13/IEEE13Nodeckt.dss",
    "ieee34": "ieee34/ieee34Mod1.dss",
    "ieee37": "ieee37/ieee37.dss",
    "ieee123": "ieee123/IEEE123Master.dss",
    "european_lv": "european_lv/Master.dss",
}
"""Master file of each feeder :func:`load_feeder` knows, relative to :data:`FEEDERS_DIR`."""


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class Feeder:
    """A three-phase feeder ready for the batched power flow (arrays read-only).

    Units: kW, kvar, V, A, S; ``bus_kv_base`` is phase-to-neutral kV. Node arrays have length
    ``n_node``; ``-1`` in a node-index array stands for ground.
    """

    name: str
    master_file: Path
    frequency_hz: float
    bus_names: tuple[str, ...]
    bus_kv_base: np.ndarray  # [n_bus] phase-neutral base voltage [kV]
    node_bus: np.ndarray  # [n_node] bus index of each node
    node_phase: np.ndarray  # [n_node] OpenDSS node number (1, 2, 3, ...)
    y_network: sp.csc_matrix  # [n_node, n_node] admittance [S], regulators at tap_file
    i_source: np.ndarray  # [n_node] complex Norton current of the source [A]
    source_nodes: np.ndarray  # [n_src] nodes of the source's phases
    y_source: np.ndarray  # [n_src, n_src] admittance of the source's impedance [S]
    load_names: tuple[str, ...]
    p_kw: np.ndarray  # [n_loads] published active power (all phases) [kW]
    q_kvar: np.ndarray  # [n_loads] published reactive power [kvar]
    load_model: np.ndarray  # [n_loads] OpenDSS load model
    load_phase_from: np.ndarray  # [n_lp] node at the phase end of each load phase
    load_phase_to: np.ndarray  # [n_lp] node at its other end (neutral or next phase; -1 ground)
    load_phase_load: np.ndarray  # [n_lp] load of each load phase
    load_phase_share: np.ndarray  # [n_lp] fraction of the load's power on this phase
    load_phase_vbase: np.ndarray  # [n_lp] base voltage of the load phase [V]
    load_phase_exponents: np.ndarray  # [n_lp, 2] voltage exponents (P, Q)
    regulator_names: tuple[str, ...]  # regulating transformers (taps are flow inputs)
    tap_file: np.ndarray  # [n_reg] tap of the regulated winding in the files [p.u.]
    tap_min: np.ndarray  # [n_reg]
    tap_max: np.ndarray  # [n_reg]
    tap_step: np.ndarray  # [n_reg] size of one tap step [p.u.]
    unit_regulator: np.ndarray  # [n_unit] regulator of each single-phase unit
    unit_nodes: np.ndarray  # [n_unit, 4] nodes (w1+, w1-, w2+, w2-)
    unit_y: np.ndarray  # [n_unit] short-circuit admittance on a 1 V base
    unit_scale_fixed: np.ndarray  # [n_unit] 1 / (V_base * tap) of the untapped winding
    unit_vbase_tapped: np.ndarray  # [n_unit] V_base of the tapped winding [V]
    unit_tapped_second: np.ndarray  # [n_unit] bool: the tap is on winding 2
    branch_names: tuple[str, ...]  # lines, switches, transformers ("line.l1", ...)
    terminal_y: sp.csr_matrix  # [n_term, n_node] terminal current per node voltage (fixed)
    terminal_branch: np.ndarray  # [n_term] branch of each terminal conductor
    terminal_node: np.ndarray  # [n_term] node (-1 ground)
    terminal_side: np.ndarray  # [n_term] 1 or 2
    unit_terminals: np.ndarray  # [n_unit, 4] terminal rows of each regulator unit
    regcontrols: dict = field(repr=False)  # regulator name -> RegControl settings
    circuit: Circuit = field(repr=False)
    cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_bus(self) -> int:
        """Number of buses."""
        return len(self.bus_names)

    @property
    def n_node(self) -> int:
        """Number of (bus, phase) nodes."""
        return len(self.node_bus)

    @property
    def n_loads(self) -> int:
        """Number of loads."""
        return len(self.load_names)

    @property
    def n_regulators(self) -> int:
        """Number of regulating transformers."""
        return len(self.regulator_names)

    def unit_winding_scales(self, tap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(s1, s2)``, each [B, n_unit]: ``1 / (V_base * tap)`` of winding 1 and 2 of every
        regulator unit for regulator taps ``tap`` [B, n_regulators]."""
        s_tap = 1.0 / (self.unit_vbase_tapped * tap[:, self.unit_regulator])
        s_fix = np.broadcast_to(self.unit_scale_fixed, s_tap.shape)
        second = self.unit_tapped_second
        return np.where(second, s_fix, s_tap), np.where(second, s_tap, s_fix)

    def taps_from_steps(self, steps: np.ndarray) -> np.ndarray:
        """Per-unit taps for integer tap positions (0 = 1.0 p.u., +16 = 1.1 p.u. by default)."""
        return 1.0 + np.asarray(steps, dtype=np.float64) * self.tap_step


class _Nodes:
    """Numbering of buses and (bus, node) pairs in order of first appearance."""

    def __init__(self) -> None:
        self.buses: dict[str, int] = {}
        self.index: dict[tuple[str, int], int] = {}
        self.bus_of: list[int] = []
        self.phase_of: list[int] = []

    def add(self, bus: str, node: int) -> int:
        if bus not in self.buses:
            self.buses[bus] = len(self.buses)
        if node == 0:
            return -1
        key = (bus, node)
        if key not in self.index:
            self.index[key] = len(self.bus_of)
            self.bus_of.append(self.buses[bus])
            self.phase_of.append(node)
        return self.index[key]


def _stamp(rows: list, cols: list, vals: list, nodes: list[int], y: np.ndarray) -> None:
    idx = np.asarray(nodes)
    keep = np.flatnonzero(idx >= 0)
    r, c = np.meshgrid(idx[keep], idx[keep], indexing="ij")
    rows.append(r.ravel())
    cols.append(c.ravel())
    vals.append(y[np.ix_(keep, keep)].ravel())


def _voltage_bases(circuit: Circuit, nodes: _Nodes, y: sp.csc_matrix, i_src: np.ndarray):
    if not circuit.voltage_bases_kv:
        raise DSSFormatError(f"circuit {circuit.name}: no 'Set VoltageBases' in the files")
    v = splu(y).solve(i_src)
    bases = np.asarray(circuit.voltage_bases_kv)
    first_node = {}
    for k, b in enumerate(nodes.bus_of):
        first_node.setdefault(b, k)
    out = np.zeros(len(nodes.buses))
    for b in range(len(nodes.buses)):
        kv_ll = abs(v[first_node[b]]) * 0.001732 if b in first_node else 0.0
        out[b] = bases[np.argmin(np.abs(1.0 - kv_ll / bases))] / math.sqrt(3.0)
    return out


def feeder_from_master(master: str | Path, name: str | None = None) -> Feeder:
    """A :class:`Feeder` from any OpenDSS master file in the supported subset."""
    master = Path(master).resolve()
    circuit = build_circuit(master)
    nodes = _Nodes()
    rows: list = []
    cols: list = []
    vals: list = []
    source = circuit.source
    src_nodes = [nodes.add(b, n) for b, n in source.conductors()]
    y_src = np.linalg.inv(source.impedance())
    _stamp(rows, cols, vals, src_nodes, y_src)
    reg_of = {rc.transformer: rc for rc in circuit.regcontrols.values()}
    elements, load_phases, units = [], [], []
    for el in circuit.order:
        cls = el.dss_class
        if cls == "vsource":
            continue
        if cls == "load":
            for (b1, n1), (b2, n2) in el.branches():
                load_phases.append((nodes.add(b1, n1), nodes.add(b2, n2), el))
            continue
        conductor_nodes = [nodes.add(b, n) for b, n in el.conductors()]
        if cls == "line" and not el.enabled:
            continue
        _stamp(rows, cols, vals, conductor_nodes, el.yprim())
        if cls in ("line", "transformer"):
            elements.append((el, conductor_nodes))
    n = len(nodes.bus_of)
    y = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
    )
    i_src = np.zeros(n, dtype=np.complex128)
    keep = [k for k, node in enumerate(src_nodes) if node >= 0]
    i_src[np.asarray(src_nodes)[keep]] = (y_src @ source.emf())[keep]

    # regulators (taps are inputs) and terminal-current rows of lines and transformers
    reg_names = tuple(dict.fromkeys(rc.transformer for rc in circuit.regcontrols.values()))
    for r in reg_names:
        if r not in circuit.transformers:
            raise DSSFormatError(f"RegControl names unknown transformer {r!r}")
    t_rows, t_cols, t_vals, t_el, t_node, t_side = [], [], [], [], [], []
    unit_terms = []
    offset = 0
    for e, (el, cn) in enumerate(elements):
        is_reg = el.dss_class == "transformer" and el.name in reg_of
        yp = el.yprim(series=not is_reg) if el.dss_class == "transformer" else el.yprim()
        m = len(cn)
        half = m // 2
        cn_arr = np.asarray(cn)
        ok = cn_arr >= 0
        r, c = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
        mask = ok[c.ravel()]
        t_rows.append(offset + r.ravel()[mask])
        t_cols.append(cn_arr[c.ravel()[mask]])
        t_vals.append(yp.ravel()[mask])
        t_el += [e] * m
        t_node += cn
        t_side += [1] * half + [2] * (m - half)
        if is_reg:
            tap_w = reg_of[el.name].winding - 1
            for unit in el.units(tap_w):
                fixed = 1 - tap_w
                units.append(
                    (
                        reg_names.index(el.name),
                        [cn[t] for t in unit.terminals],
                        unit.y,
                        1.0 / (unit.vbase[fixed] * el.windings[fixed]["tap"]),
                        unit.vbase[tap_w],
                        tap_w == 1,
                    )
                )
                unit_terms.append([offset + t for t in unit.terminals])
        offset += m
    terminal_y = sp.csr_matrix(
        (np.concatenate(t_vals), (np.concatenate(t_rows), np.concatenate(t_cols))),
        shape=(offset, n),
    )
    loads = list(circuit.loads.values())
    load_pos = {ld.name: k for k, ld in enumerate(loads)}
    trans = [circuit.transformers[r] for r in reg_names]
    tap_w = [reg_of[r].winding - 1 for r in reg_names]
    windings = [t.windings[w] for t, w in zip(trans, tap_w, strict=True)]
    u = list(zip(*units, strict=True)) if units else [[] for _ in range(6)]
    return Feeder(
        name=name or circuit.name,
        master_file=master,
        frequency_hz=circuit.frequency,
        bus_names=tuple(nodes.buses),
        bus_kv_base=_frozen(_voltage_bases(circuit, nodes, y, i_src)),
        node_bus=_frozen(np.asarray(nodes.bus_of, dtype=np.int64)),
        node_phase=_frozen(np.asarray(nodes.phase_of, dtype=np.int64)),
        y_network=y,
        i_source=_frozen(i_src),
        source_nodes=_frozen(np.asarray(src_nodes, dtype=np.int64)),
        y_source=_frozen(y_src),
        load_names=tuple(ld.name for ld in loads),
        p_kw=_frozen(np.array([ld.kw for ld in loads], dtype=np.float64)),
        q_kvar=_frozen(np.array([ld.q_kvar for ld in loads], dtype=np.float64)),
        load_model=_frozen(np.array([ld.model for ld in loads], dtype=np.int64)),
        load_phase_from=_frozen(np.array([b[0] for b in load_phases], dtype=np.int64)),
        load_phase_to=_frozen(np.array([b[1] for b in load_phases], dtype=np.int64)),
        load_phase_load=_frozen(
            np.array([load_pos[b[2].name] for b in load_phases], dtype=np.int64)
        ),
        load_phase_share=_frozen(np.array([1.0 / b[2].phases for b in load_phases])),
        load_phase_vbase=_frozen(np.array([b[2].vbase for b in load_phases])),
        load_phase_exponents=_frozen(
            np.array([b[2].exponents for b in load_phases]).reshape(-1, 2)
        ),
        regulator_names=reg_names,
        tap_file=_frozen(np.array([w["tap"] for w in windings], dtype=np.float64)),
        tap_min=_frozen(np.array([w["mintap"] for w in windings], dtype=np.float64)),
        tap_max=_frozen(np.array([w["maxtap"] for w in windings], dtype=np.float64)),
        tap_step=_frozen(np.array([(w["maxtap"] - w["mintap"]) / w["numtaps"] for w in windings])),
        unit_regulator=_frozen(np.array(u[0], dtype=np.int64)),
        unit_nodes=_frozen(np.array(u[1], dtype=np.int64).reshape(-1, 4)),
        unit_y=_frozen(np.array(u[2], dtype=np.complex128)),
        unit_scale_fixed=_frozen(np.array(u[3], dtype=np.float64)),
        unit_vbase_tapped=_frozen(np.array(u[4], dtype=np.float64)),
        unit_tapped_second=_frozen(np.array(u[5], dtype=bool)),
        branch_names=tuple(f"{el.dss_class}.{el.name}" for el, _ in elements),
        terminal_y=terminal_y,
        terminal_branch=_frozen(np.array(t_el, dtype=np.int64)),
        terminal_node=_frozen(np.array(t_node, dtype=np.int64)),
        terminal_side=_frozen(np.array(t_side, dtype=np.int64)),
        unit_terminals=_frozen(np.array(unit_terms, dtype=np.int64).reshape(-1, 4)),
        regcontrols={reg_of[r].transformer: reg_of[r] for r in reg_names},
        circuit=circuit,
    )


@functools.lru_cache(maxsize=8)
def load_feeder(name: str) -> Feeder:
    """One of the vendored feeders: ``"ieee13"``, ``"ieee34"``, ``"ieee37"``, ``"ieee123"``,
    ``"european_lv"`` (read once per process, then shared: treat it as read-only)."""
    if name not in FEEDER_MASTER_FILES:
        raise ValueError(f"unknown feeder {name!r}; known: {sorted(FEEDER_MASTER_FILES)}")
    return feeder_from_master(FEEDERS_DIR / FEEDER_MASTER_FILES[name], name=name)
