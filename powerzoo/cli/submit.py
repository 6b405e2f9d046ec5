"""``powerzoo submit TASK --algo ALGO``: train an algorithm (a registered one, or an SB3 algorithm
class from outside PowerZoo as ``package.module:Class``) on one task under a campaign's protocol,
then write its submission folder and score it: one command from an algorithm to a scored row."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from powerzoo.cli.common import add_progress_argument

__all__ = ["add_parser", "DEFAULT_CAMPAIGN"]

DEFAULT_CAMPAIGN = "campaigns/benchmark_v2.yaml"
"""The campaign whose protocol a submission follows unless ``--campaign`` names another
(relative to the working folder: a clone's root)."""


def _tuning_budget(text: str | None) -> Any:
    """``--tuning-budget``: a JSON object or free text (``None``: not given)."""
    if text is None:
        return None
    stripped = text.strip()
    if not stripped:
        raise ValueError("--tuning-budget is empty")
    if stripped.startswith("{"):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as err:
            raise ValueError(f"--tuning-budget: not a valid JSON object ({err})") from None
    return stripped


def _cmd_submit(args: argparse.Namespace) -> int:
    from powerzoo.benchmarks.submission_score import result_text
    from powerzoo.cli.score import baselines_line, table_line
    from powerzoo.fileio import check_output_folder
    from powerzoo.rl.campaigns.gather import pinned_campaign_files
    from powerzoo.rl.campaigns.submit import (
        run_submission,
        submission_campaign,
        tuning_budget_of,
    )

    if args.cpu_seconds is not None and not args.cpu_seconds > 0:
        raise ValueError(f"--cpu-seconds must be > 0, got {args.cpu_seconds}")
    tuning = _tuning_budget(args.tuning_budget)
    if args.tuning is not None and tuning is not None:
        raise ValueError("give --tuning or --tuning-budget, not both (--tuning states it)")
    campaign = submission_campaign(
        args.task,
        args.algo,
        campaign_file=args.campaign,
        seeds=args.seeds,
        config=args.config,
        cpu_seconds=args.cpu_seconds,
        tuning_dir=args.tuning,
    )
    if args.tuning is not None:
        tuning = tuning_budget_of(args.tuning)
    check_output_folder(args.out, "--out")  # before any trial trains
    track = campaign.trials[0].track
    allowance = (
        ""
        if track is None
        else f", {track['wall_clock_s']:g} {'CPU-' if track.get('clock') == 'cpu' else ''}s of "
        "training each plus their tests, one after another"
    )
    print(
        f"{len(campaign.trials)} trial(s) of {args.algo} on {args.task} under {args.campaign}'s "
        f"protocol{allowance}, into {Path(args.out) / 'campaign'} (finished trials are kept: "
        "run the same command again to resume)"
    )
    run = run_submission(
        campaign,
        args.out,
        tuning_budget=tuning,
        progress=args.progress,
        n_resamples=args.resamples,
    )
    done, total = run.trials
    for trial_id in run.set_aside:
        print(f"set aside (now in {run.campaign_dir / 'superseded'}): {trial_id}")
    if args.json:
        print(json.dumps(run.row, indent=2))
    else:
        print(result_text(run.row))
        with pinned_campaign_files(run.campaign_dir):
            print(baselines_line())
    print(f"{done} of {total} trial(s) finished; submission folder: {run.submission_dir}")
    print(f"score it again: powerzoo score {run.submission_dir} --campaign {run.campaign_dir}")
    if args.cpu_seconds is not None:
        print(
            f"a smoke run ({args.cpu_seconds:g} CPU-s per seed, not the track's allowance): its "
            "row is not comparable with the benchmark's (the submission's notes say so)"
        )
    if args.table is not None:
        print(table_line(args.table, run.row))
    return 0 if done == total else 1


def add_parser(sub: Any) -> None:
    """Register ``submit`` on the ``powerzoo`` sub-parser object."""
    from powerzoo.cli.score import add_row_arguments

    p = sub.add_parser(
        "submit",
        help="train an algorithm (yours as package.module:Class) on a task under the "
        "benchmark's protocol and score it",
        description=(
            "Train ALGO on TASK under a campaign file's protocol (benchmark v2's by default: its "
            "compute track, the task's budget and parallel envs, model selection on val, the "
            "test split's days and env seeds, the held-out families), one trial per seed, "
            "then write the submission folder from the trial records and score it against the "
            "baselines table the campaign folder pinned. Finished trials are kept: the same "
            "command resumes. ALGO is a registered algorithm or a Stable-Baselines3 algorithm "
            "class from outside PowerZoo, 'package.module:Class' (importable: installed or on "
            "PYTHONPATH)."
        ),
    )
    p.add_argument("task", help="a task of the campaign file")
    p.add_argument(
        "--algo",
        "--algorithm",
        required=True,
        metavar="ALGO",
        help="a registered algorithm (PPO, SAC, MAPPO, ...) or package.module:Class",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0, 1, 2, 3, 4],
        metavar="S",
        help="training seeds, one trial each (default: 0 1 2 3 4, as the benchmark)",
    )
    p.add_argument(
        "-c",
        "--config",
        default=None,
        metavar="RUN.yaml",
        help="run-config fields for the algorithm's settings, any subset (algorithm_kwargs, "
        "n_envs, evaluation, ...); the campaign's track sets the budget",
    )
    p.add_argument(
        "--tuning",
        default=None,
        metavar="DIR",
        help="a powerzoo tune --out folder of this task and algorithm: train its chosen "
        "algorithm_kwargs and state its tuning budget (tuning.json) in the submission",
    )
    p.add_argument(
        "--campaign",
        default=DEFAULT_CAMPAIGN,
        metavar="FILE.yaml",
        help=f"campaign file whose protocol to follow (default: {DEFAULT_CAMPAIGN})",
    )
    p.add_argument(
        "--cpu-seconds",
        type=float,
        default=None,
        metavar="S",
        help="a smaller CPU-time allowance than the track's, for a smoke run (the trial records "
        "and the submission's notes say it is not the standard track)",
    )
    p.add_argument(
        "--tuning-budget",
        default=None,
        metavar="TEXT|JSON",
        help='how the settings were chosen, e.g. \'{"configurations": 8, "split": "val"}\' '
        "(default: not recorded)",
    )
    p.add_argument(
        "--table", default=None, metavar="CSV", help="add the row to this results table (CSV)"
    )
    add_row_arguments(p)
    add_progress_argument(p, "progress bars")
    p.set_defaults(func=_cmd_submit)
