"""Market clearing (offer curves cleared by a DC-OPF) against the DC-OPF,
its duals and the network."""

import pickle

import numpy as np
import pytest

from powerzoo.physics.cases import load_case
from powerzoo.physics.dc_opf import solve_dc_opf
from powerzoo.physics.dc_power_flow import ptdf_matrix
from powerzoo.physics.market_clearing import CHUNK, VOLL_PER_MWH, MarketClearing, clear_market

# MATPOWER rundcopf('case5') at the case's own 1,000 MW (300 / 300 / 400 MW at buses 2 / 3 / 4):
# 17,479.90 $/h, Pg = 40 / 170 / 323.49 / 0 / 466.51 MW, LMPs 16.98 / 26.38 / 30.00 / 39.94 / 10.00
REF_COST, REF_P = 17479.90, [40.0, 170.0, 323.49, 0.0, 466.51]
REF_LMP = [16.98, 26.38, 30.00, 39.94, 10.00]


@pytest.fixture(scope="module")
def case5():
    case = load_case("case5")
    assert case.total_load_mw == 1000.0  # the reference load needs no scaling
    return case


@pytest.mark.parametrize("n_blocks", [1, 3])
@pytest.mark.parametrize("penalty", [None, 1000.0])
def test_truthful_clearing_is_the_dc_opf_of_the_true_costs(case5, n_blocks, penalty):
    market = MarketClearing(case5, n_blocks, line_penalty_per_mwh=penalty)
    res = market.clear(case5.bus_pd_mw, np.zeros(case5.n_gen))
    assert res.success
    assert res.production_cost_per_h[0] == pytest.approx(REF_COST, abs=0.01)
    assert res.offer_cost_per_h[0] == pytest.approx(REF_COST, abs=0.01)  # offers = true costs
    np.testing.assert_allclose(res.gen_p_mw[0], REF_P, atol=0.01)
    np.testing.assert_allclose(res.lmp_per_mwh[0], REF_LMP, atol=0.01)
    opf = solve_dc_opf(case5)
    np.testing.assert_allclose(res.gen_p_mw[0], opf.gen_p_mw, atol=1e-6)
    np.testing.assert_allclose(res.lmp_per_mwh[0], opf.lmp_per_mwh, atol=1e-9)
    np.testing.assert_allclose(res.branch_flow_mw[0], opf.branch_flow_mw, atol=1e-6)
    assert res.unserved_mw[0] == res.spilled_mw[0] == 0.0 and not res.overload_mw.any()


def test_truthful_clearing_matches_the_dc_opf_over_a_range_of_loads(case5):
    loads = case5.bus_pd_mw * np.linspace(0.3, 1.15, 40)[:, None]
    res = MarketClearing(case5, 2).clear(loads, np.zeros((40, case5.n_gen, 2)))
    opf = solve_dc_opf(case5, loads)
    np.testing.assert_allclose(res.production_cost_per_h, opf.cost_per_h, rtol=1e-9)
    np.testing.assert_allclose(res.gen_p_mw, opf.gen_p_mw, atol=1e-6)
    np.testing.assert_allclose(res.lmp_per_mwh, opf.lmp_per_mwh, atol=1e-7)


def test_quadratic_costs_converge_to_the_dc_opf_as_blocks_shrink():
    # case14 has quadratic costs: K blocks interpolate the cost curve linearly between block edges,
    # so the truthful clearing costs at least the exact DC-OPF (7,642.59 $/h) and converges to it
    case = load_case("case14")
    exact = solve_dc_opf(case).cost_per_h
    gaps = [
        float(
            MarketClearing(case, k)
            .clear(case.bus_pd_mw, np.zeros(case.n_gen))
            .production_cost_per_h[0]
        )
        - exact
        for k in (1, 4, 16, 64)
    ]
    assert exact == pytest.approx(7642.59, abs=0.01)
    assert all(g >= -1e-6 for g in gaps) and gaps == sorted(gaps, reverse=True)
    assert gaps[-1] < 1e-3 * exact


def _random_market(case, seed, n=6, k=3):
    rng = np.random.default_rng(seed)
    load = case.bus_pd_mw * rng.uniform(0.5, 1.1, (n, 1))
    return load, rng.uniform(0.0, 1.0, (n, case.n_gen, k))


