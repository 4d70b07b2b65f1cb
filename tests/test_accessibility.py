"""Accessibility: axe-core on every page, light and dark, and the calculators by keyboard alone.

axe-core (the engine behind Lighthouse's accessibility audit) runs in headless Chromium on every
built page of both languages, in the light and the dark colour scheme. The reference is a bare
mkdocs-material page (an admonition, a code block, a table and a link) built in the same test
with the site's own theme settings: the theme's own few violations are accepted, and a page fails
when it has more violations of any rule than the bare page has. The failure lists the rule, the
element and the page of each.

axe-core comes from the pinned PyPI package axe-playwright-python (constraints.txt), which ships
axe-core's own axe.min.js: pip installs it with the other test dependencies, on a fresh machine
and offline from the package index alike, and the test injects the file into each page itself.
The site never loads it.

Like the other browser tests this needs the built site (nox -s docs) and Chromium, and is
skipped without them unless INFERLAB_REQUIRE_BROWSER=1 (CI) or --browser makes that a failure.
"""

from __future__ import annotations

import collections
import functools
import http.server
import importlib.resources
import importlib.util
import os
import re
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import pytest
import yaml

import test_browser
from inferlab.bench import labels
from inferlab.flash import traffic
from inferlab.kvcache import size
from inferlab.speculative import formulas
from test_browser import CHROMIUM, SITE, site_pages
from test_calculators import BrowserThread, SiteRunner, require

ROOT = Path(__file__).resolve().parent.parent
SCHEMES = {"light": "default", "dark": "slate"}  # Playwright's colour scheme -> Material's scheme

# ---------------------------------------------------------------- axe-core


def axe_source() -> str | None:
    """Return axe-core's axe.min.js as shipped in axe-playwright-python, or None if not installed."""
    if importlib.util.find_spec("axe_playwright_python") is None:
        return None
    return (importlib.resources.files("axe_playwright_python") / "axe.min.js").read_text(encoding="utf-8")


# Wait for what changes the page after "load": fonts, MathJax's typesetting, and the layout work
# that follows (a11y.js gives a box its tab stop once it overflows); then audit.
SETTLE = """async () => {
    await document.fonts.ready;
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
    await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
}"""

# Started without waiting, so that the light and the dark page are audited at the same time (each
# page has its own renderer process: two cores audit two pages); AXE_RESULT collects the outcome.
START_AXE = """() => {
    window.axeResult = axe.run(document, { resultTypes: ["violations"] }).then((result) =>
        result.violations.map((rule) => ({
            rule: rule.id,
            impact: rule.impact,
            nodes: rule.nodes.map((node) => ({
                target: node.target.join(" "),
                html: node.html.slice(0, 160),
                summary: node.failureSummary.replace(/\\s+/g, " ").slice(0, 300),
            })),
        }))
    );
}"""
AXE_RESULT = "() => window.axeResult"


def answer_offline(route):
    """Material asks GitHub for the repository's stars: answer offline, as tests/test_browser.py does."""
    route.fulfill(status=200, content_type="application/json", body="{}")


def audit_both_schemes(browser, url: str, axe_js: str, measure: bool = False):
    """Return axe-core's violations on url in each colour scheme, audited side by side.

    Each scheme gets its own browser context whose system setting (prefers-color-scheme) asks for
    it, as a reader's operating system would; the page must then show Material's matching palette.
    With ``measure``, return (violations, layouts): layouts holds, per scheme, measure_layouts'
    measurements of the same loaded pages, taken once axe-core is done.
    """
    parts = urllib.parse.urlsplit(url)
    elsewhere = re.compile(r"^(?!" + re.escape(f"{parts.scheme}://{parts.netloc}/") + ")https?://")
    contexts = {scheme: browser.new_context(color_scheme=scheme) for scheme in SCHEMES}
    try:
        pages = {}
        for scheme, context in contexts.items():
            context.route(elsewhere, answer_offline)
            pages[scheme] = context.new_page()
            pages[scheme].set_default_timeout(300_000)  # generous: notebook pages are heavy, CI machines small
            pages[scheme].goto(url, wait_until="commit")  # both load at once
        for scheme, page in pages.items():
            page.wait_for_load_state("load")
            page.evaluate(SETTLE)
            shown = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
            assert shown == SCHEMES[scheme], f"{url}: asked for the {scheme} scheme, the page shows {shown!r}"
            page.add_script_tag(content=axe_js)
            page.evaluate(START_AXE)
        violations = {scheme: page.evaluate(AXE_RESULT) for scheme, page in pages.items()}
        if not measure:
            return violations
        return violations, measure_layouts(pages)
    finally:
        for context in contexts.values():
            context.close()


