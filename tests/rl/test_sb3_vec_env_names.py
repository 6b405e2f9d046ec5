"""SB3's ``make_vec_env(..., vec_env_cls="subproc" | "dummy")`` works whatever the import order.

Each order runs in a fresh interpreter, so the test sees the imports exactly as a user script does.
"""

import pytest
from helpers import run_python

POWERZOO_FIRST = """
from powerzoo.rl import make_env
from stable_baselines3.common.env_util import make_vec_env
"""
SB3_FIRST = """
from stable_baselines3.common.env_util import make_vec_env
from powerzoo.rl import make_env
"""
ROLLOUT = """
import inspect
vec = make_vec_env(lambda: make_env("battery_arbitrage", normalize=True), n_envs=2, seed=0,
                   vec_env_cls="{name}")
vec.reset()
vec.step(vec.action_space.sample()[None].repeat(2, axis=0))
print(type(vec).__name__, vec.num_envs)
print(list(inspect.signature(make_vec_env).parameters)[:2])
vec.close()
"""


@pytest.mark.parametrize(
    "imports", [POWERZOO_FIRST, SB3_FIRST], ids=["powerzoo_first", "sb3_first"]
)
@pytest.mark.parametrize(("name", "cls"), [("dummy", "DummyVecEnv"), ("subproc", "SubprocVecEnv")])
def test_make_vec_env_takes_the_names_in_either_import_order(imports, name, cls):
    result = run_python(imports + ROLLOUT.format(name=name))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{cls} 2", "['env_id', 'n_envs']"]


def test_an_unknown_name_lists_the_valid_ones():
    result = run_python(
        SB3_FIRST
        + 'make_vec_env(lambda: make_env("battery_arbitrage"), n_envs=1, vec_env_cls="threads")'
    )
    assert result.returncode != 0
    assert (
        "ValueError: unknown vec_env_cls 'threads'; valid: subproc, dummy, or a VecEnv class"
        in result.stderr
    )


def test_classes_and_none_pass_through_untouched():
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    from powerzoo.rl import make_env

    for vec_env_cls in (DummyVecEnv, None):
        vec = make_vec_env(lambda: make_env("battery_arbitrage"), n_envs=1, vec_env_cls=vec_env_cls)
        assert isinstance(vec, DummyVecEnv)
        vec.close()
