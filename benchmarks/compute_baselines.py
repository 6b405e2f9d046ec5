"""Compute the baseline table ``powerzoo/benchmarks/baselines.json`` (random, rule-based, oracle,
naive and, where a task defines one, idle).

Usage::

    python benchmarks/compute_baselines.py                      # every task, every test day
    python benchmarks/compute_baselines.py --tasks opf_118_7d --max-episodes 20
    python benchmarks/compute_baselines.py --max-episodes 77 opf_118_7d=20
    python benchmarks/compute_baselines.py --policies idle      # only the idle rows
    python benchmarks/compute_baselines.py --policies naive     # only the naive rows

Rows computed replace those with the same (task, split, policy) in the output file, in place;
other rows are kept as they are (``--fresh`` starts an empty table), and a new row goes after the
last row of its task. With ``--policies``, a task that already has rows on the split in the
output file is evaluated on their days (and must use their seed), so the new rows score against
the old ones. The command is appended to the table's ``generated_by``. The file is written
atomically. See :mod:`powerzoo.benchmarks.baselines` for the protocol and the schema.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.baselines import BASELINES_FILE, compute_baselines
from powerzoo.benchmarks.table_writing import (
    merge_rows,  # noqa: F401  (re-exported: the script's former home of these helpers)
    table_days,
    write_table,
)


def parse_max_episodes(values: list[str] | None) -> int | dict[str, int] | None:
    """``["20"]`` -> 20; ``["77", "opf_118_7d=20"]`` ->
    ``{task: n}`` (the bare number is the default)."""
    if not values:
        return None
    default: int | None = None
    per_task: dict[str, int] = {}
    for value in values:
        name, sep, number = value.rpartition("=")
        if sep:
            per_task[name] = int(number)
        else:
            default = int(number)
    if not per_task:
        return default
    from powerzoo.tasks import list_tasks

    return {
        t: per_task.get(t, default) for t in list_tasks() if per_task.get(t, default) is not None
    }


def format_table(rows: list[dict[str, Any]]) -> str:
    """Plain-text table: task, policy, episodes, mean / std / IQM return, mean cost sum, seconds."""
    header = (
        f"{'task':<18} {'policy':<11} {'episodes':>8} {'mean return':>16} {'std':>13} "
        f"{'iqm':>16} {'costs/ep':>11} {'s':>7}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        cost = sum(r["mean_costs"].values())
        lines.append(
            f"{r['task']:<18} {r['policy']:<11} {r['episodes']:>8d} {r['mean']:>16,.2f} "
            f"{r['std']:>13,.2f} {r['iqm']:>16,.2f} {cost:>11.4g} {r['seconds']:>7.1f}"
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Compute PowerZoo's baseline table (baselines.json)."
    )
    parser.add_argument(
        "--tasks", nargs="+", default=None, help="task names (default: every registered task)"
    )
    parser.add_argument("--split", default="test", help="split to evaluate (default: test)")
    parser.add_argument(
        "--seed", type=int, default=0, help="reset seeds seed + i and the random policy's seed"
    )
    parser.add_argument(
        "--max-episodes",
        nargs="+",
        default=None,
        metavar="N|TASK=N",
        help=(
            "episodes per task (default: every split day); "
            "TASK=N sets one task, a bare N the others"
        ),
    )
    parser.add_argument(
        "--policies",
        nargs="+",
        default=None,
        metavar="POLICY",
        help=(
            "only these baselines, e.g. idle (default: every baseline of each task); other rows "
            "of the output are kept, and tasks with rows there are evaluated on their days"
        ),
    )
    parser.add_argument(
        "--output", type=Path, default=BASELINES_FILE, help=f"JSON file (default: {BASELINES_FILE})"
    )
    parser.add_argument(
        "--fresh", action="store_true", help="do not keep rows of other tasks from --output"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    table = (
        {}
        if args.fresh or not args.output.is_file()
        else json.loads(args.output.read_text(encoding="utf-8"))
    )
    old = table.get("results", [])
    try:
        days = table_days(old, args.tasks, args.split, args.seed) if args.policies else None
        started = time.perf_counter()
        rows = compute_baselines(
            args.tasks,
            args.split,
            args.seed,
            parse_max_episodes(args.max_episodes),
            policies=args.policies,
            day_ids=days,
        )
    except ValueError as err:
        print(f"compute_baselines: {err}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - started
    command = "python benchmarks/compute_baselines.py " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    write_table(args.output, rows, command, fresh=args.fresh)
    print(format_table(rows))
    print(f"wrote {args.output} ({len(rows)} rows computed in {seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
