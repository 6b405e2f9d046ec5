"""Oracle plans print nothing on standard output (the solvers' banners and logs stay off it)."""

from helpers import run_python

# every kind of HiGHS model the package builds: the modelling API (battery_arbitrage, dso), the
# sparse (MI)LP (dc_microgrid), the unit-commitment MILP (marl_uc), the DC-OPF QP (marl_opf),
# the network LP (marl_ders_benchmark), the batched market LP (gencos_bidding, stepped) and
# scipy's linprog (marl_ev_v2g)
_PLAN_EVERY_ORACLE = """
from powerzoo.benchmarks.policies import OraclePolicy, RandomPolicy
from powerzoo.rl import make_env

for task in ["battery_arbitrage", "dso", "dc_microgrid", "marl_uc", "marl_opf",
             "marl_ders_benchmark", "marl_ev_v2g"]:
    env = make_env(task)
    obs, info = env.reset(seed=0)
    OraclePolicy(env).act(obs, info)
env = make_env("gencos_bidding")
obs, info = env.reset(seed=0)
env.step(RandomPolicy(env.action_space, seed=0).act(obs, info))
print("planned")
"""


def test_oracle_plans_print_nothing_on_stdout():
    result = run_python(_PLAN_EVERY_ORACLE, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "planned\n"
