"""Reading pandapower's bundled MATPOWER cases into a :class:`NetworkCase`.

The data are **not** stored in this repository: they come from the MATPOWER case files
(``case5.m``, ``case14.m``, ``case118.m``; MATPOWER is BSD-licensed) as shipped, already
converted, inside pandapower (``pandapower.networks.case5`` / ``case14`` / ``case118``).
pandapower is imported only inside the functions, so importing this module is cheap.

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
* ``bus_vn_kv`` is each bus's base voltage (MATPOWER ``BASE_KV``, pandapower ``vn_kv``).
* ``bus_pd_mw`` is the fixed net active demand per bus: loads, minus non-dispatchable static
  generators, plus shunt conductance (MATPOWER's ``GS`` acts as a load in DC models).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from powerzoo.physics.network import NetworkCase

__all__ = ["case_from_pandapower", "read_pandapower_case"]

# pandapower's from_ppc writes this value for MATPOWER RATE_A == 0 (unlimited)
_PP_UNLIMITED = 99999.0


def read_pandapower_case(name: str) -> NetworkCase:
    """Build case ``name`` (a ``pandapower.networks`` function, e.g. ``"case118"``) from
    pandapower's MATPOWER conversion; takes seconds (pandapower import and conversion)."""
    import pandapower.networks as pn

    with _quiet_pandapower():
        net = getattr(pn, name)()
    return case_from_pandapower(net, name)


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


def case_from_pandapower(net, name: str) -> NetworkCase:
    """Convert a pandapower net (MATPOWER-derived, lines + 2-winding trafos) to a case.

    Raises ``NotImplementedError`` for elements the DC model does not cover (see the module
    docstring).
    """
    from pandapower.converter.pypower.to_ppc import to_ppc
    from pandapower.pypower.idx_brch import BR_STATUS, BR_X, F_BUS, SHIFT, T_BUS, TAP

    for table in ("trafo3w", "dcline", "switch", "xward", "ward", "storage"):
        if table in net and len(net[table]) > 0:
            raise NotImplementedError(f"{name}: pandapower table {table!r} is not supported")
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

    # --- branches: lines, then trafos, then impedances (series elements), as in the ppc
    branch = np.real(np.asarray(ppc["branch"]))
    n_line, n_trafo, n_imp = len(net.line), len(net.trafo), len(net.impedance)
    if branch.shape[0] != n_line + n_trafo + n_imp:
        raise NotImplementedError(f"{name}: unexpected ppc branch count {branch.shape[0]}")
    line_rng = lookups["branch"].get("line", (0, 0))
    trafo_rng = lookups["branch"].get("trafo", (n_line, n_line))
    imp_rng = lookups["branch"].get("impedance", (n_line + n_trafo,) * 2)
    if (
        tuple(line_rng) != (0, n_line)
        or tuple(trafo_rng) != (n_line, n_line + n_trafo)
        or tuple(imp_rng) != (n_line + n_trafo, n_line + n_trafo + n_imp)
    ):
        raise NotImplementedError(f"{name}: unexpected ppc branch layout {lookups['branch']}")
    shift_deg = branch[:, SHIFT].copy()

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
    imp_rate = np.full(n_imp, np.inf)  # pandapower impedances carry no rating
    rate_a_mw = np.round(np.concatenate([line_rate, trafo_rate, imp_rate]), 6)

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
    poly = _cost_rows(net.poly_cost)
    pwl = _cost_rows(net.pwl_cost)
    uncosted = np.zeros(n_gen, dtype=bool)
    for g, (_, _, elem, et) in enumerate(rows):
        rec = net[et].loc[elem]
        pmin[g] = _number(rec, "min_p_mw", 0.0)
        pmax[g] = _number(rec, "max_p_mw", np.nan)
        gen_on[g] = bool(rec.in_service)
        if (et, elem) in poly:
            i = poly[(et, elem)]
            c2[g] = float(net.poly_cost.cp2_eur_per_mw2.iloc[i])
            c1[g] = float(net.poly_cost.cp1_eur_per_mw.iloc[i])
            c0[g] = float(net.poly_cost.cp0_eur.iloc[i])
        elif (et, elem) in pwl:
            c1[g] = pwl_chord_slope(net.pwl_cost.points.iloc[pwl[(et, elem)]])
        else:
            uncosted[g] = True
    c1[uncosted] = default_marginal_cost(c1[~uncosted])

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

    # units published without a maximum output can serve the whole demand
    pmax[np.isnan(pmax)] = max(float(bus_pd_mw.sum()), 0.0)
    return NetworkCase(
        name=name,
        base_mva=float(net.sn_mva),
        bus_id=bus_index.astype(np.int64),
        slack_bus=int(pos_of_bus[int(net.ext_grid.bus.iloc[0])]),
        bus_pd_mw=bus_pd_mw,
        bus_vn_kv=net.bus.vn_kv.to_numpy(dtype=float),
        branch_from_bus=from_bus,
        branch_to_bus=to_bus,
        branch_x_pu=x_pu,
        branch_tap=tap,
        branch_rate_a_mw=rate_a_mw,
        branch_in_service=in_service,
        branch_is_trafo=np.r_[
            np.zeros(n_line, dtype=bool), np.ones(n_trafo, dtype=bool), np.zeros(n_imp, bool)
        ],
        branch_element=np.r_[
            net.line.index.to_numpy(), net.trafo.index.to_numpy(), net.impedance.index.to_numpy()
        ].astype(np.int64),
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
        branch_shift_deg=shift_deg,
    )


DEFAULT_COST_PER_MWH = 20.0  # linear cost of a unit when no unit of the case has a cost


def _cost_rows(table) -> dict[tuple[str, int], int]:
    """``(element type, element) -> row`` of a pandapower cost table."""
    return {
        (str(et), int(el)): i
        for i, (et, el) in enumerate(zip(table.et, table.element, strict=True))
    }


def _number(record, column: str, default: float) -> float:
    """``record[column]`` as a float, ``default`` where the column is missing or NaN."""
    value = record.get(column, default) if hasattr(record, "get") else default
    value = float(value) if value is not None else default
    return default if math.isnan(value) else value


def pwl_chord_slope(points) -> float:
    """Linear cost [$ per MWh] of a piecewise-linear cost curve: the slope of the chord from
    its first to its last point (pandapower ``points``: ``[[p0, p1, slope], ...]`` rows, the
    cost between ``p0`` and ``p1`` MW rising by ``slope`` $/MWh), i.e. the average marginal
    cost over the curve's range."""
    rows = np.asarray(points, dtype=float).reshape(-1, 3)
    width = rows[:, 1] - rows[:, 0]
    total = float(width.sum())
    return float((width * rows[:, 2]).sum() / total) if total > 0 else float(rows[0, 2])


def default_marginal_cost(costed_c1: np.ndarray) -> float:
    """Linear cost [$ per MWh] of a unit the case publishes no cost for: the median linear cost
    of the case's costed units, else :data:`DEFAULT_COST_PER_MWH`."""
    costed = np.asarray(costed_c1, dtype=float)
    return float(np.median(costed)) if costed.size else DEFAULT_COST_PER_MWH
