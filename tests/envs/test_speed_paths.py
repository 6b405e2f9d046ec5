"""The B = 1 fast paths give exactly (bit for bit) what the straightforward formulas give.

Precomputed observation tables, the single-env joint-action conversion, the lazy finiteness
check, the CMDP info keys and the device shortcuts are checked against reference
implementations written the plain way (the formulas the fast paths replaced).
"""

import dataclasses
import math
import types

import numpy as np
import pytest

from powerzoo.benchmarks.offline import _EpisodeBuffer
from powerzoo.devices.battery import BatteryDispatch, BatteryParams, battery_step, feasible_power_mw
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
        assert _same(
            task.observe(row)[0, 3:5], np.array([np.sin(phase1)[0], np.cos(phase1)[0]], np.float32)
        )
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
    for col, values in (
        (0, np.sin(phase)),
        (1, np.cos(phase)),
        (2, 1.0 - t / task.spec.horizon),
        (3, task._temp[idx]),
        (4, state.zone_temp_c),
        (5, task._pv_cf[idx]),
        (6, task._price[idx]),
        (7, task._co2[idx]),
        (8, state.soc),
    ):
        assert _same(ref[:, col], np.asarray(values).astype(np.float32)), col
    for i, row in enumerate(
        _rows(state, type(state))
    ):  # B = 1, including the steps past the horizon
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

    def demand(k):
        return task._demand[(start[:, None] + t[:, None] + np.atleast_1d(k)) % task._demand.size]

    total = task.case.total_load_mw * 1.1
    phase = 2.0 * np.pi * (t % steps) / steps
    time = np.stack([np.sin(phase), np.cos(phase), 1.0 - t / task.spec.horizon], axis=1)
    own = np.concatenate(
        [np.broadcast_to(task._own, (b, n, 3)), state.prev_p_mw[:, :, None]], axis=2
    )
    parts = [np.broadcast_to(time[:, None, :], (b, n, 3))]
    if obs_mode == "global":
        parts += [
            np.broadcast_to((demand(np.arange(2)) * total)[:, None, :], (b, n, 2)),
            own,
            np.broadcast_to(state.prev_imbalance_mw[:, None, None], (b, n, 1)),
        ]
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
    action = np.array(
        [[0.5, 0.2, 25.0, 0.0, 1.0], [-0.0, 1.5, 10.0, -3.0, 0.1], [0.0, 0.0, 18.0, 2.0, 2.5]]
    )
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
        "constraint_costs": costs,
        "cost_sum": costs.sum(axis=1),
        "selected_constraint_costs": selected,
        "selected_cost_sum": selected.sum(axis=1),
        "is_safe": ~np.any(costs > 0.0, axis=1),
    }
    for i, name in enumerate(spec.constraint_names):
        info[f"cost_{name}"] = costs[:, i]
    return info


@pytest.mark.parametrize(
    "selected", [("thermal_overload", "power_imbalance"), ("power_imbalance",)]
)
def test_cost_layout_matches_the_definition(selected):
    spec = dataclasses.replace(
        make_task("marl_opf").spec,
        selected_constraints=selected,
        cost_thresholds=dict.fromkeys(selected, 1.0),
    )
    costs = np.abs(np.random.default_rng(0).normal(size=(6, 2)))
    costs[0] = 0.0
    costs[1] = [np.nan, 0.0]  # not a valid cost, but is_safe must keep its meaning (no entry > 0)
    costs[2, 1] = -0.0
    got, ref = CostLayout(spec).info(costs), _reference_cost_info(spec, costs)
    assert list(got) == list(ref)
    for key, value in ref.items():
        assert _same(got[key], value) if isinstance(value, np.ndarray) else got[key] == value


def test_scalar_info_gives_python_scalars():
    info = {
        "a": np.array([1.5]),
        "n": np.array([3], np.int64),
        "flag": np.array([True]),
        "date": np.array(["2023-01-30"], dtype="datetime64[D]"),
        "vec": np.array([[1.0, 2.0]]),
        "names": ("x",),
    }
    out = scalar_info(info)
    assert out == {
        "a": 1.5,
        "n": 3,
        "flag": True,
        "date": "2023-01-30",
        "vec": out["vec"],
        "names": ("x",),
    }
    assert [type(out[k]) for k in ("a", "n", "flag", "date")] == [float, int, bool, str]
    assert out["vec"].tolist() == [1.0, 2.0]


def test_scalar_info_follows_a_value_that_changes_kind():
    info = {"a": np.array([1.5]), "vec": np.array([[1.0, 2.0]]), "names": ("x",)}
    out = scalar_info(info)
    assert out["a"] == 1.5 and out["names"] == ("x",) and out["vec"].tolist() == [1.0, 2.0]
    info["a"] = 2.0  # no longer an array: passed on as it is
    info["names"] = np.array([3])  # now a [B] array: converted to a Python int
    out = scalar_info(info)
    assert out["a"] == 2.0 and out["names"] == 3 and type(out["names"]) is int
    assert list(out) == ["a", "vec", "names"]


