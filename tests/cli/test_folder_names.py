"""Run and campaign names become folder names: one plain name only, so nothing lands outside
``--output-dir`` / ``--out``.

``powerzoo train --name ..`` used to write the run into the parent folder; now ``..``, ``../x``,
an absolute path or a name with a newline is refused before any folder exists, with the field
named and what is allowed.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from powerzoo.cli.main import main
from powerzoo.rl.campaigns import CampaignError, parse_campaign
from powerzoo.rl.config import ConfigError, TrainConfig

BAD_NAMES = ["..", "../x", "/tmp/elsewhere", "a\nb", ".", "a/b", ""]
RULE = "use one plain folder name: letters, digits, '.', '_', '-', starting with a letter or digit"


def listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name", BAD_NAMES)
def test_train_name_is_refused_before_anything_is_written(name, tmp_path, capsys):
    runs = tmp_path / "runs"
    with pytest.raises(SystemExit) as exit_:
        main(
            ["train", "battery_arbitrage", "--timesteps", "64", "--output-dir", str(runs)]
            + ["--name", name]
        )
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"powerzoo train: error: argument --name: the run name {name!r} is not allowed" in err
    assert RULE in err
    assert listing(tmp_path) == []


def test_name_in_a_config_file_is_refused_naming_the_field(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "task": "battery_arbitrage",
                "total_timesteps": 64,
                "output_dir": str(tmp_path / "runs"),
                "name": "../escaped",
            }
        )
    )
    assert main(["train", "-c", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"powerzoo: error: config {config}: field 'name': the run name '../escaped' is not "
        "allowed; " + RULE
    )
    assert listing(tmp_path) == ["run.yaml"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_run_config_name_is_one_plain_folder_name(name):
    with pytest.raises(ConfigError, match="field 'name': the run name .* is not allowed; use one"):
        TrainConfig.from_dict({"task": "battery_arbitrage", "total_timesteps": 64, "name": name})
    good = {"task": "battery_arbitrage", "total_timesteps": 64, "name": "PPO-run_1.b"}
    assert TrainConfig.from_dict(good).name == "PPO-run_1.b"


CAMPAIGN = {
    "tasks": ["battery_arbitrage"],
    "seeds": [0],
    "budget": {"total_timesteps": 64},
    "algorithms": {"PPO": None},
}


@pytest.mark.parametrize("name", ["..", "../x", "/abs", "a\nb"])
def test_campaign_name_is_one_plain_folder_name(name):
    data = {**copy.deepcopy(CAMPAIGN), "name": name}
    with pytest.raises(CampaignError) as err:
        parse_campaign(data, source="c.yaml")
    assert str(err.value).startswith(f"campaign c.yaml: 'name' {name!r} is not allowed; {RULE}")
    assert str(err.value).endswith("; it names the output or a trial folder")
    assert parse_campaign({**CAMPAIGN, "name": "sweep-2.v1"}).name == "sweep-2.v1"
