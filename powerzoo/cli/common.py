"""Pieces several ``powerzoo`` sub-commands share: their common arguments and the printout of a
campaign's tables (``bench``, ``campaign``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

__all__ = [
    "RUN_MODELS",
    "add_model_argument",
    "add_progress_argument",
    "add_split_and_episodes",
    "add_trust_pickle_argument",
    "check_task_split",
    "nonnegative_int",
    "positive_int",
    "print_tables",
]


def _integer(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1 (argparse names the option in its error)."""
    return _integer(text, 1, "a positive integer")


def nonnegative_int(text: str) -> int:
    """An argparse ``type``: an integer >= 0, such as a seed."""
    return _integer(text, 0, "an integer >= 0")


def check_task_split(task: str, split: str) -> str:
    """``split`` when ``task`` has it; ``ValueError`` naming the task's splits (or, for an unknown
    task, the registered tasks)."""
    from powerzoo.tasks import task_spec

    splits = task_spec(task).splits
    if split not in splits:
        raise ValueError(f"unknown split {split!r} of {task}; its splits: {', '.join(splits)}")
    return split


RUN_MODELS = ("best", "final", "latest")
"""Models of a run folder a command can load (``best`` falls back to ``final``)."""


def add_progress_argument(parser: argparse.ArgumentParser, what: str = "progress bar") -> None:
    """``--progress`` / ``--no-progress``: ``what`` on or off (default ``None``: on when stderr
    is a terminal)."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"{what} (default: on when stderr is a terminal)",
    )


def add_split_and_episodes(parser: argparse.ArgumentParser, episodes_help: str) -> None:
    """``--split`` (default ``test``) and ``--episodes`` (days; default ``None``: every day)."""
    parser.add_argument("--split", default="test", help="data split (default: test)")
    parser.add_argument("--episodes", type=positive_int, default=None, help=episodes_help)


def add_model_argument(parser: argparse.ArgumentParser, flag: str, help_text: str) -> None:
    """``flag``: which model of a run folder to load, one of :data:`RUN_MODELS` (default
    ``best``)."""
    parser.add_argument(flag, choices=RUN_MODELS, default="best", help=help_text)


def add_trust_pickle_argument(parser: argparse.ArgumentParser) -> None:
    """``--trust-pickle``: also read the pickles of run folders an older PowerZoo wrote (they run
    code when read; default: refused, naming the file)."""
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="also read the pickle files of run folders written by an older PowerZoo, and SB3 "
        "zips with SB3's own loader; unpickling runs code: only for run folders from a trusted "
        "source",
    )


def print_tables(result: Any, files: Sequence[tuple[str, str]], last_line: str) -> None:
    """Print a campaign's Markdown table, ``label: path`` for each ``(key, label)`` of
    ``files`` (keys of ``result.files``), one line per plot, then ``last_line``."""
    print(result.markdown(), end="")
    print()
    for key, label in files:
        print(f"{label}: {result.files[key]}")
    for path in result.plots:
        print(f"plot: {path}")
    print(last_line)