@pytest.mark.parametrize(
    "form", ["float32", "float", "zero_d", "list", "row", "mixed", "int", "scalar", "reversed"]
)
def test_single_env_joint_action_matches_the_checked_conversion(form):
    env = make_env("marl_opf", framework="pettingzoo", seed=0)
    core = env.core
    values = np.random.default_rng(0).uniform(0, 200, len(core.agents))
    make = {
        "float32": lambda v: np.array([v], np.float32),
        "float": float,
        "zero_d": np.array,
        "list": lambda v: [v],
        "row": lambda v: np.array([[v]]),
        "int": lambda v: np.array([int(v)], np.uint16),
        "scalar": np.float32,
        "reversed": lambda v: np.array([v]),
    }
    if form == "mixed":  # different shapes per agent: the checked path converts
        actions = {
            a: (np.array([v]) if i % 2 else float(v))
            for i, (a, v) in enumerate(zip(core.agents, values, strict=True))
        }
    else:
        actions = {a: make[form](v) for a, v in zip(core.agents, values, strict=True)}
    if form == "reversed":  # a dict in another order: the joint action is still agent-major
        actions = dict(reversed(actions.items()))
    joint = core.joint_action(actions)
    assert _same(joint, core._joint_action_checked(actions))
    expected = values.astype(np.float32) if form in ("float32", "scalar") else values
    if form == "int":
        expected = values.astype(np.uint16)
    assert joint.tolist() == [expected.astype(np.float64).tolist()]
    actions[core.agents[1]] = np.array([True])  # a bool among numbers is refused, not read as 1
    with pytest.raises(ValueError, match="action of gen_1 must be numeric"):
        core.joint_action(actions)
    actions[core.agents[1]] = np.array([1.0])
    actions[core.agents[2]] = np.zeros(3)
    with pytest.raises(ValueError, match="action of gen_2 has shape"):
        core.joint_action(actions)
    actions[core.agents[2]] = "x"
    with pytest.raises(ValueError, match="action of gen_2 must be numeric"):
        core.joint_action(actions)


def test_agent_infos_are_separate_dicts_with_their_own_action():
    env = make_env("marl_der_arbitrage", framework="pettingzoo", seed=0)
    env.reset(seed=0)  # batteries at half charge: a first step of these powers is applied as asked
    actions = {a: np.array([0.125 * (i + 1)], np.float32) for i, a in enumerate(env.agents)}
    _, _, _, _, infos = env.step(actions)
    dicts = list(infos.values())
    assert len({id(d) for d in dicts}) == len(dicts)
    for i, info in enumerate(dicts):
        assert info["action_applied"].tolist() == [0.125 * (i + 1)]
        assert list(info) == list(dicts[0]) and info["cost_sum"] == dicts[0]["cost_sum"]
    infos["battery_0"]["extra"] = 1
    assert "extra" not in infos["battery_1"]


def test_episode_buffer_checks_the_number_of_values():
    buffer = _EpisodeBuffer(
        ("observations", "actions", "rewards", "next_observations", "terminals", "truncations"),
        batched=False,
    )
    with pytest.raises(ValueError, match="needs 6 values"):
        buffer.add(1, 2, 3)


# ---- devices: each rule has one implementation (a class the module function calls); both the
# float64 fast path and the functions (any dtype) are checked against the plain formulas ---------
def _reference_feasible(params, soc, dt_h):
    stored = np.maximum(soc - params.soc_min, 0.0) * params.energy_capacity_mwh
    room = np.maximum(params.soc_max - soc, 0.0) * params.energy_capacity_mwh
    return (
        np.minimum(room / (params.charge_efficiency * dt_h), params.power_max_mw),
        np.minimum(stored * params.discharge_efficiency / dt_h, params.power_max_mw),
    )


def _reference_battery_step(params, soc, p_request, dt_h):
    cap, eta_c, eta_d = (
        params.energy_capacity_mwh,
        params.charge_efficiency,
        params.discharge_efficiency,
    )
    p_ch, p_dis = _reference_feasible(params, soc, dt_h)
    p = np.clip(p_request, -p_ch, p_dis)
    discharge, charge = np.maximum(p, 0.0) * dt_h, np.maximum(-p, 0.0) * dt_h
    excess = p_request - p
    excess = np.where(np.abs(excess) < 1e-5, 0.0, excess)
    violation = np.abs(excess) * np.where(excess > 0.0, dt_h / eta_d, dt_h * eta_c)
    soc = np.clip(soc + (eta_c * charge - discharge / eta_d) / cap, params.soc_min, params.soc_max)
    return soc, p, charge, discharge, violation


def _reference_cop(c, temp_out, setpoint):
    t_evap = setpoint - c.evaporator_approach_k
    lift = np.maximum(temp_out + c.condenser_approach_k - t_evap, 1.0)
    return np.minimum(
        np.maximum(c.carnot_fraction * (t_evap + 273.15) / lift, c.cop_min), c.cop_max
    )


