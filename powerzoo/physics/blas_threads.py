"""One BLAS thread for a block of code, so that its numbers do not depend on the thread count.

OpenBLAS factorises a dense system (``np.linalg.solve``: LAPACK's ``getrf``) with a parallel,
differently blocked LU once the matrix has 10,000 entries or more and more than one thread is
allowed: the 117 x 117 reduced B matrix of the 118-bus case then gives a PTDF that differs in its
last bits between one and two threads, and an AC flow started from it can converge in another
number of iterations (differences of 1e-6 relative in a trajectory, not 1e-16). Inside
:func:`one_blas_thread` every loaded BLAS library runs on one thread, as on a machine with one
core, whatever ``OMP_NUM_THREADS`` / ``threadpoolctl`` / the load of the machine; the previous
counts are restored on exit. Changing the count is a few library calls (the libraries are looked
up once per process), negligible next to the work it guards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["one_blas_thread", "LAPACK_PARALLEL_FROM"]

LAPACK_PARALLEL_FROM = 10_000
"""Entries (``m * n``) from which OpenBLAS's LU runs on several threads (its ``gesv``): below it
a solve is single-threaded anyway and :func:`one_blas_thread` with ``entries`` changes nothing."""

_LIBS: list[Any] | None = None  # threadpoolctl controllers of the loaded BLAS libraries


def _blas_libraries() -> list[Any]:
    global _LIBS
    if _LIBS is None:
        try:
            from threadpoolctl import ThreadpoolController

            controllers = ThreadpoolController().lib_controllers
            _LIBS = [lib for lib in controllers if lib.user_api == "blas"]
        except Exception:  # noqa: BLE001 - no threadpoolctl / unknown BLAS: leave threads alone
            _LIBS = []
    return _LIBS


@contextlib.contextmanager
def one_blas_thread(entries: int | None = None) -> Iterator[None]:
    """Run the block with every BLAS library on one thread (restored afterwards).

    Args:
        entries: Size of the largest dense matrix factorised inside (``m * n``); below
            :data:`LAPACK_PARALLEL_FROM` nothing is changed (OpenBLAS is single-threaded there
            anyway). ``None``: always pin.
    """
    if entries is not None and entries < LAPACK_PARALLEL_FROM:
        yield
        return
    changed: list[tuple[Any, int]] = []
    for lib in _blas_libraries():
        n = lib.get_num_threads()
        if n is not None and n > 1:
            lib.set_num_threads(1)
            changed.append((lib, n))
    try:
        yield
    finally:
        for lib, n in changed:
            lib.set_num_threads(n)
