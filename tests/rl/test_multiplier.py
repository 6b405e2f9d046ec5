"""The -L learners' multipliers (powerzoo.rl.mappo.lagrangian): a PID controller on the
normalised violation, bounded, unit-free, quick to unwind; and one budget definition shared with
the benchmark score."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import small_native_trainer

from powerzoo.benchmarks.budget_snapshot import TaskBudgets
from powerzoo.benchmarks.evaluation import COST_TOLERANCE
from powerzoo.benchmarks.score_v2 import mean_within_budget
from powerzoo.rl.config import ConfigError, TrainConfig
from powerzoo.rl.mappo.hparams import MAPPOParams
from powerzoo.rl.mappo.lagrangian import (
    BUDGET_FLOOR,
    Multipliers,
    normalised_violation,
    within_budgets,
)


def _trajectory(params: MAPPOParams, costs, budgets) -> np.ndarray:
    """Multipliers [iterations, k] after each step on mean episode costs [iterations, k]."""
    budgets = np.atleast_1d(np.asarray(budgets, np.float64))
    control = Multipliers(budgets.size, params)
    rows = np.asarray(costs, np.float64).reshape(-1, budgets.size)
    return np.array([control.step(row, budgets).copy() for row in rows])


def test_the_pid_step_follows_its_formula():
    """lambda = clip(Kp e + I + Kd max(0, e - e_prev), 0, lambda_max), with I accumulating
    Ki min(e, 1) and held at 0 from below; e = J_c / d - 1."""
    p = MAPPOParams(lambda_kp=0.5, lambda_ki=0.2, lambda_kd=0.3, lambda_init=0.1)
    lam = _trajectory(p, [3.0, 1.5, 0.0, 0.0], 2.0)[:, 0]
    # e: 0.5, -0.25, -1, -1; I: 0.1 + 0.1 = 0.2, 0.2 - 0.05 = 0.15, 0.15 - 0.2 -> 0, 0
    expected = [0.5 * 0.5 + 0.2, 0.5 * -0.25 + 0.15, 0.0, 0.0]
    np.testing.assert_allclose(lam, expected)
    rising = _trajectory(p, [3.0, 4.0], 2.0)[:, 0]  # e 0.5 then 1.0: the D term adds 0.3 * 0.5
    assert rising[1] == pytest.approx(0.5 * 1.0 + (0.1 + 0.1 + 0.2) + 0.3 * 0.5)


def test_multiplier_unwinds_within_a_few_dozen_iterations_unlike_the_raw_unit_rule():
    """50 iterations at ten times the budget, then none: the PID multiplier is back at 0 within
    40 iterations; the raw-unit step (lambda_lr per unit over budget) is still high 100 later."""
    budget = 1.0
    costs = [10.0 * budget] * 50 + [0.0] * 150
    pid = _trajectory(MAPPOParams(), costs, budget)[:, 0]
    assert pid[:50].max() == pytest.approx(9.0 + 5.0)  # Kp e = 9 plus 50 x Ki x min(e, 1)
    assert pid[49 + 40] == 0.0 and (pid[50 + 40 :] == 0.0).all()
    assert pid[49 + 30] > 0.0  # not at once: the integral still holds 50 iterations' worth
    raw = _trajectory(MAPPOParams(lambda_update="sgd", lambda_max=None), costs, budget)[:, 0]
    assert raw[49] == pytest.approx(50 * 0.05 * 9.0)  # 22.5
    assert raw[49 + 100] == pytest.approx(22.5 - 100 * 0.05 * budget)  # 17.5, still high


def test_multiplier_stays_bounded_and_a_saturated_violation_does_not_wind_it_up():
    p = MAPPOParams()
    lam = _trajectory(p, [1e6] * 500 + [0.0] * 3, 1.0)[:, 0]
    assert lam.max() == p.lambda_max and (lam[:500] == p.lambda_max).all()
    assert lam[500] == 0.0  # the bound already answered it: nothing accumulated to unwind
    # a long moderate violation saturates the integral at lambda_max, never above
    control = Multipliers(1, p)
    for _ in range(2000):
        control.step(np.array([1.5]), np.array([1.0]))
    assert control.integral[0] <= p.lambda_max and control.values[0] == p.lambda_max


def test_multiplier_trajectory_is_the_same_in_any_cost_unit():
    """Costs and budgets x1000 (MWh -> kWh) give the same multipliers; the raw-unit rule does
    not."""
    rng = np.random.default_rng(0)
    costs = rng.uniform(0.0, 3.0, size=(60, 2))
    budgets = np.array([1.0, 0.2])
    a = _trajectory(MAPPOParams(lambda_kd=0.5), costs, budgets)
    b = _trajectory(MAPPOParams(lambda_kd=0.5), costs * 1000.0, budgets * 1000.0)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert a.max() > 1.0  # the sequence does move them
    raw = MAPPOParams(lambda_update="sgd")
    assert not np.allclose(
        _trajectory(raw, costs, budgets), _trajectory(raw, costs * 1e3, budgets * 1e3)
    )


def test_a_zero_budget_is_normalised_by_the_scores_tolerance():
    assert BUDGET_FLOOR == COST_TOLERANCE
    e = normalised_violation(np.array([0.5e-3, 0.01, 0.0]), np.zeros(3))
    np.testing.assert_allclose(e, [-0.5, 9.0, -1.0])
    lam = _trajectory(MAPPOParams(), [[0.5e-3, 0.01]] * 3, [0.0, 0.0])
    assert (lam[:, 0] == 0.0).all() and (lam[:, 1] > 9.0).all()


def test_multiplier_state_round_trips_and_an_older_state_still_loads():
    p = MAPPOParams(lambda_kd=0.2)
    costs = np.array([[3.0], [2.5], [0.4], [1.2], [0.0], [2.0]])
    full = _trajectory(p, costs, 1.0)
    first = Multipliers(1, p)
    for row in costs[:3]:
        first.step(row, np.array([1.0]))
    resumed = Multipliers(1, p)
    resumed.load_state_dict(first.state_dict())
    rest = [resumed.step(row, np.array([1.0])).copy() for row in costs[3:]]
    np.testing.assert_array_equal(np.array(rest), full[3:])
    old = Multipliers(1, p)  # a checkpoint from before the PID state: multipliers alone
    old.load_state_dict({"multipliers": np.array([2.0])})
    assert old.values[0] == 2.0 and old.integral[0] == 2.0 and np.isnan(old.previous[0])


@pytest.mark.parametrize(
    ("costs", "budgets"),
    [
        ([[0.5, 0.1], [1.5, 0.3]], [1.0, 0.2]),  # means exactly on both budgets
        ([[1.0 + COST_TOLERANCE, 0.0]], [1.0, 0.2]),  # on the budget plus the tolerance
        ([[1.0 + 2 * COST_TOLERANCE, 0.0]], [1.0, 0.2]),  # just past it
        ([[3.0, 0.0], [0.0, 0.0], [0.0, 0.0]], [1.0, 0.2]),  # one bad day, mean within
        ([[0.0, 0.5], [0.0, 0.0]], [1.0, 0.2]),  # the second cost's mean over
        ([[0.0004], [0.0008]], [0.0]),  # a zero budget, within the tolerance
        ([[0.002], [0.002]], [0.0]),  # a zero budget, over
    ],
)
def test_the_learners_constraint_is_the_scores_within_budget(costs, budgets):
    """One budget definition: the -L learners' constraint E[C] <= d and the benchmark score's
    ``within_budget`` give the same verdict on the same episode costs."""
    names = [f"c{j}" for j in range(len(budgets))]
    snapshot = TaskBudgets(tuple(names), dict(zip(names, budgets, strict=True)))
    assert within_budgets(np.array(costs), np.array(budgets)) == mean_within_budget(
        np.array(costs), names, snapshot
    )


def test_the_constraint_check_reads_the_mean_not_the_share_of_days():
    assert within_budgets(np.array([[3.0], [0.0], [0.0]]), np.array([1.0]))
    assert not within_budgets(np.array([[1.1], [1.1]]), np.array([1.0]))
    with pytest.raises(ValueError, match="at least one episode"):
        within_budgets(np.zeros((0, 1)), np.array([1.0]))


def test_multiplier_options_are_checked():
    with pytest.raises(ValueError, match="lambda_update"):
        MAPPOParams(lambda_update="adamw")
    with pytest.raises(ValueError, match="lambda_ki"):
        MAPPOParams(lambda_ki=-0.1)
    with pytest.raises(ConfigError, match="lambda_update"):
        TrainConfig.from_dict(
            {
                "task": "marl_opf",
                "algorithm": "MAPPO-L",
                "total_timesteps": 1000,
                "algorithm_kwargs": {"lambda_update": "adam"},
            }
        )


def test_mappo_l_smoke_training_moves_each_multiplier_toward_its_budget(tmp_path):
    """Four iterations of MAPPO-L on marl_opf with the default multiplier settings: the cost kept
    far within a (loosened) budget keeps its multiplier at 0, the cost over its budget raises its
    multiplier, and every multiplier is what the controller gives on the iteration's costs."""
    trainer = small_native_trainer(
        tmp_path,
        "MAPPO-L",
        steps=4 * 48 * 4,
        algorithm_kwargs={"n_steps": 48, "n_epochs": 1, "hidden_sizes": [16, 16]},
    )
    learner = trainer._ensure_learner()
    assert trainer.cost_names == ("thermal_overload", "power_imbalance")
    learner.thresholds = np.array([1e9, 1.0])  # thermal overload: a budget no policy reaches
    seen, step = [], learner.update_multipliers

    def record(costs):
        seen.append(np.array(costs, dtype=float))
        return step(costs)

    learner.update_multipliers = record
    trainer.train()
    assert len(seen) == 4 and all(c[1] > 1.0 for c in seen)  # over the imbalance budget
    lam = learner.multipliers
    assert lam[0] == 0.0 and lam[1] > 1.0 and lam[1] <= learner.params.lambda_max
    replay = _trajectory(MAPPOParams(), np.array(seen), learner.thresholds)
    np.testing.assert_array_equal(replay[-1], lam)
