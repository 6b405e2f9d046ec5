"""The balancing settlement: a mismatch within the regulation band is regulation energy at the
regulation price, only the energy beyond it is the ``power_imbalance`` cost (1,000 $/MWh), and
under-generating inside the band never pays."""

import numpy as np
import pytest

from powerzoo.physics.redispatch import rule_dispatch_from_system_load
from powerzoo.tasks import make_task
from powerzoo.tasks.balancing import RegulationBand, default_regulation_price, settle_imbalance


def test_settlement_by_hand():
    # band 10 MW, half-hour steps, 80 $/MWh inside the band, 1,000 $/MWh beyond it
    out = settle_imbalance(np.array([-5.0, 0.0, 15.0, -30.0]), 10.0, 0.5, 80.0, 1000.0)
    np.testing.assert_allclose(out.regulation_mwh, [2.5, 0.0, 5.0, 5.0])
    np.testing.assert_allclose(out.imbalance_mwh, [0.0, 0.0, 2.5, 10.0])
    np.testing.assert_allclose(out.regulation_cost, [200.0, 0.0, 400.0, 400.0])
    np.testing.assert_allclose(out.imbalance_cost, [0.0, 0.0, 2500.0, 10000.0])
    np.testing.assert_allclose(out.cost, [200.0, 0.0, 2900.0, 10400.0])


def test_default_regulation_price_is_twice_the_highest_marginal_cost_capped():
    assert default_regulation_price(np.array([14.0, 15.0, 30.0, 40.0, 10.0]), 1000.0) == 80.0
    assert default_regulation_price(np.array([20.0, 600.0]), 1000.0) == 1000.0
    band = RegulationBand.for_system(1200.0, np.array([10.0, 40.0]), 1000.0)
    assert band == RegulationBand(12.0, 80.0, 1000.0)
    assert RegulationBand.for_system(1200.0, np.array([10.0]), 1000.0, 0.02, 55.0).band_mw == 24.0
    with pytest.raises(ValueError, match="regulation_share must be in"):
        make_task("marl_opf", "test", regulation_share=-0.1)


@pytest.mark.parametrize(
    ("task_id", "band_mw", "price"),
    [
        ("marl_opf", 10.9477, 80.0),
        ("opf_118", 59.1059, 560.0),  # 1 % of the peak at 1.4 x the case load
        ("joint_trans_dist", 11.0781, 80.0),
        ("joint_trans_dist_118", 56.7279, 560.0),  # with the load pockets' feeders
        ("marl_uc", 10.9477, 80.0),
        ("tso", 0.0, 0.0),  # balanced by the committed units: no band
    ],
)
def test_each_task_has_its_band_and_price(task_id, band_mw, price):
    band = make_task(task_id, "test").regulation
    assert band.band_mw == pytest.approx(band_mw, abs=1e-4)
    assert band.regulation_price_per_mwh == price and band.imbalance_price_per_mwh == 1000.0


def _marl_opf_step(shift_mw: float, unit: int = 4):
    """One marl_opf step on test day 0 from the exactly balanced congestion-aware dispatch with
    ``unit``'s output moved by ``shift_mw`` (MW)."""
    task = make_task("marl_opf", "test")
    state = task.reset(np.random.default_rng(0), np.array([0]))
    load = task.bus_load_mw(state).sum(axis=1)
    dispatch = rule_dispatch_from_system_load(task.case, load, task.marginal_cost)
    dispatch[0, unit] += shift_mw
    return task, task.step(state, dispatch, None)[1]


def test_a_mismatch_inside_the_band_is_regulation_not_a_violation():
    task, out = _marl_opf_step(-5.0)
    assert out.info["imbalance_mw"][0] == pytest.approx(-5.0, abs=1e-6)
    assert out.constraint_costs[0, 1] == 0.0  # power_imbalance: none (was 2.5 MWh)
    assert out.info["regulation_mwh"][0] == pytest.approx(2.5, abs=1e-6)
    terms = dict(zip(task.spec.reward_terms, -out.reward_terms[0], strict=True))
    assert terms["regulation_cost"] == pytest.approx(2.5 * 80.0, abs=1e-4)
    assert terms["imbalance_cost"] == 0.0


