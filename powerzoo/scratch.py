"""Work arrays that batched kernels reuse from one call to the next.

A batched step at ``N = 1,024`` makes temporaries of a megabyte or more. Fresh arrays that large
are mapped and unmapped by the C allocator on every call, and the page faults cost more than the
arithmetic (measured on ``opf_118``: 2-3x). A :class:`Scratch` keeps one array per name and
shape, so the same memory serves every step. Only temporaries that never leave the call may live
here: anything returned to a caller (observations, info values, state) must be a fresh array.
Past ~1,000 rows even reused work arrays outgrow the CPU caches; kernels with wide temporaries then
run :func:`row_blocks` of :data:`ROW_BLOCK` rows through work arrays of one block's size.

The rest of a step's temporaries (hundreds of element-wise results, each a fresh array) are left to
the allocator, and glibc's default policy returns freed memory to the OS as soon as more than a
few megabytes sit free at the top of the heap, so the next step faults the same pages back in
(~0.3-1 page faults per env-step at N >= 1,024 on the UC and feeder tasks, measured with
``ru_minflt``; 10-25 % of their step time). :func:`keep_freed_memory` tells glibc to keep them:
the batched envs call it once when they are built (opt out with ``POWERZOO_KEEP_FREED_MEMORY=0``).
"""

from __future__ import annotations

import ctypes
import os
import platform

import numpy as np

__all__ = ["Scratch", "ROW_BLOCK", "row_blocks", "keep_freed_memory", "TRIM_THRESHOLD_BYTES"]

ROW_BLOCK = 1024
"""Rows per pass of a kernel whose [rows, n] temporaries would outgrow the CPU caches past ~1,000
rows."""


TRIM_THRESHOLD_BYTES = 256 * 2**20
"""Free memory glibc keeps at the top of the heap before returning it to the OS (bytes; glibc's
default is ~128 KB-64 MB)."""
_MMAP_THRESHOLD_BYTES = (
    32 * 2**20
)  # blocks below this come from the heap (glibc's largest allowed value)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameter numbers (malloc.h)
_allocator_tuned: bool | None = None


def keep_freed_memory() -> bool:
    """Make glibc reuse the memory of freed temporaries instead of returning it to the OS.

    Sets ``M_MMAP_THRESHOLD`` to 32 MB (arrays below it come from the heap, not a fresh mapping
    each) and ``M_TRIM_THRESHOLD`` to :data:`TRIM_THRESHOLD_BYTES` (up to that much free memory
    stays mapped). The cost is that a process keeps up to that much freed memory. Process-wide and
    done once; returns whether it is in effect. A no-op (``False``) off glibc (macOS, Windows,
    musl) or when the environment variable ``POWERZOO_KEEP_FREED_MEMORY`` is ``0``.
    """
    global _allocator_tuned
    if _allocator_tuned is None:
        _allocator_tuned = False
        if (
            os.environ.get("POWERZOO_KEEP_FREED_MEMORY", "1") != "0"
            and platform.libc_ver()[0] == "glibc"
        ):
            try:
                libc = ctypes.CDLL("libc.so.6")
                _allocator_tuned = bool(
                    libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
                    and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
                )
            except (
                OSError,
                AttributeError,
            ):  # no such library or symbol: leave the allocator alone
                _allocator_tuned = False
    return _allocator_tuned


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

    def __call__(
        self, name: str, shape: tuple[int, ...], dtype: type | np.dtype = np.float64
    ) -> np.ndarray:
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
