"""The built site in a real headless Chromium, used the way a reader uses it.

Needs the site built into site/ (`nox -s docs`) and Debian's Chromium. Without them the tests are
skipped, unless INFERLAB_REQUIRE_BROWSER=1 (set by CI) or --browser makes that a failure.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "site"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Flags a sandboxed root machine with no network needs (see the project's machine notes).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def missing_requirement() -> str | None:
    if CHROMIUM is None:
        return "Chromium is not installed (apt-get install chromium)"
    if not (SITE / "index.html").is_file():
        return "the site is not built (nox -s docs)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return None


@pytest.fixture(scope="session")
def site_url(request):
    reason = missing_requirement()
    if reason:
        if os.environ.get("INFERLAB_REQUIRE_BROWSER") == "1" or request.config.getoption("--browser"):
            pytest.fail(f"browser tests required but {reason}")
        pytest.skip(reason)
    handler = functools.partial(QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output readable
        pass


@pytest.fixture(scope="session")
def browser(site_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def answer_offline(route):
    """Answer requests that leave the site (Material asks GitHub for the repository's stars) with
    an empty reply: the tests run offline, and the site must not depend on them."""
    route.fulfill(status=200, content_type="application/json", body="{}")


@pytest.fixture
def page(browser, site_url):
    context = browser.new_context()
    context.route(re.compile(r"^(?!" + re.escape(site_url) + ")https?://"), answer_offline)
    page = context.new_page()
    page.set_default_timeout(60_000)  # generous: CI machines are small and shared
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    page.on("pageerror", lambda e: page.console_errors.append(str(e)))
    yield page
    context.close()


def site_pages() -> list[str]:
    """Return the site-relative URL of every built page, both languages."""
    if not SITE.is_dir():
        return []
    return sorted(
        str(p.parent.relative_to(SITE)).replace(".", "") + "/" if p.parent != SITE else ""
        for p in SITE.rglob("index.html")
        if "assets" not in p.parts and "search" not in p.parts
    )


@pytest.mark.parametrize("path", site_pages() or ["(site not built)"])
def test_page_loads_without_errors_or_broken_links(page, site_url, path):
    failed = []
    page.on("response", lambda r: r.status >= 400 and r.url.startswith(site_url) and failed.append(r.url))
    page.goto(site_url + path.lstrip("/"), wait_until="load")
    assert page.console_errors == [], f"{path}: console errors {page.console_errors}"
    assert failed == [], f"{path}: failed requests {failed}"
    # Every internal link on the page must resolve to a built file.
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    for href in hrefs:
        if href.startswith(site_url):
            target = SITE / href[len(site_url) :].split("#")[0].split("?")[0]
            exists = target.is_file() or (target / "index.html").is_file()
            assert exists, f"{path}: broken internal link {href}"


@pytest.mark.parametrize(
    "start, expected_url, expected_heading",
    [
        ("models/", "zh-TW/models/", "內建模型組"),
        ("zh-TW/about/testing/", "about/testing/", "How this site is tested"),
        ("labs/quickstart/", "zh-TW/labs/quickstart/", "快速上手"),
    ],
)
def test_language_switch_lands_on_the_same_page(page, site_url, start, expected_url, expected_heading):
    page.goto(site_url + start)
    other = "zh-TW" if not start.startswith("zh-TW") else "en"
    page.click(".md-select button")  # the language menu opens on focus, as a reader's tap does
    page.click(f"a.md-select__link[hreflang='{other}']")
    page.wait_for_url(site_url + expected_url)
    assert expected_heading in page.inner_text("article")


@pytest.mark.parametrize("start, query", [("zh-TW/", "推測解碼"), ("", "speculative"), ("zh-TW/", "快取")])
def test_search_finds_words(page, site_url, start, query):
    page.goto(site_url + start, wait_until="networkidle")
    box = page.locator("input.md-search__input")  # on a desktop-width page the search box is visible
    box.fill(query)
    # Material reads the query on keyup (and again when its search worker reports ready), not on
    # the input event that fill() sends: without a key press, a query typed after the index was
    # ready would never run. That was the cause of this test's earlier intermittent failures.
    box.press("End")
    results = page.locator(".md-search-result__item")
    results.first.wait_for(timeout=60_000)  # the first query waits for the search index to build
    assert results.count() > 0
    # Chinese text is indexed as jieba's words joined by zero-width spaces; read it without them.
    found = [item.replace("\u200b", "").lower() for item in results.all_inner_texts()]
    assert any(query.lower() in item for item in found), found[:3]


def test_formulas_render(page, site_url):
    page.goto(site_url + "glossary/", wait_until="networkidle")
    page.wait_for_selector("mjx-container svg", timeout=15000)
    assert page.locator("mjx-container").count() >= 5
    assert page.console_errors == []
