"""Benchmark campaigns: baselines and trained agents x tasks x seeds, with confidence intervals.

::

    from powerzoo.benchmarks.campaign import run_campaign

    result = run_campaign(["battery_arbitrage", "marl_opf"], seeds=(0, 1, 2))
    print(result.markdown())          # one Markdown table per task
    result.row("battery_arbitrage", "oracle")["mean_return_ci_low"]

or ``powerzoo bench battery_arbitrage marl_opf --seeds 0 1 2`` on the command line.

Protocol
--------
For each task x policy x seed the policy runs one episode per evaluated split day: every day
of ``split`` (default) or ``episodes`` days spread evenly over it
(:func:`~powerzoo.benchmarks.baselines.select_days`, first and last day kept). Episode ``i`` of
seed ``s`` starts on day ``day_ids[i]`` with ``env.reset(seed=s * EPISODE_SEED_STRIDE + i)``.
The random policy is ``RandomPolicy(env.action_space, seed=s)``, one stream across the episodes
of that seed; trained agents are seeded with :func:`~powerzoo.benchmarks.policies.seed_policy`
(deterministic actions, so only the env seeds change). Seed 0 is therefore exactly the protocol
of the baselines table (:mod:`powerzoo.benchmarks.baselines`): with every test day it reproduces
the table's returns.

Baselines act on ``make_env(task, split)`` (``framework="auto"``, physical units); a trained run
folder (written by :class:`~powerzoo.rl.trainer.Trainer`) acts on the env its config describes
(:meth:`~powerzoo.rl.trainer.Trainer.make_eval_env`, or the multi-agent dict env), on the task
named in its config. Its policy name is the run folder's name. A baseline that the task does not
define (``task.spec.baselines``) is skipped with a note.

Statistics (per task x policy, pooled over all episodes of all seeds)
---------------------------------------------------------------------
* ``mean_return``, ``iqm_return`` (:func:`~powerzoo.benchmarks.evaluation.interquartile_mean`),
  ``std_return`` (population std, ``ddof=0``, as :func:`~powerzoo.benchmarks.evaluation.summarize_episodes`).
  Returns are in $ per episode; multi-agent tasks report the team return (sum over agents).
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
  when the evaluated days are not the table's (:func:`~powerzoo.benchmarks.baselines.evaluation_protocol`,
  e.g. with ``episodes`` set): scores from other days would not be comparable. The table is
  computed with seed 0; other seeds only change the env reset seeds and the random policy's stream.

Files in ``out_dir`` (each written to a temporary name and renamed into place)
------------------------------------------------------------------------------
* ``results.csv``: one row per task x policy (:data:`SUMMARY_COLUMNS` plus the cost columns of
  every constraint met, blank where a task lacks it);
* ``results.md``: the protocol, one Markdown table per task, the notes (skipped policies, ...);
* ``episodes.csv``: one row per episode (:data:`EPISODE_COLUMNS` plus ``cost_<name>``);
* ``return_vs_cost_<task>.png``: mean return against mean total constraint cost per episode, one
  labelled point per policy with 95 % intervals as error bars;
* ``episode_<task>_<policy>.png``: reward, applied actions and costs of one episode (first seed,
  first evaluated day, i.e. day 0) by :func:`~powerzoo.benchmarks.plots.plot_episode_trace`.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.benchmarks.baselines import evaluation_protocol, normalized_score, select_days
from powerzoo.benchmarks.evaluation import (
    agents_of,
    constraint_names,
    interquartile_mean,
    rollout,
    task_of,
)
from powerzoo.benchmarks.policies import OraclePolicy, RandomPolicy, RuleBasedPolicy, seed_policy
from powerzoo.fileio import atomic_save, atomic_write_text
from powerzoo.rl import make_env
from powerzoo.tasks import list_tasks, task_spec

__all__ = [
    "run_campaign",
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

BASELINE_POLICIES = ("random", "rule_based", "oracle")
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
EPISODE_SEED_STRIDE = 1_000_000  # more than any split has days: the seeds' env streams never overlap

SUMMARY_COLUMNS = (
    "task", "split", "policy", "kind", "source", "episodes", "n_seeds", "seeds", "n_days",
    "mean_return", "mean_return_ci_low", "mean_return_ci_high",
    "iqm_return", "iqm_return_ci_low", "iqm_return_ci_high", "std_return",
    "total_cost_mean", "total_cost_ci_low", "total_cost_ci_high", "violation_rate", "mean_length",
    "normalized_score", "normalized_score_ci_low", "normalized_score_ci_high",
)
"""Fixed columns of ``results.csv``; ``cost_<name>_mean`` / ``_ci_low`` / ``_ci_high`` follow."""

EPISODE_COLUMNS = ("task", "policy", "seed", "episode", "day_id", "env_seed", "return", "length", "total_cost")
"""Fixed columns of ``episodes.csv``; ``cost_<name>`` (per constraint, summed over the episode) follow."""


# ---- statistics -----------------------------------------------------------------------------------
def episode_seed(seed: int, episode: int) -> int:
    """``env.reset`` seed of episode ``episode`` of campaign seed ``seed`` (seed 0: ``episode``, the table's)."""
    return int(seed) * EPISODE_SEED_STRIDE + int(episode)


def _resample_indices(n: int, n_resamples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))