def excess_violations(found: list[dict], baseline: list[dict]) -> list[dict]:
    """Return the rules a page breaks on more elements than the bare theme page does."""
    allowed = collections.Counter({rule["rule"]: len(rule["nodes"]) for rule in baseline})
    return [rule for rule in found if len(rule["nodes"]) > allowed[rule["rule"]]]


def describe(rules: list[dict], baseline: list[dict], where: str) -> str:
    """One line per violating element: the rule, the page, the element and what axe says is wrong."""
    allowed = collections.Counter({rule["rule"]: len(rule["nodes"]) for rule in baseline})
    lines = []
    for rule in rules:
        lines.append(
            f"{rule['rule']} ({rule['impact']}): {len(rule['nodes'])} on {where}, {allowed[rule['rule']]} on the bare page"
        )
        lines += [f"    {node['target']}  {node['html']!r}\n      {node['summary']}" for node in rule["nodes"]]
    return "\n".join(lines)


# ---------------------------------------------------------------- layout, on the pages audited above

# Measured in each audited page once axe-core is done, at the desktop width the page was loaded at
# (1280 px) and again at a phone's (390 px; the viewport is narrowed in place, no reload), in both
# colour schemes: what a reader on a phone or in Chinese would see go wrong (issue 16).
PHONE = {"width": 390, "height": 844}
WIDTHS = (1280, PHONE["width"])
LAYOUT = """() => {
    const content = document.querySelector(".md-content");
    const article = content.querySelector("article") || content;
    const edge = content.getBoundingClientRect();
    // The nearest box around an element (itself included) that scrolls sideways and fits the column.
    const scroller = (element) => {
        for (let node = element; node && node !== content.parentElement; node = node.parentElement) {
            const overflow = getComputedStyle(node).overflowX;
            const box = node.getBoundingClientRect();
            if ((overflow === "auto" || overflow === "scroll") && box.left >= edge.left - 1 && box.right <= edge.right + 1) return node;
        }
        return null;
    };
    return {
        sideways: document.documentElement.scrollWidth - document.documentElement.clientWidth,
        column: edge.width,
        equations: [...article.querySelectorAll("div.arithmatex")].map((math) => {
            const svg = math.querySelector("mjx-container svg");
            return { tex: math.textContent.trim().slice(0, 60), width: svg ? svg.getBoundingClientRect().width : 0 };
        }),
        tables: [...article.querySelectorAll("table")].filter((table) => !table.closest(".calc")).map((table) => ({
            head: [...table.querySelectorAll("th")].map((th) => th.innerText.trim()),
            wide: table.scrollWidth > edge.width + 1,
            contained: scroller(table) !== null,
        })),
        figures: [...article.querySelectorAll("img")].filter((img) => /figures\\//.test(img.src)).map((img) => ({
            src: img.currentSrc || img.src,
            textPx: img.dataset.smallestTextPx
                ? (img.dataset.smallestTextPx * img.getBoundingClientRect().width) / img.naturalWidth : null,
            filter: img.classList.contains("no-invert") ? "invert (kept as it is on purpose)" : getComputedStyle(img).filter,
        })),
        editors: [...article.querySelectorAll(".jp-CodeCell .jp-InputArea-editor")].map((editor) => editor.getBoundingClientRect().width),
    };
}"""
NEXT_FRAME = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
LEGIBLE_TEXT_PX = 7.4  # tools/reader_hooks.py sizes figures for 7.5 px text; a little rounding allowed
# Header words a zh-TW table may show in Latin letters: the glossary's column of English terms.
LATIN_HEADERS = {"English"}
# A result file's key shown as it is (naive_s, ttft_ms); math such as s_t(x) has one letter before "_".
SNAKE_CASE = re.compile(r"\b[A-Za-z]{2,}\w*_\w+\b")


