"""``powerzoo campaign-score FOLDER``: the benchmark v2 results of a campaign folder (finished or
partial): every (task, algorithm/setting) scored as a submission, the family aggregates across
tasks and the page, without training or evaluating anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from powerzoo.cli.common import add_progress_argument
from powerzoo.fileio import check_output_folder

__all__ = ["add_parser"]


def _cmd_campaign_score(args: argparse.Namespace) -> int:
    from powerzoo.rl.campaigns.page import read_diagnoses
    from powerzoo.rl.campaigns.score_page import write_campaign_scores
    from powerzoo.rl.campaigns.score_readme import check_readme, update_readme

    folder = Path(args.folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder (pass a `powerzoo campaign` --out)")
    if args.resamples < 1:
        raise ValueError(f"--resamples must be >= 1, got {args.resamples}")
    out = args.out or str(folder / "v2")
    check_output_folder(out, "--out")  # before anything is scored
    spec = folder / "campaign.json"
    if args.readme is not None and spec.is_file():  # checked before anything is scored
        check_readme(args.readme, str(json.loads(spec.read_text(encoding="utf-8")).get("name")))
    diagnoses = read_diagnoses(args.diagnoses) if args.diagnoses else None
    if args.families_dir is not None and not Path(args.families_dir).is_dir():
        raise FileNotFoundError(
            f"{args.families_dir}: no such folder (--families-dir: a folder of `powerzoo "
            "families` outputs)"
        )
    command = f"powerzoo campaign-score {args.folder} --out {out}"
    if args.diagnoses:
        command += f" --diagnoses {args.diagnoses}"
    if args.families_dir:
        command += f" --families-dir {args.families_dir}"
    scored = write_campaign_scores(
        folder,
        out,
        diagnoses=diagnoses,
        families_dir=args.families_dir,
        n_resamples=args.resamples,
        progress=args.progress,
        command=command,
    )
    cov = scored.coverage
    files = scored.files
    print(f"results page: {files['page']}")
    print(f"one row per task and algorithm/setting (CSV): {files['results_csv']}")
    print(f"family aggregates (CSV): {files['aggregates_csv']}")
    trained = sum(1 for r in scored.family_rows if r["source"] == "trained")
    print(
        f"held-out families (CSV): {files['families_csv']} ({trained} trained row(s), "
        f"{len(scored.family_rows) - trained} baseline row(s)"
        + ("" if args.families_dir else "; no --families-dir: no baseline rows")
        + ")"
    )
    if files["profiles"] is not None:
        print(f"plot: {files['profiles']}")
    if args.readme is not None:
        summary = files["summary"].read_text(encoding="utf-8")
        path = update_readme(args.readme, scored.folder.campaign.name, cov, summary)
        print(f"coverage and summary blocks rewritten: {path}")
    print(f"submission folders (powerzoo score each): {files['submissions']}")
    print(
        f"{len(scored.rows)} row(s) from {cov['finished']} of {cov['planned']} trial(s) "
        f"finished; {cov['core_hours']:.3g} core-hours spent"
        + (
            ""
            if cov["projected_core_hours"] is None
            else f", {cov['projected_core_hours']:.3g} projected for the whole campaign"
        )
        + (f"; {len(cov['left_out'])} left out, listed on the page" if cov["left_out"] else "")
    )
    return 0


def add_parser(sub: Any) -> None:
    """Register ``campaign-score`` on the ``powerzoo`` sub-parser object."""
    from powerzoo.benchmarks.stats import BOOTSTRAP_RESAMPLES

    p = sub.add_parser(
        "campaign-score",
        help="benchmark v2 results of a campaign folder: rows, family aggregates and the page",
        description=(
            "Score every (task, algorithm/setting) of a `powerzoo campaign` output folder with a "
            "finished trial as a submission (written under OUT/submissions/, so `powerzoo score` "
            "reproduces each row), aggregate the families of learners across the tasks with "
            "learnable headroom (IQM, mean, median, optimality gap, probability of "
            "improvement, performance profiles), measure each row's drop on the held-out "
            "scenario families its trials were tested on, and write results_v2.csv, "
            "aggregates_v2.csv, families_v2.csv, performance_profiles.png and the page "
            "results_v2.md. Reads the finished trials' "
            "records; trains and evaluates nothing, so it works while the campaign still runs."
        ),
    )
    p.add_argument(
        "folder", metavar="FOLDER", help="the campaign's --out folder (its records are only read)"
    )
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default: FOLDER/v2)")
    p.add_argument(
        "--diagnoses",
        default=None,
        metavar="FILE.yaml",
        help="task: text mapping of measured reasons why no row of a task is above its anchor "
        "(printed in the claims and in the task's section)",
    )
    p.add_argument(
        "--families-dir",
        default=None,
        metavar="DIR",
        help="folder of `powerzoo families` outputs, one per task (DIR/<task>/ as written by "
        "`powerzoo families TASK --out DIR/TASK`, or DIR itself for one task): the rule's and "
        "oracle's drop on each family beside the trained rows",
    )
    p.add_argument(
        "--resamples",
        type=int,
        default=BOOTSTRAP_RESAMPLES,
        metavar="N",
        help=f"bootstrap resamples of every interval (default: {BOOTSTRAP_RESAMPLES})",
    )
    p.add_argument(
        "--readme",
        default=None,
        metavar="FILE.md",
        help="also rewrite the campaign's coverage sentence and summary table in this Markdown "
        "file, between its marker lines (<!-- campaign-score NAME coverage:start --> ... :end "
        "-->, and the same for summary); a file without them is refused",
    )
    add_progress_argument(p, "progress bar over the (task, algorithm/setting) rows")
    p.set_defaults(func=_cmd_campaign_score)
