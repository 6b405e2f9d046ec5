"""Benchmark campaigns: baselines and trained agents x tasks x seeds, with confidence intervals.

::

    from powerzoo.benchmarks.campaign import run_campaign

    result = run_campaign(["battery_arbitrage", "marl_opf"], seeds=(0, 1, 2))
    print(result.markdown())          # one Markdown table per task
    result.row("battery_arbitrage", "oracle")["mean_return_ci_low"]

or ``powerzoo bench battery_arbitrage marl_opf --seeds 0 1 2`` on the command line. This module is
the loop; the statistics are in :mod:`powerzoo.benchmarks.stats`, the tables in
:mod:`powerzoo.benchmarks.report` and the plots in :mod:`powerzoo.benchmarks.plots`.

Protocol
--------
For each task x policy x seed the policy runs one episode per evaluated split day: every day
of ``split`` (default) or ``episodes`` days spread evenly over it
(:func:`~powerzoo.benchmarks.baselines.select_days`, first and last day kept). Episode ``i`` of
seed ``s`` starts on day ``day_ids[i]`` with ``env.reset(seed=s * EPISODE_SEED_STRIDE + i)``.
The random policy is ``RandomPolicy(env.action_space, seed=s)``, one stream across the episodes
of that seed; every policy is seeded with :func:`~powerzoo.benchmarks.policies.seed_policy`
(trained agents act deterministically, so only the env seeds change). Seed 0 is therefore exactly
the protocol of the baselines table (:mod:`powerzoo.benchmarks.baselines`): with every test day it
reproduces the table's returns.

Baselines act on ``make_env(task, split)`` (``framework="auto"``, physical units). Other policies,
such as trained agents, are handed in by the caller as :class:`PolicyEntry` objects (task, label,
env factory, policy factory): ``powerzoo bench --runs RUN_DIR`` builds one per run folder
(:func:`powerzoo.cli.runs.run_entry`), acting on the env its config describes and named after the
folder. A baseline that the task does not define (``task.spec.baselines``) is skipped with a note.

Statistics (per task x policy, pooled over all episodes of all seeds)
---------------------------------------------------------------------
* ``mean_return``, ``iqm_return`` (:func:`~powerzoo.benchmarks.evaluation.interquartile_mean`),
  ``std_return`` (population std, ``ddof=0``, as
  :func:`~powerzoo.benchmarks.evaluation.summarize_episodes`). Returns are in $ per episode;
  multi-agent tasks report the system return
  (:func:`~powerzoo.benchmarks.evaluation.return_unit`: under a shared reward each agent's
  return, not the team sum ``n_agents`` x it).
* 95 % confidence intervals by a percentile bootstrap over episodes: ``BOOTSTRAP_RESAMPLES``
  (2,000) resamples of the pooled episodes, drawn with replacement by
  ``numpy.random.default_rng(BOOTSTRAP_SEED)``; the interval is the 2.5th and 97.5th percentile
  of the statistic over the resamples. The same resamples serve every statistic of a row (mean
  and IQM return, each constraint's cost, the total cost), so a campaign's intervals are
  reproducible bit for bit. Episodes are treated as exchangeable (no stratification by seed or day).
* ``cost_<name>_mean`` / ``_ci_low`` / ``_ci_high``: constraint cost summed over an episode
  (physical units), mean over episodes and its interval; ``total_cost_*`` the same for the sum
  over constraints; ``violation_rate``: fraction of episodes with any positive cost.
* ``normalized_score`` = :func:`~powerzoo.benchmarks.baselines.normalized_score` of the mean
  return (0 = random, 1 = oracle or best baseline), with its interval mapped from the mean's.
  Left blank (``None``) when the packaged baselines table has no rows for the task and split, or
  when the evaluated days are not the table's
  (:func:`~powerzoo.benchmarks.baselines.evaluation_protocol`, e.g. with ``episodes`` set): scores
  from other days would not be comparable. The table is computed with seed 0; other seeds only
  change the env reset seeds and the random policy's stream.

Files in ``out_dir`` (each written to a temporary name and renamed into place)
------------------------------------------------------------------------------
* ``results.csv``: one row per task x policy (:data:`SUMMARY_COLUMNS` plus the cost columns of
  every constraint met, blank where a task lacks it);
* ``results.md``: the protocol, one Markdown table per task, the notes (skipped policies, ...);
* ``episodes.csv``: one row per episode (:data:`EPISODE_COLUMNS` plus ``cost_<name>``);
* ``return_vs_cost_<task>.png``: mean return against mean total constraint cost per episode, one
  labelled point per policy with 95 % intervals as error bars;
* ``episode_<task>_<policy>.png``: reward, applied actions and costs of one episode (first seed,
  first evaluated day, i.e. day 0) by :func:`~powerzoo.benchmarks.plots.plot_recorded_episode`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import select_days
from powerzoo.benchmarks.evaluation import rollout
from powerzoo.benchmarks.plots import (
    EpisodeTrace,
    plot_recorded_episode,
    plot_return_vs_cost,
    record_episode,
)
from powerzoo.benchmarks.policies import BASELINE_POLICIES, make_baseline_policy, seed_policy
from powerzoo.benchmarks.report import (
    EPISODE_COLUMNS,
    SUMMARY_COLUMNS,
    CampaignResult,
    file_label,
    summary_row,
    write_csv_tables,
    write_results_markdown,
)
from powerzoo.benchmarks.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    EPISODE_SEED_STRIDE,
    bootstrap_ci,
    episode_seed,
    summarize_campaign_episodes,
)
from powerzoo.envs.introspect import constraint_names_of, task_of
from powerzoo.envs.make import make_env
from powerzoo.progress import progress_bar
from powerzoo.tasks import list_tasks, task_spec

__all__ = [
    "run_campaign",
    "episodes_of",
    "PolicyEntry",
    "CampaignResult",
    "bootstrap_ci",
    "summarize_campaign_episodes",
    "episode_seed",
    "BASELINE_POLICIES",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "CONFIDENCE",
    "EPISODE_SEED_STRIDE",
    "SUMMARY_COLUMNS",
    "EPISODE_COLUMNS",
]


@dataclasses.dataclass(frozen=True)
class PolicyEntry:
    """A policy handed to :func:`run_campaign` by its caller, e.g. a trained run folder.

    Attributes:
        label: policy name in the tables (``_2``, ``_3``, ... appended if the task already has one).
        task: registered task the policy is evaluated on.
        make_env: ``split -> env`` the policy acts in (a single-agent Gymnasium env or a
            multi-agent dict env), built once per campaign.
        make_policy: ``(env, seed) -> policy`` (``reset()``, ``act(obs, info)``), built once per
            campaign seed; the campaign then seeds it with
            :func:`~powerzoo.benchmarks.policies.seed_policy`.
        source: text of the ``source`` column (e.g. the run folder and its algorithm).
        kind: text of the ``kind`` column.
    """

    label: str
    task: str
    make_env: Callable[[str], Any]
    make_policy: Callable[[Any, int], Any]
    source: str = ""
    kind: str = "trained"


@dataclasses.dataclass
class _Entry:
    """One policy on one task: its env and how to build its policy."""

    task: str
    policy: str
    kind: str  # "baseline", "trained", ...
    source: str  # baseline name, or the caller's description
    env: Any
    make_policy: Callable[[Any, int], Any]  # (env, seed) -> policy


def _baseline_factory(name: str) -> Callable[[Any, int], Any]:
    return lambda env, seed: make_baseline_policy(name, env, seed)


def episodes_of(episodes: int | None | Mapping[str, int | None], task: str) -> int | None:
    """Days per seed for ``task``: ``episodes`` itself, or its entry for ``task`` when it is a
    ``{task: days}`` mapping (a task it does not name: every split day)."""
    if isinstance(episodes, Mapping):
        return episodes.get(task)
    return episodes


def _check_episodes(episodes: int | None | Mapping[str, int | None]) -> None:
    values = episodes.values() if isinstance(episodes, Mapping) else [episodes]
    for value in values:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1
        ):
            raise ValueError(
                f"episodes must be a positive int, None or a {{task: int | None}} mapping, "
                f"got {episodes!r}"
            )


def _validate(
    tasks: Sequence[str],
    policies: Sequence[str],
    seeds: Sequence[int],
    split: str,
    episodes: int | None | Mapping[str, int | None],
) -> tuple[list[str], list[str], list[int]]:
    registered = list_tasks()
    names = list(registered) if list(tasks) == ["all"] else list(dict.fromkeys(tasks))
    unknown = [t for t in names if t not in registered]
    if unknown:
        raise ValueError(
            f"unknown task(s) {', '.join(map(repr, unknown))}; registered tasks: "
            f"{', '.join(registered)} (or 'all')"
        )
    policies = list(dict.fromkeys(policies))
    bad = [p for p in policies if p not in BASELINE_POLICIES]
    if bad:
        raise ValueError(
            f"unknown policy(ies) {', '.join(map(repr, bad))}; "
            f"valid: {', '.join(BASELINE_POLICIES)} "
            "(evaluate trained agents by giving their run folders)"
        )
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("give at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds repeat: {seeds}")
    if any(s < 0 for s in seeds):
        raise ValueError(f"seeds must be >= 0, got {seeds}")
    _check_episodes(episodes)
    for t in names:
        splits = task_spec(t).splits
        if split not in splits:
            raise ValueError(f"unknown split {split!r} for {t}; valid: {', '.join(splits)}")
    return names, policies, seeds


def _baseline_entries(
    task_names: Sequence[str], policy_names: Sequence[str], split: str, notes: list[str]
) -> list[_Entry]:
    """The baselines of each task (one env per task); a
    baseline the task does not define gets a note."""
    entries: list[_Entry] = []
    for task in task_names:
        defined = task_spec(task).baselines
        wanted = [p for p in policy_names if p == "random" or p in defined]
        for p in policy_names:
            if p not in wanted:
                notes.append(
                    f"{task}: skipped {p} (the task defines no {p} baseline; its baselines: "
                    f"{', '.join(defined)})"
                )
        if wanted:
            env = make_env(task, split)
            entries += [_Entry(task, p, "baseline", p, env, _baseline_factory(p)) for p in wanted]
    return entries


def _extra_entries(
    extra: Sequence[PolicyEntry],
    split: str,
    task_names: Sequence[str],
    taken: set[tuple[str, str]],
    notes: list[str],
) -> list[_Entry]:
    """The caller's policies, each on an env of ``split``, with labels made unique per task."""
    entries: list[_Entry] = []
    for item in extra:
        splits = task_spec(item.task).splits
        if split not in splits:
            raise ValueError(
                f"unknown split {split!r} for {item.task} (policy {item.label}); "
                f"valid: {', '.join(splits)}"
            )
        label, k = item.label, 2
        while (item.task, label) in taken:
            label, k = f"{item.label}_{k}", k + 1
        taken.add((item.task, label))
        entries.append(
            _Entry(item.task, label, item.kind, item.source, item.make_env(split), item.make_policy)
        )
        if item.task not in task_names:
            what = "run" if item.kind == "trained" else "policy"
            notes.append(
                f"{item.task}: {what} {label} evaluated without baselines "
                "(the task is not among the campaign's tasks)"
            )
    return entries


