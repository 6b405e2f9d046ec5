"""Build an OpenDSS circuit (its element objects, in definition order) from a master file.

:func:`build_circuit` runs the statements of :func:`~powerzoo.physics.unbalanced.dss_reader.
read_statements` the way OpenDSS does for a snapshot power flow: ``New`` creates an element
with OpenDSS's defaults, properties apply in order (``like=`` copies another element first),
``~`` continues the last command, ``class.name.prop=value`` edits an element, ``Set`` keeps the
base frequency and the voltage bases. Classes without effect on a snapshot flow (energy meters,
monitors, load shapes) and commands that only solve or report are skipped; anything else the
reader does not know (an element class, a property, a ``Set`` option that would change the
solution) raises :class:`~powerzoo.physics.unbalanced.dss_reader.DSSFormatError` naming its file
and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from powerzoo.physics.unbalanced.dss_reader import (
    DSSFormatError,
    Statement,
    parse_list,
    parse_number,
    read_statements,
)
from powerzoo.physics.unbalanced.elements import DSSElement, Line, LineCode, Vsource
from powerzoo.physics.unbalanced.loads import Capacitor, Load
from powerzoo.physics.unbalanced.transformers import RegControl, Transformer

__all__ = ["Circuit", "build_circuit"]

_SKIPPED_CLASSES = frozenset({"energymeter", "monitor", "loadshape"})
_SKIPPED_COMMANDS = frozenset(
    {
        "solve",
        "calcv",
        "calcvoltagebases",
        "buscoords",
        "show",
        "plot",
        "interpolate",
        "help",
        "export",
        "closedi",
        "sample",
        "makebuslist",
        "reset",
        "visualize",
        "summary",
    }
)
# Set options that do not change a snapshot power flow's solution (solver controls, reports)
_IGNORED_OPTIONS = frozenset(
    {
        "controlmode",
        "maxiterations",
        "maxiter",
        "maxcontroliter",
        "tolerance",
        "mode",
        "number",
        "stepsize",
        "markercode",
        "marktransformers",
        "overloadreport",
        "voltexcept",
        "demand",
        "diverbose",
        "year",
        "casename",
        "datapath",
        "algorithm",
        "hour",
        "sec",
        "time",
        "editor",
        "emergvminpu",
        "normvminpu",
        "emergvmaxpu",
        "normvmaxpu",
    }
)


@dataclass
class Circuit:
    """The elements of a circuit by OpenDSS class, each dict in definition order."""

    name: str = ""
    frequency: float = 60.0
    voltage_bases_kv: list[float] = field(default_factory=list)
    source: Vsource | None = None
    linecodes: dict[str, LineCode] = field(default_factory=dict)
    lines: dict[str, Line] = field(default_factory=dict)
    transformers: dict[str, Transformer] = field(default_factory=dict)
    capacitors: dict[str, Capacitor] = field(default_factory=dict)
    loads: dict[str, Load] = field(default_factory=dict)
    regcontrols: dict[str, RegControl] = field(default_factory=dict)
    order: list[DSSElement] = field(default_factory=list)  # circuit elements, creation order

    def collection(self, dss_class: str) -> dict:
        """The dict of elements of ``dss_class`` (lower case)."""
        return {
            "linecode": self.linecodes,
            "line": self.lines,
            "transformer": self.transformers,
            "capacitor": self.capacitors,
            "load": self.loads,
            "regcontrol": self.regcontrols,
            "vsource": {self.source.name: self.source} if self.source else {},
        }[dss_class]

    def create(self, dss_class: str, name: str, where: str) -> DSSElement:
        """A new element with OpenDSS's defaults (``circuit`` makes the source)."""
        f = self.frequency
        makers = {
            "linecode": lambda: LineCode(name, f),
            "line": lambda: Line(name, f, self.linecodes),
            "transformer": lambda: Transformer(name),
            "capacitor": lambda: Capacitor(name, f),
            "load": lambda: Load(name),
            "regcontrol": lambda: RegControl(name),
        }
        if dss_class not in makers:
            raise DSSFormatError(f"{where}: element class {dss_class!r} is not supported")
        element = makers[dss_class]()
        self.collection(dss_class)[element.name] = element
        if dss_class not in ("linecode", "regcontrol"):
            self.order.append(element)
        return element