def _reference_zone_step(z, temp, temp_out, setpoint, heat, q_max, dt_h):
    c, decay = z.heat_capacity_mwh_per_k, math.exp(-dt_h * 60.0 / z.tau_min)
    gains = heat + z.ua_mw_per_k * (temp_out - temp)
    target = setpoint + (temp - setpoint) * decay
    q_cool = np.minimum(np.maximum(gains + (temp - target) * (c / dt_h), 0.0), q_max)
    return temp + (gains - q_cool) * (dt_h / c), q_cool


def _reference_diesel(d, request):
    return np.where(request < 0.5 * d.p_min_mw, 0.0, np.maximum(request, d.p_min_mw))


def _reference_settle(g, residual):
    grid = np.minimum(np.maximum(residual, 0.0), g.import_max_mw)
    return grid, np.maximum(residual - grid, 0.0), np.maximum(-residual, 0.0)


def _reference_allocate(c, shares):
    return shares * (c.n_gpus / np.maximum(shares @ np.ones(shares.shape[1]), 1.0))[:, None]


def _reference_it_power(c, allocated, busy):
    return (
        busy * c.p_active_kw
        + (allocated - busy) * c.p_idle_kw
        + (c.n_gpus - allocated) * c.p_parked_kw
    ) * 1e-3


def _reference_outlook(cum, inv_hours, k_now, allowance):
    rate = cum * inv_hours[:, None, :]
    rate[:, :, -1] = (
        cum[:, :, -1] - np.minimum(allowance, cum[:, :, -1] - cum[:, :, -2])
    ) * inv_hours[:, -1:]
    return cum[np.arange(cum.shape[0]), :, k_now], rate.max(axis=2)


def _all_same(got, want) -> bool:
    """``_same`` for one value or elementwise for tuples, Python types included."""
    if isinstance(want, tuple):
        return len(got) == len(want) and all(
            _all_same(g, w) for g, w in zip(got, want, strict=True)
        )
    return type(got) is type(want) and _same(got, want)


def _signed_zeros_and(values, *edges):
    """``values`` plus every edge value, each also as +-0.0 and with its sign flipped."""
    edges = np.array([0.0, -0.0, *edges, *(-np.array(edges))], dtype=np.float64)
    return np.concatenate([np.asarray(values, np.float64), edges])


@pytest.mark.parametrize(
    "params",
    [BatteryParams(), BatteryParams(energy_capacity_mwh=4.0, power_max_mw=2.0, soc_min=0.0)],
)
def test_battery_step_matches_the_reference(params):
    rng = np.random.default_rng(0)
    n = 5000
    soc = np.concatenate(
        [rng.uniform(params.soc_min, params.soc_max, n), [params.soc_min, params.soc_max, 0.5, 0.5]]
    )
    p_ch, p_dis = (params.power_max_mw,) * 2
    request = np.concatenate(
        [rng.uniform(-1.2 * p_ch, 1.2 * p_dis, n), [-0.0, 0.0, 1e-5, -1e-5 * (1 - 1e-12)]]
    )
    for dt_h in (0.5, 5 / 60):
        out = battery_step(params, soc, request, dt_h)
        ref = _reference_battery_step(params, soc, request, dt_h)
        for got, want in zip(
            (out.soc, out.p_mw, out.charge_mwh, out.discharge_mwh, out.soc_violation_mwh),
            ref,
            strict=True,
        ):
            assert _same(got, want)
        assert _all_same(
            feasible_power_mw(params, soc, dt_h), _reference_feasible(params, soc, dt_h)
        )


@pytest.mark.parametrize(
    "params", [BatteryParams(energy_capacity_mwh=4.0, power_max_mw=2.0), BatteryParams(soc_min=0.0)]
)
def test_battery_dispatch_matches_the_reference(params):
    rng = np.random.default_rng(1)
    p_max = params.power_max_mw
    socs = np.concatenate(
        [rng.uniform(params.soc_min, params.soc_max, 300), [params.soc_min, params.soc_max, 0.5]]
    )
    # requests inside the action space [-p_max, p_max], edges and signed zeros included
    requests = np.clip(
        _signed_zeros_and(rng.uniform(-p_max, p_max, 300), p_max, 1e-9, 1e-5), -p_max, p_max
    )
    soc, request = (np.repeat(socs, requests.size), np.tile(requests, socs.size))
    for dt_h in (5 / 60, 0.25, 1.0):
        ref = _reference_battery_step(params, soc, request, dt_h)
        dispatch = BatteryDispatch(params, dt_h)
        for rows in (slice(None), slice(7, 8)):  # batched (SIMD loops) and B = 1 (scalar loops)
            for value, want in zip(dispatch(soc[rows], request[rows]), ref[:4], strict=True):
                assert _same(value, want[rows])