def _check_extra(extra: Iterable[PolicyEntry]) -> list[PolicyEntry]:
    items = list(extra)
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            raise TypeError(
                f"run_campaign takes PolicyEntry objects, not run folders ({item!r}): load a run "
                "folder with powerzoo.cli.runs.run_entry(run_dir)"
            )
        if not isinstance(item, PolicyEntry):
            raise TypeError(f"extra_policies must hold PolicyEntry objects, got {item!r}")
    return items


def run_campaign(
    tasks: Iterable[str],
    policies: Iterable[str] = BASELINE_POLICIES,
    seeds: Iterable[int] = (0,),
    split: str = "test",
    episodes: int | None | Mapping[str, int | None] = None,
    extra_policies: Iterable[PolicyEntry] = (),
    out_dir: str | Path = "results/bench",
    progress: bool | None = None,
    *,
    plots: bool = True,
) -> CampaignResult:
    """Evaluate baselines (and the caller's policies) on ``tasks`` x ``seeds``; write tables and
    plots to ``out_dir``.

    Args:
        tasks: registered task names, or ``["all"]``.
        policies: baselines among ``random``, ``rule_based``, ``oracle``; one the task does not
            define is skipped with a note.
        seeds: campaign seeds (random policy seed and env reset seeds, module docstring).
        split: data split of the evaluated days (validated against each task's splits).
        episodes: days per seed: ``None`` for every split day, else that many spread evenly;
            a ``{task: days}`` mapping sets them per task (tasks it does not name: every day).
        extra_policies: :class:`PolicyEntry` objects (e.g. trained runs,
            :func:`powerzoo.cli.runs.run_entry`), each evaluated on its own task (listed in
            ``tasks`` or not) under the same seeds and days. Read after the arguments above are
            validated, so a generator that loads runs lazily fails fast on a bad argument.
        out_dir: output folder (created); files are listed in the module docstring.
        progress: tqdm bar over (task, policy, seed): ``None`` shows it only when stderr is a
            terminal.
        plots: write the PNG plots (the tables are always written).

    Raises ``ValueError`` for unknown tasks, policies or splits.

    Returns:
        The tables (a :class:`CampaignResult`).
    """
    started = time.perf_counter()
    task_names, policy_names, seed_list = _validate(
        list(tasks), list(policies), list(seeds), split, episodes
    )
    extra = _check_extra(extra_policies)
    if not task_names and not extra:
        raise ValueError("nothing to evaluate: give at least one task or run folder")
    notes: list[str] = []
    entries = _baseline_entries(task_names, policy_names, split, notes)
    entries += _extra_entries(
        extra, split, task_names, {(e.task, e.policy) for e in entries}, notes
    )

    jobs = [(e, s) for e in entries for s in seed_list]
    bar = progress_bar(total=len(jobs), desc="bench", unit="job", progress=progress)
    episode_rows: list[dict[str, Any]] = []
    by_entry: dict[int, list[dict[str, Any]]] = {}
    cost_names: dict[str, tuple[str, ...]] = {}
    days_of: dict[int, list[int]] = {}
    traces: dict[
        int, tuple[EpisodeTrace, int, int]
    ] = {}  # first episode of each entry: (trace, seed, day)
    failed: set[int] = set()
    for entry, seed in jobs:
        key = id(entry)
        bar.set_description(f"{entry.task}/{entry.policy}/seed{seed}")
        if key in failed:
            bar.update(1)
            continue
        days = days_of.setdefault(
            key, select_days(task_of(entry.env).n_days, episodes_of(episodes, entry.task))
        )
        try:
            policy = entry.make_policy(entry.env, seed)
            seed_policy(policy, seed)
        except (ValueError, TypeError) as err:  # a policy the env cannot run
            notes.append(f"{entry.task}: skipped {entry.policy} ({err})")
            failed.add(key)
            bar.update(1)
            continue
        for i, day in enumerate(days):
            env_seed = episode_seed(seed, i)
            if plots and key not in traces and i == 0:
                trace = record_episode(entry.env, policy, day_id=day, seed=env_seed)
                traces[key] = (trace, seed, day)
                record = trace.record
            else:
                record = rollout(entry.env, policy, day_id=day, seed=env_seed)
            names = cost_names.setdefault(
                entry.task, tuple(constraint_names_of(entry.env, len(record["costs"])))
            )
            row = {
                "task": entry.task,
                "policy": entry.policy,
                "seed": seed,
                "episode": i,
                "day_id": int(record["day_id"]) if record["day_id"] is not None else int(day),
                "env_seed": env_seed,
                "return": float(record["return"]),
                "length": int(record["length"]),
                "total_cost": float(np.sum(record["costs"])),
            }
            row.update({f"cost_{n}": float(c) for n, c in zip(names, record["costs"], strict=True)})
            episode_rows.append(row)
            by_entry.setdefault(key, []).append(row)
        fallback = getattr(policy, "fallback_steps", 0)
        if fallback:
            notes.append(
                f"{entry.task}: {entry.policy} seed {seed}: the oracle's solver failed "
                f"on {fallback} step(s), interpolated from the neighbouring steps"
            )
        bar.update(1)
    bar.close()

    summary_rows = [
        summary_row(
            e.task,
            e.policy,
            e.kind,
            e.source,
            by_entry[id(e)],
            days_of[id(e)],
            cost_names[e.task],
            split,
        )
        for e in entries
        if by_entry.get(id(e))
    ]
    result = CampaignResult(
        Path(out_dir),
        split,
        tuple(seed_list),
        summary_rows,
        episode_rows,
        notes,
        cost_names,
        {},
        [],
        0.0,
    )
    write_csv_tables(result)
    if plots:
        result.plots += _write_plots(result, entries, traces)
    write_results_markdown(result)
    result.wall_seconds = time.perf_counter() - started
    return result


def _write_plots(
    result: CampaignResult,
    entries: Sequence[_Entry],
    traces: dict[int, tuple[EpisodeTrace, int, int]],
) -> list[Path]:
    """``return_vs_cost_<task>.png`` per task and
    ``episode_<task>_<policy>.png`` per recorded entry."""
    out, split = result.out_dir, result.split
    paths = []
    for task in result.tasks:
        rows = [r for r in result.rows if r["task"] == task]
        paths.append(
            plot_return_vs_cost(rows, task, split, out / f"return_vs_cost_{file_label(task)}.png")
        )
    for entry in entries:
        if id(entry) not in traces:
            continue
        trace, seed, day = traces[id(entry)]
        path = out / f"episode_{file_label(entry.task)}_{file_label(entry.policy)}.png"
        paths.append(
            plot_recorded_episode(
                trace,
                task_of(entry.env).spec,
                path,
                title=f"{entry.task}: {entry.policy} on {split} day {day} (seed {seed})",
            )
        )
    return paths
