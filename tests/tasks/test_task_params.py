"""Task keywords: one check for every task, and a parameter given as a keyword takes effect."""

import dataclasses

import numpy as np
import pytest

from powerzoo.tasks import get_task_class, list_tasks, make_task, task_spec
from powerzoo.tasks.base import task_keywords


@pytest.mark.parametrize("name", ["dso", "marl_opf", "marl_ders_benchmark", "marl_ev_v2g", "tso"])
def test_an_unknown_keyword_names_itself_and_lists_the_valid_ones(name):
    valid = task_keywords(get_task_class(name).Params)
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) \['no_such_knob'\]; valid: "):
        task_spec(name, no_such_knob=1)
    with pytest.raises(TypeError) as caught:
        make_task(name, "train", no_such_knob=1)
    assert all(key in str(caught.value) for key in valid)


def test_every_task_has_a_frozen_params_dataclass_with_defaults():
    for name in list_tasks():
        cls = get_task_class(name)
        params = cls.make_params()
        assert dataclasses.is_dataclass(params) and type(params) is cls.Params
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(params, dataclasses.fields(params)[0].name, None)


def test_a_keyword_takes_effect_in_the_model_and_the_spec():
    base, dear = make_task("dso", "test"), make_task("dso", "test", voll_per_mwh=2000.0)
    assert dear.params.voll_per_mwh == 2000.0 and "2000 $/MWh" in dear.spec.reward_doc
    rng = np.random.default_rng(0)
    day = np.array([0])
    action = np.full((1, 12), 0.25)
    _, out_base = base.step(base.reset(rng, day), action, rng)
    _, out_dear = dear.step(dear.reset(rng, day), action, rng)
    np.testing.assert_allclose(out_dear.reward_terms[:, 1], 2.0 * out_base.reward_terms[:, 1])

    small = make_task("marl_der_arbitrage", "test", power_mw=0.25)
    assert list(small.spec.action.high) == [0.25] * 3
    assert np.all(np.asarray(small.battery.power_max_mw) == 0.25)


def test_keyword_values_are_checked():
    with pytest.raises(ValueError, match="dc_bus"):
        make_task("dc_scheduling", "train", dc_bus=0)
    with pytest.raises(TypeError, match="n_evs must be an integer"):
        task_spec("marl_ev_v2g", n_evs=2.5)
    with pytest.raises(ValueError, match="initial_soc"):
        make_task("battery_arbitrage", "train", initial_soc=0.95)
