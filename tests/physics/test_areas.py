"""Control areas: every dispatchable unit in exactly one area, areas balanced and connected."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from powerzoo.physics.areas import control_areas, dispatchable_units
from powerzoo.physics.cases import load_case


@pytest.mark.parametrize("n_areas", [1, 3, 8])
def test_case118_areas_partition_the_units(n_areas: int) -> None:
    case = load_case("case118")
    areas = control_areas(case, n_areas)
    units = np.concatenate(areas.units)
    assert sorted(units.tolist()) == dispatchable_units(case).tolist()
    sizes = [u.size for u in areas.units]
    assert areas.n_areas == n_areas and min(sizes) >= 1
    assert max(sizes) <= 2 * np.mean(sizes)  # about equal shares
    assert areas.bus_area.shape == (case.n_bus,)
    assert set(areas.bus_area.tolist()) == set(range(n_areas))


def test_areas_are_connected() -> None:
    case = load_case("case118")
    areas = control_areas(case, 4)
    on = case.branch_in_service
    f, t = case.branch_from_bus[on], case.branch_to_bus[on]
    for a in range(areas.n_areas):
        keep = (areas.bus_area[f] == a) & (areas.bus_area[t] == a)
        buses = np.flatnonzero(areas.bus_area == a)
        index = {b: i for i, b in enumerate(buses)}
        rows = [index[b] for b in f[keep]]
        cols = [index[b] for b in t[keep]]
        graph = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(buses.size,) * 2)
        n_parts, _ = csgraph.connected_components(graph, directed=False)
        assert n_parts == 1, f"area {a} falls into {n_parts} pieces"


def test_areas_are_deterministic_and_capped() -> None:
    case = load_case("case5")
    a, b = control_areas(case, 8), control_areas(case, 8)
    assert [u.tolist() for u in a.units] == [u.tolist() for u in b.units]
    assert a.n_areas <= np.unique(case.gen_bus).size
    with pytest.raises(ValueError, match="n_areas must be >= 1"):
        control_areas(case, 0)
