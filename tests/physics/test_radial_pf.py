"""Tests for the radial feeders and the batched exact AC power flow
(``powerzoo.physics.radial_pf``).

Reference values: Baran & Wu's 33-bus feeder (case33bw: losses 202.68 kW / 135.14 kVAr,
Vmin 0.91309 p.u. at bus 18, 1-based) and Khodr et al.'s 141-bus feeder (MATPOWER case141:
losses 632.70 kW, Vmin 0.92786 p.u.). pandapower's Newton-Raphson (``pp.runpp``) is the
test-time oracle on randomised scenarios generated here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import cold_and_warm_runs

from powerzoo.physics.cases import load_case
from powerzoo.physics.feeder import AMPACITY_LADDER_A, RATING_MARGIN, RadialFeeder, orient_branches
from powerzoo.physics.radial_pf import lindistflow, radial_power_flow

# the feeders whose rating rule and stress figures the module docstring of feeder.py states
PUBLISHED_FEEDERS = ("case33bw", "case141")

pp = pytest.importorskip("pandapower")

METHODS = ("dense", "sweep")


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _scenarios(case: RadialFeeder, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Loads scaled U(0.3, 1.3) per bus, plus DER injections of both signs (net export and
    net import, P and Q) at 6 random buses per scenario."""
    rng = np.random.default_rng(seed)
    p = case.bus_pd_mw * rng.uniform(0.3, 1.3, (n, case.n_bus))
    q = case.bus_qd_mvar * rng.uniform(0.3, 1.3, (n, case.n_bus))
    for row in range(n):
        buses = rng.choice(np.arange(1, case.n_bus), 6, replace=False)
        p[row, buses] -= rng.uniform(-0.3, 0.8, 6) * case.total_load_mw / 8  # mostly export
        q[row, buses] += rng.uniform(-0.3, 0.3, 6) * case.total_load_mvar / 8
    return p, q


def _oracle_net(case: RadialFeeder):
    """pandapower net of the feeder with one (settable) load per bus, and the line index of
    each of our branches. case33bw comes straight from pandapower's own case (so the oracle
    also checks our extraction); case141 is not in pandapower and is built from our arrays
    (its data are checked by the published base case)."""
    import pandapower.networks as pn

    if case.name == "case33bw":
        net = _quiet(pn.case33bw)
        net.load.drop(net.load.index, inplace=True)
        lines = net.line.index[net.line["in_service"]].to_numpy()
    else:
        net = pp.create_empty_network(sn_mva=case.base_mva)
        for kv in case.bus_base_kv:
            pp.create_bus(net, vn_kv=kv)
        pp.create_ext_grid(net, case.slack_bus, vm_pu=case.slack_vm_pu)
        for k in range(case.n_branch):
            pp.create_line_from_parameters(
                net,
                case.branch_from_bus[k],
                case.branch_to_bus[k],
                1.0,
                case.branch_r_ohm[k],
                case.branch_x_ohm[k],
                0.0,
                1e5,
            )
        lines = net.line.index.to_numpy()
    for bus in range(case.n_bus):
        pp.create_load(net, bus, p_mw=0.0, q_mvar=0.0)
    return net, lines


def _runpp(net, p, q, vm_slack=1.0):
    net.load["p_mw"] = p
    net.load["q_mvar"] = q
    net.ext_grid["vm_pu"] = vm_slack
    _quiet(pp.runpp, net, algorithm="nr", tolerance_mva=1e-9, max_iteration=30)
    return net


# --------------------------------------------------------------------------- published base cases


def test_case33bw_base_case_matches_published_values():
    case = load_case("case33bw")
    assert isinstance(case, RadialFeeder)
    assert (case.n_bus, case.n_branch, case.slack_bus) == (33, 32, 0)
    assert case.total_load_mw == pytest.approx(3.715) and case.total_load_mvar == pytest.approx(
        2.300
    )
    res = radial_power_flow(case, case.bus_pd_mw, case.bus_qd_mvar)
    assert res.converged.tolist() == [True]
    assert res.p_loss_mw[0] * 1e3 == pytest.approx(202.68, abs=0.005)
    assert res.q_loss_mvar[0] * 1e3 == pytest.approx(135.14, abs=0.005)
    assert res.vm_pu.min() == pytest.approx(0.91309, abs=5e-6)
    assert int(res.vm_pu.argmin()) == 17  # bus 18 in 1-based numbering
    assert res.feeder_p_mw[0] == pytest.approx(3.715 + res.p_loss_mw[0], abs=1e-9)
    assert res.feeder_q_mvar[0] == pytest.approx(2.300 + res.q_loss_mvar[0], abs=1e-9)


