"""The European LV feeder as the task sees it: customer voltages, unbalance and branch loading
from one batched three-phase flow, and the ratings they are judged against.

* **Flow**: :func:`powerzoo.physics.unbalanced.unbalanced_power_flow` on
  ``load_feeder("european_lv")`` (11 kV source at 1.05 p.u., 800 kVA 11/0.416 kV Dyn
  transformer, 905 cable sections, 55 single-phase constant-power customers), every home's net
  demand (household load + charging - PV, reactive: load - inverter) as its load.
* **Voltage** (EN 50160: supply voltage within +-10 % of nominal): each customer's own phase
  voltage at its bus; ``voltage_violation`` sums the excursion outside [0.9, 1.1] p.u. over the
  customers.
* **Unbalance** (EN 50160: negative-sequence voltage within 2 % of the positive sequence): the
  voltage unbalance factor ``VUF = |V2| / |V1|`` of the three phase-to-neutral voltages at each
  customer's bus, ``V1 = (Va + a Vb + a^2 Vc) / 3``, ``V2 = (Va + a^2 Vb + a Vc) / 3``,
  ``a = exp(j 2 pi / 3)``; ``voltage_unbalance`` sums ``max(VUF - 2 %, 0)`` over the customers'
  buses (percentage points).
* **Loading**: the feeder files carry no cable ratings (no ``normamps``), so each cable's
  ampacity comes from published ratings of buried 0.6/1 kV four-core aluminium cables (NAYY
  4x50, 4x120, 4x150: 142, 242, 270 A, pandapower's standard types from manufacturer data)
  carried over by conductor resistance, ``I = 270 A x (0.208 / R1)^0.6`` with ``R1`` the line
  code's positive-sequence resistance [ohm/km] (within 4 % of the 4x50 and 4x120 ratings): 171 A
  for the 70 mm2 trunk, 309 A for 185 mm2, 97 A for the 16 mm2 services. The transformer's rating
  is its 800 kVA, 42 A on the 11 kV side. Each branch phase's apparent power is
  ``|S| = |V| x |I|`` at the branch's first terminal (phase-to-ground voltage, the flow's branch
  current), its rating ``S_rated = I_rated x V_nominal`` with the bus's nominal phase voltage
  (41 kVA for the 70 mm2 trunk at 240 V; 800 / 3 kVA per phase for the transformer);
  ``thermal_overload`` is ``sum max(|S| - S_rated, 0) x dt`` over the phases of every cable and
  of the transformer, in MVAh.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from powerzoo.physics.unbalanced import load_feeder, unbalanced_power_flow
from powerzoo.physics.unbalanced.feeder import Feeder
from powerzoo.physics.unbalanced.result import UnbalancedPFResult

__all__ = [
    "FEEDER",
    "V_LOW_PU",
    "V_HIGH_PU",
    "VUF_LIMIT_PCT",
    "LvNetwork",
    "FlowCosts",
    "cable_rating_a",
    "lv_network",
]

FEEDER = "european_lv"
V_LOW_PU, V_HIGH_PU = 0.9, 1.1
VUF_LIMIT_PCT = 2.0
REF_RATING_A, REF_R1_OHM_PER_KM, RATING_EXPONENT = 270.0, 0.208, 0.6
NONCONVERGED_PU = 0.1  # voltage_violation charged per customer on a row whose flow failed
_A = np.exp(2j * math.pi / 3.0)


def cable_rating_a(r1_ohm_per_km: float) -> float:
    """Ampacity [A] of a buried LV cable of positive-sequence resistance ``r1_ohm_per_km``
    (module docstring)."""
    return REF_RATING_A * (REF_R1_OHM_PER_KM / r1_ohm_per_km) ** RATING_EXPONENT


@dataclasses.dataclass(frozen=True)
class FlowCosts:
    """What a step takes from one flow; arrays ``[B, ...]``."""

    v_pu: np.ndarray  # [B, n_homes] voltage of each customer's own phase
    vuf_pct: np.ndarray  # [B, n_homes] unbalance factor at each customer's bus
    loading: np.ndarray  # [B] largest current / rating over branches and phases
    costs: np.ndarray  # [B, 3] voltage_violation, voltage_unbalance (per step), thermal_overload
    converged: np.ndarray  # [B]
    head_kw: np.ndarray  # [B] active power through the transformer


@dataclasses.dataclass(frozen=True, eq=False)
class LvNetwork:
    """The feeder, its customers' nodes and its branch ratings."""

    feeder: Feeder
    home_node: np.ndarray  # [n_homes] node of each customer's phase
    home_phase: np.ndarray  # [n_homes] 0, 1, 2
    bus_nodes: np.ndarray  # [n_homes, 3] nodes of the three phases of each customer's bus
    rating_a: np.ndarray  # [n_branch] per-phase current rating
    rating_kva: np.ndarray  # [n_branch] per-phase apparent power rating (rating_a x V_nominal)
    side1_node: np.ndarray  # [n_branch, 3] node of each phase at the first terminal
    branch_codes: tuple[str, ...]  # line code of each branch ("transformer" for TR1)

    @property
    def n_homes(self) -> int:
        """Number of customers."""
        return int(self.home_node.size)

    def solve(self, p_kw: np.ndarray, q_kvar: np.ndarray) -> UnbalancedPFResult:
        """The exact flow of net home demands ``p_kw``, ``q_kvar`` [B, n_homes]."""
        return unbalanced_power_flow(self.feeder, p_kw, q_kvar)

    def sequence_voltages(self, v_node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(V1, V2)``, each [..., n_homes] complex [V]: positive- and negative-sequence
        voltages at each customer's bus from node voltages ``v_node`` [..., n_node]."""
        v = v_node[..., self.bus_nodes]
        v1 = (v[..., 0] + _A * v[..., 1] + _A * _A * v[..., 2]) / 3.0
        v2 = (v[..., 0] + _A * _A * v[..., 1] + _A * v[..., 2]) / 3.0
        return v1, v2

    def vuf_pct(self, v_node: np.ndarray) -> np.ndarray:
        """[B, n_homes] voltage unbalance factor [%] at each customer's bus from node voltages
        ``v_node`` [B, n_node]."""
        v1, v2 = self.sequence_voltages(v_node)
        return 100.0 * np.abs(v2) / np.abs(v1)

    def home_v_pu(self, result: UnbalancedPFResult) -> np.ndarray:
        """[B, n_homes] voltage [p.u.] of each customer's own phase."""
        base = self.feeder.bus_kv_base[self.feeder.node_bus[self.home_node]] * 1000.0
        return np.abs(result.v_node[:, self.home_node]) / base

    def phase_kva(self, result: UnbalancedPFResult) -> np.ndarray:
        """[B, n_branch, 3] apparent power ``|V| x |I|`` [kVA] of each branch phase at its first
        terminal (phase-to-ground voltage, the flow's branch current)."""
        return np.abs(result.v_node[:, self.side1_node]) * result.branch_current_a / 1000.0

    def overload_mva(self, result: UnbalancedPFResult) -> np.ndarray:
        """[B] apparent power above the ratings [MVA], ``sum max(|S| - S_rated, 0)`` over the
        phases of every cable and of the transformer."""
        above = np.maximum(self.phase_kva(result) - self.rating_kva[None, :, None], 0.0)
        return np.sum(above, axis=(1, 2)) / 1000.0

    def costs(self, result: UnbalancedPFResult, dt_h: float) -> FlowCosts:
        """Customer voltages, unbalance, loading and the costs of a flow held for a step of
        ``dt_h`` hours (``thermal_overload`` in MVAh)."""
        v = self.home_v_pu(result)
        vuf = self.vuf_pct(result.v_node)
        with np.errstate(invalid="ignore"):
            loading = np.nanmax(result.branch_current_a / self.rating_a[None, :, None], axis=(1, 2))
            overload = self.overload_mva(result)
        ok = (
            result.converged
            & np.isfinite(loading)
            & np.isfinite(overload)
            & np.all(np.isfinite(v), axis=1)
        )
        rates = np.empty((v.shape[0], 3))
        rates[:, 0] = np.sum(np.maximum(V_LOW_PU - v, 0.0) + np.maximum(v - V_HIGH_PU, 0.0), axis=1)
        rates[:, 1] = np.sum(np.maximum(vuf - VUF_LIMIT_PCT, 0.0), axis=1)
        rates[:, 2] = overload * dt_h
        if not ok.all():
            bad = ~ok
            rates[bad] = np.nan_to_num(rates[bad], nan=0.0, posinf=0.0)
            rates[bad, 0] += NONCONVERGED_PU * self.n_homes
            v = np.where(bad[:, None], np.nan_to_num(v, nan=1.0), v)
            vuf = np.where(bad[:, None], np.nan_to_num(vuf, nan=0.0), vuf)
            loading = np.where(bad, np.nan_to_num(loading, nan=0.0), loading)
        head = result.source_kw
        return FlowCosts(v, vuf, loading, rates, ok, head)


@functools.lru_cache(maxsize=1)
def lv_network() -> LvNetwork:
    """The task's view of the European LV feeder (built once per process)."""
    feeder = load_feeder(FEEDER)
    first = feeder.load_phase_from[np.argsort(feeder.load_phase_load, kind="stable")]
    home_bus = feeder.node_bus[first]
    node_of = {
        (int(b), int(p)): k
        for k, (b, p) in enumerate(zip(feeder.node_bus, feeder.node_phase, strict=True))
    }
    bus_nodes = np.array([[node_of[(int(b), ph)] for ph in (1, 2, 3)] for b in home_bus])
    circuit = feeder.circuit
    ratings, codes = [], []
    for name in feeder.branch_names:
        kind, element = name.split(".", 1)
        if kind == "line":
            code = circuit.lines[element].linecode
            ratings.append(cable_rating_a(circuit.linecodes[code].r1))
            codes.append(code)
        else:
            winding = circuit.transformers[element].windings[0]
            ratings.append(winding["kva"] / (math.sqrt(3.0) * winding["kv"]))
            codes.append("transformer")
    side1 = _side1_nodes(feeder)
    rating_a = np.asarray(ratings)
    return LvNetwork(
        feeder=feeder,
        home_node=first,
        home_phase=feeder.node_phase[first] - 1,
        bus_nodes=bus_nodes,
        rating_a=rating_a,
        rating_kva=rating_a * feeder.bus_kv_base[feeder.node_bus[side1[:, 0]]],
        side1_node=side1,
        branch_codes=tuple(codes),
    )


def _side1_nodes(feeder: Feeder) -> np.ndarray:
    """[n_branch, 3] node of phases 1, 2, 3 at each branch's first terminal (every branch of the
    feeder has all three)."""
    out = np.full((len(feeder.branch_names), 3), -1, dtype=np.int64)
    first = (feeder.terminal_side == 1) & (feeder.terminal_node >= 0)
    node = feeder.terminal_node[first]
    phase = feeder.node_phase[node]
    keep = (phase >= 1) & (phase <= 3)
    out[feeder.terminal_branch[first][keep], phase[keep] - 1] = node[keep]
    if np.any(out < 0):
        raise ValueError(f"{FEEDER}: a branch lacks a phase at its first terminal")
    return out
