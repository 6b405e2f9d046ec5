"""Registry of tasks: names, lazy construction, human and JSON descriptions."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from powerzoo.tasks.base import Task
from powerzoo.tasks.spec import TaskSpec

__all__ = ["list_tasks", "get_task_class", "make_task", "task_spec", "info", "describe"]

# name -> "module:Class"; modules are imported only when a task is used (fast `import powerzoo`)
_TASKS: dict[str, str] = {
    "battery_arbitrage": "powerzoo.tasks.battery_arbitrage:BatteryArbitrage",
    "dc_microgrid": "powerzoo.tasks.dc_microgrid:DCMicrogrid",
    "dc_microgrid_safe": "powerzoo.tasks.dc_microgrid:DCMicrogridSafe",
    "dc_scheduling": "powerzoo.tasks.dc_scheduling:DCScheduling",
    "marl_opf": "powerzoo.tasks.economic_dispatch:MarlOpf",
    "opf_118": "powerzoo.tasks.economic_dispatch:Opf118",
    "opf_118_7d": "powerzoo.tasks.economic_dispatch:Opf118Week",
    "dso": "powerzoo.tasks.dso:Dso",
    "marl_der_arbitrage": "powerzoo.tasks.der_arbitrage:MarlDerArbitrage",
    "marl_ders_benchmark": "powerzoo.tasks.ders_benchmark:MarlDersBenchmark",
    "marl_ev_v2g": "powerzoo.tasks.ev_v2g:MarlEvV2g",
    "gencos_bidding": "powerzoo.tasks.gencos_bidding:GencosBidding",
    "marl_uc": "powerzoo.tasks.unit_commitment:MarlUc",
    "tso": "powerzoo.tasks.unit_commitment:Tso",
}

_BASELINES_FILE = Path(__file__).resolve().parent.parent / "benchmarks" / "baselines.json"


def list_tasks() -> list[str]:
    """Names of every registered task, sorted."""
    return sorted(_TASKS)


def get_task_class(name: str) -> type[Task]:
    """Task class registered under ``name``; unknown names raise ``ValueError`` listing the valid ones."""
    if not isinstance(name, str) or name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; registered tasks: {', '.join(list_tasks())}")
    module, cls = _TASKS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_task(name: str, split: str = "train", **task_kwargs: Any) -> Task:
    """Build task ``name`` on ``split`` with optional task parameters."""
    return get_task_class(name)(split, **task_kwargs)


def task_spec(name: str, **task_kwargs: Any) -> TaskSpec:
    """The spec of task ``name`` without building its data."""
    return get_task_class(name).make_spec(**task_kwargs)


def _baseline_numbers(task_id: str) -> dict[str, Any]:
    if not _BASELINES_FILE.is_file():
        return {}
    rows = json.loads(_BASELINES_FILE.read_text()).get("results", [])
    return {
        r["policy"]: {"split": r["split"], "mean": r["mean"], "std": r["std"]}
        for r in rows
        if r["task"] == task_id
    }


def info(name: str) -> dict[str, Any]:
    """JSON-ready description of task ``name`` (SPEC 3.1)."""
    spec = task_spec(name)
    numbers = _baseline_numbers(name)
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
        "splits": list(spec.splits),
        "obs_modes": list(spec.obs_modes),
        "forecast_series": list(spec.forecast_series),
        "termination": spec.termination_doc,
        "baselines": {b: numbers.get(b) for b in spec.baselines},
        "gym_id": spec.gym_id,
        "config_template": {
            "task": spec.task_id,
            "env": {"split": "train", "normalize": True},
            "algorithm": "PPO",
            "algorithm_kwargs": {"gamma": spec.gamma},
            "total_timesteps": 100_000,
            "seed": 0,
            "evaluation": {"split": "val", "freq": 10_000, "episodes": 8},
        },
    }


def describe(name: str) -> str:
    """Human-readable summary of task ``name``: spaces, reward, costs, horizon, splits, baselines."""
    d = info(name)

    def vector(rows: list[dict[str, Any]]) -> str:
        return "\n".join(
            f"    {r['name']:<24} [{r['low']:g}, {r['high']:g}] {r['unit']}" for r in rows
        )

    baselines = ", ".join(
        f"{k} ({v['mean']:.2f} on {v['split']})" if v else k for k, v in d["baselines"].items()
    )
    costs = ", ".join(
        f"{n} [{u}]" for n, u in zip(d["constraint_names"], d["constraint_units"], strict=True)
    )
    thresholds = ", ".join(f"{k} <= {v:g}/episode" for k, v in d["cost_thresholds"].items())
    return "\n".join(
        [
            f"{d['task_id']} ({d['agent_mode']}-agent, {d['n_agents']} agent(s))",
            f"  {d['description']}",
            f"  horizon: {d['horizon']} steps x {d['step_minutes']} min",
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
            f"    terms: {', '.join(d['reward']['terms'])}; presets: {', '.join(d['reward']['presets'])}",
            f"  constraint costs: {costs}",
            f"  CMDP (selected): {thresholds}",
            f"  termination: {d['termination']}",
            f"  splits: {', '.join(d['splits'])}",
            f"  forecastable series: {', '.join(d['forecast_series']) or 'none'}",
            f"  baselines: {baselines}",
            f"  gymnasium id: {d['gym_id']}",
        ]
    )
