"""``powerzoo families TASK``: the rule's and the oracle's return on the test split and on each
held-out scenario family, and their drop; ``--episode-counts`` lists the tasks whose baselines
hold too few test episodes."""

from __future__ import annotations

import argparse
from typing import Any

from powerzoo.cli.common import nonnegative_int, positive_int
from powerzoo.fileio import check_output_folder

__all__ = ["add_parser"]


def _counts(minimum: int, task: str | None) -> int:
    from powerzoo.benchmarks.families import count_test_episodes

    rows = count_test_episodes(minimum)
    if task is not None:
        rows = [r for r in rows if r["task"] == task]
        if not rows:
            raise ValueError(f"{task}: no test rows in the baselines table")
    print(f"{'task':<22} {'episodes':>8} {'test days':>9} {'s / episode (all baselines)':>28}")
    for r in rows:
        flag = f"  short: {minimum} episodes ~ {r['seconds_for_min']:,.0f} s" if r["short"] else ""
        print(
            f"{r['task']:<22} {r['episodes']:>8} {r['test_days']:>9} "
            f"{sum(r['per_episode_s'].values()):>28.2f}{flag}"
        )
    short = [r["task"] for r in rows if r["short"]]
    print(f"{len(short)} task(s) below {minimum} test episodes: {', '.join(short) or 'none'}")
    return 0


def _cmd_families(args: argparse.Namespace) -> int:
    from powerzoo.benchmarks.families import evaluate_families, write_families

    if args.episode_counts:
        return _counts(args.min_episodes, args.task)
    if args.task is None:
        raise ValueError("give a TASK (or --episode-counts)")
    out = args.out or f"results/families/{args.task}"
    check_output_folder(out, "--out")  # before anything is evaluated
    result = evaluate_families(
        args.task,
        args.policies,
        args.families or None,
        args.episodes,
        args.seed,
        progress=None,
        protocol_days=args.protocol_days,
    )
    files = write_families(result, out)
    print(files["md"].read_text(encoding="utf-8"), end="")
    print(f"wrote {', '.join(str(p) for p in files.values())}")
    return 0


def add_parser(sub: Any) -> None:
    """Register ``families`` on the ``powerzoo`` sub-parser object."""
    from powerzoo.benchmarks.families import FAMILY_POLICIES, MIN_TEST_EPISODES

    p = sub.add_parser(
        "families",
        help="baselines on the test split and on each held-out scenario family, with their drop",
        description=(
            "Run the rule and the oracle (or --policies) on the test split and on each of the "
            "task's scenario families (its stress splits), paired by calendar day and env seed, "
            "and write families.csv, families.md and family_episodes.csv."
        ),
    )
    p.add_argument("task", nargs="?", default=None, help="registered task name")
    p.add_argument("--policies", nargs="+", default=list(FAMILY_POLICIES), help="baselines")
    p.add_argument("--families", nargs="+", default=None, help="families (default: every one)")
    p.add_argument(
        "--episodes", type=positive_int, default=None, help="days per split, evenly spread"
    )
    p.add_argument("--seed", type=nonnegative_int, default=0, help="env seed of test day 0")
    p.add_argument(
        "--protocol-days",
        action="store_true",
        help="only the baselines table's test days and the family days on them (the days a "
        "campaign with env_seeds: protocol tests its trials on)",
    )
    p.add_argument("--out", default=None, help="output folder (default results/families/TASK)")
    p.add_argument(
        "--episode-counts",
        action="store_true",
        help="list each task's (or TASK's) test episodes in the baselines table and the ones "
        f"short of --min-episodes (default {MIN_TEST_EPISODES})",
    )
    p.add_argument("--min-episodes", type=positive_int, default=MIN_TEST_EPISODES)
    p.set_defaults(func=_cmd_families)
