"""Tests for the DC physics layer (cases, PTDF power flow, DC-OPF).

Reference values are MATPOWER's (R. D. Zimmerman, C. E. Murillo-Sanchez, R. J. Thomas,
"MATPOWER: Steady-State Operations, Planning and Analysis Tools for Power Systems Research
and Education", IEEE Trans. Power Systems 26(1), 2011): ``rundcopf`` results for the
``case5`` (PJM 5-bus, F. Li and R. Bo, "Small test systems for power system economic
studies", IEEE PES GM 2010), ``case14`` and ``case118`` data files.  Power-flow results are
cross-checked against pandapower's ``rundcpp`` on the same networks.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from importlib.metadata import version

import numpy as np
import pytest
from helpers import cold_and_warm_runs

from powerzoo.physics import cases as cases_mod
from powerzoo.physics.case_cache import source_of
from powerzoo.physics.cases import (
    CACHE_SCHEMA_VERSION,
    CASE_NAMES,
    NetworkCase,
    cache_dir,
    load_case,
)
from powerzoo.physics.dc_opf import dispatch_cost, line_overload_mw, solve_dc_opf
from powerzoo.physics.dc_power_flow import (
    bus_injection_mw,
    dc_power_flow,
    gen_bus_matrix,
    generation_shift_matrix,
    ptdf_matrix,
)
from powerzoo.scratch import Scratch

pytest.importorskip("pandapower")

# the cases these tests cover in depth (the whole library: test_case_library.py)
SMALL_CASES = ("case5", "case14", "case118")
pytest.importorskip("highspy")

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


# --------------------------------------------------------------------------- helpers


@functools.cache
def _pp_net(name: str):
    import pandapower.networks as pn

    return getattr(pn, name)()


def _toy_case(from_bus, to_bus, x_pu, slack_bus=0) -> NetworkCase:
    """Minimal synthetic case (one 0-cost generator at the slack, no load)."""
    n_bus = int(max(max(from_bus), max(to_bus))) + 1
    n_branch = len(from_bus)
    return NetworkCase(
        name="toy",
        base_mva=100.0,
        bus_id=np.arange(n_bus),
        slack_bus=slack_bus,
        bus_pd_mw=np.zeros(n_bus),
        bus_vn_kv=np.full(n_bus, 138.0),
        branch_from_bus=np.asarray(from_bus),
        branch_to_bus=np.asarray(to_bus),
        branch_x_pu=np.asarray(x_pu, dtype=float),
        branch_tap=np.ones(n_branch),
        branch_rate_a_mw=np.full(n_branch, np.inf),
        branch_in_service=np.ones(n_branch, dtype=bool),
        branch_is_trafo=np.zeros(n_branch, dtype=bool),
        branch_element=np.arange(n_branch),
        gen_bus=np.array([slack_bus]),
        gen_pmin_mw=np.zeros(1),
        gen_pmax_mw=np.full(1, 100.0),
        gen_c2_per_mw2h=np.zeros(1),
        gen_c1_per_mwh=np.zeros(1),
        gen_c0_per_h=np.zeros(1),
        gen_in_service=np.ones(1, dtype=bool),
        gen_element_type=np.array(["ext_grid"]),
        gen_element=np.zeros(1, dtype=int),
        load_bus=np.zeros(0, dtype=int),
        load_p_mw=np.zeros(0),
    )


# --------------------------------------------------------------------------- cases


def test_load_case_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as info:
        load_case("case9999")
    for name in CASE_NAMES:
        assert name in str(info.value)


def test_load_case_is_cached_and_read_only():
    case = load_case("case5")
    assert load_case("CASE5") is case
    with pytest.raises(ValueError):
        case.gen_pmax_mw[0] = 1.0


def test_case5_matches_matpower_case5():
    # MATPOWER case5.m (PJM 5-bus): gens at buses 1,1,3,4,5; linear costs 14,15,30,40,10;
    # Pmax 40,170,520,200,600; loads 300/300/400 MW at buses 2,3,4; bus 4 is the reference;
    # RATE_A 400 (1-2) and 240 (4-5), 0 (= unlimited) elsewhere.
    case = load_case("case5")
    assert (case.n_bus, case.n_branch, case.n_gen) == (5, 6, 5)
    assert case.base_mva == 100.0
    assert case.slack_bus == 3
    np.testing.assert_array_equal(case.gen_bus, [0, 0, 2, 3, 4])
    np.testing.assert_array_equal(case.gen_c1_per_mwh, [14, 15, 30, 40, 10])
    np.testing.assert_array_equal(case.gen_c2_per_mw2h, 0.0)
    np.testing.assert_array_equal(case.gen_c0_per_h, 0.0)
    np.testing.assert_array_equal(case.gen_pmax_mw, [40, 170, 520, 200, 600])
    np.testing.assert_array_equal(case.gen_pmin_mw, 0.0)
    np.testing.assert_array_equal(case.bus_pd_mw, [0, 300, 300, 400, 0])
    assert case.total_load_mw == 1000.0
    np.testing.assert_array_equal(case.branch_from_bus, [0, 0, 0, 1, 2, 3])
    np.testing.assert_array_equal(case.branch_to_bus, [1, 3, 4, 2, 3, 4])
    np.testing.assert_array_equal(case.branch_rate_a_mw, [400, np.inf, np.inf, np.inf, np.inf, 240])
    np.testing.assert_allclose(
        case.branch_x_pu, [0.0281, 0.0304, 0.0064, 0.0108, 0.0297, 0.0297], rtol=1e-12
    )


def test_case118_dimensions():
    # MATPOWER case118.m: 118 buses, 186 branches, 54 generators, 4242 MW load, ref bus 69
    case = load_case("case118")
    assert (case.n_bus, case.n_branch, case.n_gen) == (118, 186, 54)
    assert case.total_load_mw == pytest.approx(4242.0)
    assert case.slack_bus == 68
    assert case.is_quadratic
    assert int(case.branch_is_trafo.sum()) == 13


# --------------------------------------------------------------------------- disk cache


def _assert_same_case(a: NetworkCase, b: NetworkCase) -> None:
    """Every field identical: values, dtypes and shapes of the arrays, types of the scalars."""
    for field in dataclasses.fields(NetworkCase):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(y, np.ndarray):
            assert isinstance(x, np.ndarray), field.name
            assert x.dtype == y.dtype and x.shape == y.shape, field.name
            np.testing.assert_array_equal(x, y, err_msg=field.name, strict=True)
            assert not x.flags.writeable, field.name
        else:
            assert type(x) is type(y) and x == y, field.name


# load_case without the in-process cache: every call goes to the disk cache / pandapower
_load_uncached = cases_mod._load_case_cached.__wrapped__


def test_cache_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("POWERZOO_CACHE_DIR", str(tmp_path / "pz"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "pz"
    monkeypatch.delenv("POWERZOO_CACHE_DIR")
    assert cache_dir() == tmp_path / "xdg" / "powerzoo"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "powerzoo"


@pytest.mark.parametrize("name", ["case5", "case118"])
def test_generation_shift_factors_give_the_same_flows(name):
    """``p @ GSF - load @ PTDF.T`` (the dispatch tasks'
    form) equals the flow of the bus injections."""
    case = load_case(name)
    rng = np.random.default_rng(4)
    gen_p = rng.uniform(case.gen_pmin_mw, case.gen_pmax_mw, size=(32, case.n_gen))
    load = case.bus_pd_mw * rng.uniform(0.5, 1.2, size=(32, 1))
    direct = dc_power_flow(case, bus_injection_mw(case, gen_p, load))
    gsf = generation_shift_matrix(case)
    assert gsf.shape == (case.n_gen, case.n_branch) and not gsf.flags.writeable
    split = gen_p @ gsf - load @ ptdf_matrix(case).T
    np.testing.assert_allclose(split, direct, rtol=0, atol=1e-9)
    # a unit at the slack bus moves no flow
    np.testing.assert_array_equal(gsf[case.gen_bus == case.slack_bus], 0.0)


def test_out_arguments_write_the_same_numbers_in_place():
    case = load_case("case118")
    rng = np.random.default_rng(5)
    gen_p = rng.uniform(case.gen_pmin_mw, case.gen_pmax_mw, size=(16, case.n_gen))
    scratch = Scratch()
    inj = bus_injection_mw(case, gen_p, out=scratch("inj", (16, case.n_bus)))
    assert inj is scratch("inj", (16, case.n_bus))
    np.testing.assert_array_equal(inj, bus_injection_mw(case, gen_p))
    flow = dc_power_flow(case, inj, out=scratch("flow", (16, case.n_branch)))
    np.testing.assert_array_equal(flow, dc_power_flow(case, inj))
    case5 = load_case("case5")  # case118's file has no ratings
    flow5 = rng.normal(size=(16, case5.n_branch)) * 400.0
    fresh = line_overload_mw(case5, flow5, 0.9)
    assert fresh.max() > 0
    np.testing.assert_array_equal(
        line_overload_mw(case5, flow5, 0.9, out=scratch("over", flow5.shape)), fresh
    )
    np.testing.assert_array_equal(
        dispatch_cost(case, gen_p, work=scratch("sq", gen_p.shape)), dispatch_cost(case, gen_p)
    )


def test_scratch_reuses_arrays_by_name_and_shape():
    scratch = Scratch()
    a = scratch("x", (4, 3))
    assert scratch("x", (4, 3)) is a
    assert scratch("x", (5, 3)).shape == (5, 3) and scratch("x", (5, 3)) is not a
    assert scratch("x", (5, 3), bool).dtype == bool
    import copy
    import pickle

    assert copy.deepcopy(scratch)("x", (5, 3)) is not scratch("x", (5, 3))
    assert pickle.loads(pickle.dumps(scratch))("y", (2,)).shape == (2,)


@pytest.mark.parametrize("name", SMALL_CASES)
def test_case_disk_cache_round_trip_is_exact(name, tmp_path, monkeypatch):
    monkeypatch.setenv("POWERZOO_CACHE_DIR", str(tmp_path / "pz"))
    path = cases_mod._cache_path(name)
    assert path.parent == tmp_path / "pz"
    digest = source_of(name).digest  # SHA-256 of the case's source file
    assert path.name == (
        f"{name}-pandapower{version('pandapower')}-src{digest}-schema{CACHE_SCHEMA_VERSION}.npz"
    )
    assert not path.exists()
    fresh = _load_uncached(name)  # miss: built from pandapower, then written
    assert path.is_file()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left

    def no_pandapower(_name):
        raise AssertionError("cache hit must not rebuild the case")

    monkeypatch.setattr(cases_mod, "_build_case", no_pandapower)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cached = _load_uncached(name)
    _assert_same_case(cached, fresh)
    _assert_same_case(cached, load_case(name))


def _truncate(path):
    path.write_bytes(path.read_bytes()[:200])


def _garbage(path):
    path.write_bytes(b"not an npz file")


def _drop_field(path):
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files if k != "gen_c2_per_mw2h"}
    np.savez(path, **arrays)


def _wrong_dtype(path):
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["gen_bus"] = arrays["gen_bus"].astype(float)
    np.savez(path, **arrays)


@pytest.mark.parametrize("corrupt", [_truncate, _garbage, _drop_field, _wrong_dtype])
def test_corrupt_case_cache_warns_and_is_rebuilt(corrupt, tmp_path, monkeypatch):
    monkeypatch.setenv("POWERZOO_CACHE_DIR", str(tmp_path))
    fresh = _load_uncached("case5")
    path = cases_mod._cache_path("case5")
    corrupt(path)
    with pytest.warns(RuntimeWarning, match="unreadable"):
        rebuilt = _load_uncached("case5")
    _assert_same_case(rebuilt, fresh)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _assert_same_case(_load_uncached("case5"), fresh)  # the file was rewritten


def test_unwritable_case_cache_only_warns(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("POWERZOO_CACHE_DIR", str(blocker / "sub"))  # mkdir fails
    with pytest.warns(RuntimeWarning, match="cannot write"):
        case = _load_uncached("case5")
    _assert_same_case(case, load_case("case5"))


def test_warm_case_cache_does_not_import_pandapower(tmp_path):
    code = (
        "import sys; from powerzoo.physics.cases import load_case; "
        "c = load_case('case118'); assert c.n_bus == 118; "
        "print('pandapower' in sys.modules, 'pandas' in sys.modules)"
    )
    cold, warm = cold_and_warm_runs(code, tmp_path)
    assert cold.stdout.split() == ["True", "True"]  # cold: built from pandapower
    assert warm.stdout.split() == ["False", "False"]  # warm: read from the .npz only


# --------------------------------------------------------------------------- PTDF / flows


def test_ptdf_radial_chain():
    # 0 - 1 - 2 chain, slack 0: all power injected at bus j flows back through every branch
    # between j and the slack, whatever the reactances.
    case = _toy_case([0, 1], [1, 2], [0.1, 0.3])
    ptdf = ptdf_matrix(case)
    np.testing.assert_allclose(ptdf, [[0.0, -1.0, -1.0], [0.0, 0.0, -1.0]], atol=1e-12)


def test_ptdf_triangle_equal_reactance():
    # triangle 0-1, 1-2, 2-0 with equal x; inject at 1, withdraw at slack 0: 2/3 goes
    # directly 1->0, 1/3 goes 1->2->0.
    case = _toy_case([0, 1, 2], [1, 2, 0], [0.2, 0.2, 0.2])
    ptdf = ptdf_matrix(case)
    np.testing.assert_allclose(ptdf[:, 0], 0.0)
    np.testing.assert_allclose(ptdf[:, 1], [-2 / 3, 1 / 3, 1 / 3], atol=1e-12)
    np.testing.assert_allclose(ptdf[:, 2], [-1 / 3, -1 / 3, 2 / 3], atol=1e-12)
    assert ptdf_matrix(case) is ptdf  # cached


@pytest.mark.parametrize("name", SMALL_CASES)
def test_ptdf_kcl_and_slack_column(name):
    case = load_case(name)
    ptdf = ptdf_matrix(case)
    assert ptdf.shape == (case.n_branch, case.n_bus)
    np.testing.assert_array_equal(ptdf[:, case.slack_bus], 0.0)
    # Kirchhoff current law: for balanced injections, the net branch outflow of every bus
    # equals its injection.
    rng = np.random.default_rng(1)
    p = rng.normal(size=(4, case.n_bus)) * 50.0
    p[:, case.slack_bus] -= p.sum(axis=1)
    flow = dc_power_flow(case, p)
    incidence = np.zeros((case.n_branch, case.n_bus))
    incidence[np.arange(case.n_branch), case.branch_from_bus] = 1.0
    incidence[np.arange(case.n_branch), case.branch_to_bus] = -1.0
    np.testing.assert_allclose(flow @ incidence, p, atol=1e-8)


def test_batched_flows_match_per_row():
    case = load_case("case118")
    rng = np.random.default_rng(2)
    p = rng.normal(size=(64, case.n_bus)) * 30.0
    flows = dc_power_flow(case, p)
    assert flows.shape == (64, case.n_branch)
    rows = np.stack([dc_power_flow(case, row) for row in p])
    assert rows.shape == (64, case.n_branch)
    np.testing.assert_allclose(flows, rows, rtol=0, atol=1e-10)
    gen_p = rng.uniform(case.gen_pmin_mw, case.gen_pmax_mw, size=(64, case.n_gen))
    inj = bus_injection_mw(case, gen_p)
    assert inj.shape == (64, case.n_bus)
    np.testing.assert_allclose(inj[3], gen_p[3] @ gen_bus_matrix(case) - case.bus_pd_mw)


@pytest.mark.parametrize("name", SMALL_CASES)
def test_dc_power_flow_matches_pandapower_rundcpp(name):
    import pandapower as pp

    case = load_case(name)
    net = _pp_net(name)
    pos = {int(b): i for i, b in enumerate(case.bus_id)}
    rng = np.random.default_rng(3)
    tol_mw = 1e-6 * case.base_mva  # 1e-6 p.u.
    for _ in range(2):
        # random dispatch / demand; the ext_grid (slack) absorbs the mismatch
        for table in ("gen", "sgen"):
            if len(net[table]):
                net[table]["p_mw"] = rng.uniform(0.0, 1.0, len(net[table])) * net[table].max_p_mw
        net.load["p_mw"] = rng.uniform(0.0, 200.0, len(net.load))
        # "pi" trafo model = MATPOWER's branch model (what the case arrays use)
        pp.rundcpp(net, trafo_model="pi", calculate_voltage_angles=True)

        p_inj = np.zeros(case.n_bus)
        for table, sign in (("gen", 1.0), ("sgen", 1.0), ("load", -1.0)):
            df = net[table]
            if not len(df):
                continue
            np.add.at(p_inj, [pos[int(b)] for b in df.bus], sign * df.p_mw * df.scaling)
        flows = dc_power_flow(case, p_inj)
        ref = np.empty(case.n_branch)
        trafo = case.branch_is_trafo
        ref[~trafo] = net.res_line.p_from_mw.loc[case.branch_element[~trafo]].to_numpy()
        ref[trafo] = net.res_trafo.p_hv_mw.loc[case.branch_element[trafo]].to_numpy()
        np.testing.assert_allclose(flows, ref, rtol=0, atol=tol_mw)

        # same flows through the generator ordering of the case
        gen_p = np.array(
            [
                0.0 if et == "ext_grid" else float(net[et].at[el, "p_mw"])
                for et, el in zip(case.gen_element_type, case.gen_element, strict=True)
            ]
        )
        load = np.zeros(case.n_bus)
        np.add.at(load, [pos[int(b)] for b in net.load.bus], net.load.p_mw * net.load.scaling)
        flows2 = dc_power_flow(case, bus_injection_mw(case, gen_p[None], load[None]))
        np.testing.assert_allclose(flows2[0], ref, rtol=0, atol=tol_mw)
        # slack output = mismatch
        assert net.res_ext_grid.p_mw.sum() == pytest.approx(load.sum() - gen_p.sum(), abs=1e-6)


# --------------------------------------------------------------------------- DC-OPF


def test_case5_dc_opf_matches_matpower():
    # MATPOWER rundcopf('case5'): objective 17479.90 $/hr; Pg = 40, 170, 323.49, 0, 466.51;
    # lambda_P = 16.98, 26.38, 30.00, 39.94, 10.00 $/MWh (branch 4-5 at its 240 MW limit).
    case = load_case("case5")
    res = solve_dc_opf(case)
    assert res.status == "optimal"
    assert res.cost_per_h == pytest.approx(17479.90, abs=0.01)
    np.testing.assert_allclose(res.gen_p_mw, [40.0, 170.0, 323.49, 0.0, 466.51], atol=0.01)
    np.testing.assert_allclose(res.lmp_per_mwh, [16.98, 26.38, 30.00, 39.94, 10.00], atol=0.01)
    # energy component = price at the reference bus (bus 4); congestion there is zero
    assert res.lmp_energy_per_mwh == pytest.approx(res.lmp_per_mwh[case.slack_bus])
    assert res.lmp_congestion_per_mwh[case.slack_bus] == pytest.approx(0.0, abs=1e-9)
    assert abs(res.branch_flow_mw[5]) == pytest.approx(240.0, abs=1e-6)
    assert np.all(line_overload_mw(case, res.branch_flow_mw) <= 1e-6)
    assert float(dispatch_cost(case, res.gen_p_mw)) == pytest.approx(res.cost_per_h)


def test_case14_dc_opf_matches_matpower():
    # MATPOWER rundcopf('case14'): objective 7642.59 $/hr (quadratic costs, no congestion)
    res = solve_dc_opf(load_case("case14"))
    assert res.status == "optimal"
    assert res.cost_per_h == pytest.approx(7642.59, abs=0.01)
    np.testing.assert_allclose(res.lmp_per_mwh, res.lmp_per_mwh[0], atol=1e-6)


def test_case118_dc_opf_matches_matpower():
    # MATPOWER rundcopf('case118') at the base load of 4242 MW: objective 125947.88 $/hr
    case = load_case("case118")
    res = solve_dc_opf(case)
    assert res.status == "optimal"
    assert res.cost_per_h == pytest.approx(125947.88, abs=0.05)
    assert res.gen_p_mw.sum() == pytest.approx(4242.0, abs=1e-6)
    assert float(dispatch_cost(case, res.gen_p_mw)) == pytest.approx(res.cost_per_h)


def test_lmp_equals_finite_difference_of_cost_under_congestion():
    # congested QP: LMP_i must equal d(cost)/d(demand_i)
    case = load_case("case118")
    scale = 0.02
    base = solve_dc_opf(case, line_limit_scale=scale)
    assert base.status == "optimal"
    assert np.count_nonzero(np.abs(base.branch_mu_per_mwh) > 1e-6) >= 2
    assert np.ptp(base.lmp_per_mwh) > 5.0
    eps = 1e-4
    buses = np.argsort(base.lmp_per_mwh)[[0, 1, 50, 116, 117]]
    loads = np.repeat(case.bus_pd_mw[None], len(buses), axis=0)
    loads[np.arange(len(buses)), buses] += eps
    bumped = solve_dc_opf(case, loads, line_limit_scale=scale)
    lowered = solve_dc_opf(
        case,
        2 * np.repeat(case.bus_pd_mw[None], len(buses), axis=0) - loads,
        line_limit_scale=scale,
    )
    right = (bumped.cost_per_h - base.cost_per_h) / eps
    left = (base.cost_per_h - lowered.cost_per_h) / eps
    # cost(demand) is convex and piecewise quadratic: the LMP is a subgradient, between the
    # one-sided derivatives (equal to both where the active set does not change; at a kink the dual
    # is not unique)
    lmp = base.lmp_per_mwh[buses]
    assert np.all(left - 1e-3 <= lmp) and np.all(lmp <= right + 1e-3), (left, lmp, right)
    smooth = np.abs(right - left) < 1e-3
    assert smooth.sum() >= 3
    np.testing.assert_allclose(right[smooth], lmp[smooth], atol=1e-3)


def test_batched_opf_matches_single_and_flags_infeasible():
    case = load_case("case5")
    rng = np.random.default_rng(4)
    loads = case.bus_pd_mw * rng.uniform(0.6, 1.1, size=(6, case.n_bus))
    loads[2] *= 10.0  # 10 GW > 1530 MW capacity: infeasible
    res = solve_dc_opf(case, loads)
    assert res.gen_p_mw.shape == (6, case.n_gen)
    assert res.lmp_per_mwh.shape == (6, case.n_bus)
    assert res.branch_flow_mw.shape == (6, case.n_branch)
    assert res.status[2] == "infeasible" and not res.success
    assert np.isnan(res.cost_per_h[2]) and np.all(np.isnan(res.gen_p_mw[2]))
    for k in (0, 1, 3, 4, 5):
        single = solve_dc_opf(case, loads[k])
        assert res.status[k] == "optimal"
        assert res.cost_per_h[k] == pytest.approx(single.cost_per_h, abs=1e-6)
        np.testing.assert_allclose(res.lmp_per_mwh[k], single.lmp_per_mwh, atol=1e-6)
    np.testing.assert_allclose(
        dispatch_cost(case, res.gen_p_mw[[0, 1]]), res.cost_per_h[[0, 1]], rtol=1e-12
    )


def test_soft_line_limits():
    case = load_case("case5")
    hard = solve_dc_opf(case, line_limit_scale=0.5)
    expensive = solve_dc_opf(case, line_limit_scale=0.5, soft_line_penalty=1e4)
    assert expensive.cost_per_h == pytest.approx(hard.cost_per_h, abs=1e-6)
    np.testing.assert_allclose(expensive.line_slack_mw, 0.0, atol=1e-9)
    cheap = solve_dc_opf(case, line_limit_scale=0.5, soft_line_penalty=20.0)
    assert cheap.status == "optimal"
    assert cheap.line_slack_mw.sum() > 1.0
    assert cheap.cost_per_h < hard.cost_per_h
    assert cheap.objective_per_h == pytest.approx(
        cheap.cost_per_h + 20.0 * cheap.line_slack_mw.sum(), abs=1e-6
    )
    overload = line_overload_mw(case, cheap.branch_flow_mw, line_limit_scale=0.5)
    np.testing.assert_allclose(overload, cheap.line_slack_mw, atol=1e-6)
    assert cheap.objective_per_h <= hard.cost_per_h + 1e-6


def test_dispatch_cost_and_overload_batched():
    case = load_case("case118")
    rng = np.random.default_rng(5)
    gen_p = rng.uniform(case.gen_pmin_mw, case.gen_pmax_mw, size=(32, case.n_gen))
    cost = dispatch_cost(case, gen_p)
    assert cost.shape == (32,)
    expected = (
        case.gen_c2_per_mw2h * gen_p[7] ** 2 + case.gen_c1_per_mwh * gen_p[7] + case.gen_c0_per_h
    ).sum()
    assert cost[7] == pytest.approx(expected)
    flows = dc_power_flow(case, bus_injection_mw(case, gen_p))
    over = line_overload_mw(case, flows, line_limit_scale=0.01)
    assert over.shape == (32, case.n_branch)
    np.testing.assert_allclose(over, np.maximum(np.abs(flows) - 0.01 * case.branch_rate_a_mw, 0.0))
    assert np.all(line_overload_mw(load_case("case5"), np.full((2, 6), 1e6))[:, 1:5] == 0.0)


# --------------------------------------------------------------------------- solver robustness
#
# HiGHS's active-set QP solver (the only QP method of highspy) stops with "Non-convex" /
# model status "Not Set" on a few convex soft-limit QPs of opf_118 (positive semidefinite
# Hessian: the slack columns have zero curvature).  These loads come from the task itself.


@functools.cache
def _opf_118_test_day(day_id: int):
    """(task, oracle plan, bus loads [48, n_bus]) of opf_118's test split day ``day_id``."""
    from powerzoo.tasks import make_task

    task = make_task("opf_118", split="test")
    state = task.reset(np.random.default_rng(0), np.array([day_id]))
    loads = task.bus_loads_ahead(state, 0, task.spec.horizon)
    return task, task.oracle_plan(state)[0], loads


