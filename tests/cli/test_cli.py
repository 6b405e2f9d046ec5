"""The powerzoo command line: list, describe, demo, errors."""

import csv
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli

from powerzoo.cli.main import main
from powerzoo.tasks import list_tasks


def test_list_shows_registered_tasks(capsys):
    assert main(["list"]) == 0
    assert "battery_arbitrage" in capsys.readouterr().out


def test_describe_human_and_json(capsys):
    assert main(["describe", "battery_arbitrage"]) == 0
    text = capsys.readouterr().out
    assert "soc_violation" in text and "48 steps x 30 min" in text and "price_spike" in text
    assert main(["describe", "battery_arbitrage", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    required = {
        "task_id",
        "description",
        "agent_mode",
        "n_agents",
        "agents",
        "observation_space",
        "action_space",
        "reward",
        "constraint_names",
        "selected_constraints",
        "horizon",
        "step_minutes",
        "splits",
        "obs_modes",
        "baselines",
        "config_template",
    }
    assert required <= set(info)
    assert info["agent_mode"] == "single" and info["horizon"] == 48
    assert info["config_template"]["task"] == "battery_arbitrage"


def test_list_and_describe_json_print_only_their_own_output():
    # fresh interpreters: a solver banner written by C code on file descriptor 1 would land here
    described = run_cli("describe", "tso", "--json")
    assert described.returncode == 0, described.stderr
    info = json.loads(described.stdout)  # the whole of stdout is one JSON document
    assert info["task_id"] == "tso"
    assert described.stdout == json.dumps(info, indent=2) + "\n"
    listed = run_cli("list")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == list_tasks()
    assert "HiGHS" not in described.stdout + listed.stdout


def test_python_dash_m_powerzoo_runs_the_command():
    # for an environment where the `powerzoo` script is not on the PATH
    result = subprocess.run(
        [sys.executable, "-m", "powerzoo", "list"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == list_tasks()
    failed = subprocess.run(
        [sys.executable, "-m", "powerzoo", "describe", "nope"], capture_output=True, text=True
    )
    assert failed.returncode == 2 and "unknown task 'nope'" in failed.stderr


def test_unknown_task_is_a_clean_error():
    result = run_cli("describe", "nope")
    assert result.returncode == 2
    assert "unknown task 'nope'; registered tasks: " in result.stderr
    assert ", ".join(list_tasks()) in result.stderr
    assert "Traceback" not in result.stderr


def test_demo_prints_table_and_saves_plot(tmp_path):
    result = run_cli("demo", "--episodes", "5", "--out", str(tmp_path), "--timesteps", "2048")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    rows = {
        line.split()[0]: float(line.split()[2].replace(",", ""))
        for line in lines
        if line.split() and line.split()[0] in ("random", "rule_based", "oracle", "ppo_2k")
    }
    assert set(rows) == {"random", "rule_based", "oracle", "ppo_2k"}
    assert (tmp_path / "run" / "evaluation" / "evaluation_metrics.csv").is_file()
    assert rows["oracle"] >= rows["rule_based"] >= rows["random"]
    png = tmp_path / "demo_episode.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _tiny_config(tmp_path, **extra):
    import yaml

    cfg = {
        "task": "battery_arbitrage",
        "total_timesteps": 256,
        "n_envs": 2,
        "output_dir": str(tmp_path / "runs"),
        "name": "cli",
        "algorithm_kwargs": {"n_steps": 64, "batch_size": 64, "n_epochs": 1},
        "evaluation": {"freq": 128, "episodes": 2},
        **extra,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_train_eval_resume_from_the_command_line(tmp_path):
    train = run_cli("train", "-c", str(_tiny_config(tmp_path)))
    assert train.returncode == 0, train.stderr
    run = tmp_path / "runs" / "cli"
    assert f"run folder: {run}" in train.stdout and "env steps: 256 (finished)" in train.stdout
    evaluated = run_cli("eval", str(run), "--split", "test", "--episodes", "3")
    assert evaluated.returncode == 0, evaluated.stderr
    assert "mean return" in evaluated.stdout and "cost soc_violation" in evaluated.stdout
    rows = (run / "evaluation" / "eval_test_best.csv").read_text().splitlines()
    assert rows[0].startswith("day_id,return,length,cost_soc_violation") and len(rows) == 4
    assert (run / "evaluation" / "eval_test_best_day0.png").read_bytes()[:4] == b"\x89PNG"
    resumed = run_cli("resume", str(run))  # already at its budget: nothing to train or write
    assert resumed.returncode == 0, resumed.stderr
    assert f"{run} finished at 256 env steps; nothing to resume" in resumed.stdout


def test_train_with_a_bad_config_names_the_field(tmp_path):
    result = run_cli("train", "-c", str(_tiny_config(tmp_path, evaluation={"every": 5})))
    assert result.returncode == 2
    assert "unknown field 'evaluation.every'" in result.stderr and "run.yaml" in result.stderr
    assert "Traceback" not in result.stderr
    result = run_cli("train", "battery_arbitrage", "-c", "x.yaml")
    assert result.returncode == 2 and "either a task" in result.stderr


@pytest.mark.parametrize("marl", ["shared", pytest.param("il", marks=pytest.mark.slow)])
def test_eval_of_a_multi_agent_run_with_the_printed_command(tmp_path, capsys, marl):
    train = run_cli(
        "train",
        "marl_opf",
        "--marl",
        marl,
        "--timesteps",
        "500",
        "--output-dir",
        str(tmp_path / "runs"),
        "--no-progress",
    )
    assert train.returncode == 0, train.stderr
    printed = next(
        line
        for line in train.stdout.splitlines()
        if line.startswith("evaluate on the test split: ")
    )
    command = shlex.split(printed.split(": ", 1)[1])
    assert command[:2] == ["powerzoo", "eval"] and command[-2:] == ["--split", "test"]
    run = Path(command[2])
    assert run.parent == tmp_path / "runs" and (run / "agents").is_dir()
    # the shared policy trains whole rollouts (2,240 agent-steps here), as it warns when asked
    # for 500; the run then counts what it trained (independent learners: 25 per agent and round)
    trained = {"shared": "2240", "il": "500"}[marl]
    if marl == "shared":
        assert "timesteps=500 is rounded up to 2,240 agent-steps" in train.stderr
    with (
        run / "evaluation" / "evaluation_metrics.csv"
    ).open() as handle:  # evaluated once, at the end
        assert [row["timestep"] for row in csv.DictReader(handle)] == [trained]

    evaluated = run_cli(*command[1:], "--episodes", "2")
    assert evaluated.returncode == 0, evaluated.stderr
    assert "marl_opf — final model on the test split" in evaluated.stdout
    assert "cost power_imbalance (MWh per episode, budget 1)" in evaluated.stdout
    assert "mean return ($/episode)" in evaluated.stdout
    rows = (run / "evaluation" / "eval_test_final.csv").read_text().splitlines()
    assert (
        rows[0] == "day_id,return,length,cost_thermal_overload,cost_power_imbalance"
        and len(rows) == 3
    )
    assert all(int(r.split(",")[2]) == 48 for r in rows[1:])
    assert (run / "evaluation" / "eval_test_final_day0.png").read_bytes()[:4] == b"\x89PNG"

    assert (
        main(["eval", str(run), "--model", "latest"]) == 2
    )  # a multi-agent run keeps no checkpoints
    assert "is a multi-agent run: it keeps only its final models" in capsys.readouterr().err
