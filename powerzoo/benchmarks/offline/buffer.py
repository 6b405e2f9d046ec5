"""Step buffer of the collectors: steps of ``B`` parallel episode streams in, whole episodes out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["EpisodeBuffer"]


class EpisodeBuffer:
    """Step-major transitions of ``B`` parallel episode streams; hands out finished episodes.

    Each call to :meth:`add` appends one step of every stream (arrays with a leading axis ``B``
    when ``batched``, single values otherwise, i.e. ``B = 1``). :meth:`take` returns the finished
    episodes, episode-major in the order they finished, and keeps the unfinished tails.
    ``names`` must include ``terminals`` and ``truncations``, which mark the episode ends.

    Args:
        names: The array names, in the order :meth:`add` takes the values.
        batched: Values carry a leading stream axis ``B``.
    """

    def __init__(self, names: Sequence[str], batched: bool) -> None:
        self.names = tuple(names)
        self.batched = batched
        self.steps: list[
            tuple[Any, ...]
        ] = []  # one tuple per step (one append per step, not one per name)
        self._done_index = (self.names.index("terminals"), self.names.index("truncations"))
        self._row_start: np.ndarray | None = None  # first pending step of each stream's episode

    @property
    def n_pending_steps(self) -> int:
        """Steps held per stream (multiply by ``B`` for transitions)."""
        return len(self.steps)

    def add(self, *values: Any) -> None:
        """Append one step: one value per name, in ``names`` order.

        Args:
            *values: One value per name.
        """
        if len(values) != len(self.names):
            raise ValueError(
                f"add() needs {len(self.names)} values ({', '.join(self.names)}), got {len(values)}"
            )
        self.steps.append(values)

    def add_step(self, values: tuple[Any, ...]) -> None:
        """:meth:`add` with the values already in a tuple, unchecked (the collectors' hot path).

        Args:
            values: One value per name.
        """
        self.steps.append(values)

    def take(self, limit: int | None = None) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
        """Finished episodes (at most ``limit``):
        ``({name: [n_steps, ...]}, lengths[E])`` or ``None``.

        Args:
            limit: Most episodes to hand out (``None``: all finished).

        Returns:
            The episodes' arrays and lengths, or ``None`` when none has finished.
        """
        if not self.steps:
            return None
        columns = zip(*self.steps, strict=True)
        stacked = [np.asarray(c) if self.batched else np.asarray(c)[:, None] for c in columns]
        done = stacked[self._done_index[0]] | stacked[self._done_index[1]]  # [T, B]
        n_steps, n_streams = done.shape
        row_start = np.zeros(n_streams, np.int64) if self._row_start is None else self._row_start
        done &= (
            np.arange(n_steps)[:, None] >= row_start
        )  # ends before a stream's start were taken already
        t_end, rows = np.nonzero(done)  # sorted by step, then stream: the order episodes finish
        if limit is not None:
            t_end, rows = t_end[:limit], rows[:limit]
        if t_end.size == 0:
            return None
        # an episode starts after the previous end in its stream,
        # or where the stream's pending data starts
        by_stream = np.lexsort((t_end, rows))
        r_sorted, t_sorted = rows[by_stream], t_end[by_stream]
        first_in_stream = np.ones(r_sorted.size, bool)
        first_in_stream[1:] = r_sorted[1:] != r_sorted[:-1]
        prev_end = np.concatenate([[0], t_sorted[:-1] + 1])
        t_start = np.empty_like(t_end)
        t_start[by_stream] = np.where(first_in_stream, row_start[r_sorted], prev_end)
        lengths = t_end - t_start + 1
        offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
        steps = np.repeat(t_start, lengths) + np.arange(offsets.size) - offsets
        flat = steps * n_streams + np.repeat(rows, lengths)
        out = {
            name: a.reshape((n_steps * n_streams, *a.shape[2:]))[flat]
            for name, a in zip(self.names, stacked, strict=True)
        }
        new_start = row_start.copy()
        np.maximum.at(new_start, rows, t_end + 1)
        cut = int(new_start.min())
        del self.steps[:cut]
        self._row_start = new_start - cut
        return out, lengths
