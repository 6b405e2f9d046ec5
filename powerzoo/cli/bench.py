"""``powerzoo bench``: a benchmark campaign (baselines and
trained runs x tasks x seeds) from the command line."""

from __future__ import annotations

import argparse
from typing import Any

from powerzoo.benchmarks.policies import BASELINE_POLICIES  # light: no torch, no task data
from powerzoo.cli.common import (
    add_model_argument,
    add_progress_argument,
    add_split_and_episodes,
    add_trust_pickle_argument,
    nonnegative_int,
    print_tables,
)
from powerzoo.fileio import check_output_folder

__all__ = ["add_parser"]


def _cmd_bench(args: argparse.Namespace) -> int:
    from powerzoo.benchmarks.campaign import run_campaign
    from powerzoo.cli.runs import run_entry

    check_output_folder(args.out, "--out")  # before anything is evaluated
    if not args.policies and not args.runs:
        raise ValueError(
            "--policies names no policy and --runs no run folder: name at least one, or leave "
            "--policies out for every baseline"
        )
    runs = (  # loaded after checks
        run_entry(run_dir, args.run_model, trust_pickle=args.trust_pickle) for run_dir in args.runs
    )
    result = run_campaign(
        args.tasks,
        args.policies,
        args.seeds,
        args.split,
        args.episodes,  # options named as run_campaign's parameters
        extra_policies=runs,
        out_dir=args.out,
        progress=args.progress,
        plots=not args.no_plots,
    )
    print_tables(
        result,
        (
            ("results_csv", "summary (CSV)"),
            ("results_md", "summary (Markdown)"),
            ("episodes_csv", "episodes (CSV)"),
        ),
        f"{len(result.episodes)} episodes in {result.wall_seconds:.1f} s",
    )
    return 0


def add_parser(sub: Any) -> None:
    """Register ``bench`` on the ``powerzoo`` sub-parser object."""
    p = sub.add_parser(
        "bench",
        help=(
            "benchmark campaign: baselines (and trained runs) x tasks x seeds; CSV, Markdown, plots"
        ),
        description=(
            "Evaluate baseline policies (and trained run folders) on tasks x seeds, with bootstrap "
            "95% confidence intervals; writes results.csv, results.md, episodes.csv and plots."
        ),
    )
    p.add_argument("tasks", nargs="+", metavar="TASK", help="registered task names, or 'all'")
    p.add_argument(
        "--policies",
        nargs="*",
        default=list(BASELINE_POLICIES),
        metavar="POLICY",
        help=f"baselines among {', '.join(BASELINE_POLICIES)} (default: all; one a task "
        "does not define, such as idle on a dispatch task, is skipped with a note)",
    )
    p.add_argument(
        "--seeds",
        nargs="+",
        type=nonnegative_int,
        default=[0],
        metavar="SEED",
        help="campaign seeds (default: 0)",
    )
    add_split_and_episodes(p, "days per seed, spread evenly over the split (default: every day)")
    p.add_argument(
        "--runs",
        nargs="+",
        default=[],
        metavar="RUN_DIR",
        help="trained run folders (powerzoo train) to evaluate on their own task",
    )
    add_model_argument(p, "--run-model", "model of each run folder (default: best, else final)")
    add_trust_pickle_argument(p)
    p.add_argument("--out", default="results/bench", help="output folder (default: results/bench)")
    p.add_argument("--no-plots", action="store_true", help="write the tables only")
    add_progress_argument(p)
    p.set_defaults(func=_cmd_bench)
