"""Transmission network cases as flat numpy arrays.

Provenance
----------
The data are **not** stored in this repository.  They are read at call time from the
MATPOWER case files (``case5.m``, ``case14.m``, ``case118.m``, MATPOWER is BSD-licensed)
as shipped, already converted, inside pandapower (``pandapower.networks.case5`` /
``case14`` / ``case118``), and cached in-process with :func:`functools.cache`.

Disk cache
----------
Importing pandapower and converting a net takes seconds, so the derived arrays of a
:class:`NetworkCase` (our own numpy arrays, nothing downloaded) are also saved with
:func:`numpy.savez` in a per-user cache directory (:func:`cache_dir`: ``$POWERZOO_CACHE_DIR``
if set, else ``$XDG_CACHE_HOME/powerzoo``, else ``~/.cache/powerzoo``) the first time a case
is built.  The file name is keyed by the case name, the installed pandapower version (read
from the package metadata, without importing pandapower) and :data:`CACHE_SCHEMA_VERSION`;
it is written atomically (temporary file + :func:`os.replace`).  Later processes read the
``.npz`` and never import pandapower.  An unreadable or inconsistent cache file is reported
with a :class:`RuntimeWarning` and rebuilt; a cache directory that cannot be written only
costs the speed-up.  pandapower must be installed (it is imported only on a cache miss).

Conversion notes
----------------
* Buses keep pandapower's order (== MATPOWER order); ``bus_id`` is the pandapower bus index
  (0-based, i.e. MATPOWER bus number minus one for these cases).
* Branch parameters (reactance ``branch_x_pu`` on ``base_mva`` and off-nominal tap ratio
  ``branch_tap``) come from pandapower's own pypower conversion
  (``to_ppc(..., trafo_model="pi")``); the pi model reproduces MATPOWER's branch reactances.
  Branch order is pandapower's: all ``net.line`` rows, then all ``net.trafo`` rows
  (``branch_is_trafo`` / ``branch_element`` give the mapping back).
* Ratings: pandapower stores MATPOWER ``RATE_A`` as ``max_i_ka = RATE_A / (sqrt(3) * vn_kv)``
  for lines and as ``sn_mva = RATE_A`` for transformers, and ``RATE_A == 0`` (unlimited) as the
  sentinel 99999 kA / 99999 MVA.  We invert that exactly (rounded to 1e-6 MW) and map the
  sentinel to ``np.inf``.  In DC studies the MVA rating is used as an MW limit.
* Generators are ordered as in the MATPOWER gen table: pandapower splits that table into
  ``ext_grid`` (first unit on the reference bus), ``gen`` (first unit on a PV bus) and
  ``sgen`` (further units on the same bus); the MATPOWER tables of these cases are sorted by
  bus, so sorting by (bus, ext_grid/gen before sgen, element index) restores the order.
* Costs come from pandapower's ``poly_cost`` table (``cp2_eur_per_mw2``, ``cp1_eur_per_mw``,
  ``cp0_eur`` are MATPOWER's ``c2``, ``c1``, ``c0``; the currency label is pandapower's, the
  numbers are MATPOWER's $/h values).
* ``bus_pd_mw`` is the fixed net active demand per bus: loads, minus non-dispatchable static
  generators, plus shunt conductance (MATPOWER's ``GS`` acts as a load in DC models).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["CACHE_SCHEMA_VERSION", "CASE_NAMES", "NetworkCase", "cache_dir", "load_case"]

CASE_NAMES: tuple[str, ...] = ("case5", "case14", "case118")

# pandapower's from_ppc writes this value for MATPOWER RATE_A == 0 (unlimited)
_PP_UNLIMITED = 99999.0

# Bump whenever the conversion or the NetworkCase fields change: old cache files are ignored.
CACHE_SCHEMA_VERSION = 1


@dataclass(frozen=True, eq=False)
class NetworkCase:
    """Immutable DC network description (all arrays read-only, indices 0-based).

    Units are in the field names: ``_mw`` megawatt, ``_pu`` per unit on ``base_mva``,
    ``c2_per_mw2h`` $/(MW^2 h), ``c1_per_mwh`` $/MWh, ``c0_per_h`` $/h.
    Equality / hashing is by identity (used as cache key for PTDF matrices).
    """

    name: str
    base_mva: float
    bus_id: np.ndarray  # [n_bus] int, pandapower bus index
    slack_bus: int  # position of the reference bus
    bus_pd_mw: np.ndarray  # [n_bus] fixed net active demand
    branch_from_bus: np.ndarray  # [n_branch] int
    branch_to_bus: np.ndarray  # [n_branch] int
    branch_x_pu: np.ndarray  # [n_branch] series reactance
    branch_tap: np.ndarray  # [n_branch] off-nominal ratio (1.0 for lines)
    branch_rate_a_mw: np.ndarray  # [n_branch] thermal limit, np.inf = unlimited
    branch_in_service: np.ndarray  # [n_branch] bool
    branch_is_trafo: np.ndarray  # [n_branch] bool
    branch_element: np.ndarray  # [n_branch] int, row index in net.line / net.trafo
    gen_bus: np.ndarray  # [n_gen] int
    gen_pmin_mw: np.ndarray  # [n_gen]
    gen_pmax_mw: np.ndarray  # [n_gen]
    gen_c2_per_mw2h: np.ndarray  # [n_gen]
    gen_c1_per_mwh: np.ndarray  # [n_gen]
    gen_c0_per_h: np.ndarray  # [n_gen]
    gen_in_service: np.ndarray  # [n_gen] bool
    gen_element_type: np.ndarray  # [n_gen] str: "ext_grid" | "gen" | "sgen"
    gen_element: np.ndarray  # [n_gen] int, row index in that pandapower table
    load_bus: np.ndarray  # [n_load] int
    load_p_mw: np.ndarray  # [n_load]

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        n_bus, n_branch, n_gen = self.n_bus, self.n_branch, self.n_gen
        checks = {
            "bus_pd_mw": n_bus,
            "branch_to_bus": n_branch,
            "branch_x_pu": n_branch,
            "branch_tap": n_branch,
            "branch_rate_a_mw": n_branch,
            "branch_in_service": n_branch,
            "gen_pmin_mw": n_gen,
            "gen_pmax_mw": n_gen,
            "gen_c2_per_mw2h": n_gen,
            "gen_c1_per_mwh": n_gen,
            "gen_c0_per_h": n_gen,
            "gen_in_service": n_gen,
        }
        for key, n in checks.items():
            if getattr(self, key).shape != (n,):
                raise ValueError(f"{key} has shape {getattr(self, key).shape}, expected ({n},)")
        if not 0 <= self.slack_bus < n_bus:
            raise ValueError(f"slack_bus {self.slack_bus} out of range")

    @property
    def n_bus(self) -> int:
        return int(self.bus_id.shape[0])

    @property
    def n_branch(self) -> int:
        return int(self.branch_from_bus.shape[0])

    @property
    def n_gen(self) -> int:
        return int(self.gen_bus.shape[0])

    @property
    def n_load(self) -> int:
        return int(self.load_bus.shape[0])

    @property
    def total_load_mw(self) -> float:
        """Total fixed net demand [MW]."""
        return float(self.bus_pd_mw.sum())

    @property
    def is_quadratic(self) -> bool:
        """True if any in-service generator has a non-zero quadratic cost term."""
        return bool(np.any(self.gen_c2_per_mw2h[self.gen_in_service] != 0.0))

    def __repr__(self) -> str:
        return (
            f"NetworkCase(name={self.name!r}, n_bus={self.n_bus}, n_branch={self.n_branch}, "
            f"n_gen={self.n_gen}, total_load_mw={self.total_load_mw:.2f})"
        )


def load_case(name: str) -> NetworkCase:
    """Load a network case by name (one of :data:`CASE_NAMES`), cached in-process and on disk.

    Raises ``ValueError`` for unknown names.  Requires pandapower to be installed; it is
    imported only when the disk cache (see the module docstring) has no valid entry.
    """
    key = str(name).strip().lower()
    if key not in CASE_NAMES:
        raise ValueError(f"unknown case {name!r}; valid names: {', '.join(CASE_NAMES)}")
    return _load_case_cached(key)


@functools.cache
def _load_case_cached(name: str) -> NetworkCase:
    path = _cache_path(name)
    if path is not None and path.exists():
        try:
            return _read_cache(path, name)
        except Exception as err:  # noqa: BLE001 - any unreadable / inconsistent file is rebuilt
            warnings.warn(
                f"powerzoo: case cache {str(path)!r} is unreadable ({type(err).__name__}: {err}); "
                "rebuilding it from pandapower",
                RuntimeWarning,
                stacklevel=3,
            )
    case = _build_case(name)
    if path is not None:
        _write_cache(path, case)
    return case


def _build_case(name: str) -> NetworkCase:
    """Build ``name`` from pandapower's MATPOWER conversion (the slow path)."""
    import pandapower.networks as pn

    with _quiet_pandapower():
        net = getattr(pn, name)()
    return _case_from_pandapower(net, name)


