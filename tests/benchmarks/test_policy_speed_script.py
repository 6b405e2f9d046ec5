"""benchmarks/policy_speed.py: both ways of acting are timed, checked equal, and printed."""

import importlib.util
import re

from helpers import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "policy_speed.py"


def test_a_tiny_run_prints_every_algorithm_and_both_timings(capsys):
    spec = importlib.util.spec_from_file_location("policy_speed", SCRIPT)
    policy_speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(policy_speed)
    policy_speed.main(["--calls", "8", "--days", "1", "--steps", "16", "--rounds", "1"])
    out = capsys.readouterr().out
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+) \| ([\d.]+)x \|$", out, flags=re.MULTILINE)
    assert [r[0] for r in rows] == ["PPO", "A2C", "SAC", "TD3"]
    assert all(int(old) > 0 and int(new) > 0 for _, old, new, _ in rows)
    seconds = re.findall(r": ([\d.]+) s -> ([\d.]+) s CPU$", out, flags=re.MULTILINE)
    assert len(seconds) == 2 and all(float(a) > 0 and float(b) > 0 for a, b in seconds)
    from powerzoo.benchmarks import sb3_policy

    assert sb3_policy._route.__name__ == "_route"  # the old path was switched back on after
