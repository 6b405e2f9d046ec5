"""volt_var_123: the switched feeder against the flow, the controls, the task's step and its
baselines on a test day."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from powerzoo.physics.unbalanced import feeder_from_master, unbalanced_power_flow
from powerzoo.physics.unbalanced.feeder import FEEDERS_DIR
from powerzoo.tasks.volt_var import VoltVar123
from powerzoo.tasks.volt_var.rule import CAP_OFF_V, CAP_ON_V, capcontrol, regcontrol_taps
from powerzoo.tasks.volt_var.spec import CAPACITORS, PV_LOADS, REGULATORS
from powerzoo.tasks.volt_var.task import feeder_model

NR, NC, NQ = len(REGULATORS), len(CAPACITORS), len(PV_LOADS)
HEAVY_DAY = 1  # a test day whose evening sags below the band without control


@pytest.fixture(scope="module")
def model():
    return feeder_model()


@pytest.fixture(scope="module")
def task():
    return VoltVar123("test")


def _scenario(base, rows: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.5, 1.5, (rows, base.n_loads))
    taps = rng.integers(-6, 7, (rows, base.n_regulators)).astype(float)
    return base.p_kw * scale, base.q_kvar * scale, taps


def test_capacitors_in_service_and_no_pv_give_the_feeders_own_flow(model):
    base = model.base
    p, q, taps = _scenario(base)
    ref = unbalanced_power_flow(base, p, q, base.taps_from_steps(taps), tol_pu=1e-12)
    zero = np.zeros((3, NQ))
    got = model.solve(p, q, taps, np.ones((3, NC)), zero, zero)
    assert np.nanmax(np.abs(got.vm_pu - ref.vm_pu)) < 1e-8
    assert np.allclose(got.losses_kw, ref.losses_kw, rtol=1e-7)


def test_capacitor_out_of_service_equals_the_files_without_it(model, tmp_path: Path):
    """C83 switched off is the feeder read from files without C83 (constant impedance: exact)."""
    shutil.copytree(FEEDERS_DIR / "ieee123", tmp_path / "ieee123")
    shutil.copy(FEEDERS_DIR / "IEEELineCodes.DSS", tmp_path / "IEEELineCodes.DSS")
    master = tmp_path / "ieee123" / "IEEE123Master.dss"
    text = master.read_text()
    assert "New Capacitor.C83" in text
    master.write_text(text.replace("New Capacitor.C83", "! New Capacitor.C83"))
    without = feeder_from_master(master)
    base = model.base
    p, q, taps = _scenario(base, seed=1)
    ref = unbalanced_power_flow(without, p, q, base.taps_from_steps(taps), tol_pu=1e-12)
    caps = np.ones((3, NC))
    caps[:, CAPACITORS.index("c83")] = 0.0
    zero = np.zeros((3, NQ))
    got = model.solve(p, q, taps, caps, zero, zero)
    assert np.nanmax(np.abs(got.vm_pu - ref.vm_pu)) < 1e-8
    on = model.solve(p, q, taps, np.ones((3, NC)), zero, zero)
    assert np.nanmax(np.abs(on.vm_pu - got.vm_pu)) > 5e-3  # the bank does move voltages


def test_pv_injection_equals_less_demand_of_a_constant_power_load(model):
    base = model.base
    k = PV_LOADS.index("s2b")
    load = base.load_names.index("s2b")
    assert base.load_model[load] == 1
    p, q, taps = _scenario(base, seed=2)
    pv_kw, pv_kvar = np.zeros((3, NQ)), np.zeros((3, NQ))
    pv_kw[:, k], pv_kvar[:, k] = 30.0, -8.0
    got = model.solve(p, q, taps, np.ones((3, NC)), pv_kw, pv_kvar)
    p2, q2 = p.copy(), q.copy()
    p2[:, load] -= 30.0
    q2[:, load] += 8.0  # absorbing 8 kvar = 8 kvar more reactive demand
    ref = unbalanced_power_flow(base, p2, q2, base.taps_from_steps(taps), tol_pu=1e-12)
    assert np.nanmax(np.abs(got.vm_pu - ref.vm_pu)) < 1e-8


def test_line_drop_compensation_lowers_the_regulated_voltage_under_forward_load(model):
    base = model.base
    flow_in = (base.p_kw[None], base.q_kvar[None], np.zeros((1, NR)), np.ones((1, NC)))
    zero = np.zeros((1, NQ))
    loaded = model.solve(*flow_in, zero, zero)
    light = model.solve(base.p_kw[None] * 0.01, base.q_kvar[None] * 0.01, *flow_in[2:], zero, zero)
    # reg1a: R = 3 V, X = 7.5 V at 700 A; about 5 V of compensation at the published load
    drop = light.regulated_v[0, 0] - loaded.regulated_v[0, 0]
    assert 3.0 < drop < 8.0
    assert np.all(loaded.regulated_v < light.regulated_v)


def test_regcontrol_moves_back_to_the_set_point_and_holds_inside_the_band():
    vreg, band = np.full(3, 120.0), np.full(3, 2.0)
    taps = np.zeros((2, 3))
    low = np.array([[117.0, 120.5, 120.0], [120.9, 118.9, 121.3]])
    new = regcontrol_taps(taps, low, vreg, band)
    # row 0: head 3 V low -> +4 steps (0.75 V each); downstream see +2.5 % and step back down
    assert new[0, 0] == 4.0
    assert np.all(new[0, 1:] < 0)
    # row 1: head inside its band holds; the others move by their own error
    assert new[1, 0] == 0.0 and new[1, 1] == 1.0 and new[1, 2] == -2.0
    assert np.all(regcontrol_taps(np.full((1, 3), 16.0), np.full((1, 3), 100.0), vreg, band) == 16)


def test_capcontrol_switches_with_hysteresis():
    states = np.array([[0.0, 1.0, 0.0, 1.0]])
    v = np.array([[CAP_ON_V - 0.5, CAP_OFF_V + 0.5, 121.0, 121.0]]) / 120.0
    assert capcontrol(states, v).tolist() == [[1.0, 0.0, 0.0, 1.0]]


def test_spec_spaces_and_idle(task):
    spec = task.spec
    assert spec.action.dim == NR + NC + NQ == 43
    assert spec.observation.dim == 69
    assert spec.constraint_names == ("voltage_violation",)
    assert spec.cost_thresholds == {"voltage_violation": 0.5}
    idle = np.asarray(spec.idle_action)
    assert (
        np.all(idle[:NR] == 0) and np.all(idle[NR : NR + NC] == 1) and np.all(idle[NR + NC :] == 0)
    )


def test_step_decodes_actions_charges_wear_and_measures_violation(task):
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([HEAVY_DAY, HEAVY_DAY]))
    for _ in range(24):  # to noon, idle
        state, _ = task.step(state, task.idle_action(task.observe(state)), rng)
    action = np.zeros((2, task.spec.action.dim))
    action[:, NR : NR + NC] = 1.0
    action[1, 0] = 2.6  # rounds to 3
    action[1, NR] = 0.49  # c83 out
    action[1, NR + NC :] = -1.0  # every inverter absorbs its limit
    state, out = task.step(state, action, rng)
    assert out.action_applied[1, 0] == 3.0 and out.action_applied[1, NR] == 0.0
    assert out.info["tap_operations"].tolist() == [0.0, 3.0]
    assert out.info["capacitor_operations"].tolist() == [0.0, 1.0]
    assert out.reward_terms[1, 1] == pytest.approx(-1.5)
    assert out.reward_terms[1, 2] == pytest.approx(-1.0)
    assert out.info["pv_kvar"][1] == pytest.approx(-task.q_limit_kvar.sum())  # the sun is up
    # the cost is the violation of the step's flow under the applied settings, times dt
    flat = task._flat(state.day_id, state.t - 1)
    p, q, pv = task._inputs(flat)
    reading = task.model.solve(
        p, q, out.action_applied[:, :NR], out.action_applied[:, NR : NR + NC], pv,
        out.action_applied[:, NR + NC :] * task.q_limit_kvar,
    )  # fmt: skip
    vm = reading.vm_pu
    expected = (np.fmax(0.95 - vm, 0) + np.fmax(vm - 1.05, 0)).sum(axis=(1, 2)) * 0.5
    assert np.allclose(out.constraint_costs[:, 0], expected)
    assert np.all(out.reward_terms[:, 0] <= 0)


def test_reactive_power_is_ignored_while_the_inverters_sleep(task):
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([HEAVY_DAY]))  # midnight: no sun
    action = np.asarray(task.spec.idle_action, dtype=float)[None].copy()
    action[0, NR + NC :] = 1.0
    _, out = task.step(state, action, rng)
    assert np.all(out.action_applied[0, NR + NC :] == 0.0)
    assert out.info["pv_kvar"][0] == 0.0


def _episode(task, policy: str, day: int) -> tuple[float, float, float]:
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.array([day]))
    plan = task.oracle_plan(state) if policy == "oracle" else None
    ret = cost = ops = 0.0
    for t in range(task.spec.horizon):
        obs = task.observe(state)
        if policy == "idle":
            action = task.idle_action(obs)
        elif policy == "rule":
            action = task.rule_based_action(obs)
        else:
            action = plan[:, t]
        state, out = task.step(state, action, rng)
        ret += float(out.reward[0])
        cost += float(out.constraint_costs[0, 0])
        ops += float(out.info["tap_operations"][0])
    return ret, cost, ops


def test_idle_breaks_the_budget_the_rule_and_oracle_keep_it_the_oracle_pays_less(task):
    budget = task.spec.cost_thresholds["voltage_violation"]
    _, idle_cost, _ = _episode(task, "idle", HEAVY_DAY)
    rule_ret, rule_cost, rule_ops = _episode(task, "rule", HEAVY_DAY)
    oracle_ret, oracle_cost, oracle_ops = _episode(task, "oracle", HEAVY_DAY)
    assert idle_cost > budget
    assert rule_cost < budget and rule_ops > 20  # the controllers do act
    assert oracle_cost < 1e-3
    assert oracle_ret > rule_ret + 20.0  # fewer operations for the same band
    assert oracle_ops < rule_ops
