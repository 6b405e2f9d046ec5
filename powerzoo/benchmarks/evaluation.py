"""Roll policies out and summarise returns and constraint costs (single-agent and multi-agent
envs).

One episode loop, :func:`rollout`, serves :func:`evaluate`, :func:`evaluate_days` and the offline
dataset collector. It accepts two kinds of env:

* a single-agent Gymnasium env (``make_env(task)``, any wrappers except the safe-RL 6-tuple one);
* a multi-agent env of PettingZoo's Parallel API: ``make_env(task, framework="pettingzoo")`` or
  the dict env ``make_env(task, framework="auto")``. ``obs`` and actions are ``{agent: array}``
  and ``step`` returns per-agent dicts; the episode ends when any agent's episode ends (the
  dict env's ``"__all__"`` flags say the same).

Costs are read from ``info["constraint_costs"]`` of every step, so no wrapper is needed. In a
multi-agent env the costs are shared: they are read from the first agent's info.

Return of a multi-agent episode: ``return`` is the **system return**, the episode's $ for the
system as a whole. In a shared-reward task (``spec.shared_reward``) every agent gets the team
reward, so the system return is that reward summed over the episode (each agent's return, their
mean); with per-agent rewards (competitive or split tasks) it is the sum of the agents' own
returns. ``team_return`` is always the sum over agents (``n_agents`` x the system return under a
shared reward) and ``agent_returns`` keeps each agent's own. :func:`return_unit` says which.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from powerzoo.benchmarks.policies import Policy, seed_policy
from powerzoo.benchmarks.storage import StorageMeter, daily_throughput, has_storage
from powerzoo.envs.introspect import agents_of, constraint_names_of, env_metadata, task_of
from powerzoo.tasks import task_spec

__all__ = [
    "rollout",
    "evaluate",
    "evaluate_days",
    "summarize_episodes",
    "interquartile_mean",
    "budget_flags",
    "COST_TOLERANCE",
    "return_unit",
    "per_episode_units",
    "EpisodeRecord",
    "StepCallback",
    "episode_metric_keys",
    "agents_of",
    "task_of",
    "env_metadata",
]

COST_TOLERANCE = 1e-3
"""An episode's cost counts as positive (and as over its budget) only by more than this, in the
cost's own unit (1 kWh of an MWh cost): the residue of a solver's or a power flow's tolerances,
summed over an episode, is not a violation."""

StepCallback = Callable[[Any, Any, Any, Any, bool, bool, dict[str, Any]], None]
"""``on_step(obs, action, reward, next_obs, terminated, truncated, info)`` (see :func:`rollout`)."""


def _shared_reward(env: Any) -> bool:
    """Whether every agent of multi-agent ``env`` gets the one team reward (``False``: unknown)."""
    task = task_of(env)
    return bool(getattr(getattr(task, "spec", None), "shared_reward", False))


def return_unit(spec: Any) -> str:
    """What a task's headline return measures (``spec``: its :class:`TaskSpec`), for tables:
    its reward's unit (``spec.reward_unit``: ``$`` on most tasks) per episode, and on a
    multi-agent task whose return that is."""
    n, unit = len(spec.agents), getattr(spec, "reward_unit", "$")
    if n == 1:
        return f"{unit} per episode"
    if spec.shared_reward:
        return (
            f"{unit} of system cost per episode (the shared reward, each agent's return; "
            f"team sum = {n} agents x this)"
        )
    return f"{unit} per episode (system: sum of the {n} agents' own returns)"


def per_episode_units(tasks: Sequence[str]) -> str:
    """The unit of the returns of ``tasks`` side by side, for a table across them: ``$ per
    episode``, naming the tasks whose reward has another unit (``TaskSpec.reward_unit``)."""
    others: dict[str, list[str]] = {}
    for task in tasks:
        unit = task_spec(task).reward_unit
        if unit != "$":
            others.setdefault(unit, []).append(task)
    return "$ per episode" + "".join(
        f"; {unit} on {', '.join(names)}" for unit, names in others.items()
    )


class EpisodeRecord(dict):
    """One episode: ``return`` (system return, module docstring), ``team_return`` and
    ``agent_returns`` ([n_agents]) (multi-agent only),
    ``length`` (steps), ``costs`` (sum per constraint, physical units), ``cost_steps`` (per
    constraint, the steps whose cost is above :data:`COST_TOLERANCE`), ``day_id`` and per-step
    ``trace``; ``metrics`` (on a task with ``episode_metrics``: each named step info value
    summed over the episode, :func:`episode_metric_keys`); with ``rollout(..., storage=True)``
    on a task with storage, ``storage_mwh``: the storage throughput of each calendar day of the
    episode (MWh, :mod:`powerzoo.benchmarks.storage`)."""


def rollout(
    env: Any,
    policy: Policy,
    *,
    day_id: int | None = None,
    seed: int | None = None,
    seed_policy_too: bool = False,
    trace_keys: Iterable[str] = (),
    on_step: StepCallback | None = None,
    storage: bool = False,
) -> EpisodeRecord:
    """Run one episode of ``policy`` in ``env`` and return its :class:`EpisodeRecord`.

    Args:
        env: a single-agent Gymnasium env or a multi-agent PettingZoo Parallel / dict env
            (module docstring).
        policy: anything with ``reset()`` and ``act(obs, info)``.
        day_id: start day of the split (``None``: drawn by the env's RNG).
        seed: passed to ``env.reset(seed=...)``.
        seed_policy_too: also seed the policy with ``seed`` (:func:`seed_policy`), so the whole
            episode is reproducible from ``seed`` alone.
        trace_keys: info keys recorded at every step (for plots).
        on_step: called after every step with ``(obs, action, reward, next_obs, terminated,
            truncated, info)``; for a multi-agent env ``obs`` / ``action`` / ``next_obs`` are the
            agent dicts, ``reward`` is the per-agent array [n_agents] and ``info`` the first
            agent's info (the shared keys).
        storage: on a task with storage, record ``storage_mwh``, the storage throughput of each
            day of the episode from the whole joint ``action_applied``
            (:class:`~powerzoo.benchmarks.storage.StorageMeter`); ignored on other tasks.

    Returns:
        The episode's record: return ($), per-cost totals (each cost's unit), length, traces.
    """
    agents = agents_of(env)
    options = None if day_id is None else {"day_id": day_id}
    obs, info = env.reset(seed=seed, options=options)
    if seed_policy_too:
        seed_policy(policy, seed)
    policy.reset()
    total: Any = 0.0 if agents is None else np.zeros(len(agents))
    length, done = 0, False
    costs: np.ndarray | None = None
    cost_steps: np.ndarray | None = None  # steps with each cost above COST_TOLERANCE
    shared: dict[str, Any] = info if agents is None else info[agents[0]]
    trace: dict[str, list[Any]] = {k: [] for k in trace_keys}
    meter = _storage_meter(env) if storage else None
    metric_keys = episode_metric_keys(env)
    metrics = np.zeros(len(metric_keys))
    while not done:
        action = policy.act(obs, info)
        next_obs, reward, terminated, truncated, info = env.step(action)
        if agents is not None:
            reward = np.fromiter((reward[a] for a in agents), dtype=np.float64, count=len(agents))
            terminated, truncated = _any_agent(terminated, agents), _any_agent(truncated, agents)
            shared = info[agents[0]]
        else:
            shared = info
        step_costs = np.asarray(shared["constraint_costs"], dtype=np.float64)
        costs = step_costs.copy() if costs is None else costs + step_costs
        positive = (step_costs > COST_TOLERANCE).astype(np.int64)
        cost_steps = positive if cost_steps is None else cost_steps + positive
        total += reward
        length += 1
        for k in trace:
            trace[k].append(shared[k])
        for j, k in enumerate(metric_keys):
            metrics[j] += float(np.sum(shared[k]))
        if meter is not None:
            meter.add(
                shared["action_applied"]
                if agents is None
                else np.concatenate([np.ravel(info[a]["action_applied"]) for a in agents])
            )
        if on_step is not None:
            on_step(obs, action, reward, next_obs, terminated, truncated, shared)
        obs = next_obs
        done = bool(terminated or truncated)
    record = EpisodeRecord(
        {
            "return": float(np.sum(total)),
            "length": length,
            "costs": costs,
            "cost_steps": cost_steps,
            "day_id": shared.get("day_id"),
            "trace": {k: np.asarray(v) for k, v in trace.items()},
        }
    )
    if meter is not None:
        record["storage_mwh"] = meter.days
    if metric_keys:
        record["metrics"] = dict(zip(metric_keys, metrics.tolist(), strict=True))
    if agents is not None:
        record["agent_returns"] = total
        record["team_return"] = record["return"]
        if _shared_reward(env):
            record["return"] = float(np.mean(total))
    return record


def episode_metric_keys(env: Any) -> tuple[str, ...]:
    """The step ``info`` keys the task of ``env`` asks to be summed over each episode (its
    ``episode_metrics`` attribute, e.g. ``("congested",)``: the steps with a binding branch);
    ``()`` for a task without any or an env without a PowerZoo task."""
    task = task_of(env)
    return tuple(getattr(task, "episode_metrics", ()) or ()) if task is not None else ()


def _storage_meter(env: Any) -> StorageMeter | None:
    """A storage meter for ``env``'s task, or ``None`` when it has no storage (or no spec)."""
    spec = getattr(task_of(env), "spec", None)
    return StorageMeter(spec) if spec is not None and has_storage(spec) else None


