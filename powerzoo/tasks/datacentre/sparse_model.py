"""A sparse (MI)LP assembled from numpy blocks and handed to HiGHS (highspy) in two calls.

Shared by the day plans of the data-centre tasks (``dc_microgrid``'s MILP, ``dc_scheduling``'s
LP). Columns and rows are added as whole blocks; :meth:`SparseModel.to_highs` passes them to
HiGHS with one ``addCols`` and one ``addRows`` call: highspy's expression API builds the same
rows one Python object at a time, about ten times slower than this vectorised build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from powerzoo.physics.highs import new_highs

if TYPE_CHECKING:  # highspy is imported when a plan is solved, not with the task
    import highspy

__all__ = ["SparseModel"]


class SparseModel:
    """A (MI)LP ``min cost x`` s.t. ``lower <= A x <= upper``, ``low <= x <= high``, built from
    numpy blocks."""

    def __init__(self) -> None:
        self.n_cols = 0
        self.col_low: list[np.ndarray] = []
        self.col_high: list[np.ndarray] = []
        self.cost: list[np.ndarray] = []
        self.integer: list[np.ndarray] = []
        self.n_rows = 0
        self.row_ids: list[np.ndarray] = []
        self.col_ids: list[np.ndarray] = []
        self.coefs: list[np.ndarray] = []
        self.row_low: list[np.ndarray] = []
        self.row_high: list[np.ndarray] = []
        self.extra_cost: list[tuple[np.ndarray, float]] = []

    def columns(
        self,
        n: int,
        low: float,
        high: float | np.ndarray,
        cost: float | np.ndarray = 0.0,
        integer: bool = False,
    ) -> np.ndarray:
        """Indices of ``n`` new columns with bounds ``[low, high]`` and objective coefficients
        ``cost``."""
        idx = np.arange(self.n_cols, self.n_cols + n)
        self.n_cols += n
        self.col_low.append(np.full(n, low, dtype=float))
        self.col_high.append(np.broadcast_to(np.asarray(high, dtype=float), (n,)).copy())
        self.cost.append(np.broadcast_to(np.asarray(cost, dtype=float), (n,)).copy())
        self.integer.append(np.full(n, int(integer)))
        return idx

    def add_cost(self, cols: np.ndarray, value: float) -> None:
        """Add ``value`` to the objective coefficients of ``cols`` (distinct columns)."""
        self.extra_cost.append((np.asarray(cols, dtype=int), value))

    def rows(
        self,
        terms: list[tuple[np.ndarray, float | np.ndarray]],
        low: float | np.ndarray,
        high: float | np.ndarray,
        groups: list[np.ndarray] | None = None,
        group_coef: float = 0.0,
    ) -> None:
        """Rows ``low <= sum coef * x[cols] (+ group_coef * sum x[groups[i]]) <= high``.

        Each term's ``cols`` holds one column per row; ``groups`` (optional) a ragged list of
        column arrays, one per row, all with the coefficient ``group_coef``.
        """
        n = len(groups) if groups is not None else len(terms[0][0])
        row_ids = np.arange(self.n_rows, self.n_rows + n)
        for cols, coef in terms:
            self._triplets(
                row_ids, np.asarray(cols), np.broadcast_to(np.asarray(coef, dtype=float), (n,))
            )
        for i, group in enumerate(groups or ()):
            self._triplets(
                np.full(len(group), self.n_rows + i),
                np.asarray(group),
                np.full(len(group), group_coef),
            )
        self.row_low.append(np.broadcast_to(np.asarray(low, dtype=float), (n,)))
        self.row_high.append(np.broadcast_to(np.asarray(high, dtype=float), (n,)))
        self.n_rows += n

    def _triplets(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
        self.row_ids.append(rows)
        self.col_ids.append(cols)
        self.coefs.append(vals)

    def solve(
        self, task_id: str, t0: int, **options: float
    ) -> tuple[highspy.Highs, np.ndarray, str]:
        """Solve the model on HiGHS (:meth:`to_highs`, then the solver ``options``): the solver,
        the column values and the model status. ``RuntimeError`` naming ``task_id``'s oracle and
        the plan's first step ``t0`` when HiGHS finds no plan."""
        highs = self.to_highs()
        for name, value in options.items():
            highs.setOptionValue(name, value)
        highs.run()
        status = highs.modelStatusToString(highs.getModelStatus())
        solution = highs.getSolution()
        if not solution.value_valid:
            raise RuntimeError(f"{task_id} oracle: HiGHS found no plan from step {t0} ({status})")
        return highs, np.asarray(solution.col_value), status

    def to_highs(self) -> highspy.Highs:
        """The model in a quiet :class:`highspy.Highs` (columns, then rows in compressed-row
        form)."""
        import highspy

        h = new_highs()
        cost = np.concatenate(self.cost)
        for cols, value in self.extra_cost:
            cost[cols] += value
        h.addCols(
            self.n_cols,
            cost,
            np.concatenate(self.col_low),
            np.concatenate(self.col_high),
            0,
            np.empty(0, np.int32),
            np.empty(0, np.int32),
            np.empty(0),
        )
        integer = np.flatnonzero(np.concatenate(self.integer)).astype(np.int32)
        h.changeColsIntegrality(
            integer.size, integer, np.full(integer.size, highspy.HighsVarType.kInteger)
        )
        rows, cols = np.concatenate(self.row_ids), np.concatenate(self.col_ids)
        order = np.lexsort((cols, rows))  # row-major, columns ascending within a row
        starts = np.searchsorted(rows[order], np.arange(self.n_rows))
        h.addRows(
            self.n_rows,
            np.concatenate(self.row_low),
            np.concatenate(self.row_high),
            order.size,
            starts.astype(np.int32),
            cols[order].astype(np.int32),
            np.concatenate(self.coefs)[order],
        )
        return h
