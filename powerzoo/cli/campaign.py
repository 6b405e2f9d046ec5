"""``powerzoo campaign``: train and evaluate tasks x
algorithms x settings x seeds from a campaign file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from powerzoo.cli.common import add_progress_argument, print_tables
from powerzoo.fileio import check_output_folder

__all__ = ["add_parser"]


def _cmd_campaign(args: argparse.Namespace) -> int:
    from powerzoo.rl.campaigns import load_campaign

    campaign = load_campaign(args.campaign)
    out = args.out or f"results/campaign-{campaign.name}"
    check_output_folder(out, "--out")  # before any trial trains
    if args.backend == "local":
        if args.address is not None:
            raise ValueError("--address is for --backend ray")
        from powerzoo.rl.campaigns import run_local

        outcome = run_local(
            campaign, out, progress=args.progress, update=args.update, rerun=args.rerun
        )
    else:
        try:
            from powerzoo.integrations.tune import require_tune, run_ray

            require_tune()
        except ImportError as err:
            print(f"powerzoo: error: {err}", file=sys.stderr)
            return 2
        outcome = run_ray(
            campaign,
            out,
            address=args.address,
            progress=args.progress,
            update=args.update,
            rerun=args.rerun,
        )
    result = outcome.result
    print_tables(
        result,
        (
            ("results_csv", "summary (CSV)"),
            ("results_md", "summary (Markdown)"),
            ("trials_csv", "one row per trial (CSV)"),
            ("episodes_csv", "episodes (CSV)"),
        ),
        f"{len(outcome.trials)} of {len(campaign.trials)} trial(s) finished "
        f"({args.backend} backend); trial folders in {result.out_dir / 'trials'}",
    )
    return 0 if not outcome.failed else 1


def _cmd_campaign_report(args: argparse.Namespace) -> int:
    from powerzoo.rl.campaigns.page import write_results_page

    out = args.out or f"{args.folder.rstrip('/')}/report"
    check_output_folder(out, "--out")  # before the campaign folder is read
    from powerzoo.rl.campaigns.page import read_diagnoses

    diagnoses = read_diagnoses(args.diagnoses) if args.diagnoses else None
    preface = _read_preface(args.preface) if args.preface else None
    page = write_results_page(
        args.folder, out, plots=args.plots, diagnoses=diagnoses, preface=preface
    )
    folder = page.folder
    print(f"results page: {page.index}")
    print(f"summary (Markdown, one row per task): {page.summary}")
    for path in page.plots:
        print(f"plot: {path}")
    print(
        f"{len(folder.records)} of {len(folder.campaign.trials)} trial(s) finished"
        + (f"; {len(folder.missing)} missing, listed on the page" if folder.missing else "")
    )
    return 0


def _read_preface(path: str) -> str:
    """The text of the ``--preface`` Markdown file (an unreadable one is the CLI's one-line
    error; an empty one is refused)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"--preface: no such Markdown file: {path}")
    with open(path, encoding="utf-8") as file:
        text = file.read()
    if not text.strip():
        raise ValueError(f"--preface {path} is empty")
    return text


def add_parser(sub: Any) -> None:
    """Register ``campaign`` and ``campaign-report`` on the ``powerzoo`` sub-parser object."""
    p = sub.add_parser(
        "campaign-report",
        help="results page of a campaign folder (finished or partial), without running anything",
        description=(
            "Write the results page of a `powerzoo campaign` output folder: index.md (summary, "
            "compute time, per task a table, a return-against-cost plot and learning curves, "
            "missing trials), summary.md (one row per task), results.csv and the PNGs. Reads the "
            "finished trials' records and the packaged baselines table; trains and evaluates "
            "nothing, so it works while the campaign still runs."
        ),
    )
    p.add_argument("folder", metavar="DIR", help="the campaign's --out folder")
    p.add_argument("--out", default=None, metavar="DIR", help="page folder (default: DIR/report)")
    p.add_argument(
        "--diagnoses",
        default=None,
        metavar="FILE.yaml",
        help=(
            "task: text mapping of measured reasons why no trained row reaches the rule within "
            "the budgets (printed under the summary and in each task's section)"
        ),
    )
    p.add_argument(
        "--preface",
        default=None,
        metavar="FILE.md",
        help="Markdown printed under the page's title (e.g. that the tasks changed since)",
    )
    p.add_argument(
        "--plots",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write the PNGs (default: on)",
    )
    p.set_defaults(func=_cmd_campaign_report)
    p = sub.add_parser(
        "campaign",
        help="train tasks x algorithms x settings x seeds (local or Ray Tune); tables as `bench`",
        description=(
            "Train every (task, algorithm, setting, seed) trial of a campaign file, evaluate each "
            "on the test split with the baselines, and write the tables and plots of "
            "`powerzoo bench` (results.csv: one row per algorithm/setting, trials.csv: one per "
            "trial). Running it again into the same --out folder resumes: finished trials are "
            "skipped; a finished trial whose task now names other held-out families is given "
            "them from its saved model, not trained again."
        ),
    )
    p.add_argument(
        "campaign", metavar="CAMPAIGN.yaml", help="campaign file (see campaigns/smoke.yaml)"
    )
    p.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="local: trials one after another in this process; ray: Ray Tune trials (pip install "
        '"powerzoo[ray]")',
    )
    p.add_argument(
        "--address",
        default=None,
        metavar="ADDR",
        help=(
            "Ray cluster to join (ray.init(address=ADDR), e.g. auto or HOST:6379); "
            "default: a local Ray"
        ),
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output folder (default: results/campaign-<name>)",
    )
    p.add_argument(
        "--update",
        action="store_true",
        help=(
            "the campaign file changed since --out was started (a task or algorithm added, a "
            "preset or evaluation.episodes edited): keep the finished trials whose config and "
            "evaluation protocol are unchanged, move the others' records to DIR/superseded/ and "
            "run the changed and new trials"
        ),
    )
    p.add_argument(
        "--rerun",
        nargs="+",
        default=(),
        metavar="TRIAL_ID",
        help=(
            "run these trials again from scratch (e.g. battery_arbitrage-PPO-objective-seed0): "
            "their earlier records move to DIR/superseded/<id>-<config hash>-rerun/ and the Ray "
            "experiment to DIR/superseded/ray-<n>; the other finished trials are kept"
        ),
    )
    add_progress_argument(p, "progress bar / Tune status")
    p.set_defaults(func=_cmd_campaign)
