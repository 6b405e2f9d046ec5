"""Every public symbol has a docstring; public callables document their arguments and return.

The public API is the ``__all__`` of the modules in :data:`PUBLIC_MODULES` (the list that
``docs/api/index.md`` explains). For each public class, function and public method of a public
class (the methods a class defines itself; names without a leading underscore):

- it has a docstring;
- a function or method with parameters has an ``Args:`` section naming each one (``*args`` and
  ``**kwargs`` included when present, ``self`` / ``cls`` not);
- a function or method whose return annotation is not ``None`` has a ``Returns:`` (or
  ``Yields:``) section;
- a class whose own ``__init__`` takes parameters names them in an ``Args:`` (or, where they
  are kept as they are, ``Attributes:``) section of the class docstring; a dataclass's fields
  are documented where they are declared, with their units.

Properties need a docstring only. The API reference pages (``docs/api/*.md``) must render every
public symbol, so the test also checks that each one appears there as a ``:::`` directive.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
API_DOCS = REPO_ROOT / "docs" / "api"

PUBLIC_MODULES = [
    "powerzoo.envs",
    "powerzoo.envs.wrappers",
    "powerzoo.tasks",
    "powerzoo.tasks.base",
    "powerzoo.tasks.spec",
    "powerzoo.rl",
    "powerzoo.rl.campaigns",
    "powerzoo.benchmarks",
    "powerzoo.benchmarks.offline",
    "powerzoo.data",
    "powerzoo.physics",
    "powerzoo.devices",
    "powerzoo.integrations.rllib",
    "powerzoo.integrations.tune",
]

NEEDS = {"powerzoo.integrations.rllib": "ray", "powerzoo.integrations.tune": "ray"}

SECTION = re.compile(r"^(\w[\w ]*):\s*$")
ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:")


def sections(doc: str) -> dict[str, list[str]]:
    """The Google-style sections of a docstring: title -> the names its entries document."""
    out: dict[str, list[str]] = {}
    lines = inspect.cleandoc(doc).splitlines()
    i = 0
    while i < len(lines):
        match = SECTION.match(lines[i])
        if not match:
            i += 1
            continue
        names = out.setdefault(match.group(1), [])
        i += 1
        body_indent = None
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
            line = lines[i]
            if line.strip():
                indent = len(line) - len(line.lstrip())
                body_indent = indent if body_indent is None else body_indent
                entry = ENTRY.match(line.strip())
                if indent == body_indent and entry:
                    names.append(entry.group(1).lstrip("*"))
            i += 1
    return out


def parameter_names(func) -> list[str]:
    """The parameters a caller passes (``self`` and ``cls`` left out)."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    return [name for name in signature.parameters if name not in ("self", "cls")]


def returns_something(func) -> bool:
    """True when the return annotation is present and not ``None``."""
    annotation = inspect.signature(func).return_annotation
    return annotation not in (inspect.Signature.empty, None, "None", "NoReturn")


def public_members(cls) -> Iterator[tuple[str, object, str]]:
    """(name, function, kind) for the public methods and properties ``cls`` defines itself."""
    for name, attr in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(attr, property):
            yield name, attr, "property"  # its __doc__ is the getter's or the doc= given
        elif isinstance(attr, (staticmethod, classmethod)):
            yield name, inspect.unwrap(attr.__func__), "method"
        elif inspect.isfunction(attr):
            yield name, inspect.unwrap(attr), "method"


def public_symbols() -> Iterator[tuple[str, object]]:
    """(qualified name as the user imports it, object) for every public class and function."""
    seen: set[int] = set()
    for module_name in PUBLIC_MODULES:
        if module_name in NEEDS:
            try:
                importlib.import_module(NEEDS[module_name])
            except ImportError:
                continue
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)) or id(obj) in seen:
                continue
            seen.add(id(obj))
            yield f"{module_name}.{name}", obj


def problems_of_callable(qualname: str, func, kind: str) -> list[str]:
    doc = func.__doc__
    if not doc or not doc.strip():
        return [f"{qualname}: no docstring"]
    if kind == "property":
        return []
    found = sections(doc)
    problems = []
    params = parameter_names(func)
    documented = found.get("Args", []) + found.get("Arguments", [])
    missing = [p for p in params if p not in documented]
    if missing:
        problems.append(f"{qualname}: Args does not name {missing}")
    if returns_something(func) and not ({"Returns", "Yields"} & set(found)):
        problems.append(f"{qualname}: no Returns section")
    return problems


def is_own_init(cls) -> bool:
    """True when the class body defines ``__init__`` (not a Protocol's or a generated one)."""
    init = vars(cls).get("__init__")
    return inspect.isfunction(init) and init.__qualname__ == f"{cls.__qualname__}.__init__"


def problems_of_class(qualname: str, cls) -> list[str]:
    doc = cls.__doc__
    if not doc or not doc.strip():
        return [f"{qualname}: no docstring"]
    found = sections(doc)
    problems = []
    if is_own_init(cls) and not dataclasses.is_dataclass(cls):
        params = parameter_names(vars(cls)["__init__"])
        documented = found.get("Args", []) + found.get("Attributes", [])
        missing = [p for p in params if p not in documented]
        if missing:
            problems.append(f"{qualname}: class Args does not name {missing}")
    for name, func, kind in public_members(cls):
        problems += problems_of_callable(f"{qualname}.{name}", func, kind)
    return problems


def all_problems() -> list[str]:
    problems = []
    for qualname, obj in public_symbols():
        if inspect.isclass(obj):
            problems += problems_of_class(qualname, obj)
        else:
            problems += problems_of_callable(qualname, obj, "function")
    return problems


def test_public_api_is_not_empty():
    symbols = dict(public_symbols())
    assert len(symbols) > 100
    assert "powerzoo.rl.make_env" in symbols or "powerzoo.envs.make_env" in symbols


def test_every_public_symbol_is_documented():
    problems = all_problems()
    assert not problems, f"{len(problems)} docstring problems:\n" + "\n".join(problems)


def test_api_pages_render_every_public_symbol():
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(API_DOCS.glob("*.md")))
    rendered = set(re.findall(r"^::: ([\w.]+)", text, flags=re.M))
    missing = []
    for qualname, obj in public_symbols():
        canonical = f"{obj.__module__}.{obj.__qualname__}"
        if canonical not in rendered and qualname not in rendered:
            missing.append(f"{qualname} (::: {canonical})")
    assert not missing, "public symbols missing from docs/api/*.md:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    "doc, expected",
    [
        (
            "Do x.\n\nArgs:\n    a: one.\n    b (int): two,\n        wrapped.\n",
            {"Args": ["a", "b"]},
        ),
        ("Do x.\n\nReturns:\n    The thing.\n", {"Returns": []}),
    ],
)
def test_section_parser(doc, expected):
    assert sections(doc) == expected


if __name__ == "__main__":  # an audit: python tests/docs/test_docstrings.py
    found = all_problems()
    print("\n".join(found))
    print(len(dict(public_symbols())), "public symbols,", len(found), "problems")
