"""The examples of README.md and the documentation site stay executed and honestly tagged.

Every ```python fence of README.md and docs/ is a test of its own (pytest-markdown-docs, set up in
pyproject.toml and the root conftest.py). These checks read the Markdown only, without running
an example, so they take well under a second: the test command collects the pages, the guide
pages each carry a runnable example, and no fence escapes execution through a mistyped tag.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO_ROOT
from markdown_it import MarkdownIt
from pytest_markdown_docs._runners import get_runner
from pytest_markdown_docs.definitions import FenceTestDefinition
from pytest_markdown_docs.plugin import FenceSyntax, extract_fence_tests

DOCS = REPO_ROOT / "docs"
README = REPO_ROOT / "README.md"

# Options a ```python fence may carry: `notest` (illustrative, not run), `continuation` (runs
# after the page's previous fence, in its namespace) and the fixture that marks a slow example.
KNOWN_OPTIONS = {"notest", "continuation", "fixture:slow_example"}
# superfences attributes that change only how a block is shown
DISPLAY_ATTRIBUTES = ("title=", "linenums=", "hl_lines=")
# Guide pages whose reader is promised a runnable example (slow ones count: the full suite runs
# them); generated pages (results, API reference, task pages) are not listed.
GUIDE_PAGES = (
    "index.md",
    "getting-started.md",
    "concepts.md",
    "training.md",
    "custom-loops.md",
    "offline.md",
    "integrations.md",
    "scaling.md",
    "physics.md",
)
# the text of a page not yet written
STUB_TEXT = "This page is being written."
# at least this many examples run, README and site together
MIN_EXAMPLES = 20


def _fence_info(path: Path) -> list[tuple[int, str, str]]:
    """(line, info string, content) of every fenced block of a Markdown file, as pytest reads it."""
    tokens = MarkdownIt("commonmark").parse(path.read_text("utf8"))
    return [(t.map[0] + 1, t.info.strip(), t.content) for t in tokens if t.type == "fence"]


def _runnable_examples(path: Path) -> int:
    """How many of the file's fences pytest runs as tests (``notest`` ones excluded)."""
    parser = MarkdownIt("commonmark")
    return sum(
        1
        for _ in extract_fence_tests(
            parser,
            path.read_text("utf8"),
            start_line_offset=0,
            source_path=path,
            fence_syntax=FenceSyntax.superfences,
        )
    )


def _nav_pages() -> list[str]:
    """Every Markdown page the site's navigation lists, relative to docs/."""
    nav = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text("utf8"))["nav"]
    pages: list[str] = []

    def walk(entry: object) -> None:
        if isinstance(entry, str):
            pages.append(entry)
        elif isinstance(entry, list):
            for item in entry:
                walk(item)
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)

    walk(nav)
    return [p for p in pages if p.endswith(".md")]


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _split_info(info: str) -> tuple[str, list[str], bool]:
    """(language, options, brace form) of a fence's info string."""
    if info.startswith("{"):
        words = info.strip("{}").split()
        lang = next((w[1:] for w in words if w.startswith(".")), "")
        return lang, [w for w in words if not w.startswith(".")], True
    words = info.split()
    return (words[0] if words else ""), words[1:], False


def test_the_test_command_runs_the_readme_and_docs_examples(pytestconfig):
    testpaths = pytestconfig.getini("testpaths")
    assert "docs" in testpaths and "README.md" in testpaths, testpaths
    assert pytestconfig.option.markdowndocs_syntax == "superfences"


def test_a_test_module_is_collected_on_its_own():
    # a module that imports a sibling helper (as tests/envs/test_determinism.py imports
    # trajectories) is collected once, by pytest, which puts its folder on sys.path first
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "--collect-only"]
    result = subprocess.run(
        [*command, "tests/envs/test_determinism.py"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_many_examples_are_executed():
    counts = {str(p.relative_to(REPO_ROOT)): _runnable_examples(p) for p in _markdown_files()}
    total = sum(counts.values())
    pages_with_examples = sum(1 for n in counts.values() if n)
    assert total >= MIN_EXAMPLES, f"only {total} runnable examples: {counts}"
    assert total >= pages_with_examples


@pytest.mark.parametrize("page", GUIDE_PAGES)
def test_guide_page_is_in_the_nav_and_has_a_runnable_example(page):
    assert page in _nav_pages(), f"docs/{page} is not in mkdocs.yml's nav"
    path = DOCS / page
    if path.read_text("utf8").strip().endswith(STUB_TEXT):
        pytest.skip(f"docs/{page} is still a stub")
    assert _runnable_examples(path) >= 1, (
        f"docs/{page} has no ```python fence that runs; add one (or drop `notest` from one)"
    )


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_python_fences_are_tagged_so_they_run_and_render(path):
    problems = []
    in_docs = path != README
    for line, info, content in _fence_info(path):
        lang, options, braces = _split_info(info)
        where = f"{path.relative_to(REPO_ROOT)}:{line}"
        if not lang:
            if "import powerzoo" in content or "from powerzoo" in content:
                problems.append(f"{where}: Python code in a fence without a language")
            continue
        looks_python = lang.lower().startswith("py") or lang.lower() == "ipython"
        if looks_python and lang not in ("python", "py", "python3"):
            problems.append(f"{where}: `{lang}` is never run; tag the fence `python`")
        if lang not in ("python", "py", "python3"):
            continue
        unknown = [
            o for o in options if o not in KNOWN_OPTIONS and not o.startswith(DISPLAY_ATTRIBUTES)
        ]
        if unknown:
            problems.append(f"{where}: unknown option(s) {unknown}; known: {sorted(KNOWN_OPTIONS)}")
        if options and in_docs and not braces:
            # superfences shows ```python notest as a paragraph of raw text, not as code
            problems.append(f"{where}: write ```{{.python {' '.join(options)}}} on a site page")
    assert not problems, "\n".join(problems)


def test_an_example_runs_as_a_script_so_its_main_guard_is_entered():
    # a page's example that starts worker processes puts that code under
    # `if __name__ == "__main__":`, as a user's script must; the runner of conftest.py runs it
    runner = get_runner(None)
    assert type(runner).__name__ == "QuietRunner", type(runner)
    source = 'if __name__ == "__main__":\n    ran.append(__name__)\n'
    fence = FenceTestDefinition(source, (), 0, DOCS / "custom-loops.md", None)
    ran: list[str] = []
    runner.runtest(fence, {"ran": ran})
    assert ran == ["__main__"]
