"""Lazy package exports: a package lists ``{public name: defining module}`` and each name is
imported on first use, so that ``import powerzoo.physics`` stays cheap and never pulls in the
heavier modules (HiGHS, pandapower, torch) a script does not use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of a package with lazy exports.

    Args:
        package: the package's ``__name__`` (named in the error for an unknown attribute).
        exports: ``{public name: module that defines it}``.

    Returns:
        ``(__getattr__, __dir__)``: the first imports a listed name's module on first access
        (``AttributeError`` for any other name), the second lists the module's globals and
        every export.
    """
    names = dict(exports)

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        module_globals = vars(importlib.import_module(package))
        return sorted(set(module_globals) | set(names))

    return __getattr__, __dir__