def _dc_opf_kkt_violation(case, res, load, penalty) -> float:
    """Largest violation [$/MWh] of the generators' optimality conditions: each unit's
    marginal cost equals the LMP at its bus unless it sits at a limit (with the right sign)."""
    p = res.gen_p_mw
    marginal = case.gen_c1_per_mwh + 2.0 * case.gen_c2_per_mw2h * p
    price = res.lmp_per_mwh[case.gen_bus]
    gap = marginal - price
    at_min = p <= case.gen_pmin_mw + 1e-6
    at_max = p >= case.gen_pmax_mw - 1e-6
    viol = np.where(
        at_min, np.maximum(-gap, 0.0), np.where(at_max, np.maximum(gap, 0.0), np.abs(gap))
    )
    # soft limits: a branch's shadow price is bounded by the penalty
    viol = np.append(viol, np.maximum(np.abs(res.branch_mu_per_mwh) - penalty, 0.0))
    return float(viol.max())


@pytest.mark.parametrize("day_id, step", [(30, 35), (60, 34)])
def test_previously_failing_opf_118_loads_solve_to_optimality(day_id, step):
    from powerzoo.tasks.economic_dispatch import OVERLOAD_PENALTY

    task, plan, loads = _opf_118_test_day(day_id)
    assert np.all(np.isfinite(plan))  # the oracle plan used to have a NaN step here
    case = task.case
    res = solve_dc_opf(case, loads[step], soft_line_penalty=OVERLOAD_PENALTY)
    assert res.status == "optimal"
    # the oracle's step (within its ramp range, which does not bind here) costs the same; its
    # dispatch may differ by round-off where units tie
    assert dispatch_cost(case, plan[step]) == pytest.approx(res.cost_per_h, rel=1e-7)
    assert res.gen_p_mw.sum() == pytest.approx(loads[step].sum(), abs=1e-6)
    assert _dc_opf_kkt_violation(case, res, loads[step], OVERLOAD_PENALTY) < 1e-3
    np.testing.assert_allclose(
        line_overload_mw(case, res.branch_flow_mw), res.line_slack_mw, atol=1e-6
    )
    # same optimum as the independent interior-point method
    ipm = _solve_with(case, loads[step], ["interior point"], soft_line_penalty=OVERLOAD_PENALTY)
    assert ipm.status == "optimal"
    assert res.objective_per_h == pytest.approx(ipm.objective_per_h, abs=1e-3)
    # (near-flat units, c2 = 0.01 $/MW^2h, share the margin to a few hundredths of a MW)
    np.testing.assert_allclose(res.gen_p_mw, ipm.gen_p_mw, atol=5e-2)
    # (LMPs are not compared: a branch sits exactly at its limit, so the duals are not unique)
    # the neighbouring steps as one batch (warm-started solves)
    batch = solve_dc_opf(case, loads[step - 2 : step + 3], soft_line_penalty=OVERLOAD_PENALTY)
    assert batch.success and np.all(np.isfinite(batch.gen_p_mw))
    assert batch.objective_per_h[2] == pytest.approx(res.objective_per_h, abs=1e-3)


