"""``powerzoo train`` / ``eval`` / ``resume``: the training layer from the command line."""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from powerzoo.cli.common import (
    add_model_argument,
    add_progress_argument,
    add_split_and_episodes,
    add_trust_pickle_argument,
    nonnegative_int,
    positive_int,
)

__all__ = ["add_parsers", "evaluate_run", "format_summary"]


def _algorithm_name(value: str) -> str:
    """``--algo``: a registered name (any case) or an entry point ``package.module:Class``."""
    from powerzoo.rl.algorithms import ALL_ALGORITHMS, canonical_algorithm

    try:
        return canonical_algorithm(value, ALL_ALGORITHMS)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _run_name(value: str) -> str:
    """``--name``: one plain folder name (``argparse`` prints the reason and exits 2)."""
    from powerzoo.rl.names import check_plain_name

    try:
        return check_plain_name(value, "the run name")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _env_steps(value: str) -> int:
    """``--timesteps`` / ``--eval-freq``: a whole number, also written ``1e6`` or ``100_000``."""
    from powerzoo.rl.config import whole_number

    try:
        number = whole_number(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if isinstance(number, bool) or not isinstance(number, int):
        raise argparse.ArgumentTypeError(f"must be a whole number of env steps, got {value!r}")
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 env step, got {value!r}")
    return number


@contextlib.contextmanager
def _space_errors(run_dir: Callable[[], Any]) -> Iterator[None]:
    """A write refused for space inside the block (disk full, ``ulimit -f``, quota; atomic writes
    leave no temporary file) becomes one :class:`~powerzoo.fileio.DiskFullError` naming the run
    folder ``run_dir()``, which the command line prints as one line."""
    from powerzoo.fileio import DiskFullError, disk_full_cause

    try:
        yield
    except Exception as err:
        full = disk_full_cause(err)
        if full is None:
            raise
        folder = run_dir()
        done = f"free space, then `powerzoo resume {folder}` or train again"
        raise DiskFullError(folder or full.filename or "the run folder", full, done) from err


def format_summary(summary: dict[str, Any], title: str, spec: Any = None) -> str:
    """A two-column text table of an evaluation summary (return, costs, rates, normalised score).

    Args:
        summary: What :func:`evaluate_run` (or ``Trainer.evaluate``) returns.
        title: The table's first line.
        spec: The task's :class:`~powerzoo.tasks.spec.TaskSpec`: labels the return and each cost
            with its unit and per-episode budget (``None``: bare labels).

    Returns:
        The table as text.
    """
    money = " ($/episode)" if spec is not None else ""
    rows: list[tuple[str, str]] = [
        ("episodes", f"{summary['episodes']}"),
        (f"mean return{money}", f"{summary['mean_return']:,.2f}"),
        (f"std return{money}", f"{summary['std_return']:,.2f}"),
        (f"IQM return{money}", f"{summary['iqm_return']:,.2f}"),
        ("mean length (steps)", f"{summary['mean_length']:.1f}"),
    ]
    rows += [
        (f"cost {name} ({_cost_label(spec, name)})", f"{value:,.4f}")
        for name, value in summary["mean_costs"].items()
    ]
    rows.append(("violation rate", f"{summary['violation_rate']:.3f}"))
    over = summary.get("over_budget_rate")
    rows.append(("days over budget", "n/a" if over is None else f"{over:.3f}"))
    score = summary.get("normalized_score")
    rows.append(("normalised score", "n/a" if score is None else f"{score:.3f}"))
    cmdp = summary.get("cmdp_score")
    rows.append(("budget-aware score", "n/a" if cmdp is None else f"{cmdp:.3f}"))
    width = max(len(k) for k, _ in rows)
    lines = [title, "-" * len(title)] + [f"{k:<{width}}  {v:>16}" for k, v in rows]
    return "\n".join(lines)


def _cost_label(spec: Any, name: str) -> str:
    """``MVAh per episode, budget 1`` (unit and budget from ``spec``; ``per episode`` without)."""
    if spec is None or name not in spec.constraint_names:
        return "per episode"
    unit = spec.constraint_units[spec.constraint_names.index(name)]
    budget = spec.cost_thresholds.get(name) if name in spec.selected_constraints else None
    return f"{unit} per episode, " + ("no budget" if budget is None else f"budget {budget:g}")


def _print_result(result: Any) -> None:
    best = result.best_mean_return
    print(f"run folder: {result.run_dir}")
    print(
        f"env steps: {result.num_timesteps:,} "
        f"({result.status}{': ' + result.stop_reason if result.stop_reason else ''}), "
        f"{result.wall_seconds:.1f} s"
    )
    if best is not None:
        n = len(result.evaluations)
        plural = "s" if n != 1 else ""
        print(f"best evaluation mean return: {best:,.2f} $/episode ({n} evaluation{plural})")
    print(
        f"evaluate on the test split: powerzoo eval {shlex.quote(str(result.run_dir))} --split test"
    )


def _cmd_train(args: argparse.Namespace) -> int:
    from powerzoo.rl.algorithms import is_native
    from powerzoo.rl.trainer import Trainer

    if (args.config is None) == (args.task is None):
        raise ValueError(
            "give either a task (powerzoo train TASK --algo PPO) "
            "or a config (powerzoo train -c FILE)"
        )
    if args.config is not None:
        _check_config_file(args.config)
    overrides: dict[str, Any] = {}
    for key in ("seed", "n_envs", "name", "output_dir"):
        value = getattr(args, key)
        if value is not None:
            overrides[key] = value
    if args.eval_freq is not None:
        overrides["evaluation"] = {"freq": args.eval_freq}
    if args.progress is not None:
        overrides["logging"] = {"progress_bar": args.progress}
    if args.overwrite:
        overrides["overwrite"] = True
    trainer = Trainer(
        args.config or args.task, algorithm=args.algo, total_timesteps=args.timesteps, **overrides
    )
    if args.marl is not None and (is_native(trainer.algorithm) or not trainer.is_multi_agent):
        raise ValueError(
            f"--marl chooses how an SB3 algorithm trains on a multi-agent task; "
            f"{trainer.algorithm} on {trainer.config.task} "
            + (
                "trains its own way (leave --marl out)"
                if trainer.is_multi_agent
                else "has one agent"
            )
        )
    resumable = getattr(trainer, "RESUMABLE", True)
    trainer.on_start = lambda folder: _announce_start(folder, resumable)
    try:
        with _space_errors(lambda: trainer.run_dir):
            if is_native(trainer.algorithm):  # MAPPO / IPPO (-L), PPO-L: the native trainer
                result = trainer.train()
            elif trainer.is_multi_agent:
                il = args.marl == "il"
                result = trainer.train_il() if il else trainer.train_marl_simultaneous()
            else:
                result = trainer.train()
            trainer.close()
    except KeyboardInterrupt:
        return _interrupted(trainer.run_dir, resumable)
    _print_result(result)
    return 0


CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def _check_config_file(path: str) -> None:
    """``-c``: a YAML or JSON file that exists (``ValueError`` naming what it got instead)."""
    config = Path(path)
    if config.is_dir():
        raise ValueError(f"-c/--config takes a YAML or JSON run config file, got the folder {path}")
    if config.suffix.lower() not in CONFIG_SUFFIXES:
        raise ValueError(
            f"-c/--config takes a YAML or JSON run config file ({', '.join(CONFIG_SUFFIXES)}), "
            f"got {path}"
        )
    if not config.is_file():
        raise FileNotFoundError(f"-c/--config: no such file: {path}")


INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT, as a shell reports it)."""


def _announce_start(run_dir: Path, resumable: bool = True) -> None:
    """The line ``powerzoo train`` prints once training has started in ``run_dir``."""
    folder = shlex.quote(str(run_dir))
    then = f"`powerzoo resume {folder}` continues it" if resumable else "no checkpoints"
    print(f"training started: {run_dir} (Ctrl-C stops it; {then})", flush=True)


def _interrupted(run_dir: Path | None, resumable: bool = True) -> int:
    """One line on stderr after Ctrl-C (what was kept, how to go on); returns 130."""
    import sys

    from powerzoo.rl import run_dir as rd

    if run_dir is not None and (Path(run_dir) / rd.CONFIG_FILE).is_file() and resumable:
        folder = shlex.quote(str(run_dir))
        print(
            f"powerzoo: interrupted: the run in {run_dir} stopped (marked interrupted, kept up to "
            f"its last checkpoint); continue it with `powerzoo resume {folder}`",
            file=sys.stderr,
        )
    elif run_dir is not None and (Path(run_dir) / rd.CONFIG_FILE).is_file():
        print(
            f"powerzoo: interrupted: the run in {run_dir} stopped (marked interrupted); SB3 "
            "multi-agent runs keep no checkpoints: train it again with --overwrite",
            file=sys.stderr,
        )
    else:
        print(
            "powerzoo: interrupted before the run folder was written; nothing to resume",
            file=sys.stderr,
        )
    return INTERRUPTED


def _cmd_resume(args: argparse.Namespace) -> int:
    from powerzoo.rl.run_dir import read_run_state
    from powerzoo.rl.trainer import Trainer

    try:
        with _space_errors(lambda: args.run_dir):
            trainer = Trainer.resume(args.run_dir, trust_pickle=args.trust_pickle)
    except KeyboardInterrupt:
        return _interrupted(Path(args.run_dir))
    if trainer.result is None:  # nothing trained: the run had ended (read-only, nothing written)
        state = read_run_state(args.run_dir) or {}
        steps = int(state.get("num_timesteps") or 0)
        why = "finished" if state.get("status") == "finished" else "was stopped by a stop condition"
        print(f"{args.run_dir} {why} at {steps:,} env steps; nothing to resume")
        return 0
    trainer.close()
    _print_result(trainer.result)
    return 0


def evaluate_run(
    run_dir: str | Path,
    split: str = "test",
    episodes: int | None = None,
    model: str = "best",
    deterministic: bool = True,
    plot_day: int = 0,
    progress: bool | None = None,
    *,
    trust_pickle: bool = False,
) -> dict[str, Any]:
    """Evaluate a run folder's model on ``split``; write a per-episode CSV and a plot of one
    episode.

    Files (in ``<run_dir>/evaluation/``): ``eval_<split>_<model>.csv`` (one row per episode: day,
    return, length, cost per constraint) and ``eval_<split>_<model>_day<plot_day>.png``;
    ``eval_<split>_<model>_stochastic...`` when the actions are sampled (``deterministic=False``).
    Returns the summary (as :meth:`powerzoo.rl.trainer_base.TrainerBase.evaluate`) plus the two
    paths.
    ``progress``: bar over the episodes (``None``: only when stderr is a terminal).
    ``trust_pickle``: also read the pickles of a run folder an older PowerZoo wrote (they run
    code); without it such a folder, or missing statistics of a run that normalises, is an error
    naming the file.
    """
    from powerzoo.benchmarks.baselines import score_or_none, select_days
    from powerzoo.benchmarks.cmdp_score import cmdp_score_or_none
    from powerzoo.benchmarks.evaluation import rollout, summarize_episodes
    from powerzoo.benchmarks.plots import plot_recorded_episode, record_episode
    from powerzoo.cli.runs import load_run
    from powerzoo.envs.introspect import task_of
    from powerzoo.fileio import atomic_write_text
    from powerzoo.progress import progress_bar

    run_dir = Path(run_dir)
    trainer, model = load_run(run_dir, model, trust_pickle=trust_pickle)
    env = trainer.make_eval_env(
        split, objective=True
    )  # the task's objective, not a training penalty
    n_days = task_of(env).n_days
    days = select_days(n_days, episodes)
    if not 0 <= plot_day < n_days:
        raise ValueError(
            f"--plot-day must be in [0, {n_days - 1}] for the {split} split, got {plot_day}"
        )
    policy = trainer.policy(deterministic)
    bar = progress_bar(days, progress=progress, desc=f"evaluating on {split}", unit="episode")
    records = [rollout(env, policy, day_id=d, seed=i) for i, d in enumerate(bar)]
    summary = summarize_episodes(records, env, trainer.task)
    summary["normalized_score"] = (
        score_or_none(trainer.task, summary["mean_return"], split) if episodes is None else None
    )
    summary["cmdp_score"] = cmdp_score_or_none(trainer.task, summary, days, 0, split)
    names = list(summary["mean_costs"])
    out_dir = run_dir / "evaluation"
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["day_id", "return", "length", *[f"cost_{n}" for n in names]])
    for d, r in zip(days, records, strict=True):
        writer.writerow([d, f"{r['return']:.6f}", r["length"], *[f"{c:.6f}" for c in r["costs"]]])
    stem = f"eval_{split}_{model}" + ("" if deterministic else "_stochastic")
    csv_path = atomic_write_text(out_dir / f"{stem}.csv", buffer.getvalue())
    trace = record_episode(env, policy, day_id=plot_day, seed=0)
    plot_path = plot_recorded_episode(
        trace,
        trainer.spec,
        out_dir / f"{stem}_day{plot_day}.png",
        title=f"{trainer.task} ({trainer.algorithm}, {model} model"
        f"{'' if deterministic else ', sampled actions'}), {split} day {plot_day}",
    )
    summary.update(csv=csv_path, plot=plot_path, model=model)
    return summary


def _cmd_eval(args: argparse.Namespace) -> int:
    summary = evaluate_run(
        args.run_dir,
        args.split,
        args.episodes,
        args.model,
        not args.stochastic,
        args.plot_day,
        trust_pickle=args.trust_pickle,
    )
    from powerzoo.tasks import task_spec

    sampled = ", sampled actions" if args.stochastic else ""
    title = f"{summary['task']} — {summary['model']} model{sampled} on the {args.split} split"
    print(format_summary(summary, title, task_spec(summary["task"])))
    print(f"per-episode results: {summary['csv']}")
    print(f"plot of one episode: {summary['plot']}")
    return 0


def add_parsers(sub: Any) -> None:
    """Register ``train``, ``eval`` and ``resume`` on the ``powerzoo`` sub-parser object."""
    from powerzoo.rl.algorithms import ALL_ALGORITHMS

    p = sub.add_parser(
        "train",
        help="train an agent: SB3, or MAPPO / IPPO (-L) on multi-agent tasks "
        "(from a task name or a YAML/JSON run config)",
    )
    p.add_argument("task", nargs="?", help="registered task (or use -c CONFIG)")
    p.add_argument("-c", "--config", help="YAML or JSON run config (see powerzoo.rl.config)")
    p.add_argument(
        "--algo",
        "--algorithm",
        type=_algorithm_name,
        default=None,
        metavar="ALGO",
        help=(
            f"algorithm: {', '.join(ALL_ALGORITHMS)} (default PPO; the native -L family and "
            "MAPPO / IPPO by task kind), or an SB3 algorithm class from outside as "
            "package.module:Class"
        ),
    )
    p.add_argument(
        "--timesteps", type=_env_steps, default=None, help="training budget in env steps (1e6 ok)"
    )
    p.add_argument("--seed", type=nonnegative_int, default=None)
    p.add_argument("--n-envs", type=positive_int, default=None, help="parallel training envs")
    p.add_argument(
        "--eval-freq", type=_env_steps, default=None, help="env steps between evaluations"
    )
    p.add_argument(
        "--name",
        default=None,
        type=_run_name,
        help=(
            "run folder name inside --output-dir: letters, digits, '.', '_', '-' "
            "(default <ALGO>-<task>-seed<S>-<time>)"
        ),
    )
    p.add_argument(
        "--output-dir",
        "--out",
        dest="output_dir",
        default=None,
        help="where run folders go (default: runs; --out as in the other commands)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a run folder of the same name (default: refused; resume it instead)",
    )
    p.add_argument(
        "--marl",
        choices=("shared", "il"),
        default=None,
        help="SB3 algorithms on multi-agent tasks: one shared policy (default) or independent "
        "learners",
    )
    add_progress_argument(p)
    p.set_defaults(func=_cmd_train)
    p = sub.add_parser(
        "eval", help="evaluate a run's model: table, per-episode CSV, plot of one episode"
    )
    p.add_argument("run_dir")
    add_split_and_episodes(p, "number of days (default: every day of the split)")
    add_model_argument(p, "--model", "which model of the run (default: best, else final)")
    p.add_argument(
        "--stochastic", action="store_true", help="sample actions instead of the deterministic ones"
    )
    p.add_argument("--plot-day", type=int, default=0, help="split day to plot (default: 0)")
    add_trust_pickle_argument(p)
    p.set_defaults(func=_cmd_eval)
    p = sub.add_parser(
        "resume",
        help="continue a killed or unfinished run from its newest checkpoint (a damaged one is "
        "skipped with a warning; a run killed before its first checkpoint starts again)",
    )
    p.add_argument("run_dir")
    add_trust_pickle_argument(p)
    p.set_defaults(func=_cmd_resume)
