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

**LP** (one episode, the steps left): PV output, inverter reactive power and charging power per
step; per home, import and export (``import - export = net demand``) priced at the tariff and
the export rate; per car, the energy short of its goal at departure at 0.60 $/kWh and the
battery's ceiling; voltages within ``[0.9 + m, 1.1 - m]`` (``m = oracle_margin_pu``) and branch
powers within their limits less 3 %, each with a slack priced far above any bill (so the LP
is always feasible and a violation is reported, not hidden).

**Passes.** The first reference point is PV at full output with no charging; each further pass
re-linearises at the exact flow of the previous plan, keeping the lowest ``I_max`` of the passes
so far (the voltages move with the plan; the limits only tighten, so the passes do not cycle).
The first plan whose exact flow keeps every customer voltage in the band and charges no
``thermal_overload`` is returned, else the best of the passes (at most :data:`MAX_PASSES`). The
unbalance limit is not in the LP: it is
checked with the exact flow like the rest (the plans keep it; the task card reports it).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from powerzoo.tasks.lv_unbalance.homes import EXPORT_PER_KWH, HORIZON, UNMET_PER_KWH
from powerzoo.tasks.lv_unbalance.network import V_HIGH_PU, V_LOW_PU, LvNetwork

__all__ = ["MAX_PASSES", "voltage_sensitivities", "branch_groups", "plan_day"]

MAX_PASSES = 4
THERMAL_MARGIN = 0.03  # branch currents planned within 97 % of their limit
VOLTAGE_PENALTY = 1e4  # $ per p.u. outside the planned band, per customer and step
THERMAL_PENALTY = 10.0  # $ per kVA above the planned branch limit, per step
Q_COST = 1e-4  # $ per kvar and step: keeps the reactive power at 0 where it does not matter
NOMINAL_KV = 0.23


@functools.lru_cache(maxsize=1)
def _sensitivities(net: LvNetwork) -> tuple[np.ndarray, np.ndarray]:
    n = net.n_homes
    p = np.zeros((1 + 2 * n, n))
    q = np.zeros((1 + 2 * n, n))
    p[1 + np.arange(n), np.arange(n)] = 1.0
    q[1 + n + np.arange(n), np.arange(n)] = 1.0
    v = net.home_v_pu(net.solve(p, q))
    return (v[1 : 1 + n] - v[0]).T.copy(), (v[1 + n :] - v[0]).T.copy()


def voltage_sensitivities(net: LvNetwork) -> tuple[np.ndarray, np.ndarray]:
    """``(dv/dp, dv/dq)``, each [n_homes, n_homes]: p.u. per kW (kvar) of net demand of home
    ``j`` at customer ``i``'s own phase, at the no-load point."""
    return _sensitivities(net)


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


def _step_block(
    task: Any, lay: _Layout, dev: np.ndarray, groups: tuple, sp_: np.ndarray, sq_: np.ndarray
):
    """One step's inequality rows (voltages high, low; branch powers up, down) and balance rows,
    the same for every step; the voltage rows' coefficients on ``(pv, q+, q-, ch)``."""
    homes, n = task.homes, task.net.n_homes
    pvh, evh = homes.pv_homes, homes.ev_homes
    coef = np.zeros((n, lay.width))
    coef[:, lay.pv] = -sp_[:, pvh]
    coef[:, lay.qp] = -sq_[:, pvh]
    coef[:, lay.qm] = sq_[:, pvh]
    coef[:, lay.ch] = sp_[:, evh]
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


def _violation(fc: Any) -> float:
    """Exact-flow ``voltage_violation`` (p.u.) plus ``thermal_overload`` (MVAh) of a plan's
    steps."""
    return float(fc.costs[:, 0].sum() + fc.costs[:, 2].sum())


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
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
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
