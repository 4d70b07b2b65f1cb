"""Save a figure once per language of the site: ``name.png`` in English, ``name.zh-TW.png`` in Chinese.

A bench draws its figure once, with English text, and calls :func:`save_figure`. The English
figure is saved as drawn; then every piece of text in it (titles, axis labels, legend entries,
annotations, tick labels that are words) is replaced by its entry in
``inferlab.bench.labels.FIGURE_TEXT``, set in a font with Chinese glyphs, and the figure is saved
again beside the first. Both come from the same drawing, hence from the same result file.
mkdocs-static-i18n (suffix structure) serves ``name.zh-TW.png`` in place of ``name.png`` on zh-TW
pages. Text with English words and no translation stops the save before anything is written,
naming what to add. Text set in a monospace font is code or data (tokens, identifiers) and is
shown as it is.
"""

from __future__ import annotations

from pathlib import Path

from inferlab.bench import labels

# Fonts with Traditional Chinese glyphs, best first (CI installs fonts-noto-cjk); DejaVu Sans,
# matplotlib's own, draws the Latin letters, digits and symbols a CJK font may lack.
CHINESE_FONTS = ["Noto Sans CJK TC", "Noto Sans CJK JP", "Noto Sans CJK SC", "DejaVu Sans"]


def language_path(path: Path, language: str) -> Path:
    """Return where a figure's version in a language goes: x.png (en) or x.zh-TW.png."""
    labels.check_language(language)
    path = Path(path)
    return path if language == "en" else path.with_name(f"{path.stem}.{language}{path.suffix}")


def is_code(text) -> bool:
    """Return True for text set in a monospace font: code or data, the same in every language."""
    return "monospace" in text.get_fontfamily()


def visible_texts(fig) -> list:
    """Return every Text artist a figure shows, tick labels and code included."""
    from matplotlib.text import Text

    fig.canvas.draw()  # tick labels exist only once the figure has been drawn
    return [text for text in fig.findobj(Text) if text.get_text().strip() and text.get_visible()]


def figure_texts(fig) -> list:
    """Return every Text artist of a figure that shows words to translate, tick labels included."""
    return [text for text in visible_texts(fig) if not is_code(text)]


def translate_tick_labels(fig, language: str) -> None:
    """Fix the word tick labels of every axis to their translation (a redraw would restore English).

    Matplotlib formats tick labels anew at every draw, so the labels are pinned: the axis keeps its
    current tick positions and shows the translated words there. Numeric axes are left alone.
    """
    from matplotlib.ticker import FixedFormatter, FixedLocator

    for axes in fig.get_axes():
        for axis in (axes.xaxis, axes.yaxis):
            ticks = axis.get_majorticklabels()
            words = [tick.get_text() for tick in ticks]
            translated = [labels.figure_text(word, language) for word in words]
            if translated == words or all(is_code(tick) for tick in ticks):
                continue
            axis.set_major_locator(FixedLocator(axis.get_majorticklocs()))
            axis.set_major_formatter(FixedFormatter(translated))


def untranslated(strings, language: str) -> list[str]:
    """Return the strings that show English words and have no translation into ``language``."""
    return sorted({text for text in strings if labels.english_words(labels.figure_text(text, language))})


# The PNG text chunk that records a figure's smallest text, in pixels of the image. The site shows
# a figure no narrower than it must be for that text to be legible on a phone (tools/reader_hooks.py).
SMALLEST_TEXT_KEY = "inferlab:smallest-text-px"


def smallest_text_px(fig, dpi: float) -> float:
    """Return the size in image pixels of the smallest font a figure shows (code included)."""
    sizes = [text.get_fontsize() for text in visible_texts(fig)] or [10.0]
    return round(min(sizes) * dpi / 72, 2)


def save_figure(fig, path: Path, **savefig_kwargs) -> list[Path]:
    """Save ``fig`` at ``path`` in English and beside it in zh-TW; return both paths.

    Raises ValueError, before writing anything, when a text in the figure has no zh-TW translation.
    Both files record their smallest text size (``SMALLEST_TEXT_KEY``) for the site's phone layout.
    """
    path = Path(path)
    texts = figure_texts(fig)  # tick labels included: figure_texts draws the figure first
    dpi = savefig_kwargs.get("dpi", "figure")
    dpi = fig.dpi if dpi == "figure" else float(dpi)
    smallest = smallest_text_px(fig, dpi)
    savefig_kwargs["metadata"] = {**savefig_kwargs.get("metadata", {}), SMALLEST_TEXT_KEY: str(smallest)}
    missing = untranslated([t.get_text() for t in texts], "zh-TW")
    if missing:
        raise ValueError(
            f"figure {path.name}: no zh-TW text for {missing}; add them to FIGURE_TEXT in inferlab/bench/labels.py"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, **savefig_kwargs)
    translate_tick_labels(fig, "zh-TW")
    for text in texts:
        text.set_text(labels.figure_text(text.get_text(), "zh-TW"))
        text.set_fontfamily(CHINESE_FONTS)
    chinese = language_path(path, "zh-TW")
    fig.savefig(chinese, **savefig_kwargs)
    return [path, chinese]
