"""MkDocs hooks: put measured numbers on pages from result files, never by hand.

A page writes, in either language:

- ``{{result NAME KEY FORMAT}}``: one value from ``docs/results/NAME.json``; KEY is a dotted path
  into its ``values`` (list indices allowed: ``rows.0.tokens_per_s``); FORMAT is an optional
  Python format spec such as ``.2f``, ``.1%`` or ``,``.
- ``{{table NAME KEY}}``: a list of records under KEY as a Markdown table (columns from the first
  record).
- ``{{provenance NAME}}``: a collapsible box saying how the file was made: command, device,
  library versions and date, in the page's language.

A missing file or key is an error, so ``mkdocs build --strict`` fails rather than show a stale or
invented number.
"""

from __future__ import annotations

import functools
import json
import math
import posixpath
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

from inferlab.bench import labels

sys.path.insert(0, str(Path(__file__).resolve().parent))
import glossary_links  # noqa: E402  (a sibling module: mkdocs loads this file by path)
import sitecheck  # noqa: E402

from inferlab.bench import json_problem  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SNIPPET_BASES = [ROOT / "code", ROOT / "snippets", ROOT]  # pymdownx.snippets' base_path in mkdocs.yml

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"
MARKER = re.compile(r"\{\{(result|table|provenance)\s+([^}]*?)\s*\}\}")
LABELS = {
    "en": {
        "title": "How this was measured",
        "command": "Command",
        "device": "Device",
        "versions": "Versions",
        "date": "Date",
        "file": "Result file",
    },
    "zh-TW": {
        "title": "測量方式",
        "command": "指令",
        "device": "裝置",
        "versions": "版本",
        "date": "日期",
        "file": "結果檔",
    },
}


def load_record(name: str) -> dict:
    """Return a result file's record, or raise a PluginError naming the file and what is wrong with it."""
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise PluginError(f"result file docs/results/{name}.json does not exist")
    where = f"result file docs/results/{name}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:  # truncated, malformed or not UTF-8
        raise PluginError(f"{where} is not valid UTF-8 JSON: {error}") from None
    problem = record_problem(record)
    if problem:
        raise PluginError(f"{where}: {problem}")
    return record


def record_problem(record) -> str | None:
    """Return what keeps a loaded record from being shown (a missing key, a NaN), or None."""
    if not isinstance(record, dict):
        return f"must hold a JSON object, got {type(record).__name__}"
    missing = [key for key in ("name", "provenance", "values") if key not in record]
    if missing:
        return f"has no {', '.join(missing)} (write it with inferlab.bench.write_result)"
    provenance = record["provenance"]
    fields = ("command", "device", "versions", "date")
    if not isinstance(provenance, dict) or not all(key in provenance for key in fields):
        return f"provenance must give {', '.join(fields)}, got {provenance!r:.80}"
    if not isinstance(provenance["versions"], dict):
        return f"provenance versions must be an object of library versions, got {provenance['versions']!r:.80}"
    return json_problem(record["values"])  # a NaN would print "nan" on a page


def lookup(record: dict, key: str):
    """Follow a dotted KEY (with list indices) into a record's values."""
    value = record["values"]
    for part in key.split("."):
        try:
            value = value[int(part)] if isinstance(value, list) else value[part]
        except (KeyError, IndexError, ValueError, TypeError) as error:
            raise PluginError(
                f"result {record['name']!r} (docs/results/{record['name']}.json) has no value at {key!r} "
                f"(failed at {part!r})"
            ) from error
    return value


