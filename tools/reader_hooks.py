"""MkDocs hooks for readers who copy code into Colab, read on a phone, and search in Chinese.

Code blocks. A page includes code with a fenced block whose body is one pymdown include line,
``--8<-- "TARGET"``. What the reader copies must run on its own, so each such block is labelled:

- a *snippet* (a file under ``snippets/``) runs as it is. When the page shows only a section of
  it, the copy button copies the whole file (Material reads an ancestor's ``data-copy``), and a
  collapsible block under the excerpt shows that whole file. A caption names the file, links to a
  download (the site serves ``snippets/``), to the lab notebook that runs it in Colab, and says
  which Hugging Face models the first run downloads, and how large they are;
- package code (``code/inferlab/...``) and test code are excerpts for reading: they need the rest
  of their module, so they get no copy button, and the caption links to the whole file.

Search. mkdocs-static-i18n writes one index holding both languages, so an English query could
rank a zh-TW page first. After the build the index is split: ``search/search_index.json`` keeps
the English pages, ``zh-TW/search/search_index.json`` the zh-TW ones, and zh-TW pages look for
their index under their own root. jieba, which cuts the zh-TW text into words for the index,
learns the glossary's terms, so "推測解碼" is indexed as one word, and ``javascripts/reader.js``
works around the search worker's cutting of Chinese queries (see there).
"""

from __future__ import annotations

import functools
import html
import json
import logging
import math
import posixpath
import re
import shutil
import subprocess
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger(f"mkdocs.hooks.{Path(__file__).stem}")
# The folders pymdownx.snippets searches, in mkdocs.yml's order: a target resolves to the first hit.
INCLUDE_BASES = ("code", "snippets", ".")
ZH = "zh-TW"
INCLUDE_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n"
    r'(?P=indent)--8<--[ \t]+"(?P<target>[^"]+)"[ \t]*\n'
    r"(?P=indent)(?P=fence)[ \t]*$",
    re.MULTILINE,
)
# The markers this hook leaves in the Markdown and finds again in the HTML.
MARKED_BLOCK = re.compile(
    r"<!-- inferlab-include (?P<kind>snippet|excerpt|whole) (?P<target>\S+) -->\s*"
    r'<div class="(?P<classes>[^"]*\bhighlight\b[^"]*)"'
)
SECTION_MARKER = re.compile(r"^[ \t]*#[ \t]*--8<--[ \t]*\[[ \t]*(?:start|end)[ \t]*:[^\]]*\][ \t]*$")
MODEL_DEFAULT = re.compile(r'os\.environ\.get\(\s*"(INFERLAB_TARGET|INFERLAB_DRAFT)"\s*,\s*"([^"]+)"\s*\)')
# The download a snippet's default hub model costs on its first run: the size of its weights file
# (model.safetensors) on huggingface.co. A snippet defaulting to a model not listed fails the build.
HUB_DOWNLOAD = {
    "Qwen/Qwen2.5-1.5B-Instruct": "3.1 GB",
    "Qwen/Qwen2.5-0.5B-Instruct": "1.0 GB",
}
TEXT = {
    "en": {
        "excerpt": "Excerpt of <code>{file}</code>: the copy button copies the whole file, which runs as it is.",
        "whole": "<code>{file}</code> runs as it is.",
        "download": "Download the file",
        "colab": "Open in Colab",
        "colab_title": "the {lab} lab, where this file is one cell",
        "models": "The first run downloads {models} from Hugging Face; point {variables} at local model "
        "folders to run without the download.",
        "no_models": "It needs no model download.",
        "whole_title": "The whole file, {file} ({lines} lines)",
        "package": "Excerpt of <code>{file}</code>, for reading: it runs inside the inferlab package, not on its own.",
        "test": "Excerpt of <code>{file}</code>, for reading: it runs in the test suite (pytest), not on its own.",
        "source": "Whole file on GitHub",
        "bundled": "Or use the site's own pair (it comes with the package, {size}, and runs on a CPU): "
        '<a href="{url}">how, in Colab</a>.',
        "model": "<code>{model}</code> ({size})",
        "list": ", ",
        "and": " and ",
        "join": " ",
    },
    ZH: {
        "excerpt": "節錄自 <code>{file}</code>：複製按鈕會複製整個檔案，原封不動就能執行。",
        "whole": "<code>{file}</code> 原封不動就能執行。",
        "download": "下載這個檔案",
        "colab": "在 Colab 開啟",
        "colab_title": "{lab}實作筆記本，這個檔案是其中一格",
        "models": "第一次執行時會從 Hugging Face 下載 {models}；把 {variables} 設成本機的模型資料夾就不必下載。",
        "no_models": "不需要下載任何模型。",
        "whole_title": "整個檔案：{file}（{lines} 行）",
        "package": "節錄自 <code>{file}</code>，供閱讀：它在 inferlab 套件之中執行，無法單獨執行。",
        "test": "節錄自 <code>{file}</code>，供閱讀：它在測試套件（pytest）中執行，無法單獨執行。",
        "source": "在 GitHub 上看整個檔案",
        "bundled": '也可以改用本站自己的模型組（隨套件安裝，{size}，CPU 就能跑）：<a href="{url}">在 Colab 上這樣用</a>。',
        "model": "<code>{model}</code>（{size}）",
        "list": "、",
        "and": " 與 ",
        "join": "",
    },
}
LAB_NAMES = {
    "en": {
        "decoding": "decoding",
        "kvcache": "KV cache",
        "speculative": "speculative decoding",
        "flash": "FlashAttention",
        "paged": "paged serving",
        "quickstart": "quick start",
    },
    ZH: {
        "decoding": "解碼",
        "kvcache": "KV 快取",
        "speculative": "推測解碼",
        "flash": "FlashAttention ",  # a space before the Chinese that follows
        "paged": "分頁服務",
        "quickstart": "快速上手",
    },
}
LAB_INCLUDE = re.compile(r'^#\s*--8<--\s*"([^"]+)"\s*$', re.MULTILINE)


