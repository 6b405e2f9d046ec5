"""OpenDSS loads and shunt capacitors.

A load of ``phases`` phases is ``phases`` branches, each between two nodes: wye, phase to the
load's neutral conductor (ground unless the bus names it); delta, phase to the next conductor
(a one-phase delta load on ``bus.2.3`` sits between nodes 2 and 3). Each branch draws
``S / phases`` at its base voltage ``V_base`` (``kV`` phase-phase over sqrt(3) for a 2-3 phase
wye load, ``kV`` otherwise) and, away from it, ``P (|V| / V_base)^a + j Q (|V| / V_base)^b``
with OpenDSS's load models as exponents: 1 constant power (0, 0), 2 constant impedance (2, 2),
3 constant P with quadratic Q (0, 2), 4 CVR (``CVRwatts``, ``CVRvars``; default 1, 2),
5 constant current magnitude (1, 1). (OpenDSS turns a load into a constant impedance below
``Vminpu`` / above ``Vmaxpu``; this model does not, as if those limits were out of the way.)

A capacitor is a shunt susceptance ``Q / V^2`` per phase (``kvar`` over all phases at ``kV``):
wye to its second bus (ground by default), delta between phases.
"""

from __future__ import annotations

import math

import numpy as np

from powerzoo.physics.unbalanced.dss_reader import DSSFormatError, parse_list
from powerzoo.physics.unbalanced.elements import DSSElement, bus_conductors

__all__ = ["Capacitor", "Load", "LOAD_MODEL_EXPONENTS"]

LOAD_MODEL_EXPONENTS = {1: (0.0, 0.0), 2: (2.0, 2.0), 3: (0.0, 2.0), 5: (1.0, 1.0)}
"""(active, reactive) voltage exponents of OpenDSS load models (4 uses CVRwatts / CVRvars)."""


def _conn(value: str, where: str) -> str:
    conn = value.strip().lower()
    if conn in ("wye", "y", "ln", "star"):
        return "wye"
    if conn in ("delta", "d", "ll"):
        return "delta"
    raise DSSFormatError(f"{where}: unknown connection {value!r}")


class Load(DSSElement):
    """A load: ``kW`` with ``kvar`` or ``PF``, model (exponents), connection, base ``kV``."""

    dss_class = "load"
    aliases = {"cvrwatts": "cvrwatts", "cvrvars": "cvrvars"}
    ignored = frozenset(
        {
            "yearly",
            "daily",
            "duty",
            "growth",
            "class",
            "numcust",
            "status",
            "vminpu",
            "vmaxpu",
            "vlowpu",
            "vminnorm",
            "vminemerg",
            "spectype",
            "xfkva",
            "allocationfactor",
            "relweight",
            "cvrcurve",
            "normamps",
            "emergamps",
            "faultrate",
            "pctmean",
            "pctstddev",
            "basefreq",
            "enabled",
        }
    )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.phases = 3
        self.bus1 = ""
        self.kv = 12.47
        self.kw, self.kvar, self.pf = 10.0, 5.0, 0.88
        self.spec = "kw_pf"
        self.model = 1
        self.conn = "wye"
        self.cvrwatts, self.cvrvars = 1.0, 2.0

    def set_phases(self, value: str, where: str) -> None:
        self.phases = int(self._number(value, where))

    def set_bus1(self, value: str, where: str) -> None:
        self.bus1 = value

    def set_kv(self, value: str, where: str) -> None:
        self.kv = self._number(value, where)

    def set_kw(self, value: str, where: str) -> None:
        self.kw = self._number(value, where)
        self.spec = "kw_pf"

    def set_kvar(self, value: str, where: str) -> None:
        self.kvar = self._number(value, where)
        self.spec = "kw_kvar"

    def set_pf(self, value: str, where: str) -> None:
        self.pf = self._number(value, where)
        self.spec = "kw_pf"

    def set_model(self, value: str, where: str) -> None:
        model = int(self._number(value, where))
        if model not in (1, 2, 3, 4, 5):
            raise DSSFormatError(f"{where}: load {self.name}: load model {model} not supported")
        self.model = model

    def set_conn(self, value: str, where: str) -> None:
        self.conn = _conn(value, where)

    def set_cvrwatts(self, value: str, where: str) -> None:
        self.cvrwatts = self._number(value, where)

    def set_cvrvars(self, value: str, where: str) -> None:
        self.cvrvars = self._number(value, where)

    def set_cvrfactor(self, value: str, where: str) -> None:
        self.cvrwatts, self.cvrvars = (self._number(v, where) for v in parse_list(value)[:2])

    def end_edit(self) -> None:
        if self.spec == "kw_kvar":  # as OpenDSS: the power factor follows; a later kW keeps it
            kva = math.hypot(self.kw, self.kvar)
            if kva > 0:
                self.pf = self.kw / kva * (-1.0 if self.kw * self.kvar < 0 else 1.0)

    @property
    def q_kvar(self) -> float:
        """Reactive power at nominal voltage [kvar] (from ``kvar`` or ``PF``)."""
        if self.spec == "kw_kvar":
            return self.kvar
        q = self.kw * math.sqrt(1.0 / self.pf**2 - 1.0)
        return -q if self.pf < 0 else q

    @property
    def exponents(self) -> tuple[float, float]:
        """Voltage exponents (active, reactive) of the load model."""
        if self.model == 4:
            return self.cvrwatts, self.cvrvars
        return LOAD_MODEL_EXPONENTS[self.model]

    @property
    def vbase(self) -> float:
        """Base voltage of each branch [V]."""
        if self.conn == "wye" and self.phases in (2, 3):
            return self.kv * 1000.0 / math.sqrt(3.0)
        return self.kv * 1000.0

    def branches(self) -> list[tuple[tuple[str, int], tuple[str, int]]]:
        """The two ``(bus, node)`` ends of each of the ``phases`` branches."""
        n_conds = self.phases + 1 if self.conn == "wye" or self.phases < 3 else self.phases
        bus, nodes = bus_conductors(self.bus1, self.phases, n_conds)
        out = []
        for i in range(self.phases):
            j = n_conds - 1 if self.conn == "wye" else (i + 1) % n_conds
            out.append(((bus, nodes[i]), (bus, nodes[j])))
        return out


