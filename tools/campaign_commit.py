"""Commit a running campaign's finished trials with its regenerated page, in one step.

A maintainer's tool for a campaign that outlives a session (the benchmark v2 campaign runs for
tens of core-hours): run it after each batch of trials, or with ``--every MINUTES`` beside the
campaign. One pass

1. tops finished records up with the held-out families the campaign file now names (from their
   saved models, as ``powerzoo campaign`` would before scheduling);
2. stages every finished trial folder (one holding ``trial.json``; a folder still training is
   left alone) and ``campaign.json``, and unstages committed folders whose record is gone (a
   trial set aside by ``powerzoo campaign --rerun``);
3. when anything is new, scores the campaign (``powerzoo campaign-score ... --readme``), checks
   it with ``tests/docs/test_committed_results_v2.py`` (scoring again when a trial finished
   while the page was written) and commits the records, the page, the families and README with
   explicit paths, so nothing else staged in the work tree is swept in.

Usage (from the repository root)::

    python tools/campaign_commit.py                    # one pass, benchmark v2's paths
    python tools/campaign_commit.py --every 40         # a pass every 40 minutes, until stopped
    python tools/campaign_commit.py --dry-run          # what a pass would stage, nothing written
    python tools/campaign_commit.py --message "..." --extra powerzoo/tasks/dso.py

Exit status: 0 after a commit or when nothing is new, 1 when scoring or the check failed (the
staged records stay staged; nothing is committed).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

RECORD = "trial.json"
PAGE_TEST = "tests/docs/test_committed_results_v2.py"
SCORE_ATTEMPTS = 3  # a trial finishing while the page is written makes the check fail: again


def finished_trials(folder: Path) -> list[Path]:
    """Trial folders of a campaign ``folder`` that hold a finished record, sorted."""
    return sorted(p.parent for p in (folder / "trials").glob(f"*/{RECORD}"))


def vanished_trials(tracked_records: Iterable[str], root: Path) -> list[str]:
    """Folders of tracked records (paths relative to ``root``) whose record is gone."""
    return sorted(str(Path(r).parent) for r in tracked_records if not (root / r).is_file())


def commit_message(new_records: int, finished: int, total: int | None) -> str:
    """The default message of a batch commit."""
    of = f" of {total}" if total else ""
    return (
        f"Benchmark v2 campaign: {new_records} more trial record(s), {finished}{of} finished; "
        "the v2 page and README coverage regenerated"
    )


def total_trials(score_output: str) -> int | None:
    """The campaign's trial count from ``campaign-score``'s "N of M trial(s) finished" line."""
    found = re.findall(r"of (\d+) trial\(s\) finished", score_output)
    return int(found[-1]) if found else None


def _git(*args: str, capture: bool = True) -> str:
    out = subprocess.run(["git", *args], check=True, capture_output=capture, text=True)
    return out.stdout if capture else ""


def _run(cmd: Sequence[str]) -> tuple[int, str]:
    out = subprocess.run(list(cmd), capture_output=True, text=True)
    return out.returncode, out.stdout + out.stderr


def one_pass(args: argparse.Namespace) -> int:
    """One top-up, stage, score, check and commit (module docstring); the exit status."""
    root, folder = Path.cwd(), Path(args.folder)
    if folder.is_absolute():  # git lists paths from the root: compare like with like
        folder = folder.relative_to(root)
    from powerzoo.rl.campaigns.family_top_up import top_up_and_report
    from powerzoo.rl.campaigns.parse import load_campaign

    topped = (
        [] if args.dry_run else top_up_and_report(load_campaign(args.campaign), folder).topped_up
    )
    finished = finished_trials(folder)
    tracked = _git("ls-files", str(folder / "trials")).split()
    gone = vanished_trials([t for t in tracked if t.endswith("/" + RECORD)], root)
    committed = {str(Path(t).parent) for t in tracked if t.endswith("/" + RECORD)}
    new = [p for p in finished if str(p) not in committed]
    changed = sorted(  # a committed record written again: re-run, or topped up elsewhere
        str(Path(f).parent)
        for f in _git("diff", "--name-only", "HEAD", "--", str(folder / "trials")).split()
        if f.endswith("/" + RECORD) and (root / f).is_file()
    )
    print(
        f"{len(finished)} finished, {len(new)} new, {len(changed)} changed, {len(gone)} set "
        f"aside, {len(topped)} topped up"
    )
    if args.dry_run:
        for p in new:
            print(f"  would add {p}")
        for c in changed:
            print(f"  would update {c}")
        for g in gone:
            print(f"  would unstage {g}")
        return 0
    if not (new or changed or gone or topped or args.force):
        print("nothing new")
        return 0
    paths = [str(folder / "campaign.json"), *map(str, finished)]
    _git("add", "--", *[p for p in paths if Path(p).exists()])
    for g in gone:
        _git("rm", "-r", "-q", "--cached", "--", g)
    score = [
        sys.executable, "-m", "powerzoo", "campaign-score", str(folder),
        "--out", args.page, "--families-dir", args.families, "--readme", args.readme,
        "--no-progress",
    ]  # fmt: skip
    for attempt in range(1, SCORE_ATTEMPTS + 1):
        rc, score_out = _run(score)
        if rc:
            print(score_out[-3000:], file=sys.stderr)
            print("campaign-score failed: nothing committed", file=sys.stderr)
            return 1
        rc, test_out = _run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", PAGE_TEST]
        )
        if not rc:
            break
        print(f"the page check failed (attempt {attempt}); scoring again", file=sys.stderr)
        _git("add", "--", *map(str, finished_trials(folder)))
    else:
        print(test_out[-3000:], file=sys.stderr)
        print("the page check kept failing: nothing committed", file=sys.stderr)
        return 1
    _git("add", "--", args.page, args.families)
    n_finished = len(finished_trials(folder))
    message = args.message or commit_message(len(new), n_finished, total_trials(score_out))
    commit_paths = [str(folder), args.families, args.page, args.readme, *args.extra]
    _git("commit", "-q", "-m", message, "--", *commit_paths, capture=False)
    print(_git("log", "--oneline", "-1").strip())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--campaign", default="campaigns/benchmark_v2.yaml", help="campaign file")
    p.add_argument("--folder", default="results/benchmark_v2", help="the campaign's out folder")
    p.add_argument("--page", default="docs/results_v2", help="campaign-score --out")
    p.add_argument("--families", default="results/families", help="baseline families folder")
    p.add_argument("--readme", default="README.md", help="Markdown file with the marker lines")
    p.add_argument("--message", help="commit message (default: the batch's counts)")
    p.add_argument("--extra", nargs="*", default=[], help="more paths for the same commit")
    p.add_argument("--force", action="store_true", help="score and commit with no new record")
    p.add_argument("--dry-run", action="store_true", help="list what a pass would stage")
    p.add_argument("--every", type=float, help="repeat a pass every MINUTES, until stopped")
    args = p.parse_args(argv)
    if not Path(args.folder).is_dir():
        p.error(f"no campaign folder {args.folder!r} (run from the repository root)")
    if args.every is None:
        return one_pass(args)
    if args.every <= 0:
        p.error("--every takes a positive number of minutes")
    while True:
        print(f"== {time.strftime('%H:%M:%S')}", flush=True)
        guarded_pass(args)
        sys.stdout.flush()
        time.sleep(60.0 * args.every)


def guarded_pass(args: argparse.Namespace) -> int:
    """:func:`one_pass`, its failure (a git or scoring error) printed rather than raised, so
    that a loop beside a campaign goes on to its next pass; the exit status (1: failed)."""
    try:
        return one_pass(args)
    except (subprocess.CalledProcessError, OSError, ValueError, RuntimeError) as exc:
        detail = getattr(exc, "stderr", None) or ""
        print(f"the pass failed: {exc} {detail}".strip(), file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