def _iqm_rows(samples: np.ndarray) -> np.ndarray:
    """IQM of each row of ``samples`` [B, n] (same cut as :func:`interquartile_mean`)."""
    x = np.sort(samples, axis=1)
    cut = x.shape[1] // 4
    return x[:, cut : x.shape[1] - cut].mean(axis=1)


_STATISTICS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mean": lambda s: s.mean(axis=1),
    "iqm": _iqm_rows,
}


def _interval(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(stats, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, statistic: str = "mean", *, n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE, seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of ``statistic`` (``"mean"`` or ``"iqm"``) of ``values``.

    ``n_resamples`` resamples of ``values`` with replacement, drawn by
    ``np.random.default_rng(seed)``; returns the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
    quantiles of the statistic over them. Same inputs, same interval.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    if statistic not in _STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; valid: {', '.join(_STATISTICS)}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    samples = x[_resample_indices(x.size, n_resamples, seed)]
    return _interval(_STATISTICS[statistic](samples), confidence)


def summarize_campaign_episodes(
    records: Sequence[dict[str, Any]], cost_names: Sequence[str], *, n_resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE, seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Pooled statistics of episode rows (``episodes.csv`` rows: ``return``, ``length``, ``cost_<name>``).

    Returns the statistic columns of ``results.csv`` (module docstring), the normalised score aside.
    """
    if not records:
        raise ValueError("no episodes to summarise")
    returns = np.asarray([r["return"] for r in records], dtype=np.float64)
    costs = np.asarray([[r[f"cost_{name}"] for name in cost_names] for r in records], dtype=np.float64)
    costs = costs.reshape(len(records), len(cost_names))
    total = costs.sum(axis=1)
    idx = _resample_indices(returns.size, n_resamples, seed)  # one set of resamples for every statistic

    def ci(values: np.ndarray, statistic: str = "mean") -> tuple[float, float]:
        return _interval(_STATISTICS[statistic](values[idx]), confidence)

    out: dict[str, Any] = {"episodes": int(returns.size), "mean_return": float(returns.mean())}
    out["mean_return_ci_low"], out["mean_return_ci_high"] = ci(returns)
    out["iqm_return"] = interquartile_mean(returns)
    out["iqm_return_ci_low"], out["iqm_return_ci_high"] = ci(returns, "iqm")
    out["std_return"] = float(returns.std())
    out["total_cost_mean"] = float(total.mean())
    out["total_cost_ci_low"], out["total_cost_ci_high"] = ci(total)
    out["violation_rate"] = float(np.mean(total > 0.0))
    out["mean_length"] = float(np.mean([r["length"] for r in records]))
    for j, name in enumerate(cost_names):
        out[f"cost_{name}_mean"] = float(costs[:, j].mean())
        out[f"cost_{name}_ci_low"], out[f"cost_{name}_ci_high"] = ci(costs[:, j])
    return out


# ---- result -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class CampaignResult:
    """What :func:`run_campaign` measured and wrote.

    Attributes:
        rows: one dict per task x policy (the ``results.csv`` columns; ``None`` for blanks).
        episodes: one dict per episode (the ``episodes.csv`` columns).
        notes: skipped policies and other remarks (also in ``results.md``).
        cost_names: ``{task: constraint names}``.
        files: ``results_csv``, ``results_md``, ``episodes_csv`` paths.
        plots: every PNG written.
    """

    out_dir: Path
    split: str
    seeds: tuple[int, ...]
    rows: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    notes: list[str]
    cost_names: dict[str, tuple[str, ...]]
    files: dict[str, Path]
    plots: list[Path]
    wall_seconds: float

    @property
    def tasks(self) -> list[str]:
        """Tasks with at least one evaluated policy, in campaign order."""
        return list(dict.fromkeys(r["task"] for r in self.rows))

    def row(self, task: str, policy: str) -> dict[str, Any]:
        """The summary row of ``policy`` on ``task`` (``KeyError`` if it was not evaluated)."""
        for r in self.rows:
            if r["task"] == task and r["policy"] == policy:
                return r
        raise KeyError(f"no result for policy {policy!r} on task {task!r}")

    def markdown(self) -> str:
        """One Markdown table per task (``### task`` heading, then the table), then the notes."""
        parts = [_markdown_table(self, task) for task in self.tasks]
        if self.notes:
            parts.append("Notes:\n\n" + "\n".join(f"- {n}" for n in self.notes))
        return "\n\n".join(parts) + "\n"


# ---- files ---------------------------------------------------------------------------------------------
# ---- formatting ---------------------------------------------------------------------------------------
def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def _cost(value: float) -> str:
    return "0" if value == 0 else f"{value:.4g}"


def _markdown_table(result: CampaignResult, task: str) -> str:
    rows = [r for r in result.rows if r["task"] == task]
    names = result.cost_names[task]
    first = rows[0]
    unit = "$ per episode" + (" (team return, sum over agents)" if task_spec(task).agent_mode == "multi" else "")
    head = (
        f"### {task} ({result.split} split; {first['n_days']} days x {first['n_seeds']} seed(s) per policy; "
        f"returns in {unit}; [95% bootstrap CI])"
    )
    header = ["policy", "episodes", "mean return", "IQM return", "std", "total cost / episode", "violation rate",
              "normalized score", *[f"{n} / episode" for n in names]]
    lines = [head, "", "| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for r in rows:
        score = r["normalized_score"]
        cells = [
            f"{r['policy']}", f"{r['episodes']}",
            f"{_num(r['mean_return'])} [{_num(r['mean_return_ci_low'])}, {_num(r['mean_return_ci_high'])}]",
            f"{_num(r['iqm_return'])} [{_num(r['iqm_return_ci_low'])}, {_num(r['iqm_return_ci_high'])}]",
            _num(r["std_return"]),
            f"{_cost(r['total_cost_mean'])} [{_cost(r['total_cost_ci_low'])}, {_cost(r['total_cost_ci_high'])}]",
            f"{r['violation_rate']:.3f}",
            "n/a" if score is None else
            f"{score:.3f} [{r['normalized_score_ci_low']:.3f}, {r['normalized_score_ci_high']:.3f}]",
            *[_cost(r[f"cost_{n}_mean"]) for n in names],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _results_markdown(result: CampaignResult) -> str:
    seeds = " ".join(str(s) for s in result.seeds)
    intro = (
        "# PowerZoo benchmark campaign\n\n"
        f"Split `{result.split}`, seeds {seeds}. Episode i of seed s starts on the i-th evaluated day with "
        f"`env.reset(seed=s * {EPISODE_SEED_STRIDE} + i)`; the random policy is seeded with s. Statistics pool "
        f"all episodes of all seeds; intervals are {CONFIDENCE:.0%} percentile-bootstrap intervals "
        f"({BOOTSTRAP_RESAMPLES:,} resamples of the episodes, `numpy.random.default_rng({BOOTSTRAP_SEED})`). "
        "Costs are per episode in each constraint's physical unit. The normalized score (0 = random, "
        "1 = oracle or best baseline of the packaged table) is n/a when the table lacks the task or when "
        "the evaluated days differ from the table's.\n"
    )
    return intro + "\n" + result.markdown()


def _csv_text(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    return buffer.getvalue()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # round-trips exactly
    return value


def _cost_columns(cost_names: dict[str, tuple[str, ...]], suffixes: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(n for names in cost_names.values() for n in names))
    return [f"cost_{n}{s}" for n in names for s in suffixes]


def _file_label(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


# ---- plots --------------------------------------------------------------------------------------------
def _plot_return_vs_cost(rows: Sequence[dict[str, Any]], task: str, split: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    for r in rows:
        x, y = r["total_cost_mean"], r["mean_return"]
        xerr = [[x - r["total_cost_ci_low"]], [r["total_cost_ci_high"] - x]]
        yerr = [[y - r["mean_return_ci_low"]], [r["mean_return_ci_high"] - y]]
        ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="o", capsize=4, label=r["policy"])
        ax.annotate(r["policy"], (x, y), textcoords="offset points", xytext=(6, 6), fontsize="small")
    costs = [r["total_cost_ci_high"] for r in rows if r["total_cost_ci_high"] > 0]
    positive = [r["total_cost_mean"] for r in rows if r["total_cost_mean"] > 0]
    scale = ""
    if positive and max(costs) / min(positive) > 1e3:  # costs over several orders of magnitude
        ax.set_xscale("symlog", linthresh=min(positive))
        scale = ", symlog scale"
    unit = "team return, $" if task_spec(task).agent_mode == "multi" else "$"
    ax.set_xlabel(f"mean total constraint cost per episode (sum over constraints{scale})")
    ax.set_ylabel(f"mean return per episode ({unit})")
    ax.set_title(f"{task} ({split}): return vs constraint cost, 95% bootstrap CI")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    atomic_save(path, lambda p: fig.savefig(p, dpi=110))
    plt.close(fig)
    return path


class _StepRecorder:
    """``env`` with every ``step`` result's info kept (the whole per-agent info dict in a multi-agent env)."""

    def __init__(self, env: Any) -> None:
        self._env = env
        self.infos: list[Any] = []
        self.rewards: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        self.infos, self.rewards = [], []
        return self._env.reset(*args, **kwargs)

    def step(self, action: Any) -> Any:
        out = self._env.step(action)
        reward, info = out[1], out[-1]
        self.rewards.append(float(sum(reward.values())) if isinstance(reward, dict) else float(reward))
        self.infos.append(info)
        return out


def _plot_episode(recorder: _StepRecorder, agents: list[str] | None, task: str, policy: str, split: str,
                  seed: int, day_id: int, path: Path) -> Path:
    from powerzoo.benchmarks.plots import plot_episode_trace

    spec = task_spec(task)
    if agents is None:
        actions = [np.ravel(info["action_applied"]) for info in recorder.infos]
        costs = [np.ravel(info["constraint_costs"]) for info in recorder.infos]
    else:
        actions = [np.concatenate([np.ravel(info[a]["action_applied"]) for a in agents]) for info in recorder.infos]
        costs = [np.ravel(info[agents[0]]["constraint_costs"]) for info in recorder.infos]
    actions_arr = np.stack(actions)
    names = tuple(spec.action.names) if len(spec.action.names) == actions_arr.shape[1] else ()
    unit = "$, team" if agents is not None else "$"
    return atomic_save(path, lambda p: plot_episode_trace(
        np.asarray(recorder.rewards), actions_arr, np.stack(costs), p,
        title=f"{task}: {policy} on {split} day {day_id} (seed {seed})", step_hours=spec.step_minutes / 60.0,
        action_names=names, cost_names=spec.constraint_names, reward_unit=unit,
    ))


# ---- the campaign -----------------------------------------------------------------------------------
@dataclasses.dataclass
class _Entry:
    """One policy on one task: how to build its env and policy."""

    task: str
    policy: str
    kind: str  # "baseline" or "trained"
    source: str  # baseline name, or the run folder
    env: Any
    make_policy: Callable[[Any, int], Any]  # (env, seed) -> policy


def _baseline_factory(name: str) -> Callable[[Any, int], Any]:
    if name == "random":
        return lambda env, seed: RandomPolicy(env.action_space, seed=seed)
    cls = RuleBasedPolicy if name == "rule_based" else OraclePolicy

    def make(env: Any, seed: int) -> Any:
        policy = cls(env)
        seed_policy(policy, seed)
        return policy

    return make


def _validate(tasks: Sequence[str], policies: Sequence[str], seeds: Sequence[int], split: str,
              episodes: int | None) -> tuple[list[str], list[str], list[int]]:
    registered = list_tasks()
    names = list(registered) if list(tasks) == ["all"] else list(dict.fromkeys(tasks))
    unknown = [t for t in names if t not in registered]
    if unknown:
        raise ValueError(f"unknown task(s) {', '.join(map(repr, unknown))}; registered tasks: "
                         f"{', '.join(registered)} (or 'all')")
    policies = list(dict.fromkeys(policies))
    bad = [p for p in policies if p not in BASELINE_POLICIES]
    if bad:
        raise ValueError(f"unknown policy(ies) {', '.join(map(repr, bad))}; valid: {', '.join(BASELINE_POLICIES)} "
                         "(evaluate trained agents by giving their run folders)")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("give at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds repeat: {seeds}")
    if any(s < 0 for s in seeds):
        raise ValueError(f"seeds must be >= 0, got {seeds}")
    if episodes is not None and (isinstance(episodes, bool) or int(episodes) < 1):
        raise ValueError(f"episodes must be a positive int or None, got {episodes!r}")
    for t in names:
        splits = task_spec(t).splits
        if split not in splits:
            raise ValueError(f"unknown split {split!r} for {t}; valid: {', '.join(splits)}")
    return names, policies, seeds


def _load_run(run_dir: Path, split: str, model: str) -> tuple[str, Any, Callable[[Any, int], Any], str]:
    """``(task, env, make_policy, description)`` of a trained run folder (imports torch / SB3)."""
    from powerzoo.rl.run_dir import CONFIG_FILE, EVAL_DIR
    from powerzoo.rl.trainer import Trainer

    if not (run_dir / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"{run_dir} is not a run folder (no {CONFIG_FILE})")
    if model == "best" and not (run_dir / EVAL_DIR / "best_model.zip").is_file():
        model = "final"  # the run had no evaluations: its final model
    trainer = Trainer.load(run_dir, model=model)
    splits = trainer.spec.splits
    if split not in splits:
        raise ValueError(f"unknown split {split!r} for {trainer.task} (run {run_dir}); valid: {', '.join(splits)}")
    env = trainer._make_multi_agent_eval_env(split) if trainer.is_multi_agent else trainer.make_eval_env(split)
    deterministic = True

    def make(env: Any, seed: int) -> Any:
        policy = trainer.policy(deterministic)
        seed_policy(policy, seed)
        return policy

    if trainer.is_multi_agent:
        shown = "shared policy" if trainer.shared_model is not None else "independent learners"
    else:
        shown = f"{model} model"
    return trainer.task, env, make, f"{trainer.algorithm} {shown}"


def run_campaign(
    tasks: Iterable[str],
    policies: Iterable[str] = BASELINE_POLICIES,
    seeds: Iterable[int] = (0,),
    split: str = "test",
    episodes: int | None = None,
    run_dirs: Iterable[str | Path] = (),
    out_dir: str | Path = "results/bench",
    progress: bool = True,
    *,
    run_model: str = "best",
    plots: bool = True,
) -> CampaignResult:
    """Evaluate baselines (and trained runs) on ``tasks`` x ``seeds``; write tables and plots to ``out_dir``.

    Args:
        tasks: registered task names, or ``["all"]``.
        policies: baselines among ``random``, ``rule_based``, ``oracle``; one the task does not
            define is skipped with a note.
        seeds: campaign seeds (random policy seed and env reset seeds, module docstring).
        split: data split of the evaluated days (validated against each task's splits).
        episodes: days per seed: ``None`` for every split day, else that many spread evenly.
        run_dirs: run folders of :class:`~powerzoo.rl.trainer.Trainer`; each is evaluated on its
            config's task (listed in ``tasks`` or not) under the same seeds and days; the policy
            name is the folder name. Loading them imports torch.
        out_dir: output folder (created); files are listed in the module docstring.
        progress: tqdm bar over (task, policy, seed), shown only when stderr is a terminal.
        run_model: model of each run folder: ``best`` (falls back to ``final`` when the run saved
            no best model), ``final`` or ``latest``.
        plots: write the PNG plots (the tables are always written).

    Returns a :class:`CampaignResult`. Raises ``ValueError`` for unknown tasks, policies or splits.
    """
    from tqdm.auto import tqdm

    started = time.perf_counter()
    task_names, policy_names, seed_list = _validate(list(tasks), list(policies), list(seeds), split, episodes)
    if not task_names and not list(run_dirs):
        raise ValueError("nothing to evaluate: give at least one task or run folder")
    out = Path(out_dir)
    notes: list[str] = []
    entries: list[_Entry] = []
    for task in task_names:
        defined = task_spec(task).baselines
        wanted = [p for p in policy_names if p == "random" or p in defined]
        for p in policy_names:
            if p not in wanted:
                notes.append(f"{task}: skipped {p} (the task defines no {p} baseline; its baselines: "
                             f"{', '.join(defined)})")
        if wanted:
            env = make_env(task, split)
            entries += [_Entry(task, p, "baseline", p, env, _baseline_factory(p)) for p in wanted]
    taken = {(e.task, e.policy) for e in entries}
    for run_dir in map(Path, run_dirs):
        task, env, make, description = _load_run(run_dir, split, run_model)
        name = run_dir.resolve().name
        label, k = name, 2
        while (task, label) in taken:
            label, k = f"{name}_{k}", k + 1
        taken.add((task, label))
        entries.append(_Entry(task, label, "trained", f"{run_dir} ({description})", env, make))
        if task not in task_names:
            notes.append(f"{task}: run {label} evaluated without baselines (the task is not among the campaign's tasks)")

    jobs = [(e, s) for e in entries for s in seed_list]
    show = progress and sys.stderr.isatty()
    bar = tqdm(total=len(jobs), desc="bench", disable=not show, unit="job")
    episode_rows: list[dict[str, Any]] = []
    by_entry: dict[int, list[dict[str, Any]]] = {}
    cost_names: dict[str, tuple[str, ...]] = {}
    days_of: dict[int, list[int]] = {}
    recorders: dict[int, tuple[_StepRecorder, int, int]] = {}
    failed: set[int] = set()
    for entry, seed in jobs:
        key = id(entry)
        bar.set_description(f"{entry.task}/{entry.policy}/seed{seed}")
        if key in failed:
            bar.update(1)
            continue
        task_obj = task_of(entry.env)
        days = days_of.setdefault(key, select_days(task_obj.n_days, episodes))
        try:
            policy = entry.make_policy(entry.env, seed)
        except (ValueError, TypeError) as err:  # a policy the env cannot run
            notes.append(f"{entry.task}: skipped {entry.policy} ({err})")
            failed.add(key)
            bar.update(1)
            continue
        for i, day in enumerate(days):
            env = entry.env
            record_trace = plots and key not in recorders and i == 0
            if record_trace:
                env = _StepRecorder(entry.env)
                recorders[key] = (env, seed, day)
            env_seed = episode_seed(seed, i)
            record = rollout(env, policy, day_id=day, seed=env_seed)
            names = cost_names.setdefault(entry.task, tuple(constraint_names(entry.env, len(record["costs"]))))
            row = {"task": entry.task, "policy": entry.policy, "seed": seed, "episode": i,
                   "day_id": int(record["day_id"]) if record["day_id"] is not None else int(day),
                   "env_seed": env_seed, "return": float(record["return"]), "length": int(record["length"]),
                   "total_cost": float(np.sum(record["costs"]))}
            row.update({f"cost_{n}": float(c) for n, c in zip(names, record["costs"], strict=True)})
            episode_rows.append(row)
            by_entry.setdefault(key, []).append(row)
        fallback = getattr(policy, "fallback_steps", 0)
        if fallback:
            notes.append(f"{entry.task}: {entry.policy} seed {seed}: the oracle's solver failed on {fallback} "
                         "step(s), interpolated from the neighbouring steps")
        bar.update(1)
    bar.close()

    summary_rows: list[dict[str, Any]] = []
    for entry in entries:
        key = id(entry)
        records = by_entry.get(key)
        if not records:
            continue
        days = days_of[key]
        stats = summarize_campaign_episodes(records, cost_names[entry.task])
        used_seeds = list(dict.fromkeys(r["seed"] for r in records))
        row = {"task": entry.task, "split": split, "policy": entry.policy, "kind": entry.kind,
               "source": entry.source, "n_seeds": len(used_seeds), "seeds": " ".join(map(str, used_seeds)),
               "n_days": len(days), **stats}
        row.update(_score(entry.task, split, days, row))
        summary_rows.append(row)

    result = CampaignResult(out, split, tuple(seed_list), summary_rows, episode_rows, notes, cost_names, {}, [], 0.0)
    out.mkdir(parents=True, exist_ok=True)
    result.files["results_csv"] = atomic_write_text(
        out / "results.csv",
        _csv_text([*SUMMARY_COLUMNS, *_cost_columns(cost_names, ("_mean", "_ci_low", "_ci_high"))], summary_rows),
    )
    result.files["episodes_csv"] = atomic_write_text(
        out / "episodes.csv", _csv_text([*EPISODE_COLUMNS, *_cost_columns(cost_names, ("",))], episode_rows)
    )
    if plots:
        for task in result.tasks:
            rows = [r for r in summary_rows if r["task"] == task]
            result.plots.append(_plot_return_vs_cost(rows, task, split, out / f"return_vs_cost_{_file_label(task)}.png"))
        for entry in entries:
            if id(entry) not in recorders:
                continue
            recorder, seed, day = recorders[id(entry)]
            path = out / f"episode_{_file_label(entry.task)}_{_file_label(entry.policy)}.png"
            result.plots.append(_plot_episode(recorder, agents_of(entry.env), entry.task, entry.policy, split, seed,
                                              day, path))
    result.files["results_md"] = atomic_write_text(out / "results.md", _results_markdown(result))
    result.wall_seconds = time.perf_counter() - started
    return result


def _score(task: str, split: str, days: Sequence[int], row: dict[str, Any]) -> dict[str, float | None]:
    """Normalised score of ``row``'s mean return and its interval; ``None`` off the table's protocol."""
    blank: dict[str, float | None] = {"normalized_score": None, "normalized_score_ci_low": None,
                                      "normalized_score_ci_high": None}
    try:
        if list(evaluation_protocol(task, split)["day_ids"]) != list(days):
            return blank
        low, high = (normalized_score(task, row[k], split) for k in ("mean_return_ci_low", "mean_return_ci_high"))
        return {"normalized_score": float(normalized_score(task, row["mean_return"], split)),
                "normalized_score_ci_low": float(min(low, high)), "normalized_score_ci_high": float(max(low, high))}
    except (ValueError, KeyError, FileNotFoundError):
        return blank