def test_the_excess_beyond_the_band_is_the_cost_at_the_imbalance_price():
    task, out = _marl_opf_step(20.0)
    band = task.regulation.band_mw
    excess_mwh = (20.0 - band) * 0.5
    assert out.constraint_costs[0, 1] == pytest.approx(excess_mwh, abs=1e-6)  # 4.5261 MWh
    assert out.info["regulation_mwh"][0] == pytest.approx(band * 0.5)
    terms = dict(zip(task.spec.reward_terms, -out.reward_terms[0], strict=True))
    assert terms["imbalance_cost"] == pytest.approx(excess_mwh * 1000.0, abs=1e-3)
    assert terms["regulation_cost"] == pytest.approx(band * 0.5 * 80.0)


def test_under_generating_inside_the_band_never_raises_the_reward_on_marl_opf():
    task = make_task("marl_opf", "test")
    state = task.reset(np.random.default_rng(0), np.arange(4))
    lo, band = task.case.gen_pmin_mw, task.regulation.band_mw
    for _ in range(task.spec.horizon):
        load = task.bus_load_mw(state).sum(axis=1)
        balanced = rule_dispatch_from_system_load(task.case, load, task.marginal_cost)
        reference = task.step(state, balanced, None)[1].reward
        for unit in range(task.case.n_gen):
            for cut in (0.5, 5.0, band):
                short = balanced.copy()
                short[:, unit] = np.maximum(short[:, unit] - cut, lo[unit])
                assert np.all(task.step(state, short, None)[1].reward <= reference + 1e-9)
        state = task.step(state, balanced, None)[0]


def test_a_zero_band_restores_every_mwh_as_a_violation():
    task = make_task("marl_opf", "test", regulation_share=0.0)
    state = task.reset(np.random.default_rng(0), np.array([0]))
    load = task.bus_load_mw(state).sum(axis=1)
    dispatch = rule_dispatch_from_system_load(task.case, load, task.marginal_cost)
    dispatch[0, 4] -= 5.0  # a unit inside its step range
    out = task.step(state, dispatch, None)[1]
    assert out.constraint_costs[0, 1] == pytest.approx(2.5, abs=1e-6)
    assert -out.reward_terms[0, 1] == pytest.approx(2500.0, abs=1e-3)


@pytest.mark.parametrize("task_id", ["joint_trans_dist", "marl_uc", "opf"])
def test_the_other_tasks_settle_a_small_mismatch_as_regulation(task_id):
    """The rule's action with one unit 4 MW short: inside the band, no power_imbalance cost and
    the regulation energy at the task's price in the reward."""
    task = make_task(task_id, "test")
    state = task.reset(np.random.default_rng(0), np.array([3]))
    action = np.asarray(task.rule_based_action(task.observe(state).astype(np.float64)))
    step = 2 if task_id == "marl_uc" else 1  # marl_uc: [p_mw, on] per unit
    base = task.step(state, action.copy(), None)[1]
    # the largest unit output (setpoints of marl_uc, joint entries of opf's areas)
    entry = int(np.argmax(action[0, : (task.case.n_gen * step if task_id != "opf" else None)]))
    entry -= entry % step
    action[0, entry] -= 4.0
    out = task.step(state, action, None)[1]
    shift = out.info["imbalance_mw"][0] - base.info["imbalance_mw"][0]
    assert shift == pytest.approx(-4.0, abs=1e-6)
    idx = task.spec.constraint_names.index("power_imbalance")
    assert out.constraint_costs[0, idx] == 0.0
    regulation = abs(out.info["imbalance_mw"][0]) * 0.5
    assert out.info["regulation_mwh"][0] == pytest.approx(regulation)
    terms = dict(zip(task.spec.reward_terms, -out.reward_terms[0], strict=True))
    price = task.regulation.regulation_price_per_mwh
    assert terms["regulation_cost"] == pytest.approx(regulation * price)
    assert terms["imbalance_cost"] == 0.0
