"""The in-browser calculators give the Python functions' numbers.

docs/javascripts/calculators.js re-implements three small Python modules so that readers can play
with them on the page. Here its pure functions run in headless Chromium on grids of inputs and
must agree with the Python functions (the reference) within 1e-9 relative, and refuse the same bad
input naming the same argument. On the built site, a calculator's displayed number must be the
Python function's, and phone-width screenshots of one page per topic are saved for CI.

Skipped without Chromium or Playwright, like tests/test_browser.py, unless INFERLAB_REQUIRE_BROWSER=1
or --browser makes that a failure.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import http.server
import importlib.util
import json
import math
import os
import re
import sys
import threading
from pathlib import Path

import pytest

import test_browser
from inferlab.flash import traffic
from inferlab.kvcache import size
from inferlab.speculative import formulas
from test_browser import CHROMIUM, CHROMIUM_ARGS, SITE

ROOT = Path(__file__).resolve().parent.parent
JS_DIR = ROOT / "docs" / "javascripts"
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
sys.path.insert(0, str(ROOT / "tools"))
import calculator_presets  # noqa: E402

REL = 1e-9

# ---------------------------------------------------------------- the generated presets


def test_generated_presets_match_the_package():
    """calculator-presets.js is what tools/calculator_presets.py writes from the package today."""
    current = (JS_DIR / "calculator-presets.js").read_text(encoding="utf-8")
    assert current == calculator_presets.render(), "stale: run python tools/calculator_presets.py"


def test_speculative_presets_are_the_sweeps_measured_alpha_and_c():
    """Each preset carries the committed gamma sweep's alpha and the c of its runtime, read from the file."""
    sweep = json.loads((ROOT / "docs" / "results" / "speculative_gamma_sweep.json").read_text(encoding="utf-8"))
    found = calculator_presets.speculative_presets()["presets"]
    assert sorted(found) == ["long-inferlab", "long-transformers", "short-inferlab", "short-transformers"]
    for regime in ("short", "long"):
        record = sweep["values"][regime]
        assert found[f"{regime}-inferlab"]["alpha"] == found[f"{regime}-transformers"]["alpha"] == record["alpha"]
        assert found[f"{regime}-inferlab"]["c"] == record["c"]
        assert found[f"{regime}-transformers"]["c"] == record["c_transformers"]
        assert found[f"{regime}-inferlab"]["gamma"] == record["best_gamma_measured"]
        assert found[f"{regime}-inferlab"]["measured_speedup"] == record["best_speedup_measured"]
        assert found[f"{regime}-transformers"]["measured_speedup"] == record["best_speedup_transformers_pair"]


# ---------------------------------------------------------------- pure functions in Chromium


class BrowserThread:
    """One headless Chromium driven from its own thread.

    Playwright's sync API allows one instance per thread, and tests/test_browser.py keeps its own
    in the main thread for the whole session; this one lives in a worker thread so both coexist.
    """

    def __init__(self):
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.call(self._start)

    def call(self, function, *args):
        """Run function(*args) in the browser's thread; its exceptions (and skips) come back here."""
        return self.pool.submit(function, *args).result()

    def _start(self):
        from playwright.sync_api import sync_playwright

        self.playwright = sync_playwright().start()
        self.chromium = self.playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

    def _stop(self):
        self.chromium.close()
        self.playwright.stop()

    def close(self):
        self.call(self._stop)
        self.pool.shutdown()


def require(reason: str | None, config) -> None:
    """Skip for a missing requirement, or fail when CI requires the browser tests."""
    if reason:
        if os.environ.get("INFERLAB_REQUIRE_BROWSER") == "1" or config.getoption("--browser"):
            pytest.fail(f"browser tests required but {reason}")
        pytest.skip(reason)


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
def js(chromium):
    """A blank page with the calculators loaded; no built site needed."""

    def open_blank():
        context = chromium.chromium.new_context()
        blank = context.new_page()
        blank.set_content("<!doctype html><html lang='en'><body></body></html>")
        blank.add_script_tag(path=str(JS_DIR / "calculator-presets.js"))
        blank.add_script_tag(path=str(JS_DIR / "calculators.js"))
        return context, blank

    context, blank = chromium.call(open_blank)
    yield JsCalculators(blank, chromium)
    chromium.call(context.close)


