"""Registry of tasks: names, lazy construction, human and JSON descriptions.

Every task, built-in or not, is added with :func:`register_task`: under a name, either as a
``"module:Class"`` string (the module is imported the first time the task is used, which keeps
``import powerzoo`` light) or as the :class:`~powerzoo.tasks.base.Task` subclass itself. The
built-in tasks are registered through the same function at the end of this module.

The Gymnasium layer learns about Gymnasium ids through :func:`add_gym_id_listener` (this layer
never imports it): a listener hears about every task with a Gymnasium id, now and later.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from powerzoo.tasks.base import Task
    from powerzoo.tasks.spec import TaskSpec

__all__ = [
    "register_task",
    "unregister_task",
    "list_tasks",
    "get_task_class",
    "make_task",
    "task_spec",
    "info",
    "describe",
    "add_gym_id_listener",
]

GymIdListener = Callable[[str, "str | None"], None]

_ENTRY_POINT = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


@dataclasses.dataclass
class _Entry:
    """One registered task: where its class lives, and its Gymnasium id once known."""

    entry_point: str | type
    gym_id: str | None
    task_class: type[Task] | None = None  # set once imported and checked


_REGISTRY: dict[str, _Entry] = {}
_LISTENERS: list[GymIdListener] = []


def register_task(
    name: str,
    entry_point: str | type[Task],
    *,
    gym_id: str | None = None,
    overwrite: bool = False,
) -> None:
    """Register a task under ``name`` so that ``make_env(name)`` and the rest of PowerZoo find it.

    ``entry_point`` is the :class:`~powerzoo.tasks.base.Task` subclass, or a ``"module:Class"``
    string imported the first time the task is used. The class's ``make_spec()`` must name the
    task ``name`` (``spec.task_id``). Its Gymnasium id (``spec.gym_id``, if any) is registered
    with Gymnasium, so ``gymnasium.make(spec.gym_id)`` builds the task after ``import powerzoo``.

    With a class, ``gym_id`` can be left out: it is read from the spec. With a string, the spec is
    not read until the task is used, so pass the spec's ``gym_id`` here for ``gymnasium.make`` to
    find the task before that; it is checked against the spec when the class is imported.

    Raises ``ValueError`` for an empty name, a name already registered (unless ``overwrite``), an
    entry point string that is not ``"module:Class"`` or whose module cannot be found, a spec
    whose ``task_id`` is not ``name``, a ``gym_id`` the spec does not declare, or a Gymnasium id
    that another task holds; ``TypeError`` for an entry point that is neither a string nor a
    concrete ``Task`` subclass.

    Args:
        name: Task name, the key of ``make_env(name)``.
        entry_point: The ``Task`` subclass, or ``"module:Class"`` imported on first use.
        gym_id: Gymnasium id to register (default: the spec's ``gym_id``, read from a class).
        overwrite: Replace a task already registered under ``name``.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"a task name must be a non-empty string without outer spaces: {name!r}")
    if name in _REGISTRY and not overwrite:
        raise ValueError(
            f"task {name!r} is already registered (entry point "
            f"{_entry_point_text(_REGISTRY[name].entry_point)}); pass overwrite=True to replace it"
        )
    if gym_id is not None and (not isinstance(gym_id, str) or not gym_id):
        raise ValueError(f"gym_id must be a non-empty string or None, got {gym_id!r}")
    task_class = None
    if isinstance(entry_point, str):
        _check_entry_point_string(name, entry_point)
    else:
        task_class, spec = _checked_class(name, entry_point, gym_id)
        gym_id = spec.gym_id
    _check_gym_id_free(name, gym_id)
    previous = _REGISTRY.get(name)
    _REGISTRY[name] = _Entry(entry_point, gym_id, task_class)
    try:
        if gym_id is not None or previous is not None:
            _announce(name, gym_id)
    except Exception:
        if previous is None:
            del _REGISTRY[name]
        else:
            _REGISTRY[name] = previous
        raise


def unregister_task(name: str) -> None:
    """Remove task ``name`` (and its Gymnasium id); ``ValueError`` if it is not registered.

    Args:
        name: A registered task name.
    """
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"unknown task {name!r}; registered tasks: {', '.join(list_tasks())}")
    del _REGISTRY[name]
    _announce(name, None)


