"""The case cache is checked on every read, and keyed by the content of the case's source.

A cache file holding another case's arrays, arrays inconsistent with the case (bus count, shapes,
bus indices, NaN reactances or admittances) or arrays built from another version of the source
is rebuilt with a one-line warning naming the file and the reason; a case whose source gives a
NaN or infinite reactance is refused with a ``ValueError`` naming the case and the field.
"""

from __future__ import annotations

import dataclasses
import shutil
import warnings

import numpy as np
import pytest

from powerzoo.physics import ac_network as ac_mod
from powerzoo.physics import case_cache, matpower_cases
from powerzoo.physics import cases as cases_mod
from powerzoo.physics.case_cache import case_source, source_of
from powerzoo.physics.cases import load_case
from powerzoo.physics.matpower_cases import PANDAPOWER_NETWORK_NAMES, source_file
from powerzoo.physics.network import NetworkCase

pytest.importorskip("pandapower")

# without the in-process caches: every call reads the disk cache (or builds)
load_uncached = cases_mod._load_case_cached.__wrapped__
ac_uncached = ac_mod._ac_network_cached.__wrapped__


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POWERZOO_CACHE_DIR", str(tmp_path))
    return tmp_path


def same_case(a: NetworkCase, b: NetworkCase) -> bool:
    return all(
        np.array_equal(getattr(a, f.name), getattr(b, f.name))
        for f in dataclasses.fields(NetworkCase)
    )


def rewrite(path, **changes) -> None:
    """Rewrite the cache file ``path`` with some entries replaced."""
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files}
    for key, change in changes.items():
        arrays[key] = change(arrays[key]) if callable(change) else np.asarray(change)
    np.savez(path, **arrays)


def one_rebuild_warning(load, name):
    """``load(name)`` with exactly one warning; returns (value, its one-line message)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = load(name)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert "\n" not in messages[0]
    return value, messages[0]


def quiet(load, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load(name)


def test_every_case_has_a_source_file_whose_buses_are_counted():
    for name in PANDAPOWER_NETWORK_NAMES:
        assert source_file(name).name == f"{name}.json"
    counts = {"case5": 5, "case118": 118, "GBnetwork": 2224, "case33bw": 33}
    counts |= {"case141": 141, "case2383wp": 2383, "case85": 85}  # MATPOWER .m files
    for name, n_bus in counts.items():
        assert source_of(name).n_bus == n_bus, name


def test_another_cases_file_is_rebuilt_with_a_one_line_warning(cache):
    fresh = load_uncached("case14")
    path = cases_mod._cache_path("case14")
    load_uncached("case5")
    shutil.copyfile(cases_mod._cache_path("case5"), path)
    rebuilt, message = one_rebuild_warning(load_uncached, "case14")
    assert message.startswith(f"case cache {str(path)!r} is unreadable or inconsistent (")
    assert "holds case 'case5'" in message and message.endswith("rebuilding it from pandapower")
    assert same_case(rebuilt, fresh)
    assert same_case(quiet(load_uncached, "case14"), fresh)  # the file was rewritten


def test_arrays_of_another_case_under_its_name_and_digest_fail_the_bus_count(cache):
    load_uncached("case5")
    fresh = load_uncached("case14")
    path = cases_mod._cache_path("case14")
    shutil.copyfile(cases_mod._cache_path("case5"), path)
    rewrite(path, name="case14", __source__=source_of("case14").digest)
    rebuilt, message = one_rebuild_warning(load_uncached, "case14")
    assert "ValueError: 5 buses, the case has 14 (case14.json)" in message
    assert same_case(rebuilt, fresh)


def at(i, value):
    """A change of a cache entry: entry ``i`` set to ``value``."""
    return lambda a: np.where(np.arange(a.size) == i, value, a)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"branch_x_pu": at(2, np.nan)}, "branch_x_pu[2] is nan"),
        ({"branch_x_pu": at(0, np.inf)}, "branch_x_pu[0] is inf"),
        ({"gen_element": lambda g: g[:-1]}, "gen_element has shape (4,), expected (5,)"),
        ({"gen_bus": at(1, 99)}, "gen_bus[1] = 99 is outside 0..4"),
        ({"__source__": "0123456789abcdef"}, "built from source 0123456789abcdef, case5.json is"),
    ],
)
def test_inconsistent_case_cache_is_rebuilt(cache, change, reason):
    fresh = load_uncached("case5")
    path = cases_mod._cache_path("case5")
    rewrite(path, **change)
    rebuilt, message = one_rebuild_warning(load_uncached, "case5")
    assert reason in message and str(path) in message
    assert same_case(rebuilt, fresh)
    assert same_case(quiet(load_uncached, "case5"), fresh)


def test_a_changed_source_gets_another_cache_file(cache, tmp_path, monkeypatch):
    copy = tmp_path / "src" / "case5.json"
    copy.parent.mkdir()
    shutil.copyfile(source_file("case5"), copy)
    monkeypatch.setattr(matpower_cases, "source_file", lambda name: copy)
    case_source.cache_clear()
    before = cases_mod._cache_path("case5")
    copy.write_bytes(copy.read_bytes() + b" ")  # another byte: another digest
    case_source.cache_clear()
    after = cases_mod._cache_path("case5")
    case_source.cache_clear()
    assert before != after and before.name.startswith("case5-pandapower")
    assert f"-src{case_source(copy).digest}-" in after.name


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_load_case_refuses_a_reactance_that_is_not_finite(cache, monkeypatch, bad):
    real = matpower_cases.pandapower_net

    def damaged(name):
        net = real(name)
        net.line.loc[net.line.index[1], "x_ohm_per_km"] = bad
        return net

    monkeypatch.setattr(matpower_cases, "pandapower_net", damaged)
    with pytest.raises(ValueError) as err:
        load_uncached("case5")
    assert str(err.value).startswith(f"case 'case5': branch_x_pu[1] is {bad} (1 of ")
    assert not list(cache.iterdir())  # nothing cached


def test_a_feeder_refuses_an_infinite_reactance():
    feeder = load_case("case33bw")
    x = np.array(feeder.branch_x_pu)
    x[3] = np.inf
    with pytest.raises(ValueError, match=r"^case 'case33bw': branch_x_pu\[3\] is inf"):
        dataclasses.replace(feeder, branch_x_pu=x)


def test_a_nan_admittance_in_the_ac_cache_is_rebuilt(cache):
    fresh = ac_uncached("case14")
    path = ac_mod._cache_path("case14")
    rewrite(path, y_ff=at(4, np.nan))
    rebuilt, message = one_rebuild_warning(ac_uncached, "case14")
    assert "y_ff[4] is (nan" in message and str(path) in message
    np.testing.assert_array_equal(rebuilt.y_ff, fresh.y_ff)


def test_check_case_arrays_names_the_first_bad_entry():
    source = case_cache.CaseSource(source_file("case5"), "x", 5)
    with pytest.raises(ValueError, match=r"^6 buses, the case has 5 \(case5\.json\)$"):
        case_cache.check_case_arrays(6, source)
    with pytest.raises(ValueError, match=r"^b\[1\] = 5 is outside 0\.\.4$"):
        case_cache.check_case_arrays(5, source, indices={"b": (np.array([0, 5, 7]), 5)})
