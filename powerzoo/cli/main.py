"""The ``powerzoo`` command: list and describe tasks,
demo, collect datasets, train / eval / resume agents."""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import warnings
from typing import Any

from powerzoo.benchmarks.policies import BASELINE_POLICIES
from powerzoo.cli.common import add_progress_argument, nonnegative_int, positive_int
from powerzoo.fileio import DiskFullError, check_output_file, os_error_line

__all__ = ["main"]


def _cmd_list(args: argparse.Namespace) -> int:
    from powerzoo.tasks import list_tasks, task_spec

    for name in list_tasks():
        spec = task_spec(name)
        print(
            f"{name:<22} {spec.agent_mode:<6} {spec.horizon:>4} "
            f"x {spec.step_minutes:>2} min  {spec.description}"
        )
    return 0


def _cmd_describe(args: argparse.Namespace) -> int:
    from powerzoo.benchmarks.catalog import info
    from powerzoo.benchmarks.task_pages import render_text
    from powerzoo.rl.algorithms import algorithms_for
    from powerzoo.tasks import task_spec

    algorithms = list(algorithms_for(task_spec(args.task)))
    if args.json:
        print(json.dumps({**info(args.task), "algorithms": algorithms}, indent=2))
    else:
        print(render_text(args.task))
        print(
            f"algorithms: {', '.join(algorithms)} (powerzoo train {args.task} --algo NAME), or "
            "your own SB3 algorithm class as package.module:Class (powerzoo submit scores it)"
        )
    return 0


def _cmd_docs_pages(args: argparse.Namespace) -> int:
    import time

    from powerzoo.benchmarks.task_pages import write_pages

    started = time.perf_counter()
    seconds = write_pages(
        args.out,
        args.tasks or None,
        figures=not args.no_figures,
        reuse_figures=args.keep_figures,
    )
    for name, spent in seconds.items():
        print(f"{name:<24} {spent:6.2f} s")
    print(
        f"wrote {len(seconds)} task page(s) and index.md to {args.out} "
        f"in {time.perf_counter() - started:.1f} s"
    )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from powerzoo.cli.demo import run_demo

    if args.timesteps < 0:
        raise ValueError(f"--timesteps must be >= 0, got {args.timesteps}")
    run_demo(
        out_dir=args.out,
        episodes=args.episodes,
        plot_day=args.day,
        timesteps=args.timesteps,
        seed=args.seed,
    )
    return 0


COLLECT_POLICIES = BASELINE_POLICIES
VECTOR_ENVS_FOR_RANDOM = 64  # default --num-envs of the random policy on single-agent tasks


