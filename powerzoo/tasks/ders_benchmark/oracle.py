"""Perfect-foresight day plan of ``marl_ders_benchmark``: one LP per day on HiGHS, voltages on
LinDistFlow.

The oracle knows the whole day (loads, PV, prices) and plans the twelve DERs together to
maximise the task's shared reward, ``-(price x losses + price x curtailed PV + VOLL x curtailed
load + battery energy bill)``, within the voltage band, the line ratings and every device's
limits. The plan is then applied, and scored, under the exact AC power flow.

LP (per day, ``T`` half-hours; MW, Mvar, MWh; highspy, matrix form)
------------------------------------------------------------------
* Batteries: charge ``c`` and discharge ``d`` in ``[0, 0.5]`` MW, stored energy ``e`` within the
  SOC window with ``e_t = e_{t-1} + eta_c c_t dt - d_t dt / eta_d``, reactive power ``q``;
  ``(d - c, q)`` inside a ``POLYGON_SIDES``-gon inscribed in the S circle (so the inverter never
  cuts the planned Q).
* PV: curtailed power ``x`` in ``[0, available]``, ``q`` with ``(available - x, q)`` in the
  inscribed polygon (at night the full S rating is reactive capability).
* Flexible loads: curtail and shift fractions in ``[0, 0.3]`` (no shift on the episode's last
  step); the unit draws ``base (1 - curtail - shift) + payback`` with the payback of
  :mod:`powerzoo.devices.flexible_load` (energy shifted at step ``tau`` comes back evenly over
  the next ``min(4, steps left)`` steps), reactive power at its power factor.
* Network, linearised around an operating point (first the day with the DERs uncontrolled,
  then the exact flow of the previous pass's plan, ``PASSES`` passes; the plan kept is the pass
  whose exact flow scores best, reward minus the planning penalties): with ``dP, dQ`` the changes
  of net demand at the twelve DER buses,

  - squared voltages ``v2 = v2_exact + dP @ S_p + dQ @ S_q`` (LinDistFlow sensitivities,
    :func:`powerzoo.tasks.feeder.voltage_sq_sensitivity`) kept in the band narrowed by
    ``ORACLE_BAND_MARGIN_PU``, with slacks priced at ``ORACLE_VOLTAGE_PENALTY``;
  - branch flows ``S_exact + dS`` (lossless DistFlow: a branch carries the change of everything
    below it) inside a 16-gon inscribed in the circle of ``(1 - THERMAL_MARGIN) x rating x v``
    (soft, priced);
  - losses ``L_exact + g . (dP, dQ) + dP' H dP + dQ' H dQ``: ``g`` the exact gradient at the
    operating point (central differences of the exact flow), ``H`` the DistFlow loss matrix
    (``sum of r / v^2`` over the branches two DER buses share); the quadratic is split along
    the eigenvectors of ``H`` and each square is replaced by ``LOSS_TANGENTS`` tangents (epigraph
    rows), which keeps the model an LP.

* After each pass the plan is stepped through the device models themselves
  (:func:`inverter_battery_step`, :func:`pv_inverter_step`, :func:`flexible_load_step`) and the
  requests are replaced by what the devices deliver, so the env applies exactly the plan: no SOC
  violation, no Q cut, no refused shift (``device_violation = 0``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from powerzoo.devices.flexible_load import FlexibleLoadState, flexible_load_step, payback_matrix
from powerzoo.devices.inverter_battery import inverter_battery_step
from powerzoo.devices.pv_inverter import pv_inverter_step
from powerzoo.physics.radial_pf import lindistflow, radial_power_flow
from powerzoo.tasks.feeder import (
    ORACLE_BAND_MARGIN_PU,
    ORACLE_VOLTAGE_PENALTY,
    V_MAX_PU,
    V_MIN_PU,
    voltage_sq_sensitivity,
)

__all__ = ["DersOracle", "OracleDay", "payback_matrix"]

PASSES = (
    2  # LP solves per day: around the uncontrolled flow, then around the first plan's exact flow
)
POLYGON_SIDES = 24  # inscribed polygon of the inverters' S circle (gives up 0.9 % of S)
THERMAL_SIDES = 16  # polygon inscribed in a branch's MVA limit
THERMAL_MARGIN = 0.02  # planned branch limit: 98 % of rating x voltage
THERMAL_PENALTY = 10_000.0  # $ per MVA above the planned limit per step
LOSS_TANGENTS = 15  # tangents per squared term of the loss model
FD_STEP = 0.02  # MW / Mvar, central differences of the exact losses
SHIFT_TIE_BREAK = 0.01  # $ per MWh shifted: no shifting that buys nothing
Q_SHRINK = 1.0 - 1e-5  # planned Q stays this far inside the inverter's limit (float32 actions)
PF_MAX_ITER = 50


@dataclasses.dataclass(frozen=True)
class OracleDay:
    """One day's plan and what the LP predicted of it (steps ``t0 .. horizon - 1``)."""

    actions: (
        np.ndarray
    )  # [T, 24] physical joint action, agent-major ([p, q], [curtail, q], [curtail, shift])
    predicted_vm_pu: (
        np.ndarray
    )  # [T, n_bus] the last LP's voltages (LinDistFlow around the operating point)
    exact_vm_pu: np.ndarray  # [T, n_bus] exact AC flow of the plan
    predicted_loss_mw: np.ndarray  # [T] the last LP's loss model at its solution
    exact_loss_mw: np.ndarray  # [T] exact losses of the plan
    lp_size: tuple[int, int, int]  # columns, rows, non-zeros of the last LP
    solve_s: float  # seconds in HiGHS over all passes
    total_s: float  # seconds for the whole plan (flows, LP building, solves)


