"""Arguments a new user plausibly gets wrong: each is one line naming the option and what it
takes (exit status 2), refused before anything is evaluated or trained, instead of a traceback, a
silently ignored option or an empty result."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from powerzoo.cli.main import main


def _error(capsys, argv: list[str]) -> str:
    """The single error line of ``powerzoo argv`` (argparse's usage lines aside)."""
    with pytest.raises(SystemExit) as exc:  # argparse's own errors exit
        raise SystemExit(main(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if "error:" in line][-1]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["families", "battery_arbitrage", "--seed", "-1"], "--seed: expected an integer >= 0"),
        (["collect", "battery_arbitrage", "--seed", "-3"], "--seed: expected an integer >= 0"),
        (["bench", "battery_arbitrage", "--episodes", "0"], "--episodes: expected a positive"),
        (["eval", "runs/x", "--episodes", "0"], "--episodes: expected a positive integer"),
        (["demo", "--episodes", "0"], "--episodes: expected a positive integer, got 0"),
        (["tune", "battery_arbitrage", "--episodes", "abc"], "positive integer or 'all'"),
        (["train", "battery_arbitrage", "--timesteps", "0"], "must be at least 1 env step"),
        (["train", "battery_arbitrage", "--n-envs", "0"], "--n-envs: expected a positive"),
        (["docs-pages", "--no-figures", "--keep-figures"], "not allowed with argument"),
    ],
)
def test_bad_numbers_and_conflicting_flags_name_the_option(capsys, argv, expected):
    assert expected in _error(capsys, argv)


def test_card_refuses_a_missing_table_and_a_split_the_task_lacks(capsys, tmp_path: Path):
    line = _error(capsys, ["card", "battery_arbitrage", "--table", str(tmp_path / "no.json")])
    assert "--table: no such baselines file" in line
    line = _error(capsys, ["card", "battery_arbitrage", "--split", "workload_shock"])
    assert "unknown split 'workload_shock' of battery_arbitrage; its splits: train" in line


def test_bench_refuses_an_empty_policy_list_and_a_file_as_its_folder(capsys, tmp_path: Path):
    line = _error(capsys, ["bench", "battery_arbitrage", "--policies", "--out", str(tmp_path)])
    assert "--policies names no policy" in line
    a_file = tmp_path / "table.h5"
    a_file.write_text("")
    line = _error(capsys, ["bench", "battery_arbitrage", "--out", str(a_file)])
    assert "is a file, not a folder" in line
    line = _error(capsys, ["families", "battery_arbitrage", "--out", str(a_file)])
    assert "is a file, not a folder" in line
    line = _error(capsys, ["campaign-report", str(tmp_path), "--out", str(a_file)])
    assert "is a file, not a folder" in line


def test_tune_names_an_unknown_split_and_refuses_a_track_with_a_step_budget(capsys):
    line = _error(capsys, ["tune", "battery_arbitrage", "-a", "PPO", "--split", "nosuch"])
    assert "unknown split 'nosuch' of battery_arbitrage" in line
    argv = ["tune", "battery_arbitrage", "-a", "PPO", "--steps", "512", "--track", "S"]
    assert "give --track or --steps, not both" in _error(capsys, argv)


def test_train_refuses_a_folder_or_other_file_as_its_config(capsys, tmp_path: Path):
    line = _error(capsys, ["train", "-c", str(tmp_path)])
    assert "-c/--config takes a YAML or JSON run config file, got the folder" in line
    data = tmp_path / "episodes.h5"
    data.write_text("")
    assert "(.yaml, .yml, .json), got" in _error(capsys, ["train", "-c", str(data)])
    missing = str(tmp_path / "run.yaml")
    assert "-c/--config: no such file" in _error(capsys, ["train", "-c", missing])


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["train", "battery_arbitrage", "--marl", "il"], "PPO on battery_arbitrage has one agent"),
        (
            ["train", "marl_opf", "--algo", "MAPPO", "--marl", "il"],
            "MAPPO on marl_opf trains its own way (leave --marl out)",
        ),
    ],
)
def test_train_refuses_marl_where_it_would_be_ignored(capsys, tmp_path: Path, argv, expected):
    line = _error(capsys, [*argv, "--output-dir", str(tmp_path)])
    assert expected in line
    assert not any(tmp_path.iterdir())  # refused before a run folder was made


def test_a_closed_pipe_ends_the_command_quietly(capsys, monkeypatch):
    # `powerzoo describe TASK | head`: the reader leaves, the next write raises BrokenPipeError
    spare = os.open(os.devnull, os.O_WRONLY)  # what main points the closed stdout's fd at

    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self) -> int:
            return spare

    monkeypatch.setattr("sys.stdout", ClosedPipe())
    try:
        assert main(["describe", "battery_arbitrage"]) == 1
    finally:
        os.close(spare)
    assert "Traceback" not in capsys.readouterr().err


def test_every_folder_writing_command_takes_out():
    import argparse

    from powerzoo.cli.main import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    writers = [
        "bench", "campaign", "campaign-report", "campaign-score", "demo", "docs-pages",
        "families", "submit", "train", "tune",
    ]  # fmt: skip
    for name in writers:
        options = {o for a in action.choices[name]._actions for o in a.option_strings}
        assert "--out" in options, name
    args = parser.parse_args(["train", "battery_arbitrage", "--out", "elsewhere"])
    assert args.output_dir == "elsewhere"
    args = parser.parse_args(["train", "battery_arbitrage", "--output-dir", "elsewhere"])
    assert args.output_dir == "elsewhere"