class Capacitor(DSSElement):
    """A shunt capacitor bank (one step, always in service)."""

    dss_class = "capacitor"
    ignored = frozenset({"normamps", "emergamps", "faultrate", "pctperm", "repair", "basefreq"})

    def __init__(self, name: str, frequency: float) -> None:
        super().__init__(name)
        self.phases = 3
        self.bus1, self.bus2 = "", ""
        self.kvar, self.kv = 1200.0, 12.47
        self.conn = "wye"
        self.frequency = frequency

    def set_phases(self, value: str, where: str) -> None:
        self.phases = int(self._number(value, where))

    def set_bus1(self, value: str, where: str) -> None:
        self.bus1 = value

    def set_bus2(self, value: str, where: str) -> None:
        self.bus2 = value

    def set_kvar(self, value: str, where: str) -> None:
        steps = parse_list(value)
        if len(steps) != 1:
            raise DSSFormatError(f"{where}: capacitor {self.name}: only one step supported")
        self.kvar = self._number(steps[0], where)

    def set_kv(self, value: str, where: str) -> None:
        self.kv = self._number(value, where)

    def set_conn(self, value: str, where: str) -> None:
        self.conn = _conn(value, where)

    def conductors(self) -> list[tuple[str, int]]:
        """``(bus, node)`` of terminal 1's conductors, then terminal 2's (wye only)."""
        bus, nodes = bus_conductors(self.bus1, self.phases, self.phases)
        out = [(bus, n) for n in nodes]
        if self.conn == "wye":
            if self.bus2:
                bus2, nodes2 = bus_conductors(self.bus2, self.phases, self.phases)
            else:
                bus2, nodes2 = bus, [0] * self.phases
            out += [(bus2, n) for n in nodes2]
        return out

    def yprim(self) -> np.ndarray:
        """Primitive admittance [S] over :meth:`conductors`."""
        n = self.phases
        if self.conn == "delta":
            phase_kv = self.kv
        else:
            phase_kv = self.kv / math.sqrt(3.0) if n in (2, 3) else self.kv
        b = (self.kvar / n) / (phase_kv**2 * 1000.0)
        y = np.zeros((len(self.conductors()),) * 2, dtype=np.complex128)
        if self.conn == "delta":
            for i in range(n):
                j = (i + 1) % n
                y[[i, j], [i, j]] += 1j * b
                y[i, j] -= 1j * b
                y[j, i] -= 1j * b
        else:
            for i in range(n):
                y[i, i] = y[i + n, i + n] = 1j * b
                y[i, i + n] = y[i + n, i] = -1j * b
        return y
