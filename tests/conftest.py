import os
import sys
import warnings

import pytest

# Small MLPs gain nothing from intra-op threads, and two pytest workers on two cores each
# spawning a torch pool slows training ~15x; one thread per worker process.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the files that hold a ``slow`` test first, each file's tests kept together and in
    their order (module fixtures are set up once). pytest-xdist hands tests to its workers in
    this order, so the long trainings start early and the run does not end on one of them
    while the other worker idles."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny MLPs run fastest on one thread and do not fight the other pytest worker for cores."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _quiet_gymnasium_checker():
    # check_env warns about render modes when an env has no registry spec; not a failure.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*render modes.*")
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        yield


@pytest.fixture
def dc_microgrid_without_oracle(monkeypatch):
    """``dc_microgrid`` whose spec lists no oracle baseline (every packaged task has one)."""
    import dataclasses

    from powerzoo.tasks.dc_microgrid import DCMicrogrid

    make_spec = DCMicrogrid.make_spec.__func__

    def without_oracle(cls, **task_kwargs):
        spec = make_spec(cls, **task_kwargs)
        return dataclasses.replace(
            spec, baselines=tuple(b for b in spec.baselines if b != "oracle")
        )

    monkeypatch.setattr(DCMicrogrid, "make_spec", classmethod(without_oracle))
    return "dc_microgrid"
