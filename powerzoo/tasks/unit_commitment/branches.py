"""The line terms of a unit-commitment step on the DC network: overload, loading, congestion."""

from __future__ import annotations

import numpy as np

from powerzoo.scratch import ROW_BLOCK, Scratch, row_blocks

__all__ = ["BranchTerms"]

_add_reduce, _max_reduce = np.add.reduce, np.maximum.reduce  # ndarray.sum / max, unwrapped
CONGESTED_WITHIN_MW = 1e-6  # a branch counts as congested from its rating less this (MW)


class BranchTerms:
    """Overload, largest loading and congested branches of the limited branches, from the units'
    outputs and the demand, with the flow sensitivities worked out once.

    Args:
        gen_flow: Flow on each limited branch per MW of each unit [n, n_lim] (MW/MW).
        load_flow_pu: Flow on each limited branch per unit of demand [n_lim] (MW).
        rating: Limited branches' ratings [n_lim] (MW).
    """

    def __init__(self, gen_flow: np.ndarray, load_flow_pu: np.ndarray, rating: np.ndarray) -> None:
        self.gen_flow, self.load_flow_pu, self.rating = gen_flow, load_flow_pu, rating
        self._inv_rating = 1.0 / rating
        self._congested_above = rating - CONGESTED_WITHIN_MW
        self._scratch = Scratch()  # the step's [B, n_lim] temporaries, reused

    def __call__(
        self, p: np.ndarray, demand: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(overload [B] MW summed over the limited branches, largest loading [B] as a fraction
        of the rating, congested branches [B])`` of outputs ``p`` [B, n] (MW) under ``demand``
        [B] (per unit); the DC flow's [rows, n_lim] temporaries run in
        :func:`~powerzoo.scratch.row_blocks` through one block's work arrays."""
        b = p.shape[0]
        if b <= ROW_BLOCK:  # one block: its results are the batch's
            return self._block(p, demand, b)
        overload, loading, n_congested = np.empty(b), np.empty(b), np.empty(b, dtype=np.int64)
        for rows in row_blocks(b):
            overload[rows], loading[rows], n_congested[rows] = self._block(
                p[rows], demand[rows], ROW_BLOCK
            )
        return overload, loading, n_congested

    def _block(
        self, p: np.ndarray, demand: np.ndarray, rows_max: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`__call__` of one block of rows, in work arrays sized for ``rows_max`` rows."""
        work, k = self._scratch, p.shape[0]
        lim = (rows_max, self.rating.size)
        abs_flow = np.matmul(p, self.gen_flow, out=work("abs_flow", lim)[:k])
        tmp = np.multiply(demand[:, None], self.load_flow_pu, out=work("tmp", lim)[:k])
        np.subtract(abs_flow, tmp, out=abs_flow)
        np.abs(abs_flow, out=abs_flow)
        np.subtract(abs_flow, self.rating, out=tmp)
        overload = _add_reduce(np.maximum(tmp, 0.0, out=tmp), axis=1)
        loading = _max_reduce(np.multiply(abs_flow, self._inv_rating, out=tmp), axis=1, initial=0.0)
        congested = np.greater_equal(
            abs_flow, self._congested_above, out=work("congested", lim, bool)[:k]
        )
        return overload, loading, _add_reduce(congested, axis=1)
