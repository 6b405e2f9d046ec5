"""Every documented user-facing import still works.

The README's Python blocks are read at test time, so a new example there is checked too; the
imports that user scripts rely on beyond the README are listed here.
"""

import importlib
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"

USER_SCRIPT_IMPORTS = [
    "from powerzoo.rl import make_env",
    "from powerzoo.rl import Trainer",
    "from powerzoo.benchmarks.offline import DatasetGenerator, DatasetLoader",
    "from powerzoo.benchmarks.policies import RandomPolicy",
]


def readme_imports() -> list[str]:
    """``from powerzoo... import ...`` / ``import powerzoo...``
    lines of the README's code blocks."""
    lines = []
    for block in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S):
        lines += [
            line.strip()
            for line in block.splitlines()
            if re.match(r"\s*(from|import) powerzoo", line)
        ]
    return lines


def readme_dotted_names() -> list[str]:
    """Dotted ``powerzoo.x.y`` names the README's prose
    points readers at (modules or attributes)."""
    names = re.findall(r"`(powerzoo(?:\.[a-z_][a-z0-9_]*)+)", README.read_text(encoding="utf-8"))
    return sorted(set(names))


def test_readme_shows_imports():
    assert len(readme_imports()) >= 3


@pytest.mark.parametrize("statement", sorted(set(readme_imports() + USER_SCRIPT_IMPORTS)))
def test_documented_import_works(statement):
    exec(statement, {})


@pytest.mark.parametrize("dotted", readme_dotted_names())
def test_documented_dotted_name_resolves(dotted):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return
    pytest.fail(f"{dotted} does not resolve")


@pytest.mark.parametrize(
    "package", ["powerzoo.benchmarks", "powerzoo.rl", "powerzoo.envs", "powerzoo.tasks"]
)
def test_every_package_level_name_resolves(package):
    module = importlib.import_module(package)
    assert module.__all__
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"


def test_benchmarks_package_exports_the_user_facing_names():
    from powerzoo.benchmarks import (
        DatasetGenerator,
        DatasetLoader,
        RandomPolicy,
        evaluate,
        normalized_score,
    )
    from powerzoo.benchmarks.evaluation import evaluate as evaluate_in_module

    assert evaluate is evaluate_in_module
    assert callable(normalized_score) and DatasetGenerator and DatasetLoader and RandomPolicy