class _LP:
    """Sparse LP under construction: column blocks with bounds and costs (maximised), row blocks."""

    def __init__(self) -> None:
        self.lb: list[np.ndarray] = []
        self.ub: list[np.ndarray] = []
        self.cost: list[np.ndarray] = []
        self.n = 0
        self.entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.row_lo: list[np.ndarray] = []
        self.row_hi: list[np.ndarray] = []
        self.m = 0

    def var(self, shape: tuple[int, ...], lb: Any, ub: Any, cost: Any = 0.0) -> np.ndarray:
        size = int(np.prod(shape))
        for store, value in ((self.lb, lb), (self.ub, ub), (self.cost, cost)):
            store.append(np.broadcast_to(np.asarray(value, dtype=np.float64), shape).ravel())
        idx = np.arange(self.n, self.n + size).reshape(shape)
        self.n += size
        return idx

    def rows(self, cols: np.ndarray, vals: np.ndarray, lo: Any, hi: Any) -> None:
        """Rows ``lo <= sum_k vals[r, k] x[cols[r, k]] <= hi`` for ``cols`` / ``vals`` [R, K]."""
        cols, vals = np.atleast_2d(cols), np.atleast_2d(vals)
        r = cols.shape[0]
        if r == 0:
            return
        vals = np.broadcast_to(vals, cols.shape)
        row_idx = np.broadcast_to(np.arange(self.m, self.m + r)[:, None], cols.shape)
        keep = vals != 0.0
        self.entries.append((row_idx[keep], cols[keep], vals[keep]))
        self.row_lo.append(np.broadcast_to(np.asarray(lo, dtype=np.float64), (r,)).ravel())
        self.row_hi.append(np.broadcast_to(np.asarray(hi, dtype=np.float64), (r,)).ravel())
        self.m += r

    def solve(self) -> tuple[np.ndarray, tuple[int, int, int], float]:
        import highspy
        from scipy.sparse import csc_matrix

        rows, cols, vals = (np.concatenate(parts) for parts in zip(*self.entries, strict=True))
        a = csc_matrix((vals, (rows, cols)), shape=(self.m, self.n))
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = self.n, self.m
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = (
            np.concatenate(x) for x in (self.cost, self.lb, self.ub)
        )
        lp.row_lower_, lp.row_upper_ = np.concatenate(self.row_lo), np.concatenate(self.row_hi)
        lp.sense_ = highspy.ObjSense.kMaximize
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.indptr, a.indices, a.data
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.passModel(lp)
        start = time.perf_counter()
        h.run()
        seconds = time.perf_counter() - start
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(
                f"marl_ders_benchmark oracle LP failed: {h.modelStatusToString(h.getModelStatus())}"
            )
        return np.asarray(h.getSolution().col_value), (self.n, self.m, int(a.nnz)), seconds


