"""A trained trial on held-out scenario families: the episodes a campaign with
``evaluation.families`` adds to each trial record.

The families of a task are its splits beyond train / val / test
(:func:`powerzoo.benchmarks.families.scenario_families`: the calendar's stress splits and a task's
own). A campaign names how many of them (the first ``k`` in the task's spec order) or which ones;
each trial's tested model then runs one episode per family day whose calendar day is one of the
protocol's test days, with the env seed :mod:`powerzoo.benchmarks.families` uses for that pair
(``protocol seed + test day index``), so the rows pair with ``powerzoo families``' baselines on
the same days and env seeds, and with the trial's own test episode of that calendar day.

Each row: ``family``, ``day_id`` (the family split's day), ``test_day_id`` (its twin on the test
split), ``env_seed``, ``return``, ``length``, ``total_cost`` and ``cost_<name>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "FAMILY_FIELDS",
    "family_plan",
    "family_problem",
    "resolve_families",
    "run_family_episodes",
]

FAMILY_FIELDS = ("day_id", "test_day_id", "env_seed", "return", "length", "total_cost")
"""Fields of every family episode row (plus ``cost_<name>`` per constraint)."""


def resolve_families(task: str, wanted: int | Sequence[str] | None) -> tuple[str, ...]:
    """The families a campaign's ``evaluation.families`` gives ``task``: none (``None`` or 0),
    the first ``k`` of its families in the spec's order, or the listed ones it has.

    Args:
        task: A registered task.
        wanted: ``evaluation.families``.

    Returns:
        Family (split) names.
    """
    from powerzoo.benchmarks.families import scenario_families

    known = scenario_families(task)
    if wanted is None:
        return ()
    if isinstance(wanted, int):
        return known[:wanted]
    return tuple(f for f in wanted if f in known)


def family_plan(
    task: str, family: str, protocol_days: Sequence[int], protocol_seed: int
) -> list[tuple[int, int, int]]:
    """``(family day, test day, env seed)`` of every family episode of ``task``: the family's
    days whose calendar day is a protocol test day, each with ``protocol_seed + test day``.

    Args:
        task: A registered task.
        family: One of its families.
        protocol_days: The test days a trial is tested on (split day indices).
        protocol_seed: The protocol's env seed of test day 0.

    Returns:
        One triple per episode, in the family's day order.
    """
    from powerzoo.benchmarks.families import paired_days

    tested = {int(d) for d in protocol_days}
    return [
        (int(f), int(t), int(protocol_seed) + int(t))
        for f, t in paired_days(task, family)
        if int(t) in tested
    ]


def run_family_episodes(
    task: str,
    families: Sequence[str],
    make_env: Callable[[str], Any],
    make_policy: Callable[[Any], Any],
    protocol_days: Sequence[int],
    protocol_seed: int,
    cost_names: Sequence[str],
) -> dict[str, list[dict[str, Any]]]:
    """Run a trained policy on each family's episodes (:func:`family_plan`).

    Args:
        task: The trial's task.
        families: Families to run.
        make_env: ``split -> env`` (the trial's evaluation env, objective reward).
        make_policy: ``env -> policy`` (the tested model, deterministic).
        protocol_days: The protocol's test days.
        protocol_seed: The protocol's env seed of test day 0.
        cost_names: The task's constraint names, in the env's order.

    Returns:
        ``{family: rows}`` (module docstring); a family with no test-day twin has no rows.
    """
    from powerzoo.benchmarks.evaluation import rollout

    out: dict[str, list[dict[str, Any]]] = {}
    for family in families:
        plan = family_plan(task, family, protocol_days, protocol_seed)
        rows: list[dict[str, Any]] = []
        if plan:
            env = make_env(family)
            policy = make_policy(env)
            try:
                for day, test_day, env_seed in plan:
                    record = rollout(env, policy, day_id=day, seed=env_seed)
                    costs = np.asarray(record["costs"], dtype=np.float64)
                    row = {
                        "day_id": day,
                        "test_day_id": test_day,
                        "env_seed": env_seed,
                        "return": float(record["return"]),
                        "length": int(record["length"]),
                        "total_cost": float(costs.sum()),
                    }
                    row.update(
                        {f"cost_{n}": float(c) for n, c in zip(cost_names, costs, strict=True)}
                    )
                    rows.append(row)
            finally:
                close = getattr(env, "close", None)
                if callable(close):
                    close()
        out[family] = rows
    return out


def family_problem(
    record: Mapping[str, Any], families: Sequence[str], cost_names: Sequence[str]
) -> str | None:
    """Why a trial record's ``families`` do not answer the campaign's (``None`` if they do):
    the families missing, or a row without a finite number in a field."""
    held = record.get("families")
    if not families:
        return None
    if not isinstance(held, Mapping):
        return "no family episodes (the campaign asks for " + ", ".join(families) + ")"
    missing = [f for f in families if f not in held]
    if missing:
        return f"no episodes on the famil(ies) {', '.join(missing)}"
    numbers = ("return", "total_cost", *(f"cost_{n}" for n in cost_names))
    for family in families:
        for i, row in enumerate(held[family]):
            for key in (*FAMILY_FIELDS, *numbers):
                value = row.get(key) if isinstance(row, Mapping) else None
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    return f"{family} episode {i}: {key} is {value!r}"
                if not np.isfinite(value):
                    return f"{family} episode {i}: {key} is {value!r}, not a finite number"
    return None
