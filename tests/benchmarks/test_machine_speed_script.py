"""benchmarks/machine_speed.py: real figures on one thread, appended as a JSON line per call."""

import json

import pytest
from helpers import REPO_ROOT, load_script

SCRIPT = REPO_ROOT / "benchmarks" / "machine_speed.py"


@pytest.fixture(scope="module")
def machine_speed():
    return load_script(SCRIPT)


def test_figures_and_hardware_appended_as_one_json_line_per_call(
    machine_speed, monkeypatch, tmp_path, capsys
):
    monkeypatch.setattr(machine_speed, "TASK_STEPS", {"battery_arbitrage": 60, "marl_uc": 30})
    log = tmp_path / "machines.jsonl"
    for _ in range(2):
        assert machine_speed.main(["--rounds", "1", "--append", str(log)]) == 0
    out = capsys.readouterr().out
    assert "env steps per CPU-second" in out and f"appended to {log}" in out
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 2
    first = lines[0]
    assert set(first["env_steps_per_cpu_s"]) == {"battery_arbitrage", "marl_uc"}
    assert all(v > 0 for v in first["env_steps_per_cpu_s"].values())
    assert first["torch_updates_per_cpu_s"] > 0
    assert first["hardware"]["blas_kernels"] and first["hardware"]["cpu_model"]
    assert first["measured_at"] <= lines[1]["measured_at"]


def test_a_round_count_below_one_is_refused(machine_speed, capsys):
    with pytest.raises(SystemExit):
        machine_speed.main(["--rounds", "0"])
    assert "--rounds must be at least 1" in capsys.readouterr().err
