"""The B = 1 fast paths give exactly (bit for bit) what the straightforward formulas give.

Precomputed observation tables, the single-env joint-action conversion, the lazy finiteness
check, the CMDP info keys and the device shortcuts are checked against reference
implementations written the plain way (the formulas the fast paths replaced).
"""

import dataclasses

import numpy as np
import pytest

from powerzoo.benchmarks.offline import _EpisodeBuffer
from powerzoo.devices.battery import BatteryDispatch, BatteryParams, battery_step
from powerzoo.devices.cooling import CoolingParams, CoolingPlant, cooling_cop
from powerzoo.devices.diesel import DieselGenerator, DieselParams, diesel_output_mw
from powerzoo.devices.gpu_cluster import GpuCluster, GpuClusterParams, allocate_gpus, it_power_mw
from powerzoo.devices.grid_tie import GridTie, GridTieParams, settle
from powerzoo.devices.job_queue import (
    QueueOutlook,
    carry_excess,
    drop_due,
    queue_outlook,
    serve_edf,
)
from powerzoo.devices.thermal_zone import ZoneParams, ZoneStepper, zone_step
from powerzoo.envs.gym_env import scalar_info
from powerzoo.envs.runner import CostLayout, TaskRunner
from powerzoo.rl import make_env
from powerzoo.tasks import make_task


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and bytes (so -0.0 differs from 0.0)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _states_over_time(task, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """(day_id, t) pairs covering steps 0..horizon + 2 (past the horizon too) on a few days."""
    days = np.array([0, 3, task.n_days - 1])
    t = np.arange(horizon + 3)
    return np.repeat(days, t.size), np.tile(t, days.size)


def _rows(state, cls):
    """The B = 1 states of each row of a batched state."""
    for i in range(state.t.size):
        yield cls(**{f.name: getattr(state, f.name)[i : i + 1] for f in dataclasses.fields(state)})


# ---- observation tables -------------------------------------------------------------------------
def test_battery_observation_table_matches_the_formula():
    task = make_task("battery_arbitrage")
    day_id, t = _states_over_time(task, task.spec.horizon)
    state = task.reset(np.random.default_rng(0), day_id)
    state.t = t
    state.soc = np.linspace(0.1, 0.9, t.size)
    steps = task.profiles.steps_per_day
    idx = task.split_days[day_id] * steps + t
    phase = 2.0 * np.pi * (t % steps) / steps
    ref = np.empty((t.size, 6), dtype=np.float32)
    ref[:, 0], ref[:, 1], ref[:, 2] = state.soc, task._price[idx], task._price_avg[idx]
    ref[:, 3], ref[:, 4], ref[:, 5] = np.sin(phase), np.cos(phase), 1.0 - t / task.spec.horizon
    assert _same(task.observe(state), ref)
    for i, row in enumerate(_rows(state, type(state))):
        one = row.t
        phase1 = 2.0 * np.pi * (one % steps) / steps
        assert _same(task.observe(row)[0, 3:5], np.array([np.sin(phase1)[0], np.cos(phase1)[0]], np.float32))
        assert _same(task.observe(row)[0], ref[i])


def test_dc_microgrid_observation_table_matches_the_formula():
    task = make_task("dc_microgrid")
    day_id, t = _states_over_time(task, task.spec.horizon)
    state = task.reset(np.random.default_rng(0), day_id)
    state.t = t
    steps = task.profiles.steps_per_day
    idx = task.split_days[day_id] * steps + t
    ref = task.observe(state).copy()
    phase = (2.0 * np.pi / steps) * t
    for col, values in ((0, np.sin(phase)), (1, np.cos(phase)), (2, 1.0 - t / task.spec.horizon), (3, task._temp[idx]),
                        (4, state.zone_temp_c), (5, task._pv_cf[idx]), (6, task._price[idx]), (7, task._co2[idx]),
                        (8, state.soc)):
        assert _same(ref[:, col], np.asarray(values).astype(np.float32)), col
    for i, row in enumerate(_rows(state, type(state))):  # B = 1, including the steps past the horizon
        assert _same(task.observe(row)[0], ref[i])


@pytest.mark.parametrize("obs_mode", ["global", "local", "local_plus_forecast"])
def test_dispatch_observation_matches_the_formula(obs_mode):
    task = make_task("marl_opf")
    day_id, t = _states_over_time(task, task.spec.horizon)
    state = task.reset(np.random.default_rng(0), day_id)
    state.t = t
    state.prev_p_mw = np.random.default_rng(1).uniform(0, 100, state.prev_p_mw.shape)
    state.prev_imbalance_mw = np.random.default_rng(2).normal(0, 50, t.size)
    b, n = t.size, task.case.n_gen
    steps = task.profiles.steps_per_day
    start = task.split_days[day_id] * steps
    demand = lambda k: task._demand[(start[:, None] + t[:, None] + np.atleast_1d(k)) % task._demand.size]  # noqa: E731
    total = task.case.total_load_mw * 1.1
    phase = 2.0 * np.pi * (t % steps) / steps
    time = np.stack([np.sin(phase), np.cos(phase), 1.0 - t / task.spec.horizon], axis=1)
    own = np.concatenate([np.broadcast_to(task._own, (b, n, 3)), state.prev_p_mw[:, :, None]], axis=2)
    parts = [np.broadcast_to(time[:, None, :], (b, n, 3))]
    if obs_mode == "global":
        parts += [np.broadcast_to((demand(np.arange(2)) * total)[:, None, :], (b, n, 2)), own,
                  np.broadcast_to(state.prev_imbalance_mw[:, None, None], (b, n, 1))]
    else:
        parts += [(demand(0)[:, :1] * (task._gen_bus_load_share * 1.1))[:, :, None], own]
        if obs_mode == "local_plus_forecast":
            parts.append(np.broadcast_to((demand(np.arange(1, 5)) * total)[:, None, :], (b, n, 4)))
    ref = np.concatenate(parts, axis=2).astype(np.float32)
    assert _same(task.observe(state, obs_mode), ref)
    for i, row in enumerate(_rows(state, type(state))):
        assert _same(task.observe(row, obs_mode)[0], ref[i])


# ---- runner and adapters ------------------------------------------------------------------------
def test_check_action_clips_like_np_clip_and_still_rejects_non_finite():
    runner = TaskRunner(make_task("dc_microgrid"), num_envs=3)
    action = np.array([[0.5, 0.2, 25.0, 0.0, 1.0], [-0.0, 1.5, 10.0, -3.0, 0.1], [0.0, 0.0, 18.0, 2.0, 2.5]])
    clipped, flags = runner.check_action(action)
    assert _same(clipped, np.clip(action, runner.act_low, runner.act_high))  # signed zeros included
    assert flags.dtype == bool and flags.tolist() == [False, True, False]
    _, flags = runner.check_action(action[[0, 2]].repeat([2, 1], axis=0))
    assert flags.dtype == bool and flags.tolist() == [False, False, False]
    for bad in (np.nan, np.inf, -np.inf):
        action[2, 3] = bad
        with pytest.raises(ValueError, match="NaN or inf"):
            runner.check_action(action)


def _reference_cost_info(spec, costs):
    selected = costs[:, spec.selected_index]
    info = {
        "constraint_costs": costs, "cost_sum": costs.sum(axis=1),
        "selected_constraint_costs": selected, "selected_cost_sum": selected.sum(axis=1),
        "is_safe": ~np.any(costs > 0.0, axis=1),
    }
    for i, name in enumerate(spec.constraint_names):
        info[f"cost_{name}"] = costs[:, i]
    return info


@pytest.mark.parametrize("selected", [("thermal_overload", "power_imbalance"), ("power_imbalance",)])
def test_cost_layout_matches_the_definition(selected):
    spec = dataclasses.replace(make_task("marl_opf").spec, selected_constraints=selected,
                               cost_thresholds=dict.fromkeys(selected, 1.0))
    costs = np.abs(np.random.default_rng(0).normal(size=(6, 2)))
    costs[0] = 0.0
    costs[1] = [np.nan, 0.0]  # not a valid cost, but is_safe must keep its meaning (no entry > 0)
    costs[2, 1] = -0.0
    got, ref = CostLayout(spec).info(costs), _reference_cost_info(spec, costs)
    assert list(got) == list(ref)
    for key, value in ref.items():
        assert _same(got[key], value) if isinstance(value, np.ndarray) else got[key] == value


def test_scalar_info_gives_python_scalars():
    info = {"a": np.array([1.5]), "n": np.array([3], np.int64), "flag": np.array([True]),
            "date": np.array(["2023-01-30"], dtype="datetime64[D]"), "vec": np.array([[1.0, 2.0]]), "names": ("x",)}
    out = scalar_info(info)
    assert out == {"a": 1.5, "n": 3, "flag": True, "date": "2023-01-30", "vec": out["vec"], "names": ("x",)}
    assert [type(out[k]) for k in ("a", "n", "flag", "date")] == [float, int, bool, str]
    assert out["vec"].tolist() == [1.0, 2.0]


@pytest.mark.parametrize("form", ["float32", "float", "zero_d", "list", "row", "mixed"])
def test_single_env_joint_action_matches_the_checked_conversion(form):
    env = make_env("marl_opf", framework="pettingzoo", seed=0)
    core = env.core
    values = np.random.default_rng(0).uniform(0, 200, len(core.agents))
    make = {
        "float32": lambda v: np.array([v], np.float32), "float": float, "zero_d": np.array, "list": lambda v: [v],
        "row": lambda v: np.array([[v]]),
    }
    if form == "mixed":  # different shapes per agent: the checked path converts
        actions = {a: (np.array([v]) if i % 2 else float(v)) for i, (a, v) in enumerate(zip(core.agents, values, strict=True))}
    else:
        actions = {a: make[form](v) for a, v in zip(core.agents, values, strict=True)}
    assert _same(core.joint_action(actions), core._joint_action_checked(actions))
    actions[core.agents[2]] = np.zeros(3)
    with pytest.raises(ValueError, match="action of gen_2 has shape"):
        core.joint_action(actions)
    actions[core.agents[2]] = "x"
    with pytest.raises(ValueError, match="action of gen_2 must be numeric"):
        core.joint_action(actions)


def test_agent_infos_are_separate_dicts_with_their_own_action():
    env = make_env("marl_opf", framework="pettingzoo", seed=0)
    actions = {a: np.array([10.0 * (i + 1)], np.float32) for i, a in enumerate(env.agents)}
    _, _, _, _, infos = env.step(actions)
    dicts = list(infos.values())
    assert len({id(d) for d in dicts}) == len(dicts)
    for i, info in enumerate(dicts):
        assert info["action_applied"].tolist() == [10.0 * (i + 1)]
        assert list(info) == list(dicts[0]) and info["cost_sum"] == dicts[0]["cost_sum"]
    infos["gen_0"]["extra"] = 1
    assert "extra" not in infos["gen_1"]


# ---- devices ------------------------------------------------------------------------------------
def _reference_battery_step(params, soc, p_request, dt_h):
    cap, eta_c, eta_d = params.energy_capacity_mwh, params.charge_efficiency, params.discharge_efficiency
    stored = np.maximum(soc - params.soc_min, 0.0) * cap
    room = np.maximum(params.soc_max - soc, 0.0) * cap
    p_ch = np.minimum(room / (eta_c * dt_h), params.power_max_mw)
    p_dis = np.minimum(stored * eta_d / dt_h, params.power_max_mw)
    p = np.clip(p_request, -p_ch, p_dis)
    discharge, charge = np.maximum(p, 0.0) * dt_h, np.maximum(-p, 0.0) * dt_h
    excess = p_request - p
    excess = np.where(np.abs(excess) < 1e-5, 0.0, excess)
    violation = np.abs(excess) * np.where(excess > 0.0, dt_h / eta_d, dt_h * eta_c)
    soc = np.clip(soc + (eta_c * charge - discharge / eta_d) / cap, params.soc_min, params.soc_max)
    return soc, p, charge, discharge, violation


@pytest.mark.parametrize("params", [BatteryParams(), BatteryParams(energy_capacity_mwh=4.0, power_max_mw=2.0, soc_min=0.0)])
def test_battery_step_matches_the_reference(params):
    rng = np.random.default_rng(0)
    n = 5000
    soc = np.concatenate([rng.uniform(params.soc_min, params.soc_max, n), [params.soc_min, params.soc_max, 0.5, 0.5]])
    p_ch, p_dis = (params.power_max_mw,) * 2
    request = np.concatenate([rng.uniform(-1.2 * p_ch, 1.2 * p_dis, n), [-0.0, 0.0, 1e-5, -1e-5 * (1 - 1e-12)]])
    for dt_h in (0.5, 5 / 60):
        out = battery_step(params, soc, request, dt_h)
        ref = _reference_battery_step(params, soc, request, dt_h)
        for got, want in zip((out.soc, out.p_mw, out.charge_mwh, out.discharge_mwh, out.soc_violation_mwh), ref, strict=True):
            assert _same(got, want)


def test_queue_shortcuts_match_the_reference():
    rng = np.random.default_rng(0)
    cum = np.cumsum(rng.uniform(0, 5, (7, 2, 25)), axis=2)
    inv_hours = 1.0 / rng.uniform(0.1, 24, (7, 25))
    k_now = rng.integers(0, 24, 7)
    allowance = rng.uniform(0, 3, (7, 2))
    flat = (np.arange(14) * 25).reshape(7, 2) + k_now[:, None]
    rate = cum * inv_hours[:, None, :]
    rate[:, :, -1] = (cum[:, :, -1] - np.minimum(allowance, cum[:, :, -1] - cum[:, :, -2])) * inv_hours[:, -1:]
    due, required = queue_outlook(cum, inv_hours, k_now, allowance)
    assert _same(due, cum.take(flat)) and _same(required, rate.max(axis=2))
    for t in (np.full(7, 13), np.arange(7) * 12, np.full(7, 300)):  # no boundary, some due, past the day
        mine, ref = cum.copy(), cum.copy()
        k = t // 12 - 1
        due_now = (t % 12 == 0) & (k >= 0) & (k < 24)
        expected = cum[np.arange(7), :, np.clip(k, 0, 23)] * due_now[:, None] if due_now.any() else np.zeros((7, 2))
        if due_now.any():
            ref -= expected[:, :, None]
            np.maximum(ref, 0.0, out=ref)
        assert _same(drop_due(mine, t, 12), expected) and _same(mine, ref)


def test_episode_buffer_checks_the_number_of_values():
    buffer = _EpisodeBuffer(("observations", "actions", "rewards", "next_observations", "terminals", "truncations"),
                            batched=False)
    with pytest.raises(ValueError, match="needs 6 values"):
        buffer.add(1, 2, 3)


# ---- device shortcuts of the dc_microgrid step ----------------------------------------------------
def _signed_zeros_and(values, *edges):
    """``values`` plus every edge value, each also as +-0.0 and with its sign flipped."""
    edges = np.array([0.0, -0.0, *edges, *(-np.array(edges))], dtype=np.float64)
    return np.concatenate([np.asarray(values, np.float64), edges])


@pytest.mark.parametrize("params", [BatteryParams(energy_capacity_mwh=4.0, power_max_mw=2.0), BatteryParams(soc_min=0.0)])
def test_battery_dispatch_matches_battery_step(params):
    rng = np.random.default_rng(1)
    p_max = params.power_max_mw
    socs = np.concatenate([rng.uniform(params.soc_min, params.soc_max, 300), [params.soc_min, params.soc_max, 0.5]])
    # requests inside the action space [-p_max, p_max], edges and signed zeros included
    requests = np.clip(_signed_zeros_and(rng.uniform(-p_max, p_max, 300), p_max, 1e-9, 1e-5), -p_max, p_max)
    soc, request = (np.repeat(socs, requests.size), np.tile(requests, socs.size))
    for dt_h in (5 / 60, 0.25, 1.0):
        ref = battery_step(params, soc, request, dt_h)
        for rows in (slice(None), slice(7, 8)):  # batched (SIMD loops) and B = 1 (scalar loops)
            got = BatteryDispatch(params, dt_h)(soc[rows], request[rows])
            for value, want in zip(got, (ref.soc, ref.p_mw, ref.charge_mwh, ref.discharge_mwh), strict=True):
                assert _same(value, want[rows])


def test_dc_device_shortcuts_match_the_functions():
    rng = np.random.default_rng(2)
    n = 4000
    cooling, zone, diesel, grid = CoolingParams(), ZoneParams(), DieselParams(), GridTieParams()
    temp_out, setpoint = rng.uniform(-20, 50, n), rng.uniform(18, 32, n)
    temp_out[:5], setpoint[:5] = [10.0, 40.0, 30.0, 20.0, 32.0], [18.0, 32.0, 22.0, 20.0, 32.0]  # lift at and below 1 K
    assert _same(CoolingPlant(cooling).cop(temp_out, setpoint), cooling_cop(cooling, temp_out, setpoint))
    zone_temp, heat = rng.uniform(15, 40, n), rng.uniform(0, 5, n)
    for q_max, dt_h in ((3.5, 5 / 60), (1.0, 0.25)):
        got, want = ZoneStepper(zone, q_max, dt_h)(zone_temp, temp_out, setpoint, heat), zone_step(
            zone, zone_temp, temp_out, setpoint, heat, q_max, dt_h)
        assert all(_same(a, b) for a, b in zip(got, want, strict=True))
    p_min = diesel.p_min_mw
    requests = np.clip(_signed_zeros_and(rng.uniform(0, diesel.rated_mw, n), 0.5 * p_min, p_min, np.nextafter(0.5 * p_min, 0)),
                       0.0, diesel.rated_mw)
    assert _same(DieselGenerator(diesel).output_mw(requests), diesel_output_mw(diesel, requests))
    no_min = DieselParams(min_stable_fraction=0.0)
    assert _same(DieselGenerator(no_min).output_mw(requests), diesel_output_mw(no_min, requests))
    residual = _signed_zeros_and(rng.uniform(-3, 4, n), grid.import_max_mw)
    for tie in (grid, GridTieParams(import_max_mw=0.0)):
        assert all(_same(a, b) for a, b in zip(GridTie(tie).settle(residual), settle(tie, residual), strict=True))


def test_gpu_cluster_shortcuts_match_the_functions():
    rng = np.random.default_rng(3)
    shares = rng.uniform(0, 1, (3000, 2))
    shares[:6] = [[0.0, 0.0], [-0.0, -0.0], [1.0, 0.0], [0.5, 0.5], [1.0, 1.0], [-0.0, 1.0]]
    for params in (GpuClusterParams(), GpuClusterParams(n_gpus=7)):
        cluster = GpuCluster(params, 2)
        for rows in (slice(None), slice(4, 5)):
            gpus = cluster.allocate(shares[rows])
            assert _same(gpus, allocate_gpus(params, shares[rows]))
            allocated, busy = gpus.sum(axis=1), gpus.sum(axis=1) * rng.uniform(0, 1, gpus.shape[0])
            assert _same(cluster.it_power_mw(allocated, busy), it_power_mw(params, allocated, busy))
    three = rng.uniform(0, 1, (50, 3))
    assert _same(GpuCluster(GpuClusterParams(), 3).allocate(three), allocate_gpus(GpuClusterParams(), three))


def test_queue_outlook_table_and_serving_match_the_functions():
    rng = np.random.default_rng(4)
    n_steps, n_rows = 30, 9
    inv_hours = 1.0 / rng.uniform(0.1, 24, (n_steps, 25))
    k_now = rng.integers(0, 24, n_steps)
    outlook = QueueOutlook(inv_hours, k_now, 2)
    per_bucket = rng.uniform(0, 5, (n_rows, 2, 25)) * (rng.random((n_rows, 2, 25)) < 0.5)
    per_bucket[0] = 0.0  # an empty queue: every rate is 0
    cum = np.cumsum(per_bucket, axis=2)
    allowance = rng.uniform(0, 3, (n_rows, 2)) * (rng.random((n_rows, 2)) < 0.7)
    rows = rng.integers(0, n_steps, n_rows)
    for batch in (slice(None), slice(0, 1), slice(3, 4)):
        got = outlook(cum[batch], rows[batch], allowance[batch])
        want = queue_outlook(cum[batch], inv_hours[rows[batch]], k_now[rows[batch]], allowance[batch])
        assert all(_same(a, b) for a, b in zip(got, want, strict=True))
    capacity = rng.uniform(0, 30, (n_rows, 2))
    capacity[1] = [0.0, -0.0]
    remaining, served = serve_edf(cum, capacity)
    assert _same(served, np.minimum(capacity, cum[:, :, -1]))
    assert _same(remaining, np.maximum(cum - capacity[:, :, None], 0.0))
    with pytest.raises(ValueError, match="finite and positive"):
        QueueOutlook(np.zeros((2, 25)), np.zeros(2, int), 2)


# ---- the dc_microgrid step against the plain formulas ---------------------------------------------
def _reference_dc_step(task, state, action):
    """DCMicrogrid.step written the plain way with the device functions (its form before the shortcuts)."""
    p, w, dt_h, horizon = task.params, task.workload, task.spec.dt_h, task.spec.horizon
    idx = task.split_days[state.day_id] * task.profiles.steps_per_day + state.t
    temp_out, price, co2, pv_mw = task._exogenous[idx].T
    gpus = allocate_gpus(p.cluster, action[:, :2])
    cum, served = serve_edf(state.queue_cum_gpuh, gpus * dt_h)
    ones = np.ones(gpus.shape[1])
    it_mw = it_power_mw(p.cluster, gpus @ ones, (served @ ones) * (1.0 / dt_h))
    setpoint = action[:, 2]
    zone_temp, q_cool = zone_step(p.zone, state.zone_temp_c, temp_out, setpoint, it_mw, p.cooling.q_max_mw, dt_h)
    cooling_mw = q_cool / cooling_cop(p.cooling, temp_out, setpoint)
    battery = battery_step(p.battery, state.soc, action[:, 3], dt_h)
    diesel_mw = diesel_output_mw(p.diesel, action[:, 4])
    facility_mw = it_mw + cooling_mw
    grid_mw, deficit_mw, spill_mw = settle(p.grid, facility_mw - battery.p_mw - pv_mw - diesel_mw)
    reward_vector = np.stack([
        -facility_mw * dt_h,
        -(grid_mw * price + diesel_mw * p.diesel.fuel_cost_per_mwh) * dt_h
        - p.battery.degradation_cost_per_mwh * (battery.charge_mwh + battery.discharge_mwh),
        -(grid_mw * co2 + diesel_mw * p.diesel.co2_t_per_mwh) * dt_h,
    ], axis=1)
    t_next = state.t + 1
    dropped = drop_due(cum, t_next, w.steps_per_hour)
    in_day = t_next < horizon
    arrivals = w.arrival_cum_gpuh[np.where(in_day, idx + 1, -1)]
    cum += arrivals
    allowance = state.carry_allowance_gpuh + w.arrival_carry_gpuh[np.where(in_day, idx + 1, -1)]
    behind = carry_excess(cum, allowance) * ~in_day[:, None]
    costs = np.stack([(dropped + behind) @ ones, np.maximum(zone_temp - p.zone.temp_max_c, 0.0) * dt_h,
                      deficit_mw * dt_h], axis=1)
    reward = reward_vector @ task._weights
    if task.penalized:
        reward = reward - costs @ task._penalties
    t_clip = np.minimum(t_next, horizon)
    due_1h, required = queue_outlook(cum, task._inv_hours_left[t_clip],
                                     np.minimum(t_next // w.steps_per_hour, cum.shape[2] - 2), allowance)
    applied = np.stack([gpus[:, 0] / p.cluster.n_gpus, gpus[:, 1] / p.cluster.n_gpus, setpoint, battery.p_mw, diesel_mw],
                       axis=1)
    applied[:, :2] = gpus * (1.0 / p.cluster.n_gpus)
    state_values = {"t": t_next, "soc": battery.soc, "zone_temp_c": zone_temp, "queue_cum_gpuh": cum,
                    "arrived_gpuh": state.arrived_gpuh + arrivals[:, :, -1], "served_gpuh": state.served_gpuh + served,
                    "dropped_gpuh": state.dropped_gpuh + dropped, "carry_allowance_gpuh": allowance, "due_1h_gpuh": due_1h,
                    "required_gpus": required}
    info = {"reward_vector": reward_vector, "it_mw": it_mw, "cooling_mw": cooling_mw, "zone_temp_c": zone_temp,
            "temp_c": temp_out, "pv_mw": pv_mw, "pv_curtailed_mw": np.minimum(spill_mw, pv_mw), "diesel_mw": diesel_mw,
            "battery_p_mw": battery.p_mw, "soc": battery.soc, "grid_import_mw": grid_mw, "deficit_mw": deficit_mw,
            "spill_mw": spill_mw, "price_per_mwh": price, "grid_co2_t_per_mwh": co2, "gpus_allocated": gpus,
            "gpus_busy": served * (1.0 / dt_h), "arrived_gpuh": state_values["arrived_gpuh"],
            "served_gpuh": state_values["served_gpuh"], "dropped_gpuh": state_values["dropped_gpuh"],
            "behind_schedule_gpuh": behind, "queued_gpuh": cum[:, :, -1]}
    return state_values, reward, reward_vector, costs, applied, info


def _adversarial_actions(task, rng, shape):
    """Random physical actions with the bounds, signed zeros and diesel's thresholds mixed in."""
    low, high = task.spec.action.bounds()
    action = rng.uniform(low, high, shape + low.shape)
    pick = rng.random(action.shape)
    action = np.where(pick < 0.1, low, np.where(pick < 0.2, high, np.where(pick < 0.25, -0.0, action)))
    action[..., 4] = np.where(rng.random(shape) < 0.3, rng.choice([0.0, 0.375, 0.75, 0.76], shape), action[..., 4])
    return np.clip(action, low, high)


@pytest.mark.parametrize("task_id, split, kwargs", [
    ("dc_microgrid", "train", {}), ("dc_microgrid_safe", "workload_shock", {}),
    ("dc_microgrid", "heatwave", {"grid_import_max_mw": 0.0, "n_gpus": 512, "battery_energy_mwh": 1.0}),
])
def test_dc_microgrid_step_matches_the_plain_formulas_bit_for_bit(task_id, split, kwargs):
    task = make_task(task_id, split=split, **kwargs)
    rng = np.random.default_rng(5)
    for n_rows in (1, 4):
        state = task.reset(rng, rng.integers(0, task.n_days, n_rows))
        if n_rows > 1:  # rows at different steps, as after an autoreset
            state.t = np.array([0, 5, 11, 200])
        for action in _adversarial_actions(task, rng, (task.spec.horizon + 14, n_rows)):  # past the horizon too
            ref_state, reward, reward_vector, costs, applied, info = _reference_dc_step(task, state, action)
            state, out = task.step(state, action, rng)
            for name, want in ref_state.items():
                assert _same(getattr(state, name), want), name
            for got, want in ((out.reward, reward), (out.reward_terms, reward_vector), (out.constraint_costs, costs),
                              (out.action_applied, applied)):
                assert _same(got, want)
            assert list(out.info) == list(info)
            for key, want in info.items():
                assert _same(out.info[key], want), key
