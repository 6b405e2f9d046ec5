"""Pinned task budgets: the file's form, its errors, the spec-like view ``budget_flags`` reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from powerzoo.benchmarks.budget_snapshot import (
    TaskBudgets,
    budget_snapshot,
    budgets_of,
    live_budgets,
    read_task_budgets,
    task_budgets,
    write_task_budgets,
)
from powerzoo.benchmarks.evaluation import budget_flags
from powerzoo.fileio import CorruptFileError
from powerzoo.tasks import task_spec


def test_the_snapshot_is_the_live_specs_budgets_and_reads_back(tmp_path):
    path = write_task_budgets(tmp_path / "task_budgets.json", ["dso", "battery_arbitrage"])
    read = read_task_budgets(path)
    assert list(read) == ["dso", "battery_arbitrage"]
    for task, budgets in read.items():
        spec = task_spec(task)
        assert budgets.selected_constraints == tuple(spec.selected_constraints)
        assert budgets.cost_thresholds == {k: float(v) for k, v in spec.cost_thresholds.items()}
        assert budgets == live_budgets(task)
    with pytest.raises(KeyError, match="no_such_task"):
        budget_snapshot(["no_such_task"])
    assert live_budgets("no_such_task") is None and budgets_of("no_such_task") is None


def test_the_view_counts_like_the_spec_in_budget_flags():
    names = ("voltage_violation", "thermal_overload", "reported_only")
    budgets = TaskBudgets(("voltage_violation", "thermal_overload"), {"voltage_violation": 1.0})
    costs = np.asarray([[0.5, 9.0, 9.0], [1.5, 0.0, 0.0], [0.0, 0.0, 3.0]])
    flags = budget_flags(costs, names, budgets)
    # thermal overload is selected without a threshold: it counts as a violation, never over
    assert flags["over_budget"] == [False, True, False]
    assert flags["violation_rate"] == pytest.approx(2 / 3)
    assert budgets.budget("voltage_violation") == 1.0
    assert budgets.budget("thermal_overload") is None
    assert budgets.budget("reported_only") is None


def test_nested_contexts_restore_the_outer_budgets(tmp_path):
    outer, inner = tmp_path / "outer.json", tmp_path / "inner.json"
    entry = {"selected": ["soc_violation"], "thresholds": {"soc_violation": 2.0}}
    outer.write_text(json.dumps({"battery_arbitrage": entry}))
    inner.write_text(
        json.dumps({"battery_arbitrage": {**entry, "thresholds": {"soc_violation": 7.0}}})
    )
    with task_budgets(outer):
        with task_budgets(inner):
            assert budgets_of("battery_arbitrage").budget("soc_violation") == 7.0
        assert budgets_of("battery_arbitrage").budget("soc_violation") == 2.0
    assert budgets_of("battery_arbitrage") == live_budgets("battery_arbitrage")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("[1, 2]", "expected a mapping"),
        ('{"dso": {"selected": []}}', "exactly the keys"),
        ('{"dso": {"selected": "voltage", "thresholds": {}}}', "list of constraint names"),
        ('{"dso": {"selected": [], "thresholds": {"v": "high"}}}', "not a number"),
        ('{"dso": {"selected": [], "thresholds": {"v": -1}}}', ">= 0"),
        ("{not json", "corrupt"),
    ],
)
def test_a_damaged_file_is_one_error_naming_it(tmp_path, content, reason):
    path = tmp_path / "task_budgets.json"
    path.write_text(content)
    with pytest.raises(CorruptFileError, match=reason) as err:
        read_task_budgets(path)
    assert str(path) in str(err.value)
    with pytest.raises(FileNotFoundError):
        read_task_budgets(tmp_path / "missing.json")