def add_gym_id_listener(listener: GymIdListener) -> None:
    """Call ``listener(name, gym_id)`` for every task with a Gymnasium id, now and on changes.

    Later calls come when a task with a Gymnasium id is registered, when a lazily registered
    task's id becomes known at its first use, and with ``gym_id=None`` when a task is removed or
    replaced by one without an id. Adding the same listener twice replays the ids only.
    """
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)
    for name, entry in _REGISTRY.items():
        if entry.gym_id is not None:
            listener(name, entry.gym_id)


def list_tasks() -> list[str]:
    """Names of every registered task, sorted.

    Returns:
        The registered task names, sorted.
    """
    return sorted(_REGISTRY)


def get_task_class(name: str) -> type[Task]:
    """Task class registered under ``name``.

    Unknown names raise ``ValueError`` listing the valid ones. A ``"module:Class"`` entry is
    imported and checked on first use.

    Args:
        name: A registered task name.

    Returns:
        The ``Task`` subclass.
    """
    entry = _REGISTRY.get(name) if isinstance(name, str) else None
    if entry is None:
        raise ValueError(f"unknown task {name!r}; registered tasks: {', '.join(list_tasks())}")
    if entry.task_class is None:
        assert isinstance(entry.entry_point, str)
        module_name, attribute = entry.entry_point.split(":")
        module = importlib.import_module(module_name)
        if not hasattr(module, attribute):
            raise ValueError(
                f"task {name!r}: module {module_name} has no {attribute!r} "
                f"(entry point {entry.entry_point!r})"
            )
        task_class, spec = _checked_class(name, getattr(module, attribute), entry.gym_id)
        if entry.gym_id is None and spec.gym_id is not None:
            _check_gym_id_free(name, spec.gym_id)
            _announce(name, spec.gym_id)
            entry.gym_id = spec.gym_id
        entry.task_class = task_class
    return entry.task_class


def make_task(name: str, split: str = "train", **task_kwargs: Any) -> Task:
    """Build task ``name`` on ``split`` with optional task parameters.

    Args:
        name: A registered task name.
        split: Date split the task's episodes are drawn from (``"train"``, ``"val"``, ``"test"``
            or a stress split).
        **task_kwargs: Task parameters (fields of the task's params dataclass).

    Returns:
        The task instance.
    """
    return get_task_class(name)(split, **task_kwargs)


def task_spec(name: str, **task_kwargs: Any) -> TaskSpec:
    """The spec of task ``name`` without building its data.

    Args:
        name: A registered task name.
        **task_kwargs: Task parameters (fields of the task's params dataclass).

    Returns:
        The task's ``TaskSpec``.
    """
    return get_task_class(name).make_spec(**task_kwargs)


# ---- checks -------------------------------------------------------------------------------
def _entry_point_text(entry_point: str | type) -> str:
    if isinstance(entry_point, str):
        return repr(entry_point)
    return f"{entry_point.__module__}:{entry_point.__qualname__}"


def _check_entry_point_string(name: str, entry_point: str) -> None:
    """``ValueError`` unless ``entry_point`` is ``"module:Class"`` with a module that exists."""
    if not _ENTRY_POINT.fullmatch(entry_point):
        raise ValueError(
            f"entry point of task {name!r} must be 'package.module:ClassName', got {entry_point!r}"
        )
    module_name = entry_point.split(":")[0]
    try:
        found = importlib.util.find_spec(module_name)
    except ModuleNotFoundError:  # a parent package is missing
        found = None
    if found is None:
        raise ValueError(
            f"entry point of task {name!r}: no module named {module_name!r} ({entry_point!r})"
        )


def _checked_class(name: str, task_class: Any, gym_id: str | None) -> tuple[type[Task], TaskSpec]:
    """The class and its default spec, after checking it is a concrete Task named ``name``."""
    from powerzoo.tasks.base import Task

    if not (isinstance(task_class, type) and issubclass(task_class, Task)):
        raise TypeError(
            f"entry point of task {name!r} must be a 'module:Class' string or a subclass of "
            f"powerzoo.tasks.base.Task, got {task_class!r}"
        )
    if inspect.isabstract(task_class):
        missing = ", ".join(sorted(task_class.__abstractmethods__))
        raise TypeError(f"task {name!r}: {task_class.__qualname__} does not implement {missing}")
    try:
        spec = task_class.make_spec()
    except TypeError as error:
        raise TypeError(
            f"task {name!r}: {task_class.__qualname__}.make_spec() must work without arguments "
            f"(the default parameters): {error}"
        ) from error
    if spec.task_id != name:
        raise ValueError(
            f"task {name!r}: {task_class.__qualname__}.make_spec() names the task "
            f"{spec.task_id!r}; register it under that name"
        )
    if gym_id is not None and spec.gym_id != gym_id:
        raise ValueError(
            f"task {name!r}: registered with gym_id {gym_id!r} but its spec declares "
            f"{spec.gym_id!r}"
        )
    return task_class, spec


