"""Concept diagrams: the ideas drawn before they are measured, from code, in both languages.

Each topic has a module here (``inferlab.diagrams.decoding``, ``.kvcache``, ``.speculative``,
``.flash``, ``.paged``) holding ``DIAGRAMS``: a dict from a figure's file name (without ``.png``)
to a function that returns a matplotlib figure with English text. The numbers a diagram shows come
from the package's own functions (the site's example, the real block manager, ...), so a diagram
cannot disagree with the code it explains. :func:`draw` saves it as
``docs/figures/<topic>/<name>.png`` and ``<name>.zh-TW.png`` through
:func:`inferlab.bench.figures.save_figure`, which takes the zh-TW text from
``inferlab.bench.labels.FIGURE_TEXT``.

A module may also hold ``WORKED``: a dict from a result name (``speculative_worked_round``) to a
function returning the values of a worked-by-hand example. :func:`write_worked` writes them to
``docs/results/<name>.json``, so a page shows the example's numbers through ``{{result ...}}`` and
``{{table ...}}`` markers, computed by the package like every other number on the site.

    python -m inferlab.diagrams [topic ...]     (or python tools/draw_diagrams.py [topic ...])
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

TOPICS = ("decoding", "kvcache", "speculative", "flash", "paged")
FIGURES = Path(__file__).resolve().parents[3] / "docs" / "figures"


def topic_module(topic: str):
    """Return a topic's diagram module, or None when the topic has none yet."""
    if topic not in TOPICS:
        raise ValueError(f"topic must be one of {TOPICS}, got {topic!r}")
    try:
        return importlib.import_module(f"inferlab.diagrams.{topic}")
    except ModuleNotFoundError as error:
        if error.name != f"inferlab.diagrams.{topic}":
            raise
        return None  # no diagrams for this topic yet


def diagrams(topic: str) -> dict[str, Callable]:
    """Return a topic's diagrams: {file name: function returning an English matplotlib figure}."""
    module = topic_module(topic)
    return dict(module.DIAGRAMS) if module else {}


def draw(topic: str, name: str, figures: Path = FIGURES) -> list[Path]:
    """Draw one diagram and save it in English and zh-TW; return both paths."""
    import matplotlib.pyplot as plt

    from inferlab.bench.figures import save_figure

    known = diagrams(topic)
    if name not in known:
        raise ValueError(f"no diagram {name!r} in topic {topic!r}; known: {sorted(known)}")
    fig = known[name]()
    try:
        return save_figure(fig, Path(figures) / topic / f"{name}.png", dpi=150)
    finally:
        plt.close(fig)


# ---- worked examples (issue 17): a page's by-hand arithmetic, written as result files ----------


def worked_examples(topic: str) -> dict[str, Callable[[], dict]]:
    """Return a topic's worked examples: {result name: function returning the example's values}."""
    module = topic_module(topic)
    return dict(getattr(module, "WORKED", {}))


def write_worked(topic: str, name: str) -> Path:
    """Compute one worked example and write it to docs/results/<name>.json; return the path."""
    from inferlab.bench import write_result

    known = worked_examples(topic)
    if name not in known:
        raise ValueError(f"no worked example {name!r} in topic {topic!r}; known: {sorted(known)}")
    return write_result(name, known[name](), command=f"python -m inferlab.diagrams {topic}")
