"""The SB3 logger of a run: console output and TensorBoard, continued cleanly on resume."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["run_logger", "tensorboard_format", "flush_logger"]


def tensorboard_format(folder: Path, purge_step: int | None) -> Any:
    """SB3's TensorBoard writer, created with ``purge_step`` so a resumed run hides orphaned
    events."""
    from stable_baselines3.common.logger import TensorBoardOutputFormat
    from torch.utils.tensorboard import SummaryWriter

    fmt = TensorBoardOutputFormat.__new__(TensorBoardOutputFormat)
    fmt.writer = SummaryWriter(log_dir=str(folder), purge_step=purge_step)
    fmt._is_closed = False
    return fmt


def run_logger(folder: Path, verbose: int, tensorboard: bool, purge_step: int | None = None) -> Any:
    """An SB3 ``Logger`` writing to stdout (``verbose >= 1``) and to TensorBoard files in
    ``folder``."""
    from stable_baselines3.common.logger import HumanOutputFormat, Logger

    formats: list[Any] = []
    if verbose >= 1:
        formats.append(HumanOutputFormat(sys.stdout))
    if tensorboard:
        formats.append(tensorboard_format(folder, purge_step))
    return Logger(folder=str(folder), output_formats=formats)


def flush_logger(model: Any) -> None:
    """Flush the TensorBoard writers of ``model``'s logger to disk."""
    for fmt in getattr(getattr(model, "logger", None), "output_formats", []):
        writer = getattr(fmt, "writer", None)
        if writer is not None and callable(getattr(writer, "flush", None)):
            writer.flush()
