"""The SB3 logger of a run: console output and TensorBoard, continued cleanly on resume."""

from __future__ import annotations

import numbers
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "run_logger",
    "console_logger",
    "tensorboard_format",
    "flush_logger",
    "pending_records",
    "restore_pending_records",
]


def tensorboard_format(folder: Path, purge_step: int | None) -> Any:
    """SB3's TensorBoard writer, created with ``purge_step`` so a resumed run hides orphaned
    events."""
    from stable_baselines3.common.logger import TensorBoardOutputFormat
    from torch.utils.tensorboard import SummaryWriter

    fmt = TensorBoardOutputFormat.__new__(TensorBoardOutputFormat)
    fmt.writer = SummaryWriter(log_dir=str(folder), purge_step=purge_step)
    fmt._is_closed = False
    return fmt


def run_logger(
    folder: Path | None, verbose: int, tensorboard: bool, purge_step: int | None = None
) -> Any:
    """An SB3 ``Logger`` writing to stdout (``verbose >= 1``) and to TensorBoard files in
    ``folder`` (``None``: no folder, no TensorBoard)."""
    from stable_baselines3.common.logger import HumanOutputFormat, Logger

    formats: list[Any] = []
    if verbose >= 1:
        formats.append(HumanOutputFormat(sys.stdout))
    if tensorboard and folder is not None:
        formats.append(tensorboard_format(folder, purge_step))
    return Logger(folder=None if folder is None else str(folder), output_formats=formats)


def console_logger(model: Any) -> None:
    """Give ``model`` a logger without a folder unless it logs to TensorBoard or has its own.

    Left alone, SB3 makes an empty ``SB3-<date>`` folder in the system's temporary directory at
    every ``learn`` of a model without ``tensorboard_log``; this logger writes the same console
    output (``verbose >= 1``) and makes no folder.
    """
    if getattr(model, "tensorboard_log", None) is not None or getattr(
        model, "_custom_logger", False
    ):
        return
    model.set_logger(run_logger(None, getattr(model, "verbose", 0), tensorboard=False))


def flush_logger(model: Any) -> None:
    """Flush the TensorBoard writers of ``model``'s logger to disk."""
    for fmt in getattr(getattr(model, "logger", None), "output_formats", []):
        writer = getattr(fmt, "writer", None)
        if writer is not None and callable(getattr(writer, "flush", None)):
            writer.flush()


def pending_records(model: Any) -> dict[str, Any]:
    """The numeric values recorded on ``model``'s logger since its last dump, as JSON.

    SB3 dumps its logs when a rollout ends, then records the update's ``train/*`` values: they
    wait for the next dump. A checkpoint taken in between keeps them here so a resumed run
    writes them at the same step as an uninterrupted run (else that step's ``train/*`` points
    are lost on each resume).
    """
    logger = getattr(model, "_logger", None)
    values: dict[str, float] = {}
    excluded: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for key, value in dict(getattr(logger, "name_to_value", {})).items():
        if isinstance(value, numbers.Real) or (
            hasattr(value, "item") and getattr(value, "size", None) == 1
        ):
            values[key] = float(value.item() if hasattr(value, "item") else value)
            excluded[key] = list(logger.name_to_excluded.get(key) or ())
            if key in logger.name_to_count:
                counts[key] = int(logger.name_to_count[key])
    return {"values": values, "excluded": excluded, "counts": counts} if values else {}


def restore_pending_records(logger: Any, pending: dict[str, Any] | None) -> None:
    """Record the values :func:`pending_records` kept on ``logger``, to be written by its next
    dump."""
    if not pending:
        return
    excluded = pending.get("excluded", {})
    for key, value in pending.get("values", {}).items():
        logger.record(key, float(value), tuple(excluded.get(key) or ()) or None)
    for key, count in pending.get("counts", {}).items():
        logger.name_to_count[key] = int(count)
