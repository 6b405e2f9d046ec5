"""The budget-aware (CMDP) score on hand-built episodes."""

import numpy as np
import pytest

from powerzoo.benchmarks import cmdp_score as cs
from powerzoo.benchmarks.cmdp_score import budget_clipped_gains, cmdp_score, cmdp_score_of_gains

RANDOM = np.array([-100.0, -80.0, -120.0, -90.0])
ORACLE = np.array([50.0, 60.0, 40.0, 70.0])  # within budget every day
TABLE = {
    "random": {"policy": "random", "returns": RANDOM.tolist(), "over_budget": [True] * 4},
    "rule_based": {"policy": "rule_based", "returns": [0.0] * 4, "over_budget": [False] * 4},
    "oracle": {"policy": "oracle", "returns": ORACLE.tolist(), "over_budget": [False] * 4},
}


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(cs, "baseline_rows", lambda task, split: TABLE)


def test_a_feasible_policy_scores_its_plain_normalised_score(table):
    feasible = np.array([0.0, 10.0, -20.0, 30.0])
    plain = (feasible.mean() - RANDOM.mean()) / (ORACLE.mean() - RANDOM.mean())
    assert cmdp_score("t", feasible, [False] * 4) == pytest.approx(plain)
    assert cmdp_score("t", ORACLE, [False] * 4) == pytest.approx(1.0)
    assert cmdp_score("t", RANDOM, None) == pytest.approx(0.0)


def test_a_budget_breaking_policy_cannot_outscore_a_feasible_one(table):
    breaking = ORACLE + 1_000.0  # earns far more than the oracle, always over budget
    assert cmdp_score("t", breaking, [True] * 4) <= 0.0
    half = cmdp_score("t", breaking, [True, False, True, False])  # over budget on two days
    feasible_half = cmdp_score("t", np.where([1, 0, 1, 0], RANDOM, breaking), [False] * 4)
    assert half == pytest.approx(feasible_half)  # an over-budget day gains nothing
    # a day over budget that still loses to random keeps its loss
    losing = RANDOM - 10.0
    assert cmdp_score("t", losing, [True] * 4) == pytest.approx(-10.0 / np.mean(ORACLE - RANDOM))


def test_gains_clip_only_over_budget_days_and_check_shapes():
    gains = budget_clipped_gains([5.0, 5.0, -5.0], [0.0, 0.0, 0.0], [True, False, True])
    np.testing.assert_array_equal(gains, [0.0, 5.0, -5.0])
    with pytest.raises(ValueError, match="equal-length"):
        budget_clipped_gains([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="over_budget"):
        budget_clipped_gains([1.0, 2.0], [0.0, 0.0], [True])
    with pytest.raises(ValueError, match="positive reference gain"):
        cmdp_score_of_gains(np.ones(2), np.zeros(2))


def test_cmdp_score_refuses_other_episodes_and_unflagged_tables(table, monkeypatch):
    with pytest.raises(ValueError, match="4 episodes"):
        cmdp_score("t", [0.0, 1.0], [False, False])
    old = {k: dict(v) for k, v in TABLE.items()}
    old["oracle"]["over_budget"] = None
    monkeypatch.setattr(cs, "baseline_rows", lambda task, split: old)
    with pytest.raises(ValueError, match="recompute"):
        cmdp_score("t", ORACLE, [False] * 4)


def test_a_subset_of_the_table_days_is_scored_against_those_days_only(table, monkeypatch):
    monkeypatch.setattr(
        cs, "evaluation_protocol", lambda task, split: {"day_ids": [3, 8, 13, 18], "seed": 0}
    )
    policy = np.array([10.0, 20.0])  # the episodes of days 13 and 3, in that order
    expected = np.mean(policy - RANDOM[[2, 0]]) / np.mean(ORACLE[[2, 0]] - RANDOM[[2, 0]])
    assert cmdp_score("t", policy, [False, False], day_ids=[13, 3]) == pytest.approx(expected)
    assert cmdp_score("t", ORACLE[[1, 3]], [False, False], day_ids=[8, 18]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"days \[5\] are not in the table"):
        cmdp_score("t", policy, [False, False], day_ids=[13, 5])