def test_case141_base_case_matches_published_values():
    case = load_case("case141")
    assert (case.n_bus, case.n_branch, case.slack_bus) == (141, 140, 0)
    assert np.all(case.bus_base_kv == 12.47)
    # loads are 0.85 power factor
    loaded = case.bus_pd_mw > 0
    pf = case.bus_pd_mw[loaded] / np.hypot(case.bus_pd_mw[loaded], case.bus_qd_mvar[loaded])
    np.testing.assert_allclose(pf, 0.85, atol=1e-12)
    for method in METHODS:
        res = radial_power_flow(case, case.bus_pd_mw, case.bus_qd_mvar, method=method)
        assert res.converged.all()
        assert res.p_loss_mw[0] * 1e3 == pytest.approx(632.70, abs=0.005)
        # the minimum sits on buses 86/87 (0-based 85/86), joined by a near-zero impedance:
        # compare voltages, not the index of the minimum
        assert res.vm_pu.min() == pytest.approx(0.92786, abs=5e-6)
        assert abs(res.vm_pu[0, 85] - res.vm_pu[0, 86]) < 1e-6


# --------------------------------------------------------------------------- pandapower oracle


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", PUBLISHED_FEEDERS)
def test_matches_pandapower_newton_raphson_on_random_scenarios(name, method):
    case = load_case(name)
    net, lines = _oracle_net(case)
    p, q = _scenarios(case, 6, seed=14)
    vm_slack = np.array([1.0, 1.0, 1.03, 0.98, 1.0, 1.02])
    res = radial_power_flow(case, p, q, method=method, slack_vm_pu=vm_slack)
    assert res.converged.all()
    exact_vs_linear = []
    for row in range(p.shape[0]):
        net = _runpp(net, p[row], q[row], vm_slack[row])
        np.testing.assert_allclose(res.vm_pu[row], net.res_bus["vm_pu"], rtol=0, atol=1e-6)
        np.testing.assert_allclose(res.va_degree[row], net.res_bus["va_degree"], rtol=0, atol=1e-5)
        line = net.res_line.loc[lines]
        assert abs(res.p_loss_mw[row] - line["pl_mw"].sum()) * 1e3 < 1e-3  # kW
        assert abs(res.q_loss_mvar[row] - line["ql_mvar"].sum()) * 1e3 < 1e-3
        np.testing.assert_allclose(res.branch_p_mw[row], line["p_from_mw"], rtol=0, atol=1e-6)
        np.testing.assert_allclose(res.branch_q_mvar[row], line["q_from_mvar"], rtol=0, atol=1e-6)
        np.testing.assert_allclose(res.branch_i_ka[row], line["i_from_ka"], rtol=0, atol=1e-7)
        assert res.feeder_p_mw[row] == pytest.approx(
            float(net.res_ext_grid["p_mw"].iloc[0]), abs=1e-6
        )
        assert res.feeder_q_mvar[row] == pytest.approx(
            float(net.res_ext_grid["q_mvar"].iloc[0]), abs=1e-6
        )
        exact_vs_linear.append(
            np.abs(
                lindistflow(case, p[row], q[row], slack_vm_pu=vm_slack[row]).vm_pu[0]
                - net.res_bus["vm_pu"].to_numpy()
            ).max()
        )
    # the 1e-6 tolerance tells the exact flow from LinDistFlow, which is off by ~1e-3 p.u.
    assert 1e-4 < max(exact_vs_linear) < 2e-2
    # DER export reverses flow somewhere in these scenarios
    assert (res.branch_p_mw < 0).any()


def test_lindistflow_is_linear_and_lossless():
    case = load_case("case33bw")
    p, q = _scenarios(case, 3, seed=2)
    lin = lindistflow(case, p, q)
    np.testing.assert_allclose(lin.feeder_p_mw, p.sum(axis=1))
    doubled = lindistflow(case, 2 * p, 2 * q)
    flat = lindistflow(case, 0 * p, 0 * q)
    np.testing.assert_allclose(
        doubled.vm_pu**2 - flat.vm_pu**2, 2 * (lin.vm_pu**2 - flat.vm_pu**2), atol=1e-12
    )
    head = case.branch_from_bus == case.slack_bus
    np.testing.assert_allclose(
        lin.branch_p_mw[:, head].sum(axis=1), p.sum(axis=1) - p[:, case.slack_bus]
    )


# --------------------------------------------------------------------------- batching


