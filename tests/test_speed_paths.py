"""The B = 1 fast paths give exactly (bit for bit) what the straightforward formulas give.

Precomputed observation tables, the single-env joint-action conversion, the lazy finiteness
check, the CMDP info keys and the device shortcuts are checked against reference
implementations written the plain way (the formulas the fast paths replaced).
"""

import dataclasses

import numpy as np
import pytest

from powerzoo.benchmarks.offline import _EpisodeBuffer
from powerzoo.devices.battery import BatteryParams, battery_step
from powerzoo.devices.job_queue import drop_due, queue_outlook
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