def page_language(page) -> str:
    return ZH if page.file.src_uri.endswith(f".{ZH}.md") else "en"


def resolve_include(target: str) -> Path:
    """Return the repository-relative path of an include target, as pymdownx.snippets finds it."""
    path = target.split(":", 1)[0]
    for base in INCLUDE_BASES:
        if (ROOT / base / path).is_file():
            return (Path(base) / path) if base != "." else Path(path)
    raise PluginError(f"include target {target!r} is not a file under {', '.join(INCLUDE_BASES)}")


def whole_file_text(path: Path) -> str:
    """Return a file as a whole-file include shows it: without pymdown's section markers."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not SECTION_MARKER.match(line)).strip("\n") + "\n"


@functools.cache
def lab_of_snippet() -> dict[str, str]:
    """Return {snippet path under snippets/: lab name} from the lab sources' include cells."""
    labs = {}
    for source in sorted((ROOT / "notebooks").glob("*.py")):
        if source.name.endswith(f".{ZH}.py"):
            continue
        for target in LAB_INCLUDE.findall(source.read_text(encoding="utf-8")):
            labs.setdefault(target, source.stem)
    return labs


@functools.cache
def bundled_size() -> str:
    """Return the size of the bundled pair's files (both models), e.g. "37 MB"."""
    folder = ROOT / "code" / "inferlab" / "models" / "bundled"
    total = sum(
        path.stat().st_size for name in ("target", "draft") for path in (folder / name).rglob("*") if path.is_file()
    )
    return f"{total / 1e6:.0f} MB"


def default_models(text: str) -> list[str]:
    """Return the hub ids a snippet loads unless INFERLAB_TARGET / INFERLAB_DRAFT say otherwise."""
    return [model for _, model in MODEL_DEFAULT.findall(text)]


