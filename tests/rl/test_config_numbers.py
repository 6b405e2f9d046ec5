"""Numbers in a run config as people write them: ``total_timesteps: 1e6`` in YAML.

YAML 1.1, which ``yaml.safe_load`` reads, takes ``1e6`` and ``3e-4`` (no dot) for strings. An
exact number written that way is the number; a fractional value for an integer field, or a word
where a number belongs, fails in one line naming the file and the field.
"""

from __future__ import annotations

import pytest

from powerzoo.cli.main import main
from powerzoo.rl.campaigns import load_campaign
from powerzoo.rl.config import ConfigError, TrainConfig


def _config(tmp_path, text: str):
    path = tmp_path / "run.yaml"
    path.write_text("task: battery_arbitrage\n" + text)
    return path


@pytest.mark.parametrize(
    ("written", "steps"),
    [("1e6", 1_000_000), ("1.5e5", 150_000), ("2E+4", 20_000), ("'1e3'", 1000)],
)
def test_total_timesteps_in_exponent_notation_is_the_whole_number(tmp_path, written, steps):
    config = TrainConfig.from_file(_config(tmp_path, f"total_timesteps: {written}\n"))
    assert config.total_timesteps == steps
    assert isinstance(config.total_timesteps, int)


def test_numbers_of_the_sections_and_algorithm_kwargs_are_read_too(tmp_path):
    config = TrainConfig.from_file(
        _config(
            tmp_path,
            "total_timesteps: 1e4\nn_envs: 4e0\nevaluation: {freq: 5e3, episodes: 2}\n"
            "vec_normalize: {clip_obs: 1e1}\n"
            "algorithm_kwargs: {learning_rate: 3e-4, n_steps: 1.28e2, batch_size: 6.4e1}\n",
        )
    )
    assert (config.n_envs, config.evaluation.freq, config.vec_normalize.clip_obs) == (4, 5000, 10.0)
    assert config.algorithm_kwargs == {"learning_rate": 3e-4, "n_steps": 128, "batch_size": 64}
    assert isinstance(config.algorithm_kwargs["n_steps"], int)


@pytest.mark.parametrize("written", ["1.5", "'1.5'", "2.5e0"])
def test_a_fractional_value_for_an_integer_field_is_refused_in_one_line(tmp_path, written):
    path = _config(tmp_path, f"total_timesteps: {written}\n")
    with pytest.raises(ConfigError) as err:
        TrainConfig.from_file(path)
    message = str(err.value)
    assert message.startswith(f"config {path}: field 'total_timesteps': must be a whole number")
    assert "\n" not in message


def test_a_word_for_a_learning_rate_names_the_file_and_the_field(tmp_path, capsys):
    path = _config(tmp_path, "total_timesteps: 1000\nalgorithm_kwargs: {learning_rate: fast}\n")
    with pytest.raises(ConfigError, match="algorithm_kwargs.learning_rate: must be a number"):
        TrainConfig.from_file(path)
    assert main(["train", "-c", str(path), "--output-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"powerzoo: error: config {path}: algorithm_kwargs.learning_rate: must be a number, "
        "got 'fast'"
    ]
    assert not (tmp_path / "runs").exists()


def test_the_native_trainer_refuses_a_word_for_a_number_too(tmp_path):
    path = tmp_path / "mappo.yaml"
    path.write_text(
        "task: marl_opf\nalgorithm: MAPPO\ntotal_timesteps: 1e4\n"
        "algorithm_kwargs: {learning_rate: fast}\n"
    )
    with pytest.raises(ConfigError, match="algorithm_kwargs.learning_rate: must be a number"):
        TrainConfig.from_file(path)


def test_sac_keeps_its_auto_entropy_coefficient(tmp_path):
    config = TrainConfig.from_file(
        _config(
            tmp_path, "algorithm: SAC\ntotal_timesteps: 1e3\nalgorithm_kwargs: {ent_coef: auto}\n"
        )
    )
    assert config.algorithm_kwargs == {"ent_coef": "auto"}


def test_an_unknown_field_names_the_closest_one(tmp_path):
    path = _config(tmp_path, "total_timestep: 1000\n")
    with pytest.raises(
        ConfigError, match="unknown field 'total_timestep'; did you mean 'total_timesteps'"
    ):
        TrainConfig.from_file(path)


def test_the_command_line_budget_takes_exponent_notation():
    from powerzoo.cli.main import build_parser

    args = build_parser().parse_args(["train", "battery_arbitrage", "--timesteps", "1e6"])
    assert args.timesteps == 1_000_000
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "battery_arbitrage", "--timesteps", "1.5"])


def test_a_campaign_budget_in_exponent_notation(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: c\ntasks: [battery_arbitrage]\nseeds: [0]\n"
        "budget: {total_timesteps: 2.048e3, n_envs: 1}\n"
        "evaluation: {split: test, episodes: 2, baselines: []}\n"
        "algorithms: {PPO: {settings: {default: {}}}}\n"
    )
    campaign = load_campaign(path)
    assert {trial.config["total_timesteps"] for trial in campaign.trials} == {2048}
