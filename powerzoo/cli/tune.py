"""``powerzoo tune TASK --algorithm A``: sample N settings from the published search space, train
each on the same budget, choose on the validation split (never test)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from powerzoo.cli.common import check_task_split, nonnegative_int, positive_int

__all__ = ["add_parser"]


def _episodes(text: str) -> int | None:
    if text == "all":
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer or 'all', got {text!r}"
        ) from None


def _cmd_tune(args: argparse.Namespace) -> int:
    from powerzoo.rl.campaigns.tuning import BEST_CONFIG, TUNING_CSV, tune
    from powerzoo.rl.selection import require_selection_split

    check_task_split(args.task, args.split)
    require_selection_split(args.split, "tuning")  # before anything is read or trained
    if args.track is not None and args.steps is not None:
        raise ValueError("give --track or --steps, not both: a track is its own budget")
    if args.track is not None and args.campaign is not None:
        raise ValueError("--track comes from the campaign file; leave it out")
    track = args.track if args.track is not None else ("S" if args.steps is None else None)
    record = tune(
        args.task,
        args.algorithm,
        args.configs,
        args.split,
        args.out,
        track=track
        if args.clock == "wall" or track is None
        else {"name": track, "clock": args.clock},
        steps=args.steps,
        episodes=args.episodes,
        seed=args.seed,
        sampler_seed=args.sampler_seed,
        n_envs=args.n_envs,
        config=args.config,
        space_file=args.space,
        campaign=args.campaign,
        setting=args.setting,
        preset=args.preset,
        progress=not args.json,
    )
    if args.json:
        print(json.dumps(record, indent=2, default=str))
        return 0
    best = record["best"]
    low, high = record["env_steps_range"]
    asked = record["steps_per_configuration"]
    if record["track"]:
        budget = f"track {record['track']['name']} ({record['track']['wall_clock_s']:g} s)"
    elif asked is None:
        budget = "the campaign's budget"
    elif low == high == asked:
        budget = f"{asked:,} env steps"
    else:  # rounded up to whole rollouts, differently for each configuration
        budget = f"{asked:,} env steps asked, {low:,} to {high:,} trained"
    out = args.out or f"tuning/{args.task}-{record['algorithm']}"
    print(
        f"best of {record['configurations']} configurations ({budget} each): config "
        f"{record['best_index']}, {args.split} return {best['val_return']:,.2f}"
        + (
            ""
            if best["within_budget"]
            else " (no configuration kept the budgets: the one nearest them, not the best return)"
        )
    )
    if record["preset"] is not None:
        print(
            f"the untuned preset: {args.split} return {record['preset']['val_return']:,.2f}"
            f"{'' if record['preset']['within_budget'] else ' (over budget)'}; "
            f"the best configuration is {record['gain_over_preset']:+,.2f} from it"
        )
    print(f"wrote {out}/{TUNING_CSV} and {out}/{BEST_CONFIG}")
    return 0


def _cmd_tune_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from powerzoo.rl.campaigns.tuning_report import plot_tuning, read_tuning, tuning_table

    outcomes = [read_tuning(folder) for folder in args.folders]
    table = tuning_table(outcomes)
    print(table, end="")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "tuning_report.md").write_text(table, encoding="utf-8")
        plot_tuning(outcomes, out / "tuning_report.png")
        print(f"wrote {out / 'tuning_report.md'} and {out / 'tuning_report.png'}")
    return 0


def add_parser(sub: Any) -> None:
    """Register ``tune`` and ``tune-report`` on the ``powerzoo`` sub-parser object."""
    from powerzoo.rl.campaigns.tuning import DEFAULT_CONFIGURATIONS

    p = sub.add_parser(
        "tune",
        help="tune an algorithm on the validation split with an equal budget (docs/training.md)",
        description=(
            "Sample N settings of ALGORITHM from the published search space "
            "(configs/tuning/search_spaces.yaml), train each on the same compute budget (track S: "
            "5 minutes on one core; or --steps), evaluate each on the validation split and write "
            "tuning.csv, best_config.yaml and tuning.json. Only val (or train) may be chosen "
            "on: test and the stress splits on its days are refused."
        ),
    )
    p.add_argument("task", help="registered task name")
    p.add_argument("--algorithm", "-a", required=True, help="algorithm name (powerzoo describe)")
    p.add_argument(
        "--configs",
        type=positive_int,
        default=DEFAULT_CONFIGURATIONS,
        help=f"configurations sampled (default {DEFAULT_CONFIGURATIONS}, as for every algorithm)",
    )
    p.add_argument("--split", default="val", help="selection split (default val; test refused)")
    p.add_argument(
        "--track",
        default=None,
        choices=["S", "L"],
        help="compute track of each configuration (default: S, unless --steps gives a budget)",
    )
    p.add_argument(
        "--clock",
        default="wall",
        choices=["wall", "cpu"],
        help="count the track's seconds in wall clock or in the process's CPU time (cpu: the "
        "same allowance on a machine other work also loads)",
    )
    p.add_argument(
        "--steps", type=positive_int, default=None, help="env steps per configuration (not a track)"
    )
    p.add_argument(
        "--episodes",
        type=_episodes,
        default=16,
        help="validation days per configuration, evenly spread ('all': every day; default 16)",
    )
    p.add_argument(
        "--seed", type=nonnegative_int, default=0, help="training seed of every configuration"
    )
    p.add_argument("--sampler-seed", type=nonnegative_int, default=0, help="seed of the sampler")
    p.add_argument("--n-envs", type=positive_int, default=8, help="parallel training envs")
    p.add_argument("--config", default=None, help="run config to start from (its task's)")
    p.add_argument("--space", default=None, help="search-space file (default: the published one)")
    p.add_argument(
        "--campaign",
        default=None,
        help="campaign file: train and score each configuration as it trains ALGORITHM on TASK "
        "(its track, envs and validation evaluations, its model selection)",
    )
    p.add_argument("--setting", default=None, help="the campaign's setting (when it has several)")
    p.add_argument(
        "--preset",
        action="store_true",
        help="also train the untuned base configuration, reported beside (never chosen)",
    )
    p.add_argument("--out", default=None, help="output folder (default tuning/TASK-ALGORITHM)")
    p.add_argument("--json", action="store_true", help="print tuning.json instead of a summary")
    p.set_defaults(
        func=_cmd_tune,
        interrupt_hint="run the same command again to go on: finished configurations are kept",
    )

    r = sub.add_parser(
        "tune-report",
        help="one table (and figure) of what tuning runs gained over their presets",
        description=(
            "Read the folders `powerzoo tune` wrote and print one markdown line each: the "
            "untuned preset's validation return, the best configuration's, the gain, how many "
            "configurations kept the budgets and the CPU hours; --out also writes the table and "
            "a figure of every configuration's validation return."
        ),
    )
    r.add_argument("folders", nargs="+", help="tuning folders (tuning.json inside)")
    r.add_argument("--out", default=None, help="folder for tuning_report.md and .png")
    r.set_defaults(func=_cmd_tune_report)