def test_lmps_are_the_duals_derivatives_of_the_as_bid_cost(case5):
    market = MarketClearing(case5, 3, line_penalty_per_mwh=1000.0)
    load, markup = _random_market(case5, 0)
    base = market.clear(load, markup)
    eps = 1e-3
    for bus in range(case5.n_bus):
        bumped = load.copy()
        bumped[:, bus] += eps
        up = market.clear(bumped, markup)
        derivative = (up.offer_cost_per_h - base.offer_cost_per_h) / eps
        np.testing.assert_allclose(base.lmp_per_mwh[:, bus], derivative, atol=1e-6)
    # energy component = price at the reference bus; congestion = mu' PTDF
    np.testing.assert_allclose(
        base.lmp_energy_per_mwh, base.lmp_per_mwh[:, case5.slack_bus], atol=1e-12
    )
    np.testing.assert_allclose(
        base.lmp_per_mwh - base.lmp_energy_per_mwh[:, None],
        base.branch_mu_per_mwh @ ptdf_matrix(case5),
        atol=1e-9,
    )


def test_complementary_slackness_of_every_offer_block(case5):
    market = MarketClearing(case5, 3)
    load, markup = _random_market(case5, 1, n=20)
    res = market.clear(load, markup)
    price = res.offer_price_per_mwh
    lmp = res.lmp_per_mwh[:, case5.gen_bus][:, :, None]  # [B, n_gen, 1] at each unit's bus
    width = market.block_mw[None]
    full, empty = res.block_p_mw >= width - 1e-7, res.block_p_mw <= 1e-7
    assert np.all(
        price[full] <= np.broadcast_to(lmp, price.shape)[full] + 1e-7
    )  # cleared: offer <= LMP
    assert np.all(
        price[empty] >= np.broadcast_to(lmp, price.shape)[empty] - 1e-7
    )  # not cleared: offer >= LMP
    partial = ~full & ~empty
    assert partial.any()  # the marginal blocks set the price
    np.testing.assert_allclose(
        price[partial], np.broadcast_to(lmp, price.shape)[partial], atol=1e-7
    )


def test_a_binding_line_separates_prices_and_prices_equalise_without_limits(case5):
    congested = MarketClearing(case5).clear(case5.bus_pd_mw, np.zeros(5))
    assert abs(congested.branch_flow_mw[0, 5]) == pytest.approx(240.0)  # line 4-5 at its rating
    assert congested.branch_mu_per_mwh[0, 5] != 0.0 and np.ptp(congested.lmp_per_mwh) > 25.0
    free = MarketClearing(case5, line_limit_scale=1e6).clear(case5.bus_pd_mw, np.zeros(5))
    np.testing.assert_allclose(
        free.lmp_per_mwh[0], 30.0, atol=1e-9
    )  # Solitude (30 $/MWh) is marginal
    assert abs(free.branch_flow_mw[0, 5]) > 240.0 and not free.branch_mu_per_mwh.any()
    assert free.production_cost_per_h[0] < congested.production_cost_per_h[0]


def test_a_uniform_markup_scales_prices_and_keeps_the_dispatch(case5):
    market = MarketClearing(case5, 2)
    load = case5.bus_pd_mw * np.array([[0.6], [0.9], [1.05]])
    truthful = market.clear(load, np.zeros((3, 5)))
    marked = market.clear(load, np.full((3, 5), 0.4))
    np.testing.assert_allclose(marked.gen_p_mw, truthful.gen_p_mw, atol=1e-7)
    np.testing.assert_allclose(marked.lmp_per_mwh, 1.4 * truthful.lmp_per_mwh, atol=1e-7)
    np.testing.assert_allclose(
        marked.production_cost_per_h, truthful.production_cost_per_h, rtol=1e-12
    )


def test_withholding_the_cheap_unit_raises_its_price_behind_the_congested_line(case5):
    market = MarketClearing(case5, 1)
    markup = np.zeros(5)
    markup[4] = 1.0  # Brighton (bus 5, 10 $/MWh) asks 20 $/MWh
    res = market.clear(case5.bus_pd_mw, markup)
    assert res.lmp_per_mwh[0, 4] == pytest.approx(20.0)  # it still sets the price at its own bus
    assert res.gen_p_mw[0].sum() == pytest.approx(1000.0)


