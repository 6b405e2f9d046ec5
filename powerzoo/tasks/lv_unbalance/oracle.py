"""The perfect-foresight oracle of ``lv_unbalance``: a day plan from a short sequence of LPs on
HiGHS, each over a linearisation of the exact three-phase flow, and checked with it.

**Linear model.** Customer voltages move with the homes' net demand through sensitivities
``dv_i / dp_j`` and ``dv_i / dq_j`` taken by finite differences (1 kW, 1 kvar) of the exact flow
at the feeder's no-load point (:func:`voltage_sensitivities`); a plan's voltages are those of
the exact flow at a reference operating point plus the sensitivities times the change from it.
Branch currents are bounded through the complex power carried by each branch phase (the net
demand of the homes downstream on that phase): ``|S| <= I_max / alpha`` with ``alpha`` the
ratio of the exact current to that power at the reference point (``1 / V`` for a lossless
branch), the reactive part held at the reference point's. The current limit
``I_max = I_rated / max(|V| / V_nominal, 1)``, with the branch's phase voltage ``|V|`` at the
reference point, keeps both the current within its rating and the phase's ``|V| x |I|``
within ``I_rated x V_nominal``, the rating ``thermal_overload`` is charged against. Branches
with the same downstream homes are one constraint (the lowest ``I_max`` among them); a branch
whose downstream homes cannot load it to 90 % of its rating at the band's top voltage
(1.1 p.u.) is left out.

**Unbalance.** The unbalance factor ``|V2| / |V1|`` of a customer's bus is linearised as the
complex ratio ``w = V2 / V1``: its value at the reference point plus
``(dV2 - w dV1) / V1`` for the plan's change, with the complex sequence-voltage sensitivities
``dV1 / dp_j``, ``dV1 / dq_j``, ``dV2 / dp_j``, ``dV2 / dq_j`` taken from the same
finite-difference flows as the voltage ones (:func:`sequence_sensitivities`). The disc
``|w| <= 2 % - 0.2 %`` is replaced by the 12-sided polygon inside it
(``Re(w exp(-j 2 pi k / 12)) <= 1.8 % x cos(pi / 12)``, ``k = 0..11``), with one priced slack
per bus and step. Only the (step, bus) pairs that some pass's exact flow has shown within
0.6 % of the limit (1.4 % VUF) carry the rows, so the LP stays small; a pair that the plan
pushes past the limit unseen is caught by the exact flow and enters the next pass.

**LP** (one episode, the steps left): PV output, inverter reactive power and charging power per
step; per home, import and export (``import - export = net demand``) priced at the tariff and
the export rate; per car, the energy short of its goal at departure at 0.60 $/kWh and the
battery's ceiling; voltages within ``[0.9 + m, 1.1 - m]`` (``m = oracle_margin_pu``), branch
powers within their limits less 3 % and the unbalance polygons, each with a slack priced far
above any bill (so the LP is always feasible and a violation is reported, not hidden).

**Passes.** The first reference point is PV at full output with no charging; each further pass
re-linearises at the exact flow of the previous plan, keeping the lowest ``I_max`` of the passes
so far (the voltages move with the plan; the limits only tighten, so the passes do not cycle).
The first plan whose exact flow keeps every customer voltage in the band and charges no
``voltage_unbalance`` and no ``thermal_overload`` is returned, else the best of the passes (at
most :data:`MAX_PASSES`). On the 65 test days the plans keep every budget; their largest
unbalance factor is 0.9-1.5 % a day (the trunk's rating on phase A binds first, so the polygon rows
seldom do; with the limit set to 1.2 % they hold the plan under it at almost no cost).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from powerzoo.tasks.lv_unbalance.homes import EXPORT_PER_KWH, HORIZON, UNMET_PER_KWH
from powerzoo.tasks.lv_unbalance.network import V_HIGH_PU, V_LOW_PU, VUF_LIMIT_PCT, LvNetwork

__all__ = [
    "MAX_PASSES",
    "voltage_sensitivities",
    "sequence_sensitivities",
    "branch_groups",
    "plan_day",
]

MAX_PASSES = 4
THERMAL_MARGIN = 0.03  # branch currents planned within 97 % of their limit
VOLTAGE_PENALTY = 1e4  # $ per p.u. outside the planned band, per customer and step
VUF_MARGIN_PCT = 0.2  # unbalance planned within 2 - 0.2 = 1.8 %
VUF_SCREEN_BAND_PCT = 0.6  # a (step, bus) enters the LP once an exact flow shows VUF this close
# to the limit (1.4 %)
VUF_SIDES = 12  # sides of the polygon inside the disc |V2 / V1| <= limit
VUF_PENALTY = 1e4  # $ per unit of V2 / V1 outside the polygon (100 $ per %), per bus and step
THERMAL_PENALTY = 10.0  # $ per kVA above the planned branch limit, per step
Q_COST = 1e-4  # $ per kvar and step: keeps the reactive power at 0 where it does not matter
NOMINAL_KV = 0.23


@functools.lru_cache(maxsize=1)
def _probe(net: LvNetwork) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact flows of the no-load point and of 1 kW, then 1 kvar, at each home in turn
    (``1 + 2 n`` rows): customer voltages [p.u.] and sequence voltages ``V1``, ``V2`` [V]."""
    n = net.n_homes
    p = np.zeros((1 + 2 * n, n))
    q = np.zeros((1 + 2 * n, n))
    p[1 + np.arange(n), np.arange(n)] = 1.0
    q[1 + n + np.arange(n), np.arange(n)] = 1.0
    result = net.solve(p, q)
    return (net.home_v_pu(result), *net.sequence_voltages(result.v_node))


