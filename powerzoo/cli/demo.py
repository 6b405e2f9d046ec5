"""``powerzoo demo``: train a small PPO agent on ``battery_arbitrage`` and compare it with the
random, rule-based and oracle baselines on the test split (table + plot of one test day)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.fileio import atomic_save

__all__ = ["run_demo", "train_demo_agent", "DEMO_TIMESTEPS"]

TRACE_KEYS = ("price_per_mwh", "p_mw", "soc")
DEMO_TIMESTEPS = 60_000  # 15-30 s of PPO on two cores


def train_demo_agent(out_dir: Path, timesteps: int, progress: bool | None = None) -> Any:
    """Train PPO on battery_arbitrage's train split into ``out_dir/run`` (replacing an earlier demo run).

    ``progress``: training progress bar (``None``: only when stderr is a terminal).
    """
    import shutil

    from powerzoo.rl.trainer import Trainer

    run_dir = Path(out_dir) / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    trainer = Trainer(
        "battery_arbitrage", algorithm="PPO", total_timesteps=timesteps, seed=0, n_envs=8,
        n_steps=256, batch_size=256, output_dir=str(out_dir), name="run",
        evaluation={"freq": max(timesteps // 6, 1), "episodes": 8}, checkpoint=None,
        logging={"progress_bar": progress},
    )
    trainer.train()
    trainer.close()
    return Trainer.load(run_dir, model="best")


def _policies(env: Any) -> dict[str, Any]:
    from powerzoo.benchmarks.policies import BASELINE_POLICIES, make_baseline_policy

    return {name: make_baseline_policy(name, env, seed=0) for name in BASELINE_POLICIES}


def comparison_table(results: dict[str, dict[str, Any]]) -> str:
    """Plain-text table of evaluation summaries, one row per policy."""
    header = f"{'policy':<12} {'episodes':>8} {'mean return $':>14} {'std $':>10} {'soc_violation MWh':>18} {'violation rate':>15}"
    lines = [header, "-" * len(header)]
    for name, r in results.items():
        lines.append(
            f"{name:<12} {r['episodes']:>8d} {r['mean_return']:>14,.1f} {r['std_return']:>10,.1f} "
            f"{r['mean_costs']['soc_violation']:>18.3f} {r['violation_rate']:>15.2f}"
        )
    return "\n".join(lines)


def plot_episode(traces: dict[str, dict[str, np.ndarray]], day_label: str, path: Path) -> Path:
    """Price, battery power and SOC of one episode for each policy, saved as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    any_trace = next(iter(traces.values()))
    hours = np.arange(any_trace["price_per_mwh"].size) * 0.5
    axes[0].step(hours, any_trace["price_per_mwh"], where="post", color="black")
    axes[0].set_ylabel("price ($/MWh)")
    axes[0].set_title(f"battery_arbitrage, test split, {day_label}")
    for name, trace in traces.items():
        axes[1].step(hours, trace["p_mw"], where="post", label=name)
        axes[2].plot(hours + 0.5, trace["soc"], marker=".", label=name)
    axes[1].axhline(0.0, color="grey", lw=0.5)
    axes[1].set_ylabel("power (MW, + discharge)")
    axes[2].set_ylabel("SOC (after step)")
    axes[2].set_xlabel("hour of day")
    axes[1].legend(loc="upper left", ncol=3)
    fig.tight_layout()
    try:
        return atomic_save(path, lambda p: fig.savefig(p, dpi=110))
    finally:
        plt.close(fig)


def run_demo(out_dir: str | Path = "results/demo", episodes: int | None = None, plot_day: int = 0,
             progress: bool | None = None, timesteps: int = DEMO_TIMESTEPS) -> dict[str, Any]:
    """Train PPO (unless ``timesteps`` is 0), evaluate it and the three baselines on the test split,
    print a table, save a plot; return the summaries. ``progress``: progress bars (``None``: only
    when stderr is a terminal)."""
    from powerzoo.benchmarks.evaluation import evaluate_days, rollout
    from powerzoo.envs.introspect import task_of
    from powerzoo.envs.make import make_env
    from powerzoo.progress import progress_bar

    env = make_env("battery_arbitrage", split="test", seed=0)
    task = task_of(env)
    days = range(task.n_days if episodes is None else min(episodes, task.n_days))
    results, traces = {}, {}
    for name, policy in progress_bar(_policies(env).items(), progress=progress, desc="policies"):
        results[name] = evaluate_days(policy, env, days, seed=0)
        traces[name] = rollout(env, policy, day_id=plot_day, seed=0, trace_keys=TRACE_KEYS)["trace"]
    if timesteps > 0:
        started = time.perf_counter()
        agent = train_demo_agent(Path(out_dir), timesteps, progress)
        seconds = time.perf_counter() - started
        agent_env, name = agent.make_eval_env("test"), f"ppo_{timesteps // 1000}k"
        results[name] = evaluate_days(agent.policy(), agent_env, days, seed=0)
        traces[name] = rollout(agent_env, agent.policy(), day_id=plot_day, seed=0, trace_keys=TRACE_KEYS)["trace"]
        print(f"trained PPO for {timesteps:,} env steps in {seconds:.0f} s (run folder: {Path(out_dir) / 'run'})")
    print(f"battery_arbitrage, test split ({len(days)} days, one episode per day)")
    print(comparison_table(results))
    date = task.profiles.dates[task.calendar_day(plot_day)]
    path = plot_episode(traces, f"day {plot_day} ({date})", Path(out_dir) / "demo_episode.png")
    print(f"plot of one test episode: {path}")
    return results