def is_english(header: str) -> bool:
    """Return True for a table header a zh-TW reader should not see: English words or a snake_case key."""
    return bool(labels.english_words(header) or SNAKE_CASE.search(header))


def measure_layouts(pages: dict) -> dict[str, dict[int, dict]]:
    """Return LAYOUT's measurements of each scheme's page at the desktop width, then at the phone's.

    Both pages are narrowed before either is measured again: their renderers lay out at once.
    """
    found = {scheme: {WIDTHS[0]: page.evaluate(LAYOUT)} for scheme, page in pages.items()}
    for page in pages.values():
        page.set_viewport_size(PHONE)
    for scheme, page in pages.items():
        page.evaluate(NEXT_FRAME)
        found[scheme][WIDTHS[1]] = page.evaluate(LAYOUT)
    return found


def layout_problems(found: dict, width: int, scheme: str, path: str, site_url: str) -> list[str]:
    """Return what is wrong with a page's layout measured at one width, one line each."""
    problems = []
    if found["sideways"] > 1:
        problems.append(f"the page scrolls sideways by {found['sideways']} px")
    problems += [f"display math {e['tex']!r} is {e['width']:.0f} px wide" for e in found["equations"] if e["width"] < 1]
    problems += [
        f"a wide table is in no scroll box: {t['head'][:4]}"
        for t in found["tables"]
        if t["wide"] and not t["contained"]
    ]
    for figure in found["figures"]:
        name = figure["src"].removeprefix(site_url)
        if width == PHONE["width"] and figure["textPx"] is not None and figure["textPx"] < LEGIBLE_TEXT_PX:
            problems.append(f"{name}: its smallest text is {figure['textPx']:.1f} px on a phone")
        if scheme == "dark" and "invert" not in figure["filter"]:
            problems.append(f"{name}: a white box in the dark scheme (filter {figure['filter']!r})")
    if width == PHONE["width"] and found["editors"] and min(found["editors"]) < 0.9 * found["column"]:
        problems.append(f"notebook code is {min(found['editors']):.0f} px wide in a {found['column']:.0f} px column")
    if path.startswith("zh-TW/"):
        for table in found["tables"]:
            english = [h for h in table["head"] if is_english(h) and h not in LATIN_HEADERS]
            if english:
                problems.append(f"English table headers on a zh-TW page: {english}")
        for figure in found["figures"]:
            served = figure["src"].removeprefix(site_url)
            chinese = ROOT / "docs" / served.removeprefix("zh-TW/").replace(".png", ".zh-TW.png")
            if not (served.startswith("zh-TW/figures/") and chinese.is_file()):
                problems.append(f"{served}: an English figure on a zh-TW page")
    return [f"/{path} ({scheme}, {width} px): {problem}" for problem in problems]


# ---------------------------------------------------------------- the bare theme page

BARE_PAGE = """# A page

Some prose with [a link](https://example.org/) in it.

!!! note
    An admonition.

```python
def add_one(x: int) -> int:
    return x + 1  # a comment
```

| a | b |
|---|---|
| 1 | 2 |
"""


class IgnoreTags(yaml.SafeLoader):
    """Reads mkdocs.yml without importing what its !!python tags name: only the theme is needed."""


IgnoreTags.add_multi_constructor("", lambda loader, suffix, node: None)


def bare_config(language: str) -> dict:
    """Return a bare mkdocs-material config with the site's theme settings in ``language``."""
    site_config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=IgnoreTags)
    theme = {key: value for key, value in site_config["theme"].items() if key != "custom_dir"}
    theme["language"] = language
    return {
        "site_name": "Bare",
        "theme": theme,
        "markdown_extensions": ["admonition", "tables", "pymdownx.highlight", "pymdownx.superfences"],
    }


