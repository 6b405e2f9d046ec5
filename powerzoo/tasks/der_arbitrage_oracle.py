"""The ``marl_der_arbitrage`` oracle's day plan: one LP on HiGHS of the three batteries with
the SOC model, the settlement and the voltage band on LinDistFlow
(:mod:`powerzoo.tasks.der_arbitrage`)."""

from __future__ import annotations

import numpy as np

from powerzoo.devices.inverter_battery import InverterBatteryParams
from powerzoo.physics.highs import new_highs
from powerzoo.tasks.feeder import add_voltage_band, unit_variables

__all__ = ["solve_day"]


def solve_day(
    battery: InverterBatteryParams,
    price: np.ndarray,
    soc0: np.ndarray,
    v2_base: np.ndarray,
    sens: np.ndarray,
    dt_h: float,
    margin_pu: float,
    settlement_price: float,
) -> np.ndarray:
    """Net battery powers [T, 3] (MW, + discharge) of the day plan (LP on HiGHS via highspy).

    Maximise ``sum price (d - c) dt - deg (c + d) dt + settlement - voltage penalty`` over
    charge ``c`` and discharge ``d`` in ``[0, P]`` (MW) and stored energy ``e`` within the SOC
    bounds, with ``e_t = e_{t-1} + eta_c c_t dt - d_t dt / eta_d``; squared voltages
    ``v2_base + (c - d) @ sens`` kept in the band (:func:`powerzoo.tasks.feeder.add_voltage_band`).
    The settlement values each battery's surplus ``s`` and deficit ``u`` (MWh) against its start,
    ``e_T - s + u = soc_init x capacity``, at ``m = settlement_price``: ``eta_d (m - deg) s -
    (m + deg) / eta_c u`` (:func:`powerzoo.devices.battery.settlement_value`).
    """
    import highspy

    t, n = price.size, soc0.size
    h = new_highs()
    cap = battery.energy_capacity_mwh
    charge = unit_variables(h, t, np.zeros(n), battery.power_max_mw)
    discharge = unit_variables(h, t, np.zeros(n), battery.power_max_mw)
    stored = unit_variables(h, t, battery.soc_min * cap, battery.soc_max * cap)
    stored_in = (battery.charge_efficiency * dt_h) * charge - (
        dt_h / battery.discharge_efficiency
    ) * discharge
    h.addConstrs(stored[0] - stored_in[0] == soc0 * cap)
    if t > 1:
        h.addConstrs((stored[1:] - stored[:-1] - stored_in[1:]).ravel() == 0.0)
    bound = np.broadcast_to(np.abs(sens).T @ battery.power_max_mw, v2_base.shape)
    penalty = add_voltage_band(h, v2_base, (charge - discharge) @ sens, bound, margin_pu)
    deg = battery.degradation_cost_per_mwh
    surplus = unit_variables(h, 1, np.zeros(n), np.full(n, np.inf))[0]
    deficit = unit_variables(h, 1, np.zeros(n), np.full(n, np.inf))[0]
    h.addConstrs(stored[t - 1] - surplus + deficit == battery.soc_init * cap)
    m, eta_c, eta_d = settlement_price, battery.charge_efficiency, battery.discharge_efficiency
    profit = (
        h.qsum(((price[:, None] - deg) * dt_h * discharge).ravel())
        - h.qsum(((price[:, None] + deg) * dt_h * charge).ravel())
        + h.qsum(eta_d * (m - deg) * surplus)
        - h.qsum((m + deg) / eta_c * deficit)
    )
    h.maximize(profit if penalty is None else profit - penalty)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(
            f"marl_der_arbitrage oracle LP failed: {h.modelStatusToString(h.getModelStatus())}"
        )
    return h.vals(discharge) - h.vals(charge)
