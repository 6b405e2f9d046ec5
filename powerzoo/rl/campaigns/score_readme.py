"""A scored campaign's summary in a Markdown file such as README.md: two blocks between marker
lines, rewritten by ``powerzoo campaign-score --readme FILE``, so that committing a running
campaign's records is: score, then commit.

* the coverage sentence (:func:`coverage_sentence`) between
  ``<!-- campaign-score <name> coverage:start -->`` and ``... coverage:end -->``;
* the summary table (``summary_v2.md``) between ``<!-- campaign-score <name> summary:start -->``
  and ``... summary:end -->``,

with ``<name>`` the campaign's name. Everything outside the blocks is left as it is; a file
without the marker lines is refused (``ValueError`` naming the lines to add), so nothing is
written where the reader did not ask for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from powerzoo.fileio import atomic_write_text

__all__ = [
    "BLOCKS",
    "check_readme",
    "coverage_sentence",
    "markers",
    "replace_block",
    "update_readme",
]

BLOCKS = ("coverage", "summary")
"""The blocks a file may hold, in the order :func:`update_readme` writes them."""
MACHINE_CORES = 2
"""Cores of the machine the sentence projects the campaign's wall time on (two trials at a
time), as a reader's laptop or a CI-class runner would have."""


def markers(campaign: str, block: str) -> tuple[str, str]:
    """The start and end marker lines of ``block`` (one of :data:`BLOCKS`) of ``campaign``."""
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}, got {block!r}")
    return (
        f"<!-- campaign-score {campaign} {block}:start -->",
        f"<!-- campaign-score {campaign} {block}:end -->",
    )


def coverage_sentence(coverage: Mapping[str, Any]) -> str:
    """The README's sentence on how far a campaign has come, from
    :func:`~powerzoo.rl.campaigns.score_page.coverage`: trials finished of those planned, the
    projected core-hours (the spent ones once every trial has finished) and what they mean in
    wall time on a 2-core machine and on a Ray cluster of dedicated cores."""
    finished, planned = coverage["finished"], coverage["planned"]
    done = finished == planned
    text = "**Coverage:** " + (
        f"all {planned} trials have finished"
        if done
        else f"{finished} of its {planned} trials have finished"
    )
    projected = coverage.get("projected_core_hours")
    if projected is None:
        return text + "."
    spent = coverage.get("core_hours") if done else None
    hours = (
        f" ({spent:.1f} core-hours in all:"
        if spent is not None
        else f" (about {projected:.0f} core-hours in all, projected from the finished trials:"
    )
    wall = (
        f" about {projected / MACHINE_CORES:.0f} h on a {MACHINE_CORES}-core machine running "
        f"{MACHINE_CORES} trials at a time, about {coverage['cluster_hours']:.1f} h on a "
        f"{coverage['workers']}-worker Ray cluster, on cores that run nothing else; the "
        "results page gives the wall time they took)."
    )
    return text + hours + wall


def replace_block(text: str, campaign: str, block: str, content: str) -> str:
    """``text`` with the lines between ``block``'s markers replaced by ``content`` (its own
    lines, ending with a newline). ``ValueError`` without both markers, in order."""
    start, end = markers(campaign, block)
    begin = text.find(start + "\n")
    stop = text.find(end, begin + 1) if begin >= 0 else -1
    if begin < 0 or stop < 0:
        raise ValueError(f"no {block} block: add the lines {start!r} and {end!r} where it goes")
    body = content if content.endswith("\n") else content + "\n"
    return text[: begin + len(start) + 1] + body + text[stop:]


def check_readme(path: str | Path, campaign: str) -> str:
    """The text of the Markdown file ``path`` after checking that it holds both blocks of
    ``campaign``: ``FileNotFoundError`` without the file, ``ValueError`` (naming the marker lines
    to add) without a block."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (--readme: a Markdown file to update)")
    text = path.read_text(encoding="utf-8")
    for block in BLOCKS:
        try:
            replace_block(text, campaign, block, "")
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    return text


def update_readme(
    path: str | Path, campaign: str, coverage: Mapping[str, Any], summary: str
) -> Path:
    """Rewrite the coverage and summary blocks of ``campaign`` in the Markdown file ``path``
    (module docstring); written atomically, and only when both blocks are there.

    Args:
        path: The Markdown file (e.g. README.md).
        campaign: The campaign's name (its markers).
        coverage: :func:`~powerzoo.rl.campaigns.score_page.coverage` of the scored folder.
        summary: The summary table (the text of ``summary_v2.md``).

    Returns:
        The file written.
    """
    text = check_readme(path, campaign)
    text = replace_block(text, campaign, "coverage", coverage_sentence(coverage))
    text = replace_block(text, campaign, "summary", summary)
    return atomic_write_text(path, text)