def test_battery_functions_take_fleet_ratings_as_arrays():
    # ratings per unit [n_units] broadcast against [B, n_units],
    # as for a fleet of inverter batteries
    fleet = types.SimpleNamespace(
        energy_capacity_mwh=np.array([2.0, 1.0, 4.0]),
        power_max_mw=np.array([1.0, 0.5, 2.0]),
        charge_efficiency=np.array([0.95, 0.9, 0.97]),
        discharge_efficiency=np.array([0.95, 0.9, 0.96]),
        soc_min=np.array([0.1, 0.0, 0.2]),
        soc_max=np.array([0.9, 1.0, 0.8]),
    )
    rng = np.random.default_rng(6)
    soc, request = rng.uniform(0.0, 1.0, (50, 3)), rng.uniform(-2.5, 2.5, (50, 3))
    for _ in range(2):  # not cached (unhashable ratings): the same answer on every call
        out = battery_step(fleet, soc, request, 0.25)
        assert _all_same(
            dataclasses.astuple(out), _reference_battery_step(fleet, soc, request, 0.25)
        )
        assert _all_same(feasible_power_mw(fleet, soc, 0.25), _reference_feasible(fleet, soc, 0.25))


def test_dc_devices_match_the_plain_formulas():
    rng = np.random.default_rng(2)
    n = 4000
    cooling, zone, diesel, grid = CoolingParams(), ZoneParams(), DieselParams(), GridTieParams()
    temp_out, setpoint = rng.uniform(-20, 50, n), rng.uniform(18, 32, n)
    temp_out[:5], setpoint[:5] = (
        [10.0, 40.0, 30.0, 20.0, 32.0],
        [18.0, 32.0, 22.0, 20.0, 32.0],
    )  # lift at and below 1 K
    # cop_max = 1000: the 1 K floor of the lift binds (with cop_max = 7 the clip hides it)
    for plant in (
        cooling,
        CoolingParams(carnot_fraction=0.5, condenser_approach_k=3.0, cop_max=9.0),
        CoolingParams(cop_max=1e3),
    ):
        want = _reference_cop(plant, temp_out, setpoint)
        assert _same(CoolingPlant(plant).cop(temp_out, setpoint), want) and _same(
            cooling_cop(plant, temp_out, setpoint), want
        )
    zone_temp, heat = rng.uniform(15, 40, n), rng.uniform(0, 5, n)
    for q_max, dt_h in ((3.5, 5 / 60), (1.0, 0.25), (np.inf, 5 / 60)):
        want = _reference_zone_step(zone, zone_temp, temp_out, setpoint, heat, q_max, dt_h)
        assert _all_same(ZoneStepper(zone, q_max, dt_h)(zone_temp, temp_out, setpoint, heat), want)
        assert _all_same(zone_step(zone, zone_temp, temp_out, setpoint, heat, q_max, dt_h), want)
    p_min = diesel.p_min_mw
    requests = np.clip(
        _signed_zeros_and(
            rng.uniform(0, diesel.rated_mw, n), 0.5 * p_min, p_min, np.nextafter(0.5 * p_min, 0)
        ),
        0.0,
        diesel.rated_mw,
    )
    for gen in (diesel, DieselParams(min_stable_fraction=0.0)):
        want = _reference_diesel(gen, requests)
        assert _same(DieselGenerator(gen).output_mw(requests), want) and _same(
            diesel_output_mw(gen, requests), want
        )
    residual = _signed_zeros_and(rng.uniform(-3, 4, n), grid.import_max_mw)
    for tie in (grid, GridTieParams(import_max_mw=0.0)):
        want = _reference_settle(tie, residual)
        assert _all_same(GridTie(tie).settle(residual), want) and _all_same(
            settle(tie, residual), want
        )


def test_gpu_cluster_matches_the_plain_formulas():
    rng = np.random.default_rng(3)
    shares = rng.uniform(0, 1, (3000, 2))
    shares[:6] = [[0.0, 0.0], [-0.0, -0.0], [1.0, 0.0], [0.5, 0.5], [1.0, 1.0], [-0.0, 1.0]]
    for params in (GpuClusterParams(), GpuClusterParams(n_gpus=7)):
        cluster = GpuCluster(params, 2)
        for rows in (slice(None), slice(4, 5)):
            want = _reference_allocate(params, shares[rows])
            assert _same(cluster.allocate(shares[rows]), want) and _same(
                allocate_gpus(params, shares[rows]), want
            )
            allocated, busy = want.sum(axis=1), want.sum(axis=1) * rng.uniform(0, 1, want.shape[0])
            want = _reference_it_power(params, allocated, busy)
            assert _same(cluster.it_power_mw(allocated, busy), want) and _same(
                it_power_mw(params, allocated, busy), want
            )
    for n_classes in (1, 3):
        more = rng.uniform(0, 1, (50, n_classes))
        want = _reference_allocate(GpuClusterParams(), more)
        assert _same(GpuCluster(GpuClusterParams(), n_classes).allocate(more), want)
        assert _same(allocate_gpus(GpuClusterParams(), more), want)