def _split_target(target: str, where: str) -> tuple[str, str]:
    if "." not in target:
        raise DSSFormatError(f"{where}: expected class.name, got {target!r}")
    dss_class, name = target.split(".", 1)
    return dss_class.strip(), name.strip()


class _Builder:
    def __init__(self) -> None:
        self.circuit = Circuit()
        self.active: DSSElement | None = None

    def finish_active(self) -> None:
        if self.active is not None:
            self.active.end_edit()

    def apply(self, element: DSSElement, props: list[tuple[str, str]], where: str) -> None:
        for key, value in props:
            if key == "like":
                other = self.circuit.collection(element.dss_class).get(value.lower())
                if other is None:
                    raise DSSFormatError(f"{where}: like={value}: no such {element.dss_class}")
                element.make_like(other)
            else:
                element.apply(key, value, where)

    def new(self, st: Statement) -> None:
        dss_class, name = _split_target(st.target, st.where())
        if dss_class in _SKIPPED_CLASSES:
            self.active = None
            return
        if dss_class == "circuit":
            frequency = self.circuit.frequency
            bases = self.circuit.voltage_bases_kv
            self.circuit = Circuit(name=name, frequency=frequency, voltage_bases_kv=bases)
            self.circuit.source = Vsource("source")
            self.circuit.order.append(self.circuit.source)
            self.active = self.circuit.source
        else:
            self.active = self.circuit.create(dss_class, name, st.where())
        self.apply(self.active, st.props, st.where())

    def edit(self, st: Statement) -> None:
        dss_class, name = _split_target(st.target, st.where())
        if dss_class in _SKIPPED_CLASSES:
            self.active = None
            return
        if dss_class == "circuit":
            dss_class, name = "vsource", "source"
        element = (
            self.circuit.collection(dss_class).get(name)
            if dss_class
            in (
                "linecode",
                "line",
                "transformer",
                "capacitor",
                "load",
                "regcontrol",
                "vsource",
            )
            else None
        )
        if element is None:
            raise DSSFormatError(f"{st.where()}: no element {st.target!r} to edit")
        self.active = element
        self.apply(element, st.props, st.where())

    def set_options(self, st: Statement) -> None:
        for key, value in st.props:
            if key in ("defaultbasefrequency", "frequency"):
                self.circuit.frequency = parse_number(value, st.where())
            elif key in ("voltagebases", "voltagebase"):
                self.circuit.voltage_bases_kv = [
                    parse_number(v, st.where()) for v in parse_list(value)
                ]
            elif key in ("loadmult", "loadmultiplier") and parse_number(value, st.where()) != 1:
                raise DSSFormatError(f"{st.where()}: Set {key}={value} is not supported")
            elif key not in _IGNORED_OPTIONS and key not in ("loadmult", "loadmultiplier"):
                raise DSSFormatError(f"{st.where()}: Set option {key!r} is not supported")

    def batch_edit(self, st: Statement) -> None:
        dss_class, pattern = _split_target(st.target, st.where())
        if dss_class in _SKIPPED_CLASSES:
            return
        regex = re.compile(pattern.lstrip("."))
        for name, element in self.circuit.collection(dss_class).items():
            if regex.match(name):
                self.apply(element, st.props, st.where())
                element.end_edit()

    def run(self, statements: list[Statement]) -> Circuit:
        for st in statements:
            if st.verb == "more":
                if self.active is not None:
                    self.apply(self.active, st.props, st.where())
                continue
            self.finish_active()
            self.active = None
            if st.verb == "clear":
                self.circuit = Circuit()
            elif st.verb == "new":
                self.new(st)
            elif st.verb in ("edit", "setproperty"):
                self.edit(st)
            elif st.verb == "set":
                self.set_options(st)
            elif st.verb == "batchedit":
                self.batch_edit(st)
            elif st.verb not in _SKIPPED_COMMANDS:
                raise DSSFormatError(f"{st.where()}: command {st.verb!r} is not supported")
        self.finish_active()
        if self.circuit.source is None:
            raise DSSFormatError("no 'New Circuit' in the master file")
        return self.circuit


def build_circuit(master: str | Path) -> Circuit:
    """The circuit an OpenDSS master file defines (see the module docstring)."""
    return _Builder().run(read_statements(master))