@dataclasses.dataclass(frozen=True)
class _Point:
    """Exact flow of the day at an operating point (net demand ``y_p``, ``y_q`` [T, 12] at the DER
    buses)."""

    y_p: np.ndarray
    y_q: np.ndarray
    v2: np.ndarray  # [T, n_bus] squared voltages
    loss: np.ndarray  # [T] MW
    grad: np.ndarray  # [T, 24] d loss / d (P, Q net demand) at the DER buses
    branch_p: np.ndarray  # [T, n_branch] sending-end flows
    branch_q: np.ndarray
    v_from: np.ndarray  # [T, n_branch] sending-end voltage


class DersOracle:
    """Plans days of a :class:`~powerzoo.tasks.ders_benchmark.MarlDersBenchmark` task (module
    docstring)."""

    def __init__(self, task: Any, voll_per_mwh: float) -> None:
        self.task = task
        self.voll = float(
            voll_per_mwh
        )  # $ per MWh of curtailed load (the task's value of lost load)
        case = task.grid.case
        self.case = case
        self.buses = np.asarray(task.der_buses)
        self.n_der = self.buses.size
        k = self.n_der // 3
        self.bat, self.pv, self.flex = slice(0, k), slice(k, 2 * k), slice(2 * k, 3 * k)
        self.k = k
        self.sens_p = voltage_sq_sensitivity(case, self.buses)  # [12, n_bus] per MW of net demand
        self.sens_q = voltage_sq_sensitivity(case, self.buses, 1.0) - self.sens_p  # per Mvar
        unit = np.zeros((self.n_der, case.n_bus))
        unit[np.arange(self.n_der), self.buses] = 1.0
        self.below = np.rint(
            lindistflow(case, unit, np.zeros_like(unit)).branch_p_mw
        )  # [12, n_branch] 1 on the path
        self.r_mw = case.branch_r_pu / case.base_mva  # loss MW = r_pu S_MW^2 / (v^2 base)

    # ---- one day ----------------------------------------------------------------------------
    def plan_day(self, day_id: int, t0: int, soc0: np.ndarray, due_mwh: np.ndarray) -> OracleDay:
        """The plan of split day ``day_id`` from step ``t0`` with SOC ``soc0`` [4] and payback
        schedule
        ``due_mwh`` [payback_steps, 4] (the task state's row)."""
        start = time.perf_counter()
        task = self.task
        horizon, dt = task.spec.horizon, task.spec.dt_h
        t = horizon - t0
        flat = task.grid.flat_index(np.array([day_id]), np.array([t0]))[0] + np.arange(t)
        demand = task.grid.demand_pu.take(flat)
        day = {
            "price": task.grid.price_per_mwh.take(flat),
            "cf": task.pv_cf.take(flat),
            "avail": task.pv_cf.take(flat)[:, None] * task.pv.capacity_mw,
            "w": payback_matrix(t0, horizon, task.flex.payback_steps),
            "t0": t0,
        }
        p_rest, q_rest, base = task.loads(demand)
        day["base"] = base
        due_mw = np.zeros_like(base)
        n_due = min(task.flex.payback_steps, t)
        due_mw[:n_due] = np.asarray(due_mwh)[:n_due] / dt
        day["due"] = due_mw
        y_p = np.concatenate([np.zeros_like(base), -day["avail"], base + due_mw], axis=1)
        y_q = np.concatenate(
            [np.zeros_like(base), np.zeros_like(base), (base + due_mw) * task.flex.tan_phi], axis=1
        )
        point = self._point(p_rest, q_rest, y_p, y_q)
        solve_s, best = 0.0, None
        for _ in range(PASSES):
            sol, size, seconds, pred = self._solve(day, point, np.asarray(soc0, dtype=np.float64))
            solve_s += seconds
            actions, y_p, y_q, bill = self._realise(
                day, sol, np.asarray(soc0, dtype=np.float64), np.asarray(due_mwh)
            )
            try:
                lin, point = point, self._point(p_rest, q_rest, y_p, y_q)
            except (
                RuntimeError
            ):  # the plan's exact flow failed (far beyond the feeder's loadability)
                if best is not None:
                    break
                raise
            score = self._score(day, point, bill)
            if best is None or score > best[0]:
                dv2 = (y_p - lin.y_p) @ self.sens_p + (y_q - lin.y_q) @ self.sens_q
                best = (
                    score,
                    actions,
                    np.sqrt(np.maximum(lin.v2 + dv2, 0.0)),
                    np.sqrt(point.v2),
                    pred,
                    point.loss,
                )
        return OracleDay(*best[1:], size, solve_s, time.perf_counter() - start)

    def _score(self, day: dict, pt: _Point, bill: float) -> float:
        """Exact value of a realised plan ($): the reward (losses at the exact flow) minus the
        planning
        penalties on voltages outside the band and on branch overloads."""
        reward = bill - float(np.sum(day["price"] * self.task.spec.dt_h * pt.loss))
        vm = np.sqrt(pt.v2)
        volt = np.maximum(np.maximum(V_MIN_PU - vm, vm - V_MAX_PU), 0.0).sum()
        over = np.maximum(
            np.hypot(pt.branch_p, pt.branch_q) - self.case.branch_rating_mva * pt.v_from, 0.0
        ).sum()
        return reward - 2 * ORACLE_VOLTAGE_PENALTY * volt - THERMAL_PENALTY * over

    def _point(
        self, p_rest: np.ndarray, q_rest: np.ndarray, y_p: np.ndarray, y_q: np.ndarray
    ) -> _Point:
        """Exact flows at net DER demand ``y_p``, ``y_q`` and the central-difference loss
        gradient."""
        t, n = y_p.shape
        reps = 1 + 4 * n
        p = np.repeat(p_rest, reps, axis=0).reshape(t, reps, -1)
        q = np.repeat(q_rest, reps, axis=0).reshape(t, reps, -1)
        p[:, :, self.buses] += y_p[:, None, :]
        q[:, :, self.buses] += y_q[:, None, :]
        steps = np.arange(n)
        for j, (target, sign) in enumerate(((p, 1.0), (p, -1.0), (q, 1.0), (q, -1.0))):
            target[:, 1 + j * n + steps, self.buses] += sign * FD_STEP
        flow = radial_power_flow(
            self.case, p.reshape(t * reps, -1), q.reshape(t * reps, -1), max_iter=PF_MAX_ITER
        )
        if not flow.converged.all():
            raise RuntimeError(
                "marl_ders_benchmark oracle: the exact power flow of the plan did not converge"
            )
        loss = flow.p_loss_mw.reshape(t, reps)
        grad = np.concatenate(
            [
                (loss[:, 1 : 1 + n] - loss[:, 1 + n : 1 + 2 * n]),
                (loss[:, 1 + 2 * n : 1 + 3 * n] - loss[:, 1 + 3 * n :]),
            ],
            axis=1,
        ) / (2 * FD_STEP)
        head = np.arange(t) * reps
        vm = flow.vm_pu[head]
        return _Point(
            y_p,
            y_q,
            vm**2,
            loss[:, 0],
            grad,
            flow.branch_p_mw[head],
            flow.branch_q_mvar[head],
            vm[:, self.case.branch_from_bus],
        )

    # ---- the LP -----------------------------------------------------------------------------
    def _solve(
        self, day: dict, pt: _Point, soc0: np.ndarray
    ) -> tuple[dict, tuple[int, int, int], float, np.ndarray]:
        """One LP around ``pt``: the solution's device set-points, LP size, HiGHS seconds, predicted
        losses [T]."""
        task, lp = self.task, _LP()
        bat, pv, flex = task.battery, task.pv, task.flex
        t, k, n = pt.y_p.shape[0], self.k, self.n_der
        dt, price = task.spec.dt_h, day["price"]
        pc = (price * dt)[:, None]  # $ per MW held over the step
        cap = bat.energy_capacity_mwh
        charge = lp.var((t, k), 0.0, bat.power_max_mw, -(pc + bat.degradation_cost_per_mwh * dt))
        discharge = lp.var((t, k), 0.0, bat.power_max_mw, pc - bat.degradation_cost_per_mwh * dt)
        stored = lp.var((t, k), bat.soc_min * cap + 1e-7, bat.soc_max * cap - 1e-7)
        q_bat = lp.var((t, k), -bat.s_rating_mva, bat.s_rating_mva)
        cut = lp.var((t, k), 0.0, day["avail"], -pc)
        q_pv = lp.var((t, k), -pv.s_rating_mva, pv.s_rating_mva)
        base = day["base"]
        shift_hi = np.full((t, k), flex.shift_max)
        shift_hi[-1] = 0.0  # the episode's last step: nothing can be shifted
        curtail = lp.var(
            (t, k), 0.0, np.broadcast_to(flex.curtail_max, (t, k)), -self.voll * dt * base
        )
        shift = lp.var((t, k), 0.0, shift_hi, -SHIFT_TIE_BREAK * dt * base)
        dp = lp.var((t, n), -np.inf, np.inf, -pc * pt.grad[:, :n])
        dq = lp.var((t, n), -np.inf, np.inf, -pc * pt.grad[:, n:])
        one = np.ones((t, k))

        # storage
        gain_c, loss_d = bat.charge_efficiency * dt, dt / bat.discharge_efficiency
        prev = np.vstack([np.full((1, k), -1), stored[:-1]])
        lp.rows(
            np.stack([stored, prev, charge, discharge], -1).reshape(-1, 4),
            np.stack([one, np.where(prev < 0, 0.0, -1.0), -gain_c * one, loss_d * one], -1).reshape(
                -1, 4
            ),
            np.vstack([soc0 * cap, np.zeros((t - 1, k))]).ravel(),
            np.vstack([soc0 * cap, np.zeros((t - 1, k))]).ravel(),
        )
        # inverter polygons: cos(a) p + sin(a) q <= S cos(pi / sides)
        angles = 2 * np.pi * np.arange(POLYGON_SIDES) / POLYGON_SIDES
        for a in angles:
            c, s = np.cos(a), np.sin(a)
            reach = bat.power_max_mw * abs(c) + bat.s_rating_mva * abs(s)
            lim = bat.s_rating_mva * np.cos(np.pi / POLYGON_SIDES)
            if np.any(reach > lim):
                lp.rows(
                    np.stack([discharge, charge, q_bat], -1).reshape(-1, 3),
                    np.array([c, -c, s]) * np.ones((t * k, 3)),
                    -np.inf,
                    np.broadcast_to(lim, (t, k)).ravel(),
                )
            lim = pv.s_rating_mva * np.cos(np.pi / POLYGON_SIDES)
            if c >= -1e-12:
                lp.rows(
                    np.stack([cut, q_pv], -1).reshape(-1, 2),
                    np.array([-c, s]) * np.ones((t * k, 2)),
                    -np.inf,
                    (lim - c * day["avail"]).ravel(),
                )
        # changes of net demand at the DER buses (definitions)
        b, p_, f = self.bat, self.pv, self.flex
        rhs = -pt.y_p
        lp.rows(
            np.stack([dp[:, b], charge, discharge], -1).reshape(-1, 3),
            np.array([1.0, -1.0, 1.0]),
            rhs[:, b].ravel(),
            rhs[:, b].ravel(),
        )
        lp.rows(
            np.stack([dq[:, b], q_bat], -1).reshape(-1, 2),
            np.array([1.0, 1.0]),
            -pt.y_q[:, b].ravel(),
            -pt.y_q[:, b].ravel(),
        )
        r = (-day["avail"] - pt.y_p[:, p_]).ravel()
        lp.rows(np.stack([dp[:, p_], cut], -1).reshape(-1, 2), np.array([1.0, -1.0]), r, r)
        lp.rows(
            np.stack([dq[:, p_], q_pv], -1).reshape(-1, 2),
            np.array([1.0, 1.0]),
            -pt.y_q[:, p_].ravel(),
            -pt.y_q[:, p_].ravel(),
        )
        # flexible loads: dp + base (c + s) - sum_tau W[t, tau] base_tau s_tau = base + due - y_p
        lags = np.arange(1, flex.payback_steps + 1)
        tau = np.arange(t)[:, None] - lags[None, :]  # [t, L]
        w = np.where(tau >= 0, day["w"][np.arange(t)[:, None], np.maximum(tau, 0)], 0.0)  # [t, L]
        cols = [dp[:, f], curtail, shift] + [
            shift[np.maximum(tau[:, j], 0)] for j in range(lags.size)
        ]
        vals = [one, base, base] + [
            -(w[:, j, None] * base[np.maximum(tau[:, j], 0)]) for j in range(lags.size)
        ]
        r = (base + day["due"] - pt.y_p[:, f]).ravel()
        lp.rows(
            np.stack(cols, -1).reshape(-1, len(cols)),
            np.stack(vals, -1).reshape(-1, len(vals)),
            r,
            r,
        )
        tan = np.broadcast_to(flex.tan_phi, (t, k))
        lp.rows(
            np.stack([dq[:, f], dp[:, f]], -1).reshape(-1, 2),
            np.stack([one, -tan], -1).reshape(-1, 2),
            0.0,
            0.0,
        )

        dcols = np.concatenate([dp, dq], axis=1)  # [t, 24]
        self._voltage_rows(lp, pt, dcols, day)
        self._thermal_rows(lp, pt, dp, dq, day)
        z_terms = self._loss_rows(lp, pt, dp, dq, day, pc)
        x, size, seconds = lp.solve()
        pred = pt.loss + np.einsum("tj,tj->t", pt.grad, x[dcols]) + x[z_terms].sum(axis=1)
        sol = {
            "p_bat": x[discharge] - x[charge],
            "q_bat": x[q_bat],
            "cut": x[cut],
            "q_pv": x[q_pv],
            "curtail": x[curtail],
            "shift": x[shift],
        }
        return sol, size, seconds, pred

    def _bounds(self, day: dict) -> tuple[np.ndarray, np.ndarray]:
        """Largest |dP|, |dQ| [12] of each DER bus between two feasible points (MW, Mvar)."""
        task = self.task
        base_max = (day["base"] + day["due"]).max(axis=0) + day["base"].max(axis=0)
        p = np.concatenate(
            [np.full(self.k, 2 * task.battery.power_max_mw[0]), day["avail"].max(axis=0), base_max]
        )
        q = np.concatenate(
            [2 * task.battery.s_rating_mva, 2 * task.pv.s_rating_mva, base_max * task.flex.tan_phi]
        )
        return p, q

    def _voltage_rows(self, lp: _LP, pt: _Point, dcols: np.ndarray, day: dict) -> None:
        sens = np.concatenate([self.sens_p, self.sens_q], axis=0)  # [24, n_bus]
        p_max, q_max = self._bounds(day)
        reach = np.concatenate([p_max, q_max]) @ np.abs(sens)  # [n_bus]
        lo = (V_MIN_PU + ORACLE_BAND_MARGIN_PU) ** 2
        hi = (V_MAX_PU - ORACLE_BAND_MARGIN_PU) ** 2
        for sign, need in ((1.0, pt.v2 - reach < lo), (-1.0, pt.v2 + reach > hi)):
            ts, buses = np.nonzero(need)
            if not ts.size:
                continue
            slack = lp.var((ts.size, 1), 0.0, np.inf, -ORACLE_VOLTAGE_PENALTY)
            cols = np.concatenate([dcols[ts], slack], axis=1)
            vals = np.concatenate([sens[:, buses].T, np.full((ts.size, 1), sign)], axis=1)
            if sign > 0:  # v2 + dv2 + slack >= lo
                lp.rows(cols, vals, lo - pt.v2[ts, buses], np.inf)
            else:  # v2 + dv2 - slack <= hi
                lp.rows(cols, vals, -np.inf, hi - pt.v2[ts, buses])

    def _thermal_rows(self, lp: _LP, pt: _Point, dp: np.ndarray, dq: np.ndarray, day: dict) -> None:
        rating = self.case.branch_rating_mva
        # polygon inscribed in the circle of (1 - margin) x rating x v: never above it
        limit = (
            (1.0 - THERMAL_MARGIN) * np.cos(np.pi / THERMAL_SIDES) * rating[None, :] * pt.v_from
        )  # [t, n_branch]
        p_max, q_max = self._bounds(day)
        reach_p, reach_q = p_max @ self.below, q_max @ self.below  # [n_branch]
        angles = 2 * np.pi * np.arange(THERMAL_SIDES) / THERMAL_SIDES
        facets = []
        for a in angles:
            c, s = np.cos(a), np.sin(a)
            value = c * pt.branch_p + s * pt.branch_q
            ts, brs = np.nonzero(value + abs(c) * reach_p + abs(s) * reach_q > limit)
            facets.append((c, s, value, ts, brs))
        # branches below the same DER buses see the same change of flow: per group, step and facet
        # only the
        # branch with the least headroom gives a row; one (dP, dQ) pair and one overload slack per
        # group and step
        patterns, group = np.unique(self.below.T, axis=0, return_inverse=True)
        group = group.ravel()
        n_group, t = patterns.shape[0], pt.v2.shape[0]
        rows = []
        for c, s, value, ts, brs in facets:
            if ts.size:
                room = np.full((t, n_group), np.inf)
                np.minimum.at(room, (ts, group[brs]), limit[ts, brs] - value[ts, brs])
                tg, gg = np.nonzero(np.isfinite(room))
                rows.append((c, s, tg, gg, room[tg, gg]))
        if not rows:
            return
        used = np.unique(np.concatenate([r[3] for r in rows]))
        flow_p, flow_q, slack = (np.full((t, n_group), -1) for _ in range(3))
        slack[:, used] = lp.var((t, used.size), 0.0, np.inf, -THERMAL_PENALTY)
        for d_vars, flow in ((dp, flow_p), (dq, flow_q)):
            flow[:, used] = lp.var((t, used.size), -np.inf, np.inf)
            cols = np.concatenate(
                [
                    flow[:, used][:, :, None],
                    np.broadcast_to(d_vars[:, None, :], (t, used.size, self.n_der)),
                ],
                2,
            )
            vals = np.concatenate(
                [
                    np.ones((t, used.size, 1)),
                    np.broadcast_to(-patterns[used][None], (t, used.size, self.n_der)),
                ],
                2,
            )
            lp.rows(cols.reshape(-1, 1 + self.n_der), vals.reshape(-1, 1 + self.n_der), 0.0, 0.0)
        for c, s, tg, gg, room in rows:
            lp.rows(
                np.stack([flow_p[tg, gg], flow_q[tg, gg], slack[tg, gg]], axis=1),
                np.array([c, s, -1.0]),
                -np.inf,
                room,
            )

    def _loss_rows(
        self, lp: _LP, pt: _Point, dp: np.ndarray, dq: np.ndarray, day: dict, pc: np.ndarray
    ) -> np.ndarray:
        """Epigraph of ``dP' H dP + dQ' H dQ`` per step; returns the column indices [t, terms] of
        its parts."""
        t = pt.v2.shape[0]
        weight = self.r_mw[None, :] / np.mean(pt.v_from, axis=0)[None, :] ** 2  # [1, n_branch]
        h = (self.below * weight) @ self.below.T  # [12, 12] MW per MW^2
        lam, u = np.linalg.eigh(h)
        keep = lam > 1e-4 * lam.max()
        lam, u = lam[keep], u[:, keep]
        p_max, q_max = self._bounds(day)
        terms = []
        grid = np.linspace(-1.0, 1.0, LOSS_TANGENTS)
        tangents = grid * np.abs(
            grid
        )  # denser near the operating point, where the plan of a later pass stays
        for d_var, d_max in ((dp, p_max), (dq, q_max)):
            span = np.abs(u).T @ d_max  # [terms] largest |u' d|
            proj = lp.var((t, lam.size), -span, span)
            cols = np.concatenate(
                [
                    np.repeat(proj[:, :, None], 1, 2),
                    np.broadcast_to(d_var[:, None, :], (t, lam.size, self.n_der)),
                ],
                axis=2,
            )
            vals = np.concatenate(
                [np.ones((t, lam.size, 1)), np.broadcast_to(-u.T[None], (t, lam.size, self.n_der))],
                axis=2,
            )
            lp.rows(cols.reshape(-1, 1 + self.n_der), vals.reshape(-1, 1 + self.n_der), 0.0, 0.0)
            z = lp.var((t, lam.size), 0.0, np.inf, -np.broadcast_to(pc, (t, lam.size)))
            for a in tangents:  # z >= lam (2 a y - a^2), a = tangent point
                at = a * span[None, :]
                lp.rows(
                    np.stack([z, proj], -1).reshape(-1, 2),
                    np.stack(
                        [np.ones((t, lam.size)), np.broadcast_to(-2 * lam * at, (t, lam.size))], -1
                    ).reshape(-1, 2),
                    np.broadcast_to(-lam * at**2, (t, lam.size)).ravel(),
                    np.inf,
                )
            terms.append(z)
        return np.concatenate(terms, axis=1)

    # ---- through the devices ----------------------------------------------------------------
    def _realise(
        self, day: dict, sol: dict, soc0: np.ndarray, due_mwh: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Step the LP's set-points through the device models; returns the delivered joint actions
        [T, 24]
        (what the env is then given, so it applies exactly this), the net demand ``y_p``, ``y_q``
        [T, 12] they put at the DER buses and the reward's terms other than losses ($ over the
        plan)."""

        task, k = self.task, self.k
        dt, horizon = task.spec.dt_h, task.spec.horizon
        t = sol["p_bat"].shape[0]
        soc = soc0[None, :].copy()
        state = FlexibleLoadState(
            np.array(due_mwh, dtype=np.float64)[None],
            np.sum(due_mwh, axis=0, dtype=np.float64)[None],
        )
        act = np.zeros((t, 3 * k, 2))
        y_p, y_q = np.zeros((t, 3 * k)), np.zeros((t, 3 * k))
        avail, bill = day["avail"], 0.0
        s2_bat, s2_pv = task.battery.s_squared_mva2, task.pv.s_squared_mva2
        for i in range(t):
            p_req = sol["p_bat"][i]
            q_lim = np.sqrt(np.maximum(s2_bat - p_req * p_req, 0.0)) * Q_SHRINK
            bat = inverter_battery_step(
                task.battery, soc, p_req[None], np.clip(sol["q_bat"][i], -q_lim, q_lim)[None], dt
            )
            soc = bat.soc
            frac = np.where(avail[i] > 1e-9, sol["cut"][i] / np.maximum(avail[i], 1e-9), 0.0).clip(
                0.0, 1.0
            )
            p_pv = avail[i] * (1.0 - frac)
            q_lim = np.sqrt(np.maximum(s2_pv - p_pv * p_pv, 0.0)) * Q_SHRINK
            pv = pv_inverter_step(
                task.pv,
                day["cf"][i : i + 1, None],
                frac[None],
                np.clip(sol["q_pv"][i], -q_lim, q_lim)[None],
                dt,
            )
            fl = flexible_load_step(
                task.flex,
                state,
                day["base"][i][None],
                sol["curtail"][i][None],
                sol["shift"][i][None],
                dt,
                horizon - 1 - (day["t0"] + i),
            )
            state = fl.state
            price = day["price"][i]
            bill -= float(
                np.sum(
                    price * (bat.charge_mwh - bat.discharge_mwh)
                    + task.battery.degradation_cost_per_mwh * (bat.charge_mwh + bat.discharge_mwh)
                )
                + price * pv.curtailed_mwh.sum()
                + self.voll * fl.curtailed_mwh.sum()
            )
            act[i, self.bat, 0], act[i, self.bat, 1] = bat.p_mw[0], bat.q_mvar[0]
            act[i, self.pv, 0], act[i, self.pv, 1] = pv.curtail_fraction[0], pv.q_mvar[0]
            act[i, self.flex, 0], act[i, self.flex, 1] = (
                fl.curtail_fraction[0],
                fl.shift_fraction[0],
            )
            y_p[i] = np.concatenate([-bat.p_mw[0], -pv.p_mw[0], fl.p_mw[0]])
            y_q[i] = np.concatenate([-bat.q_mvar[0], -pv.q_mvar[0], fl.q_mvar[0]])
        return act.reshape(t, 6 * k), y_p, y_q, bill