def test_queue_outlook_and_serving_match_the_plain_formulas():
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
        want = _reference_outlook(
            cum[batch], inv_hours[rows[batch]], k_now[rows[batch]], allowance[batch]
        )
        assert _all_same(outlook(cum[batch], rows[batch], allowance[batch]), want)
        assert _all_same(
            queue_outlook(cum[batch], inv_hours[rows[batch]], k_now[rows[batch]], allowance[batch]),
            want,
        )
    capacity = rng.uniform(0, 30, (n_rows, 2))
    capacity[1] = [0.0, -0.0]
    remaining, served = serve_edf(cum, capacity)
    assert _same(served, np.minimum(capacity, cum[:, :, -1]))
    assert _same(remaining, np.maximum(cum - capacity[:, :, None], 0.0))
    with pytest.raises(ValueError, match="finite and positive"):
        QueueOutlook(np.zeros((2, 25)), np.zeros(2, int), 2)
    with pytest.raises(ValueError, match="finite and positive"):
        queue_outlook(cum[:2], np.full((2, 25), np.inf), np.zeros(2, int), allowance[:2])


def test_queue_shortcuts_match_the_reference():
    rng = np.random.default_rng(0)
    cum = np.cumsum(rng.uniform(0, 5, (7, 2, 25)), axis=2)
    inv_hours = 1.0 / rng.uniform(0.1, 24, (7, 25))
    k_now = rng.integers(0, 24, 7)
    allowance = rng.uniform(0, 3, (7, 2))
    flat = (np.arange(14) * 25).reshape(7, 2) + k_now[:, None]
    rate = cum * inv_hours[:, None, :]
    rate[:, :, -1] = (
        cum[:, :, -1] - np.minimum(allowance, cum[:, :, -1] - cum[:, :, -2])
    ) * inv_hours[:, -1:]
    due, required = queue_outlook(cum, inv_hours, k_now, allowance)
    assert _same(due, cum.take(flat)) and _same(required, rate.max(axis=2))
    for t in (
        np.full(7, 13),
        np.arange(7) * 12,
        np.full(7, 300),
    ):  # no boundary, some due, past the day
        mine, ref = cum.copy(), cum.copy()
        k = t // 12 - 1
        due_now = (t % 12 == 0) & (k >= 0) & (k < 24)
        expected = (
            cum[np.arange(7), :, np.clip(k, 0, 23)] * due_now[:, None]
            if due_now.any()
            else np.zeros((7, 2))
        )
        if due_now.any():
            ref -= expected[:, :, None]
            np.maximum(ref, 0.0, out=ref)
        assert _same(drop_due(mine, t, 12), expected) and _same(mine, ref)


def _dtype_cases():
    """(function, reference, args) with float32 batches, Python floats and numpy-scalar steps."""
    rng = np.random.default_rng(7)
    b, c, z, d, g, k = (
        BatteryParams(),
        CoolingParams(),
        ZoneParams(),
        DieselParams(),
        GridTieParams(),
        GpuClusterParams(),
    )
    f32 = lambda *shape: rng.uniform(0.0, 1.0, shape).astype(np.float32)  # noqa: E731
    soc, req = f32(64), (f32(64) - 0.5) * 60  # beyond the rating too
    temps = (f32(64) * 40, f32(64) * 14 + 18)
    cum = np.cumsum(f32(3, 2, 25) * 5, axis=2)
    for dt_h in (
        0.25,
        np.float64(0.25),
        np.float32(0.25),
        1,
    ):  # the step's type matters to numpy: not shared by the cache
        yield (
            (lambda *a: dataclasses.astuple(battery_step(*a))),
            _reference_battery_step,
            (b, soc, req, dt_h),
        )
        # Python floats: the SOC, power and energies (the violation is a 0-d array,
        # as np.where gives)
        yield (
            (lambda *a: dataclasses.astuple(battery_step(*a))[:4]),
            (lambda *a: _reference_battery_step(*a)[:4]),
            (b, 0.3, -12.5, dt_h),
        )
        yield feasible_power_mw, _reference_feasible, (b, soc, dt_h)
        yield zone_step, _reference_zone_step, (z, temps[0] + 10, *temps, f32(64) * 3, 3.5, dt_h)
        yield zone_step, _reference_zone_step, (z, 26.0, 30.0, 24.0, 2.0, 1.0, dt_h)
    for args in ((c, *temps), (c, 35.0, 25.0), (c, np.float32(35.0), 25.0)):
        yield cooling_cop, _reference_cop, args
    for request in (f32(64) * 2.5, 0.3, 0.5, np.float32(1.0), f32(64).astype(np.float16)):
        yield diesel_output_mw, _reference_diesel, (d, request)
    for residual in ((f32(64) - 0.3) * 4, 2.0, -0.5):
        yield settle, _reference_settle, (g, residual)
    yield allocate_gpus, _reference_allocate, (k, f32(64, 2))
    yield allocate_gpus, _reference_allocate, (k, f32(64, 3))
    yield it_power_mw, _reference_it_power, (k, f32(64) * 2048, f32(64) * 1024)
    yield it_power_mw, _reference_it_power, (k, 1024.0, 512)
    yield (
        queue_outlook,
        _reference_outlook,
        (cum, (1.0 / (f32(3, 25) * 20 + 0.5)).astype(np.float32), np.array([0, 5, 23]), f32(3, 2)),
    )