class SiteRunner:
    """Serves site/ on a local port and runs a check on a fresh page in the browser's thread."""

    def __init__(self, chromium):
        handler = functools.partial(test_browser.QuietHandler, directory=str(SITE))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.chromium = chromium

    def run(self, check, *args, **context_options):
        def in_browser_thread():
            context = self.chromium.chromium.new_context(**context_options)
            try:
                page = context.new_page()
                page.set_default_timeout(60_000)  # generous: CI machines are small and shared
                return check(page, self.url, *args)
            finally:
                context.close()

        return self.chromium.call(in_browser_thread)


@pytest.fixture(scope="module")
def site(chromium, request):
    require(test_browser.missing_requirement(), request.config)
    runner = SiteRunner(chromium)
    yield runner
    runner.server.shutdown()


class JsCalculators:
    """Runs window.InferlabCalc functions, many calls per round trip."""

    SCRIPT = """calls => calls.map(([name, args]) => {
        try { return {value: window.InferlabCalc[name](...args)}; }
        catch (error) { return {error: error.message}; }
    })"""

    def __init__(self, page, chromium):
        self.page, self.chromium = page, chromium

    def many(self, name: str, arg_lists: list[list]) -> list[dict]:
        calls = [[name, list(args)] for args in arg_lists]
        return self.chromium.call(self.page.evaluate, self.SCRIPT, calls)

    def call(self, name: str, *args):
        (result,) = self.many(name, [args])
        if "error" in result:
            raise AssertionError(f"{name}{args} threw in JS: {result['error']}")
        return result["value"]


def python_or_error(function, *args, **kwargs) -> dict:
    try:
        return {"value": function(*args, **kwargs)}
    except (ValueError, TypeError) as error:
        return {"error": str(error)}


def assert_same(js_result: dict, py_result: dict, what: str) -> None:
    """Same number (1e-9 relative), same dict of numbers, or both refused."""
    if "error" in py_result:
        assert "error" in js_result, f"{what}: Python refused ({py_result['error']}) but JS returned {js_result}"
        return
    assert "error" not in js_result, f"{what}: JS threw {js_result['error']!r}, Python gave {py_result['value']}"
    expected, actual = py_result["value"], js_result["value"]
    if isinstance(expected, dict):
        assert set(actual) == set(expected), what
        for key in expected:
            assert_same({"value": actual[key]}, {"value": expected[key]}, f"{what}[{key}]")
    elif isinstance(expected, str):
        assert actual == expected, what
    elif math.isinf(expected):
        assert actual == expected, f"{what}: {actual} != {expected}"
    else:
        assert actual == pytest.approx(expected, rel=REL, abs=0), f"{what}: JS {actual} != Python {expected}"


@pytest.mark.browser
def test_kv_cache_bytes_matches_python(js):
    configs = [*size.PRESETS]
    configs += [  # Hugging Face-style dicts, including the fallbacks (no GQA field, no head_dim)
        {
            "num_hidden_layers": 9,
            "num_attention_heads": 6,
            "num_key_value_heads": 2,
            "head_dim": 64,
        },
        {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096},
        {
            "num_hidden_layers": 1,
            "num_attention_heads": 3,
            "num_key_value_heads": 1,
            "hidden_size": 96,
        },
        {
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 128,
        },
    ]
    calls = [
        (config, tokens, batch, dtype)
        for config in configs
        for tokens in (0, 1, 7, 4096, 131072)
        for batch in (0, 1, 3, 64)
        for dtype in ("fp32", "bf16", "float16", "fp8", "int8", "torch.bfloat16")
    ]
    for args, result in zip(calls, js.many("kvCacheBytes", calls), strict=True):
        assert_same(result, python_or_error(size.kv_cache_bytes, *args), f"kv_cache_bytes{args}")
    # cache_shape's fallbacks, checked on their own.
    for config in configs:
        assert js.call("cacheShape", config) == size.cache_shape(config)


ALPHAS = (0.0, 0.1, 1 / 3, 0.5, 0.8, 0.9, 0.99, 0.999999, 1.0)
GAMMAS = (*range(1, 11), 16, 64)
COSTS = (0.0, 0.01, 0.05, 0.2, 1.0, 3.0)


