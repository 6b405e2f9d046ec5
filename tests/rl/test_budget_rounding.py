"""A budget that is not a whole number of rollouts is rounded up, and the trainer says so once.

On-policy trainers learn from whole rollouts of ``n_steps x n_envs`` env steps: SB3's PPO (the
``Trainer`` and the shared multi-agent policy), the native MAPPO and PPO-L. Each warns in one
line with the requested and the actual number of steps and the rollout that explains it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli

from powerzoo.rl import Trainer
from powerzoo.rl.budget import rounded_budget
from powerzoo.rl.sb3.marl.loops import train_shared_policy

QUIET = {
    "evaluation": None,
    "checkpoint": None,
    "logging": {"tensorboard": False, "progress_bar": False},
}


def _rounding_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if "is rounded up to" in str(w.message)]


def test_rounded_budget_counts_whole_rollouts_from_where_the_run_is():
    assert rounded_budget(1536, 0, 6144) == 6144
    assert rounded_budget(2000, 0, 2048) == 2048
    assert rounded_budget(4096, 0, 2048) == 4096
    assert rounded_budget(300, 128, 128) == 384  # a resumed run: 128 done, 2 more rollouts
    assert rounded_budget(300, 400, 128) == 400  # already past its budget
    assert rounded_budget(7, 0, 1) == 7


def _train_ppo(total_timesteps: int, tmp_path: Path) -> tuple[Any, list[str]]:
    """A tiny SB3 PPO run on battery_arbitrage (2 envs, 64-step rollouts): its result and the
    rounding warnings it gave."""
    trainer = Trainer(
        "battery_arbitrage",
        algorithm="PPO",
        total_timesteps=total_timesteps,
        n_envs=2,
        seed=0,
        output_dir=str(tmp_path),
        algorithm_kwargs={"n_steps": 64, "batch_size": 64, "n_epochs": 1},
        **QUIET,
    )
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = trainer.train()
    return result, _rounding_warnings(record)


def test_sb3_ppo_warns_once_with_the_requested_and_the_actual_steps(tmp_path: Path):
    result, rounding = _train_ppo(200, tmp_path)
    assert result.num_timesteps == 256
    assert rounding == [
        "PPO: total_timesteps=200 is rounded up to 256 env steps: it trains whole rollouts of "
        "n_steps x n_envs = 64 x 2 = 128 env steps (give a multiple of 128 to train exactly the "
        "budget)"
    ]
    assert _train_ppo(128, tmp_path)[1] == []


def test_the_progress_bar_counts_to_the_rounded_budget(tmp_path: Path, monkeypatch):
    import powerzoo.rl.sb3.callbacks as callbacks
    from powerzoo.progress import progress_bar

    totals: list[int] = []

    def recording_bar(*args: Any, **kwargs: Any) -> Any:
        totals.append(kwargs["total"])
        return progress_bar(*args, **{**kwargs, "progress": False})

    monkeypatch.setattr(callbacks, "progress_bar", recording_bar)
    result, _ = _train_ppo(200, tmp_path)
    assert totals == [256] and result.num_timesteps == 256


@pytest.mark.parametrize(
    ("task", "algorithm"), [("marl_der_arbitrage", "MAPPO"), ("battery_arbitrage", "PPO-L")]
)
def test_native_trainers_warn_when_they_round_the_budget_up(tmp_path: Path, task, algorithm):
    trainer = Trainer(
        task,
        algorithm=algorithm,
        total_timesteps=20,
        n_envs=2,
        seed=0,
        output_dir=str(tmp_path),
        algorithm_kwargs={"n_steps": 8, "hidden_sizes": [16]},
        **QUIET,
    )
    with pytest.warns(UserWarning, match="is rounded up to") as record:
        result = trainer.train()
    assert result.num_timesteps == 32
    assert _rounding_warnings(record) == [
        f"{algorithm}: total_timesteps=20 is rounded up to 32 env steps: it trains whole "
        "rollouts of n_steps x n_envs = 8 x 2 = 16 env steps (give a multiple of 16 to train "
        "exactly the budget)"
    ]


def test_shared_sb3_policy_counts_its_rounding_in_agent_steps():
    # 3 batteries x 2 copies = 6 SB3 envs; n_steps 8: rollouts of 48 agent-steps
    with pytest.warns(UserWarning, match="is rounded up to") as record:
        model = train_shared_policy(
            "marl_der_arbitrage",
            total_timesteps=50,
            n_envs=2,
            algo_kwargs={"n_steps": 8, "batch_size": 48, "n_epochs": 1},
            progress=False,
        )
    assert model.num_timesteps == 96
    assert _rounding_warnings(record) == [
        "shared PPO: total_timesteps=50 is rounded up to 96 agent-steps: it trains whole "
        "rollouts of n_steps x n_envs = 8 x 6 = 48 agent-steps (give a multiple of 48 to train "
        "exactly the budget)"
    ]


def test_the_command_line_prints_the_rounding_on_one_line(tmp_path: Path):
    import yaml

    config = {
        "task": "battery_arbitrage",
        "total_timesteps": 200,
        "n_envs": 2,
        "output_dir": str(tmp_path / "runs"),
        "name": "rounded",
        "algorithm_kwargs": {"n_steps": 64, "batch_size": 64, "n_epochs": 1},
        "logging": {"progress_bar": False, "tensorboard": False},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_cli("train", "-c", str(path))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "rounded up" in line]
    assert lines == [
        "powerzoo: warning: PPO: total_timesteps=200 is rounded up to 256 env steps: it trains "
        "whole rollouts of n_steps x n_envs = 64 x 2 = 128 env steps (give a multiple of 128 to "
        "train exactly the budget)"
    ]
    assert "env steps: 256 (finished)" in result.stdout
