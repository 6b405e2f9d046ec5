"""A NaN, an infinity or an overflow in an action is one short line: which entry, which value.

The message names the first bad entry (row and field), its value and how many entries are bad,
however large the batch: it never prints the array. A normalised action too large to map to
physical units says so (``inf in physical units``) instead of claiming the agent sent ``inf``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from powerzoo.envs.runner import short_repr
from powerzoo.physics.cases import load_case
from powerzoo.physics.radial_pf import radial_power_flow
from powerzoo.rl import make_env

TASK = "battery_arbitrage"


def test_a_nan_in_a_large_batch_names_the_entry_not_the_array():
    env = make_env(TASK, num_envs=8192, seed=0)
    env.reset(seed=0)
    action = np.zeros((8192, 1))
    action[4000, 0] = np.nan
    action[5000:, 0] = np.inf
    with pytest.raises(ValueError) as err:
        env.step(action)
    assert str(err.value) == (
        "battery_arbitrage: action[4000, 0] (p_mw) is nan in physical units "
        "(3193 of 8192 entries are NaN or inf)"
    )


def test_a_single_env_and_a_multi_agent_env_name_the_field():
    env = make_env(TASK, seed=0)
    with pytest.raises(ValueError, match=r"^battery_arbitrage: action\[0\] \(p_mw\) is -inf in"):
        env.step(np.array([-np.inf]))
    env = make_env("marl_opf", framework="pettingzoo", normalize=True)
    env.reset(seed=0)
    actions = {agent: np.zeros(env.action_space(agent).shape) for agent in env.agents}
    actions[env.agents[1]][0] = np.nan
    with pytest.raises(ValueError, match=r"^marl_opf: action\[1\] \(gen_1\.p_mw\) is nan in "):
        env.step(actions)


def test_an_overflowing_normalised_action_is_not_called_an_infinite_one():
    env = make_env(TASK, normalize=True, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "overflow encountered"
        with pytest.raises(ValueError) as err:
            env.step(np.array([1e308]))
    assert str(err.value) == (
        "battery_arbitrage: action[0] (p_mw) is inf in physical units "
        "(1 of 1 entries are NaN or inf)"
    )


def test_a_ragged_action_is_shown_cut_short():
    env = make_env(TASK, seed=0)
    with pytest.raises(ValueError) as err:
        env.step([[0.0] * 5000, [0.0]])
    assert len(str(err.value)) < 500 and "characters)" in str(err.value)
    assert short_repr(list(range(3))) == "[0, 1, 2]"


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_radial_power_flow_names_the_bad_entry_or_the_overflow():
    feeder = load_case("case33bw")
    p = np.tile(feeder.bus_pd_mw, (3, 1))
    q = np.tile(feeder.bus_qd_mvar, (3, 1))
    p[2, 7] = np.nan
    with pytest.raises(
        ValueError, match=r"^p_mw\[2, 7\] is nan \(1 of 99 entries are NaN or inf\)$"
    ):
        radial_power_flow(feeder, p, q)
    p[2, 7] = 1e308
    q[0, 3] = 1e308
    with pytest.raises(ValueError, match="^p_mw and q_mvar are finite but too large to sum"):
        radial_power_flow(feeder, p, q)
