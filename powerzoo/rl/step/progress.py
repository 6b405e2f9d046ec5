"""Progress bars of a step-by-step trainer: one bar per mode, made on its first step.

Shown as :func:`powerzoo.progress.progress_bar` decides (``progress=None``: only on a terminal).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from powerzoo.progress import progress_bar

__all__ = ["ModeBars"]


class ModeBars(Mapping[str, Any]):
    """The tqdm bar of each mode (``"train"``, ``"eval"``) that has stepped; empty once closed.

    Args:
        progress: ``True`` shows the bars, ``False`` hides them, ``None`` shows them on a terminal.
    """

    def __init__(self, progress: bool | None) -> None:
        self.progress = progress
        self._bars: dict[str, Any] = {}

    def advance(self, mode: str, total: int) -> None:
        """One more call of ``mode`` out of ``total`` planned (the bar is made on the first)."""
        bar = self._bars.get(mode)
        if bar is None:
            bar = progress_bar(total=total, desc=mode, dynamic_ncols=True, progress=self.progress)
            self._bars[mode] = bar
        bar.update(1)

    def resize(self, mode: str, total: int) -> None:
        """Set the planned number of calls of ``mode`` (on its bar, if it has one)."""
        bar = self._bars.get(mode)
        if bar is not None:
            bar.total = total
            bar.refresh()

    def close(self) -> None:
        """Close every bar."""
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()

    def __getitem__(self, mode: str) -> Any:
        return self._bars[mode]

    def __iter__(self) -> Iterator[str]:
        return iter(self._bars)

    def __len__(self) -> int:
        return len(self._bars)
