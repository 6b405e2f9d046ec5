"""Only train and val are learnt and chosen on: the test split and the stress splits on its days
are held out; final evaluation on them stays allowed."""

from __future__ import annotations

import pytest

from powerzoo.rl.campaigns import load_campaign
from powerzoo.rl.config import ConfigError, TrainConfig
from powerzoo.rl.selection import (
    HELD_OUT_SPLITS,
    LEARNING_SPLITS,
    SELECTION_SPLIT,
    require_selection_split,
    selection_split_problem,
)


def test_a_tuner_refuses_the_test_split_in_one_line():
    with pytest.raises(ValueError, match="tuning on the 'test' split is refused") as caught:
        require_selection_split("test")
    assert "\n" not in str(caught.value) and "'val'" in str(caught.value)
    assert require_selection_split(SELECTION_SPLIT) == "val"
    assert selection_split_problem("train", "training") is None
    assert HELD_OUT_SPLITS == ("test",) and LEARNING_SPLITS == ("train", "val")


@pytest.mark.parametrize("split", ["heatwave", "price_spike", "workload_shock", "line_tightening"])
def test_the_stress_splits_start_on_test_days_and_are_refused_too(split):
    """A stress split is the test days with transformed inputs: tuning on it chooses on test
    days, so it is refused like test itself (and a misspelt name the same way)."""
    from powerzoo.data.calendar import split_day_indices

    if split in ("heatwave", "price_spike"):
        test_days = set(split_day_indices("test").tolist())
        assert set(split_day_indices(split).tolist()) <= test_days
    with pytest.raises(ValueError, match=rf"tuning on the '{split}' split is refused: only train"):
        require_selection_split(split)
    assert selection_split_problem("TEST", "tuning").startswith("tuning on the 'TEST' split")


def test_a_run_config_refuses_training_on_a_stress_split():
    with pytest.raises(ConfigError, match=r"field 'env\.split': training on the 'heatwave'"):
        TrainConfig.from_dict(
            {"task": "battery_arbitrage", "total_timesteps": 1000, "env": {"split": "heatwave"}}
        )


@pytest.mark.parametrize(
    ("section", "field", "use"),
    [
        ({"evaluation": {"split": "test"}}, "evaluation.split", "model selection"),
        ({"env": {"split": "test"}}, "env.split", "training"),
    ],
)
def test_a_run_config_refuses_selecting_or_training_on_the_test_split(section, field, use):
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"task": "battery_arbitrage", "total_timesteps": 1000, **section})
    message = str(caught.value)
    assert f"field '{field}'" in message and f"{use} on the 'test' split is refused" in message
    config = TrainConfig.from_dict({"task": "battery_arbitrage", "total_timesteps": 1000})
    assert config.evaluation.split == "val" and config.env.split == "train"


def test_a_campaigns_final_evaluation_on_test_is_still_allowed(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: c\ntasks: [battery_arbitrage]\nseeds: [0]\n"
        "budget: {total_timesteps: 2048, n_envs: 1}\n"
        "evaluation: {split: test, episodes: 2, baselines: []}\n"
        "algorithms: {PPO: {settings: {default: {}}}}\n"
    )
    campaign = load_campaign(path)
    assert campaign.split == "test" and len(campaign.trials) == 1