def _solve_with(case, load, methods, **kwargs):
    """solve_dc_opf restricted to the named methods of the solver chain."""
    from powerzoo.physics import qp_solver

    original = qp_solver.SolverChain.__init__

    def restricted(self, model, base_mva):
        original(self, model, base_mva)
        names = [n for n in self._recipes if any(n.startswith(m) for m in methods)]
        self._recipes = {n: self._recipes[n] for n in names}

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(qp_solver.SolverChain, "__init__", restricted)
        return solve_dc_opf(case, load, **kwargs)
    finally:
        mp.undo()


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("case5", {}),
        ("case5", {"line_limit_scale": 0.5, "soft_line_penalty": 20.0}),
        ("case14", {}),
        ("case118", {}),
        ("case118", {"line_limit_scale": 0.05, "soft_line_penalty": 100.0}),
    ],
)
def test_interior_point_fallback_matches_highs(name, kwargs):
    case = load_case(name)
    highs = solve_dc_opf(case, **kwargs)
    ipm = _solve_with(case, None, ["interior point"], **kwargs)
    assert highs.status == ipm.status == "optimal"
    assert ipm.objective_per_h == pytest.approx(highs.objective_per_h, rel=1e-8, abs=1e-3)
    np.testing.assert_allclose(ipm.gen_p_mw, highs.gen_p_mw, atol=2e-3)
    np.testing.assert_allclose(ipm.line_slack_mw, highs.line_slack_mw, atol=1e-4)
    if "soft_line_penalty" not in kwargs:  # unique duals (no soft-limit kinks here)
        np.testing.assert_allclose(ipm.lmp_per_mwh, highs.lmp_per_mwh, atol=1e-3)


