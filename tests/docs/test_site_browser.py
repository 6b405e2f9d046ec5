"""The documentation site as a reader sees it: served over HTTP, opened in headless Chromium.

The built site (``make docs``) is served from a local ``http.server`` on a free port and driven with
Playwright through the system's Chromium (Debian's ``chromium`` package; no browser is downloaded).
Checks: the home page, a task page and the results page render with every image loaded and with
their figures; Material's search box finds a task by name and its result opens the task page; no
page logs a console error or throws; and every internal link of the site answers 200 over HTTP,
with its ``#anchor`` present on the target page (the link crawl needs no browser).

The site used is ``./site`` when it is newer than every source of the site (``mkdocs.yml``,
``docs/``, the ``powerzoo/`` sources), as right after ``make docs``; otherwise it is built once
into a temporary folder shared by the pytest-xdist workers. Screenshots of the three pages (the top
of each, and its first figure) go to the folder named by ``POWERZOO_SCREENSHOTS`` (default: a
temporary folder).

Offline, the only console errors excused are failed loads of the external resources Material asks
for by default (``EXTERNAL_HOSTS_ALLOWED``: the Google Fonts stylesheet and the GitHub API call
behind the repository widget); the test blocks every external request, so it runs the same
offline and online.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.parse import unquote, urldefrag, urljoin, urlsplit
from urllib.request import urlopen

import pytest
from helpers import REPO_ROOT, SAFETY_TIMEOUT_S

# what Material's default theme asks for from outside the site; blocked here, so their failed loads
# are the only console errors allowed
EXTERNAL_HOSTS_ALLOWED = {"fonts.googleapis.com", "fonts.gstatic.com", "api.github.com"}
# as Chromium runs on a headless Linux box: no sandbox (containers), no GPU, no network chatter
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TASK_PAGE = "tasks/battery_arbitrage/"
RESULTS_PAGE = "results/"
# what the site is built from (mkdocstrings reads the package's sources), as globs per folder
SITE_SOURCES = {"mkdocs.yml": "", "docs": "*", "powerzoo": "*.py"}


# ---- the built site ------------------------------------------------------------------------------
def _newest_source_mtime() -> float:
    """Newest modification time (s since the epoch) of any file the site is built from."""
    newest = 0.0
    for name, pattern in SITE_SOURCES.items():
        path = REPO_ROOT / name
        files = [path] if path.is_file() else (p for p in path.rglob(pattern) if p.is_file())
        for file in files:
            newest = max(newest, file.stat().st_mtime)
    return newest


def _fresh_site() -> Path | None:
    """``./site`` if a finished build there is newer than every source, else ``None``."""
    finished = REPO_ROOT / "site" / "search" / "search_index.json"  # written at the build's end
    if finished.is_file() and finished.stat().st_mtime >= _newest_source_mtime():
        return finished.parent.parent
    return None


def _build_site(dest: Path) -> None:
    """Build the site into ``dest`` as ``make docs`` does (strict: any warning fails)."""
    if not (REPO_ROOT / "mkdocs.yml").is_file():
        pytest.skip("site test skipped: no mkdocs.yml in this checkout")
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("site test skipped: mkdocs is not installed (pip install -e '.[dev]')")
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(dest)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed ({proc.returncode}):\n{proc.stderr[-4000:]}")


@pytest.fixture(scope="session")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built site: a fresh ``./site``, or one build shared by every xdist worker of this run."""
    fresh = _fresh_site()
    if fresh is not None:
        return fresh
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the workers of one run
    dest, done = root / "site", root / "site.built"
    try:
        import fcntl
    except ImportError:  # no POSIX locks: each worker builds its own copy
        dest, done, fcntl = tmp_path_factory.mktemp("site"), root / "never", None
    with open(root / "site.lock", "w") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            _build_site(dest)
            done.touch()
    return dest


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="session")
def site_url(site_dir: Path) -> Iterator[str]:
    """Base URL (ending in ``/``) of the built site served over HTTP on a free local port."""
    handler = functools.partial(_QuietHandler, directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


# ---- the browser ---------------------------------------------------------------------------------
def _chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless system Chromium driven by Playwright; skips when either is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(
            "browser test skipped: the playwright package is missing (pip install -e .[dev])"
        )
    executable = _chromium_path()
    if executable is None:
        pytest.skip(
            "browser test skipped: no chromium on PATH "
            "(Debian/Ubuntu: apt-get install chromium; `make install` tries it)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder for the page screenshots: ``$POWERZOO_SCREENSHOTS`` or a temporary folder."""
    named = os.environ.get("POWERZOO_SCREENSHOTS")
    folder = Path(named) if named else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class _Page:
    """A browser tab on the local site that records console errors and uncaught exceptions."""

    def __init__(self, browser: Any, site_url: str) -> None:
        self.site_url = site_url
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        # every wait of the page is on an event; the limit only guards against a hang
        self.context.set_default_timeout(SAFETY_TIMEOUT_S * 1000)
        self.context.route("**/*", self._only_local)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.blocked_hosts: set[str] = set()
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))

    def _only_local(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(self.site_url) or url.startswith("data:"):
            route.continue_()
        else:
            self.blocked_hosts.add(urlsplit(url).hostname or url)
            route.abort()

    def _on_console(self, msg: Any) -> None:
        if msg.type != "error":
            return
        source = (msg.location or {}).get("url", "")
        if msg.text.startswith("Failed to load resource") and not source.startswith(self.site_url):
            if urlsplit(source).hostname in EXTERNAL_HOSTS_ALLOWED:
                return  # an external load blocked on purpose (offline), checked separately
        self.errors.append(f"{msg.text} ({source or 'no source'})")

    def open(self, path: str) -> Any:
        """Load ``path`` (relative to the site root) and wait until its images are decoded."""
        response = self.page.goto(self.site_url + path, wait_until="load")
        assert response is not None and response.status == 200, f"{path}: HTTP {response}"
        self._wait_for_images()
        return self.page

    def _wait_for_images(self) -> None:
        # lazy images load only when scrolled to; make them eager and wait for each to settle
        self.page.evaluate(
            """() => Promise.all(Array.from(document.images).map((img) => {
                   img.loading = "eager";
                   if (img.complete) return null;
                   return new Promise((done) => {
                       img.addEventListener("load", done); img.addEventListener("error", done);
                   });
               }))"""
        )

    def images(self) -> list[dict[str, Any]]:
        """Every ``<img>`` of the page: ``src``, natural width (px), whether in the page body."""
        return self.page.evaluate(
            """() => Array.from(document.images).map((img) => ({
                   src: img.getAttribute("src"), width: img.naturalWidth,
                   content: img.closest("article") !== null}))"""
        )

    def check_clean(self) -> None:
        """Assert no console error, no uncaught exception and no unexpected external request."""
        assert not self.errors, f"{self.page.url}: console errors: {self.errors}"
        unexpected = self.blocked_hosts - EXTERNAL_HOSTS_ALLOWED
        assert not unexpected, (
            f"{self.page.url} asks for resources outside the site (they fail offline): "
            f"{sorted(unexpected)}; serve them from the site or add the host to "
            "EXTERNAL_HOSTS_ALLOWED if it is only decoration"
        )

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(browser: Any, site_url: str) -> Iterator[_Page]:
    """A fresh browser tab (own cookies and storage) on the served site."""
    opened = _Page(browser, site_url)
    yield opened
    opened.close()


def _screenshot(page: Any, path: Path, max_height: int = 2400) -> None:
    """Save the top of the page (at most ``max_height`` px, so a long page stays legible) and,
    next to it as ``<name>_figure.png``, the page's first figure."""
    height = min(page.evaluate("document.documentElement.scrollHeight"), max_height)
    clip = {"x": 0, "y": 0, "width": page.viewport_size["width"], "height": height}
    page.screenshot(path=str(path), full_page=True, clip=clip)
    figure = page.locator("article img").first
    if figure.count():  # the first figure as rendered, wherever it sits on the page
        figure.screenshot(path=str(path.with_name(f"{path.stem}_figure.png")))


def _check_page(tab: _Page, path: str, shot: Path, min_figures: int) -> None:
    page = tab.open(path)
    _screenshot(page, shot)  # before the checks, so a failing page is seen too
    assert "PowerZoo" in page.title(), f"{path}: title {page.title()!r}"
    heading = page.locator("article h1").first
    assert heading.is_visible(), f"{path}: no visible page heading"
    assert page.locator("nav.md-nav--primary").first.is_visible(), f"{path}: no navigation"
    images = tab.images()
    broken = [img["src"] for img in images if img["width"] == 0]
    assert not broken, f"{path}: images that did not load: {broken}"
    figures = [img["src"] for img in images if img["content"]]
    assert len(figures) >= min_figures, (
        f"{path}: {len(figures)} figure(s) in the page body, expected at least {min_figures}"
    )
    tab.check_clean()


def test_home_page_renders(tab: _Page, screenshot_dir: Path) -> None:
    _check_page(tab, "", screenshot_dir / "home.png", min_figures=0)


def test_task_page_renders_with_its_figure(tab: _Page, screenshot_dir: Path) -> None:
    # the figure: one test day of the task under its rule-based policy
    _check_page(tab, TASK_PAGE, screenshot_dir / "task_battery_arbitrage.png", min_figures=1)
    assert "battery_arbitrage" in tab.page.locator("article").inner_text()


def test_results_page_renders_with_its_figures(tab: _Page, screenshot_dir: Path) -> None:
    _check_page(tab, RESULTS_PAGE, screenshot_dir / "results.png", min_figures=1)


@pytest.mark.parametrize(
    ("query", "task"), [("battery", "battery_arbitrage"), ("marl_opf", "marl_opf")]
)
def test_search_box_finds_a_task_by_name(tab: _Page, query: str, task: str) -> None:
    page = tab.open("")
    box = page.locator("input.md-search__input")
    box.click()
    box.press_sequentially(query)
    target = f"/tasks/{task}/"
    result = page.locator(f'.md-search-result__list a[href*="{target}"]').first
    try:
        result.wait_for(state="visible")  # the context's hang guard, not a clock
    except Exception:
        found = page.eval_on_selector_all(".md-search-result__list a", "a => a.map(e => e.href)")
        pytest.fail(f"searching {query!r} listed no link to {target}; results: {found}")
    result.click()
    page.wait_for_url(f"**{target}*")
    assert task in page.locator("article").inner_text()
    tab.check_clean()


# ---- links ---------------------------------------------------------------------------------------
class _LinkParser(HTMLParser):
    """The link targets (``href``/``src``) and the anchor names (``id``, ``<a name>``) of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.anchors: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        for key in ("id",) + (("name",) if tag == "a" else ()):
            if named.get(key):
                self.anchors.add(named[key])
        target = named.get("href") if tag in ("a", "link") else None
        if tag in ("img", "script", "source") and named.get("src"):
            target = named["src"]
        if target:
            self.links.append(target)


def _fetch(url: str) -> tuple[int, str, bytes]:
    """HTTP status, content type and body of ``url``."""
    try:
        with urlopen(url, timeout=SAFETY_TIMEOUT_S) as resp:
            return resp.status, resp.headers.get_content_type(), resp.read()
    except HTTPError as err:
        return err.code, "", b""


def test_no_internal_link_is_broken(site_dir: Path, site_url: str) -> None:
    """Crawl every page of the built site; each internal link answers 200, each anchor exists."""
    pages = [site_url]
    for html in sorted(site_dir.rglob("*.html")):
        rel = html.relative_to(site_dir).as_posix()
        pages.append(site_url + (rel[: -len("index.html")] if rel.endswith("index.html") else rel))
    status: dict[str, int] = {}
    anchors: dict[str, set[str]] = {}
    links: list[tuple[str, str]] = []  # (page, absolute target with its fragment)
    queue = list(dict.fromkeys(pages))
    while queue:
        url = queue.pop()
        if url in status:
            continue
        code, ctype, body = _fetch(url)
        status[url] = code
        if code != 200 or ctype != "text/html":
            continue
        parser = _LinkParser()
        parser.feed(body.decode("utf-8", errors="replace"))
        anchors[url] = parser.anchors
        for href in parser.links:
            target = urljoin(url, href)
            if not target.startswith(site_url):
                continue  # external (https://..., mailto:): not the site's to answer
            links.append((url, target))
            page = urldefrag(target).url
            if page not in status:
                queue.append(page)
    broken, missing = set(), set()
    for page, target in links:
        url, fragment = urldefrag(target)
        if status[url] != 200:
            broken.add(f"{page} -> {target} (HTTP {status[url]})")
        elif fragment and url in anchors and unquote(fragment) not in anchors[url]:
            missing.add(f"{page} -> {target}")
    assert len(anchors) >= 2, f"the crawl found no pages under {site_url}"
    problems = [f"broken ({len(broken)}):", *sorted(broken)] if broken else []
    if missing:
        problems += [f"to a missing anchor ({len(missing)}):", *sorted(missing)]
    assert not problems, "internal links of the site:\n" + "\n".join(problems)
