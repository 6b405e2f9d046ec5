"""Ray is an optional extra: nothing a user imports or runs without asking for Ray may import it."""

from helpers import run_python

# Everything an ordinary session touches: the package, envs of both kinds, training (SB3 and native
# MAPPO), evaluation, campaigns of baselines, the CLI and the integrations package itself.
ORDINARY_SESSION = """
import sys
import powerzoo, powerzoo.rl, powerzoo.benchmarks, powerzoo.integrations
import powerzoo.rl.trainer, powerzoo.rl.mappo.trainer
import powerzoo.benchmarks.campaign, powerzoo.cli.main
from powerzoo.rl import make_env
env = make_env("marl_opf", framework="pettingzoo", seed=0)
env.step({agent: env.action_space(agent).sample() for agent in env.agents})
make_env("battery_arbitrage", seed=0, num_envs=2)
print(sorted(name for name in sys.modules if name == "ray" or name.startswith("ray.")))
"""


def test_an_ordinary_session_never_imports_ray():
    out = run_python(ORDINARY_SESSION, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_cli_help_never_imports_ray():
    code = (
        "import sys; from powerzoo.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('ray' in sys.modules)"
    )
    out = run_python(code, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


WITHOUT_RAY = """
import sys
sys.modules["ray"] = None  # as if the extra were not installed
from powerzoo.rl import make_env
try:
    make_env("marl_opf", framework="rllib")
except ImportError as err:
    print(err)
"""


def test_without_the_extra_the_rllib_framework_names_the_install_command():
    out = run_python(WITHOUT_RAY, check=True)
    assert 'pip install "powerzoo[ray]"' in out.stdout