# --------------------------------------------------------------------------- disk cache


def cache_dir() -> Path:
    """Per-user cache directory of PowerZoo (not created here).

    ``$POWERZOO_CACHE_DIR`` if set and non-empty, else ``$XDG_CACHE_HOME/powerzoo``, else
    ``~/.cache/powerzoo``.
    """
    env = os.environ.get("POWERZOO_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "powerzoo"


def _pandapower_version() -> str | None:
    """Installed pandapower version from its metadata (no import), ``None`` if not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pandapower")
    except PackageNotFoundError:
        return None


def _cache_path(name: str) -> Path | None:
    """Cache file of case ``name``, or ``None`` when no key can be formed (no pandapower)."""
    pp_version = _pandapower_version()
    if pp_version is None:
        return None
    safe = re.sub(r"[^0-9A-Za-z.]+", "_", pp_version)
    return cache_dir() / f"{name}-pandapower{safe}-schema{CACHE_SCHEMA_VERSION}.npz"


_META_SCHEMA = "__schema__"
_META_PANDAPOWER = "__pandapower__"
# numpy dtype kind of every array field of NetworkCase ("f" float64 for the others)
_FIELD_KINDS = {
    "bus_id": "i",
    "branch_from_bus": "i",
    "branch_to_bus": "i",
    "branch_in_service": "b",
    "branch_is_trafo": "b",
    "branch_element": "i",
    "gen_bus": "i",
    "gen_in_service": "b",
    "gen_element_type": "U",
    "gen_element": "i",
    "load_bus": "i",
}


def _write_cache(path: Path, case: NetworkCase) -> None:
    """Save ``case``'s fields to ``path`` atomically; failures only warn."""
    from powerzoo.fileio import atomic_save

    arrays = {f.name: np.asarray(getattr(case, f.name)) for f in dataclasses.fields(case)}
    arrays[_META_SCHEMA] = np.asarray(CACHE_SCHEMA_VERSION)
    arrays[_META_PANDAPOWER] = np.asarray(_pandapower_version() or "")
    try:
        atomic_save(path, lambda tmp: np.savez(tmp, **arrays))
    except OSError as err:
        warnings.warn(
            f"powerzoo: cannot write the case cache {str(path)!r} ({err}); "
            "set POWERZOO_CACHE_DIR to a writable directory to speed up case loading",
            RuntimeWarning,
            stacklevel=4,
        )


def _read_cache(path: Path, name: str) -> NetworkCase:
    """Read a cache file written by :func:`_write_cache`; raises on any inconsistency."""
    fields = dataclasses.fields(NetworkCase)
    with np.load(path, allow_pickle=False) as data:
        stored = {key: data[key] for key in data.files}
    expected = {f.name for f in fields} | {_META_SCHEMA, _META_PANDAPOWER}
    if set(stored) != expected:
        raise ValueError(f"fields {sorted(set(stored) ^ expected)} missing or unexpected")
    if int(stored[_META_SCHEMA]) != CACHE_SCHEMA_VERSION:
        raise ValueError(f"schema {int(stored[_META_SCHEMA])} != {CACHE_SCHEMA_VERSION}")
    if str(stored[_META_PANDAPOWER]) != (_pandapower_version() or ""):
        raise ValueError(f"written by pandapower {str(stored[_META_PANDAPOWER])!r}")
    if str(stored["name"]) != name:
        raise ValueError(f"holds case {str(stored['name'])!r}")
    values = {}
    for f in fields:
        value = stored[f.name]
        if f.name == "name":
            values[f.name] = str(value)
        elif f.name == "base_mva":
            values[f.name] = float(value)
        elif f.name == "slack_bus":
            values[f.name] = int(value)
        else:
            kind = _FIELD_KINDS.get(f.name, "f")
            if value.ndim != 1 or value.dtype.kind != kind:
                raise ValueError(
                    f"{f.name}: {value.dtype}{list(value.shape)} is not a 1-D {kind!r} array"
                )
            values[f.name] = value
    return NetworkCase(**values)


@contextmanager
def _quiet_pandapower() -> Iterator[None]:
    """Silence pandapower's conversion chatter (warnings + log records)."""
    pp_logger = logging.getLogger("pandapower")
    old_level = pp_logger.level
    pp_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        pp_logger.setLevel(old_level)


def _controllable(table) -> np.ndarray:
    """Boolean mask of dispatchable rows (pandapower default: not controllable)."""
    if "controllable" not in table.columns:
        return np.zeros(len(table), dtype=bool)
    return table["controllable"].fillna(False).to_numpy(dtype=bool)


def _case_from_pandapower(net, name: str) -> NetworkCase:
    """Convert a pandapower net (MATPOWER-derived, lines + 2-winding trafos) to arrays."""
    from pandapower.converter.pypower.to_ppc import to_ppc
    from pandapower.pypower.idx_brch import BR_STATUS, BR_X, F_BUS, SHIFT, T_BUS, TAP

    for table in ("trafo3w", "impedance", "dcline", "switch", "xward", "ward", "storage"):
        if table in net and len(net[table]) > 0:
            raise NotImplementedError(f"{name}: pandapower table {table!r} is not supported")
    if len(net.pwl_cost) > 0:
        raise NotImplementedError(f"{name}: piecewise-linear costs are not supported")
    if len(net.ext_grid) != 1:
        raise NotImplementedError(f"{name}: exactly one ext_grid (slack) expected")

    with _quiet_pandapower():
        ppc = to_ppc(
            net,
            calculate_voltage_angles=True,
            trafo_model="pi",
            init="flat",
            check_connectivity=True,
            mode="pf",
        )
    lookups = net._pd2ppc_lookups  # pandapower's element -> ppc row maps
    bus_lookup = np.asarray(lookups["bus"])
    bus_index = net.bus.index.to_numpy()
    ppc_bus_of = bus_lookup[bus_index]
    if not np.array_equal(ppc_bus_of, np.arange(len(bus_index))):
        raise NotImplementedError(f"{name}: bus fusion / reordering in ppc is not supported")
    pos_of_bus = {int(b): i for i, b in enumerate(bus_index)}

    def bus_pos(values) -> np.ndarray:
        return np.array([pos_of_bus[int(v)] for v in values], dtype=np.int64)

    # --- branches: lines then trafos, as in the ppc
    branch = np.real(np.asarray(ppc["branch"]))
    n_line, n_trafo = len(net.line), len(net.trafo)
    if branch.shape[0] != n_line + n_trafo:
        raise NotImplementedError(f"{name}: unexpected ppc branch count {branch.shape[0]}")
    line_rng = lookups["branch"].get("line", (0, 0))
    trafo_rng = lookups["branch"].get("trafo", (n_line, n_line))
    if tuple(line_rng) != (0, n_line) or tuple(trafo_rng) != (n_line, n_line + n_trafo):
        raise NotImplementedError(f"{name}: unexpected ppc branch layout {lookups['branch']}")
    if np.any(branch[:, SHIFT] != 0.0):
        raise NotImplementedError(f"{name}: phase-shifting transformers are not supported")

    from_bus = branch[:, F_BUS].astype(np.int64)
    to_bus = branch[:, T_BUS].astype(np.int64)
    x_pu = branch[:, BR_X].copy()
    tap = branch[:, TAP].copy()
    tap[tap == 0.0] = 1.0
    in_service = branch[:, BR_STATUS] > 0

    # line rating: max_i_ka * sqrt(3) * vn_kv (MVA); trafo rating: sn_mva
    line = net.line
    vn_kv = net.bus.loc[line.to_bus.to_numpy(), "vn_kv"].to_numpy(dtype=float)
    max_i_ka = line.max_i_ka.to_numpy(dtype=float)
    line_rate = max_i_ka * math.sqrt(3.0) * vn_kv
    line_rate = line_rate * line.df.to_numpy(dtype=float) * line.parallel.to_numpy(dtype=float)
    line_rate[np.isclose(max_i_ka, _PP_UNLIMITED)] = np.inf
    trafo = net.trafo
    sn_mva = trafo.sn_mva.to_numpy(dtype=float)
    trafo_rate = sn_mva * trafo.df.to_numpy(dtype=float) * trafo.parallel.to_numpy(dtype=float)
    trafo_rate[np.isclose(sn_mva, _PP_UNLIMITED)] = np.inf
    rate_a_mw = np.round(np.concatenate([line_rate, trafo_rate]), 6)

    # --- generators in MATPOWER order
    rows: list[tuple[int, int, int, str]] = []  # (bus position, rank, element, table)
    for rank, et in ((0, "ext_grid"), (0, "gen"), (1, "sgen")):
        table = net[et]
        if et == "sgen":
            table = table[_controllable(table)]
        for elem, bus in zip(table.index, table.bus, strict=True):
            rows.append((pos_of_bus[int(bus)], rank, int(elem), et))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    n_gen = len(rows)
    gen_bus = np.array([r[0] for r in rows], dtype=np.int64)
    gen_type = np.array([r[3] for r in rows], dtype="<U8")
    gen_elem = np.array([r[2] for r in rows], dtype=np.int64)
    pmin = np.zeros(n_gen)
    pmax = np.zeros(n_gen)
    gen_on = np.zeros(n_gen, dtype=bool)
    c2, c1, c0 = np.zeros(n_gen), np.zeros(n_gen), np.zeros(n_gen)
    cost = net.poly_cost
    cost_rows = {
        (str(et), int(el)): i for i, (et, el) in enumerate(zip(cost.et, cost.element, strict=True))
    }
    for g, (_, _, elem, et) in enumerate(rows):
        rec = net[et].loc[elem]
        pmin[g] = float(rec.min_p_mw)
        pmax[g] = float(rec.max_p_mw)
        gen_on[g] = bool(rec.in_service)
        i = cost_rows.get((et, elem))
        if i is None:
            raise NotImplementedError(f"{name}: no poly_cost for {et} {elem}")
        c2[g] = float(cost.cp2_eur_per_mw2.iloc[i])
        c1[g] = float(cost.cp1_eur_per_mw.iloc[i])
        c0[g] = float(cost.cp0_eur.iloc[i])

    # --- fixed demand per bus
    n_bus = len(bus_index)
    load = net.load[net.load.in_service.to_numpy(dtype=bool)]
    load_bus = bus_pos(load.bus)
    load_p_mw = load.p_mw.to_numpy(dtype=float) * load.scaling.to_numpy(dtype=float)
    bus_pd_mw = np.zeros(n_bus)
    np.add.at(bus_pd_mw, load_bus, load_p_mw)
    sgen = net.sgen
    fixed_sgen = sgen[~_controllable(sgen) & sgen.in_service.to_numpy(dtype=bool)]
    np.add.at(
        bus_pd_mw,
        bus_pos(fixed_sgen.bus),
        -fixed_sgen.p_mw.to_numpy(dtype=float) * fixed_sgen.scaling.to_numpy(dtype=float),
    )
    shunt = net.shunt[net.shunt.in_service.to_numpy(dtype=bool)]
    np.add.at(
        bus_pd_mw,
        bus_pos(shunt.bus),
        shunt.p_mw.to_numpy(dtype=float) * shunt.step.to_numpy(dtype=float),
    )

    return NetworkCase(
        name=name,
        base_mva=float(net.sn_mva),
        bus_id=bus_index.astype(np.int64),
        slack_bus=int(pos_of_bus[int(net.ext_grid.bus.iloc[0])]),
        bus_pd_mw=bus_pd_mw,
        branch_from_bus=from_bus,
        branch_to_bus=to_bus,
        branch_x_pu=x_pu,
        branch_tap=tap,
        branch_rate_a_mw=rate_a_mw,
        branch_in_service=in_service,
        branch_is_trafo=np.r_[np.zeros(n_line, dtype=bool), np.ones(n_trafo, dtype=bool)],
        branch_element=np.r_[net.line.index.to_numpy(), net.trafo.index.to_numpy()].astype(
            np.int64
        ),
        gen_bus=gen_bus,
        gen_pmin_mw=pmin,
        gen_pmax_mw=pmax,
        gen_c2_per_mw2h=c2,
        gen_c1_per_mwh=c1,
        gen_c0_per_h=c0,
        gen_in_service=gen_on,
        gen_element_type=gen_type,
        gen_element=gen_elem,
        load_bus=load_bus,
        load_p_mw=load_p_mw,
    )
