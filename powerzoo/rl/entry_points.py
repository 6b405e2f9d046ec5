"""Algorithms from outside PowerZoo, named by their entry point ``"package.module:Class"``.

The class is a Stable-Baselines3 algorithm (a subclass of SB3's ``BaseAlgorithm``: one of
sb3-contrib's, or the user's own), imported when it is first asked for; PowerZoo trains it as it
trains SB3's own algorithms (:mod:`powerzoo.rl.algorithms`).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import re
from typing import Any

__all__ = [
    "algorithm_label",
    "entry_point_class",
    "init_parameters",
    "is_entry_point",
    "module_digest",
]

_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
_ENTRY_POINT = re.compile(rf"^{_DOTTED}:{_DOTTED}$")


def is_entry_point(name: Any) -> bool:
    """Whether ``name`` names an algorithm from outside PowerZoo: ``"package.module:Class"``
    (dotted identifiers, one colon)."""
    return isinstance(name, str) and bool(_ENTRY_POINT.match(name))


def algorithm_label(name: str) -> str:
    """``name`` as it appears in folder and trial names: an entry point's colon becomes a dot
    (``package.module.Class``); any other name unchanged."""
    return name.replace(":", ".") if is_entry_point(name) else name


def entry_point_class(name: str) -> type:
    """The Stable-Baselines3 algorithm class an entry point ``"package.module:Class"`` names.

    Raises:
        ValueError: the module cannot be imported, has no such attribute, or the attribute is
            not a subclass of SB3's ``BaseAlgorithm``, each in one line naming the entry point.
    """
    from stable_baselines3.common.base_class import BaseAlgorithm

    module_name, _, attribute = name.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(
            f"algorithm {name!r}: cannot import module {module_name!r} ({err}); is it installed "
            "or on PYTHONPATH?"
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"algorithm {name!r}: module {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if not (isinstance(target, type) and issubclass(target, BaseAlgorithm)):
        raise ValueError(
            f"algorithm {name!r} is not a Stable-Baselines3 algorithm class (a subclass of "
            "stable_baselines3.common.base_class.BaseAlgorithm); an algorithm of another kind "
            "enters the benchmark as a submission folder of its test episodes"
        )
    return target


def init_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The keyword parameters ``cls(...)`` takes: its ``__init__``'s and, while an ``__init__``
    passes ``**kwargs`` on (a subclass that adds a default, as an algorithm from outside may),
    those of the next class in its MRO."""
    params: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        own = inspect.signature(klass.__init__).parameters
        forwards = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in own.values())
        for key, param in own.items():
            if param.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
                params.setdefault(key, param)
        if not forwards:
            break
    return params


def module_digest(name: str) -> dict[str, str]:
    """The code behind entry point ``name`` as it is now: ``{"module", "file", "sha256"}``.
    ``sha256`` is the file's SHA-256 (what ``sha256sum`` prints) where the class is defined in
    the entry's module; where a package re-exports a class written in another file, the SHA-256
    of the two files' SHA-256 digests (module's first). Only the bytes count, so the same code in
    another folder or on another machine has the same digest. ``file`` names the class's file;
    both are empty where there is no source file. A campaign trial records it, so a submission
    names the code each seed trained with."""
    module_name = name.partition(":")[0]
    module = importlib.import_module(module_name)
    try:
        class_file = inspect.getsourcefile(entry_point_class(name)) or ""
    except TypeError:  # a class without a source file
        class_file = ""
    files = []
    for path in (getattr(module, "__file__", None), class_file):
        if path and os.path.isfile(path) and os.path.abspath(path) not in files:
            files.append(os.path.abspath(path))
    if not files:
        return {"module": module_name, "file": "", "sha256": ""}
    digests = []
    for path in files:
        with open(path, "rb") as file:
            digests.append(hashlib.sha256(file.read()).hexdigest())
    if len(digests) > 1:
        digests = [hashlib.sha256("".join(digests).encode()).hexdigest()]
    return {"module": module_name, "file": files[-1], "sha256": digests[0]}
