"""OpenDSS reader, feeder data and the batched three-phase flow (no OpenDSS needed)."""

from __future__ import annotations

import numpy as np
import pytest

from powerzoo.physics.unbalanced import (
    DSSFormatError,
    feeder_from_master,
    load_feeder,
    unbalanced_power_flow,
)
from powerzoo.physics.unbalanced.circuit import build_circuit
from powerzoo.physics.unbalanced.dss_reader import parse_matrix, parse_number, read_statements

# --- reader ---------------------------------------------------------------------------------


def test_rpn_numbers_and_matrices() -> None:
    assert parse_number("(8 1000 /)", "f:1") == pytest.approx(0.008)
    assert parse_number("(0.00625 7 * 1 +)", "f:1") == pytest.approx(1.04375)
    assert parse_number(".5", "f:1") == 0.5
    m = parse_matrix("(1 | 2 3 | 4 5 6)", 3, "f:1")
    assert m == [[1, 2, 4], [2, 3, 5], [4, 5, 6]]
    with pytest.raises(DSSFormatError, match="f:1"):
        parse_matrix("(1 | 2 3)", 3, "f:1")


def test_statements_follow_redirects_and_continuations(tmp_path) -> None:
    (tmp_path / "codes.dss").write_text("New LineCode.c1 nphases=1 r1=0.1 x1=0.2 units=km\n")
    master = tmp_path / "master.dss"
    master.write_text(
        "Clear ! a comment\n"
        "New circuit.t basekv=11 pu=1.0\n"
        "~ angle=0   // another comment\n"
        "Redirect codes.dss\n"
        "New Line.l1 Bus1=sourcebus.1 Bus2=b.1 phases=1 LineCode=c1 Length= 2 units=km\n"
        "New Load.ld Bus1=b.1 phases=1 kV= 6.35 kW=10 kvar=5\n"
        "Load.ld.kW=20\n"
        "Set VoltageBases=[11]\n"
        "CalcVoltageBases\n"
        "Solve\n"
    )
    verbs = [st.verb for st in read_statements(master)]
    assert verbs[:4] == ["clear", "new", "more", "new"]
    circuit = build_circuit(master)
    assert circuit.source.basekv == 11.0
    assert circuit.lines["l1"].length == 2.0
    assert circuit.loads["ld"].kw == 20.0  # a later kW keeps the power factor, as OpenDSS
    assert circuit.loads["ld"].q_kvar == pytest.approx(10.0)
    feeder = feeder_from_master(master)
    assert feeder.bus_names == ("sourcebus", "b")
    assert feeder.load_names == ("ld",)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("New Line.l1 Bus1=a Bus2=b bogus=3", "unknown property 'bogus'"),
        ("New WireData.w1 diam=1", "element class 'wiredata' is not supported"),
        ("Redirect missing.dss", "file not found"),
        ("Set loadmult=2", "loadmult"),
    ],
)
def test_unknown_input_names_file_and_line(tmp_path, line: str, message: str) -> None:
    master = tmp_path / "bad.dss"
    master.write_text(f"Clear\nNew circuit.t basekv=11\n{line}\n")
    with pytest.raises(DSSFormatError, match=message) as err:
        build_circuit(master)
    assert "bad.dss:3" in str(err.value)


# --- feeders --------------------------------------------------------------------------------


def test_vendored_feeders_load_with_their_licence_notes() -> None:
    sizes = {"ieee13": 15, "ieee34": 68, "ieee37": 30, "ieee123": 91, "european_lv": 55}
    for name, n_loads in sizes.items():
        feeder = load_feeder(name)
        assert feeder.master_file.is_file()
        assert (feeder.master_file.parent / "SOURCE.md").is_file()
        assert feeder.n_loads == n_loads
        assert all(n == n.lower() for n in feeder.bus_names + feeder.load_names)
        assert np.all(feeder.bus_kv_base > 0)
    ieee13 = load_feeder("ieee13")
    assert ieee13.p_kw.sum() == pytest.approx(3466.0)  # the published total load
    assert ieee13.q_kvar.sum() == pytest.approx(2102.0)
    assert ieee13.regulator_names == ("reg1", "reg2", "reg3")
    lv = load_feeder("european_lv")
    assert lv.frequency_hz == 50.0 and lv.n_regulators == 0
    assert lv.q_kvar[0] == pytest.approx(np.tan(np.arccos(0.95)))  # kW=1 PF=0.95


def test_absent_phases_are_nan() -> None:
    feeder = load_feeder("ieee13")
    res = unbalanced_power_flow(feeder, feeder.p_kw, feeder.q_kvar)
    b611 = feeder.bus_names.index("611")  # phase 3 only
    assert np.isnan(res.vm_pu[0, b611, :2]).all() and np.isfinite(res.vm_pu[0, b611, 2])
    assert np.isfinite(res.vm_pu[0, feeder.bus_names.index("671")]).all()


# --- flow -----------------------------------------------------------------------------------


