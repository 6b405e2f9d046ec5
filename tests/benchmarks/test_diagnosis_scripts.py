"""The diagnosis scripts the results page cites: they run, and their baseline rows are the
packaged baselines table's (same days, same returns)."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from helpers import REPO_ROOT

from powerzoo.benchmarks.baselines import baseline_rows
from powerzoo.tasks import task_spec


def _run(script: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / script), *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize(
    ("script", "task", "days", "policies", "unit"),
    [  # dso: idle is over its voltage budget on two of the first 15 days
        ("diagnose_single_agent.py", "dso", 15, ("rule_based", "idle"), "day"),
        ("diagnose_multi_agent.py", "marl_der_arbitrage", 3, ("rule_based", "oracle"), "episode"),
    ],
)
def test_baseline_rows_match_the_table_on_the_same_days(script, task, days, policies, unit):
    text = _run(script, "--task", task, "--days", str(days), "--policies", ",".join(policies))
    table = baseline_rows(task, "test")
    for name in policies:
        line = re.search(rf"^{name}: return (-?[\d,]+\.\d) \$/{unit}; .*$", text, re.M)
        assert line, text
        printed = float(line.group(1).replace(",", ""))
        assert printed == pytest.approx(np.mean(table[name]["returns"][:days]), abs=0.051)
        over = np.mean(table[name]["over_budget"][:days])
        assert line.group(0).endswith(f"over budget on {100 * over:.0f} % of {days} {unit}s")
    assert np.any(table["idle"]["over_budget"][:days]) or task != "dso"
    for cost in task_spec(task).selected_constraints:  # every budgeted cost against its budget
        assert re.search(rf"{cost} [\d.e+-]+ \(budget [\d.]+", text), cost