def build_bare_sites(root: Path) -> None:
    """Build the bare page under root/en/ and root/zh-TW/ with mkdocs and the installed theme."""
    for language in ("en", "zh-TW"):
        project = root / "projects" / language
        (project / "docs").mkdir(parents=True)
        (project / "docs" / "index.md").write_text(BARE_PAGE, encoding="utf-8")
        (project / "mkdocs.yml").write_text(yaml.safe_dump(bare_config(language)), encoding="utf-8")
        command = [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(project / "mkdocs.yml")]
        command += ["--site-dir", str(root / "site" / language)]
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        subprocess.run(command, check=True, capture_output=True, timeout=600, env=env)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def chromium(request):
    reason = None
    if CHROMIUM is None:
        reason = "Chromium is not installed (apt-get install chromium)"
    elif importlib.util.find_spec("playwright") is None:
        reason = "playwright is not installed"
    require(reason, request.config)
    thread = BrowserThread()
    yield thread
    thread.close()


@pytest.fixture(scope="module")
def site(chromium, request):
    require(test_browser.missing_requirement(), request.config)
    runner = SiteRunner(chromium)
    yield runner
    runner.server.shutdown()


@pytest.fixture(scope="module")
def axe_js(request):
    source = axe_source()
    require(None if source else "axe-playwright-python (which ships axe-core) is not installed", request.config)
    return source


