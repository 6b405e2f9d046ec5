"""OpenDSS circuit elements as data: sources, line codes and lines (with their primitive
admittance matrices).

Each element class starts from OpenDSS's defaults and takes properties one at a time, in file
order, with OpenDSS's side effects (a line code's sequence impedances rebuild its matrices, a
``Switch=y`` line becomes a 1 ohm / 1 m line, ...): the order matters exactly as in OpenDSS. An
element's ``yprim()`` is its primitive admittance matrix [S] over its conductors (terminal 1
first, then terminal 2), ``conductors()`` the ``(bus, node)`` of each (node 0 = ground). The
formulas are OpenDSS's published element models (OpenDSS reference guide, "Line", "Vsource").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from powerzoo.physics.unbalanced.dss_reader import DSSFormatError, parse_matrix, parse_number

__all__ = [
    "DSSElement",
    "Line",
    "LineCode",
    "Vsource",
    "bus_conductors",
    "length_units_factor",
    "parse_bool",
]

_METRES = {
    "mi": 1609.344,
    "kft": 304.8,
    "km": 1000.0,
    "m": 1.0,
    "ft": 0.3048,
    "in": 0.0254,
    "cm": 0.01,
    "mm": 0.001,
    "meter": 1.0,
}


def length_units_factor(from_units: str, to_units: str) -> float:
    """Length of one ``from_units`` in ``to_units`` (1.0 if either is ``none``)."""
    if from_units == "none" or to_units == "none":
        return 1.0
    return _METRES[from_units] / _METRES[to_units]


def _units(value: str, where: str) -> str:
    unit = value.strip().lower()
    if unit != "none" and unit not in _METRES:
        raise DSSFormatError(f"{where}: unknown length unit {value!r}")
    return unit


def parse_bool(value: str) -> bool:
    """OpenDSS yes/no (``y``, ``yes``, ``true``, ``t``, ``1`` are true)."""
    return value.strip().lower()[:1] in ("y", "t", "1")


def bus_conductors(spec: str, n_phases: int, n_conds: int) -> tuple[str, list[int]]:
    """``(bus, nodes)`` of a bus specification such as ``650.1.2.3``: the phases default to
    nodes 1, 2, 3 ..., the other conductors to ground (node 0); given nodes override them in
    order."""
    name, *nodes = spec.strip().lower().split(".")
    conductors = [i + 1 if i < n_phases else 0 for i in range(n_conds)]
    for i, node in enumerate(nodes[:n_conds]):
        conductors[i] = int(node)
    return name, conductors


class DSSElement:
    """An OpenDSS object: ``apply(key, value, where)`` sets one property (``set_<key>``)."""

    dss_class = ""
    aliases: dict[str, str] = {}
    ignored: frozenset[str] = frozenset()

    def __init__(self, name: str) -> None:
        self.name = name.lower()

    def apply(self, key: str, value: str, where: str) -> None:
        """Set property ``key`` (lower case, OpenDSS name or alias) to ``value`` (text)."""
        key = key.replace("%", "pct_")
        key = self.aliases.get(key, key)
        if key in self.ignored:
            return
        setter = getattr(self, f"set_{key}", None)
        if not key or setter is None:
            raise DSSFormatError(
                f"{where}: unknown property {key or '(positional) ' + value!r} "
                f"of {self.dss_class}.{self.name}"
            )
        setter(value, where)

    def end_edit(self) -> None:
        """Called after the last property of a ``New`` / ``Edit`` command."""

    def make_like(self, other: DSSElement) -> None:
        """Copy ``other``'s properties (``like=``), keeping this element's name and buses."""
        keep = {"name": self.name}
        keep.update({k: v for k, v in vars(self).items() if k.startswith("bus")})
        self.__dict__.update({k: _copy(v) for k, v in vars(other).items()})
        self.__dict__.update(keep)

    def _number(self, value: str, where: str) -> float:
        return parse_number(value, where)


def _copy(value: object) -> object:
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


def _sequence_matrices(
    n: int, r1: float, x1: float, r0: float, x0: float, c1: float, c0: float, f: float
) -> tuple[np.ndarray, np.ndarray]:
    """Series impedance and shunt admittance matrices [per unit length] from sequence values
    (capacitances in F per unit length)."""
    zs = (2.0 * complex(r1, x1) + complex(r0, x0)) / 3.0
    zm = (complex(r0, x0) - complex(r1, x1)) / 3.0
    w = 2.0 * math.pi * f
    ys = (2.0 * 1j * w * c1 + 1j * w * c0) / 3.0
    ym = (1j * w * c0 - 1j * w * c1) / 3.0
    z = np.full((n, n), zm, dtype=np.complex128)
    yc = np.full((n, n), ym, dtype=np.complex128)
    np.fill_diagonal(z, zs)
    np.fill_diagonal(yc, ys)
    return z, yc


class _SequenceProperties:
    """The OpenDSS sequence-impedance properties (``r1 x1 r0 x0`` in ohms per unit length,
    ``c1 c0`` in nF) that a line code and a line both take; each class says in ``_set_sequence``
    what setting one implies."""

    _number: Any
    _set_sequence: Any

    def set_r1(self, value: str, where: str) -> None:
        self._set_sequence("r1", self._number(value, where))

    def set_x1(self, value: str, where: str) -> None:
        self._set_sequence("x1", self._number(value, where))

    def set_r0(self, value: str, where: str) -> None:
        self._set_sequence("r0", self._number(value, where))

    def set_x0(self, value: str, where: str) -> None:
        self._set_sequence("x0", self._number(value, where))

    def set_c1(self, value: str, where: str) -> None:
        self._set_sequence("c1", self._number(value, where) * 1e-9)

    def set_c0(self, value: str, where: str) -> None:
        self._set_sequence("c0", self._number(value, where) * 1e-9)


class LineCode(_SequenceProperties, DSSElement):
    """Impedances per unit length, from sequence values or phase matrices (``rmatrix``...)."""

    dss_class = "linecode"
    aliases = {"basefreq": "basefreq", "phases": "nphases"}
    ignored = frozenset({"normamps", "emergamps", "faultrate", "pctperm", "repair", "ratings"})

    def __init__(self, name: str, frequency: float) -> None:
        super().__init__(name)
        self.nphases = 3
        self.r1, self.x1, self.r0, self.x0 = 0.0580, 0.1206, 0.1784, 0.4047
        self.c1, self.c0 = 3.4e-9, 1.6e-9
        self.units = "none"
        self.basefreq = frequency
        self.symmetrical = True
        self._from_sequence()

    def _from_sequence(self) -> None:
        self.z, self.yc = _sequence_matrices(
            self.nphases, self.r1, self.x1, self.r0, self.x0, self.c1, self.c0, self.basefreq
        )

    def set_nphases(self, value: str, where: str) -> None:
        n = int(self._number(value, where))
        if n != self.nphases:
            self.nphases = n
            self._from_sequence()

    def _set_sequence(self, attr: str, value: float) -> None:
        setattr(self, attr, value)
        if attr != "c0":
            self.symmetrical = True

    def set_units(self, value: str, where: str) -> None:
        self.units = _units(value, where)

    def set_basefreq(self, value: str, where: str) -> None:
        self.basefreq = self._number(value, where)

    def set_rmatrix(self, value: str, where: str) -> None:
        m = np.array(parse_matrix(value, self.nphases, where))
        self.z = m + 1j * self.z.imag
        self.symmetrical = False

    def set_xmatrix(self, value: str, where: str) -> None:
        m = np.array(parse_matrix(value, self.nphases, where))
        self.z = self.z.real + 1j * m
        self.symmetrical = False

    def set_cmatrix(self, value: str, where: str) -> None:
        m = np.array(parse_matrix(value, self.nphases, where))
        self.yc = 1j * 2.0 * math.pi * self.basefreq * m * 1e-9
        self.symmetrical = False

    def end_edit(self) -> None:
        if self.symmetrical:
            self._from_sequence()


class Line(_SequenceProperties, DSSElement):
    """A line section (pi model): series impedance matrix, half its shunt capacitance at each
    end; a switch is a short line (``Switch=y``: 1 ohm per unit length, 0.001 units long)."""

    dss_class = "line"
    aliases = {"lengthunits": "units"}
    ignored = frozenset(
        {"normamps", "emergamps", "faultrate", "pctperm", "repair", "basefreq", "ratings"}
    )

    def __init__(self, name: str, frequency: float, codes: dict[str, LineCode]) -> None:
        super().__init__(name)
        self._codes = codes
        self.phases = 3
        self.bus1, self.bus2 = "", ""
        self.r1, self.x1, self.r0, self.x0 = 0.0580, 0.1206, 0.1784, 0.4047
        self.c1, self.c0 = 3.4e-9, 1.6e-9
        self.length = 1.0
        self.units = "none"
        self.units_factor = 1.0  # length of one line-code unit in the line's units
        self.code_units = "none"
        self.linecode = ""
        self.basefreq = frequency
        self.symmetrical = True
        self.sequence_changed = False
        self.cap_specified = False
        self.enabled = True
        self._from_sequence()

    def _from_sequence(self) -> None:
        if self.phases == 1:
            self.r0, self.x0, self.c0 = self.r1, self.x1, self.c1
        self.z, self.yc = _sequence_matrices(
            self.phases, self.r1, self.x1, self.r0, self.x0, self.c1, self.c0, self.basefreq
        )

    def _reset_units(self) -> None:
        self.units_factor = 1.0
        self.units = "none"

    def set_phases(self, value: str, where: str) -> None:
        n = int(self._number(value, where))
        if n != self.phases and self.symmetrical:
            self.phases = n
            self._from_sequence()

    def set_bus1(self, value: str, where: str) -> None:
        self.bus1 = value

    def set_bus2(self, value: str, where: str) -> None:
        self.bus2 = value

    def set_enabled(self, value: str, where: str) -> None:
        self.enabled = parse_bool(value)

    def set_linecode(self, value: str, where: str) -> None:
        code = self._codes.get(value.lower())
        if code is None:
            raise DSSFormatError(f"{where}: line {self.name}: unknown LineCode {value!r}")
        self.linecode = code.name
        self.basefreq = code.basefreq
        self.symmetrical = code.symmetrical
        if code.symmetrical:
            self.r1, self.x1, self.r0, self.x0 = code.r1, code.x1, code.r0, code.x0
            self.c1, self.c0 = code.c1, code.c0
        self.code_units = code.units
        self.units_factor = length_units_factor(code.units, self.units)
        self.phases = code.nphases
        if code.symmetrical:
            self._from_sequence()
        else:
            self.z, self.yc = code.z.copy(), code.yc.copy()

    def set_length(self, value: str, where: str) -> None:
        self.length = self._number(value, where)

    def set_units(self, value: str, where: str) -> None:
        new = _units(value, where)
        if self.linecode:
            self.units_factor = length_units_factor(self.code_units, new)
        else:
            self.units_factor *= length_units_factor(self.units, new)
        self.units = new

    def _set_sequence(self, attr: str, value: float) -> None:
        setattr(self, attr, value)
        self.linecode = ""
        self._reset_units()
        self.sequence_changed = True
        self.symmetrical = True
        if attr in ("c1", "c0"):
            self.cap_specified = True

    def _set_matrix(self, value: str, where: str, part: str) -> None:
        m = np.array(parse_matrix(value, self.phases, where))
        if part == "r":
            self.z = m + 1j * self.z.imag
        elif part == "x":
            self.z = self.z.real + 1j * m
        else:
            self.yc = 1j * 2.0 * math.pi * self.basefreq * m * 1e-9
            self.cap_specified = True
        self.linecode = ""
        self.symmetrical = False
        self._reset_units()

    def set_rmatrix(self, value: str, where: str) -> None:
        self._set_matrix(value, where, "r")

    def set_xmatrix(self, value: str, where: str) -> None:
        self._set_matrix(value, where, "x")

    def set_cmatrix(self, value: str, where: str) -> None:
        self._set_matrix(value, where, "c")

    def set_switch(self, value: str, where: str) -> None:
        if not parse_bool(value):
            return
        self.linecode = ""
        self.r1 = self.x1 = self.r0 = self.x0 = 1.0
        self.c1, self.c0 = 1.1e-9, 1.0e-9
        self.length = 0.001
        self._reset_units()
        self.sequence_changed = True
        self.symmetrical = True

    def conductors(self) -> list[tuple[str, int]]:
        """``(bus, node)`` of the conductors of terminal 1 then terminal 2."""
        out = []
        for spec in (self.bus1, self.bus2):
            bus, nodes = bus_conductors(spec, self.phases, self.phases)
            out.extend((bus, n) for n in nodes)
        return out

    def yprim(self) -> np.ndarray:
        """Primitive admittance [S], ``2 * phases`` square."""
        if self.sequence_changed:
            if not self.cap_specified:  # default capacitances are per kft
                scale = length_units_factor("kft", self.units)
                self.c1, self.c0 = self.c1 / scale, self.c0 / scale
                self.cap_specified = True
            self._from_sequence()
            self.sequence_changed = False
        n = self.phases
        multiplier = self.length / self.units_factor
        y_series = np.linalg.inv(self.z * multiplier)
        y_half = 1j * self.yc.imag * multiplier / 2.0
        y = np.zeros((2 * n, 2 * n), dtype=np.complex128)
        y[:n, :n] = y_series + y_half
        y[n:, n:] = y_series + y_half
        y[:n, n:] = -y_series
        y[n:, :n] = -y_series
        return y


def _float_setter(attr: str, spec: str | None = None):
    """A ``set_<attr>`` method storing a number (and the source's impedance form ``spec``)."""

    def setter(self: Vsource, value: str, where: str) -> None:
        setattr(self, attr, self._number(value, where))
        if spec is not None:
            self.spec = spec

    return setter


class Vsource(DSSElement):
    """The circuit's source: EMF behind its Thevenin impedance (from short-circuit MVA or
    current, X/R ratios, or R1/X1/R0/X0 in ohms); the second terminal is grounded."""

    dss_class = "vsource"
    aliases = {"bus": "bus1", "mvasc3": "mvasc3", "basemva": "basemva"}
    ignored = frozenset({"basemva", "frequency", "scantype", "sequence"})

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.bus1 = "sourcebus"
        self.basekv, self.pu, self.angle, self.phases = 115.0, 1.0, 0.0, 3
        self.mvasc3, self.mvasc1 = 2000.0, 2100.0
        self.isc3, self.isc1 = 10041.0, 10540.0
        self.r1, self.x1, self.r0, self.x0 = 1.65, 6.6, 1.9, 5.7
        self.x1r1, self.x0r0 = 4.0, 3.0
        self.spec = "mvasc"

    def set_bus1(self, value: str, where: str) -> None:
        self.bus1 = value

    set_basekv = _float_setter("basekv")
    set_pu = _float_setter("pu")
    set_angle = _float_setter("angle")
    set_x1r1 = _float_setter("x1r1")
    set_x0r0 = _float_setter("x0r0")
    set_mvasc3 = _float_setter("mvasc3", "mvasc")
    set_mvasc1 = _float_setter("mvasc1", "mvasc")
    set_isc3 = _float_setter("isc3", "isc")
    set_isc1 = _float_setter("isc1", "isc")
    set_r1 = _float_setter("r1", "z")
    set_x1 = _float_setter("x1", "z")
    set_r0 = _float_setter("r0", "z")
    set_x0 = _float_setter("x0", "z")

    def set_phases(self, value: str, where: str) -> None:
        self.phases = int(self._number(value, where))

    def impedance(self) -> np.ndarray:
        """Source impedance matrix [ohm] (phases x phases)."""
        factor = 1.0 if self.phases == 1 else math.sqrt(3.0)
        kv = self.basekv
        if self.spec == "z":
            r1, x1, r0, x0 = self.r1, self.x1, self.r0, self.x0
            if self.phases == 1:
                r0, x0 = r1, x1
        else:
            if self.spec == "mvasc":
                isc1 = self.mvasc1 * 1000.0 / (factor * kv)
                mvasc3 = self.mvasc3
            else:
                mvasc3 = math.sqrt(3.0) * kv * self.isc3 / 1000.0
                isc1 = self.isc1
            x1 = kv**2 / mvasc3 / math.sqrt(1.0 + 1.0 / self.x1r1**2)
            r1 = x1 / self.x1r1
            a = 1.0 + self.x0r0**2
            b = 4.0 * (r1 + x1 * self.x0r0)
            c = 4.0 * (r1 * r1 + x1 * x1) - (3.0 * kv * 1000.0 / factor / isc1) ** 2
            r0 = (-b + math.sqrt(b * b - 4.0 * a * c)) / (2.0 * a)
            x0 = r0 * self.x0r0
        zs = complex((2.0 * r1 + r0) / 3.0, (2.0 * x1 + x0) / 3.0)
        zm = complex((r0 - r1) / 3.0, (x0 - x1) / 3.0)
        z = np.full((self.phases, self.phases), zm, dtype=np.complex128)
        np.fill_diagonal(z, zs)
        return z

    def emf(self) -> np.ndarray:
        """Internal phase-to-ground EMF [V] (phases,)."""
        n = self.phases
        vmag = self.basekv * self.pu * 1000.0
        vmag /= 1.0 if n == 1 else 2.0 * math.sin(math.pi / n)
        angles = np.radians(self.angle - 360.0 / n * np.arange(n))
        return vmag * np.exp(1j * angles)

    def conductors(self) -> list[tuple[str, int]]:
        """``(bus, node)`` of the phase conductors."""
        bus, nodes = bus_conductors(self.bus1, self.phases, self.phases)
        return [(bus, n) for n in nodes]