def test_batches_are_chunked_consistent_and_deterministic(case5):
    market = MarketClearing(case5, 3, line_penalty_per_mwh=1000.0)
    load, markup = _random_market(case5, 2, n=CHUNK + 40)
    res = market.clear(load, markup)
    again = market.clear(load, markup)
    for field in ("gen_p_mw", "lmp_per_mwh", "branch_flow_mw"):
        np.testing.assert_array_equal(getattr(res, field), getattr(again, field))
    for row in (0, CHUNK - 1, CHUNK, CHUNK + 39):
        one = market.clear(load[row], markup[row : row + 1])
        np.testing.assert_allclose(one.gen_p_mw[0], res.gen_p_mw[row], atol=1e-9)
        np.testing.assert_allclose(one.lmp_per_mwh[0], res.lmp_per_mwh[row], atol=1e-9)
    assert res.gen_p_mw.sum(axis=1) == pytest.approx(load.sum(axis=1))  # balance, nothing shed
    copy = pickle.loads(pickle.dumps(market))  # the HiGHS models are rebuilt, not pickled
    np.testing.assert_array_equal(copy.clear(load, markup).gen_p_mw, res.gen_p_mw)


def test_scarcity_is_shed_at_voll_and_infeasible_hard_limits_are_reported(case5):
    short = case5.bus_pd_mw * 1.6  # 1,600 MW > 1,530 MW of capacity
    soft = MarketClearing(case5, line_penalty_per_mwh=1000.0).clear(short, np.zeros(5))
    assert soft.success and soft.unserved_mw[0] == pytest.approx(70.0)
    assert soft.lmp_energy_per_mwh[0] == pytest.approx(VOLL_PER_MWH)
    hard = MarketClearing(case5).clear(np.stack([case5.bus_pd_mw, short]), np.zeros(5))
    assert list(hard.status) == ["optimal", "optimal"]  # the VOLL column keeps even this feasible
    tight = MarketClearing(case5, line_limit_scale=0.01)  # 4 MW on 1-2, 2.4 MW on 4-5: infeasible
    res = tight.clear(np.stack([case5.bus_pd_mw * 0.0, case5.bus_pd_mw]), np.zeros(5))
    assert res.status[0] == "optimal" and res.status[1] == "infeasible"
    assert np.isnan(res.lmp_per_mwh[1]).all() and np.isfinite(res.lmp_per_mwh[0]).all()
    relaxed = MarketClearing(case5, line_limit_scale=0.01, line_penalty_per_mwh=1000.0).clear(
        case5.bus_pd_mw, np.zeros(5)
    )
    assert relaxed.success and relaxed.overload_mw.sum() > 0


def test_bad_input_raises(case5):
    market = MarketClearing(case5, 3)
    with pytest.raises(ValueError, match="markup must be"):
        market.clear(case5.bus_pd_mw, np.zeros((1, 5, 2)))
    with pytest.raises(ValueError, match="NaN"):
        market.clear(case5.bus_pd_mw, np.full(5, np.nan))
    with pytest.raises(ValueError, match=">= -1"):
        market.clear(case5.bus_pd_mw, np.full(5, -2.0))
    with pytest.raises(ValueError, match="load_mw must be"):
        market.clear(np.zeros(4), np.zeros(5))
    with pytest.raises(ValueError, match="markup batch"):
        market.clear(np.stack([case5.bus_pd_mw] * 3), np.zeros((2, 5)))
    with pytest.raises(ValueError, match="n_blocks"):
        MarketClearing(case5, 0)
    with pytest.raises(ValueError, match="line_limit_scale"):
        clear_market(case5, case5.bus_pd_mw, np.zeros(5), line_limit_scale=0.0)


@pytest.mark.parametrize("name", ["case5", "case14"])  # linear and quadratic costs
def test_offer_curves_are_non_decreasing_whatever_the_markups(name):
    # ISO offer rules accept only non-decreasing offer curves: a unit's markups are offered in
    # increasing order (its equal-width price-quantity pairs stacked by price)
    case = load_case(name)
    market = MarketClearing(case, 3, line_penalty_per_mwh=1000.0)
    rng = np.random.default_rng(7)
    markup = rng.uniform(0.0, 1.0, (64, case.n_gen, 3))
    offered = market.monotone_markup(markup)
    prices = market.offer_prices(markup)
    assert np.all(np.diff(prices, axis=2) >= 0.0)
    np.testing.assert_array_equal(offered, np.sort(markup, axis=2))
    np.testing.assert_allclose((1.0 + offered) * market.block_marginal_cost, prices, rtol=1e-12)
    np.testing.assert_array_equal(market.monotone_markup(offered), offered)  # kept as it is
    load = np.repeat(case.bus_pd_mw[None], 64, axis=0)
    res = market.clear(load, markup)
    assert np.all(np.diff(res.offer_price_per_mwh, axis=2) >= 0.0)
    np.testing.assert_allclose(res.offer_price_per_mwh, prices, rtol=1e-12)
