"""benchmarks/v2g_wear_sensitivity.py: the baselines table's episodes at the default wear, and
no V2G from the rule once the wear outprices the spread."""

import importlib.util

import pytest
from helpers import REPO_ROOT

from powerzoo.benchmarks.baselines import baseline_rows

SCRIPT = REPO_ROOT / "benchmarks" / "v2g_wear_sensitivity.py"


def _script():
    spec = importlib.util.spec_from_file_location("v2g_wear_sensitivity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_default_wear_replays_the_baselines_table_and_dear_wear_stops_the_rules_v2g():
    script = _script()
    table = baseline_rows("marl_ev_v2g", "test")
    assert table["rule_based"]["day_ids"][0] == 0 and table["rule_based"]["seed"] == 0
    default = script.wear_sensitivity(7.5, n_weeks=7, policies=("idle", "rule_based"))
    assert default["wear_per_mwh_discharged"] == pytest.approx(16.4, abs=0.05)
    for policy in ("idle", "rule_based"):  # week 0, env seed 0: the table's first episode
        assert default[policy]["returns"][0] == pytest.approx(table[policy]["returns"][0], rel=1e-9)
    assert default["idle"]["v2g_mwh_per_week"] == 0.0
    assert default["rule_based"]["v2g_mwh_per_week"] > 1.0
    dear = script.wear_sensitivity(100.0, n_weeks=7, policies=("rule_based",))
    assert dear["rule_based"]["v2g_mwh_per_week"] == 0.0  # the spread no longer pays the wear
    assert dear["rule_based"]["mean_return"] < default["rule_based"]["mean_return"]
    assert "oracle" not in dear