def test_device_functions_keep_the_input_types():
    """A float32 batch stays float32 and Python floats give what numpy's scalar rules give: the
    functions use the parameters' own values, not the fast path's float64 constants."""
    for function, reference, args in _dtype_cases():
        got, want = function(*args), reference(*args)
        assert _all_same(got, want), (function.__name__, [type(a).__name__ for a in args])
    out = battery_step(
        BatteryParams(), np.full(2, 0.5, np.float32), np.array([3.0, -3.0], np.float32), 0.25
    )
    assert out.soc.dtype == out.p_mw.dtype == np.float32


def test_device_functions_give_hand_computed_values():
    grid_mw, deficit_mw, spill_mw = settle(
        GridTieParams(), np.array([2.0, 1.0, -0.5, 0.0])
    )  # import cap 1.5 MW
    assert grid_mw.tolist() == [1.5, 1.0, 0.0, 0.0] and deficit_mw.tolist() == [0.5, 0.0, 0.0, 0.0]
    assert spill_mw.tolist() == [0.0, 0.0, 0.5, 0.0]
    cluster = GpuClusterParams()  # 2048 GPUs
    # shares summing to more than 1 are scaled down to sum to 1
    np.testing.assert_allclose(
        allocate_gpus(cluster, np.array([[0.6, 0.6], [0.25, 0.5], [0.0, 0.0]])),
        [[1024, 1024], [512, 1024], [0, 0]],
        rtol=1e-12,
    )
    assert allocate_gpus(cluster, np.array([[0.5, 0.5, 1.0]])).tolist() == [[512, 512, 1024]]
    # all busy: 2048 x 1.275 kW; half allocated, a quarter busy; all parked: 2048 x 0.05 kW
    np.testing.assert_allclose(
        it_power_mw(cluster, np.array([2048.0, 1024.0, 0.0]), np.array([2048.0, 512.0, 0.0])),
        [2.6112, 0.512 * 1.275 + 0.512 * 0.4 + 1.024 * 0.05, 0.1024],
        rtol=1e-12,
    )
    # 100 MWh at 25 MW, 0.95 each way, over 30 min:
    # room 80, 40 and 1 MWh above soc_min at 0.1 / 0.5 / 0.89
    p_ch, p_dis = feasible_power_mw(BatteryParams(), np.array([0.1, 0.5, 0.89, 0.9]), 0.5)
    np.testing.assert_allclose(p_ch, [25.0, 25.0, 1.0 / (0.95 * 0.5), 0.0], rtol=1e-12)
    np.testing.assert_allclose(p_dis, [0.0, 25.0, 25.0, 25.0], rtol=1e-12)
    # COP at a 25 deg C setpoint (evaporator 17 deg C):
    # 0.35 x 290.15 K / lift, lift = outdoor + 8 - 17
    np.testing.assert_allclose(
        cooling_cop(CoolingParams(), np.array([25.0, 35.0, 42.0]), np.full(3, 25.0)),
        [0.35 * 290.15 / 16, 0.35 * 290.15 / 26, 0.35 * 290.15 / 33],
        rtol=1e-12,
    )
    assert (
        diesel_output_mw(DieselParams(), 0.3).tolist() == 0.0
        and diesel_output_mw(DieselParams(), 0.4).tolist() == 0.75
    )


# ---- the dc_microgrid step against the plain formulas --------------------------------------------
def _reference_diesel_commitment(d, on, steps, request, dt_h):
    """(output, on, steps in state, started): the diesel's minimum run and down times, plainly."""
    min_up, min_down = math.ceil(d.min_up_h / dt_h - 1e-9), math.ceil(d.min_down_h / dt_h - 1e-9)
    locked = np.where(on, steps < min_up, steps < min_down)
    on_next = np.where(locked, on, request >= 0.5 * d.p_min_mw)
    output = np.where(on_next, np.maximum(request, d.p_min_mw), 0.0)
    return output, on_next, np.where(on_next == on, steps + 1, 1), on_next & ~on


