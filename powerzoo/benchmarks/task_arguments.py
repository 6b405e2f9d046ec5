"""The Arguments table of a task page: each task keyword and its default value.

A keyword is a field of the task's parameters, or (``KEYWORDS``) reaches into the nested device
parameters: ``battery_arbitrage``'s ``power_max_mw`` is ``battery.power_max_mw`` (25 MW), and
``dc_microgrid``'s ``battery_power_mw`` the field its ``DEVICE_KEYWORDS`` maps it to. A keyword
that takes a whole device's parameters shows them as ``Params()`` (their defaults) or with the
fields the task sets otherwise.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from powerzoo.tasks import get_task_class
from powerzoo.tasks.base import task_keywords

__all__ = ["arguments_table", "keyword_default", "shown_parameters"]


def keyword_default(params: Any, key: str) -> Any:
    """The default of task keyword ``key`` in a parameters object (``Task.make_params()``).

    Args:
        params: A task's parameters object (a dataclass).
        key: One of its task keywords.

    Returns:
        Its own field, or the device field a ``DEVICE_KEYWORDS`` entry maps it to, or the one
        field of that name among the nested device parameters; ``None`` where none or several
        nested fields have that name.
    """
    if key in {f.name for f in dataclasses.fields(params)}:
        return getattr(params, key)
    mapped = getattr(type(params), "DEVICE_KEYWORDS", {}).get(key)
    if mapped is not None:
        return getattr(getattr(params, mapped[0]), mapped[1], None)
    found = [
        getattr(nested, key)
        for nested in (getattr(params, f.name) for f in dataclasses.fields(params))
        if dataclasses.is_dataclass(nested) and key in {f.name for f in dataclasses.fields(nested)}
    ]
    return found[0] if len(found) == 1 else None


def shown_parameters(value: Any) -> str:
    """A device's parameters object as a table shows it.

    Args:
        value: A parameters dataclass (``BatteryParams(...)``, ``EVFleetParams()``, ...).

    Returns:
        ``Params()`` at its class defaults, else ``Params(a=1, ...)`` with the fields set
        otherwise (``Params(...)`` for a class without a default for every field).
    """
    cls = type(value)
    try:
        reference = cls()
    except TypeError:
        return f"{cls.__name__}(...)"
    changed = ", ".join(
        f"{f.name}={getattr(value, f.name)!r}"
        for f in dataclasses.fields(value)
        if getattr(value, f.name) != getattr(reference, f.name)
    )
    return f"{cls.__name__}({changed})"


def arguments_table(name: str) -> Any:
    """The Arguments table of task ``name``: ``(header, rows)``, or a sentence when it takes
    no keywords.

    Args:
        name: A registered task name.

    Returns:
        ``(["keyword", "default"], [[keyword, default], ...])`` in code spans, or the string
        ``"The task takes no keyword arguments."``.
    """
    cls = get_task_class(name)
    keywords = task_keywords(cls.Params)
    if not keywords:
        return "The task takes no keyword arguments."
    params = cls.make_params()
    rows = []
    own_fields = {f.name for f in dataclasses.fields(params)}
    for key in keywords:
        value = getattr(params, key) if key in own_fields else keyword_default(params, key)
        if value is None and key in own_fields:  # a default the task derives (docstring says how)
            shown = "`None`"
        elif isinstance(value, int | float | str | bool | tuple):
            shown = f"`{value!r}`"
        elif dataclasses.is_dataclass(value):  # a keyword taking a whole device's parameters
            shown = f"`{shown_parameters(value)}`"
        else:
            shown = "(nested)"
        rows.append([f"`{key}`", shown])
    return (["keyword", "default"], rows)