def test_case5_interior_point_reproduces_matpower():
    case = load_case("case5")
    res = _solve_with(case, None, ["interior point"])
    assert res.cost_per_h == pytest.approx(17479.90, abs=0.01)
    np.testing.assert_allclose(res.lmp_per_mwh, [16.98, 26.38, 30.00, 39.94, 10.00], atol=0.01)


def test_highs_failure_falls_back_and_total_failure_raises(monkeypatch):
    from powerzoo.physics import qp_solver

    case = load_case("case118")
    loads = case.bus_pd_mw * np.array([[0.8], [0.9], [1.0]])
    reference = solve_dc_opf(case, loads, line_limit_scale=0.05, soft_line_penalty=100.0)
    assert reference.success

    calls = []
    original_call = qp_solver.HighsQP.__call__

    def flaky(self, lo, up):
        calls.append(self.scale)
        if self.scale == 1.0 and len(calls) == 2:  # primary fails on the 2nd load only
            return "not set", None, None
        return original_call(self, lo, up)

    monkeypatch.setattr(qp_solver.HighsQP, "__call__", flaky)
    res = solve_dc_opf(case, loads, line_limit_scale=0.05, soft_line_penalty=100.0)
    assert res.success and calls == [1.0, 1.0, case.base_mva, 1.0]
    np.testing.assert_allclose(res.objective_per_h, reference.objective_per_h, atol=1e-3)

    def broken(self, lo, up):
        return "not set", None, None

    monkeypatch.setattr(qp_solver.HighsQP, "__call__", broken)
    monkeypatch.setattr(
        qp_solver, "solve_qp_ipm", lambda model, lo, up: ("iteration limit", None, None)
    )
    expected = (
        r"load row 0: every solver failed \(highs: not set; .*interior point: iteration limit\)"
    )
    with pytest.raises(RuntimeError, match=expected):
        solve_dc_opf(case, loads, soft_line_penalty=100.0)