@pytest.mark.browser
def test_speculative_formulas_match_python(js):
    token_calls = [(alpha, gamma) for alpha in ALPHAS for gamma in GAMMAS]
    for args, result in zip(token_calls, js.many("expectedTokensPerStep", token_calls), strict=True):
        assert_same(
            result,
            python_or_error(formulas.expected_tokens_per_step, *args),
            f"expected_tokens_per_step{args}",
        )

    speedup_calls = [(alpha, gamma, c) for alpha in ALPHAS for gamma in GAMMAS for c in COSTS]
    for args, result in zip(speedup_calls, js.many("expectedSpeedup", speedup_calls), strict=True):
        assert_same(result, python_or_error(formulas.expected_speedup, *args), f"expected_speedup{args}")

    best_calls = [(alpha, c, max_gamma) for alpha in ALPHAS for c in COSTS for max_gamma in (1, 8, 64)]
    for args, result in zip(best_calls, js.many("bestGamma", best_calls), strict=True):
        assert result == {"value": formulas.best_gamma(*args)}, f"best_gamma{args}"


@pytest.mark.browser
def test_tokens_per_step_is_the_geometric_sum_and_alpha_one_its_limit(js):
    """A second reference: 1 + alpha + ... + alpha^gamma by brute force, including alpha = 1."""
    for alpha in (0.0, 0.3, 0.95, 1 - 1e-12, 1.0):
        for gamma in (1, 4, 12):
            brute = sum(alpha**i for i in range(gamma + 1))
            assert js.call("expectedTokensPerStep", alpha, gamma) == pytest.approx(brute, rel=1e-6)


FLASH_OPTIONS = [
    {},
    {"block_q": 1, "block_k": 1},
    {"block_q": 16, "block_k": 64},
    {"block_q": 128, "block_k": 32},
    {"block_q": 50},
    {"block_k": 100},
    {"sram_bytes": 16 * 1024},
    {"sram_bytes": 64 * 1024, "element_bytes": 2},
    {"sram_bytes": 164 * 1024},
    {"sram_bytes": 1024},  # too small for d >= 64: both must refuse
]


@pytest.mark.browser
def test_hbm_traffic_matches_python(js):
    calls = [
        (N, d, method, {})
        for N in (1, 2, 63, 1000, 6144)
        for d in (1, 64, 128)
        for method in ("standard", "flash_ideal")
    ]
    calls += [
        (N, d, "flash", {**options, "causal": causal})
        for N in (1, 2, 63, 64, 65, 1000, 4096, 6144)
        for d in (1, 16, 64, 128)
        for options in FLASH_OPTIONS
        for causal in (False, True)
    ]
    for args, result in zip(calls, js.many("hbmTraffic", calls), strict=True):
        N, d, method, options = args
        assert_same(
            result,
            python_or_error(traffic.hbm_traffic, N, d, method, **options),
            f"hbm_traffic{args}",
        )


@pytest.mark.browser
def test_flops_and_roofline_match_python(js):
    flop_calls = [
        (N, d, causal, backward)
        for N in (1, 100, 6144, 65536)
        for d in (1, 64, 128)
        for causal in (False, True)
        for backward in (False, True)
    ]
    for args, result in zip(flop_calls, js.many("attentionFlops", flop_calls), strict=True):
        assert_same(result, python_or_error(traffic.attention_flops, *args), f"attention_flops{args}")

    custom = traffic.GPUSpec("mine", 10.0, 100.0, 500.0, 100, "a made-up GPU")
    gpus = [*traffic.GPU_PRESETS, custom]
    runtime_calls = [
        (flops, bytes_moved, gpu, precision, runtime_model)
        for flops in (0, 1.0, 9.664e9, 3e15)
        for bytes_moved in (0, 1, 610.3e6, 305.2e6, 1e12)
        for gpu in gpus
        for precision in ("fp32", "fp16")
        for runtime_model in traffic.RUNTIME_MODELS
    ]
    js_calls = [
        (f, b, dataclasses.asdict(g) if isinstance(g, traffic.GPUSpec) else g, p, m) for f, b, g, p, m in runtime_calls
    ]
    for args, result in zip(runtime_calls, js.many("estimateRuntime", js_calls), strict=True):
        assert_same(result, python_or_error(traffic.estimate_runtime, *args), f"estimate_runtime{args}")