def with_markers(markdown: str, language: str) -> str:
    """Mark every single-include code block, and fold the whole file in under a snippet's excerpts.

    A page that shows several excerpts of one file gets the whole file once, after the last one.
    """
    last_excerpt = {m.group("target").split(":", 1)[0]: m.start() for m in INCLUDE_FENCE.finditer(markdown)}

    def mark(match: re.Match) -> str:
        indent, target = match.group("indent"), match.group("target")
        path = resolve_include(target)
        is_snippet = path.parts[0] == "snippets"
        kind = "snippet" if is_snippet else "excerpt"
        block = f"{indent}<!-- inferlab-include {kind} {target} -->\n\n{match.group(0)}"
        whole_target = target.split(":", 1)[0]
        if not (is_snippet and ":" in target) or last_excerpt[whole_target] != match.start():
            return block
        # The excerpt is what the page discusses; the whole file, folded away, is what runs.
        lines = len(whole_file_text(path).splitlines())
        title = TEXT[language]["whole_title"].format(file=path.as_posix(), lines=lines)
        fence, inner = match.group("fence"), indent + "    "
        return (
            f'{block}\n\n{indent}??? example inferlab-whole "{title}"\n\n'
            f"{inner}<!-- inferlab-include whole {whole_target} -->\n\n"
            f'{inner}{fence}{match.group("info")}\n{inner}--8<-- "{whole_target}"\n{inner}{fence}\n'
        )

    return INCLUDE_FENCE.sub(mark, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri.endswith(".ipynb"):
        return markdown
    return with_markers(markdown, page_language(page))


def relative(target: str, page) -> str:
    """Return the site-relative file URL ``target`` as seen from ``page``."""
    return posixpath.relpath(target, page.url.rstrip("/") or ".")


def colab_url(repo_url: str, lab_file: str) -> str:
    repository = repo_url.rstrip("/").removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{repository}/blob/main/docs/labs/{lab_file}"


def section_lines(path: Path, section: str) -> tuple[int, int] | None:
    """Return the first and last line numbers of a named section's body, or None."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    start = end = None
    for number, line in enumerate(lines, start=1):
        if re.search(rf"--8<--\s*\[\s*start\s*:\s*{re.escape(section)}\s*\]", line):
            start = number + 1
        elif start is not None and re.search(rf"--8<--\s*\[\s*end\s*:\s*{re.escape(section)}\s*\]", line):
            end = number - 1
            break
    return (start, end) if start and end else None


def download_sentences(whole: str, page, language: str) -> list[str]:
    """Return what a snippet's first run downloads (hub models and sizes), and how to avoid it."""
    text = TEXT[language]
    models = list(dict.fromkeys(default_models(whole)))
    if not models:
        return [text["no_models"]]
    unknown = [model for model in models if model not in HUB_DOWNLOAD]
    if unknown:
        raise PluginError(f"add the download size of {unknown} to HUB_DOWNLOAD in {Path(__file__).name}")
    listed = text["list"].join(text["model"].format(model=model, size=HUB_DOWNLOAD[model]) for model in models)
    variables = text["and"].join(f"<code>{name}</code>" for name, _ in MODEL_DEFAULT.findall(whole))
    models_page = relative(f"{ZH}/models/" if language == ZH else "models/", page) + "/#colab"
    return [
        text["models"].format(models=listed, variables=variables),
        text["bundled"].format(size=bundled_size(), url=models_page),
    ]


def snippet_links(path: Path, page, config, language: str) -> list[str]:
    """Return the links under a snippet: download the file, and open the lab that runs it in Colab."""
    text = TEXT[language]
    links = [f'<a href="{relative(path.as_posix(), page)}" download>{text["download"]}</a>']
    lab = lab_of_snippet().get(path.relative_to("snippets").as_posix())
    if lab and config.get("repo_url"):
        lab_file = f"{lab}.{ZH}.ipynb" if language == ZH else f"{lab}.ipynb"
        title = html.escape(text["colab_title"].format(lab=LAB_NAMES[language].get(lab, lab)))
        links.append(f'<a href="{colab_url(config["repo_url"], lab_file)}" title="{title}">{text["colab"]}</a>')
    return links


def snippet_caption(target: str, page, config, language: str) -> tuple[str, str]:
    """Return (caption HTML, text the copy button copies) for a snippet include."""
    text = TEXT[language]
    path = resolve_include(target)
    whole = whole_file_text(path)
    try:
        sentences = [text["excerpt" if ":" in target else "whole"].format(file=path.as_posix())]
        sentences += download_sentences(whole, page, language)
    except PluginError as error:
        raise PluginError(f"{path.as_posix()}: {error}") from error
    links = " · ".join(snippet_links(path, page, config, language))
    caption = f'<p class="inferlab-caption inferlab-caption--snippet">{text["join"].join(sentences)}<br>{links}</p>'
    return caption, whole


def excerpt_caption(target: str, config, language: str) -> str:
    """Return the caption HTML of a package or test excerpt, linking to the whole file."""
    path = resolve_include(target)
    text = TEXT[language]
    caption = text["test" if path.parts[0] == "tests" else "package"].format(file=path.as_posix())
    repo_url = config.get("repo_url")
    if repo_url:
        url = f"{repo_url.rstrip('/')}/blob/main/{path.as_posix()}"
        lines = section_lines(path, target.split(":", 1)[1]) if ":" in target else None
        if lines:
            url += f"#L{lines[0]}-L{lines[1]}"
        caption += f' <a href="{url}">{text["source"]}</a>'
    return f'<p class="inferlab-caption inferlab-caption--excerpt">{caption}</p>'


# ---- figures on a phone ------------------------------------------------------------------------

# A figure is never shown so small that its smallest text falls under this many CSS pixels: on a
# narrow screen it keeps that width and scrolls sideways in its own box (div.inferlab-figure).
LEGIBLE_TEXT_PX = 7.5  # 10-point text on a 6.4-inch figure, in a phone's 358 px column, is 7.8 px
# What a figure without a recorded text size is assumed to hold (matplotlib's small legend text).
ASSUMED_SMALLEST_PT = 8.0
SMALLEST_TEXT_KEY = b"inferlab:smallest-text-px"  # written by inferlab.bench.figures.save_figure
# A figure alone in its paragraph (the usual case), or an <img> of a figure anywhere else.
FIGURE_IMG = re.compile(
    r'(?P<alone><p>\s*)?(?P<img><img\b[^>]*\bsrc="(?P<src>[^"]*figures/[^"]+\.png)"[^>]*?)\s*/?>(?(alone)\s*</p>)'
)


def png_facts(path: Path) -> tuple[int, float]:
    """Return a PNG's width and the size of its smallest text, both in pixels of the image."""
    return read_png_facts(path, path.stat().st_mtime_ns)  # a redrawn figure is read again


@functools.cache
def read_png_facts(path: Path, mtime_ns: int) -> tuple[int, float]:
    """Return png_facts(path) for the file as it was at mtime_ns.

    The text size comes from the PNG's text chunk that save_figure writes; without it, from the
    image's resolution (pHYs) and ASSUMED_SMALLEST_PT.
    """
    data = path.read_bytes()
    position, width, dpi, smallest = 8, 0, 100.0, None
    while position + 8 <= len(data):
        length = int.from_bytes(data[position : position + 4], "big")
        kind, body = data[position + 4 : position + 8], data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width = int.from_bytes(body[:4], "big")
        elif kind == b"pHYs" and body[8:9] == b"\x01":  # pixels per metre
            dpi = int.from_bytes(body[:4], "big") * 0.0254
        elif kind == b"tEXt" and body.partition(b"\0")[0] == SMALLEST_TEXT_KEY:
            smallest = float(body.partition(b"\0")[2])
        position += 12 + length
    return width, smallest if smallest else ASSUMED_SMALLEST_PT * dpi / 72


def figure_file(src: str, page, docs_dir: str) -> Path | None:
    """Return the PNG under docs/ that an <img src> of a page shows (its zh-TW version on zh-TW pages)."""
    served = posixpath.normpath(posixpath.join(posixpath.dirname(page.url.rstrip("/") + "/x"), src))
    path = Path(docs_dir) / served.removeprefix(f"{ZH}/")
    chinese = path.with_name(f"{path.stem}.{ZH}{path.suffix}")
    if page_language(page) == ZH and chinese.is_file():
        return chinese
    return path if path.is_file() else None


def legible_figures(html_text: str, page, config) -> str:
    """Wrap each figure in a box that scrolls sideways, and give it the least width its text needs."""

    def wrap(match: re.Match) -> str:
        path = figure_file(match.group("src"), page, config["docs_dir"])
        if path is None:
            return match.group(0)
        width, smallest = png_facts(path)
        least = min(width, math.ceil(width * LEGIBLE_TEXT_PX / smallest))
        img = f'{match.group("img")} data-smallest-text-px="{smallest:g}" style="min-width: {least}px">'
        box = "div" if match.group("alone") is not None else "span"  # a <div> cannot sit inside a <p>
        return f'<{box} class="inferlab-figure">{img}</{box}>'

    return FIGURE_IMG.sub(wrap, html_text)


def notebook_edit_url(page, config) -> str | None:
    """Return where to edit a lab notebook: its source under notebooks/, not the generated .ipynb."""
    repo_url = config.get("repo_url")
    if not repo_url:
        return None
    source = Path(page.file.src_uri).name.removesuffix(".ipynb") + ".py"  # decoding.zh-TW.ipynb -> .zh-TW.py
    return f"{repo_url.rstrip('/')}/edit/main/notebooks/{source}"


def on_page_content(html_text: str, page, config, files) -> str:
    """Caption each marked code block; point a snippet excerpt's copy button at the whole file."""
    if page.file.src_uri.endswith(".ipynb"):
        page.edit_url = notebook_edit_url(page, config)  # tools/notebooks.py builds the .ipynb
        return html_text
    html_text = legible_figures(html_text, page, config)
    language = page_language(page)

    def label(match: re.Match) -> str:
        kind, target, classes = match.group("kind"), match.group("target"), match.group("classes")
        if kind == "whole":  # the folded whole file under an excerpt: it copies itself
            return f'<div class="{classes} inferlab-snippet"'
        if kind == "excerpt":
            caption = excerpt_caption(target, config, language)
            return f'{caption}<div class="{classes} no-copy inferlab-excerpt"'
        caption, whole = snippet_caption(target, page, config, language)
        return f'{caption}<div class="{classes} inferlab-snippet" data-copy="{html.escape(whole, quote=True)}"'

    html_text = with_colab_button(html_text, page, config, language)
    return MARKED_BLOCK.sub(label, html_text)


# ---- a guide's "Open in Colab" button ---------------------------------------------------------

COLAB_BUTTON = {
    "en": ("Open in Colab", "Run this page's code in Colab: the {lab} lab runs its snippets."),
    ZH: ("在 Colab 開啟", "在 Colab 執行本頁的程式碼：{lab}實作筆記本會執行本頁的程式片段。"),
}
PAGE_TITLE = re.compile(r"(<h1\b[^>]*>.*?</h1>)", re.DOTALL)


def page_lab(html_text: str) -> str | None:
    """Return the lab that runs most of the snippets a page includes (the first such, on a tie)."""
    labs = [
        lab_of_snippet().get(resolve_include(target.split(":", 1)[0]).relative_to("snippets").as_posix())
        for kind, target in re.findall(r"<!-- inferlab-include (snippet|whole) (\S+) -->", html_text)
        if kind == "snippet"
    ]
    labs = [lab for lab in labs if lab]
    return max(dict.fromkeys(labs), key=labs.count) if labs else None


def with_colab_button(html_text: str, page, config, language: str) -> str:
    """Put an "Open in Colab" button under the title of a guide whose snippets a lab runs."""
    lab = page_lab(html_text)
    if lab is None or not config.get("repo_url"):
        return html_text
    lab_file = f"{lab}.{ZH}.ipynb" if language == ZH else f"{lab}.ipynb"
    label, note = COLAB_BUTTON[language]
    note = note.format(lab=LAB_NAMES[language].get(lab, lab))
    button = (
        f'<p class="inferlab-colab"><a class="md-button inferlab-colab__button" '
        f'href="{colab_url(config["repo_url"], lab_file)}">{label}</a> <span>{html.escape(note)}</span></p>'
    )
    if PAGE_TITLE.search(html_text):
        return PAGE_TITLE.sub(lambda m: m.group(1) + button, html_text, count=1)
    return button + html_text


def on_post_page(output: str, page, config) -> str:
    """Let a zh-TW page load the zh-TW search index: its search base is the zh-TW root."""
    if page_language(page) != ZH:
        return output
    # Material resolves the base against the page's URL; ".." style paths keep the trailing slash
    # that new URL("search/search_index.json", base) needs.
    zh_root = posixpath.relpath(ZH, page.url.rstrip("/") or ".")
    return re.sub(
        r'(<script id="__config" type="application/json">\{.*?"base": ")([^"]*)(")',
        lambda m: f"{m.group(1)}{zh_root}{m.group(3)}",
        output,
        count=1,
        flags=re.DOTALL,
    )


# ---- search, one index per language ---------------------------------------------------------

HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def glossary_words(glossary: Path) -> list[str]:
    """Return the runs of Chinese characters in the zh-TW column of the glossary (2+ characters)."""
    words, in_body = [], False
    for line in glossary.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            in_body = False
        elif set(cells[0]) <= set("-: "):
            in_body = True  # the row under the header: term rows follow
        elif in_body and len(cells) >= 2:
            words += [run for run in HAN_RUN.findall(cells[1]) if len(run) >= 2]
    return words


def notebook_math_as_arithmatex() -> None:
    """Render the math of notebook Markdown as arithmatex does on every other page.

    Notebooks write math as Jupyter and Colab read it, ``$...$`` and ``$$...$$``. nbconvert (which
    mkdocs-jupyter uses) keeps those delimiters in its HTML, and the site's MathJax typesets only
    arithmatex's elements, so the formulas would show as raw TeX. nbconvert's math tokens are
    written as arithmatex's elements instead (``\\(...\\)`` in ``span.arithmatex``, ``\\[...\\]`` in
    ``div.arithmatex``). mkdocs-jupyter caches rendered notebooks by their bytes: after changing
    this, delete .cache/mkdocs-jupyter.
    """
    from nbconvert.filters.markdown_mistune import IPythonRenderer

    def inline_math(self, body: str) -> str:
        return f'<span class="arithmatex">\\({self.escape_html(body)}\\)</span>'

    def block_math(self, body: str) -> str:
        return f'<div class="arithmatex">\\[{self.escape_html(body)}\\]</div>'

    def latex_environment(self, name: str, body: str) -> str:
        name, body = self.escape_html(name), self.escape_html(body)
        return f'<div class="arithmatex">\\[\\begin{{{name}}}{body}\\end{{{name}}}\\]</div>'

    IPythonRenderer.inline_math = inline_math
    IPythonRenderer.block_math = block_math
    IPythonRenderer.latex_environment = latex_environment


GIT_DATES_PLUGIN = "git-revision-date-localized"


def full_git_history(folder: Path) -> str | None:
    """Return None when folder is in a git checkout with its whole history, else why it is not."""
    try:
        result = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--is-shallow-repository"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"git cannot run ({error})"
    if result.returncode != 0:
        return "not a git checkout"
    if result.stdout.strip() != "false":
        return "a shallow clone (its history stops at the last commit)"
    return None


def without_dates_unless_full_history(config) -> None:
    """Turn the "last updated" dates off where git cannot give them; the build stays warning-free.

    A page's date is its last commit's. A shallow clone (CI's default checkout) knows one commit,
    so every page would show that commit's date, and the plugin warns (which fails --strict); a
    folder that is no checkout has no dates at all. Either way the pages are built without dates.
    """
    plugin = (config.get("plugins") or {}).get(GIT_DATES_PLUGIN)
    if plugin is None or not plugin.config.get("enabled", True):
        return
    reason = full_git_history(Path(config["docs_dir"]))
    if reason:
        plugin.config["enabled"] = False
        log.info(f"{GIT_DATES_PLUGIN}: no 'last updated' dates, because this is {reason}")


@event_priority(100)  # before the dates plugin reads its configuration
def on_config(config):
    """Render notebook math like the pages' math; teach jieba the glossary's terms for the index."""
    notebook_math_as_arithmatex()
    without_dates_unless_full_history(config)
    try:
        import jieba
    except ImportError:  # without jieba, Material's search does not cut Chinese text at all
        return config
    for word in glossary_words(Path(config["docs_dir"]) / f"glossary.{ZH}.md"):
        jieba.add_word(word, freq=2_000_000)  # high enough to win over the words inside it
    return config


# The home page and the course maps name every topic in their headings, so a query for a term would
# land on them before the guide that teaches it; they still show up, lower down.
MAP_PAGE_BOOST = 0.3


# {URL of the first page of a nav section: the section's title}, from every language's nav. A
# section's first guide introduces its subject, so its search entry carries the section's name
# ("Speculative decoding › Draft, verify, accept"), which is also how a reader finds it in the nav.
SECTION_OPENERS: dict[str, str] = {}


@event_priority(-150)  # after mkdocs-static-i18n (-100) has translated the section titles
def on_nav(nav, config, files):
    for item in nav.items:
        if item.is_section:
            first = next((child for child in item.children if child.is_page), None)
            if first is not None and first.title != item.title:
                SECTION_OPENERS[first.url] = item.title
    return nav


def segmented(text: str) -> str:
    """Return text with its Chinese cut into words the way Material's search plugin indexes it."""
    try:
        import jieba
    except ImportError:
        return text
    return HAN_RUN.sub(lambda m: "\u200b" + "\u200b".join(jieba.cut(m.group(0))) + "\u200b", text).strip("\u200b")


def is_map_page(location: str) -> bool:
    """Return True for the home page and the course maps (a location relative to its language)."""
    page = location.split("#", 1)[0]
    return page == "" or page.startswith("courses/")


def split_search_index(site_dir: Path) -> None:
    """Split the two-language index into one per language, each relative to its language's root."""
    path = site_dir / "search" / "search_index.json"
    if not path.is_file():
        return
    index = json.loads(path.read_text(encoding="utf-8"))
    prefix, titled = f"{ZH}/", set()
    for doc in index["docs"]:
        # mkdocs-jupyter's headings end in a permalink "¶", which would show in the results.
        doc["title"] = doc["title"].replace("¶", "").strip()
        section = SECTION_OPENERS.get(doc["location"])
        if section and doc["location"] not in titled:  # the page's own entry, the first of its entries
            titled.add(doc["location"])
            doc["title"] = f"{segmented(section)} › {doc['title']}"
        if is_map_page(doc["location"].removeprefix(f"{ZH}/")):
            doc["boost"] = MAP_PAGE_BOOST
    zh_docs = [doc for doc in index["docs"] if doc["location"].startswith(prefix)]
    if not zh_docs:
        return  # already split, or an English-only build
    en_docs = [doc for doc in index["docs"] if not doc["location"].startswith(prefix)]
    for doc in zh_docs:
        doc["location"] = doc["location"][len(prefix) :]  # relative to the zh-TW root
    write_json(path, {"config": index["config"], "docs": en_docs})
    write_json(site_dir / ZH / "search" / "search_index.json", {"config": index["config"], "docs": zh_docs})


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")


@event_priority(-200)  # after mkdocs-static-i18n (-100) has written the index of both languages
def on_post_build(config):
    """Serve the snippet files (the captions link to them) and split the search index."""
    site_dir = Path(config["site_dir"])
    target = site_dir / "snippets"
    for snippet in sorted((ROOT / "snippets").rglob("*.py")):
        destination = target / snippet.relative_to(ROOT / "snippets")
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(snippet, destination)
    split_search_index(site_dir)