def _any_agent(flags: dict[str, Any], agents: list[str]) -> bool:
    """Whether any agent's flag is set (the dict env's ``"__all__"`` when it has one)."""
    flag = flags.get("__all__")
    return any(flags[a] for a in agents) if flag is None else bool(flag)


def interquartile_mean(values: Sequence[float] | np.ndarray) -> float:
    """Mean of the middle 50 % of ``values``: ``floor(n/4)``
    values cut from each end (rliable's IQM).

    Args:
        values: Numbers (returns, in their own unit).

    Returns:
        The interquartile mean.
    """
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if x.size == 0:
        raise ValueError("interquartile_mean needs at least one value")
    cut = x.size // 4
    return float(x[cut : x.size - cut].mean())


def summarize_episodes(
    records: Sequence[EpisodeRecord], env: Any, task_id: str | None = None
) -> dict[str, Any]:
    """Summary of episodes: mean / std / IQM return, mean cost per constraint, violation rate,
    length.

    ``mean_costs[name]`` is the mean over episodes of the cost summed over the episode (physical
    units) and ``episode_costs[name]`` the per-episode sums; ``violation_rate`` is the fraction of
    episodes in which some selected constraint's cost exceeds :data:`COST_TOLERANCE`
    (records of :func:`rollout` add ``episode_cost_steps[name]``: per episode, the steps whose
    cost is above :data:`COST_TOLERANCE`), and
    ``over_budget_rate`` (``None`` off a PowerZoo env) the fraction in which some selected
    constraint exceeds its per-episode budget (:func:`budget_flags`). Records with
    ``storage_mwh`` add ``storage_throughput_mwh``: per episode, the storage throughput of each
    of its days (MWh); records with ``metrics`` add ``episode_metrics[name]``: per episode, the
    sum of the step info value ``name`` (:func:`episode_metric_keys`).
    """
    if not records:
        raise ValueError("no episodes to summarise")
    returns = np.asarray([r["return"] for r in records])
    costs = np.stack([r["costs"] for r in records])
    names = constraint_names_of(env, costs.shape[1])
    summary: dict[str, Any] = {
        "task": task_id if task_id is not None else env_metadata(env)["task"],
        "episodes": len(records),
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "iqm_return": interquartile_mean(returns),
        "mean_length": float(np.mean([r["length"] for r in records])),
        "mean_costs": dict(zip(names, costs.mean(axis=0).tolist(), strict=True)),
        "episode_costs": {name: costs[:, j].tolist() for j, name in enumerate(names)},
        "returns": returns,
    }
    if all(r.get("cost_steps") is not None for r in records):
        steps = np.stack([r["cost_steps"] for r in records])
        summary["episode_cost_steps"] = {name: steps[:, j].tolist() for j, name in enumerate(names)}
    summary.update(budget_flags(costs, names, getattr(task_of(env), "spec", None)))
    throughput = daily_throughput(records)
    if throughput is not None:
        summary["storage_throughput_mwh"] = throughput
    if records and all("metrics" in r for r in records):
        summary["episode_metrics"] = {
            name: [float(r["metrics"][name]) for r in records] for name in records[0]["metrics"]
        }
    agents = agents_of(env)
    if agents is not None:
        agent_returns = np.stack([r["agent_returns"] for r in records])
        summary["agents"] = agents
        summary["team_returns"] = np.asarray([r["team_return"] for r in records])
        summary["mean_team_return"] = float(summary["team_returns"].mean())
        summary["mean_agent_returns"] = dict(
            zip(agents, agent_returns.mean(axis=0).tolist(), strict=True)
        )
    return summary