BAD_INPUT = [
    ("kvCacheBytes", ("Llama-3.2-3B", -1), size.kv_cache_bytes),
    ("kvCacheBytes", ("Llama-3.2-3B", 10, 1.5), size.kv_cache_bytes),
    ("kvCacheBytes", ("GPT-5", 10), size.kv_cache_bytes),
    ("kvCacheBytes", ("Llama-3.2-3B", 10, 1, "fp4"), size.kv_cache_bytes),
    (
        "kvCacheBytes",
        ({"num_hidden_layers": 0, "num_attention_heads": 2, "head_dim": 4}, 10),
        size.kv_cache_bytes,
    ),
    # A zero is an error, not a missing field; True is not a count; the head dim must divide evenly.
    (
        "kvCacheBytes",
        ({"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 0, "head_dim": 8}, 1),
        size.kv_cache_bytes,
    ),
    ("kvCacheBytes", ({"num_hidden_layers": True, "num_attention_heads": 4, "head_dim": 8}, 1), size.kv_cache_bytes),
    (
        "kvCacheBytes",
        ({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 0, "hidden_size": 32}, 1),
        size.kv_cache_bytes,
    ),
    ("kvCacheBytes", ({"num_hidden_layers": 2, "num_attention_heads": 5, "hidden_size": 32}, 1), size.kv_cache_bytes),
    (
        "kvCacheBytes",
        ({"num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 4, "head_dim": 8}, 1),
        size.kv_cache_bytes,
    ),
    ("kvCacheBytes", ({"num_hidden_layers": 2, "num_attention_heads": 4}, 1), size.kv_cache_bytes),
    ("expectedTokensPerStep", (1.5, 3), formulas.expected_tokens_per_step),
    ("expectedTokensPerStep", (-0.1, 3), formulas.expected_tokens_per_step),
    ("expectedTokensPerStep", (0.5, 0), formulas.expected_tokens_per_step),
    ("expectedTokensPerStep", (0.5, 2.5), formulas.expected_tokens_per_step),
    ("expectedSpeedup", (0.5, 3, -1.0), formulas.expected_speedup),
    ("expectedSpeedup", (0.5, 3, math.inf), formulas.expected_speedup),
    ("bestGamma", (0.5, 0.1, 0), formulas.best_gamma),
    ("hbmTraffic", (0, 64, "standard"), traffic.hbm_traffic),
    ("hbmTraffic", (64, 0, "standard"), traffic.hbm_traffic),
    ("hbmTraffic", (64, 64, "tiled"), traffic.hbm_traffic),
    ("blocksFromSram", (100, 64), traffic.blocks_from_sram),
    ("blocksFromSram", (0, 64), traffic.blocks_from_sram),
    ("attentionFlops", (10, -1), traffic.attention_flops),
    ("estimateRuntime", (1.0, 1.0, "V100"), traffic.estimate_runtime),
    ("estimateRuntime", (1.0, 1.0, "T4", "bf16"), traffic.estimate_runtime),
    ("estimateRuntime", (-1.0, 1.0, "T4"), traffic.estimate_runtime),
    ("estimateRuntime", (1.0, -5, "T4"), traffic.estimate_runtime),
    ("estimateRuntime", (1.0, 1.0, "T4", "fp32", "overlap"), traffic.estimate_runtime),
    # NaN or inf in, NaN or inf out is not an estimate: both refuse (issue 18).
    ("estimateRuntime", (math.nan, 1.0, "T4"), traffic.estimate_runtime),
    ("estimateRuntime", (1.0, math.inf, "T4"), traffic.estimate_runtime),
    ("attentionFlops", (10, 4, "yes"), traffic.attention_flops),
    ("attentionFlops", (10, 4, False, 1), traffic.attention_flops),
]
# Keyword-only cases of hbm_traffic: (JS options, Python keywords).
BAD_TILES = [
    ("standard", {"block_q": 16}),
    ("flash_ideal", {"sram_bytes": 65536}),
    ("flash", {"sram_bytes": 65536, "block_q": 16}),
    ("flash", {"block_q": 0}),
    ("flash", {"block_k": 2.5}),
    ("flash", {"causal": "yes"}),
]


def argument_name(message: str) -> str:
    """The first word of an error message: the argument it names (or 'standard'/'give' for tiles)."""
    return re.split(r"[\s=]", message, maxsplit=1)[0]


@pytest.mark.browser
@pytest.mark.parametrize("name, args, python", BAD_INPUT, ids=[f"{n}{a}" for n, a, _ in BAD_INPUT])
def test_bad_input_is_refused_naming_the_same_argument(js, name, args, python):
    with pytest.raises(ValueError) as python_error:
        python(*args)
    (result,) = js.many(name, [args])
    assert "error" in result, f"JS {name}{args} returned {result['value']} instead of refusing"
    assert argument_name(result["error"]) == argument_name(str(python_error.value)), result["error"]


@pytest.mark.browser
def test_a_gpu_with_a_zero_peak_is_refused(js):
    """A GPUSpec with bandwidth 0 would divide by zero; both languages refuse it, naming gpu."""
    broken = dataclasses.replace(traffic.GPU_PRESETS["T4"], bandwidth_gbs=0.0)
    with pytest.raises(ValueError, match="^gpu "):
        traffic.estimate_runtime(1.0, 1.0, broken)
    (result,) = js.many("estimateRuntime", [(1.0, 1.0, dataclasses.asdict(broken))])
    assert argument_name(result.get("error", "")) == "gpu", result


@pytest.mark.browser
def test_a_causal_count_past_the_tile_limit_is_refused_not_looped(js):
    """10^9 query tiles would loop for minutes (issue 18): both languages refuse, naming block_q."""
    with pytest.raises(ValueError) as python_error:
        traffic.hbm_traffic(10**9, 64, "flash", block_q=1, causal=True)
    (result,) = js.many("hbmTraffic", [(10**9, 64, "flash", {"block_q": 1, "causal": True})])
    assert "error" in result, f"JS returned {result.get('value')}"
    assert argument_name(result["error"]) == argument_name(str(python_error.value)) == "block_q"
    # Without the mask the count is a closed form, with no loop and so no limit.
    assert traffic.hbm_traffic(10**9, 64, "flash", block_q=1)["reads"] == 10**9 * 64 * (1 + 2 * 10**9)


@pytest.mark.browser
@pytest.mark.parametrize("method, options", BAD_TILES)
def test_bad_tiles_are_refused_like_python(js, method, options):
    with pytest.raises(ValueError) as python_error:
        traffic.hbm_traffic(128, 64, method, **options)
    (result,) = js.many("hbmTraffic", [(128, 64, method, options)])
    assert "error" in result, f"JS accepted {options}"
    assert argument_name(result["error"]) == argument_name(str(python_error.value))


# ---------------------------------------------------------------- on the built site


def read_output(page, root: str, key: str) -> str:
    locator = page.locator(f"{root} output[data-key='{key}']")
    return locator.inner_text()


def open_calculator(page, site_url, path: str, kind: str) -> str:
    """Open a built page and wait for its calculator; collect errors thrown by calculators.js."""
    page.calculator_errors = []
    page.on(
        "pageerror",
        lambda e: "calculators.js" in (e.stack or "") and page.calculator_errors.append(str(e)),
    )
    page.on(
        "console",
        lambda m: (
            m.type == "error"
            and "calculators.js" in m.location.get("url", "")
            and page.calculator_errors.append(m.text)
        ),
    )
    response = page.goto(site_url + path, wait_until="load", timeout=60000)
    if response is None or response.status == 404:
        pytest.skip(f"{path} is not built yet")
    root = f".calc[data-calc='{kind}']"
    page.wait_for_selector(f"{root}[data-ready] output[data-key]", timeout=30000)
    return root


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["", "zh-TW/"])
def test_kv_cache_calculator_on_the_page_shows_pythons_number(site, lang):
    site.run(check_kv_cache_calculator_on_the_page_shows_pythons_number, lang)


def check_kv_cache_calculator_on_the_page_shows_pythons_number(page, site_url, lang):
    root = open_calculator(page, site_url, lang + "kvcache/cache-size/", "kv-cache")
    page.select_option(f"{root} select[name='preset']", "Qwen2.5-1.5B")
    page.fill(f"{root} input[name='tokens']", "32768")
    page.fill(f"{root} input[name='batch']", "8")
    page.select_option(f"{root} select[name='dtype']", "fp32")
    shown = read_output(page, root, "bytes")
    expected = size.kv_cache_bytes("Qwen2.5-1.5B", 32768, batch=8, dtype="fp32")
    assert int(shown.split()[0].replace(",", "")) == expected, shown
    # Hand-edited heads switch the preset to "custom" and still agree with Python.
    page.fill(f"{root} input[name='kv_heads']", "12")
    config = {"num_hidden_layers": 28, "num_key_value_heads": 12, "head_dim": 128}
    assert int(read_output(page, root, "bytes").split()[0].replace(",", "")) == size.kv_cache_bytes(
        config, 32768, 8, "fp32"
    )
    assert page.input_value(f"{root} select[name='preset']") == "custom"
    # Bad input: an error naming the argument, no number.
    page.fill(f"{root} input[name='tokens']", "-3")
    assert "tokens" in page.inner_text(f"{root} .calc__error")
    assert read_output(page, root, "bytes") == "—"
    labels = page.inner_text(f"{root} form")
    assert ("詞元" in labels) == (lang == "zh-TW/"), labels
    assert page.calculator_errors == []


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["", "zh-TW/"])
def test_speedup_calculator_on_the_page_shows_pythons_number(site, lang):
    site.run(check_speedup_calculator_on_the_page_shows_pythons_number, lang)


def check_speedup_calculator_on_the_page_shows_pythons_number(page, site_url, lang):
    root = open_calculator(page, site_url, lang + "speculative/speedup/", "speculative-speedup")
    page.fill(f"{root} input[name='alpha']", "0.7")
    page.fill(f"{root} input[name='gamma']", "5")
    page.fill(f"{root} input[name='c']", "0.1")
    assert read_output(page, root, "speedup") == f"{formulas.expected_speedup(0.7, 5, 0.1):.3f}×"
    assert read_output(page, root, "tokens_per_step") == f"{formulas.expected_tokens_per_step(0.7, 5):.3f}"
    assert read_output(page, root, "best_gamma").split()[0] == str(formulas.best_gamma(0.7, 0.1))
    page.fill(f"{root} input[name='alpha']", "1")  # the limit, not a division by zero
    assert read_output(page, root, "tokens_per_step") == f"{formulas.expected_tokens_per_step(1.0, 5):.3f}"
    # A measured preset sets alpha, gamma and c to the sweep's numbers; the prediction follows them.
    preset = calculator_presets.speculative_presets()["presets"]["long-inferlab"]
    page.select_option(f"{root} select[name='preset']", "long-inferlab")
    assert float(page.input_value(f"{root} input[name='alpha']")) == preset["alpha"]
    assert float(page.input_value(f"{root} input[name='c']")) == preset["c"]
    expected = formulas.expected_speedup(preset["alpha"], preset["gamma"], preset["c"])
    assert read_output(page, root, "speedup") == f"{expected:.3f}×"
    assert read_output(page, root, "measured").startswith(f"{preset['measured_speedup']:.3f}×")
    page.fill(f"{root} input[name='c']", "0.2")  # edited by hand: no longer the measured preset
    assert page.input_value(f"{root} select[name='preset']") == "custom"
    assert read_output(page, root, "measured") == "—"
    assert page.calculator_errors == []


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["", "zh-TW/"])
def test_hbm_calculator_on_the_page_shows_pythons_numbers(site, lang):
    site.run(check_hbm_calculator_on_the_page_shows_pythons_numbers, lang)


def check_hbm_calculator_on_the_page_shows_pythons_numbers(page, site_url, lang):
    root = open_calculator(page, site_url, lang + "flash/hbm-traffic/", "hbm-traffic")
    page.fill(f"{root} input[name='N']", "6144")
    page.fill(f"{root} input[name='d']", "64")
    page.select_option(f"{root} select[name='gpu']", "A100")
    page.check(f"{root} input[name='causal']")
    block_q, block_k = traffic.blocks_from_sram(164 * 1024, 64, 4)
    tiled = traffic.hbm_traffic(6144, 64, "flash", block_q=block_q, block_k=block_k, causal=True)
    standard = traffic.hbm_traffic(6144, 64, "standard")
    for key, expected in (
        ("flash_elements", tiled["total"]),
        ("standard_elements", standard["total"]),
    ):
        shown = page.locator(f"{root} output[data-key='{key}']")
        assert int(shown.get_attribute("data-value")) == expected
        assert shown.inner_text() == f"{expected / 1e6:.2f} M"
    flops = traffic.attention_flops(6144, 64, causal=True)
    estimate = traffic.estimate_runtime(flops, tiled["total"] * 4, "A100", "fp32")
    shown = page.locator(f"{root} output[data-key='flash_runtime']")
    assert float(shown.get_attribute("data-value")) == pytest.approx(estimate["runtime_s"], rel=REL)
    number, unit = shown.inner_text().split()
    assert unit == "µs" and float(number) == pytest.approx(estimate["runtime_s"] * 1e6, rel=1e-3)  # 4 digits shown
    bound = page.locator(f"{root} output[data-key='flash_bound']").get_attribute("data-value")
    assert bound == estimate["bound"]
    # The NTU lab's convention: every input and output once, N(5d + 4), and runtime = compute + memory.
    page.select_option(f"{root} select[name='gpu']", "T4")
    page.select_option(f"{root} select[name='precision']", "fp16")
    page.select_option(f"{root} select[name='runtime_model']", "additive")
    ideal = traffic.hbm_traffic(6144, 64, "flash_ideal")
    shown = page.locator(f"{root} output[data-key='flash_ideal_elements']")
    assert int(shown.get_attribute("data-value")) == ideal["total"] == 6144 * (5 * 64 + 4)
    additive = traffic.estimate_runtime(flops, ideal["total"] * 2, "T4", "fp16", runtime_model="additive")
    shown = page.locator(f"{root} output[data-key='flash_ideal_runtime']")
    assert float(shown.get_attribute("data-value")) == pytest.approx(additive["runtime_s"], rel=REL)
    assert additive["runtime_s"] == pytest.approx(additive["compute_s"] + additive["memory_s"], rel=1e-12)
    assert page.calculator_errors == []


# ---------------------------------------------------------------- phone-width screenshots

# One page per topic; the calculator pages where there is one.
TOPIC_PAGES = {
    "decoding": "decoding/sampling/",
    "kvcache": "kvcache/cache-size/",
    "speculative": "speculative/speedup/",
    "flash": "flash/hbm-traffic/",
    "paged": "paged/prefix-caching/",
}


def built_page_for(topic: str, preferred: str) -> str | None:
    """The preferred page if built, else the topic's first built page, else None."""
    if (SITE / preferred / "index.html").is_file():
        return preferred
    pages = sorted(p.parent.relative_to(SITE).as_posix() + "/" for p in (SITE / topic).glob("*/index.html"))
    return pages[0] if pages else None


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh-TW"])
@pytest.mark.parametrize("topic", list(TOPIC_PAGES))
def test_phone_screenshot_per_topic(site, topic, lang):
    """Save a 390x844 screenshot (an iPhone 12-14 viewport); calculators must fit the width."""
    path = built_page_for(topic, TOPIC_PAGES[topic])
    if path is None:
        pytest.skip(f"no page of {topic} is built yet")
    site.run(
        save_phone_screenshot,
        path,
        topic,
        lang,
        viewport={"width": 390, "height": 844},
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
    )


def save_phone_screenshot(phone, site_url, path, topic, lang):
    prefix = "" if lang == "en" else "zh-TW/"
    phone.goto(site_url + prefix + path, wait_until="load", timeout=60000)
    if phone.locator(".arithmatex").count():  # formulas are part of the picture
        try:
            phone.wait_for_selector("mjx-container", timeout=20000)
        except Exception:  # a slow MathJax must not hide the screenshot; test_browser checks formulas
            pass
    phone.wait_for_timeout(500)  # let the widgets draw and fonts settle
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    phone.screenshot(path=str(SCREENSHOTS / f"{topic}-{lang}.png"))
    for index, widget in enumerate(phone.locator(".calc[data-ready]").all()):
        widget.scroll_into_view_if_needed()
        widget.screenshot(path=str(SCREENSHOTS / f"{topic}-{lang}-calculator{index}.png"))
        box = widget.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390 + 0.5, f"{path}: calculator wider than the phone: {box}"
        # Nothing inside may need sideways scrolling either (a clipped table column, say). Text hidden
        # on purpose for screen readers (clipped to nothing) is not seen, so it is not counted.
        overflow = widget.evaluate(
            """el => Math.max(...[el, ...el.querySelectorAll('*')]
                .filter(e => getComputedStyle(e).clip === 'auto' && getComputedStyle(e).clipPath === 'none')
                .map(e => e.scrollWidth - e.clientWidth))"""
        )
        page_overflow = phone.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert page_overflow <= 1, f"{path}: the page scrolls sideways by {page_overflow}px on a phone"
        assert overflow <= 1, f"{path}: calculator content overflows by {overflow}px"
