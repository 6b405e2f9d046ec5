"""Perfect-foresight day plan of ``marl_ders_benchmark``: one LP per day on HiGHS, voltages on
LinDistFlow.

The oracle knows the whole day (loads, PV, prices) and plans the twelve DERs together to
maximise the task's shared reward, ``-(price x losses + price x curtailed PV + VOLL x curtailed
load + battery energy bill) + battery settlement``, within the voltage band, the line ratings
and every device's limits. The plan is then applied, and scored, under the exact AC power flow.

LP (per day, ``T`` half-hours; MW, Mvar, MWh; highspy, matrix form)
------------------------------------------------------------------
* Batteries: charge ``c`` and discharge ``d`` in ``[0, 0.5]`` MW, stored energy ``e`` within the
  SOC window with ``e_t = e_{t-1} + eta_c c_t dt - d_t dt / eta_d``, reactive power ``q``;
  ``(d - c, q)`` inside a ``POLYGON_SIDES``-gon inscribed in the S circle (so the inverter never
  cuts the planned Q); the last ``e`` against the start, ``e_T - s + u = soc_init x capacity``,
  with the surplus ``s`` and deficit ``u`` valued as the env's settlement (``eta_d (m - wear)``
  and ``-(m + wear) / eta_c`` per MWh at the day's mean price ``m``).
* PV: curtailed power ``x`` in ``[0, available]``, ``q`` with ``(available - x, q)`` in the
  inscribed polygon; with no sun ``q = 0``, or the full S rating with ``pv_q_at_night``.
* Flexible loads: curtail and shift fractions in ``[0, 0.3]`` (no shift on the episode's last
  step); the unit draws ``base (1 - curtail - shift) + payback`` with the payback of
  :mod:`powerzoo.devices.flexible_load` (energy shifted at step ``tau`` comes back evenly over
  the next ``min(4, steps left)`` steps), reactive power at its power factor.
* Network, linearised around an operating point (first the day with the DERs uncontrolled,
  then the exact flow of the previous pass's plan, ``PASSES`` passes; the plan kept is the pass
  whose exact flow scores best, reward minus the planning penalties): squared voltages on
  LinDistFlow sensitivities kept in the band, branch flows inside a polygon of their rating, and
  losses as the exact value and gradient at the operating point (central differences of the
  exact flow) plus a piecewise-linear DistFlow quadratic; these rows are built in
  :mod:`.network_lp`.

* After each pass the plan is stepped through the device models themselves
  (:func:`inverter_battery_step`, :func:`pv_inverter_step`, :func:`flexible_load_step`) and the
  requests are replaced by what the devices deliver, so the env applies exactly the plan: no SOC
  violation, no Q cut, no refused shift (``device_violation = reactive_cut = 0``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from powerzoo.devices.flexible_load import FlexibleLoadState, flexible_load_step, payback_matrix
from powerzoo.devices.inverter_battery import (
    inverter_battery_settlement,
    inverter_battery_step,
)
from powerzoo.devices.pv_inverter import pv_inverter_step
from powerzoo.physics.radial_pf import lindistflow, radial_power_flow
from powerzoo.tasks.ders_benchmark.network_lp import (
    THERMAL_PENALTY,
    OperatingPoint,
    SparseLP,
    add_loss_rows,
    add_thermal_rows,
    add_voltage_rows,
)
from powerzoo.tasks.feeder import ORACLE_VOLTAGE_PENALTY, V_MAX_PU, V_MIN_PU, voltage_sq_sensitivity

__all__ = ["DersOracle", "OracleDay", "payback_matrix"]

PASSES = 2  # LP solves per day: around the uncontrolled flow, then around the first plan's flow
POLYGON_SIDES = 24  # inscribed polygon of the inverters' S circle (gives up 0.9 % of S)
FD_STEP = 0.02  # MW / Mvar, central differences of the exact losses
SHIFT_TIE_BREAK = 0.01  # $ per MWh shifted: no shifting that buys nothing
Q_SHRINK = 1.0 - 1e-5  # planned Q stays this far inside the inverter's limit (float32 actions)
PF_MAX_ITER = 50


@dataclasses.dataclass(frozen=True)
class OracleDay:
    """One day's plan and what the LP predicted of it (steps ``t0 .. horizon - 1``)."""

    # [T, 24] physical joint action, agent-major ([p, q], [curtail, q], [curtail, shift])
    actions: np.ndarray
    # [T, n_bus] the last LP's voltages (LinDistFlow around the operating point)
    predicted_vm_pu: np.ndarray
    exact_vm_pu: np.ndarray  # [T, n_bus] exact AC flow of the plan
    predicted_loss_mw: np.ndarray  # [T] the last LP's loss model at its solution
    exact_loss_mw: np.ndarray  # [T] exact losses of the plan
    lp_size: tuple[int, int, int]  # columns, rows, non-zeros of the last LP
    solve_s: float  # seconds in HiGHS over all passes
    total_s: float  # seconds for the whole plan (flows, LP building, solves)


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
        self.head_vm_pu: float | None = None  # the head of the day planned (plan_day)

    # ---- one day ----------------------------------------------------------------------------
    def plan_day(
        self,
        day_id: int,
        t0: int,
        soc0: np.ndarray,
        due_mwh: np.ndarray,
        head_vm_pu: float | None = None,
    ) -> OracleDay:
        """The plan of split day ``day_id`` from step ``t0`` with SOC ``soc0`` [4] and payback
        schedule ``due_mwh`` [payback_steps, 4] (the task state's row), the head at
        ``head_vm_pu`` (p.u.; the tap the AVC holds, ``None``: the case's)."""
        start = time.perf_counter()
        self.head_vm_pu = head_vm_pu
        task = self.task
        horizon, dt = task.spec.horizon, task.spec.dt_h
        t = horizon - t0
        flat = task.grid.flat_index(np.array([day_id]), np.array([t0]))[0] + np.arange(t)
        demand = task.grid.demand_pu.take(flat)
        avail = task.pv_cf.take(flat)[:, None] * task.pv.capacity_mw
        day = {
            "price": task.grid.price_per_mwh.take(flat),
            "cf": task.pv_cf.take(flat),
            "avail": avail,
            "q_on": (avail > 0.0) | task.pv.q_at_night,  # PV inverters that may give Q
            "w": payback_matrix(t0, horizon, task.flex.payback_steps),
            "t0": t0,
            "settlement_price": float(task.settlement_price(np.array([day_id]))[0]),
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

    def _score(self, day: dict, pt: OperatingPoint, bill: float) -> float:
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
    ) -> OperatingPoint:
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
            self.case,
            p.reshape(t * reps, -1),
            q.reshape(t * reps, -1),
            max_iter=PF_MAX_ITER,
            slack_vm_pu=self.head_vm_pu,
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
        return OperatingPoint(
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
        self, day: dict, pt: OperatingPoint, soc0: np.ndarray
    ) -> tuple[dict, tuple[int, int, int], float, np.ndarray]:
        """One LP around ``pt``: the solution's device set-points, LP size, HiGHS seconds, predicted
        losses [T]."""
        task, lp = self.task, SparseLP()
        bat, pv, flex = task.battery, task.pv, task.flex
        t, k, n = pt.y_p.shape[0], self.k, self.n_der
        dt, price = task.spec.dt_h, day["price"]
        pc = (price * dt)[:, None]  # $ per MW held over the step
        cap = bat.energy_capacity_mwh
        charge = lp.var((t, k), 0.0, bat.power_max_mw, -(pc + bat.degradation_cost_per_mwh * dt))
        discharge = lp.var((t, k), 0.0, bat.power_max_mw, pc - bat.degradation_cost_per_mwh * dt)
        stored = lp.var((t, k), bat.soc_min * cap + 1e-7, bat.soc_max * cap - 1e-7)
        m, wear = day["settlement_price"], bat.degradation_cost_per_mwh
        eta_c, eta_d = bat.charge_efficiency, bat.discharge_efficiency
        surplus = lp.var((k,), 0.0, np.inf, eta_d * (m - wear))
        deficit = lp.var((k,), 0.0, np.inf, -(m + wear) / eta_c)
        start = bat.soc_init * cap
        lp.rows(
            np.stack([stored[-1], surplus, deficit], -1),
            np.array([1.0, -1.0, 1.0]),
            start,
            start,
        )
        q_bat = lp.var((t, k), -bat.s_rating_mva, bat.s_rating_mva)
        cut = lp.var((t, k), 0.0, day["avail"], -pc)
        q_pv_max = np.where(day["q_on"], pv.s_rating_mva, 0.0)  # no sun: no Q by default
        q_pv = lp.var((t, k), -q_pv_max, q_pv_max)
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
        p_max, q_max = self._bounds(day)
        add_voltage_rows(lp, pt, dcols, self.sens_p, self.sens_q, p_max, q_max)
        rating = self.case.branch_rating_mva
        add_thermal_rows(lp, pt, dp, dq, rating, self.below, p_max, q_max)
        z_terms = add_loss_rows(lp, pt, dp, dq, pc, self.r_mw, self.below, p_max, q_max)
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
            q_lim = np.sqrt(np.maximum(s2_pv - p_pv * p_pv, 0.0)) * Q_SHRINK * day["q_on"][i]
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
            if day["t0"] + i == horizon - 1:  # the episode's last step: the settlement
                bill += float(
                    inverter_battery_settlement(
                        task.battery, soc, np.array([day["settlement_price"]])
                    ).sum()
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