def _check_gym_id_free(name: str, gym_id: str | None) -> None:
    """``ValueError`` if another registered task holds Gymnasium id ``gym_id``."""
    for other, entry in _REGISTRY.items():
        if gym_id is not None and other != name and entry.gym_id == gym_id:
            raise ValueError(f"task {name!r}: Gymnasium id {gym_id!r} belongs to task {other!r}")


def _announce(name: str, gym_id: str | None) -> None:
    for listener in _LISTENERS:
        listener(name, gym_id)


# ---- descriptions -------------------------------------------------------------------------
BaselineNumbers = Mapping[str, Mapping[str, Any]]


def info(name: str, baselines: BaselineNumbers | None = None) -> dict[str, Any]:
    """JSON-ready description of task ``name``: spaces, reward, costs, splits, baselines, ids.

    ``baselines`` maps a baseline policy to its numbers (``{"split", "mean", "std"}``, returns in
    $ per episode); a baseline of the spec without numbers is ``None``.
    :func:`powerzoo.benchmarks.catalog.info` fills them from the packaged baselines table.

    Args:
        name: A registered task name.
        baselines: Per baseline policy, its numbers (or ``None``); default none.

    Returns:
        A dict of plain JSON types.
    """
    spec = task_spec(name)
    numbers = dict(baselines or {})
    return {
        "task_id": spec.task_id,
        "description": spec.description,
        "agent_mode": spec.agent_mode,
        "n_agents": len(spec.agents),
        "agents": list(spec.agents),
        "agent_groups": {
            g.name: {
                "agents": list(g.agents),
                "description": g.description,
                "action": [
                    n.removeprefix(f"{g.agents[0]}.") for n in spec.agent_action_names(g.agents[0])
                ],
            }
            for g in spec.groups
        },
        "observation_space": spec.observation.describe(),
        "action_space": spec.action.describe(),
        "reward": {
            "description": spec.reward_doc,
            "terms": list(spec.reward_terms),
            "presets": list(spec.reward_presets),
        },
        "constraint_names": list(spec.constraint_names),
        "constraint_units": list(spec.constraint_units),
        "selected_constraints": list(spec.selected_constraints),
        "cost_thresholds": dict(spec.cost_thresholds),
        "horizon": spec.horizon,
        "step_minutes": spec.step_minutes,
        "gamma": spec.gamma,
        "splits": list(spec.splits),
        "obs_modes": list(spec.obs_modes),
        "forecast_series": list(spec.forecast_series),
        "termination": spec.termination_doc,
        "baselines": {b: numbers.get(b) for b in spec.baselines},
        "idle": spec.idle_doc or None,  # what the idle baseline (doing nothing) does, if any
        "gym_id": spec.gym_id,
        "config_template": {
            "task": spec.task_id,
            "env": {"split": "train", "normalize": True},
            "algorithm": "PPO",
            "algorithm_kwargs": {},  # trainers discount with the task's own gamma
            "total_timesteps": 100_000,
            "seed": 0,
            "evaluation": {"split": "val", "freq": 10_000, "episodes": 8},
        },
    }


