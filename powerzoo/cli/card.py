"""``powerzoo card TASK``: the task's card (idle, naive, rule and oracle on the test split, the
oracle's headroom, storage and price figures, unmet targets) from the stored baselines table;
``--recompute`` measures the task's rows again first."""

from __future__ import annotations

import argparse
import json
from typing import Any

from powerzoo.cli.common import add_progress_argument, check_task_split

__all__ = ["add_parser"]


def _cmd_card(args: argparse.Namespace) -> int:
    from pathlib import Path

    from powerzoo.benchmarks.card import check_card, recompute_card, task_card
    from powerzoo.benchmarks.card_text import render_card
    from powerzoo.tasks import get_task_class

    get_task_class(args.task)  # ValueError naming the registered tasks for an unknown name
    check_task_split(args.task, args.split)
    if args.table is not None and not args.recompute and not Path(args.table).is_file():
        raise FileNotFoundError(f"--table: no such baselines file: {args.table}")
    if args.max_episodes is not None and not args.recompute:
        raise ValueError("--max-episodes needs --recompute (the stored card reads every row)")
    if args.max_episodes is not None and args.max_episodes < 1:
        raise ValueError(f"--max-episodes must be >= 1, got {args.max_episodes}")
    if args.recompute:
        card = recompute_card(
            args.task, args.split, args.max_episodes, args.table, progress=args.progress
        )
    else:
        card = task_card(args.task, args.split, args.table)
    unmet = check_card(card)
    if args.json:
        print(json.dumps({**card, "unmet_targets": unmet}, indent=2))
    else:
        print(render_card(card, unmet))
    return 1 if args.check and unmet else 0


def add_parser(sub: Any) -> None:
    """Register ``card`` on the ``powerzoo`` sub-parser object."""
    p = sub.add_parser(
        "card",
        help="a task's card: idle, naive, rule and oracle returns, headroom, storage and prices",
        description=(
            "Print a task's card from the stored baselines table: the mean return and share of "
            "episodes over budget of its idle, naive, rule-based and oracle policies, the "
            "oracle's headroom over them, storage and price figures, and the targets the card "
            "misses. --recompute measures the task's rows again and writes them to the table."
        ),
    )
    p.add_argument("task", help="a registered task name")
    p.add_argument("--split", default="test", help="split of the table's rows (default: test)")
    p.add_argument("--json", action="store_true", help="print the card as JSON")
    p.add_argument(
        "--recompute",
        action="store_true",
        help="measure every baseline row of the task again and write them to the table first",
    )
    p.add_argument(
        "--max-episodes",
        type=int,
        default=None,
        metavar="N",
        help="with --recompute: N days evenly spread over the split (default: every day)",
    )
    p.add_argument(
        "--table",
        default=None,
        metavar="PATH",
        help="baselines JSON file to read (and write with --recompute; default: the packaged one)",
    )
    p.add_argument("--check", action="store_true", help="exit with status 1 when a target is unmet")
    add_progress_argument(p)
    p.set_defaults(func=_cmd_card)
