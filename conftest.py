"""Settings for the examples of README.md and docs/, which pytest runs as tests.

Every ```python fence of a Markdown file under the test paths (``README.md`` and ``docs/``, the
``testpaths`` of pyproject.toml) is one test, collected by pytest-markdown-docs' Markdown
collector with the superfences syntax (:func:`pytest_collect_file` below). The plugin's own
``--markdown-docs`` flag is not used: it would also import every test module a second time to
read its docstrings, before pytest has put the module's folder on ``sys.path``.

A fence opts out with ``notest`` (an illustrative snippet) and marks itself slow with
``fixture:slow_example`` (deselected by ``-m "not slow"``): ```python notest in
README.md, ```{.python notest} on a site page (the form MkDocs' superfences renders as code;
``tests/docs/test_examples.py`` checks it). Each example runs in a fresh temporary working
directory, so the ``results/``, ``runs/``, ``models/``, ``logs/``, ``ckpt/`` folders and the
config files it writes never land in the repository (Minari's ``MINARI_DATASETS_PATH`` points
there too), with matplotlib on its file-only Agg backend. The clone's read-only inputs
(``configs/``, ``campaigns/``) are linked into that directory, so an example reads
``configs/battery_arbitrage.yaml`` as a user in the clone's root does.
"""

import contextlib
import io
import os
import sys
from pathlib import Path

import pytest
from pytest_markdown_docs._runners import DefaultRunner, register_runner
from pytest_markdown_docs.plugin import MarkdownTextFile

MARKDOWN_MARKER = "markdown-docs"
REPO_ROOT = Path(__file__).resolve().parent
# folders of the clone an example may read by a relative path (never written by an example)
SHARED_INPUTS = ("configs", "campaigns")

# Examples draw figures on machines without a display; set before any import of matplotlib.
os.environ.setdefault("MPLBACKEND", "Agg")
# Training examples use small networks: one BLAS / OpenMP thread each, as the tests do.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


@register_runner(default=True)
class QuietRunner(DefaultRunner):
    """pytest-markdown-docs' runner with the example's printed output kept, not written to the
    terminal (the plugin runs examples with pytest's capture off); a failure report shows it.

    An example runs as a script does: ``__name__ == "__main__"``, so the code a page puts under
    ``if __name__ == "__main__":`` (needed where it starts worker processes) runs in the test.
    """

    output: dict = {}

    def runtest(self, test, args, *, asyncio_runner=None):
        args["__name__"] = "__main__"
        buffer = io.StringIO()
        self.output[test] = buffer
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            super().runtest(test, args, asyncio_runner=asyncio_runner)
        del self.output[test]

    def repr_failure(self, test, excinfo, style=None):
        report = super().repr_failure(test, excinfo, style)
        printed = self.output.pop(test, io.StringIO()).getvalue()
        return f"{report}\nOutput of the example:\n{printed}" if printed else report


def pytest_configure(config: pytest.Config) -> None:
    """Read fences as MkDocs' superfences does (``{.python notest}`` renders as code)."""
    config.option.markdowndocs_syntax = "superfences"


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect the ```python fences of every Markdown file under the test paths."""
    if file_path.suffix == ".md" and not parent.config.option.markdowndocs:
        return MarkdownTextFile.from_parent(parent, path=file_path)
    return None


def _is_markdown_example(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARKDOWN_MARKER) is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give the ``slow`` marker to every example that asks for the ``slow_example`` fixture."""
    for item in items:
        if "slow_example" in getattr(item, "fixturenames", ()) and _is_markdown_example(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def slow_example() -> None:
    """Requested by a fence as ``python fixture:slow_example``: the example is marked slow."""
    return None


@pytest.fixture(autouse=True)
def _example_working_directory(request: pytest.FixtureRequest, tmp_path, monkeypatch):
    """Run each Markdown example in its own empty directory, drawing on matplotlib's Agg."""
    if not _is_markdown_example(request.node):
        yield
        return
    for name in SHARED_INPUTS:
        if (REPO_ROOT / name).is_dir():
            (tmp_path / name).symlink_to(REPO_ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # Minari's datasets (an example may point it elsewhere itself: restored afterwards)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.switch_backend("Agg")
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")
