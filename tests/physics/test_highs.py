"""HiGHS solvers of the package print nothing on standard output (``new_highs``)."""

import pytest
from helpers import REPO_ROOT, run_python

from powerzoo.physics.highs import new_highs

# one tiny LP (min x, x >= 1) solved by new_highs, with or without the log
_SOLVE = """
import sys
from powerzoo.physics.highs import new_highs
h = new_highs(log=sys.argv[1] == "log", presolve="off", time_limit=5.0)
h.addVar(1.0, 10.0)
h.changeColCost(0, 1.0)
h.run()
print("x =", h.getSolution().col_value[0])
"""


def test_new_highs_prints_nothing_on_stdout():
    result = run_python(_SOLVE, "quiet", check=True)
    assert result.stdout == "x = 1.0\n"
    assert "HiGHS" not in result.stderr


def test_new_highs_log_goes_to_stderr():
    result = run_python(_SOLVE, "log", check=True)
    assert result.stdout == "x = 1.0\n"
    assert "Optimal" in result.stderr


def test_new_highs_sets_options_and_refuses_bad_ones():
    h = new_highs(presolve="off", time_limit=7.5)
    assert h.getOptionValue("presolve")[1] == "off"
    assert h.getOptionValue("time_limit")[1] == 7.5
    assert h.getOptionValue("output_flag")[1] is False
    with pytest.raises(ValueError, match="HiGHS refused option no_such_option=1"):
        new_highs(no_such_option=1)
    with pytest.raises(ValueError, match="'output_flag' is set by new_highs itself"):
        new_highs(output_flag=True)


def test_every_highs_model_is_created_by_new_highs():
    package = REPO_ROOT / "powerzoo"
    direct = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path != package / "physics" / "highs.py" and "Highs()" in path.read_text("utf-8")
    ]
    assert direct == [], "create HiGHS models with powerzoo.physics.highs.new_highs"
