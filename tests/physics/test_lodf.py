"""Line outage distribution factors: the flows they give after an outage equal the DC power flow
of the network without the branch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from powerzoo.physics.cases import load_case
from powerzoo.physics.dc_power_flow import dc_power_flow
from powerzoo.physics.lodf import (
    islanding_outages,
    lodf_matrix,
    post_outage_flows,
    worst_outages,
)
from powerzoo.physics.network import NetworkCase


def _without(case: NetworkCase, branch: int) -> NetworkCase:
    on = case.branch_in_service.copy()
    on[branch] = False
    return dataclasses.replace(case, branch_in_service=on)


def _balanced_injections(case: NetworkCase, rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = rng.normal(0.0, 30.0, (rows, case.n_bus))
    p[:, case.slack_bus] -= p.sum(axis=1)
    return p


@pytest.mark.parametrize("name", ["case118", "case89pegase"])  # case89pegase: phase shifters
def test_post_outage_flows_equal_the_flow_of_the_network_without_the_branch(name):
    case = load_case(name)
    p = _balanced_injections(case, 3, seed=1)
    flow = dc_power_flow(case, p)
    candidates = np.flatnonzero(case.branch_in_service)
    outaged = candidates[~islanding_outages(case, candidates)][::7]
    after = post_outage_flows(case, flow, outaged)  # [3, k, n_branch]
    assert after.shape == (3, outaged.size, case.n_branch)
    for j, k in enumerate(outaged.tolist()):
        np.testing.assert_allclose(after[:, j], dc_power_flow(_without(case, k), p), atol=1e-6)
        np.testing.assert_array_equal(after[:, j, k], 0.0)


def test_outages_that_split_the_network_are_flagged_and_give_nan():
    case = load_case("case118")
    flagged = np.flatnonzero(islanding_outages(case))
    assert flagged.size > 0
    # a flagged branch is the only path to some buses: the remaining network is in pieces
    from powerzoo.physics.dc_sparse import island_reference_buses

    k = int(flagged[0])
    assert island_reference_buses(_without(case, k)).size > 1
    assert np.isnan(lodf_matrix(case, [k])).all()
    kept = np.setdiff1d(np.flatnonzero(case.branch_in_service), flagged)[:5]
    assert all(island_reference_buses(_without(case, int(b))).size == 1 for b in kept)
    assert np.isfinite(lodf_matrix(case, kept)).all()


def test_worst_outages_rank_by_the_overload_a_full_resolve_finds():
    case = load_case("case118")
    rating = np.full(case.n_branch, 60.0)  # tight everywhere: many outages overload something
    case = dataclasses.replace(case, branch_rate_a_mw=rating)
    p = _balanced_injections(case, 2, seed=3)
    flow = dc_power_flow(case, p)
    outaged, score = worst_outages(case, flow, n=8)
    assert outaged.size == 8 and np.all(np.diff(score) <= 0) and score[0] > 0
    brute = {}
    for k in np.flatnonzero(case.branch_in_service & ~islanding_outages(case)).tolist():
        after = np.abs(dc_power_flow(_without(case, k), p))
        brute[k] = float(np.maximum(after - rating, 0.0).sum())
    best = sorted(brute, key=brute.get, reverse=True)[:8]
    np.testing.assert_allclose(score, [brute[k] for k in best], rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose([brute[k] for k in outaged.tolist()], score, atol=1e-6)


def test_an_out_of_service_branch_cannot_be_outaged():
    case = _without(load_case("case14"), 3)
    with pytest.raises(ValueError, match="in service"):
        lodf_matrix(case, [3])
    assert not islanding_outages(case, [3])[0]