def budget_flags(costs: np.ndarray, names: Sequence[str], spec: Any = None) -> dict[str, Any]:
    """Per-episode constraint checks of costs [episodes, n_costs] named ``names``.

    With a task's ``spec`` (:class:`~powerzoo.tasks.spec.TaskSpec`) only its selected constraints
    count, against its per-episode budgets ``spec.cost_thresholds``; without one every cost counts
    and no budget is known. Returns
    ``violation_rate`` (share of episodes with a counted cost above :data:`COST_TOLERANCE`),
    ``over_budget`` (per episode, ``True`` when some counted cost exceeds its budget by more than
    the tolerance; ``None`` without budgets) and ``over_budget_rate`` (its mean, or ``None``).
    """
    costs = np.asarray(costs, dtype=np.float64).reshape(-1, len(names))
    if spec is None:
        selected = np.ones(len(names), dtype=bool)
        budgets = None
    else:
        selected = np.isin(np.asarray(names), spec.selected_constraints)
        budgets = np.asarray(
            [
                spec.cost_thresholds.get(name, np.inf) if ok else np.inf
                for name, ok in zip(names, selected, strict=True)
            ]
        )
    counted = costs[:, selected]
    out: dict[str, Any] = {
        "violation_rate": float(np.mean(np.any(counted > COST_TOLERANCE, axis=1)))
        if counted.size
        else 0.0
    }
    if budgets is None:
        out["over_budget"], out["over_budget_rate"] = None, None
    else:
        over = np.any(costs > budgets + COST_TOLERANCE, axis=1)
        out["over_budget"] = over.tolist()
        out["over_budget_rate"] = float(over.mean())
    return out