def _cmd_collect(args: argparse.Namespace) -> int:
    import os
    import time

    from powerzoo.benchmarks.offline import DatasetGenerator
    from powerzoo.benchmarks.policies import make_baseline_policy
    from powerzoo.envs.make import make_env
    from powerzoo.tasks import task_spec

    check_output_file(args.output, "-o/--output")  # before any episode is collected
    single_agent = task_spec(args.task).agent_mode == "single"
    num_envs = args.num_envs
    if num_envs is None:
        num_envs = VECTOR_ENVS_FOR_RANDOM if args.policy == "random" and single_agent else 1
    if num_envs < 1:
        raise ValueError(f"--num-envs must be >= 1, got {num_envs}")
    if num_envs > 1 and (args.policy != "random" or not single_agent):
        raise ValueError(
            f"--num-envs {num_envs} needs --policy random on a single-agent task "
            f"(--policy {args.policy} acts on one env); use --num-envs 1"
        )
    env = make_env(args.task, args.split, num_envs=num_envs if num_envs > 1 else None)
    try:
        policy = make_baseline_policy(args.policy, env, seed=None)  # the collection seeds it
    except TypeError as err:  # the task policies need a single-agent Gymnasium env
        raise ValueError(
            f"--policy {args.policy} is not available for {args.task}: {err}"
        ) from None
    generator = DatasetGenerator(
        env, **({} if args.info_keys is None else {"info_keys": args.info_keys})
    )
    started = time.perf_counter()
    dataset = generator.collect(
        policy, args.episodes, args.output, seed=args.seed, progress=args.progress
    )
    seconds = time.perf_counter() - started
    size_mb = os.path.getsize(args.output) / 1e6
    print(
        f"{args.task} ({args.split}), {args.policy} policy, {num_envs} env(s): "
        f"{dataset.n_episodes} episodes, {dataset.n_steps:,} transitions in {seconds:.2f} s "
        f"({dataset.n_steps / seconds:,.0f} transitions/s); "
        f"mean return {dataset.attrs['mean_return']:,.2f}"
    )
    print(
        f"wrote {args.output} ({size_mb:.2f} MB, "
        f"{size_mb * 1e6 / dataset.n_steps:.1f} bytes/transition)"
    )
    dataset.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of the ``powerzoo`` command."""
    parser = argparse.ArgumentParser(
        prog="powerzoo", description="Reinforcement-learning tasks on power systems."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list registered tasks")
    p.set_defaults(func=_cmd_list)
    p = sub.add_parser("describe", help="describe a task: the sections of its documentation page")
    p.add_argument("task")
    p.add_argument("--json", action="store_true", help="print the JSON-ready info dict")
    p.set_defaults(func=_cmd_describe)
    p = sub.add_parser(
        "docs-pages",
        help="write one Markdown page per task (with a figure of a test day) and an index",
    )
    p.add_argument("--out", default="docs/tasks", help="output folder (default: docs/tasks)")
    p.add_argument("--tasks", nargs="*", help="tasks to write (default: every registered task)")
    figures = p.add_mutually_exclusive_group()
    figures.add_argument("--no-figures", action="store_true", help="skip the figures (faster)")
    figures.add_argument(
        "--keep-figures",
        action="store_true",
        help="keep the figures already in the folder and draw only missing ones (fast; the "
        "pages still link them)",
    )
    p.set_defaults(func=_cmd_docs_pages)
    from powerzoo.cli.demo import DEMO_TIMESTEPS

    p = sub.add_parser(
        "demo", help="train PPO on battery_arbitrage; compare with the baselines on the test split"
    )
    p.add_argument(
        "--out", default="results/demo", help="output folder for the plot (default: results/demo)"
    )
    p.add_argument(
        "--episodes",
        type=positive_int,
        default=None,
        help="number of test days, spread over the split as bench and eval pick them "
        "(default: all)",
    )
    p.add_argument("--day", type=nonnegative_int, default=0, help="test day to plot (default: 0)")
    p.add_argument(
        "--timesteps",
        type=int,
        default=DEMO_TIMESTEPS,
        help=f"PPO training budget in env steps, 0 to skip training (default: {DEMO_TIMESTEPS})",
    )
    p.add_argument("--seed", type=nonnegative_int, default=0, help="training seed (default: 0)")
    p.set_defaults(func=_cmd_demo)
    p = sub.add_parser(
        "collect", help="collect an offline RL dataset (HDF5) with a baseline policy"
    )
    p.add_argument("task")
    p.add_argument(
        "--policy",
        choices=COLLECT_POLICIES,
        default="random",
        help="policy to roll out (default: random)",
    )
    p.add_argument(
        "--episodes", type=positive_int, default=100, help="number of episodes (default: 100)"
    )
    p.add_argument(
        "-o", "--output", required=True, help="HDF5 file to write (replaced atomically when done)"
    )
    p.add_argument("--split", default="train", help="data split (default: train)")
    p.add_argument(
        "--seed", type=nonnegative_int, default=0, help="seed of the collection (default: 0)"
    )
    p.add_argument(
        "--num-envs",
        type=int,
        default=None,
        help=(
            "episodes stepped at once in a native vector env "
            f"(default: {VECTOR_ENVS_FOR_RANDOM} for the random policy on single-agent tasks, "
            "else 1)"
        ),
    )
    p.add_argument(
        "--info-keys",
        nargs="*",
        default=None,
        help="step-info keys stored under infos/ (default: constraint_costs cost_sum is_safe)",
    )
    add_progress_argument(p, "progress bar over the episodes")
    p.set_defaults(func=_cmd_collect)
    from powerzoo.cli.train import add_parsers

    add_parsers(sub)
    from powerzoo.cli.bench import add_parser

    add_parser(sub)
    from powerzoo.cli.campaign import add_parser as add_campaign_parser

    add_campaign_parser(sub)
    from powerzoo.cli.card import add_parser as add_card_parser

    add_card_parser(sub)
    from powerzoo.cli.score import add_parser as add_score_parser

    add_score_parser(sub)
    from powerzoo.cli.submit import add_parser as add_submit_parser

    add_submit_parser(sub)
    from powerzoo.cli.campaign_score import add_parser as add_campaign_score_parser

    add_campaign_score_parser(sub)
    from powerzoo.cli.families import add_parser as add_families_parser
    from powerzoo.cli.tune import add_parser as add_tune_parser

    add_tune_parser(sub)
    add_families_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``powerzoo`` console script."""
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            code = args.func(args)
            sys.stdout.flush()  # inside the handlers: a closed pipe is caught here, not at exit
            return code
        except (ValueError, FileNotFoundError, FileExistsError, DiskFullError) as err:
            print(f"powerzoo: error: {err}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # the reader went away (`powerzoo describe TASK | head`)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes at exit
            return 1
        except (PermissionError, NotADirectoryError, IsADirectoryError) as err:
            print(f"powerzoo: error: {os_error_line(err)}", file=sys.stderr)
            return 2
        except OSError as err:
            if err.errno != errno.EROFS:
                raise
            print(f"powerzoo: error: {os_error_line(err)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            hint = getattr(args, "interrupt_hint", None)
            print(
                f"powerzoo: interrupted ({args.command}){f'; {hint}' if hint else ''}",
                file=sys.stderr,
            )
            return 130


def _show_warning(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
    """One line per warning on stderr (no source line): ``powerzoo: warning: <message>``."""
    print(f"powerzoo: warning: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
