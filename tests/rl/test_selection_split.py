"""The test split is held out: no training, model selection or tuning on it; final evaluation on
it stays allowed."""

from __future__ import annotations

import pytest

from powerzoo.rl.campaigns import load_campaign
from powerzoo.rl.config import ConfigError, TrainConfig
from powerzoo.rl.selection import (
    HELD_OUT_SPLITS,
    SELECTION_SPLIT,
    require_selection_split,
    selection_split_problem,
)


def test_a_tuner_refuses_the_test_split_in_one_line():
    with pytest.raises(ValueError, match="tuning on the 'test' split is refused") as caught:
        require_selection_split("test")
    assert "\n" not in str(caught.value) and "'val'" in str(caught.value)
    assert require_selection_split(SELECTION_SPLIT) == "val"
    assert require_selection_split("heatwave") == "heatwave"  # a stress split is not the test split
    assert selection_split_problem("train", "training") is None
    assert HELD_OUT_SPLITS == ("test",)


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