@pytest.mark.parametrize("name", PUBLISHED_FEEDERS)
def test_batch_of_identical_rows_equals_single_solve(name):
    case = load_case(name)
    p, q = _scenarios(case, 1, seed=5)
    single = radial_power_flow(case, p[0], q[0])  # 1-D input is B = 1
    for batch, method in ((7, "dense"), (7, "sweep"), (300, "auto")):
        many = radial_power_flow(
            case, np.repeat(p, batch, axis=0), np.repeat(q, batch, axis=0), method=method
        )
        assert many.vm_pu.shape == (batch, case.n_bus) and many.branch_p_mw.shape == (
            batch,
            case.n_branch,
        )
        for key in (
            "vm_pu",
            "va_degree",
            "p_loss_mw",
            "q_loss_mvar",
            "branch_p_mw",
            "branch_q_mvar",
            "branch_s_mva",
            "branch_loading",
            "feeder_p_mw",
            "feeder_q_mvar",
        ):
            got, want = getattr(many, key), getattr(single, key)
            np.testing.assert_allclose(
                got, np.broadcast_to(want, got.shape), rtol=0, atol=1e-10, err_msg=key
            )
        assert many.converged.all() and many.iterations == single.iterations


@pytest.mark.parametrize("method", ("dense", "sweep"))
def test_rows_are_independent_of_their_batch(method):
    case = load_case("case141")
    p, q = _scenarios(case, 40, seed=9)
    p[7] = 4.0 * case.bus_pd_mw  # a slow-converging row keeps iterating after the others retire
    q[7] = 4.0 * case.bus_qd_mvar
    batch = radial_power_flow(case, p, q, method=method)
    assert batch.converged.all() and batch.iterations > 12
    for row in (0, 7, 39):
        alone = radial_power_flow(case, p[row], q[row], method=method)
        np.testing.assert_allclose(batch.vm_pu[row], alone.vm_pu[0], rtol=0, atol=1e-9)
        np.testing.assert_allclose(batch.branch_p_mw[row], alone.branch_p_mw[0], rtol=0, atol=1e-8)


def test_results_of_earlier_calls_stay_valid():
    """Large results reuse pooled memory only once nothing refers to it any more."""
    case = load_case("case141")
    p, q = _scenarios(case, 200, seed=4)
    first = radial_power_flow(case, p, q)
    saved = first.vm_pu.copy(), first.branch_current_pu.copy(), first.branch_loading.copy()
    kept_view = radial_power_flow(case, 1.1 * p, 1.1 * q).vm_pu  # the result itself is dropped
    expected = kept_view.copy()
    for scale in (0.5, 0.7, 0.9, 1.2, 0.6, 0.8):  # churn through the pool
        radial_power_flow(case, scale * p, scale * q)
    np.testing.assert_array_equal(first.vm_pu, saved[0])
    np.testing.assert_array_equal(first.branch_current_pu, saved[1])
    np.testing.assert_array_equal(first.branch_loading, saved[2])
    np.testing.assert_array_equal(kept_view, expected)
    np.testing.assert_allclose(
        kept_view, radial_power_flow(case, 1.1 * p, 1.1 * q).vm_pu, atol=1e-12
    )


def test_power_balance_sign_convention_and_reverse_flow():
    case = load_case("case33bw")
    p, q = case.bus_pd_mw.copy(), case.bus_qd_mvar.copy()
    p[17] -= 2.0  # a 2 MW DER at the far end of the main lateral (net export)
    res = radial_power_flow(case, np.stack([case.bus_pd_mw, p]), np.stack([case.bus_qd_mvar, q]))
    np.testing.assert_allclose(res.feeder_p_mw, [3.715, p.sum()] + res.p_loss_mw, atol=1e-9)
    np.testing.assert_allclose(res.feeder_q_mvar, [2.300, q.sum()] + res.q_loss_mvar, atol=1e-9)
    into_17 = int(np.flatnonzero(case.branch_to_bus == 17)[0])
    assert res.branch_p_mw[0, into_17] > 0 > res.branch_p_mw[1, into_17]  # flow reversed
    assert res.vm_pu[1, 17] > res.vm_pu[0, 17]
    assert np.all(res.p_loss_mw > 0)


