"""Baselines of ``marl_ev_v2g``: the rule-based charging of each car, and the oracle LP of the week.

Rule (:func:`rule_powers_kw`, per car, from what the observation shows): valley filling: a
plugged-in car charges what it needs to hold its goal (plus ``RULE_MARGIN_KWH``) evenly over the
hours until it leaves, and at least what full-power charging over its remaining hours could no
longer make up; in the peak hours (:func:`peak_hours`: the dearest hours of the average day),
when the price pays for the V2G wear and the losses (:func:`v2g_pays`), it discharges what lies
above ``RESERVE_SOC`` and above what charging at ``REFILL_SHARE`` (40 %) of the charger's rating
over its remaining hours could bring back, and charges only what it must to still reach its
goal. So it never misses a goal that could be met, and the fleet's charging is spread over the
night instead of piled on the evening peak.

Oracle: one linear program for the rest of the week, with perfect foresight.

The LP (HiGHS through ``scipy.optimize.linprog``) knows every car's trips, the prices and the
feeder's loads. Variables, for every car and every step it is plugged in: charge ``c`` and
discharge ``d`` in [0, 7.2] kW and the energy ``e`` after the step in [soc_min, soc_max] x
capacity; per site and step the net charging power ``P`` (MW); per departure a shortfall slack;
per arrival a slack for trip energy the battery could not supply; per voltage row a slack.

* Energy: ``e_t = e_{t-1} + eta_c c_t dt - d_t dt / eta_d`` within a session; the first step of a
  session starts from the energy the car left with minus its trip (or, for the session under way,
  from the state's energy).
* Departures: ``e`` at the last plugged step + slack >= the goal (the state's goal for the session
  under way, else the 80 % target; the end of the week counts as a departure), slack priced at
  ``SHORTFALL_PENALTY`` $/kWh: the plan misses a target only where even full-power charging cannot
  reach it, which the env's goal forgives.
* Voltage band on LinDistFlow: squared voltages of the exact flow of the week's loads with the
  fleet idle plus ``sum_sites P x d(v^2)/dP``
  (:func:`powerzoo.tasks.feeder.voltage_sq_sensitivity`),
  kept in [0.951, 1.049] p.u. with slacks priced as the other feeder oracles
  (:data:`powerzoo.tasks.feeder.ORACLE_VOLTAGE_PENALTY`); rows only where the band could be left.
* Settlement: per site, the cars' energy at the end (the last plugged step's ``e``, less the
  trip energy drawn after it by a car still away) - surplus + deficit = the site's energy at
  reset; the surplus earns ``eta_d m``, the deficit costs ``m / eta_c`` ($/MWh, ``m`` the week's
  mean price), as the env's settlement.
* Objective: minimise ``sum price x (c - d) dt / 1000`` plus the V2G wear on ``d``
  (:attr:`~powerzoo.devices.ev_fleet.EVFleetParams.v2g_wear_per_kwh`), minus the settlement,
  plus the penalties.

The plan (``d - c`` per car and step, kW) is then applied and scored under the exact power flow.
A week of the default fleet is an LP of about 39,000 variables, 14,500 rows and 81,000 nonzeros;
HiGHS solves it in 0.4 to 0.5 s on one core (``benchmarks/compute_baselines.py`` reports the
seconds per policy: the 35 test weeks planned and stepped in about half a minute on a busy
machine).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from powerzoo.data import calendar
from powerzoo.data.markets import DEFAULT_MARKET
from powerzoo.data.profiles import get_profiles
from powerzoo.devices.ev_fleet import EVFleetParams
from powerzoo.tasks.feeder import (
    ORACLE_BAND_MARGIN_PU,
    ORACLE_VOLTAGE_PENALTY,
    V_MAX_PU,
    V_MIN_PU,
    voltage_sq_sensitivity,
)

__all__ = [
    "peak_hours",
    "rule_powers_kw",
    "solve_week",
    "v2g_pays",
    "REFILL_SHARE",
    "RESERVE_SOC",
    "SHORTFALL_PENALTY",
    "UNSERVED_PENALTY",
]

RESERVE_SOC = 0.5  # rule: V2G never below this SOC
RULE_MARGIN_KWH = 1e-3  # rule: charge this much past the goal (float32 observations)
# rule: V2G sells only what charging at this share of the charger's rating (2.9 kW of 7.2)
# over the car's remaining hours brings back, so the refill after the peak stays a valley fill
# (at the full rating the refill of the last evening of a week overloads the trunk)
REFILL_SHARE = 0.4

SHORTFALL_PENALTY = 1000.0  # $ per kWh below a departure goal: above any voltage slack it could buy
UNSERVED_PENALTY = 1000.0  # $ per kWh of trip energy the battery could not supply


def peak_hours(k: int, step_minutes: int = 60, market: str = DEFAULT_MARKET) -> np.ndarray:
    """Mask [steps per day] of the ``k`` dearest steps of the average day (train days of the base
    prices of ``market``)."""
    profiles = get_profiles("base", step_minutes, market)
    spd = profiles.steps_per_day
    price = profiles.series["price_per_mwh"][: calendar.N_DAYS * spd]
    mean_day = price.reshape(calendar.N_DAYS, spd)[calendar.split_day_indices("train")].mean(axis=0)
    mask = np.zeros(spd, dtype=bool)
    mask[np.argsort(mean_day, kind="stable")[-k:]] = True
    return mask


def v2g_pays(fleet: EVFleetParams, price: np.ndarray, reference_price: float) -> np.ndarray:
    """Whether selling a kWh by V2G at ``price`` ($/MWh) [B] beats keeping it (bool [B]): the sale
    less its wear must exceed buying the energy back at ``reference_price`` through both
    efficiencies, ``price - 1000 x v2g_wear_per_kwh > reference / (eta_c eta_d)``."""
    round_trip = fleet.charge_efficiency * fleet.discharge_efficiency
    return price - 1e3 * fleet.v2g_wear_per_kwh > reference_price / round_trip


def rule_powers_kw(
    fleet: EVFleetParams,
    plugged: np.ndarray,
    energy_kwh: np.ndarray,
    hours_to_departure: np.ndarray,
    energy_needed_kwh: np.ndarray,
    peak: np.ndarray,
    dt_h: float,
) -> np.ndarray:
    """The rule's power per car (kW, + discharge; module docstring); arrays broadcast together,
    ``peak`` (bool) marks the peak hours. ``energy_needed_kwh`` is goal - energy (< 0 above the
    goal), ``hours_to_departure`` the hours the car stays plugged in.

    Valley filling: a car charges its need evenly over the hours it stays (at least what
    full-power charging later could no longer make up); in the peak hours it sells what lies
    above ``RESERVE_SOC`` and above what charging at ``REFILL_SHARE`` of the charger's rating
    over its remaining hours brings back."""
    need = energy_needed_kwh + RULE_MARGIN_KWH
    per_step = fleet.charge_efficiency * dt_h  # kWh stored per kW over a step
    steps_after = np.maximum(hours_to_departure / dt_h - 1.0, 0.0)
    later = per_step * fleet.charge_max_kw * steps_after  # full power after now
    must = np.clip((need - later) / per_step, 0.0, fleet.charge_max_kw)
    even = need / (fleet.charge_efficiency * np.maximum(hours_to_departure, dt_h))
    charge = np.maximum(np.clip(even, 0.0, fleet.charge_max_kw), must)
    refill = later * REFILL_SHARE
    floor = (
        np.maximum(RESERVE_SOC * fleet.battery_kwh, energy_kwh + need - refill)
        + 10 * RULE_MARGIN_KWH
    )
    spare = np.clip(
        (energy_kwh - floor) * fleet.discharge_efficiency / dt_h, 0.0, fleet.discharge_max_kw
    )
    p = np.where(peak, np.where(must > 0.0, -must, spare), -charge)
    return np.where(plugged, p, 0.0)


def _plugged_steps(task: Any, state: Any, row: int) -> tuple[np.ndarray, np.ndarray]:
    """(car, step) of every plugged step from the state's step to the horizon, sorted by car then
    step."""
    steps = np.arange(int(state.t[row]), task.spec.horizon)
    day = np.minimum(steps // task.profiles.steps_per_day, state.leave.shape[1] - 1)
    plugged = (steps[:, None] < state.leave[row][day]) | (
        steps[:, None] >= state.back[row][day]
    )  # [T, N]
    car, t_idx = np.nonzero(plugged.T)
    return car, steps[t_idx]


def _settlement_rows(
    task: Any, state: Any, row: int, car: np.ndarray, t_abs: np.ndarray, ie: int
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], np.ndarray]:
    """Rows ``sum of the site's cars' last energy - surplus + deficit = energy at reset + trip
    energy drawn after the last plugged step`` (one per site): their row and column indices
    (relative: the energies' columns are absolute, the surplus and deficit columns are site
    indices), values and right-hand sides."""
    horizon, spd = task.spec.horizon, task.profiles.steps_per_day
    n_sites = task.n_sites
    last = np.flatnonzero(np.r_[car[1:] != car[:-1], True]) if car.size else car
    last_car, last_t = car[last], t_abs[last]
    # a car away at the end (back at midnight) has drawn its trip's energy from the step after
    leave = np.minimum(last_t + 1, horizon - 1)
    day = np.minimum(leave // spd, state.drive_kwh.shape[1] - 1)
    drawn = np.where(
        last_t < horizon - 1, state.drive_kwh[row][day, last_car] * (horizon - last_t - 1), 0.0
    )
    rhs = state.start_kwh[row] + np.bincount(
        last_car // task.per_site, weights=drawn, minlength=n_sites
    )
    sites = np.arange(n_sites)
    return (
        [last_car // task.per_site, sites, sites],
        [ie + last, sites, sites],
        [np.ones(last.size), -np.ones(n_sites), np.ones(n_sites)],
        rhs,
    )


def solve_week(task: Any, state: Any, row: int) -> np.ndarray:
    """Car powers [H, N] (kW, + discharge) planned from the state of batch row ``row`` (zeros before
    its step)."""
    fleet, dt = task.fleet, task.spec.dt_h
    horizon = task.spec.horizon
    n_sites, per_site, n_cars = task.n_sites, task.per_site, task.n_vehicles
    t0 = int(state.t[row])
    n_t = horizon - t0
    steps = np.arange(t0, horizon)
    flat = task.flat_index(np.full(n_t, state.day_id[row]), steps)
    price = task.grid.price_per_mwh.take(flat)
    p_load, q_load = task.grid.bus_loads(task.grid.demand_pu.take(flat))
    head = task.head_vm_pu(state, row)  # the tap the AVC holds
    v2_base = task.grid.solve(p_load, q_load, head_vm_pu=head).vm_pu ** 2  # [T, n_bus]

    car, t_abs = _plugged_steps(task, state, row)
    n_pair = car.size
    spd = task.profiles.steps_per_day
    first = np.ones(n_pair, dtype=bool)
    first[1:] = (car[1:] != car[:-1]) | (t_abs[1:] != t_abs[:-1] + 1)
    last = np.ones(n_pair, dtype=bool)
    last[:-1] = first[1:]
    # columns: c, d, e (pairs) | shortfall (sessions) | unserved (sessions) | P (sites x steps) |
    # voltage slacks
    ic, id_, ie = 0, n_pair, 2 * n_pair
    n_sess = int(last.sum())
    i_short = 3 * n_pair
    i_unserved = i_short + n_sess
    i_site = i_unserved + n_sess
    n_base = i_site + n_sites * n_t
    pair = np.arange(n_pair)

    # energy balance rows (one per pair): e_p - e_prev - eta_c dt c_p + dt/eta_d d_p [- u] = const
    rows = [pair, pair, pair]
    cols = [ie + pair, ic + pair, id_ + pair]
    vals = [
        np.ones(n_pair),
        np.full(n_pair, -fleet.charge_efficiency * dt),
        np.full(n_pair, dt / fleet.discharge_efficiency),
    ]
    const = np.zeros(n_pair)
    inner = ~first
    rows.append(pair[inner])
    cols.append(ie + pair[inner] - 1)
    vals.append(-np.ones(inner.sum()))
    first_idx = pair[first]
    first_car, first_t = car[first], t_abs[first]
    of_car = np.ones(first_idx.size, dtype=bool)
    of_car[1:] = first_car[1:] != first_car[:-1]  # the car's first session in the LP
    energy_now, drive = state.energy_kwh[row], state.drive_kwh[row]  # [N], [D+1, N]
    # a car's first session starts from its energy now, less what it still drives if it is away
    kc, kt = first_car[of_car], first_t[of_car]
    d0 = min(t0 // spd, drive.shape[0] - 1)
    const[first_idx[of_car]] = np.maximum(energy_now[kc] - drive[d0, kc] * (kt - t0), 0.0)
    # later sessions: from the previous session's last energy minus the day's trip, plus an unserved
    # slack
    later = first_idx[~of_car]
    lc, lt = car[later], t_abs[later]
    trip_day = lt // spd
    trip_kwh = drive[trip_day, lc] * (
        state.back[row][trip_day, lc] - state.leave[row][trip_day, lc]
    )
    rows += [later, later]
    cols += [ie + later - 1, i_unserved + np.searchsorted(np.flatnonzero(last), later - 1)]
    vals += [-np.ones(later.size), -np.ones(later.size)]
    const[later] = -trip_kwh

    # site power rows: P[s, t] - sum over the site's plugged cars (c - d) / 1000 = 0
    site_col = i_site + (car // per_site) * n_t + (t_abs - t0)
    n_eq1 = n_pair
    site_rows = n_eq1 + np.arange(n_sites * n_t)
    rows += [site_rows, n_eq1 + (site_col - i_site), n_eq1 + (site_col - i_site)]
    cols += [i_site + np.arange(n_sites * n_t), ic + pair, id_ + pair]
    vals += [np.ones(n_sites * n_t), np.full(n_pair, -1e-3), np.full(n_pair, 1e-3)]
    b_eq = np.concatenate([const, np.zeros(n_sites * n_t)])

    # departure rows: -e_last - s <= -goal (the state's goal for a car at home now, else the target)
    last_idx = pair[last]
    goal = np.full(n_sess, fleet.target_kwh)
    at_home = np.zeros(n_pair, dtype=bool)
    at_home[first_idx[of_car]] = kt == t0
    session_of_pair = np.cumsum(first) - 1
    home_sessions = session_of_pair[at_home]
    goal[home_sessions] = state.goal_kwh[row][car[at_home]]
    ub_rows = [np.arange(n_sess), np.arange(n_sess)]
    ub_cols = [ie + last_idx, i_short + np.arange(n_sess)]
    ub_vals = [-np.ones(n_sess), -np.ones(n_sess)]
    b_ub = [-goal]
    n_ub = n_sess

    # voltage rows on LinDistFlow, where the band could be left (appended after the base columns)
    sens = voltage_sq_sensitivity(task.grid.case, task.buses)  # [S, n_bus] per MW of demand
    site_mw = per_site * fleet.charge_max_kw * 1e-3
    bound = np.abs(sens).sum(axis=0) * site_mw  # [n_bus]
    lo, hi = (V_MIN_PU + ORACLE_BAND_MARGIN_PU) ** 2, (V_MAX_PU - ORACLE_BAND_MARGIN_PU) ** 2
    n_slack = 0
    for sign, need in ((1.0, v2_base - bound < lo), (-1.0, v2_base + bound > hi)):
        t_r, bus_r = np.nonzero(need)
        m = t_r.size
        if not m:
            continue
        r = n_ub + np.arange(m)
        # sign = +1: -(sum sens P) - slack <= base - lo; sign = -1: sum sens P - slack <= hi - base
        ub_rows += [np.repeat(r, n_sites), r]
        ub_cols += [
            (i_site + np.arange(n_sites)[None, :] * n_t + t_r[:, None]).ravel(),
            n_base + n_slack + np.arange(m),
        ]
        ub_vals += [(-sign * sens[:, bus_r].T).ravel(), -np.ones(m)]
        b_ub.append(v2_base[t_r, bus_r] - lo if sign > 0 else hi - v2_base[t_r, bus_r])
        n_ub += m
        n_slack += m
    # settlement: each site's energy at the end - surplus + deficit = its energy at reset
    i_settle = n_base + n_slack
    n_var = i_settle + 2 * n_sites
    eq_rows, eq_cols, eq_vals, eq_rhs = _settlement_rows(task, state, row, car, t_abs, ie)
    eq_rows = [r + n_pair + n_sites * n_t for r in eq_rows]
    rows += eq_rows
    cols += [*eq_cols[:1], i_settle + eq_cols[1], i_settle + n_sites + eq_cols[2]]
    vals += eq_vals
    b_eq = np.concatenate([b_eq, eq_rhs])

    cost = np.zeros(n_var)
    step_price = price[t_abs - t0] * dt * 1e-3
    cost[ic : ic + n_pair] = step_price
    cost[id_ : id_ + n_pair] = -step_price + fleet.v2g_wear_per_kwh * dt
    m = float(task.settlement_price(state.day_id[row : row + 1])[0]) * 1e-3  # $ per kWh
    cost[i_settle : i_settle + n_sites] = -m * fleet.discharge_efficiency
    cost[i_settle + n_sites :] = m / fleet.charge_efficiency
    cost[i_short : i_short + n_sess] = SHORTFALL_PENALTY
    cost[i_unserved : i_unserved + n_sess] = UNSERVED_PENALTY
    cost[n_base:i_settle] = ORACLE_VOLTAGE_PENALTY
    bounds = np.zeros((n_var, 2))
    bounds[:, 1] = np.inf
    bounds[ic : ic + n_pair, 1] = fleet.charge_max_kw
    bounds[id_ : id_ + n_pair, 1] = fleet.discharge_max_kw
    bounds[ie : ie + n_pair] = (fleet.min_kwh, fleet.max_kwh)
    bounds[i_site:n_base] = (-np.inf, np.inf)  # settlement columns: [0, inf)
    a_eq = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_pair + n_sites * n_t + n_sites, n_var),
    )
    a_ub = sp.csr_matrix(
        (np.concatenate(ub_vals), (np.concatenate(ub_rows), np.concatenate(ub_cols))),
        shape=(n_ub, n_var),
    )
    res = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.concatenate(b_ub),
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=bounds,
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"marl_ev_v2g oracle LP failed: {res.message}")
    plan = np.zeros((horizon, n_cars))
    plan[t_abs, car] = res.x[id_ : id_ + n_pair] - res.x[ic : ic + n_pair]
    return plan
