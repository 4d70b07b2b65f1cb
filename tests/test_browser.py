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
import subprocess
import sys
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


# ---- a reader on a phone, in Colab and in Chinese (tools/reader_hooks.py, reader.css/js) -----

PHONE = {"width": 390, "height": 844}


def pages_containing(marker: str) -> list[str]:
    """Return the site-relative URL of every built page whose HTML contains ``marker``."""
    return [path for path in site_pages() if marker in (SITE / path / "index.html").read_text(encoding="utf-8")]


@pytest.fixture
def phone(browser, site_url):
    """A page in a 390 px wide viewport with a touch screen: a common phone."""
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    context.route(re.compile(r"^(?!" + re.escape(site_url) + ")https?://"), answer_offline)
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    context.close()


# Display math on a phone, sideways scrolling, wide tables, figures and notebook cells at 390 px:
# tests/test_accessibility.py measures them on every page it audits (layout_problems), both
# languages, light and dark, 1280 and 390 px, without loading the pages again.


@pytest.mark.parametrize("lang", ["", "zh-TW/"])
def test_a_tap_on_a_glossary_term_shows_its_definition(phone, site_url, lang):
    """A finger cannot hover over a term's title: the first tap shows it, the second opens the glossary."""
    start = site_url + lang + "kvcache/kv-cache/"
    phone.goto(start, wait_until="load")
    term = phone.locator("article a.glossary-term").first
    definition, target = term.get_attribute("title"), term.evaluate("a => a.href")
    term.tap()
    tip = phone.locator("#inferlab-term-tip")
    tip.wait_for(state="visible")
    assert phone.url == start, "the first tap left the page"
    assert definition in tip.inner_text()
    box = tip.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], f"the definition leaves the screen: {box}"
    phone.locator("article h1").first.tap()  # a tap elsewhere closes it
    tip.wait_for(state="detached")
    term.tap()
    tip.wait_for(state="visible")
    term.tap()  # the second tap on the same term follows the link
    phone.wait_for_url(target)


def heading_ids(path: str) -> list[str]:
    """Return the ids of a built page's headings, in order (the reference for the language switch)."""
    html = (SITE / path / "index.html").read_text(encoding="utf-8")
    article = html[html.index("<article") : html.index("</article>")]
    return re.findall(r'<h[1-6][^>]*\sid="([^"]+)"', article)


@pytest.mark.parametrize(
    "start, other",
    [("kvcache/kv-cache/", "zh-TW/kvcache/kv-cache/"), ("zh-TW/paged/invalidation/", "paged/invalidation/")],
)
def test_language_switch_keeps_the_section(page, site_url, start, other):
    """Both languages have the same headings in the same order: the third one leads to the third one."""
    ours, theirs = heading_ids(start), heading_ids(other)
    assert len(ours) == len(theirs) >= 3
    page.goto(f"{site_url}{start}#{ours[2]}")
    language = "en" if other.startswith("paged") else "zh-TW"
    page.click(".md-select button")
    page.click(f"a.md-select__link[hreflang='{language}']")
    page.wait_for_url(f"{site_url}{other}#{theirs[2]}")


@pytest.mark.parametrize("lang", ["", "zh-TW/"])
def test_speedup_chart_has_axes_gamma_labels_and_a_legend(phone, site_url, lang):
    phone.goto(site_url + lang + "speculative/speedup/", wait_until="load")
    chart = phone.locator(".calc[data-calc='speculative-speedup'] svg.calc__chart")
    chart.wait_for()
    texts = chart.locator("text").evaluate_all("els => els.map(e => e.textContent)")  # SVG: no innerText
    gamma = int(phone.locator(".calc input[name=gamma]").input_value())
    shown = [int(t) for t in texts if t.isdigit()]
    assert shown[0] == 1 and gamma in shown and max(shown) == max(10, gamma), f"γ labels {shown}"
    assert any(t.endswith("×") for t in texts), f"no speed-up ticks in {texts}"
    titles = chart.locator(".calc__axis-title").evaluate_all("els => els.map(e => e.textContent)")
    assert len(titles) == 2 and all(titles), titles
    assert chart.locator(".calc__legend").count() == 2 and chart.locator(".calc__axis").count() == 2
    box = chart.bounding_box()
    assert box["width"] <= PHONE["width"], f"the chart is wider than the phone: {box}"


# What the copy button of every code block copies, read as Material's clipboard does: the
# nearest ancestor's data-copy attribute, or else the code's text.
COPY_TEXTS = """() => [...document.querySelectorAll('button[data-md-type="copy"][data-clipboard-target]')].map(button => {
    const code = document.querySelector(button.getAttribute('data-clipboard-target'));
    const holder = code.closest('[data-copy]');
    const block = code.closest('div.highlight');
    return {
        text: (holder ? holder.getAttribute('data-copy') : code.textContent).trimEnd(),
        snippet: block.classList.contains('inferlab-snippet'),
        language: ([...block.classList].find(c => c.startsWith('language-')) || '').slice(9),
    };
})"""


