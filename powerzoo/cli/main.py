"""The ``powerzoo`` command: list and describe tasks, run the demo."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["main"]


def _cmd_list(args: argparse.Namespace) -> int:
    from powerzoo.tasks import list_tasks, task_spec

    for name in list_tasks():
        spec = task_spec(name)
        print(f"{name:<22} {spec.agent_mode:<6} {spec.horizon:>4} x {spec.step_minutes:>2} min  {spec.description}")
    return 0


def _cmd_describe(args: argparse.Namespace) -> int:
    from powerzoo.tasks import describe, info

    print(json.dumps(info(args.task), indent=2) if args.json else describe(args.task))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from powerzoo.cli.demo import run_demo

    run_demo(out_dir=args.out, episodes=args.episodes, plot_day=args.day, progress=sys.stderr.isatty())
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of the ``powerzoo`` command."""
    parser = argparse.ArgumentParser(prog="powerzoo", description="Reinforcement-learning tasks on power systems.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list registered tasks")
    p.set_defaults(func=_cmd_list)
    p = sub.add_parser("describe", help="describe a task: spaces, reward, costs, splits, baselines")
    p.add_argument("task")
    p.add_argument("--json", action="store_true", help="print the JSON-ready info dict")
    p.set_defaults(func=_cmd_describe)
    p = sub.add_parser("demo", help="baselines on battery_arbitrage's test split, table and plot")
    p.add_argument("--out", default="results/demo", help="output folder for the plot (default: results/demo)")
    p.add_argument("--episodes", type=int, default=None, help="number of test days (default: all)")
    p.add_argument("--day", type=int, default=0, help="test day to plot (default: 0)")
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``powerzoo`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"powerzoo: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
