"""Concept diagrams: the ideas drawn before they are measured, from code, in both languages.

Each topic has a module here (``inferlab.diagrams.decoding``, ``.kvcache``, ``.speculative``,
``.flash``, ``.paged``) holding ``DIAGRAMS``: a dict from a figure's file name (without ``.png``)
to a function that returns a matplotlib figure with English text. The numbers a diagram shows come
from the package's own functions (the site's example, the real block manager, ...), so a diagram
cannot disagree with the code it explains. :func:`draw` saves it as
``docs/figures/<topic>/<name>.png`` and ``<name>.zh-TW.png`` through
:func:`inferlab.bench.figures.save_figure`, which takes the zh-TW text from
``inferlab.bench.labels.FIGURE_TEXT``.

    python tools/draw_diagrams.py [topic ...]
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

TOPICS = ("decoding", "kvcache", "speculative", "flash", "paged")
FIGURES = Path(__file__).resolve().parents[3] / "docs" / "figures"


def diagrams(topic: str) -> dict[str, Callable]:
    """Return a topic's diagrams: {file name: function returning an English matplotlib figure}."""
    if topic not in TOPICS:
        raise ValueError(f"topic must be one of {TOPICS}, got {topic!r}")
    try:
        module = importlib.import_module(f"inferlab.diagrams.{topic}")
    except ModuleNotFoundError as error:
        if error.name != f"inferlab.diagrams.{topic}":
            raise
        return {}  # no diagrams for this topic yet
    return dict(module.DIAGRAMS)


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
