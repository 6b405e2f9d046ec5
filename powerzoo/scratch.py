"""Work arrays that batched kernels reuse from one call to the next.

A batched step at ``N = 1,024`` makes temporaries of a megabyte or more. Fresh arrays that large
are mapped and unmapped by the C allocator on every call, and the page faults cost more than the
arithmetic (measured on ``opf_118``: 2-3x). A :class:`Scratch` keeps one array per name and
shape, so the same memory serves every step. Only temporaries that never leave the call may live
here: anything returned to a caller (observations, info values, state) must be a fresh array.
Past ~1,000 rows even reused work arrays outgrow the CPU caches; kernels with wide temporaries then
run :func:`row_blocks` of :data:`ROW_BLOCK` rows through work arrays of one block's size.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Scratch", "ROW_BLOCK", "row_blocks"]

ROW_BLOCK = 1024
"""Rows per pass of a kernel whose [rows, n] temporaries would outgrow the CPU caches past ~1,000 rows."""


def row_blocks(n_rows: int, block: int = ROW_BLOCK) -> list[slice]:
    """Consecutive row slices of at most ``block`` rows covering ``range(n_rows)``.

    >>> row_blocks(2500)
    [slice(0, 1024, None), slice(1024, 2048, None), slice(2048, 2500, None)]
    """
    return [slice(lo, min(lo + block, n_rows)) for lo in range(0, n_rows, block)]


class Scratch:
    """Named work arrays, made on first use and again only when the shape or dtype changes.

    >>> scratch = Scratch()
    >>> flow = scratch("flow", (1024, 186))  # the same array on every call with this shape
    """

    __slots__ = ("_arrays",)

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def __call__(self, name: str, shape: tuple[int, ...], dtype: type | np.dtype = np.float64) -> np.ndarray:
        """The work array ``name`` with ``shape`` and ``dtype`` (contents undefined)."""
        array = self._arrays.get(name)
        if array is None or array.shape != shape or array.dtype != dtype:
            array = self._arrays[name] = np.empty(shape, dtype=dtype)
        return array

    def __getstate__(self) -> dict:
        return {}  # work arrays are not state: copies and pickles start empty

    def __setstate__(self, state: dict) -> None:
        self._arrays = {}

    def __deepcopy__(self, memo: dict) -> Scratch:
        return Scratch()