def _reference_within_supply(p, state, gpus, served, it_mw, temp_out, setpoint, supply, dt_h):
    """The step re-run on a short supply (the GPUs throttled), plainly."""
    z, cop = p.zone, _reference_cop(p.cooling, temp_out, setpoint)
    temp = state.zone_temp_c
    target = setpoint + (temp - setpoint) * math.exp(-dt_h * 60.0 / z.tau_min)
    offset = z.ua_mw_per_k * (temp_out - temp) + (temp - target) * (
        z.heat_capacity_mwh_per_k / dt_h
    )
    q = np.minimum(
        np.minimum(np.maximum((supply + offset) * cop / (cop + 1.0), 0.0), p.cooling.q_max_mw),
        supply * cop,
    )
    it = np.minimum(np.maximum(supply - q / cop, 0.0), it_mw)
    floor = _reference_it_power(p.cluster, gpus @ np.ones(gpus.shape[1]), 0.0)
    span = it_mw - floor
    share = np.where(span > 0.0, np.minimum(np.maximum(it - floor, 0.0), span), 0.0) / np.where(
        span > 0.0, span, 1.0
    )
    cum, served = serve_edf(state.queue_cum_gpuh, served * share[:, None])
    gains = it + z.ua_mw_per_k * (temp_out - temp)
    zone = temp + (gains - q) * (dt_h / z.heat_capacity_mwh_per_k)
    return cum, served, it, zone, q / cop


