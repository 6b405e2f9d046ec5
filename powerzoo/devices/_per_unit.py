"""Per-unit parameter arrays shared by the fleet device models (inverter battery, PV inverter,
flexible load).

A fleet's parameters are given per unit: a scalar (the same for every unit) or a 1-D sequence of
length ``n_units``. :func:`unit_arrays` turns them into read-only float64 arrays ``[n_units]``
so that a step broadcasts them against the ``[B, n_units]`` state and action arrays.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["unit_arrays"]


def unit_arrays(
    owner: str, values: Mapping[str, object], n_units: int | None
) -> tuple[dict[str, np.ndarray], int]:
    """Broadcast named per-unit values to read-only float64 arrays of one length.

    ``n_units`` fixes the length (scalars are repeated); ``None`` takes it from the sequences
    given (1 when every value is a scalar). Raises ``ValueError`` naming ``owner`` and the field
    on a non-finite value, a value of more than one dimension, or lengths that disagree.
    """
    arrays: dict[str, np.ndarray] = {}
    for name, value in values.items():
        array = np.asarray(value, dtype=np.float64)
        if array.ndim > 1:
            raise ValueError(
                f"{owner}.{name} must be a scalar or a 1-D sequence per unit, got shape "
                f"{array.shape}"
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{owner}.{name} must be finite, got {value!r}")
        arrays[name] = array
    lengths = {name: a.size for name, a in arrays.items() if a.ndim == 1}
    if n_units is None:
        n_units = max(lengths.values(), default=1)
    if n_units < 1:
        raise ValueError(f"{owner}.n_units must be at least 1, got {n_units}")
    wrong = {name: size for name, size in lengths.items() if size != n_units}
    if wrong:
        raise ValueError(
            f"{owner}: per-unit sequences must all have length n_units={n_units}, got {wrong}; "
            "pass one value per unit (or a scalar for all)"
        )
    out = {}
    for name, array in arrays.items():
        full = np.array(np.broadcast_to(array, (n_units,)), dtype=np.float64)  # own copy
        full.setflags(write=False)
        out[name] = full
    return out, int(n_units)
