"""benchmarks/throughput.py: the sweep measures real steps and writes its table, data and plot."""

import json

import pytest
from helpers import REPO_ROOT, load_script

SCRIPT = REPO_ROOT / "benchmarks" / "throughput.py"


@pytest.fixture(scope="module")
def throughput():
    return load_script(SCRIPT)


def test_measure_steps_single_and_batched_envs(throughput):
    single = throughput.measure("marl_opf", 1, 0.05, min_window=0.01)
    batched = throughput.measure("marl_opf", 8, 0.05, min_window=0.01)
    for row in (single, batched):
        assert (
            row["steps_per_s"] > 0 and row["us_per_env_step"] > 0 and row["cpu_us_per_env_step"] > 0
        )
        assert (
            row["windows"] >= 3 and row["mean_steps_per_s"] <= row["steps_per_s"]
        )  # the fastest window
        assert row["peak_rss_mb"] > 0 and row["task"] == "marl_opf"
        assert row["us_per_env_step"] == pytest.approx(1e6 / row["steps_per_s"])
    assert (single["num_envs"], batched["num_envs"]) == (1, 8)


def test_batch_sizes_timed_together_in_one_process(throughput):
    rows = throughput.measure_together("battery_arbitrage", [1, 4, 16], 0.05, min_window=0.01)
    assert [r["num_envs"] for r in rows] == [1, 4, 16]
    assert all(r["windows"] >= 3 and r["steps_per_s"] > 0 for r in rows)
    assert len({r["peak_rss_mb"] for r in rows}) == 1  # one process


def test_results_table_csv_json_and_plot(throughput, tmp_path):
    rows = [
        {"task": "a", "num_envs": 1, "steps_per_s": 1000.0, "us_per_env_step": 1000.0},
        {"task": "a", "num_envs": 64, "steps_per_s": 64000.0, "us_per_env_step": 15.6},
        {"task": "b", "num_envs": 1, "steps_per_s": 500.0, "us_per_env_step": 2000.0},
    ]
    paths = throughput.write_results(rows, tmp_path / "out")
    assert [p.name for p in paths] == [
        "throughput.csv",
        "throughput.json",
        "throughput.md",
        "throughput.png",
    ]
    assert all(p.stat().st_size > 0 for p in paths)
    assert json.loads(paths[1].read_text()) == rows
    table = paths[2].read_text().splitlines()
    assert table[0] == "| task | N = 1 | N = 64 |"
    assert table[2] == "| `a` | 1,000 | 64,000 |" and table[3] == "| `b` | 500 | – |"


def test_unknown_task_is_a_clear_error(throughput, capsys):
    with pytest.raises(SystemExit):
        throughput.main(["--tasks", "no_such_task"])
    assert "unknown task(s) ['no_such_task']" in capsys.readouterr().err
