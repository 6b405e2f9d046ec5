"""The AC model of a meshed transmission network, as pandapower builds it.

:class:`ACNetwork` holds what :func:`powerzoo.physics.ac_pf.ac_power_flow` needs: the
branch admittances (the two-port ``Y_ff, Y_ft, Y_tf, Y_tt`` of every branch, taps and phase
shifts included), the bus shunts, the bus types (PQ / PV / slack), the voltage set-points, the
generators' reactive limits per bus and the case's own net injections.

Provenance
----------
:func:`ac_network` reads the pandapower network of that name (:func:`_pandapower_net`), runs
pandapower's own Newton-Raphson power flow on it once (:data:`PANDAPOWER_PF_OPTIONS`) and takes
the model from pandapower's internal MATPOWER-style arrays: the branch two-port admittances come
from ``pandapower.pypower.makeYbus.branch_vectors`` on pandapower's internal branch table and
the shunts from its bus table (``G_s + j B_s`` over the base MVA), so lines (pi model),
transformers (``trafo_model="t"``, ratio and phase shift) and shunts are modelled exactly as
pandapower's ``runpp`` models them.  The base-case solution is kept as the starting point of
every solve.  Only the elements the cases of this library use are supported: buses, lines,
two-winding transformers, generators, external grids, loads, static generators and shunts
(bus-bus switches, three-winding transformers, wards and DC lines raise ``ValueError``).

Bus and branch order
--------------------
Public arrays follow pandapower's order: buses as in ``net.bus`` (by position), branches
lines first then transformers (pandapower's internal branch order).  Out-of-service buses and
branches keep their position and get ``-1`` as internal index.

Injection convention
--------------------
``p_mw`` / ``q_mvar`` are the net injections (generation - demand) fixed by the case: at PQ
buses all of it; at PV buses the units' active set-points minus the demand, with the reactive
output of the voltage-controlling units excluded (it is a result); at the slack bus the demand
and any non-slack generation only.

Disk cache
----------
A built network is kept per name in-process (:func:`functools.cache`) and saved as ``.npz``
next to the case cache (``POWERZOO_CACHE_DIR``, see :mod:`powerzoo.physics.cases`), keyed by
name, pandapower version, the SHA-256 of the case's source file and :data:`AC_CACHE_SCHEMA`;
later processes never import pandapower. Every read checks the file (source digest, bus count,
array sizes, indices, finite admittances, :mod:`powerzoo.physics.case_cache`); one that fails is
rebuilt with a one-line warning.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["AC_CACHE_SCHEMA", "PANDAPOWER_PF_OPTIONS", "ACNetwork", "ac_network"]

AC_CACHE_SCHEMA = 2  # 2: source digest
# The runpp settings whose model ac_power_flow reproduces (also used by the validation tests).
PANDAPOWER_PF_OPTIONS: dict = {
    "algorithm": "nr",
    "calculate_voltage_angles": True,
    "init": "dc",
    "trafo_model": "t",
    "enforce_q_lims": False,
    "voltage_depend_loads": False,
    "tolerance_mva": 1e-10,
    "max_iteration": 30,
    "numba": False,
}
PQ, PV, REF = 1, 2, 3  # bus type codes (MATPOWER's)
_UNSUPPORTED = ("trafo3w", "ward", "xward", "dcline", "impedance", "svc", "tcsc", "ssc", "vsc")


@dataclass(frozen=True, eq=False)
class ACNetwork:
    """AC model of a meshed network (see the module docstring).  Per-unit on ``base_mva``.

    Internal arrays (index ``i`` of ``n_internal`` in-service buses, ``l`` of in-service
    branches) and public arrays (pandapower's bus / branch order) are both stored.  Hashed by
    identity; treat every array as read-only.
    """

    name: str
    base_mva: float
    bus_internal: np.ndarray  # [n_bus] int: internal index of each public bus, -1 out of service
    branch_internal: np.ndarray  # [n_branch] int: internal branch of each public one, or -1
    bus_type: np.ndarray  # [n_internal] int: PQ=1, PV=2, REF=3
    branch_from: np.ndarray  # [n_br_internal] int: internal from-bus
    branch_to: np.ndarray  # [n_br_internal] int: internal to-bus
    y_ff: np.ndarray  # [n_br_internal] complex p.u.: I_from = y_ff V_from + y_ft V_to
    y_ft: np.ndarray
    y_tf: np.ndarray  # I_to = y_tf V_from + y_tt V_to
    y_tt: np.ndarray
    y_shunt: np.ndarray  # [n_internal] complex p.u.: bus shunt admittance
    v_base: np.ndarray  # [n_internal] complex p.u.: pandapower's solution at the case's loading
    vm_pu: np.ndarray  # [n_bus] voltage set-point at PV / slack buses (base solution elsewhere)
    p_mw: np.ndarray  # [n_bus] the case's fixed net active injection [MW]
    q_mvar: np.ndarray  # [n_bus] the case's fixed net reactive injection [Mvar]
    q_max_mvar: np.ndarray  # [n_bus] sum of voltage-controlling units' limits (inf: none)
    q_min_mvar: np.ndarray
    rate_mva: np.ndarray  # [n_branch] pandapower's thermal rating [MVA] (inf: unrated)

    @property
    def n_bus(self) -> int:
        """Number of public buses (pandapower's ``len(net.bus)``)."""
        return int(self.bus_internal.size)

    @property
    def n_branch(self) -> int:
        """Number of public branches (lines, then transformers)."""
        return int(self.branch_internal.size)

    @property
    def n_internal(self) -> int:
        """Number of in-service buses the power flow solves for."""
        return int(self.bus_type.size)


def ac_network(name: str) -> ACNetwork:
    """The :class:`ACNetwork` of the pandapower network ``name`` (e.g. ``"case118"``,
    ``"GBnetwork"``), cached in-process and on disk.  Requires pandapower on a cache miss."""
    return _ac_network_cached(str(name))


def _pandapower_net(name: str):
    """The pandapower network called ``name``: ``pandapower.networks`` first, else the MATPOWER
    file of the case library (:func:`powerzoo.physics.matpower_cases.pandapower_net`)."""
    from powerzoo.physics.cases import CASE_NAMES
    from powerzoo.physics.matpower_cases import pandapower_net

    if name not in CASE_NAMES:
        raise ValueError(f"unknown network {name!r}: not a case of powerzoo.physics.cases")
    return pandapower_net(name)


@functools.cache
def _ac_network_cached(name: str) -> ACNetwork:
    from powerzoo.physics.case_cache import read_or_build

    return read_or_build(
        _cache_path(name),
        lambda path: _read_cache(path, name),
        lambda: network_from_pandapower(_pandapower_net(name), name),
        _write_cache,
        "pandapower",
    )


def network_from_pandapower(net, name: str) -> ACNetwork:
    """Build the :class:`ACNetwork` of a pandapower ``net`` (runs ``runpp`` once on it, with
    :data:`PANDAPOWER_PF_OPTIONS`; ``net`` gets that result)."""
    import pandapower as pp
    from pandapower.pypower.idx_brch import F_BUS, RATE_A, T_BUS
    from pandapower.pypower.idx_bus import BS, BUS_TYPE, GS, PD, QD
    from pandapower.pypower.idx_gen import GEN_BUS, GEN_STATUS, PG
    from pandapower.pypower.makeYbus import branch_vectors

    for table in _UNSUPPORTED:
        if table in net and len(net[table]) and net[table]["in_service"].any():
            raise ValueError(f"{name}: the AC model does not support {table!r} elements yet")
    if "switch" in net and len(net.switch) and (net.switch.et == "b").any():
        raise ValueError(f"{name}: the AC model does not support bus-bus switches yet")
    pp.runpp(net, **PANDAPOWER_PF_OPTIONS)
    ppci = net._ppc["internal"]
    base = float(ppci["baseMVA"])
    bus, gen, branch = ppci["bus"], ppci["gen"], ppci["branch"]
    n = bus.shape[0]
    lookup = net._pd2ppc_lookups["bus"][net.bus.index.to_numpy()]
    bus_internal = np.where(lookup < n, lookup, -1).astype(np.int64)
    inside = bus_internal[bus_internal >= 0]
    if inside.size != n or np.unique(inside).size != n:
        raise ValueError(f"{name}: buses are merged or added internally; not supported yet")
    branch_is = np.asarray(ppci["branch_is"], dtype=bool)
    branch_internal = np.where(branch_is, np.cumsum(branch_is) - 1, -1).astype(np.int64)
    y_tt, y_ff, y_ft, y_tf = branch_vectors(branch, branch.shape[0])
    on = gen[:, GEN_STATUS] > 0
    gen_bus = gen[:, GEN_BUS].astype(np.int64)
    slack_units = np.zeros(gen.shape[0], dtype=bool)
    slack_units[np.asarray(ppci["ref_gens"], dtype=np.int64)] = True
    p_int = np.bincount(gen_bus[on & ~slack_units], gen[on & ~slack_units, PG], n) - bus[:, PD]
    q_int = -bus[:, QD].astype(float)
    public = np.flatnonzero(bus_internal >= 0)
    v_base = np.asarray(ppci["V"], dtype=complex)

    def to_public(values: np.ndarray, fill: float) -> np.ndarray:
        out = np.full(net.bus.shape[0], fill)
        out[public] = values[bus_internal[public]]
        return out

    q_max, q_min = _q_limits(net)
    rate = np.full(branch_internal.size, np.inf)
    rate_int = np.real(branch[:, RATE_A]).astype(float)
    rate[branch_is] = np.where(rate_int > 0, rate_int, np.inf)
    return ACNetwork(
        name=name,
        base_mva=base,
        bus_internal=bus_internal,
        branch_internal=branch_internal,
        bus_type=bus[:, BUS_TYPE].astype(np.int64),
        branch_from=np.real(branch[:, F_BUS]).astype(np.int64),
        branch_to=np.real(branch[:, T_BUS]).astype(np.int64),
        y_ff=np.asarray(y_ff, dtype=complex),
        y_ft=np.asarray(y_ft, dtype=complex),
        y_tf=np.asarray(y_tf, dtype=complex),
        y_tt=np.asarray(y_tt, dtype=complex),
        y_shunt=(bus[:, GS] + 1j * bus[:, BS]) / base,
        v_base=v_base,
        vm_pu=to_public(np.abs(v_base), np.nan),
        p_mw=to_public(p_int, 0.0),
        q_mvar=to_public(q_int, 0.0),
        q_max_mvar=q_max,
        q_min_mvar=q_min,
        rate_mva=rate,
    )


def _q_limits(net) -> tuple[np.ndarray, np.ndarray]:
    """Per public bus, the summed reactive limits [Mvar] of the in-service voltage-controlling
    units (``gen`` and ``ext_grid``); +-inf where a unit has no limit, and at buses without."""
    positions = {b: k for k, b in enumerate(net.bus.index)}
    q_max = np.zeros(len(net.bus))
    q_min = np.zeros(len(net.bus))
    controlled = np.zeros(len(net.bus), dtype=bool)
    for table in ("gen", "ext_grid"):
        frame = net[table]
        if not len(frame):
            continue
        frame = frame[frame.in_service.astype(bool)]
        for column, sign in (("max_q_mvar", 1.0), ("min_q_mvar", -1.0)):
            values = frame[column] if column in frame else np.full(len(frame), np.nan)
            values = np.where(np.isfinite(values), values, sign * np.inf)
            target = q_max if sign > 0 else q_min
            np.add.at(target, [positions[b] for b in frame.bus], values)
        controlled[[positions[b] for b in frame.bus]] = True
    q_max[~controlled] = np.inf
    q_min[~controlled] = -np.inf
    return q_max, q_min


# --------------------------------------------------------------------------- disk cache


def _cache_path(name: str) -> Path | None:
    from importlib.metadata import PackageNotFoundError, version

    from powerzoo.physics.case_cache import source_of
    from powerzoo.physics.cases import cache_dir

    try:
        pp_version = version("pandapower")
    except PackageNotFoundError:
        return None
    source = source_of(name)
    if source is None:
        return None
    safe = re.sub(r"[^0-9A-Za-z.]+", "_", pp_version)
    safe_name = re.sub(r"[^0-9A-Za-z._-]+", "_", name)
    return cache_dir() / (
        f"ac-{safe_name}-pandapower{safe}-src{source.digest}-schema{AC_CACHE_SCHEMA}.npz"
    )


def _write_cache(path: Path, network: ACNetwork) -> None:
    from powerzoo.physics.case_cache import SOURCE_KEY, source_of, write_npz_cache

    arrays = {f.name: np.asarray(getattr(network, f.name)) for f in dataclasses.fields(network)}
    arrays["__schema__"] = np.asarray(AC_CACHE_SCHEMA)
    source = source_of(network.name)
    arrays[SOURCE_KEY] = np.asarray("" if source is None else source.digest)
    write_npz_cache(path, arrays, "AC network")


def _read_cache(path: Path, name: str) -> ACNetwork:
    """Read a file written by :func:`_write_cache`; raises on any inconsistency."""
    from powerzoo.physics.case_cache import (
        SOURCE_KEY,
        check_case_arrays,
        check_source_digest,
        source_of,
    )

    fields = {f.name for f in dataclasses.fields(ACNetwork)}
    with np.load(path, allow_pickle=False) as data:
        stored = {key: data[key] for key in data.files}
    if (
        set(stored) != fields | {"__schema__", SOURCE_KEY}
        or int(stored["__schema__"]) != AC_CACHE_SCHEMA
    ):
        raise ValueError("fields or schema differ from this version's")
    if str(stored["name"]) != name:
        raise ValueError(f"holds network {str(stored['name'])!r}")
    source = source_of(name)
    check_source_digest(stored, source)
    values = {key: stored[key] for key in fields}
    values["name"] = name
    values["base_mva"] = float(stored["base_mva"])
    network = ACNetwork(**values)
    n, n_bus, n_line = network.n_internal, network.n_bus, network.branch_from.size
    check_case_arrays(
        n_bus,
        source,
        sizes={
            **{k: (values[k], n) for k in ("v_base", "y_shunt")},
            **{k: (values[k], n_line) for k in ("branch_to", "y_ff", "y_ft", "y_tf", "y_tt")},
            **{k: (values[k], n_bus) for k in ("vm_pu", "p_mw", "q_mvar", "q_max_mvar")},
            "q_min_mvar": (values["q_min_mvar"], n_bus),
            "rate_mva": (values["rate_mva"], network.n_branch),
        },
        indices={
            "bus_internal": (network.bus_internal[network.bus_internal >= 0], n),
            "branch_internal": (network.branch_internal[network.branch_internal >= 0], n_line),
            "branch_from": (network.branch_from, n),
            "branch_to": (network.branch_to, n),
        },
        finite={k: values[k] for k in ("y_ff", "y_ft", "y_tf", "y_tt", "y_shunt", "v_base")},
    )
    return network
