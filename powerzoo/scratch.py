"""Work arrays that batched kernels reuse from one call to the next.

A batched step at ``N = 1,024`` makes temporaries of a megabyte or more. Fresh arrays that large
are mapped and unmapped by the C allocator on every call, and the page faults cost more than the
arithmetic (measured on ``opf_118``: 2-3x). A :class:`Scratch` keeps one array per name and
shape, so the same memory serves every step. Only temporaries that never leave the call may live
here: anything returned to a caller (observations, info values, state) must be a fresh array.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Scratch"]


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
