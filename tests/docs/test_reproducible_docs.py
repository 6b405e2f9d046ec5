"""``make docs`` on a clean clone leaves the committed files as they are, and the examples of the
site write nothing into the clone.

* A task page and its figure depend on what they show only: the PNG carries no ``Software`` entry
  (Matplotlib writes its own version there by default, so another Matplotlib release rewrote
  every committed figure), the numbers drawn do not depend on the machine's BLAS threads (the
  physics pins them: :mod:`powerzoo.physics.blas_threads`), and a figure whose bytes did not
  change is not written again. Two builds, in fresh processes on one and two BLAS threads, are
  byte-identical.
* A figure's title quotes the episode's return to four significant digits: an AC rollout's last
  bits differ between CPU kinds (acopf_118's rule day sums to -2,775,552.1 $ on AVX-512 kernels
  and -2,775,553.2 $ on AVX2 ones), which redrew a title printed to 0.1 $.
* The site's examples run in a temporary folder (the root ``conftest.py``): an example that
  trains with SB3's checkpoint and TensorBoard callbacks leaves no ``logs/`` or ``ckpt/`` behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT, SAFETY_TIMEOUT_S
from markdown_it import MarkdownIt

TASKS = ("acopf_118", "battery_arbitrage")

BUILD = """
from threadpoolctl import threadpool_limits
from powerzoo.benchmarks.task_pages import write_pages
with threadpool_limits(limits={threads}, user_api="blas"):
    write_pages({out!r}, {tasks!r})
"""


def _build(out: Path, threads: int) -> dict[str, bytes]:
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}
    code = BUILD.format(threads=threads, out=str(out), tasks=list(TASKS))
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=SAFETY_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_two_builds_of_the_task_pages_are_byte_identical(tmp_path):
    one = _build(tmp_path / "one", threads=1)
    two = _build(tmp_path / "two", threads=2)
    assert one.keys() == two.keys() and {f"img/{t}.png" for t in TASKS} <= one.keys()
    different = [name for name in one if one[name] != two[name]]
    assert not different, f"differ between two builds: {different}"
    for task in TASKS:
        assert b"Matplotlib version" not in one[f"img/{task}.png"]


def test_an_unchanged_figure_is_not_written_again(tmp_path):
    from powerzoo.benchmarks.task_figures import plot_rule_day

    path = plot_rule_day("battery_arbitrage", tmp_path / "img" / "battery_arbitrage.png")
    before = path.stat().st_mtime_ns, path.stat().st_ino
    plot_rule_day("battery_arbitrage", path)
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == before


def test_the_title_sum_is_the_same_on_both_cpu_kinds():
    from powerzoo.benchmarks.task_figures import SUM_DIGITS, significant

    assert significant(-2_775_552.1, SUM_DIGITS) == significant(-2_775_553.2, SUM_DIGITS)
    assert significant(-2_775_552.1, SUM_DIGITS) == "-2,776,000"
    assert [significant(v, 4) for v in (12.3456, 0.001234, 0.0, -0.5, 99_999.0)] == [
        "12.35",
        "0.001234",
        "0",
        "-0.5",
        "100,000",
    ]


def _fence_node(page: Path, needle: str) -> str:
    """The pytest node id of the ```python fence of ``page`` that contains ``needle``."""
    tokens = MarkdownIt("commonmark").parse(page.read_text(encoding="utf-8"))
    fences = [t for t in tokens if t.type == "fence" and t.info.strip().startswith("python")]
    for number, token in enumerate(fences, start=1):
        if needle in token.content:
            return f"{page.relative_to(REPO_ROOT)}::[CodeFence#{number}][line:{token.map[0] + 1}]"
    raise AssertionError(f"no python fence of {page} contains {needle!r}")


def test_a_training_example_writes_nothing_into_the_clone():
    node = _fence_node(REPO_ROOT / "docs" / "custom-loops.md", 'save_path="ckpt/"')
    written = ("logs", "ckpt", "models", "minari")
    before = {name: (REPO_ROOT / name).exists() for name in written}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=SAFETY_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout, done.stdout[-3000:]
    assert {name: (REPO_ROOT / name).exists() for name in written} == before
