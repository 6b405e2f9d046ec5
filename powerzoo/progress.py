"""Progress bars: one place that decides when a bar is shown.

``progress=None`` (the default everywhere) shows a bar only when stderr is a terminal, which is
tqdm's own ``disable=None`` rule; ``True`` forces it, ``False`` hides it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["progress_bar"]


def progress_bar(
    iterable: Iterable[Any] | None = None, *, progress: bool | None = None, **kwargs: Any
) -> Any:
    """A ``tqdm.auto.tqdm`` bar shown as ``progress`` says (``None``: only on a terminal)."""
    from tqdm.auto import tqdm

    disable = None if progress is None else not progress
    return tqdm(iterable, disable=disable, **kwargs)