def describe(name: str, baselines: BaselineNumbers | None = None) -> str:
    """Human-readable summary of task ``name``: spaces, reward, costs, horizon, splits, baselines.

    ``baselines`` as in :func:`info` (mean returns in $ per episode are shown when given).

    Args:
        name: A registered task name.
        baselines: Per baseline policy, its numbers, as in :func:`info`.

    Returns:
        Several lines of text.
    """
    d = info(name, baselines)

    def vector(rows: list[dict[str, Any]]) -> str:
        return "\n".join(
            f"    {r['name']:<24} [{r['low']:g}, {r['high']:g}] {r['unit']}" for r in rows
        )

    baseline_text = ", ".join(
        f"{k} ({v['mean']:.2f} on {v['split']})" if v else k for k, v in d["baselines"].items()
    )
    costs = ", ".join(
        f"{n} [{u}]" for n, u in zip(d["constraint_names"], d["constraint_units"], strict=True)
    )
    thresholds = (
        ", ".join(f"{k} <= {v:g}/episode" for k, v in d["cost_thresholds"].items())
        or "none (the costs are reported only)"
    )
    terms, presets = ", ".join(d["reward"]["terms"]), ", ".join(d["reward"]["presets"])
    return "\n".join(
        [
            f"{d['task_id']} ({d['agent_mode']}-agent, {d['n_agents']} agent(s))",
            f"  {d['description']}",
            f"  horizon: {d['horizon']} steps x {d['step_minutes']} min (discount {d['gamma']:g})",
            *(
                [
                    "  agent groups: "
                    + "; ".join(
                        f"{name} ({len(g['agents'])}: {', '.join(g['action'])})"
                        for name, g in d["agent_groups"].items()
                    )
                ]
                if d["agent_mode"] == "multi"
                else []
            ),
            "  observation:",
            vector(d["observation_space"]),
            "  action:",
            vector(d["action_space"]),
            f"  reward: {d['reward']['description']}",
            f"    terms: {terms}; presets: {presets}",
            f"  constraint costs: {costs}",
            f"  CMDP (selected): {thresholds}",
            f"  termination: {d['termination']}",
            f"  splits: {', '.join(d['splits'])}",
            f"  forecastable series: {', '.join(d['forecast_series']) or 'none'}",
            f"  baselines: {baseline_text}",
            *([f"  idle (no control): {d['idle']}"] if d["idle"] else []),
            f"  gymnasium id: {d['gym_id']}",
        ]
    )


# ---- the built-in tasks -------------------------------------------------------------------
# name -> ("module:Class", Gymnasium id or None). The Gymnasium id repeats the spec's gym_id so
# that `import powerzoo` registers it without importing the task module; the first use of the
# task checks that the two agree (tests/envs/test_clients.py checks every built-in).
_BUILTIN_TASKS: dict[str, tuple[str, str | None]] = {
    "battery_arbitrage": (
        "powerzoo.tasks.battery_arbitrage:BatteryArbitrage",
        "powerzoo/BatteryArbitrage-v0",
    ),
    "dc_microgrid": ("powerzoo.tasks.dc_microgrid:DCMicrogrid", "powerzoo/DCMicrogrid-v0"),
    "dc_microgrid_safe": (
        "powerzoo.tasks.dc_microgrid:DCMicrogridSafe",
        "powerzoo/DCMicrogridSafe-v0",
    ),
    "dc_scheduling": ("powerzoo.tasks.dc_scheduling:DCScheduling", "powerzoo/DCScheduling-v0"),
    "marl_opf": ("powerzoo.tasks.economic_dispatch:MarlOpf", None),
    "opf_118": ("powerzoo.tasks.economic_dispatch:Opf118", None),
    "opf_118_7d": ("powerzoo.tasks.economic_dispatch:Opf118Week", None),
    "opf": ("powerzoo.tasks.economic_dispatch:Opf", None),
    "acopf_118": ("powerzoo.tasks.acopf:Acopf118", None),
    "voltage_control_118": ("powerzoo.tasks.voltage_control:VoltageControl118", None),
    "volt_var_123": ("powerzoo.tasks.volt_var:VoltVar123", "powerzoo/VoltVar123-v0"),
    "dso": ("powerzoo.tasks.dso:Dso", "powerzoo/DSO-v0"),
    "joint_trans_dist": ("powerzoo.tasks.joint_trans_dist:JointTransDist", None),
    "joint_trans_dist_7d": ("powerzoo.tasks.joint_trans_dist:JointTransDistWeek", None),
    "joint_trans_dist_118": ("powerzoo.tasks.joint_trans_dist:JointTransDist118", None),
    "marl_der_arbitrage": ("powerzoo.tasks.der_arbitrage:MarlDerArbitrage", None),
    "marl_ders_benchmark": ("powerzoo.tasks.ders_benchmark:MarlDersBenchmark", None),
    "marl_ev_v2g": ("powerzoo.tasks.ev_v2g:MarlEvV2g", None),
    "gencos_bidding": ("powerzoo.tasks.gencos_bidding:GencosBidding", None),
    "marl_uc": ("powerzoo.tasks.unit_commitment:MarlUc", None),
    "lv_unbalance": ("powerzoo.tasks.lv_unbalance:LvUnbalance", None),
    "tso": ("powerzoo.tasks.unit_commitment:Tso", "powerzoo/TSO-v0"),
}

for _name, (_entry_point, _gym_id) in _BUILTIN_TASKS.items():
    register_task(_name, _entry_point, gym_id=_gym_id)