def copyable_blocks(browser, site_url) -> dict[str, set[str]]:
    """Return {copied text: pages} for every Python block with a copy button on the guide pages."""
    blocks: dict[str, set[str]] = {}
    for path in pages_containing("<pre"):
        if path.removeprefix("zh-TW/").startswith("labs/"):
            continue  # notebooks: their cells build on the set-up cells above them
        # A fresh context per page: a calculator still busy on the previous page cannot hold up this one.
        context = browser.new_context()
        context.route(re.compile(r"^(?!" + re.escape(site_url) + ")https?://"), answer_offline)
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(site_url + path, wait_until="domcontentloaded")  # the code is there; images need not be
        page.wait_for_function(  # Material adds the copy buttons once its bundle has run
            """() => document.querySelectorAll('div.highlight:not(.no-copy) pre > code').length
                === document.querySelectorAll('button[data-md-type="copy"]').length"""
        )
        for block in page.evaluate(COPY_TEXTS):
            if block["language"] in ("", "python", "py") and block["text"]:
                assert block["snippet"], (
                    f"{path}: a copyable Python block that is not a snippet: {block['text'][:200]!r}"
                )
                blocks.setdefault(block["text"], set()).add(path)
        context.close()
    return blocks


@pytest.mark.slow  # every guide page, then every snippet run again: minutes on a small machine
def test_every_copy_button_copies_a_whole_snippet_that_runs_alone(browser, site_url, tmp_path):
    from inferlab.models import BUNDLED_DIR

    blocks = copyable_blocks(browser, site_url)
    snippets = {path.read_text(encoding="utf-8").strip(): path for path in (ROOT / "snippets").rglob("*.py")}
    assert blocks, "no copyable code found on the site"
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MPLBACKEND="Agg",
        INFERLAB_FAST="1",
        INFERLAB_TARGET=str(BUNDLED_DIR / "target"),
        INFERLAB_DRAFT=str(BUNDLED_DIR / "draft"),
        INFERLAB_OUT=str(tmp_path),
    )
    failures = []
    for number, (text, pages) in enumerate(sorted(blocks.items())):
        where = ", ".join(sorted(pages))
        without_markers = "\n".join(line for line in text.splitlines() if "--8<-- [" not in line)
        assert any(
            without_markers == "\n".join(line for line in source.splitlines() if "--8<-- [" not in line)
            for source in snippets
        ), f"{where}: the copy button copies text that is no whole snippet file: {text[:200]!r}"
        script = tmp_path / f"copied_{number}.py"
        script.write_text(text + "\n", encoding="utf-8")
        # A fresh interpreter in isolated mode, with the site's own package made unimportable:
        # what was copied must stand alone (Colab has torch, transformers, numpy and matplotlib).
        runner = (
            f"import runpy, sys; sys.modules['inferlab'] = None; runpy.run_path({str(script)!r}, run_name='__main__')"
        )
        result = subprocess.run(
            [sys.executable, "-I", "-c", runner], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        if result.returncode != 0:
            failures.append(f"{where}: copied code failed:\n{result.stderr[-2000:]}")
    assert not failures, "\n\n".join(failures)


# Glossary terms and the guide that teaches each: the guide must be among the first three pages a
# search lists, and every result must be in the language of the page searched from.
SEARCH_CASES = [
    ("", "speculative decoding", "speculative/draft-verify-accept/"),
    ("", "KV cache", "kvcache/kv-cache/"),
    ("", "prompt lookup", "speculative/prompt-lookup/"),
    ("", "token tree", "speculative/token-trees/"),
    ("", "prefill", "kvcache/prefill-decode/"),
    ("", "perplexity", "decoding/autoregressive/"),
    ("", "nucleus sampling", "decoding/sampling/"),
    ("", "prefix caching", "paged/prefix-caching/"),
    ("", "online softmax", "flash/tiling/"),
    ("", "block table", "paged/paged-attention/"),
    ("zh-TW/", "推測解碼", "zh-TW/speculative/draft-verify-accept/"),
    ("zh-TW/", "KV 快取", "zh-TW/kvcache/kv-cache/"),
    ("zh-TW/", "提示查找", "zh-TW/speculative/prompt-lookup/"),
    ("zh-TW/", "詞元樹", "zh-TW/speculative/token-trees/"),
    ("zh-TW/", "預填", "zh-TW/kvcache/prefill-decode/"),
    ("zh-TW/", "困惑度", "zh-TW/decoding/autoregressive/"),
    ("zh-TW/", "核取樣", "zh-TW/decoding/sampling/"),
    ("zh-TW/", "前綴快取", "zh-TW/paged/prefix-caching/"),
    ("zh-TW/", "線上 softmax", "zh-TW/flash/tiling/"),
    ("zh-TW/", "區塊表", "zh-TW/paged/paged-attention/"),
]


@pytest.mark.parametrize("start, query, teacher", SEARCH_CASES)
def test_search_finds_the_guide_that_teaches_a_term_in_the_same_language(page, site_url, start, query, teacher):
    page.goto(site_url + start, wait_until="load")
    box = page.locator("input.md-search__input")
    box.fill(query)
    box.press("End")  # Material reads the query on keyup (see test_search_finds_words)
    results = page.locator(".md-search-result__item > .md-search-result__link")
    results.first.wait_for(timeout=60_000)
    page.wait_for_timeout(500)  # the first results can be replaced once the last key is read
    hrefs = results.evaluate_all("links => links.map(a => a.href.split('#')[0].split('?')[0])")
    found = list(dict.fromkeys(href.removeprefix(site_url) for href in hrefs))
    language_root = "zh-TW/" if start else ""
    strays = [url for url in found if url.startswith("zh-TW/") != bool(language_root)]
    assert not strays, f"{query!r} from /{start} lists pages in the other language: {strays}"
    assert teacher in found[:3], f"{query!r}: {teacher} is not among the first three results {found[:5]}"


def test_zh_pages_show_the_zh_version_of_every_localised_figure():
    """mkdocs-static-i18n serves docs/figures/x.zh-TW.png as zh-TW/figures/x.png: zh-TW pages must use it."""
    if missing_requirement():
        pytest.skip(missing_requirement())
    docs = ROOT / "docs"
    checked = 0
    for path in site_pages():
        if not path.startswith("zh-TW/"):
            continue
        page_dir = SITE / path
        for src in re.findall(
            r'<img[^>]+src="([^"]*figures/[^"]+\.png)"', (page_dir / "index.html").read_text("utf-8")
        ):
            served = (page_dir / src).resolve().relative_to(SITE.resolve()).as_posix()  # e.g. zh-TW/figures/a/b.png
            figure = served.removeprefix("zh-TW/")
            if (docs / figure.replace(".png", ".zh-TW.png")).is_file():
                assert served.startswith("zh-TW/figures/"), f"{path}: shows the English {figure}"
                checked += 1
    assert checked, "no localised figure found on the zh-TW pages"


# Messages the calculators' checks throw, in Python's words (tests/test_calculators.py keeps them
# equal to Python's); a zh-TW page shows each in Chinese.
CALCULATOR_ERRORS = [
    ("expectedSpeedup", [0.8, 0, 0.05]),
    ("expectedSpeedup", [1.5, 4, 0.05]),
    ("expectedSpeedup", [0.8, 4, -1]),
    ("kvCacheBytes", ["no-such-model", 1]),
    ("kvCacheBytes", [{"num_hidden_layers": 2, "num_attention_heads": 3, "hidden_size": 8}, 1]),
    ("kvCacheBytes", [{"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3, "head_dim": 8}, 1]),
    ("kvCacheBytes", ["Llama-3.2-3B", 1, 1, "fp12"]),
    ("hbmTraffic", [1024, 64, "standard", {"block_q": 16}]),
    ("hbmTraffic", [1024, 64, "flash", {"sram_bytes": 65536, "block_q": 16}]),
    ("hbmTraffic", [1024, 64, "flash", {"sram_bytes": 64}]),
    ("hbmTraffic", [1024, 64, "flash", {"causal": "yes"}]),
    ("estimateRuntime", [1.0, 1.0, "T4", "fp8"]),
    ("estimateRuntime", [1.0, 1.0, "Z80"]),
    ("estimateRuntime", [-1.0, 1.0, "T4"]),
]
ENGLISH_GRAMMAR = re.compile(r"\b(must|got|either|leave|holds|fewer|cuts|give|integer|number|multiple|one of)\b")


def test_calculator_errors_are_in_chinese_on_zh_pages(page, site_url):
    page.goto(site_url + "zh-TW/speculative/speedup/", wait_until="load")
    page.wait_for_function("() => window.InferlabCalc")
    messages = page.evaluate(
        """cases => cases.map(([name, args]) => {
            try { window.InferlabCalc[name](...args); return null; }
            catch (error) { return [error.message, window.InferlabCalc.errorText(error.message)]; }
        })""",
        CALCULATOR_ERRORS,
    )
    for (name, args), result in zip(CALCULATOR_ERRORS, messages, strict=True):
        assert result is not None, f"{name}{args} did not refuse its input"
        english, chinese = result
        assert chinese != english and not ENGLISH_GRAMMAR.search(chinese), f"{name}{args}: {english!r} -> {chinese!r}"
    # And in the widget itself: a draft length of 0 is refused, in Chinese.
    gamma = page.locator(".calc input[name=gamma]")
    gamma.fill("0")
    gamma.dispatch_event("input")
    error = page.locator(".calc .calc__error")
    error.wait_for()
    assert "必須是" in error.inner_text() and "must" not in error.inner_text()
