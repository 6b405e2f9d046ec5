"""benchmarks/grid_scale.py: the sweep runs on a small case and writes its table, data and plot."""

import importlib.util
import json

from helpers import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "grid_scale.py"
HEADER = (
    "| case | buses | DC µs/step N=1 | DC µs/step N=256 | AC µs/flow N=1 | AC µs/flow N=256 "
    "| pandapower DC ms | pandapower AC ms | DC MB N=1 | DC MB N=256 | AC MB N=1 | AC MB N=256 |"
)


def test_sweep_on_a_small_case_writes_positive_figures(tmp_path):
    out = tmp_path / "grid"
    spec = importlib.util.spec_from_file_location("grid_scale", SCRIPT)
    grid_scale = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grid_scale)
    grid_scale.main(["--cases", "case5", "--seconds", "0.01", "--out", str(out)])
    table = (out / "grid_scale.md").read_text().splitlines()
    assert table[0] == HEADER
    rows = [line.strip("| ").split(" | ") for line in table[2:]]
    assert [r[0] for r in rows] == ["`case5`"] and rows[0][1] == "5"
    assert "–" not in rows[0]  # case5 builds every part
    for row in rows:
        numbers = [float(cell.replace(",", "")) for cell in row[1:] if cell != "–"]
        assert len(numbers) >= 7 and all(x > 0 for x in numbers)  # AC and pandapower at least
    data = json.loads((out / "grid_scale.json").read_text())
    assert [r["case"] for r in data] == ["case5"]
    assert (out / "grid_scale.csv").read_text().startswith("case,n_bus,dc_us_n1,")
    assert (out / "grid_scale.png").stat().st_size > 0
