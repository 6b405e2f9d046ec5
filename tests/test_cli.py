"""The powerzoo command line: list, describe, demo, errors."""

import json
import subprocess
import sys

from powerzoo.cli.main import main


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "powerzoo.cli.main", *args], capture_output=True, text=True)


def test_list_shows_registered_tasks(capsys):
    assert main(["list"]) == 0
    assert "battery_arbitrage" in capsys.readouterr().out


def test_describe_human_and_json(capsys):
    assert main(["describe", "battery_arbitrage"]) == 0
    text = capsys.readouterr().out
    assert "soc_violation" in text and "48 steps x 30 min" in text and "price_spike" in text
    assert main(["describe", "battery_arbitrage", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    required = {"task_id", "description", "agent_mode", "n_agents", "agents", "observation_space", "action_space",
                "reward", "constraint_names", "selected_constraints", "horizon", "step_minutes", "splits",
                "obs_modes", "baselines", "config_template"}
    assert required <= set(info)
    assert info["agent_mode"] == "single" and info["horizon"] == 48
    assert info["config_template"]["task"] == "battery_arbitrage"


def test_unknown_task_is_a_clean_error():
    result = run_cli("describe", "nope")
    assert result.returncode == 2
    assert "unknown task 'nope'; registered tasks: battery_arbitrage" in result.stderr
    assert "Traceback" not in result.stderr


def test_demo_prints_table_and_saves_plot(tmp_path):
    result = run_cli("demo", "--episodes", "5", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    rows = {line.split()[0]: float(line.split()[2].replace(",", "")) for line in lines
            if line.split() and line.split()[0] in ("random", "rule_based", "oracle")}
    assert set(rows) == {"random", "rule_based", "oracle"}
    assert rows["oracle"] >= rows["rule_based"] >= rows["random"]
    png = tmp_path / "demo_episode.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
