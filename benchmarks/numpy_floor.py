"""The numpy floor of a task's single-env step: its arithmetic written straight through.

A floor is one function of precomputed arrays that does a step's whole numpy work at B = 1 (the
clip of the action into its step range, the physics, the reward and its terms, the costs, the
next observation) and nothing else: no state objects, no info dict, no checks, no batching
machinery. It is what a hand-written single-purpose loop would cost, so ``env.step / floor`` is
the price of the library's layers. Each floor is checked against the task model on one episode
(:func:`check_floor`: rewards, costs and observations equal to 1e-9 relative) before it is timed.

Floors exist for the tasks whose step the speed targets name: ``battery_arbitrage``,
``marl_opf`` and ``opf_118`` (``opf_118_7d``'s hydro energy and ``opf``'s area agents are not in
the dispatch floor).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

FloorStep = Callable[[np.ndarray], tuple[float, np.ndarray, np.ndarray]]
"""``step(action [act_dim]) -> (reward $, costs [n_constraints], observation)``; the floor keeps
its own state between calls, ``reset()`` (an attribute of the function) starts the episode."""


def dispatch_floor(task: Any, day_id: int) -> FloorStep:
    """The floor of a dispatch task's step (one agent per unit, DC flow through shift factors).

    Args:
        task: An :class:`~powerzoo.tasks.economic_dispatch.model.EconomicDispatch` at B = 1.
        day_id: The split day the episode starts on.

    Returns:
        The step function (with ``reset``).
    """
    lim, dt = task.limits, task.spec.dt_h
    pmin, pmax, ramp_up, ramp_down = lim.pmin_mw, lim.pmax_mw, lim.ramp_up_mw, lim.ramp_down_mw
    gsf, load_flow, limit = task._gsf, task._load_flow, task._limit
    rating, congested_above = task._rating, task._congested_above
    bus_scale, demand, system_load = task._bus_load_scale, task._demand, task._system_load
    c2, c1, c0 = task._c2, task._c1, task._c0
    band = task.regulation.band_mw
    reg_price = task.regulation.regulation_price_per_mwh
    imb_price = task.regulation.imbalance_price_per_mwh
    penalty = task.params.overload_penalty_per_mwh
    start = int(task._day_start[day_id])
    slots = task.slots_of_mode(None)
    horizon = task.spec.horizon
    # the agents' observation: the shared row, then each unit's own columns
    obs = np.empty((task.case.n_gen, slots.width), dtype=np.float32)
    obs[:, slots.own] = task._own_obs
    time_obs = task._time_obs
    state: dict[str, Any] = {}

    def observe(t: int, prev: np.ndarray, imbalance: float) -> np.ndarray:
        idx = (start + t) % demand.size
        obs[:, slots.time] = time_obs[min(t, horizon)]
        obs[:, slots.system_load] = system_load[idx], system_load[(idx + 1) % demand.size]
        obs[:, slots.prev_imbalance] = imbalance
        obs[:, slots.prev_p] = prev
        return obs.copy()

    def reset() -> np.ndarray:
        state.update(t=0, prev=task._initial_p[day_id].copy(), imbalance=0.0)
        return observe(0, state["prev"], 0.0)

    def step(action: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        t, prev = state["t"], state["prev"]
        lo = np.minimum(np.maximum(prev - ramp_down, pmin), pmax)
        hi = np.maximum(np.minimum(prev + ramp_up, pmax), lo)
        p = np.minimum(np.maximum(action, lo), hi)
        d = demand[(start + t) % demand.size]
        load = (d * bus_scale).sum()
        flow = p @ gsf - d * load_flow
        abs_flow = np.abs(flow)
        overload_mwh = np.maximum(abs_flow - limit, 0.0).sum() * dt
        (abs_flow / rating).max(), (abs_flow >= congested_above).sum()  # the info's loading
        imbalance = p.sum() - load
        size = abs(imbalance)
        within = min(size, band)
        beyond_mwh = (size - within) * dt
        generation = ((p * p) @ c2 + p @ c1 + c0) * dt
        reward = -(
            generation + beyond_mwh * imb_price + within * dt * reg_price + overload_mwh * penalty
        )
        state.update(t=t + 1, prev=p, imbalance=imbalance)
        return reward, np.array([overload_mwh, beyond_mwh]), observe(t + 1, p, imbalance)

    step.reset = reset  # type: ignore[attr-defined]
    return step


def battery_floor(task: Any, day_id: int) -> FloorStep:
    """The floor of ``battery_arbitrage``'s step: SOC limits, the cut to them, the energy moved,
    the four reward terms (the settlement marked to market), the SOC-violation cost.

    Args:
        task: The battery task at B = 1.
        day_id: The split day the episode starts on.

    Returns:
        The step function (with ``reset``).
    """
    b, dt = task.battery, task.spec.dt_h
    cap, soc_min, soc_max = b.energy_capacity_mwh, b.soc_min, b.soc_max
    eta_c, eta_d, p_max = b.charge_efficiency, b.discharge_efficiency, b.power_max_mw
    wear = b.degradation_cost_per_mwh
    start_soc = task.initial_soc
    settle_price = float(task._settlement_price[day_id])
    day = int(task.split_days[day_id]) * task.profiles.steps_per_day
    price_series = task._price
    exogenous = task._exogenous_obs
    slots, horizon = task._slots, task.spec.horizon
    obs = np.empty(task._obs_dim, dtype=np.float32)
    state: dict[str, Any] = {}

    def settlement(soc: np.ndarray) -> np.ndarray:
        change = (soc - start_soc) * cap
        surplus = np.maximum(change, 0.0) * eta_d * (settle_price - wear)
        return surplus - np.maximum(-change, 0.0) / eta_c * (settle_price + wear)

    def observe(t: int, soc: np.ndarray) -> np.ndarray:
        obs[slots.soc] = soc[0]
        obs[slots.exogenous] = exogenous[day + t]
        obs[slots.time_remaining] = 1.0 - t / horizon
        return obs.copy()

    def reset() -> np.ndarray:
        soc = np.full(1, start_soc)
        state.update(t=0, soc=soc, settlement=settlement(soc))
        return observe(0, soc)

    def step(action: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        t, soc = state["t"], state["soc"]
        price = price_series[day + t]
        p = np.clip(action, -p_max, p_max)
        p_ch = np.minimum(np.maximum(soc_max - soc, 0.0) * cap / (eta_c * dt), p_max)
        p_dis = np.minimum(np.maximum(soc - soc_min, 0.0) * cap * eta_d / dt, p_max)
        applied = np.clip(p, -p_ch, p_dis)
        discharge = np.maximum(applied, 0.0) * dt
        charge = np.maximum(-applied, 0.0) * dt
        new_soc = soc + (eta_c * charge - discharge / eta_d) / cap
        value = settlement(new_soc)
        gain = price * discharge - price * charge - wear * (charge + discharge)
        reward = (gain + (value - state["settlement"]))[0]
        excess = p - applied  # > 0: more discharge asked than the SOC allows, < 0: charge
        per_mw = np.where(excess > 0.0, dt / eta_d, dt * eta_c)
        violation = np.where(np.abs(excess) < 1e-5, 0.0, np.abs(excess) * per_mw)
        state.update(t=t + 1, soc=new_soc, settlement=value)
        return reward, violation, observe(min(t + 1, horizon - 1), new_soc)

    step.reset = reset  # type: ignore[attr-defined]
    return step


FLOORS: dict[str, Callable[[Any, int], FloorStep]] = {
    "battery_arbitrage": battery_floor,
    "marl_opf": dispatch_floor,
    "opf_118": dispatch_floor,
}
"""The tasks with a numpy floor, and the function that builds each."""


def check_floor(task_id: str, task: Any, actions: list[np.ndarray], day_id: int = 0) -> float:
    """Largest relative difference between the floor and the task model over one episode.

    Args:
        task_id: The task's name (a key of :data:`FLOORS`).
        task: The task model (B = 1).
        actions: Physical joint actions [act_dim], cycled.
        day_id: The split day.

    Returns:
        The largest ``|floor - model| / max(1, |model|)`` of rewards, costs and observations.
    """
    floor = FLOORS[task_id](task, day_id)
    floor_obs = floor.reset()
    state = task.reset(np.random.default_rng(0), np.array([day_id]))
    worst = _relative(floor_obs, task.observe(state)[0])
    rng = np.random.default_rng(0)
    for t in range(task.spec.horizon):
        action = actions[t % len(actions)]
        reward, costs, floor_obs = floor(action)
        state, out = task.step(state, action[None].astype(np.float64), rng)
        worst = max(
            worst,
            _relative(np.array([reward]), out.reward),
            _relative(costs, out.constraint_costs[0]),
        )
        if t + 1 < task.spec.horizon:
            worst = max(worst, _relative(floor_obs, task.observe(state)[0]))
    return worst


def _relative(got: np.ndarray, expected: np.ndarray) -> float:
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    return float(np.max(np.abs(got - expected) / np.maximum(1.0, np.abs(expected))))
