"""``powerzoo demo``: train a small PPO agent on ``battery_arbitrage`` and compare it with the
random, idle, rule-based and oracle baselines on the test split (table + plot of one test day).

The agent trains on the task's ``"penalized"`` reward (profit minus 100 $ per MWh of
``soc_violation``, :data:`DEMO_REWARD`) so that it learns to keep its requests inside the SOC
bounds; the table scores every policy on the task's own objective (profit, $/day, no penalty)
next to its constraint cost (MWh/day) and violation rate.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.fileio import atomic_save

__all__ = [
    "run_demo",
    "train_demo_agent",
    "comparison_table",
    "DEMO_TIMESTEPS",
    "DEMO_REWARD",
    "DEMO_TRAINING",
]

TASK = "battery_arbitrage"
TRACE_KEYS = ("price_per_mwh", "p_mw", "soc")
DEMO_TIMESTEPS = 60_000  # 20-40 s of PPO on two cores
DEMO_REWARD: str | dict[str, float] = (
    "penalized"  # spec.reward_presets: profit - 100 $/MWh x soc_violation
)
# Trainer settings of the demo (tuned on seeds 0-3: return between rule-based and oracle,
# soc_violation < 1 MWh/day): a small initial action noise (std e^-1 of the [-1, 1] range) and a
# higher learning rate than SB3's default let 60k steps learn both the arbitrage and the SOC bounds.
DEMO_TRAINING: dict[str, Any] = {
    "n_envs": 8,
    "n_steps": 256,
    "batch_size": 256,
    "learning_rate": 1e-3,
    "policy_kwargs": {"log_std_init": -1.0},
}


def train_demo_agent(
    out_dir: Path,
    timesteps: int,
    progress: bool | None = None,
    *,
    seed: int = 0,
    reward: str | dict[str, float] | None = DEMO_REWARD,
) -> Any:
    """Train PPO on battery_arbitrage's train split into ``out_dir/run`` (replacing an earlier demo
    run).

    Args:
        out_dir: folder of the demo; the run folder is ``out_dir/run``.
        timesteps: training budget (env steps over all parallel envs).
        progress: training progress bar (``None``: only when stderr is a terminal).
        seed: seeds the model and the training envs.
        reward: the training reward (``make_env``'s ``reward=``; ``None``: the task's own profit).
            The best model is chosen on the validation split under this same reward.

    Returns the best model (on the validation split) as a loaded
    :func:`~powerzoo.rl.trainer.Trainer`.
    """
    import shutil

    from powerzoo.rl.trainer import Trainer

    run_dir = Path(out_dir) / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    trainer = Trainer(
        TASK,
        algorithm="PPO",
        total_timesteps=timesteps,
        seed=seed,
        reward=reward,
        output_dir=str(out_dir),
        name="run",
        evaluation={"freq": max(timesteps // 6, 1), "episodes": 8},
        checkpoint=None,
        logging={"progress_bar": progress},
        **DEMO_TRAINING,
    )
    trainer.train()
    trainer.close()
    return Trainer.load(run_dir, model="best")


def _policies(env: Any) -> dict[str, Any]:
    from powerzoo.benchmarks.policies import make_baseline_policy

    names = ("random", "idle", "rule_based", "oracle")
    return {name: make_baseline_policy(name, env, seed=0) for name in names}


def comparison_table(results: dict[str, dict[str, Any]]) -> str:
    """Plain-text table of evaluation summaries, one row per policy (one episode = one day).

    Columns: episodes, mean and std of the return ($/day), mean ``soc_violation`` (MWh/day) and
    violation rate (share of days with a violation above 1 kWh, the evaluation's tolerance).
    """
    header = (
        f"{'policy':<12} {'episodes':>8} {'return $/day':>13} {'std $/day':>10} "
        f"{'soc_violation MWh/day':>22} {'violation rate':>15}"
    )
    lines = [header, "-" * len(header)]
    for name, r in results.items():
        lines.append(
            f"{name:<12} {r['episodes']:>8d} {r['mean_return']:>13,.1f} {r['std_return']:>10,.1f} "
            f"{r['mean_costs']['soc_violation']:>22.3f} {r['violation_rate']:>15.2f}"
        )
    return "\n".join(lines)


def verdict(results: dict[str, dict[str, Any]], agent: str) -> str:
    """One line on ``agent``'s mean return against idle, the rule and the oracle ($/day).

    Args:
        results: Evaluation summaries by policy name, with ``idle``, ``rule_based`` and
            ``oracle`` among them.
        agent: The name of the trained policy's row.

    Returns:
        The sentence, e.g. ``verdict: ppo_60k beats idle and the rule ...``.
    """
    mean = {name: r["mean_return"] for name, r in results.items()}
    a, idle, rule, oracle = mean[agent], mean["idle"], mean["rule_based"], mean["oracle"]

    def versus(name: str, value: float) -> str:
        word = "beats" if a > value else "does not beat"
        return f"{word} {name} ({value:,.0f} $/day)"

    share = (a - idle) / (oracle - idle) if oracle != idle else float("nan")
    return (
        f"verdict: {agent} ({a:,.0f} $/day) {versus('idle', idle)}, {versus('the rule', rule)} "
        f"and takes {share:.0%} of the oracle's gain over idle ({oracle - idle:,.0f} $/day)"
    )


def plot_episode(traces: dict[str, dict[str, np.ndarray]], day_label: str, path: Path) -> Path:
    """Price, battery power and SOC of one episode for each policy, saved as a PNG."""
    import matplotlib

    from powerzoo.benchmarks.plots import PNG_METADATA

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
        return atomic_save(path, lambda p: fig.savefig(p, dpi=110, metadata=PNG_METADATA))
    finally:
        plt.close(fig)


def _reward_label(reward: str | dict[str, float] | None) -> str:
    """``reward=`` in words, e.g. ``reward='penalized' (profit - 100 $/MWh x soc_violation)``."""
    from powerzoo.tasks import task_spec

    if reward is None:
        return "the task's own reward (profit)"
    weights = task_spec(TASK).reward_presets.get(reward, {}) if isinstance(reward, str) else reward
    penalty = weights.get("soc_violation", 0.0)
    return f"reward={reward!r}" + (
        f" (profit - {penalty:g} $/MWh x soc_violation)" if penalty else ""
    )


def run_demo(
    out_dir: str | Path = "results/demo",
    episodes: int | None = None,
    plot_day: int = 0,
    progress: bool | None = None,
    timesteps: int = DEMO_TIMESTEPS,
    seed: int = 0,
    reward: str | dict[str, float] | None = DEMO_REWARD,
) -> dict[str, Any]:
    """Train PPO (unless ``timesteps`` is 0), evaluate it and the baselines (random, idle, rule,
    oracle) on the test split, print a table and a one-line verdict, save a plot; return the
    summaries by policy name.

    Every row is scored on the task's objective (profit, $/day), also the agent trained on
    ``reward`` (:data:`DEMO_REWARD` by default; see :func:`train_demo_agent`). ``seed`` seeds the
    training; ``progress``: progress bars (``None``: only when stderr is a terminal).
    """
    from powerzoo.benchmarks.baselines import select_days
    from powerzoo.benchmarks.evaluation import evaluate_days, rollout
    from powerzoo.envs.introspect import task_of
    from powerzoo.envs.make import make_env
    from powerzoo.progress import progress_bar

    env = make_env(TASK, split="test", seed=0)
    task = task_of(env)
    days = select_days(task.n_days, episodes)  # spread over the split, as bench and eval pick
    results, traces = {}, {}
    for name, policy in progress_bar(_policies(env).items(), progress=progress, desc="policies"):
        results[name] = evaluate_days(policy, env, days, seed=0)
        traces[name] = rollout(env, policy, day_id=plot_day, seed=0, trace_keys=TRACE_KEYS)["trace"]
    if timesteps > 0:
        started = time.perf_counter()
        agent = train_demo_agent(Path(out_dir), timesteps, progress, seed=seed, reward=reward)
        seconds = time.perf_counter() - started
        agent_env, name = (
            agent.make_eval_env(objective=True, split="test"),
            f"ppo_{timesteps // 1000}k",
        )
        results[name] = evaluate_days(agent.policy(), agent_env, days, seed=0)
        traces[name] = rollout(
            agent_env, agent.policy(), day_id=plot_day, seed=0, trace_keys=TRACE_KEYS
        )["trace"]
        print(
            f"trained PPO for {timesteps:,} env steps in {seconds:.0f} s on "
            f"{_reward_label(reward)}, seed {seed} (run folder: {Path(out_dir) / 'run'})"
        )
    print(
        f"{TASK}, test split ({len(days)} days, one episode per day). "
        "return: profit ($/day, no penalty);\n"
        "soc_violation: energy asked beyond the SOC bounds (MWh/day); "
        "violation rate: share of days with more than 1 kWh of it"
    )
    print(comparison_table(results))
    if timesteps > 0:
        print(verdict(results, name))
    date = task.profiles.dates[task.calendar_day(plot_day)]
    path = plot_episode(traces, f"day {plot_day} ({date})", Path(out_dir) / "demo_episode.png")
    print(f"plot of one test episode: {path}")
    return results