def _differences(x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-kW and per-kvar changes [n_homes (where), n_homes (who)] of a probed quantity."""
    return (x[1 : 1 + n] - x[0]).T.copy(), (x[1 + n :] - x[0]).T.copy()


def voltage_sensitivities(net: LvNetwork) -> tuple[np.ndarray, np.ndarray]:
    """``(dv/dp, dv/dq)``, each [n_homes, n_homes]: p.u. per kW (kvar) of net demand of home
    ``j`` at customer ``i``'s own phase, at the no-load point."""
    return _differences(_probe(net)[0], net.n_homes)


def sequence_sensitivities(
    net: LvNetwork,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``((dV1/dp, dV1/dq), (dV2/dp, dV2/dq))``, each [n_homes, n_homes] complex: V per kW
    (kvar) of net demand of home ``j`` in the positive- and negative-sequence voltage at
    customer ``i``'s bus, at the no-load point."""
    _, v1, v2 = _probe(net)
    return _differences(v1, net.n_homes), _differences(v2, net.n_homes)


def _tree(net: LvNetwork) -> tuple[list[int], list[int]]:
    """Side-1 and side-2 bus of every branch."""
    f = net.feeder
    b1, b2 = [-1] * len(f.branch_names), [-1] * len(f.branch_names)
    for branch, node, side in zip(f.terminal_branch, f.terminal_node, f.terminal_side, strict=True):
        if node < 0:
            continue
        bus = int(f.node_bus[node])
        if side == 1:
            b1[branch] = bus
        else:
            b2[branch] = bus
    return b1, b2


@functools.lru_cache(maxsize=2)
def branch_groups(
    net: LvNetwork, max_home_kw: float
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """``(homes, branches)``: per constrained branch phase, the homes downstream on that phase
    and the branches carrying exactly them; only those that homes drawing or exporting
    ``max_home_kw`` each could load to 90 % of their ``|V| x |I|`` rating at 1.1 p.u."""
    f = net.feeder
    b1, b2 = _tree(net)
    lines = [k for k, name in enumerate(f.branch_names) if name.startswith("line.")]
    parent_line = {b2[k]: k for k in lines}
    home_bus = f.node_bus[net.home_node]
    below: dict[int, set[int]] = {k: set() for k in lines}
    for home, bus in enumerate(home_bus):  # walk up from each home to the transformer
        bus = int(bus)
        while bus in parent_line:
            k = parent_line[bus]
            below[k].add(home)
            bus = b1[k]
    members: dict[tuple[int, ...], list[int]] = {}
    for k in lines:
        for phase in range(3):
            key = tuple(sorted(h for h in below[k] if net.home_phase[h] == phase))
            rating = float(net.rating_a[k])
            if not key or len(key) * max_home_kw / NOMINAL_KV < 0.9 * rating / V_HIGH_PU:
                continue
            members.setdefault(key, []).append(k)
    return (
        tuple(np.asarray(key) for key in members),
        tuple(np.asarray(branches, dtype=np.int64) for branches in members.values()),
    )


def _current_limit_a(
    net: LvNetwork, result: Any, branches: tuple[np.ndarray, ...], phase: np.ndarray
) -> np.ndarray:
    """[T, n_groups] the current [A] each group's phase may carry at the flow ``result``'s
    voltages: the lowest ``I_rated / max(|V| / V_nominal, 1)`` over the group's branches."""
    v_nominal = 1000.0 * net.rating_kva / net.rating_a  # [V] phase to ground, per branch
    out = np.empty((result.v_node.shape[0], len(branches)))
    for g, (members, ph) in enumerate(zip(branches, phase, strict=True)):
        v_pu = np.abs(result.v_node[:, net.side1_node[members, ph]]) / v_nominal[members]
        out[:, g] = np.min(net.rating_a[members] / np.maximum(v_pu, 1.0), axis=1)
    return out


class _Layout:
    """Column offsets of one step's variables (``pv, q+, q-, ch, import, export, voltage slacks
    low and high, thermal slacks``); the cars' shortfalls follow every step's block."""

    def __init__(self, n_pv: int, n_ev: int, n_dev: int, n_homes: int, n_groups: int) -> None:
        sizes = (n_pv, n_pv, n_pv, n_ev, n_dev, n_dev, n_homes, n_homes, n_groups)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        self.pv, self.qp, self.qm, self.ch, self.imp, self.exp, self.svl, self.svh, self.sth = (
            slice(int(a), int(b)) for a, b in zip(offsets[:-1], offsets[1:], strict=True)
        )
        self.width = int(offsets[-1])


def _device_coef(homes: Any, lay: _Layout, d_p: np.ndarray, d_q: np.ndarray) -> np.ndarray:
    """[rows, width] change of a quantity per unit of one step's ``(pv, q+, q-, ch)`` from its
    changes ``d_p``, ``d_q`` [rows, n_homes] per kW and kvar of net demand (zero elsewhere)."""
    pvh, evh = homes.pv_homes, homes.ev_homes
    coef = np.zeros((d_p.shape[0], lay.width), dtype=np.result_type(d_p, d_q))
    coef[:, lay.pv] = -d_p[:, pvh]
    coef[:, lay.qp] = -d_q[:, pvh]
    coef[:, lay.qm] = d_q[:, pvh]
    coef[:, lay.ch] = d_p[:, evh]
    return coef


def _step_block(
    task: Any, lay: _Layout, dev: np.ndarray, groups: tuple, sp_: np.ndarray, sq_: np.ndarray
):
    """One step's inequality rows (voltages high, low; branch powers up, down) and balance rows,
    the same for every step; the voltage rows' coefficients on ``(pv, q+, q-, ch)``."""
    homes, n = task.homes, task.net.n_homes
    pvh, evh = homes.pv_homes, homes.ev_homes
    coef = _device_coef(homes, lay, sp_, sq_)
    up, down = coef.copy(), -coef
    up[np.arange(n), lay.svh.start + np.arange(n)] = -1.0
    down[np.arange(n), lay.svl.start + np.arange(n)] = -1.0
    power = np.zeros((len(groups), lay.width))
    for g, members in enumerate(groups):
        power[g, lay.pv.start + np.flatnonzero(np.isin(pvh, members))] = -1.0
        power[g, lay.ch.start + np.flatnonzero(np.isin(evh, members))] = 1.0
    slack = np.zeros((len(groups), lay.width))
    slack[np.arange(len(groups)), lay.sth.start + np.arange(len(groups))] = -1.0
    a_ub = np.vstack([up, down, power + slack, -power + slack])
    balance = np.zeros((dev.size, lay.width))
    rows = np.arange(dev.size)
    balance[rows, lay.imp.start + rows] = 1.0
    balance[rows, lay.exp.start + rows] = -1.0
    balance[np.searchsorted(dev, pvh), lay.pv.start + np.arange(pvh.size)] = 1.0
    balance[np.searchsorted(dev, evh), lay.ch.start + np.arange(evh.size)] = -1.0
    return sp.csr_matrix(a_ub), sp.csr_matrix(balance), coef[:, : lay.imp.start]


def _unbalance_rows(
    lay: _Layout,
    n_var: int,
    pairs: np.ndarray,
    v_seq: tuple[np.ndarray, np.ndarray],
    seq_coef: tuple[np.ndarray, np.ndarray],
    point: np.ndarray,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """The polygon rows of the unbalance limit at the screened ``pairs`` [T, n_homes] of step
    and customer bus: ``A`` [K x n_pairs, n_var + n_pairs] (one slack per pair, after the other
    variables) and ``b``. ``v_seq``: the reference flow's ``(V1, V2)`` [T, n_homes] [V];
    ``seq_coef``: ``V1`` and ``V2`` per unit of a step's ``(pv, q+, q-, ch)`` [n_homes, ncol];
    ``point``: those variables at the reference [T, ncol]."""
    t, i = np.nonzero(pairs)
    v1, w0 = v_seq[0][t, i], v_seq[1][t, i] / v_seq[0][t, i]
    grad = (seq_coef[1][i] - w0[:, None] * seq_coef[0][i]) / v1[:, None]  # d(V2 / V1)
    rot = np.exp(-2j * np.pi * np.arange(VUF_SIDES) / VUF_SIDES)
    a = (rot[None, :, None] * grad[:, None, :]).real  # [P, K, ncol]
    radius = (VUF_LIMIT_PCT - VUF_MARGIN_PCT) / 100.0 * np.cos(np.pi / VUF_SIDES)
    b = radius - (rot[None, :] * w0[:, None]).real + np.einsum("pkc,pc->pk", a, point[t])
    n_pair, ncol = grad.shape
    rows = np.arange(n_pair * VUF_SIDES)
    cols = np.broadcast_to((t * lay.width)[:, None, None] + np.arange(ncol), a.shape)
    slack = n_var + np.repeat(np.arange(n_pair), VUF_SIDES)
    matrix = sp.csr_matrix(
        (
            np.concatenate([a.ravel(), np.full(rows.size, -1.0)]),
            (np.concatenate([np.repeat(rows, ncol), rows]), np.concatenate([cols.ravel(), slack])),
        ),
        shape=(rows.size, n_var + n_pair),
    )
    return matrix, b.ravel()


def _violation(fc: Any) -> float:
    """Exact-flow ``voltage_violation`` (p.u.), ``voltage_unbalance`` (%) and
    ``thermal_overload`` (MVAh) of a plan's steps."""
    return float(fc.costs.sum())


def plan_day(task: Any, state: Any, row: int) -> np.ndarray:
    """Perfect-foresight joint actions [H, act_dim] of row ``row`` from its current step
    (module docstring); rows before the current step hold the idle action."""
    homes, net, p = task.homes, task.net, task.params
    t0 = int(state.t[row])
    steps = np.arange(t0, HORIZON)
    n_t = steps.size
    load, avail = task.exogenous(np.full(n_t, state.day_id[row]), steps)
    arrive, depart = state.arrive[row], state.depart[row]
    plugged = (steps[:, None] >= arrive) & (steps[:, None] < depart)
    fleet, dt = task.fleet, task.spec.dt_h
    dev = np.union1d(homes.pv_homes, homes.ev_homes)
    groups, branches = branch_groups(net, p.charger_kw + 5.0)
    phase = np.array([net.home_phase[g[0]] for g in groups])
    branch = np.array([members[0] for members in branches])  # carries the group's current
    sp_, sq_ = voltage_sensitivities(net)
    lay = _Layout(homes.n_pv, homes.n_ev, dev.size, net.n_homes, len(groups))
    a_blk, eq_blk, v_coef = _step_block(task, lay, dev, groups, sp_, sq_)
    seq_coef = tuple(
        _device_coef(homes, lay, *d)[:, : lay.imp.start] for d in sequence_sensitivities(net)
    )
    pairs = np.zeros((n_t, net.n_homes), dtype=bool)  # (step, bus) under the unbalance limit
    n_var = n_t * lay.width + homes.n_ev
    eye = sp.identity(n_t, format="csr")
    # the cars: battery ceiling and shortfall against the goal, over the steps they are plugged
    car_cols = (np.arange(n_t)[:, None] * lay.width + lay.ch.start + np.arange(homes.n_ev)).ravel()
    car_rows = np.tile(np.arange(homes.n_ev), n_t)
    gain = fleet.charge_efficiency * dt
    charged = sp.csr_matrix(
        (np.full(car_cols.size, gain), (car_rows, car_cols)), shape=(homes.n_ev, n_var)
    )
    short = sp.csr_matrix(
        (
            np.full(homes.n_ev, -1.0),
            (np.arange(homes.n_ev), n_t * lay.width + np.arange(homes.n_ev)),
        ),
        shape=(homes.n_ev, n_var),
    )
    energy = state.energy_kwh[row]
    a_ub = sp.vstack(
        [
            sp.hstack([sp.kron(eye, a_blk), sp.csr_matrix((n_t * a_blk.shape[0], homes.n_ev))]),
            charged,
            -charged + short,
        ],
        format="csr",
    )
    a_eq = sp.hstack(
        [sp.kron(eye, eq_blk), sp.csr_matrix((n_t * dev.size, homes.n_ev))], format="csr"
    )
    b_eq = load[:, dev].ravel()
    tariff = task._tariff[steps]
    cost = np.zeros((n_t, lay.width))
    cost[:, lay.qp] = cost[:, lay.qm] = Q_COST
    cost[:, lay.imp] = tariff[:, None] * dt
    cost[:, lay.exp] = -EXPORT_PER_KWH * dt
    cost[:, lay.svl] = cost[:, lay.svh] = VOLTAGE_PENALTY
    cost[:, lay.sth] = THERMAL_PENALTY
    c = np.concatenate([cost.ravel(), np.full(homes.n_ev, UNMET_PER_KWH)])
    lo = np.zeros((n_t, lay.width))
    hi = np.full((n_t, lay.width), np.inf)
    hi[:, lay.pv] = avail
    hi[:, lay.qp] = hi[:, lay.qm] = homes.q_max_kvar
    hi[:, lay.ch] = plugged * p.charger_kw
    bounds = np.stack(
        [
            np.concatenate([lo.ravel(), np.zeros(homes.n_ev)]),
            np.concatenate([hi.ravel(), np.full(homes.n_ev, np.inf)]),
        ],
        axis=1,
    )
    v_lo, v_hi = V_LOW_PU + p.oracle_margin_pu, V_HIGH_PU - p.oracle_margin_pu
    x_pv, x_q, x_ch = avail.copy(), np.zeros_like(avail), np.zeros((n_t, homes.n_ev))
    plan = best = i_max = None
    best_score = np.inf
    for _ in range(MAX_PASSES + 1):
        pn, qn = task.net_demand(load, x_pv, x_q, x_ch)
        result = net.solve(pn, qn)
        fc = net.costs(result, dt)
        if plan is not None:
            score = _violation(fc)
            if score < best_score:
                best, best_score = plan, score
            if score <= 0.0:
                break
        point = np.concatenate([x_pv, np.maximum(x_q, 0.0), np.maximum(-x_q, 0.0), x_ch], axis=1)
        v0 = fc.v_pu - point @ v_coef.T  # [T, n_homes] voltage with the variables at zero
        s_ref = np.stack([(pn[:, g] + 1j * qn[:, g]).sum(axis=1) for g in groups], axis=1)
        i_ref = result.branch_current_a[:, branch, phase]
        alpha = np.where(
            np.abs(s_ref) > 1.0, i_ref / np.maximum(np.abs(s_ref), 1.0), 1.0 / NOMINAL_KV
        )
        limit = _current_limit_a(net, result, branches, phase)
        i_max = limit if i_max is None else np.minimum(i_max, limit)  # only ever tightens
        s_max = i_max * (1.0 - THERMAL_MARGIN) / alpha
        p_max = np.sqrt(np.maximum(s_max**2 - s_ref.imag**2, 0.0))
        p_fixed = np.stack([load[:, g].sum(axis=1) for g in groups], axis=1)
        b_blk = np.concatenate([v_hi - v0, v0 - v_lo, p_max - p_fixed, p_max + p_fixed], axis=1)
        b_ub = np.concatenate([b_blk.ravel(), fleet.max_kwh - energy, energy - state.goal_kwh[row]])
        pairs |= fc.vuf_pct >= VUF_LIMIT_PCT - VUF_SCREEN_BAND_PCT  # once screened in, kept
        a_vuf, b_vuf = _unbalance_rows(
            lay, n_var, pairs, net.sequence_voltages(result.v_node), seq_coef, point
        )
        n_s = a_vuf.shape[1] - n_var
        res = linprog(
            np.concatenate([c, np.full(n_s, VUF_PENALTY)]),
            A_ub=sp.vstack([sp.hstack([a_ub, sp.csr_matrix((a_ub.shape[0], n_s))]), a_vuf]),
            b_ub=np.concatenate([b_ub, b_vuf]),
            A_eq=sp.hstack([a_eq, sp.csr_matrix((a_eq.shape[0], n_s))]),
            b_eq=b_eq,
            bounds=np.vstack([bounds, np.tile([0.0, np.inf], (n_s, 1))]),
            method="highs",
        )
        if res.status != 0:
            break
        x = res.x[: n_t * lay.width].reshape(n_t, lay.width)
        x_pv, x_q, x_ch = x[:, lay.pv], x[:, lay.qp] - x[:, lay.qm], x[:, lay.ch]
        plan = (x_pv.copy(), x_q.copy(), x_ch.copy())
    if plan is not None and best is None:
        best = plan
    out = np.tile(np.asarray(task.spec.idle_action, dtype=np.float64), (HORIZON, 1))
    if best is not None:
        x_pv, x_q, x_ch = best
        out[t0:, task._pv_limit] = np.clip(x_pv / homes.pv_kw, 0.0, 1.0)
        out[t0:, task._pv_q] = np.clip(x_q, -homes.q_max_kvar, homes.q_max_kvar)
        out[t0:, task._ev] = np.clip(x_ch, 0.0, p.charger_kw)
    return out