@pytest.fixture(scope="module")
def bare(tmp_path_factory, chromium, axe_js):
    """axe-core's violations on the bare theme page, per language and scheme, audited on first use."""
    root = tmp_path_factory.mktemp("bare")
    build_bare_sites(root)
    handler = functools.partial(test_browser.QuietHandler, directory=str(root / "site"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"

    @functools.cache
    def violations(language: str) -> dict[str, list[dict]]:
        return chromium.call(lambda: audit_both_schemes(chromium.chromium, f"{url}{language}/", axe_js))

    yield violations
    server.shutdown()


# ---------------------------------------------------------------- every page, both schemes


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("path", site_pages() or ["(site not built)"])
def test_no_page_has_more_axe_violations_than_the_bare_theme(site, bare, axe_js, path):
    """axe-core, and the layout at 1280 and 390 px (see layout_problems), in both schemes."""
    baseline = bare("zh-TW" if path.startswith("zh-TW/") else "en")
    found, layouts = site.chromium.call(
        lambda: audit_both_schemes(site.chromium.chromium, site.url + path, axe_js, measure=True)
    )
    report = [
        describe(excess, baseline[scheme], f"/{path} ({scheme})")
        for scheme in SCHEMES
        if (excess := excess_violations(found[scheme], baseline[scheme]))
    ]
    report += [
        problem
        for scheme, by_width in layouts.items()
        for width, measured in by_width.items()
        for problem in layout_problems(measured, width, scheme, path, site.url)
    ]
    assert not report, "\n" + "\n".join(report)


@pytest.mark.browser
def test_bare_theme_page_is_audited_in_both_schemes(bare):
    """The reference is real: axe finds the theme's known faults there (a dialog with no name)."""
    audited = bare("en")
    assert set(audited) == set(SCHEMES)
    for scheme, violations in audited.items():
        rules = {rule["rule"] for rule in violations}
        assert "aria-dialog-name" in rules, f"{scheme}: {rules}"


def test_excess_counts_each_rule_against_the_bare_page():
    bare_rules = [{"rule": "color-contrast", "nodes": [{}, {}]}, {"rule": "aria-dialog-name", "nodes": [{}]}]
    same = [{"rule": "color-contrast", "nodes": [{}]}, {"rule": "aria-dialog-name", "nodes": [{}]}]
    assert excess_violations(same, bare_rules) == []
    worse = [{"rule": "color-contrast", "nodes": [{}, {}, {}]}, {"rule": "region", "nodes": [{}]}]
    assert [rule["rule"] for rule in excess_violations(worse, bare_rules)] == ["color-contrast", "region"]


# ---------------------------------------------------------------- in-page links


def in_page_links(html: str) -> list[str]:
    """Return the targets of a page's skip link and table-of-contents links ("#anchor")."""
    links = re.findall(r'<a href="#([^"]*)" class="md-nav__link"', html)
    links += re.findall(r'<a href="#([^"]*)" class="md-skip"', html)
    return links


@pytest.mark.parametrize("path", site_pages() or ["(site not built)"])
def test_skip_link_and_table_of_contents_reach_their_headings(path):
    """Keyboard and screen-reader users jump with these links; each needs an element with its id."""
    page = SITE / path / "index.html"
    if not page.is_file():
        pytest.skip("the site is not built (nox -s docs)")
    html = page.read_text(encoding="utf-8")
    ids = collections.Counter(re.findall(r'\sid="([^"]*)"', html))
    missing = [target for target in in_page_links(html) if ids[target] == 0]
    assert not missing, f"/{path}: in-page links with no target: {missing}"
    headings = [anchor for anchor in re.findall(r'<h[1-6][^>]*\sid="([^"]*)"', html)]
    repeated = sorted({anchor for anchor in headings if ids[anchor] > 1 or not anchor})
    assert not repeated, f"/{path}: heading ids empty or used twice: {repeated}"


# ---------------------------------------------------------------- calculators by keyboard alone

# Every control a reader can reach, with the name a screen reader reads for it, and whether the
# numbers it changes sit in a live region (read out when they change).
CONTROLS = """root => [...root.querySelectorAll('input, select, textarea, button')].map(control => ({
    name: control.name,
    hidden: control.closest('[aria-hidden="true"]') !== null,
    tabindex: control.tabIndex,
    label: (control.getAttribute('aria-label')
        || [...control.labels].map(label => label.textContent).join(' ')).trim(),
}))"""
OUTPUTS_LIVE = """root => [...root.querySelectorAll('output')].map(output => {
    const region = output.closest('[aria-live]');
    return region ? region.getAttribute('aria-live') : null;
})"""


def open_by_keyboard(page, url: str, kind: str) -> str:
    """Open a page and press Tab from its top until the calculator's first control has the focus."""
    page.set_default_timeout(180_000)
    page.goto(url, wait_until="load")
    root = f".calc[data-calc='{kind}']"
    page.wait_for_selector(f"{root}[data-ready] output[data-key]")
    for _ in range(400):  # the header, the navigation and the prose before the calculator
        page.keyboard.press("Tab")
        if page.evaluate(f'document.activeElement.closest("{root}") !== null'):
            return root
    raise AssertionError(f"{url}: 400 presses of Tab never reached the {kind} calculator")


def focused_name(page) -> str:
    return page.evaluate("document.activeElement.name || document.activeElement.tagName")


def tab_through(page, url: str, expected: list[str]) -> list[str]:
    """Return the controls' names in the order Tab visits them, then Shift+Tab back to the first."""
    visited = [focused_name(page)]
    for _ in range(len(expected) - 1):
        page.keyboard.press("Tab")
        visited.append(focused_name(page))
    for _ in range(len(expected) - 1):  # focus can go back the same way
        page.keyboard.press("Shift+Tab")
    assert focused_name(page) == expected[0], f"{url}: Shift+Tab did not lead back to {expected[0]}"
    return visited


def press_on(page, name: str, keys: str) -> None:
    """Tab forward to the named control, then change it: a key ("ArrowDown", "Space") or typed text."""
    for _ in range(12):
        if focused_name(page) == name:
            break
        page.keyboard.press("Tab")
    assert focused_name(page) == name, f"Tab never reached {name}"
    if keys in ("ArrowDown", "ArrowUp", "Space"):
        page.keyboard.press(keys)
    else:
        page.keyboard.press("Control+A")  # replace what is there, as a reader selecting it would
        page.keyboard.type(keys)


READ_CALCULATOR = f"""root => ({{
    values: Object.fromEntries([...root.querySelectorAll('input, select')].map(control =>
        [control.name, control.type === 'checkbox' ? control.checked : control.value])),
    outputs: Object.fromEntries([...root.querySelectorAll('output')].map(output =>
        [output.dataset.key, output.dataset.value === undefined ? output.textContent : output.dataset.value])),
    error: root.querySelector('.calc__error').hidden ? null : root.querySelector('.calc__error').textContent,
    errorRole: root.querySelector('.calc__error').getAttribute('role'),
    live: ({OUTPUTS_LIVE})(root),
}})"""


def keyboard_session(page, url: str, kind: str, keys: list[tuple[str, str]]) -> dict:
    """Reach the calculator by Tab, walk its controls, press the keys; return what it shows."""
    root = open_by_keyboard(page, url, kind)
    controls = page.eval_on_selector(root, CONTROLS)
    reachable = [control["name"] for control in controls if not control["hidden"]]  # in page order
    order = tab_through(page, url, reachable)
    for name, text in keys:
        press_on(page, name, text)
    return {
        "controls": controls,
        "reachable": reachable,
        "order": order,
        **page.eval_on_selector(root, READ_CALCULATOR),
    }


def assert_accessible_controls(state: dict, where: str) -> None:
    """Every reachable control has a label; hidden ones take no tab stop; results are announced."""
    for control in state["controls"]:
        if control["hidden"]:
            assert control["tabindex"] < 0, (
                f"{where}: {control['name']} is hidden from screen readers but takes a tab stop"
            )
        else:
            assert control["label"], f"{where}: control {control['name']!r} has no label"
    assert state["order"] == state["reachable"], f"{where}: Tab visits {state['order']}, not {state['reachable']}"
    assert state["live"] and all(live == "polite" for live in state["live"]), f"{where}: results not announced"
    assert state["errorRole"] == "alert", f"{where}: errors are not announced"
    assert state["error"] is None, f"{where}: {state['error']}"


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["", "zh-TW/"])
def test_kv_cache_calculator_by_keyboard_alone(site, lang):
    keys = [("preset", "ArrowDown"), ("tokens", "32768"), ("batch", "8"), ("dtype", "ArrowDown")]
    state = site.run(lambda page, url: keyboard_session(page, url + lang + "kvcache/cache-size/", "kv-cache", keys))
    where = f"/{lang}kvcache/cache-size/"
    assert_accessible_controls(state, where)
    values = state["values"]
    names = list(size.PRESETS)
    assert values["preset"] == names[1], f"{where}: ArrowDown on the model did not pick the next preset"
    assert values["dtype"] == "fp32", f"{where}: ArrowDown on the data type did not pick fp32"
    expected = size.kv_cache_bytes(names[1], 32768, 8, "fp32")
    assert int(state["outputs"]["bytes"]) == expected


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["", "zh-TW/"])
def test_speedup_calculator_by_keyboard_alone(site, lang):
    keys = [("alpha", "0.7"), ("gamma", "5"), ("c", "0.1")]
    state = site.run(
        lambda page, url: keyboard_session(page, url + lang + "speculative/speedup/", "speculative-speedup", keys)
    )
    where = f"/{lang}speculative/speedup/"
    assert_accessible_controls(state, where)
    assert float(state["outputs"]["speedup"]) == pytest.approx(formulas.expected_speedup(0.7, 5, 0.1), rel=1e-9)
    assert int(state["outputs"]["best_gamma"]) == formulas.best_gamma(0.7, 0.1, 64)


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["", "zh-TW/"])
def test_hbm_calculator_by_keyboard_alone(site, lang):
    keys = [("N", "6144"), ("d", "64"), ("gpu", "ArrowDown"), ("precision", "ArrowDown"), ("causal", "Space")]
    state = site.run(lambda page, url: keyboard_session(page, url + lang + "flash/hbm-traffic/", "hbm-traffic", keys))
    where = f"/{lang}flash/hbm-traffic/"
    assert_accessible_controls(state, where)
    values = state["values"]
    gpu = list(traffic.GPU_PRESETS)[1]
    assert (values["gpu"], values["precision"], values["causal"]) == (gpu, "fp16", True), values
    tiles = traffic.blocks_from_sram(traffic.GPU_PRESETS[gpu].sram_kib_per_sm * 1024, 64, 2)
    flash = traffic.hbm_traffic(6144, 64, "flash", block_q=tiles[0], block_k=tiles[1], causal=True)
    assert int(state["outputs"]["flash_elements"]) == flash["total"]
    flops = traffic.attention_flops(6144, 64, causal=True)
    estimate = traffic.estimate_runtime(flops, flash["total"] * 2, gpu, "fp16")
    assert float(state["outputs"]["flash_runtime"]) == pytest.approx(estimate["runtime_s"], rel=1e-9)


