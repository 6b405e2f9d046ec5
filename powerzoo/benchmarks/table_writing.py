"""Writing the baseline table: merging freshly computed rows into it and the days a task's rows
use (the table's reading side and its schema: :mod:`powerzoo.benchmarks.baselines`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.baselines import PROTOCOL
from powerzoo.fileio import write_json

__all__ = ["merge_rows", "table_days", "write_table"]


def merge_rows(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``old`` with rows of the same (task, split, policy) replaced by ``new``'s in place; each
    other new row goes after the last row of its task, or, for a task ``old`` lacks, before the
    first row of a task whose name sorts after it (else at the end).

    Args:
        old: The table's rows.
        new: Rows just computed.

    Returns:
        The merged rows.
    """
    key = lambda r: (r["task"], r["split"], r["policy"])  # noqa: E731
    replaced = {key(r): r for r in new}
    merged = [replaced.pop(key(r), r) for r in old]
    for row in replaced.values():
        same = [i for i, r in enumerate(merged) if r["task"] == row["task"]]
        later = [i for i, r in enumerate(merged) if r["task"] > row["task"]]
        at = same[-1] + 1 if same else (later[0] if later else len(merged))
        merged.insert(at, row)
    return merged


def table_days(
    rows: list[dict[str, Any]], tasks: list[str] | None, split: str, seed: int
) -> dict[str, list[int]]:
    """``{task: day_ids}`` of the tasks (all when ``None``) that have rows on ``split`` in
    ``rows``; ``ValueError`` when a task's rows used another seed or different days.

    Args:
        rows: The table's rows.
        tasks: Task names (``None``: every task in ``rows``).
        split: The split.
        seed: The seed the new rows use.

    Returns:
        The days of each task's rows.
    """
    days: dict[str, list[int]] = {}
    for r in rows:
        if r.get("split") != split or (tasks is not None and r["task"] not in tasks):
            continue
        if "day_ids" not in r:
            continue
        if int(r.get("seed", seed)) != seed:
            raise ValueError(
                f"the table's {r['task']} rows use seed {r['seed']}, not {seed}: pass --seed "
                f"{r['seed']} so that new rows score against them"
            )
        if days.setdefault(r["task"], list(r["day_ids"])) != list(r["day_ids"]):
            raise ValueError(f"the table's {r['task']} rows on {split} use different days")
    return days


def write_table(
    path: str | Path, rows: list[dict[str, Any]], command: str, fresh: bool = False
) -> dict[str, Any]:
    """Merge ``rows`` into the table at ``path`` (:func:`merge_rows`; a new table if there is
    none, or with ``fresh``) and write it atomically, ``command`` appended to its
    ``generated_by``.

    Args:
        path: The table's JSON file.
        rows: Rows just computed.
        command: The command that computed them, for ``generated_by``.
        fresh: Start from an empty table instead of the file's rows.

    Returns:
        The table written.
    """
    path = Path(path)
    table = json.loads(path.read_text(encoding="utf-8")) if path.is_file() and not fresh else {}
    history = table.get("generated_by")
    payload = {
        "generated_by": f"{history}; then {command.strip()}" if history else command.strip(),
        "protocol": PROTOCOL,
        "results": merge_rows(table.get("results", []), rows),
    }
    write_json(path, payload, indent=1)
    return payload
