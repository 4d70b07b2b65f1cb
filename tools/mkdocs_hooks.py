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

import json
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

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
    """Return a result file's record, or raise a PluginError naming the missing file."""
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise PluginError(f"result file docs/results/{name}.json does not exist")
    return json.loads(path.read_text(encoding="utf-8"))


def lookup(record: dict, key: str):
    """Follow a dotted KEY (with list indices) into a record's values."""
    value = record["values"]
    for part in key.split("."):
        try:
            value = value[int(part)] if isinstance(value, list) else value[part]
        except (KeyError, IndexError, ValueError, TypeError) as error:
            raise PluginError(f"result {record['name']!r} has no value at {key!r} (failed at {part!r})") from error
    return value


def format_value(value, spec: str) -> str:
    if isinstance(value, float) and not spec:
        spec = ".4g"
    return format(value, spec)


def render_table(record: dict, key: str) -> str:
    rows = lookup(record, key)
    if not rows or not isinstance(rows, list) or not isinstance(rows[0], dict):
        raise PluginError(f"result {record['name']!r} value {key!r} is not a non-empty list of records")
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(format_value(row.get(c, ""), "") for c in columns) + " |")
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
        kind, args = match.group(1), match.group(2).split()
        if not args:
            raise PluginError(f"{page.file.src_uri}: empty {{{{{kind}}}}} marker")
        record = load_record(args[0])
        if kind == "result":
            if len(args) not in (2, 3):
                raise PluginError(f"{page.file.src_uri}: use {{{{result NAME KEY [FORMAT]}}}}, got {match.group(0)}")
            return format_value(lookup(record, args[1]), args[2] if len(args) == 3 else "")
        if kind == "table":
            return render_table(record, args[1])
        return render_provenance(record, args[0], language)

    return MARKER.sub(replace, markdown)