def test_notebook_headings_get_the_anchors_their_table_of_contents_links_to():
    """mkdocs-jupyter ids its headings with an ASCII slug and its TOC with Python-Markdown's ids;
    the hook gives each heading its TOC anchor (the reference: Python-Markdown's own ids)."""
    import markdown
    from mkdocs.structure.toc import get_toc
    from mkdocs_jupyter.convert import add_anchor_lower_id

    sys.path.insert(0, str(ROOT / "tools"))
    import mkdocs_hooks

    headings = [(1, "快速上手"), (2, "環境設定"), (2, "MAP 與貪婪"), (2, "MAP 與貪婪"), (2, "Set up")]
    source = "\n\n".join(f"{'#' * level} {text}" for level, text in headings)
    parser = markdown.Markdown(extensions=["toc"])
    parser.convert(source)
    toc = get_toc(parser.toc_tokens)
    # The headings as mkdocs-jupyter renders them, with prose between.
    html = "<p>text</p>".join(add_anchor_lower_id(f"<h{level}>{text}</h{level}>") for level, text in headings)
    assert re.findall(r'id="([^"]*)"', html)[:2] == ["", ""]  # the fault: Chinese headings get id=""

    fixed = mkdocs_hooks.match_notebook_heading_ids(html, toc)
    expected = mkdocs_hooks.toc_ids(toc)
    assert expected == ["_1", "_2", "map", "map_1", "set-up"]
    assert re.findall(r'<h\d id="([^"]*)"', fixed) == expected
    assert re.findall(r'class="anchor-link" href="#([^"]*)"', fixed) == expected
    assert fixed.count("<p>text</p>") == len(headings) - 1
    # A TOC that does not list the same headings leaves the page as it was.
    assert mkdocs_hooks.match_notebook_heading_ids(html, get_toc(parser.toc_tokens[:0])) == html