def evaluate(
    policy: Policy, env: Any, n_episodes: int = 10, seed: int = 0, task_id: str | None = None
) -> dict[str, Any]:
    """Evaluate ``policy`` on ``n_episodes`` episodes of ``env`` (start days drawn from its split).

    Episode ``i`` resets the env with ``seed + i`` and seeds the policy with ``seed + i``
    (:func:`seed_policy`), so results are reproducible and match a dataset collected by
    :class:`powerzoo.benchmarks.offline.DatasetGenerator` with the same seed and policy. Each
    reset draws its start day at random, so days can repeat: to run the baselines table's days,
    use ``evaluate_days(policy, env, **evaluation_protocol(task))``
    (:func:`evaluate_days`, :func:`powerzoo.benchmarks.baselines.evaluation_protocol`).

    Returns :func:`summarize_episodes`'s dict plus ``seed``: ``mean_return`` / ``std_return`` /
    ``iqm_return`` (system return for multi-agent envs, module docstring; ``mean_team_return``
    the sum over agents and ``mean_agent_returns`` per agent),
    ``mean_costs`` per constraint, ``violation_rate``, ``mean_length`` and the ``returns`` array.

    Args:
        policy: Anything with ``reset()`` and ``act(obs, info)``.
        env: A PowerZoo env (single-agent, or a multi-agent Parallel / dict env).
        n_episodes: Episodes to run.
        seed: Seed of episode 0 (episode ``i`` uses ``seed + i``).
        task_id: Task name recorded in the summary (default: the env's).

    Returns:
        The summary dict described above.
    """
    if hasattr(env, "num_envs"):
        raise TypeError(
            "evaluate takes a single env; build one with make_env(task) without num_envs"
        )
    if (
        isinstance(n_episodes, bool)
        or not isinstance(n_episodes, (int, np.integer))
        or n_episodes < 1
    ):
        raise ValueError(f"n_episodes must be a positive int, got {n_episodes!r}")
    records = [
        rollout(env, policy, seed=seed + i, seed_policy_too=True) for i in range(int(n_episodes))
    ]
    return {**summarize_episodes(records, env, task_id), "seed": seed}


def _is_policy(obj: Any) -> bool:
    return callable(getattr(obj, "act", None)) and not callable(getattr(obj, "step", None))


def evaluate_days(
    policy: Policy, env: Any, day_ids: Iterable[int], seed: int = 0, storage: bool = False
) -> dict[str, Any]:
    """Evaluate ``policy`` on the given split days (episode ``i`` resets with ``seed + i``).

    Arguments are in :func:`evaluate`'s order. The policy is not re-seeded (it keeps its own
    stream across days). Same summary as :func:`evaluate`. The older order
    ``evaluate_days(env, policy, ...)`` still works and warns (``DeprecationWarning``).

    Args:
        policy: Anything with ``reset()`` and ``act(obs, info)``.
        env: A PowerZoo env.
        day_ids: Split days to start the episodes on, one episode each.
        seed: Seed of episode 0 (episode ``i`` uses ``seed + i``).
        storage: also record each episode's daily storage throughput
            (``storage_throughput_mwh``, on tasks with storage; :func:`rollout`).

    Returns:
        The summary dict of :func:`evaluate`.
    """
    if _is_policy(env) and not _is_policy(policy):
        warnings.warn(
            "evaluate_days(env, policy, ...) is deprecated; call evaluate_days(policy, env, ...) "
            "like evaluate(policy, env, ...)",
            DeprecationWarning,
            stacklevel=2,
        )
        policy, env = env, policy
    records = [
        rollout(env, policy, day_id=int(d), seed=seed + i, storage=storage)
        for i, d in enumerate(day_ids)
    ]
    return summarize_episodes(records, env)