def test_a_row_alone_equals_the_same_row_in_any_batch_to_the_last_bit() -> None:
    """Each row iterates on its own (its own convergence, Anderson step and freezing) and the
    products are matrix-matrix products however many rows: a row's bits do not depend on the
    batch it is in, its position, or the BLAS thread count outside the solver."""
    from threadpoolctl import threadpool_limits

    feeder = load_feeder("ieee123")
    rng = np.random.default_rng(3)
    n = 300  # more than one block of rows
    scale = rng.uniform(0.5, 1.5, size=(n, feeder.n_loads))
    taps = feeder.taps_from_steps(rng.integers(-10, 11, size=(n, feeder.n_regulators)))
    taps[::3] = feeder.tap_file  # rows at the files' taps mixed in
    p, q = feeder.p_kw * scale, feeder.q_kvar * scale
    p[7] *= 60.0  # a row that does not converge
    q[7] *= 60.0
    batch = unbalanced_power_flow(feeder, p, q, taps)
    assert not batch.converged[7] and batch.converged[np.arange(n) != 7].all()
    with threadpool_limits(2):
        reversed_ = unbalanced_power_flow(feeder, p[::-1], q[::-1], taps[::-1])
    np.testing.assert_array_equal(reversed_.v_node[::-1], batch.v_node)
    for b in (0, 1, 7, 255, 256, 299):
        one = unbalanced_power_flow(feeder, p[b], q[b], taps[b])
        np.testing.assert_array_equal(one.v_node[0], batch.v_node[b])
        np.testing.assert_array_equal(one.vm_pu[0], batch.vm_pu[b])
        np.testing.assert_array_equal(one.v_load_phase[0], batch.v_load_phase[b])
        assert one.converged[0] == batch.converged[b]
    pair = unbalanced_power_flow(feeder, p[[5, 6]], q[[5, 6]], taps[[5, 6]])
    np.testing.assert_array_equal(pair.v_node, batch.v_node[[5, 6]])
    np.testing.assert_array_equal(pair.losses_kw, batch.losses_kw[[5, 6]])


def test_tap_inputs_equal_taps_written_in_the_files(tmp_path) -> None:
    """The low-rank tap update gives the flow of a feeder whose files carry those taps."""
    base = load_feeder("ieee13")
    master = tmp_path / "taps.dss"
    master.write_text(
        f'Redirect "{base.master_file}"\n'
        "Transformer.reg1.Taps=[1.0 1.0625]\n"
        "Transformer.reg2.Taps=[1.0 1.05]\n"
        "Transformer.reg3.Taps=[1.0 0.95]\n"
    )
    tapped = feeder_from_master(master)
    np.testing.assert_allclose(tapped.tap_file, [1.0625, 1.05, 0.95])
    direct = unbalanced_power_flow(tapped, tapped.p_kw, tapped.q_kvar)
    updated = unbalanced_power_flow(base, base.p_kw, base.q_kvar, tapped.tap_file)
    np.testing.assert_allclose(updated.vm_pu, direct.vm_pu, atol=1e-9, equal_nan=True)
    np.testing.assert_allclose(updated.branch_losses_kw, direct.branch_losses_kw, atol=1e-6)
    at_file_taps = unbalanced_power_flow(base, base.p_kw, base.q_kvar)
    reg_bus = base.bus_names.index("rg60")
    assert updated.vm_pu[0, reg_bus, 0] > at_file_taps.vm_pu[0, reg_bus, 0] + 0.05


@pytest.mark.parametrize("name", ["ieee13", "ieee37", "european_lv"])
def test_power_balance(name: str) -> None:
    """Source power = power drawn by the loads + line and transformer losses."""
    feeder = load_feeder(name)
    scale = np.random.default_rng(1).uniform(0.5, 1.5, size=(3, feeder.n_loads))
    res = unbalanced_power_flow(feeder, feeder.p_kw * scale, feeder.q_kvar * scale)
    np.testing.assert_allclose(res.source_kw, res.load_kw.sum(axis=1) + res.losses_kw, rtol=1e-6)
    assert np.all(res.losses_kw > 0)
    # constant-power loads draw exactly their set power
    const_p = feeder.load_model == 1
    np.testing.assert_allclose(res.load_kw[:, const_p], (feeder.p_kw * scale)[:, const_p])


def test_overload_row_reports_non_convergence_without_raising() -> None:
    feeder = load_feeder("ieee13")
    p = np.stack([feeder.p_kw, feeder.p_kw * 60.0])
    q = np.stack([feeder.q_kvar, feeder.q_kvar * 60.0])
    res = unbalanced_power_flow(feeder, p, q, max_iter=60)
    assert res.converged.tolist() == [True, False]
    single = unbalanced_power_flow(feeder, feeder.p_kw, feeder.q_kvar)
    np.testing.assert_allclose(res.vm_pu[0], single.vm_pu[0], atol=1e-9, equal_nan=True)


def test_input_errors() -> None:
    feeder = load_feeder("ieee13")
    with pytest.raises(ValueError, match="n_loads"):
        unbalanced_power_flow(feeder, np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        unbalanced_power_flow(feeder, np.full(feeder.n_loads, np.nan), feeder.q_kvar)
    with pytest.raises(ValueError, match="taps"):
        unbalanced_power_flow(feeder, feeder.p_kw, feeder.q_kvar, taps=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="unknown feeder"):
        load_feeder("ieee8500")