def test_layout_problems_name_each_fault_a_reader_would_see():
    """Each layout check can fail, on measurements made up to show one fault each."""
    site_url = "http://127.0.0.1:1/"
    good = {"sideways": 0, "column": 390, "equations": [{"tex": "x", "width": 40}], "tables": [], "figures": []}
    good["editors"] = [390]
    assert layout_problems(good, 390, "dark", "flash/tiling/", site_url) == []
    english_figure = {"src": site_url + "zh-TW/figures/flash/no_such_figure.png", "textPx": 5.0, "filter": "none"}
    bad = {
        "sideways": 19,
        "column": 390,
        "equations": [{"tex": "a = b", "width": 0}],
        "tables": [{"head": ["naive_s", "時間"], "wide": True, "contained": False}],
        "figures": [english_figure],
        "editors": [170],
    }
    problems = "\n".join(layout_problems(bad, 390, "dark", "zh-TW/flash/tiling/", site_url))
    for fault in (
        "scrolls sideways by 19 px",
        "display math 'a = b' is 0 px wide",
        "a wide table is in no scroll box",
        "smallest text is 5.0 px on a phone",
        "a white box in the dark scheme",
        "notebook code is 170 px wide",
        "English table headers on a zh-TW page: ['naive_s']",
        "an English figure on a zh-TW page",
    ):
        assert fault in problems, fault
    # The same page at the desktop width, in the light scheme: the phone- and dark-only checks stay quiet.
    desktop = "\n".join(layout_problems(bad, 1280, "light", "flash/tiling/", site_url))
    assert "on a phone" not in desktop and "dark scheme" not in desktop and "notebook code" not in desktop