def format_value(value, spec: str) -> str:
    """Return a value as page text; raise ValueError for NaN/inf (never print "nan") or a bad FORMAT."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"the value is {value}, not a number a page can show")
    if isinstance(value, float) and not spec:
        spec = ".4g"
    return format(value, spec)


def render_table(record: dict, key: str, language: str = "en") -> str:
    """Return a list of records as a Markdown table, headers and row labels in the page's language.

    Column keys (``naive_s``) become words with units, and English row labels are translated, from
    ``inferlab.bench.labels``; data columns (tokens, model names) are shown as they are.
    """
    rows = lookup(record, key)
    if not rows or not isinstance(rows, list) or not isinstance(rows[0], dict):
        raise PluginError(f"result {record['name']!r} value {key!r} is not a non-empty list of records")
    columns = list(rows[0])

    def cell(row: dict, column: str) -> str:
        value = row.get(column, "")
        if value is None:  # not measured (a reference that failed or was skipped)
            return "—"
        if isinstance(value, bool):
            value = "yes" if value else "no"
        if isinstance(value, str) and column not in labels.DATA_COLUMNS:
            return labels.cell_label(value, language)
        return format_value(value, "")

    headers = [labels.column_label(column, language) for column in columns]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(cell(row, c) for c in columns) + " |")
    return "\n".join(lines)


def render_provenance(record: dict, name: str, language: str) -> str:
    labels = LABELS[language]
    prov = record["provenance"]
    versions = ", ".join(f"{k} {v}" for k, v in prov["versions"].items())
    body = [
        f"{labels['file']}: `docs/results/{name}.json`",
        f"{labels['command']}: `{prov['command']}`",
        f"{labels['device']}: {prov['device']}",
        f"{labels['versions']}: {versions}",
        f"{labels['date']}: {prov['date']}",
    ]
    return f'??? info "{labels["title"]}"\n' + "\n".join(f"    - {line}" for line in body) + "\n"


def page_language(page) -> str:
    return "zh-TW" if page.file.src_uri.endswith(".zh-TW.md") else "en"


def on_page_markdown(markdown: str, page, config, files) -> str:
    language = page_language(page)

    def replace(match: re.Match) -> str:
        try:
            return render_marker(match)
        except ValueError as error:  # format() refused the FORMAT, or a value is NaN/inf
            raise PluginError(
                f"{page.file.src_uri}: {match.group(0)} (docs/results/{match.group(2).split()[0]}.json): {error}"
            ) from None

    def render_marker(match: re.Match) -> str:
        kind, args = match.group(1), match.group(2).split()
        if not args:
            raise PluginError(f"{page.file.src_uri}: empty {{{{{kind}}}}} marker")
        record = load_record(args[0])
        if kind == "result":
            if len(args) not in (2, 3):
                raise PluginError(f"{page.file.src_uri}: use {{{{result NAME KEY [FORMAT]}}}}, got {match.group(0)}")
            return format_value(lookup(record, args[1]), args[2] if len(args) == 3 else "")
        if kind == "table":
            return render_table(record, args[1], language)
        return render_provenance(record, args[0], language)

    problems = [problem for target in sitecheck.SNIPPET.findall(markdown) if (problem := include_problem(target))]
    if problems:  # pymdown would include a missing end marker's whole file without a word
        raise PluginError(f"{page.file.src_uri}: " + "; ".join(problems))
    return MARKER.sub(replace, markdown)


def include_problem(target: str) -> str | None:
    """Return what is wrong with one snippet include of a page (its file, or its section's markers)."""
    return sitecheck.include_problem(target, SNIPPET_BASES)


@functools.cache
def glossary_for(docs_dir: str, language: str) -> list:
    suffix = ".zh-TW.md" if language == "zh-TW" else ".md"
    return glossary_links.glossary_terms(Path(docs_dir) / ("glossary" + suffix), language)


def relative_url(target: str, page) -> str:
    """Return the URL of the site-relative directory URL ``target`` as seen from ``page``."""
    return posixpath.relpath(target or ".", page.url or ".") + "/"


NOTEBOOK_HEADING = re.compile(r'<h([1-6]) id="[^"]*">(.*?)</h\1>', re.DOTALL)


def toc_ids(items) -> list[str]:
    """Return the anchor of every table-of-contents entry, in reading order."""
    return [anchor for item in items for anchor in (item.id, *toc_ids(item.children))]


def match_notebook_heading_ids(html: str, toc) -> str:
    """Return a notebook's HTML with each heading's id (and its ¶ link) set to its TOC entry's anchor.

    mkdocs-jupyter builds a notebook's table of contents with Python-Markdown's ids but its headings
    with an ASCII-only slug: every Chinese heading got id="" while the TOC and the skip link pointed
    at "#_1", "#_2", ..., and two "MAP" headings shared one id. Both list the same headings in the
    same order, so the TOC's anchors are given to the headings one by one. A mismatch in count (a
    heading one side does not see) leaves the HTML as it was rather than guessing.
    """
    anchors = toc_ids(toc)
    if len(anchors) != len(NOTEBOOK_HEADING.findall(html)):
        return html
    queue = iter(anchors)

    def give_anchor(match: re.Match) -> str:
        anchor = next(queue)
        inner = re.sub(r'(<a class="anchor-link" href=")#[^"]*"', rf'\1#{anchor}"', match.group(2))
        return f'<h{match.group(1)} id="{anchor}">{inner}</h{match.group(1)}>'

    return NOTEBOOK_HEADING.sub(give_anchor, html)


def on_page_content(html: str, page, config, files) -> str:
    """Anchor the glossary's rows, and link each other page's first use of every term to them."""
    if page.file.src_uri.endswith(".ipynb"):
        # Notebooks get no glossary links (their prose is short and the Markdown cells are rendered
        # apart), but their headings need the anchors their table of contents links to.
        return match_notebook_heading_ids(html, page.toc)
    language = page_language(page)
    if page.file.src_uri.startswith("glossary."):
        return glossary_links.anchor_rows(html)
    glossary_url = relative_url(("zh-TW/" if language == "zh-TW" else "") + "glossary", page)
    return glossary_links.link_terms(html, glossary_for(config["docs_dir"], language), glossary_url)


@event_priority(-200)  # after mkdocs-static-i18n (-100) has rebuilt each language's file list
def on_files(files, config):
    """Let mkdocs-jupyter render notebooks in every language, the default one included.

    mkdocs-static-i18n replaces the file objects after mkdocs-jupyter has wrapped the notebooks
    (mkdocs-static-i18n issue 198): in the default language's build a notebook then stops being a
    documentation page and is written out as raw JSON. Wrapping such files again here, last, fixes
    it; files the other builds already treat as pages are left alone.
    """
    jupyter = config.plugins.get("mkdocs-jupyter")
    if jupyter is None:
        return files
    from mkdocs_jupyter.plugin import NotebookFile

    for file in list(files):
        if not file.is_documentation_page() and jupyter.should_include(file):
            page = NotebookFile(file, **config)
            # Keep the language-specific destination mkdocs-static-i18n chose (e.g. zh-TW/labs/x/).
            page.url, page.abs_dest_path = file.url, file.abs_dest_path
            files.remove(file)
            files.append(page)
    return files


def on_post_page(output: str, page, config) -> str:
    """Point every page's language links at the same page in the other language, relatively.

    mkdocs-static-i18n finds no alternates for notebooks (they are not Markdown pages when it
    looks) and links the home pages absolutely ("/"), which breaks under a sub-path such as
    GitHub Pages. Every page has a twin (a test checks), so the twin's URL is known: the same
    path with or without the "zh-TW/" prefix.
    """
    base_url = page.url.removeprefix("zh-TW/")
    targets = {"en": base_url, "zh-TW": "zh-TW/" + base_url}

    # Material reads <link rel="alternate" hreflang> as the root of each language and fetches
    # "<root>/sitemap.xml" from it; per-page targets there would 404 on every page. The language
    # menu below already leads to the twin page, so the head links are dropped.
    output = re.sub(r'\s*<link rel="alternate" href="[^"]*" hreflang="[^"]*">', "", output)
    return re.sub(
        r'href="[^"]*"(\s+hreflang="(en|zh-TW)")',
        lambda m: f'href="{relative_url(targets[m.group(2)], page)}"{m.group(1)}',
        output,
    )


@event_priority(100)  # before mkdocs-jupyter's own on_post_build evicts "unused" cache entries
def on_post_build(config):
    """Keep mkdocs-jupyter's rendered-notebook cache for both languages.

    mkdocs-static-i18n builds one language after the other, and at the end of each build
    mkdocs-jupyter deletes the cache entries that build did not use: the other language's. Marking
    every entry as used keeps warm builds from converting all notebooks again.
    """
    jupyter = config.plugins.get("mkdocs-jupyter")
    if jupyter is not None and jupyter.config["cache"]:
        jupyter._used_cache_paths.update(Path(jupyter.config["cache_dir"]).glob("*.json"))
