"""A run config's ``seed`` outside 0 .. 2**32 - 1 is one error line naming the file and the field.

Before, ``seed: -1`` reached numpy's seeding and failed with ``Seed must be between 0 and 2**32 -
1``, naming neither.
"""

from __future__ import annotations

import pytest
import yaml

from powerzoo.cli.main import main

CONFIG = {
    "task": "battery_arbitrage",
    "algorithm": "PPO",
    "total_timesteps": 64,
    "evaluation": None,
    "checkpoint": None,
}


@pytest.mark.parametrize(
    ("seed", "why"),
    [(-1, "greater than or equal to 0"), (2**32, "less than or equal to 4294967295")],
)
def test_a_seed_out_of_range_names_the_file_and_the_field(tmp_path, capsys, seed, why):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "seed": seed, "output_dir": str(tmp_path / "runs")}))
    capsys.readouterr()
    assert main(["train", "-c", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"powerzoo: error: config {path}: field 'seed': Input should be {why}\n"
    )
    assert not (tmp_path / "runs").exists()  # refused before a run folder exists
