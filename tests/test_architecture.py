"""The package's shape: layers only import downwards, no import cycles, no oversized modules.

Layers (as in docs/architecture.md), lowest first. A module may import from its own
layer and the ones below it; every import counts, also those inside functions and under
``TYPE_CHECKING``.
"""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "powerzoo"

LAYERS = (
    (
        "powerzoo.fileio",
        "powerzoo.lazy",
        "powerzoo.progress",
        "powerzoo.provenance",
        "powerzoo.scratch",
    ),  # utilities: no PowerZoo imports at all
    ("powerzoo.physics",),
    ("powerzoo.devices",),
    ("powerzoo.data",),
    ("powerzoo.tasks",),
    (
        "powerzoo.envs",
        "powerzoo",
    ),  # the package __init__ registers the Gymnasium ids (envs.registration)
    ("powerzoo.benchmarks",),
    ("powerzoo.rl",),
    ("powerzoo.integrations",),  # other engines (Ray: RLlib, Tune); ray itself is imported lazily
    ("powerzoo.cli", "powerzoo.__main__"),  # `python -m powerzoo` runs the command line
)
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or (prefix != "powerzoo" and module.startswith(prefix + ".")):
                return index
    raise AssertionError(
        f"{module} belongs to no layer; add it to LAYERS (and docs/architecture.md)"
    )


def _resolve(name: str) -> str:
    """The module an import of ``name`` loads: itself if it is a module, else its package."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports_of(module: str) -> set[str]:
    """PowerZoo modules imported anywhere in ``module``.

    The bare ``powerzoo`` package and the module's own parent packages are left out: importing a
    module always runs its parents' ``__init__`` first, so they are no dependency of its choosing.
    """
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            if name.startswith("powerzoo."):
                target = _resolve(name)
                if target != module and not module.startswith(target + "."):
                    found.add(target)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_belongs_to_a_layer():
    for module in MODULES:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module):
    upward = sorted(t for t in GRAPH[module] if layer_of(t) > layer_of(module))
    assert not upward, f"{module} (layer {layer_of(module)}) imports higher layers: {upward}"


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm: the groups of modules that
    import each other (directly or around a loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.add(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_import_cycles():
    cycles = _strongly_connected(GRAPH)
    assert not cycles, f"import cycles: {[sorted(g) for g in cycles]}"


def _task_homes() -> set[str]:
    """The modules (or packages) of the built-in tasks: the ``"module:Class"`` strings of
    ``tasks/registry.py``, read from its source."""
    tree = ast.parse(MODULES["powerzoo.tasks.registry"].read_text(encoding="utf-8"))
    return {
        node.value.split(":")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"powerzoo\.tasks\.[\w.]+:\w+", node.value)
    }


def _task_of(module: str, homes: set[str]) -> str | None:
    """The task module or package ``module`` belongs to; None for a shared one (base, spec,
    feeder, tariffs, transmission, datacentre, registry, ...)."""
    return next((h for h in homes if module == h or module.startswith(h + ".")), None)


def test_no_task_imports_another_tasks_module():
    """Tasks share code only through the shared modules of ``tasks/``, never one another's."""
    homes = _task_homes()
    assert {"powerzoo.tasks.dc_microgrid", "powerzoo.tasks.dc_scheduling"} <= homes
    crossing = sorted(
        (module, target)
        for module in GRAPH
        if (owner := _task_of(module, homes))
        for target in GRAPH[module]
        if _task_of(target, homes) not in (None, owner)
    )
    assert not crossing, f"task modules importing another task's modules: {crossing}"


def _wing(module: str) -> str:
    """The training wing of a ``powerzoo.rl`` module: ``rl`` itself, ``rl.sb3``, ``rl.mappo``..."""
    parts = module.split(".")
    if len(parts) >= 3 and MODULES[".".join(parts[:3])].name == "__init__.py":
        return ".".join(parts[:3])
    return "powerzoo.rl"


def test_no_import_loop_between_the_training_wings():
    """``rl/`` (shared pieces) is imported by ``rl/sb3``, ``rl/mappo``, ``rl/step``,
    ``rl/campaigns`` and never imports them back (a trainer class named by string is no import;
    the package ``__init__``, the public entry that re-exports them, is left out)."""
    rl = [m for m in GRAPH if m.startswith("powerzoo.rl.")]
    wings: dict[str, set[str]] = {}
    for module in rl:
        targets = {_wing(t) for t in GRAPH[module] if t.startswith("powerzoo.rl.")}
        wings.setdefault(_wing(module), set()).update(targets - {_wing(module)})
    loops = _strongly_connected(wings)
    assert not loops, f"import loops between training wings: {[sorted(g) for g in loops]}"


def test_the_cycle_finder_sees_a_cycle():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        {"a", "b", "c"}
    ]


def test_the_layer_rule_catches_an_upward_import():
    assert (
        layer_of("powerzoo.rl.sb3.trainer")
        > layer_of("powerzoo.benchmarks.evaluation")
        > layer_of("powerzoo.envs.make")
    )
    assert layer_of("powerzoo") == layer_of("powerzoo.envs.registration")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_over_500_lines(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, (
        f"{MODULES[module].relative_to(PACKAGE.parent)} has {lines} lines; split it by job"
    )
