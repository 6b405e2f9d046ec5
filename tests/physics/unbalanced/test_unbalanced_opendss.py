"""The batched three-phase power flow against OpenDSS on every vendored feeder.

OpenDSS (through OpenDSSDirect.py) solves the same files with its controls off, its tolerance
at 1e-10, the regulators at the same taps and every load's Vminpu / Vmaxpu moved out of the
way (0.5 / 10) so that no load turns into a constant impedance. Checked per phase of every
bus: magnitude within 1e-5 p.u., angle within 1e-3 degree, at the published loading and on
scenarios drawn here (each load x U[0.5, 1.5], regulator taps moved up to +-10 steps).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from powerzoo.physics.unbalanced import load_feeder, unbalanced_power_flow

dss = pytest.importorskip("opendssdirect")

FEEDERS = ["ieee13", "ieee34", "ieee37", "ieee123", "european_lv"]
V_TOL_PU = 1e-5
ANGLE_TOL_DEG = 1e-3


@pytest.fixture(autouse=True)
def _keep_the_working_directory(monkeypatch):
    """OpenDSS's ``compile`` moves the process into the master file's folder; the folder the
    test started in is restored after it (other tests resolve paths against it)."""
    monkeypatch.chdir(os.getcwd())


def _compile(feeder) -> None:
    dss.Text.Command(f'compile "{feeder.master_file}"')
    dss.Text.Command("set controlmode=off")
    dss.Text.Command("set tolerance=1e-10")
    dss.Text.Command("set maxiterations=1000")
    dss.Text.Command("batchedit load..* vminpu=0.5 vmaxpu=10")


def _solve(feeder, p_kw, q_kvar, taps) -> tuple[np.ndarray, np.ndarray]:
    """OpenDSS's [n_bus, 3] per-unit magnitudes and angles (NaN where no phase)."""
    for name, tap in zip(feeder.regulator_names, taps, strict=True):
        winding = feeder.regcontrols[name].winding
        dss.Text.Command(f"transformer.{name}.wdg={winding} tap={float(tap)!r}")
    for k, name in enumerate(feeder.load_names):
        dss.Loads.Name(name)
        dss.Loads.kW(float(p_kw[k]))
        dss.Loads.kvar(float(q_kvar[k]))
    dss.Solution.Solve()
    assert dss.Solution.Converged()
    vm = np.full((feeder.n_bus, 3), np.nan)
    va = np.full((feeder.n_bus, 3), np.nan)
    for b, bus in enumerate(feeder.bus_names):
        dss.Circuit.SetActiveBus(bus)
        mag_ang = np.asarray(dss.Bus.puVmagAngle()).reshape(-1, 2)
        for node, (mag, ang) in zip(dss.Bus.Nodes(), mag_ang, strict=True):
            if 1 <= node <= 3:
                vm[b, node - 1], va[b, node - 1] = mag, ang
    return vm, va


def _worst(ours_vm, ours_va, ref_vm, ref_va) -> tuple[float, float]:
    assert np.array_equal(np.isnan(ours_vm), np.isnan(ref_vm))  # the same phases exist
    dv = np.nanmax(np.abs(ours_vm - ref_vm))
    dang = np.nanmax(np.abs((ours_va - ref_va + 180.0) % 360.0 - 180.0))
    return float(dv), float(dang)


@pytest.mark.parametrize("name", FEEDERS)
def test_published_loading_matches_opendss(name: str) -> None:
    feeder = load_feeder(name)
    _compile(feeder)
    assert list(dss.Circuit.AllBusNames()) == list(feeder.bus_names)
    assert sorted(dss.Loads.AllNames()) == sorted(feeder.load_names)
    ref_vm, ref_va = _solve(feeder, feeder.p_kw, feeder.q_kvar, feeder.tap_file)
    res = unbalanced_power_flow(feeder, feeder.p_kw, feeder.q_kvar)
    assert res.converged.all()
    dv, dang = _worst(res.vm_pu[0], res.va_deg[0], ref_vm, ref_va)
    assert dv < V_TOL_PU and dang < ANGLE_TOL_DEG, (dv, dang)
    # losses of the lines and transformers, and the source's power, agree too
    losses_kw = dss.Circuit.Losses()[0] / 1000.0
    assert res.losses_kw[0] == pytest.approx(losses_kw, rel=1e-6, abs=1e-6)
    assert res.source_kw[0] == pytest.approx(-dss.Circuit.TotalPower()[0], rel=1e-6)


@pytest.mark.parametrize("name", FEEDERS)
def test_perturbed_scenarios_match_opendss(name: str) -> None:
    feeder = load_feeder(name)
    _compile(feeder)
    rng = np.random.default_rng(20240645)
    batch = 2
    scale = rng.uniform(0.5, 1.5, size=(batch, feeder.n_loads))
    p, q = feeder.p_kw * scale, feeder.q_kvar * scale
    steps = rng.integers(-10, 11, size=(batch, feeder.n_regulators))
    taps = feeder.taps_from_steps(steps)
    res = unbalanced_power_flow(feeder, p, q, taps)
    assert res.converged.all()
    for b in range(batch):
        ref_vm, ref_va = _solve(feeder, p[b], q[b], taps[b])
        dv, dang = _worst(res.vm_pu[b], res.va_deg[b], ref_vm, ref_va)
        assert dv < V_TOL_PU and dang < ANGLE_TOL_DEG, (b, dv, dang)


@pytest.mark.parametrize("name", ["ieee13", "ieee37", "ieee123"])
def test_branch_currents_match_opendss(name: str) -> None:
    """Terminal-1 currents of every line and transformer (regulators at moved taps), within
    1e-6 of the feeder's largest current (a short line's current is the difference of two
    nearly equal voltages over a tiny impedance: relative accuracy is not the measure)."""
    feeder = load_feeder(name)
    _compile(feeder)
    taps = feeder.taps_from_steps(np.arange(feeder.n_regulators) % 5 - 2)
    _solve(feeder, feeder.p_kw, feeder.q_kvar, taps)
    res = unbalanced_power_flow(feeder, feeder.p_kw, feeder.q_kvar, taps)
    tol_a = 1e-6 * np.nanmax(res.branch_current_a)
    for k, branch in enumerate(feeder.branch_names):
        dss.Circuit.SetActiveElement(branch)
        currents = np.asarray(dss.CktElement.Currents())
        currents = currents[0::2] + 1j * currents[1::2]
        n_cond = dss.CktElement.NumConductors()
        order = dss.CktElement.NodeOrder()[:n_cond]
        for i, node in enumerate(order):
            if 1 <= node <= 3:
                ours = res.branch_current[0, k, node - 1]
                assert abs(ours - currents[i]) < tol_a, (branch, node, ours, currents[i])
