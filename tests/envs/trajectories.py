"""Reference trajectories of every task through every adapter (the determinism guard).

``python tests/envs/trajectories.py`` rewrites ``tests/fixtures/trajectories.npz`` and records
the machine kind that wrote it (:func:`machine_kind`) beside it; the test in
``test_determinism.py`` replays the same rollouts and compares them with the file. Rewrite the
file only when a change is meant to alter trajectories, and say so in the commit message.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

# one BLAS thread, as the test suite runs (tests/conftest.py). The physics pins BLAS to one thread
# where the thread count changed the bits (a PTDF's LU, an AC flow, a feeder's products:
# powerzoo.physics.blas_threads; tests/envs/test_blas_threads.py), so this is belt and braces
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402  (after the thread settings)

REFERENCE_FILE = Path(__file__).resolve().parent.parent / "fixtures" / "trajectories.npz"
MACHINE_FILE = REFERENCE_FILE.with_name("trajectories_machine.json")
STEPS = 60  # past the 48-step horizon of most tasks, so autoreset and a second episode are covered
N_VEC = 3


def _uniform(rng: np.random.Generator, space: Any, shape: tuple[int, ...] = ()) -> np.ndarray:
    return rng.uniform(space.low, space.high, size=shape + space.shape).astype(np.float32)


def _info_digest(info: dict[str, Any]) -> np.ndarray:
    """Numeric info of one step: costs, reward terms, applied action (all adapters carry them)."""
    parts = [
        np.asarray(info[k], dtype=np.float64).ravel()
        for k in ("constraint_costs", "reward_terms", "action_applied")
    ]
    return np.concatenate(parts)


def single_agent(task: str, normalize: bool) -> np.ndarray:
    from powerzoo.rl import make_env

    env = make_env(task, split="train", normalize=normalize, seed=7)
    rng = np.random.default_rng(11)
    rows, episode = [], 0
    obs, _ = env.reset(seed=7)
    for _ in range(STEPS):
        obs, reward, terminated, truncated, info = env.step(_uniform(rng, env.action_space))
        rows.append(
            np.concatenate(
                [np.asarray(obs, np.float64), [reward, terminated, truncated], _info_digest(info)]
            )
        )
        if terminated or truncated:
            episode += 1
            obs, _ = env.reset(seed=100 + episode)
    return np.stack(rows)


def single_agent_vector(task: str, normalize: bool) -> np.ndarray:
    from powerzoo.rl import make_env

    env = make_env(
        task, split="val", normalize=normalize, num_envs=N_VEC, seed=3, autoreset_mode="same_step"
    )
    rng = np.random.default_rng(5)
    rows = []
    for _ in range(STEPS):
        actions = _uniform(rng, env.single_action_space, (N_VEC,))
        obs, reward, terminated, truncated, info = env.step(actions)
        digest = [
            np.asarray(info[k], np.float64).reshape(N_VEC, -1)
            for k in ("constraint_costs", "reward_terms", "action_applied")
        ]
        rows.append(
            np.concatenate(
                [
                    np.asarray(obs, np.float64),
                    reward[:, None],
                    terminated[:, None],
                    truncated[:, None],
                    *digest,
                ],
                axis=1,
            ).ravel()
        )
    return np.stack(rows)


def multi_agent(task: str, framework: str, normalize: bool) -> np.ndarray:
    from powerzoo.rl import make_env
    from powerzoo.tasks import task_spec

    local = (
        framework == "pettingzoo" and "local" in task_spec(task).obs_modes
    )  # a second obs mode where there is one
    env = make_env(
        task,
        split="test",
        framework=framework,
        normalize=normalize,
        seed=9,
        **({"obs_mode": "local"} if local else {}),
    )
    rng = np.random.default_rng(13)
    agents = list(env.possible_agents)
    rows, episode = [], 0
    env.reset(seed=9)
    for _ in range(STEPS):
        actions = {a: _uniform(rng, env.action_space(a)) for a in agents}
        obs, rewards, terms, truncs, infos = env.step(actions)
        first = infos[agents[0]]
        rows.append(
            np.concatenate(
                [
                    np.concatenate([np.asarray(obs[a], np.float64) for a in agents]),
                    [rewards[a] for a in agents],
                    [terms[agents[0]], truncs[agents[0]]],
                    _info_digest(first),
                ]
            )
        )
        if terms[agents[0]] or truncs[agents[0]]:
            episode += 1
            env.reset(seed=200 + episode)
    return np.stack(rows)


def multi_agent_vector(task: str) -> np.ndarray:
    from powerzoo.rl import make_env

    env = make_env(task, split="train", num_envs=N_VEC, normalize=True, seed=4)
    rng = np.random.default_rng(17)
    agents = list(env.possible_agents)
    rows = []
    for _ in range(STEPS):
        actions = {a: _uniform(rng, env.single_action_space(a), (N_VEC,)) for a in agents}
        obs, rewards, terms, truncs, info = env.step(actions)
        digest = [
            np.asarray(info[k], np.float64).reshape(N_VEC, -1)
            for k in ("constraint_costs", "reward_terms")
        ]
        rows.append(
            np.concatenate(
                [
                    *(np.asarray(obs[a], np.float64) for a in agents),
                    *(rewards[a][:, None] for a in agents),
                    terms[agents[0]][:, None],
                    truncs[agents[0]][:, None],
                    *digest,
                ],
                axis=1,
            ).ravel()
        )
    return np.stack(rows)


def machine_kind() -> dict[str, Any]:
    """What fixes a rollout's last bits besides the code (numpy, scipy, SIMD dispatch, BLAS
    kernels: :func:`powerzoo.rl.tracks.numeric_kernels`)."""
    from powerzoo.rl.tracks import numeric_kernels

    return numeric_kernels()


def all_trajectories(tasks: list[str] | None = None) -> dict[str, np.ndarray]:
    """Every reference rollout of ``tasks`` (default:
    all registered), keyed ``<task>/<adapter>``."""
    from powerzoo.tasks import list_tasks, task_spec

    out: dict[str, np.ndarray] = {}
    for task in tasks or list_tasks():
        if task_spec(task).agent_mode == "single":
            out[f"{task}/gym"] = single_agent(task, normalize=False)
            out[f"{task}/gym_normalized"] = single_agent(task, normalize=True)
            out[f"{task}/vector"] = single_agent_vector(task, normalize=True)
        else:
            out[f"{task}/dict"] = multi_agent(task, "auto", normalize=False)
            out[f"{task}/pettingzoo_local"] = multi_agent(task, "pettingzoo", normalize=True)
            out[f"{task}/vector"] = multi_agent_vector(task)
    return out


if __name__ == "__main__":
    # python tests/envs/trajectories.py            rewrite the whole reference
    # python tests/envs/trajectories.py TASK ...   add or replace only these tasks' rollouts
    REFERENCE_FILE.parent.mkdir(parents=True, exist_ok=True)
    chosen = sys.argv[1:] or None
    trajectories: dict[str, np.ndarray] = {}
    if chosen and MACHINE_FILE.is_file():
        recorded = json.loads(MACHINE_FILE.read_text())
        if recorded != machine_kind():
            sys.exit(
                f"the reference was written on another machine kind ({recorded}); rewrite it "
                "whole (no task names) so that every rollout comes from this one"
            )
    if chosen and REFERENCE_FILE.is_file():
        with np.load(REFERENCE_FILE) as old:
            trajectories = {k: old[k] for k in old.files if k.split("/")[0] not in chosen}
    trajectories.update(all_trajectories(chosen))
    np.savez_compressed(REFERENCE_FILE, **trajectories)
    MACHINE_FILE.write_text(json.dumps(machine_kind(), indent=1) + "\n")
    size = REFERENCE_FILE.stat().st_size
    print(
        f"wrote {len(trajectories)} trajectories to {REFERENCE_FILE} ({size / 1e3:.0f} kB)",
        file=sys.stderr,
    )