def test_warm_start_and_head_voltage():
    case = load_case("case141")
    p, q = _scenarios(case, 4, seed=3)
    cold = radial_power_flow(case, p, q)
    assert (
        radial_power_flow(case, p, q, v_init=cold.v_complex_pu).iterations == 1
    )  # at the solution
    warm = radial_power_flow(case, 1.01 * p, 1.01 * q, v_init=cold.v_complex_pu)
    again = radial_power_flow(case, 1.01 * p, 1.01 * q)
    assert warm.iterations <= again.iterations
    np.testing.assert_allclose(warm.vm_pu, again.vm_pu, rtol=0, atol=1e-8)
    assert (
        radial_power_flow(case, case.bus_pd_mw, case.bus_qd_mvar).iterations <= 2
    )  # base-case guess
    raised = radial_power_flow(case, p, q, slack_vm_pu=1.05)
    np.testing.assert_allclose(raised.vm_pu[:, case.slack_bus], 1.05)
    assert np.all(raised.p_loss_mw < cold.p_loss_mw)  # higher voltage, lower current


# --------------------------------------------------------------------------- failure modes


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", PUBLISHED_FEEDERS)
def test_overloaded_scenarios_report_non_convergence_without_nan(name, method):
    case = load_case(name)
    scale = np.array([1.0, 4.5, 8.0, 100.0, 1e4])[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from overflow / division either
        res = radial_power_flow(
            case, scale * case.bus_pd_mw, scale * case.bus_qd_mvar, method=method, max_iter=40
        )
        arrays = {
            key: getattr(res, key)
            for key in (
                "vm_pu",
                "va_degree",
                "v_complex_pu",
                "p_loss_mw",
                "q_loss_mvar",
                "branch_p_mw",
                "branch_q_mvar",
                "branch_s_mva",
                "branch_i_ka",
                "branch_loading",
                "feeder_p_mw",
                "feeder_q_mvar",
                "branch_current_pu",
            )
        }
    assert res.converged.tolist() == [True, False, False, False, False]
    for key, value in arrays.items():
        assert np.all(np.isfinite(value)), key
    base = radial_power_flow(case, case.bus_pd_mw, case.bus_qd_mvar)
    np.testing.assert_allclose(res.vm_pu[0], base.vm_pu[0], atol=1e-10)  # the sane row is intact


@pytest.mark.parametrize(
    "p, q, match",
    [
        (np.zeros(32), np.zeros(32), "n_bus=33"),
        (np.zeros((2, 34)), np.zeros((2, 34)), "n_bus=33"),
        (np.zeros((2, 2, 33)), np.zeros((2, 2, 33)), r"\[B, n_bus\]"),
        (np.zeros((0, 33)), np.zeros((0, 33)), "B >= 1"),
        (np.zeros((2, 33)), np.zeros((3, 33)), "differ in shape"),
        (np.full(33, np.nan), np.zeros(33), "NaN"),
        (np.zeros(33), np.r_[np.inf, np.zeros(32)], "NaN or inf"),
        (np.array(["a"] * 33), np.zeros(33), "numeric"),
    ],
)
def test_bad_inputs_raise_clear_value_errors(p, q, match):
    with pytest.raises(ValueError, match=match):
        radial_power_flow(load_case("case33bw"), p, q)


def test_bad_options_raise():
    case = load_case("case33bw")
    ok = case.bus_pd_mw
    for kwargs, match in (
        ({"max_iter": 0}, "max_iter"),
        ({"tol_pu": -1.0}, "tol_pu"),
        ({"method": "newton"}, "method"),
        ({"slack_vm_pu": -1.0}, "slack_vm_pu"),
        ({"slack_vm_pu": np.ones(3)}, "slack_vm_pu"),
        ({"v_init": np.ones((2, 33))}, "v_init"),
    ):
        with pytest.raises(ValueError, match=match):
            radial_power_flow(case, ok, ok, **kwargs)
    with pytest.raises(TypeError, match="RadialFeeder"):
        radial_power_flow(load_case("case5"), np.zeros(5), np.zeros(5))


# -------------------------------------------------------------------------- feeder data and ratings


@pytest.mark.parametrize("name", PUBLISHED_FEEDERS)
def test_line_ratings_follow_the_documented_rule_and_can_bind(name):
    case = load_case(name)
    rated_a = np.round(case.branch_rating_ka * 1e3, 6)
    assert set(rated_a) <= set(AMPACITY_LADDER_A)
    np.testing.assert_allclose(
        case.branch_rating_mva, np.sqrt(3) * case.branch_base_kv * case.branch_rating_ka
    )
    base = radial_power_flow(case, case.bus_pd_mw, case.bus_qd_mvar)
    need_a = RATING_MARGIN * base.branch_i_ka[0] * 1e3
    assert np.all(rated_a >= need_a - 1e-6)  # covers the margin ...
    ladder = np.asarray(AMPACITY_LADDER_A)
    below = np.array([ladder[ladder < r].max(initial=0.0) for r in rated_a])
    assert np.all((below < need_a) | (rated_a == ladder[0]))  # ... with the smallest rung that does
    assert base.branch_loading.max() <= 1 / RATING_MARGIN + 1e-9
    stressed = radial_power_flow(case, 1.3 * case.bus_pd_mw, 1.3 * case.bus_qd_mvar)
    assert 0 < (stressed.branch_loading > 1).sum() < case.n_branch // 2  # thermal limits bind
    p = case.bus_pd_mw.copy()
    leaf = int(np.argmax(case.bus_depth))
    p[leaf] -= 1.5  # 1.5 MW of DER export at the end of the longest lateral
    assert radial_power_flow(case, p, case.bus_qd_mvar).branch_loading.max() > 1.0


def test_feeder_is_read_only_cached_and_validated():
    case = load_case("case33bw")
    assert load_case(" CASE33BW ") is case
    with pytest.raises(ValueError):
        case.bus_pd_mw[0] = 1.0
    assert case.bus_parent[case.slack_bus] == -1 and np.all(case.bus_parent[1:] >= 0)
    assert np.array_equal(case.bus_parent[case.branch_to_bus], case.branch_from_bus)
    assert case.bus_depth.max() == 17
    with pytest.raises(ValueError, match="distribution feeders: .*case33bw"):
        load_case("case34bw")
    fields = dict(
        name="toy",
        base_mva=1.0,
        slack_bus=0,
        slack_vm_pu=1.0,
        bus_base_kv=np.full(3, 10.0),
        bus_pd_mw=np.zeros(3),
        bus_qd_mvar=np.zeros(3),
        bus_vmin_pu=np.full(3, 0.9),
        bus_vmax_pu=np.full(3, 1.1),
        branch_r_pu=np.full(2, 0.01),
        branch_x_pu=np.full(2, 0.01),
        branch_rating_mva=np.full(2, 5.0),
    )
    with pytest.raises(ValueError, match="towards the feeder head"):
        RadialFeeder(branch_from_bus=[0, 2], branch_to_bus=[1, 1], **fields)
    with pytest.raises(ValueError, match="not connected"):
        RadialFeeder(branch_from_bus=[0, 1], branch_to_bus=[1, 0], **fields)
    with pytest.raises(ValueError, match="2 branches"):
        RadialFeeder(branch_from_bus=[0, 1, 0], branch_to_bus=[1, 2, 2], **fields)
    f, t = orient_branches(3, 0, np.array([0, 2]), np.array([1, 1]))
    toy = RadialFeeder(branch_from_bus=f, branch_to_bus=t, **fields)
    assert toy.bus_parent.tolist() == [-1, 0, 1]


def test_warm_feeder_cache_imports_neither_pandapower_nor_matpower(tmp_path):
    code = (
        "import sys; from powerzoo.physics.cases import load_case; "
        "a = load_case('case33bw'); b = load_case('case141'); "
        "assert (a.n_bus, b.n_bus) == (33, 141); "
        "print(a.branch_rating_mva.sum(), b.bus_pd_mw.sum()); "
        "print(*[m in sys.modules "
        "for m in ('pandapower', 'matpowercaseframes', 'matpower', 'pandas')])"
    )
    cold, warm = (run.stdout.splitlines() for run in cold_and_warm_runs(code, tmp_path))
    assert cold[1].split() == ["True", "True", "True", "True"]  # built from the packages
    assert warm[1].split() == ["False", "False", "False", "False"]  # read from the .npz only
    assert cold[0] == warm[0]  # the same data
    assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == ["case141", "case33bw"]


def test_corrupt_feeder_cache_warns_and_is_rebuilt(tmp_path):
    from powerzoo.physics import feeder_cases

    load_uncached = feeder_cases._load_cached.__wrapped__  # no in-process cache
    fresh = load_uncached("case33bw", str(tmp_path))
    (path,) = tmp_path.iterdir()
    assert path.name.startswith("case33bw-pandapower") and path.suffix == ".npz"
    path.write_bytes(b"not an npz file")
    with pytest.warns(RuntimeWarning, match="unreadable"):
        rebuilt = load_uncached("case33bw", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cached = load_uncached("case33bw", str(tmp_path))  # the file was rewritten
    for feeder in (rebuilt, cached):
        np.testing.assert_array_equal(feeder.branch_rating_mva, fresh.branch_rating_mva)
        np.testing.assert_array_equal(feeder.branch_r_pu, fresh.branch_r_pu)
        np.testing.assert_array_equal(feeder.bus_parent, fresh.bus_parent)
