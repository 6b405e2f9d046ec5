"""The AC tasks' card figure ``rule_reactive_excess_mvarh``: the rule row's per-episode sums of
the step info ``reactive_excess_mvarh`` (row field ``episode_metrics``), averaged."""

from __future__ import annotations

import json

import numpy as np

from powerzoo.benchmarks.card import FIGURES, task_card


def _row(task: str, policy: str, returns: list[float], **extra) -> dict:
    return {
        "task": task,
        "split": "test",
        "policy": policy,
        "episodes": len(returns),
        "day_ids": list(range(len(returns))),
        "seed": 0,
        "returns": returns,
        "mean": float(np.mean(returns)),
        "std": float(np.std(returns)),
        "over_budget": [False] * len(returns),
        "over_budget_rate": 0.0,
        **extra,
    }


def test_the_figure_averages_the_rule_rows_episode_sums(tmp_path):
    metrics = {"reactive_excess_mvarh": [3.0, 5.0], "overload_mvah": [1.0, 1.0]}
    rows = [
        _row("acopf_118", "rule_based", [-10.0, -12.0], episode_metrics=metrics),
        # another policy's sums are not the rule's
        _row(
            "acopf_118", "random", [-90.0, -80.0], episode_metrics={"reactive_excess_mvarh": [9e3]}
        ),
    ]
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"results": rows}))
    assert task_card("acopf_118", table=table)["figures"]["rule_reactive_excess_mvarh"] == 4.0
    # a rule row without the sums (older tables, other tasks): the figure is left out
    table.write_text(json.dumps({"results": [_row("acopf_118", "rule_based", [-10.0])]}))
    assert "rule_reactive_excess_mvarh" not in task_card("acopf_118", table=table)["figures"]
    assert FIGURES["rule_reactive_excess_mvarh"]({}) is None