def _reference_dc_step(task, state, action):
    """DCMicrogrid.step written the plain way with the plain
    device formulas (its form before the shortcuts)."""
    p, w, dt_h, horizon = task.params, task.workload, task.spec.dt_h, task.spec.horizon
    idx = task.split_days[state.day_id] * task.profiles.steps_per_day + state.t
    temp_out, price, co2, pv_mw = task._exogenous[idx].T
    gpus = _reference_allocate(p.cluster, action[:, :2])
    cum, served = serve_edf(state.queue_cum_gpuh, gpus * dt_h)
    ones = np.ones(gpus.shape[1])
    it_mw = _reference_it_power(p.cluster, gpus @ ones, (served @ ones) * (1.0 / dt_h))
    setpoint = action[:, 2]
    zone_temp, q_cool = _reference_zone_step(
        p.zone, state.zone_temp_c, temp_out, setpoint, it_mw, p.cooling.q_max_mw, dt_h
    )
    cooling_mw = q_cool / _reference_cop(p.cooling, temp_out, setpoint)
    facility_mw = it_mw + cooling_mw
    diesel_mw, diesel_on, diesel_steps, started = _reference_diesel_commitment(
        p.diesel, state.diesel_on, state.diesel_steps, action[:, 4], dt_h
    )
    # the battery charges only from what is left after the facility's demand
    b = p.battery
    p_ch, p_dis = _reference_feasible(b, state.soc, dt_h)
    headroom = pv_mw + diesel_mw + p.grid.import_max_mw - facility_mw
    battery_mw = np.clip(action[:, 3], -np.minimum(p_ch, np.maximum(headroom, 0.0)), p_dis)
    discharge_mwh = np.maximum(battery_mw, 0.0) * dt_h
    charge_mwh = np.maximum(-battery_mw, 0.0) * dt_h
    battery_soc = np.clip(
        state.soc
        + (b.charge_efficiency * charge_mwh - discharge_mwh / b.discharge_efficiency)
        / b.energy_capacity_mwh,
        b.soc_min,
        b.soc_max,
    )
    grid_mw, deficit_mw, spill_mw = _reference_settle(
        p.grid, facility_mw - battery_mw - pv_mw - diesel_mw
    )
    short = deficit_mw > 0.0
    cut = _reference_within_supply(
        p,
        state,
        gpus,
        served,
        it_mw,
        temp_out,
        setpoint,
        pv_mw + diesel_mw + battery_mw + grid_mw,
        dt_h,
    )
    cum = np.where(short[:, None, None], cut[0], cum)
    served = np.where(short[:, None], cut[1], served)
    it_mw, zone_temp, cooling_mw = (
        np.where(short, a, b) for a, b in zip(cut[2:], (it_mw, zone_temp, cooling_mw), strict=True)
    )
    # the battery's energy at the day's end against its start, at the day's mean price
    day_start = task.split_days * task.profiles.steps_per_day
    day_price = task._price[day_start[:, None] + np.arange(horizon)[None, :]].mean(axis=1)
    change = (battery_soc - p.initial_soc) * b.energy_capacity_mwh
    m, wear = day_price[state.day_id], b.degradation_cost_per_mwh
    value = np.maximum(change, 0.0) * b.discharge_efficiency * (m - wear) - np.maximum(
        -change, 0.0
    ) / b.charge_efficiency * (m + wear)
    last = state.t == horizon - 1
    settlement = np.where(last, value, 0.0)
    cost = -(grid_mw * price + diesel_mw * p.diesel.fuel_cost_per_mwh) * dt_h - (
        b.degradation_cost_per_mwh * (charge_mwh + discharge_mwh) + p.diesel.start_up_cost * started
    )
    reward_vector = np.stack(
        [
            -(it_mw + cooling_mw) * dt_h,
            np.where(last, cost + settlement, cost),
            -(grid_mw * co2 + diesel_mw * p.diesel.co2_t_per_mwh) * dt_h,
        ],
        axis=1,
    )
    t_next = state.t + 1
    dropped = drop_due(cum, t_next, w.steps_per_hour)
    in_day = t_next < horizon
    arrivals = w.arrival_cum_gpuh[np.where(in_day, idx + 1, -1)]
    cum += arrivals
    allowance = state.carry_allowance_gpuh + w.arrival_carry_gpuh[np.where(in_day, idx + 1, -1)]
    behind = carry_excess(cum, allowance) * ~in_day[:, None]
    costs = np.stack(
        [
            (dropped + behind) @ ones,
            np.maximum(zone_temp - p.zone.temp_max_c, 0.0) * dt_h,
            deficit_mw * dt_h,
        ],
        axis=1,
    )
    reward = reward_vector @ task._weights
    if task.penalized:
        reward = reward - costs @ task._penalties
    t_clip = np.minimum(t_next, horizon)
    due_1h, required = _reference_outlook(
        cum,
        task._inv_hours_left[t_clip],
        np.minimum(t_next // w.steps_per_hour, cum.shape[2] - 2),
        allowance,
    )
    applied = np.stack(
        [
            gpus[:, 0] / p.cluster.n_gpus,
            gpus[:, 1] / p.cluster.n_gpus,
            setpoint,
            battery_mw,
            diesel_mw,
        ],
        axis=1,
    )
    applied[:, :2] = gpus * (1.0 / p.cluster.n_gpus)
    state_values = {
        "t": t_next,
        "soc": battery_soc,
        "diesel_on": diesel_on,
        "diesel_steps": diesel_steps,
        "zone_temp_c": zone_temp,
        "queue_cum_gpuh": cum,
        "arrived_gpuh": state.arrived_gpuh + arrivals[:, :, -1],
        "served_gpuh": state.served_gpuh + served,
        "dropped_gpuh": state.dropped_gpuh + dropped,
        "carry_allowance_gpuh": allowance,
        "due_1h_gpuh": due_1h,
        "required_gpus": required,
    }
    info = {
        "reward_vector": reward_vector,
        "it_mw": it_mw,
        "cooling_mw": cooling_mw,
        "zone_temp_c": zone_temp,
        "temp_c": temp_out,
        "pv_mw": pv_mw,
        "pv_curtailed_mw": np.minimum(spill_mw, pv_mw),
        "diesel_mw": diesel_mw,
        "diesel_started": started,
        "battery_p_mw": battery_mw,
        "soc": battery_soc,
        "grid_import_mw": grid_mw,
        "deficit_mw": deficit_mw,
        "spill_mw": spill_mw,
        "price_per_mwh": price,
        "grid_co2_t_per_mwh": co2,
        "storage_settlement": settlement,
        "gpus_allocated": gpus,
        "gpus_busy": served * (1.0 / dt_h),
        "arrived_gpuh": state_values["arrived_gpuh"],
        "served_gpuh": state_values["served_gpuh"],
        "dropped_gpuh": state_values["dropped_gpuh"],
        "behind_schedule_gpuh": behind,
        "queued_gpuh": cum[:, :, -1],
    }
    return state_values, reward, reward_vector, costs, applied, info


def _adversarial_actions(task, rng, shape):
    """Random physical actions with the bounds, signed zeros and diesel's thresholds mixed in."""
    low, high = task.spec.action.bounds()
    action = rng.uniform(low, high, shape + low.shape)
    pick = rng.random(action.shape)
    action = np.where(
        pick < 0.1, low, np.where(pick < 0.2, high, np.where(pick < 0.25, -0.0, action))
    )
    action[..., 4] = np.where(
        rng.random(shape) < 0.3, rng.choice([0.0, 0.375, 0.75, 0.76], shape), action[..., 4]
    )
    return np.clip(action, low, high)


@pytest.mark.parametrize(
    "task_id, split, kwargs",
    [
        ("dc_microgrid", "train", {}),
        ("dc_microgrid_safe", "workload_shock", {}),
        (
            "dc_microgrid",
            "heatwave",
            {"grid_import_max_mw": 0.0, "n_gpus": 512, "battery_energy_mwh": 1.0},
        ),
    ],
)
def test_dc_microgrid_step_matches_the_plain_formulas_bit_for_bit(task_id, split, kwargs):
    task = make_task(task_id, split=split, **kwargs)
    rng = np.random.default_rng(5)
    for n_rows in (1, 4):
        state = task.reset(rng, rng.integers(0, task.n_days, n_rows))
        if n_rows > 1:  # rows at different steps, as after an autoreset
            state.t = np.array([0, 5, 11, 200])
        for action in _adversarial_actions(
            task, rng, (task.spec.horizon + 14, n_rows)
        ):  # past the horizon too
            ref_state, reward, reward_vector, costs, applied, info = _reference_dc_step(
                task, state, action
            )
            state, out = task.step(state, action, rng)
            for name, want in ref_state.items():
                assert _same(getattr(state, name), want), name
            for got, want in (
                (out.reward, reward),
                (out.reward_terms, reward_vector),
                (out.constraint_costs, costs),
                (out.action_applied, applied),
            ):
                assert _same(got, want)
            assert list(out.info) == list(info)
            for key, want in info.items():
                assert _same(out.info[key], want), key
