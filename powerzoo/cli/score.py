"""``powerzoo score FOLDER``: check a submission folder, re-derive every number of it and print
its row (``--table`` adds it to a results table); ``--from-trial`` first writes the folder from
the trial records of a PowerZoo campaign."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser"]


def _cmd_score(args: argparse.Namespace) -> int:
    from powerzoo.benchmarks.submission import read_submission
    from powerzoo.benchmarks.submission_score import result_text, score_submission
    from powerzoo.benchmarks.trial_submission import submission_from_trials

    folder = Path(args.folder)
    if args.resamples < 1:
        raise ValueError(f"--resamples must be >= 1, got {args.resamples}")
    if args.from_trial:
        if folder.exists() and any(folder.iterdir()):
            raise FileExistsError(f"{folder} is not empty; --from-trial writes a new folder")
        submission_from_trials(args.from_trial, folder)
        print(f"wrote the submission folder {folder} from {len(args.from_trial)} trial(s)")
    unpinned = ""
    with contextlib.ExitStack() as stack:
        if args.campaign is not None:
            from powerzoo.rl.campaigns.gather import BASELINE_TABLE_FILE, pinned_campaign_files
            from powerzoo.rl.campaigns.local import CAMPAIGN_FILE

            campaign = Path(args.campaign)
            if not campaign.is_dir():
                raise FileNotFoundError(f"--campaign {args.campaign}: no such folder")
            if not (campaign / CAMPAIGN_FILE).is_file():
                raise FileNotFoundError(
                    f"--campaign {args.campaign}: not a campaign folder (no {CAMPAIGN_FILE})"
                )
            if not (campaign / BASELINE_TABLE_FILE).is_file():
                unpinned = f"; {args.campaign} has pinned no table yet (it pins one when gathered)"
            stack.enter_context(pinned_campaign_files(campaign))
        row = score_submission(read_submission(folder), n_resamples=args.resamples)
        table = baselines_line() + unpinned
    note = system_return_note(row)
    if note:
        print(note, file=sys.stderr)
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        print(result_text(row))
        print(table)
    if args.table is not None:
        print(table_line(args.table, row))
    return 0


IMPLAUSIBLE_PERFORMANCE = 10.0
"""A performance this many anchor-to-oracle distances from the anchor prompts the note of
:func:`system_return_note`."""


def system_return_note(row: dict[str, Any]) -> str:
    """A note for a shared-reward multi-agent task whose performance lies more than
    :data:`IMPLAUSIBLE_PERFORMANCE` anchor-to-oracle distances away (``""`` otherwise): summing
    the shared reward over the agents, a likely slip of a loop of one's own, multiplies the
    return by the number of agents, which the folder's format cannot tell from a real return."""
    from powerzoo.tasks import task_spec

    performance = row.get("performance")
    if row.get("scale") != "oracle" or performance is None or not math.isfinite(performance):
        return ""
    if abs(performance) <= IMPLAUSIBLE_PERFORMANCE:
        return ""
    try:
        spec = task_spec(row["task"])
    except (KeyError, ValueError):
        return ""
    if len(spec.agents) < 2 or not spec.shared_reward:
        return ""
    return (
        f"powerzoo: note: performance {performance:.4g} is over {IMPLAUSIBLE_PERFORMANCE:g} "
        f"anchor-to-oracle distances from the anchor; {row['task']}'s {len(spec.agents)} agents "
        "share one reward, so its system return is one agent's return, not their sum "
        "(docs/submission.md)"
    )


def baselines_line() -> str:
    """Which baselines table the scores read (call it where they are read): the packaged one,
    or a campaign folder's pinned copy, said to differ from the packaged one when it does (its
    rule and oracle returns are then those of the day the campaign ran, not today's)."""
    import hashlib

    from powerzoo.benchmarks.baselines import BASELINES_FILE, baselines_in_use

    used = baselines_in_use()
    if used == BASELINES_FILE:
        return "baselines: the packaged table (today's tasks)"
    digest = hashlib.sha256(used.read_bytes()).hexdigest()[:16]
    same = digest == hashlib.sha256(BASELINES_FILE.read_bytes()).hexdigest()[:16]
    return f"baselines: {used} (sha256 {digest}), " + (
        "the same as the packaged table"
        if same
        else "NOT the packaged table: the anchor and oracle are those of the day the campaign "
        "ran, not today's tasks"
    )


def table_line(table: str, row: dict[str, Any]) -> str:
    """Add ``row`` to the results table ``table`` and say so (replacing its earlier row when
    the same submission was scored into it before)."""
    from powerzoo.benchmarks.submission_score import append_result, has_result

    again = has_result(table, row)
    path = append_result(table, row)
    if again:
        return f"replaced the earlier row of this submission in {path}"
    return f"added the row to {path}"


def add_parser(sub: Any) -> None:
    """Register ``score`` on the ``powerzoo`` sub-parser object."""

    p = sub.add_parser(
        "score",
        help="check a submission folder and re-derive its scores (docs/submission.md)",
        description=(
            "Check a submission folder (meta.json and one episode file per seed on the "
            "protocol's days and env seeds), re-derive every number from its episodes "
            "(feasibility, performance between the best rule that keeps the budgets and the "
            "oracle, optimality gap, paired differences against the anchor and the rule, seed x "
            "test block intervals) and print its row."
        ),
    )
    p.add_argument("folder", help="the submission folder (written first with --from-trial)")
    p.add_argument(
        "--table", default=None, metavar="CSV", help="add the row to this results table (CSV)"
    )
    p.add_argument(
        "--from-trial",
        action="append",
        default=[],
        metavar="TRIAL_DIR",
        help="write FOLDER from this campaign trial folder (trial.json) first; repeat it for "
        "each seed",
    )
    p.add_argument(
        "--campaign",
        default=None,
        metavar="DIR",
        help="score against the baselines table and budgets pinned in this campaign folder "
        "(default: the packaged table and the tasks' budgets now)",
    )
    add_row_arguments(p)
    p.set_defaults(func=_cmd_score)


def add_row_arguments(parser: argparse.ArgumentParser) -> None:
    """``--resamples`` and ``--json``: how a command that scores a submission computes and
    prints its row."""
    from powerzoo.benchmarks.stats import BOOTSTRAP_RESAMPLES

    parser.add_argument(
        "--resamples",
        type=int,
        default=BOOTSTRAP_RESAMPLES,
        help=f"bootstrap resamples of every interval (default: {BOOTSTRAP_RESAMPLES})",
    )
    parser.add_argument("--json", action="store_true", help="print the row as JSON")
