"""SB3's ``make_vec_env`` with a PowerZoo id and one process per env (``SubprocVecEnv``).

A worker process started with ``forkserver`` or ``spawn`` has not imported PowerZoo, so the bare
id ``"powerzoo/BatteryArbitrage-v0"`` is unknown there (Gymnasium's ``NamespaceNotFound`` in the
worker, a bare ``ConnectionResetError`` in the parent). The id to use is the ``module:id`` form
``"powerzoo:powerzoo/BatteryArbitrage-v0"``: Gymnasium imports ``powerzoo`` first. Once
``powerzoo.rl`` is imported, SB3's ``make_vec_env`` adds the module to a bare PowerZoo id itself.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import run_python

import powerzoo.rl  # noqa: F401  (teaches SB3's make_vec_env the PowerZoo ids)

pytest.importorskip("stable_baselines3")

ID = "powerzoo/BatteryArbitrage-v0"


@pytest.mark.parametrize(
    ("env_id", "start_method"), [(ID, "forkserver"), (f"powerzoo:{ID}", "spawn")]
)
def test_subproc_vec_env_steps_a_powerzoo_id(env_id, start_method):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # render_mode="rgb_array" is ignored
        venv = make_vec_env(
            env_id,
            n_envs=2,
            seed=0,
            vec_env_cls=SubprocVecEnv,
            vec_env_kwargs={"start_method": start_method},
            env_kwargs={"normalize": True},
        )
    try:
        obs = venv.reset()
        assert obs.shape == (2, *venv.observation_space.shape)
        for _ in range(3):
            obs, rewards, dones, infos = venv.step(np.zeros((2, *venv.action_space.shape)))
            assert np.isfinite(rewards).all() and len(infos) == 2
        assert venv.get_attr("spec")[0].id == ID
    finally:
        venv.close()


def test_the_module_id_works_in_a_process_that_never_imported_powerzoo():
    done = run_python(
        "import sys, gymnasium\n"
        f"env = gymnasium.make('powerzoo:{ID}')\n"
        "env.reset(seed=0)\n"
        "print(type(env.unwrapped).__name__, 'powerzoo' in sys.modules)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["PowerZooEnv", "True"]
