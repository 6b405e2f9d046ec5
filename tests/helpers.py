"""Helpers shared by the test modules.

Not a test module itself: pytest puts the folder of ``tests/conftest.py`` on ``sys.path``, so test
files here and in sub-folders import it as ``from helpers import ...``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The repository checkout the tests run in (README, configs/, benchmarks/ scripts)."""


# ---- PettingZoo rollouts -------------------------------------------------------------------------
@dataclass
class ParallelRollout:
    """What :func:`random_parallel_rollout` saw, one list entry per env step.

    ``returns`` sums each agent's rewards over the episode (in the task's reward unit, $ for most
    tasks); ``terminations`` / ``truncations`` / ``infos`` are those of the last step.
    """

    steps: int = 0
    returns: dict[str, float] = field(default_factory=dict)
    rewards: list[dict[str, float]] = field(default_factory=list)
    observations: list[dict[str, Any]] = field(default_factory=list)
    terminations: dict[str, bool] = field(default_factory=dict)
    truncations: dict[str, bool] = field(default_factory=dict)
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)


def load_script(path: Path) -> Any:
    """The module of a script outside the package (``benchmarks/``, ``tools/``), imported from
    its file under its stem's name."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_parallel_rollout(env: Any, seed: int | None = 0) -> ParallelRollout:
    """Step a PettingZoo parallel env with random actions until no agent is left.

    Each step samples every live agent's action space (``env.action_space(agent).sample()``).
    ``seed`` is the ``env.reset`` seed; ``None`` steps the env as it is, without a reset.
    """
    if seed is not None:
        env.reset(seed=seed)
    out = ParallelRollout(returns={agent: 0.0 for agent in env.agents})
    while env.agents:
        actions = {agent: env.action_space(agent).sample() for agent in env.agents}
        obs, rewards, terms, truncs, infos = env.step(actions)
        for agent, reward in rewards.items():
            out.returns[agent] += reward
        out.rewards.append(rewards)
        out.observations.append(obs)
        out.terminations, out.truncations, out.infos = terms, truncs, infos
        out.steps += 1
    return out


# ---- task-level stepping -------------------------------------------------------------------------
def step_rule_based(task: Any, state: Any, n_steps: int, rng: Any) -> Any:
    """``state`` after ``n_steps`` steps of ``task`` under its rule-based action; the new state."""
    for _ in range(n_steps):
        state, _ = task.step(state, task.rule_based_action(task.observe(state)), rng)
    return state


# ---- waiting on events ---------------------------------------------------------------------------
SAFETY_TIMEOUT_S = 1800.0
"""Seconds after which a wait gives up: only a guard against a hang (a child that never gets
there), far beyond any machine's speed. Tests wait on files, output lines and process states,
never on the clock."""


def wait_until(
    ready: Callable[[], bool],
    what: str,
    process: subprocess.Popen | None = None,
    poll_s: float = 0.02,
) -> None:
    """Poll ``ready()`` until it holds.

    Fails at once if ``process`` ends first (its stderr in the message, when it was piped), and
    after :data:`SAFETY_TIMEOUT_S` (a hang: ``what`` never happened), however slow the machine.
    """
    started = time.monotonic()
    while not ready():
        if process is not None and process.poll() is not None:
            stderr = process.stderr.read() if process.stderr is not None else ""
            if isinstance(stderr, bytes):
                stderr = stderr.decode(errors="replace")
            raise AssertionError(f"the process ended before {what}: {stderr[-2000:]}")
        if time.monotonic() - started > SAFETY_TIMEOUT_S:
            raise AssertionError(f"{what} did not happen in {SAFETY_TIMEOUT_S:.0f} s (a hang)")
        time.sleep(poll_s)


# ---- fresh interpreters --------------------------------------------------------------------------
def run_python(
    code: str, *args: str, check: bool = False, **kwargs: Any
) -> subprocess.CompletedProcess:
    """Run ``python -c code [args]`` in a fresh interpreter; text output captured.

    ``check``: raise if it exits non-zero; ``kwargs`` go to :func:`subprocess.run` (``env``, ...).
    """
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=check, **kwargs
    )


def cold_and_warm_runs(
    code: str, cache_dir: str | os.PathLike
) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """Run ``code`` twice in fresh interpreters that share the case cache folder ``cache_dir``.

    ``POWERZOO_CACHE_DIR`` points both at ``cache_dir``: the first (cold) run builds the cache, the
    second (warm) one reads it. Both must exit 0; returns ``(cold, warm)``.
    """
    env = dict(os.environ, POWERZOO_CACHE_DIR=str(cache_dir))
    cold, warm = (run_python(code, env=env) for _ in range(2))
    for run in (cold, warm):
        assert run.returncode == 0, run.stderr
    return cold, warm


def run_cli(*args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run the ``powerzoo`` command (``python -m powerzoo.cli.main ARGS``) in a fresh interpreter.

    Text output captured; ``kwargs`` go to :func:`subprocess.run` (``cwd``, ...).
    """
    return subprocess.run(
        [sys.executable, "-m", "powerzoo.cli.main", *args], capture_output=True, text=True, **kwargs
    )


SMALL_NATIVE = {"n_steps": 8, "n_epochs": 2, "hidden_sizes": [16, 16]}
"""``algorithm_kwargs`` of :func:`small_native_trainer`: short rollouts, small networks."""


def small_native_trainer(
    tmp_path: Path,
    algorithm: str = "MAPPO",
    task: str = "marl_opf",
    steps: int = 64,
    seed: int = 3,
    **kw: Any,
) -> Any:
    """A native trainer (MAPPO, IPPO, their -L variants, PPO-L) of a few env steps: 4 envs, no
    evaluation, checkpoints, TensorBoard or progress bar; ``kw`` overrides any option
    (``algorithm_kwargs`` replaces :data:`SMALL_NATIVE`)."""
    from powerzoo.rl import Trainer

    options = {
        "n_envs": 4,
        "evaluation": None,
        "checkpoint": None,
        "output_dir": str(tmp_path),
        "logging": {"tensorboard": False, "progress_bar": False},
        "algorithm_kwargs": dict(SMALL_NATIVE),
        **kw,
    }
    return Trainer(task, algorithm=algorithm, total_timesteps=steps, seed=seed, **options)
